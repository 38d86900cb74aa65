// What a repo's atlantis.yaml may do is decided server-side, as in Atlantis: custom
// workflows (shell `run` steps) and overrides need --repo-config's permission.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { repoConfigViolation } from '../src/server/workflow/checkout/projects.js';
import { parseRepoConfig } from '../src/server/workflow/repo-config/atlantis-yaml.js';
import { terraformConfig } from './support/git-repos.js';
import { type TestServer, startTestServer } from './support/server.js';
import { WEBHOOK_SECRET, type WorkflowEnv, createWorkflowEnv } from './support/workflow-env.js';

const withWorkflow = `version: 3
projects:
  - dir: custom
    workflow: echoer
workflows:
  echoer:
    plan:
      steps:
        - init
        - run: echo custom-step-ran-for-$PULL_NUM
        - plan
`;

describe('repo config permissions (pure)', () => {
  const cfg = parseRepoConfig(withWorkflow);
  const rows: Array<[string, { allowedOverrides: string[]; allowCustomWorkflows: boolean }, RegExp | undefined]> = [
    [
      // Atlantis checks the overrides of each project before the custom workflows.
      'default server settings refuse the workflow key first',
      { allowedOverrides: [], allowCustomWorkflows: false },
      /not allowed to set 'workflow' key/,
    ],
    [
      'overrides allowed, custom workflows not',
      { allowedOverrides: ['workflow'], allowCustomWorkflows: false },
      /not allowed to define custom workflows/,
    ],
    [
      'custom workflows allowed but not the workflow key',
      { allowedOverrides: [], allowCustomWorkflows: true },
      /not allowed to set 'workflow' key/,
    ],
    ['both allowed', { allowedOverrides: ['workflow'], allowCustomWorkflows: true }, undefined],
  ];
  for (const [name, settings, want] of rows) {
    it(name, () => {
      const got = repoConfigViolation(cfg, settings);
      if (want) assert.match(got ?? '', want);
      else assert.equal(got, undefined);
    });
  }
  it('apply_requirements needs allowed_overrides', () => {
    const c = parseRepoConfig('version: 3\nprojects:\n  - dir: a\n    apply_requirements: [approved]\n');
    assert.match(repoConfigViolation(c, { allowedOverrides: [], allowCustomWorkflows: false }) ?? '', /apply_requirements/);
    assert.equal(repoConfigViolation(c, { allowedOverrides: ['apply_requirements'], allowCustomWorkflows: false }), undefined);
  });
});

describe('repo config permissions (server with real terraform)', () => {
  let env: WorkflowEnv;
  const servers: TestServer[] = [];
  before(async () => {
    env = await createWorkflowEnv();
  });
  after(async () => {
    for (const s of servers) await s.server.close();
    await env.close();
  });

  async function server(extra: string[]): Promise<TestServer> {
    const ts = await startTestServer(
      ['--gh-webhook-secret', WEBHOOK_SECRET, '--gh-api-url', env.gh.url, '--gh-token', env.gh.token, '--disable-autoplan', ...extra],
      { workflow: true },
    );
    servers.push(ts);
    return ts;
  }

  it('refuses a custom workflow without server-side permission, runs it with', async () => {
    await env
      .openPull('http://127.0.0.1:9', 40, 'custom-wf', {
        'atlantis.yaml': withWorkflow,
        'custom/main.tf': terraformConfig({ marker: 'c1' }),
      })
      .catch(() => undefined);
    const denied = await server([]);
    await env.comment(denied.url, 40, 'atlantis plan -d custom');
    // Atlantis checks the project's overrides before the custom workflows.
    const err = await env.waitForComment(40, /repo config not allowed to set 'workflow' key/);
    assert.ok(err);
    assert.doesNotMatch(
      env
        .commentsOn(40)
        .map((c) => c.body)
        .join('\n'),
      /Ran Plan/,
    );

    const serverConfig = path.join(mkdtempSync(path.join(tmpdir(), 'repo-cfg-')), 'repos.yaml');
    writeFileSync(serverConfig, 'repos:\n  - id: /.*/\n    allowed_overrides: [workflow]\n    allow_custom_workflows: true\n');
    const allowed = await server(['--repo-config', serverConfig]);
    const before = env.commentsOn(40).length;
    await env.comment(allowed.url, 40, 'atlantis plan -d custom');
    const ok = await env.waitForComment(40, /^Ran Plan for dir: `custom`/, { after: before });
    assert.match(ok.body, /Plan: 1 to add/);
  });
});
