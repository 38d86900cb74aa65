// --repo-config-json (ATLANTIS_REPO_CONFIG_JSON): the server-side repo config as a JSON string,
// honoured like --repo-config (it was ignored before): a repo's custom workflow runs only
// when the JSON allows it. Both flags at once, or bad JSON, stop the start with one line.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { UsageError } from '../src/config/flags.js';
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

let env: WorkflowEnv;
const servers: TestServer[] = [];
before(async () => {
  env = await createWorkflowEnv({ ghHost: '127.0.163.170' });
});
after(async () => {
  for (const s of servers) await s.server.close();
  await env.close();
});

const base = () => ['--gh-webhook-secret', WEBHOOK_SECRET, '--gh-api-url', env.gh.url, '--gh-token', env.gh.token, '--disable-autoplan'];

describe('--repo-config-json', () => {
  it('allows a custom workflow when the JSON says so', async () => {
    await env
      .openPull('http://127.0.0.1:9', 50, 'json-wf', { 'atlantis.yaml': withWorkflow, 'custom/main.tf': terraformConfig({ marker: 'j1' }) })
      .catch(() => undefined);
    const json = JSON.stringify({ repos: [{ id: '/.*/', allowed_overrides: ['workflow'], allow_custom_workflows: true }] });
    const ts = await startTestServer([...base(), '--repo-config-json', json], { workflow: true });
    servers.push(ts);
    await env.comment(ts.url, 50, 'atlantis plan -d custom');
    const ok = await env.waitForComment(50, /^Ran Plan for dir: `custom`/);
    assert.match(ok.body, /Plan: 1 to add/);
  });

  it('refuses both flags at once, and bad JSON, with one line', async () => {
    await assert.rejects(
      startTestServer([...base(), '--repo-config', '/dev/null', '--repo-config-json', '{}'], { workflow: true }),
      (e: unknown) => e instanceof UsageError && e.message === 'cannot use --repo-config and --repo-config-json at the same time',
    );
    await assert.rejects(
      startTestServer([...base(), '--repo-config-json', '{"repos": [}'], { workflow: true }),
      (e: unknown) => e instanceof UsageError && /^invalid --repo-config-json: /.test(e.message) && !e.message.includes('\n'),
    );
  });
});
