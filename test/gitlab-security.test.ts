// The attacker of secrets-attack.test.ts, on GitLab: someone who can open a merge request and
// comment tries to get the server's secrets out, against the real server process (its GitLab
// token and webhook secret given as environment, as the operator's pods get them), real
// terraform and git, and the GitLab stand-in: a .tf reading /proc/self/environ into outputs, a
// local-exec and run steps printing the environment (plain and base64) and their ancestors'
// environ, and `atlantis plan -d attack -- -var-file=/proc/self/environ` (refused: a path
// outside the checkout). Then every note, note edit, commit status and request body sent to
// GitLab, the server log, job logs and pages, /status and the data dir are searched for the
// token and the webhook secret (verbatim, URL-encoded, base64); the children's environment has
// no ATLANTIS_* variable and no secret. Loopback: 127.0.41.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sleep } from '../src/async.js';
import { type CliProcess, startCli, waitForHttp } from './support/cli.js';
import { type TestRepo, createTestRepo } from './support/git-repos.js';
import { GitLabStandin } from './support/gitlab-standin.js';
import { gitlabServerArgs, gitlabServerEnv } from './support/gitlab-our-server.js';
import { mergeRequestHook, noteHook, sendGitlabWebhook } from './support/gitlab-standin-webhooks.js';
import { assertCleanChildEnv, dataDirPlaces, findLeaks, prepareAttack, serverPages } from './support/secrets-attack.js';
import { tempDataDir } from './support/workflow-env.js';

const host = '127.0.41.2';
const url = `http://${host}:4141`;
const dataDir = tempDataDir();
const attack = prepareAttack('ato-glattack-');
const WEBHOOK_SECRET = 'gitlab-attack-webhook-secret';

let gl: GitLabStandin;
let repo: TestRepo;
let server: CliProcess;

const botNotes = (): string[] => {
  const mr = gl.mergeRequest('acme/infra', 1);
  return gl
    .notesOf(mr.projectId, mr.iid)
    .filter((n) => n.authorId === gl.bot.id)
    .map((n) => n.body);
};

/** Waits (bounded) for the bot's note number `index` (0-based) to match `re`. */
async function waitForNote(index: number, re: RegExp): Promise<string> {
  const end = Date.now() + 120_000;
  while (Date.now() < end) {
    const n = botNotes()[index];
    if (n !== undefined) {
      assert.match(n, re);
      return n;
    }
    await sleep(200);
  }
  throw new Error(`no note ${index} after 120 s; notes: ${botNotes().join('\n---\n')}\n${server.output()}`);
}

async function send(event: 'Merge Request Hook' | 'Note Hook', payload: unknown): Promise<void> {
  const r = await sendGitlabWebhook(`${url}/events`, event, payload, { token: WEBHOOK_SECRET, instance: gl.url });
  assert.equal(r.status, 200, r.body);
}

before(async () => {
  gl = await GitLabStandin.start({ host: '127.0.41.1', tls: true });
  repo = await createTestRepo({ fullName: 'acme/infra', files: { 'README.md': 'infra\n' } });
  gl.addProject('acme/infra', { bareDir: repo.bareDir });
  server = startCli(
    gitlabServerArgs(gl, { dataDir, host, extra: ['--log-level', 'debug', '--repo-config', attack.repoConfig] }),
    gitlabServerEnv(gl, WEBHOOK_SECRET, { AWS_REGION: 'eu-attack-1', TF_VAR_probe: 'probe-from-server-env' }),
  );
  await waitForHttp(`${url}/healthz`).catch((e: Error) => {
    throw new Error(`${e.message}\n${server.output()}`);
  });
});
after(async () => {
  server.child.kill('SIGKILL');
  await gl.close();
  rmSync(path.resolve(repo.bareDir, '..', '..', '..'), { recursive: true, force: true });
  attack.cleanup();
});

describe('an attacker cannot get the secrets out through GitLab', () => {
  it('through terraform, local-exec, run steps and extra args; children get a clean environment', { timeout: 300_000 }, async () => {
    const token = gl.token;
    await repo.createBranch('attack', attack.files);
    const mr = gl.openMergeRequest('acme/infra', { sourceBranch: 'attack', author: 'mallory' });
    await send('Merge Request Hook', mergeRequestHook(gl, mr, { action: 'open' }));
    await waitForNote(0, /^Ran Plan/);
    await send('Note Hook', noteHook(gl, gl.addNote(mr, 'atlantis apply', 'mallory')));
    await waitForNote(1, /^Ran Apply/);
    await send('Note Hook', noteHook(gl, gl.addNote(mr, 'atlantis plan -d attack -- -var-file=/proc/self/environ', 'mallory')));
    const refused = await waitForNote(2, /\S/);
    assert.doesNotMatch(refused, /^Ran Plan/, 'the -var-file outside the checkout is refused, terraform not run');
    assert.match(refused, /var-file/);

    const allNotes = botNotes().join('\n');
    assert.match(allNotes, /probe-from-server-env/, 'TF_VAR_probe from the server env reached terraform');
    const secrets = [
      ['the GitLab token', token],
      ['the webhook secret', WEBHOOK_SECRET],
    ] as const;
    assertCleanChildEnv(attack, secrets);

    const pages = await serverPages(url, dataDir);
    server.child.kill('SIGTERM');
    assert.equal((await server.exited).code, 0);
    const log = server.output();
    assert.match(log, /Environment variables withheld from child processes.*ATLANTIS_GITLAB_TOKEN/, 'the server says what it withheld');
    const places: Array<[string, string]> = [
      ['server log', log],
      ...pages,
      ...gl.calls.map((c, i): [string, string] => [
        `request ${i} to GitLab: ${c.method} ${c.path}`,
        JSON.stringify({ path: c.path, query: c.query, body: c.body }),
      ]),
      ...[...gl.notes.values()].map((n, i): [string, string] => [`note ${i}`, n.body]),
      ...gl.jobs.map((j, i): [string, string] => [`commit status ${i}`, JSON.stringify(j)]),
      ...dataDirPlaces(dataDir),
    ];
    assert.match(allNotes, /ATLANTIS_GITLAB_TOKEN=\[REDACTED\]/, "the server's own environ, printed by the attacker, was scrubbed");
    const leaks = findLeaks(places, secrets);
    assert.deepEqual(leaks, []);
  });
});
