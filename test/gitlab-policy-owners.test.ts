// Policy-set owners as GitLab groups, through the real server process, real terraform, git and
// conftest, and the GitLab stand-in. As Atlantis v0.47 (its GitLab client's groups are the
// group allowlist's and every policy set's owner teams, sorted, each once): a plan whose policy
// check fails is approved by a direct member of the owners' group `acme/policy-owners`, and not
// by a user outside it, nor by a member of its parent group `acme` only; the apply then runs.
// GitLab is asked `GET /users?username=` and `GET /groups/<path>/members/<id>` for every
// configured group, for the group allowlist and, for each of the two projects, for the policy
// owners. Loopback: 127.0.37.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sleep } from '../src/async.js';
import { NO_FORBIDDEN_REGO } from './support/atlantis-policy-scenario.js';
import { type CliProcess, startCli, waitForHttp } from './support/cli.js';
import { type TestRepo, createTestRepo, terraformConfig } from './support/git-repos.js';
import { gitlabServerArgs, gitlabServerEnv } from './support/gitlab-our-server.js';
import { GitLabStandin } from './support/gitlab-standin.js';
import type { GlMergeRequest } from './support/gitlab-standin-model.js';
import { mergeRequestHook, noteHook, sendGitlabWebhook } from './support/gitlab-standin-webhooks.js';
import { goTool } from './support/go-tools.js';
import { tempDataDir } from './support/workflow-env.js';

const host = '127.0.37.2';
const url = `http://${host}:4141`;
const WEBHOOK_SECRET = 'gitlab-policy-owners-secret';
const OWNERS = 'acme/policy-owners';
const DEVS = 'acme/devs';
const root = mkdtempSync(path.join(tmpdir(), 'ato-gl-policy-owners-'));
const dataDir = tempDataDir();

let gl: GitLabStandin;
let repo: TestRepo;
let server: CliProcess;
let mr: GlMergeRequest;

const botNotes = (): string[] =>
  gl
    .notesOf(mr.projectId, mr.iid)
    .filter((n) => n.authorId === gl.bot.id)
    .map((n) => n.body);

/** Waits (bounded) for the bot's note number `index` (0-based). */
async function note(index: number): Promise<string> {
  const end = Date.now() + 180_000;
  while (Date.now() < end) {
    const n = botNotes()[index];
    if (n !== undefined) return n;
    await sleep(200);
  }
  throw new Error(`no note ${index} after 180 s; notes:\n${botNotes().join('\n---\n')}\n${server.output()}`);
}

async function send(event: 'Merge Request Hook' | 'Note Hook', payload: unknown): Promise<void> {
  const r = await sendGitlabWebhook(`${url}/events`, event, payload, { token: WEBHOOK_SECRET, instance: gl.url });
  assert.equal(r.status, 200, r.body);
}

/** The membership questions asked since call `from`: [group path as sent, user id, status]. */
function groupQuestions(from: number): Array<[string, string, number]> {
  return gl.calls.slice(from).flatMap((c): Array<[string, string, number]> => {
    const m = /\/api\/v4\/groups\/([^/]+)\/members\/(\d+)$/.exec(c.path);
    return m ? [[m[1] as string, m[2] as string, c.status]] : [];
  });
}

/** `user` comments `text`; the bot's next note, with the GitLab calls the command made. */
async function comment(user: string, text: string): Promise<{ body: string; from: number }> {
  const index = botNotes().length;
  const from = gl.calls.length;
  await send('Note Hook', noteHook(gl, gl.addNote(mr, text, user)));
  const body = await note(index);
  // The command's last status follows its note.
  await sleep(500);
  return { body, from };
}

before(async () => {
  gl = await GitLabStandin.start({ host: '127.0.37.1', tls: true });
  for (const u of ['alice', 'olga', 'peter', 'oscar']) gl.addUser(u);
  gl.addGroup('acme', [{ username: 'peter' }]);
  gl.addGroup(DEVS, [{ username: 'alice' }, { username: 'olga' }, { username: 'peter' }, { username: 'oscar' }]);
  gl.addGroup(OWNERS, [{ username: 'olga' }]);
  repo = await createTestRepo({ fullName: 'acme/infra', files: { 'README.md': 'infra\n' } });
  gl.addProject('acme/infra', { bareDir: repo.bareDir });

  mkdirSync(path.join(root, 'policies', 'no-forbidden'), { recursive: true });
  writeFileSync(path.join(root, 'policies', 'no-forbidden', 'policy.rego'), NO_FORBIDDEN_REGO);
  const reposYaml = path.join(root, 'repos.yaml');
  writeFileSync(
    reposYaml,
    `repos:\n  - id: /.*/\npolicies:\n  policy_sets:\n    - name: no-forbidden\n      path: ${root}/policies/no-forbidden\n      source: local\n      owners:\n        teams:\n          - ${OWNERS}\n`,
  );
  const bin = path.join(root, 'bin');
  mkdirSync(bin);
  symlinkSync(await goTool('conftest'), path.join(bin, 'conftest'));

  server = startCli(
    gitlabServerArgs(gl, {
      dataDir,
      host,
      extra: [
        // Every command is asked of the allowlist's group; its check asks the owners' group too.
        '--gitlab-group-allowlist',
        `${DEVS}:plan,${DEVS}:apply,${DEVS}:approve_policies`,
        '--enable-policy-checks',
        '--repo-config',
        reposYaml,
      ],
    }),
    gitlabServerEnv(gl, WEBHOOK_SECRET, { PATH: `${bin}:${process.env.PATH ?? ''}` }),
  );
  await waitForHttp(`${url}/healthz`).catch((e: Error) => {
    throw new Error(`${e.message}\n${server.output()}`);
  });
});
after(async () => {
  server?.child.kill('SIGKILL');
  await gl?.close();
  if (repo) rmSync(path.resolve(repo.bareDir, '..', '..', '..'), { recursive: true, force: true });
  rmSync(root, { recursive: true, force: true });
  rmSync(dataDir, { recursive: true, force: true });
});

describe('policy-set owners named as GitLab groups', () => {
  it('a direct member of the owners group approves; others do not; membership asked for every configured group', {
    timeout: 600_000,
  }, async () => {
    const id = (name: string): string => String(gl.userByName(name)?.id);
    const forbidden = terraformConfig({ marker: 'forbidden' });
    await repo.createBranch('forbidden', { 'dir1/main.tf': forbidden, 'dir2/main.tf': forbidden });
    mr = gl.openMergeRequest('acme/infra', { sourceBranch: 'forbidden', author: 'alice' });
    await send('Merge Request Hook', mergeRequestHook(gl, mr, { action: 'open' }));
    assert.match(await note(0), /^Ran Plan/);
    assert.match(await note(1), /^Ran Policy Check[\s\S]*the value \\?"forbidden\\?" is not allowed/);

    const refused = await comment('oscar', 'atlantis apply');
    assert.match(refused.body, /\*\*Apply Failed\*\*: All policies must pass for project before running apply\./);

    // Outside the owners' group: asked about both groups for the allowlist, then again for
    // ownership, once per project (as Atlantis).
    const outsider = await comment('oscar', 'atlantis approve_policies');
    assert.equal(outsider.body.match(/policy set: no-forbidden user oscar is not a policy owner/g)?.length, 2, outsider.body);
    const round: Array<[string, string, number]> = [
      ['acme%2Fdevs', id('oscar'), 200],
      ['acme%2Fpolicy-owners', id('oscar'), 404],
    ];
    assert.deepEqual(groupQuestions(outsider.from), [...round, ...round, ...round]);
    const users = gl.calls.slice(outsider.from).filter((c) => c.path.endsWith('/api/v4/users'));
    assert.deepEqual(
      users.map((c) => c.query),
      [{ username: 'oscar' }, { username: 'oscar' }, { username: 'oscar' }],
    );

    // A member of the parent group only is no member (GitLab's direct membership, as Atlantis asks it).
    const parent = await comment('peter', 'atlantis approve_policies');
    assert.match(parent.body, /policy set: no-forbidden user peter is not a policy owner/);
    assert.ok(!groupQuestions(parent.from).some(([g]) => g === 'acme'), 'the parent group is not asked');

    const owner = await comment('olga', 'atlantis approve_policies');
    assert.match(owner.body, /^Approved Policies for 2 projects:/);
    assert.doesNotMatch(owner.body, /not a policy owner/);
    assert.deepEqual(
      groupQuestions(owner.from).filter(([g]) => g === 'acme%2Fpolicy-owners'),
      [
        ['acme%2Fpolicy-owners', id('olga'), 200],
        ['acme%2Fpolicy-owners', id('olga'), 200],
        ['acme%2Fpolicy-owners', id('olga'), 200],
      ],
    );

    const applied = await comment('oscar', 'atlantis apply');
    assert.match(applied.body, /^Ran Apply for 2 projects:[\s\S]*applied forbidden[\s\S]*applied forbidden/);
  });
});
