// An attacker who can open a PR and comment tries to get the server's secrets out, against
// the real server process (secrets given as environment, as the operator's pods do), real
// terraform and git, and the GitHub stand-in:
// - a .tf that reads file("/proc/self/environ") and shows it (and its base64) as outputs;
// - a local-exec that prints `env`, `env | base64 -w0`, and the environ of its ancestors
//   (terraform, the process host's worker, the server itself) plain and base64-wrapped: the
//   server's own environ still holds the secrets it was started with, and this suite runs as
//   root, which reads a non-dumpable process's environ anyway (secrets-env-protection.test.ts
//   shows the read refused to another user), so this part is caught by the redactor alone;
// - run steps (the server-side repo config allows custom workflows) doing the same;
// - a comment `atlantis plan -d attack -- -var-file=/proc/self/environ`.
// Then everything the server wrote is searched for the token and the webhook secret, verbatim,
// URL-encoded and base64 (any alignment, either alphabet): PR comments, commit statuses, every
// request body sent to GitHub, the server log, job logs on disk, the web page and job pages,
// /status, the data dir with the working copies. And the children's environment, written by
// the attacker's own code to a file outside the data dir, has no ATLANTIS_* variable and no
// secret, but does have what the server was started with for terraform (AWS_REGION, TF_VAR_*).
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type CliProcess, startCli, waitForHttp } from './support/cli.js';
import { assertCleanChildEnv, dataDirPlaces, findLeaks, prepareAttack, serverPages } from './support/secrets-attack.js';
import { WEBHOOK_SECRET, type WorkflowEnv, createWorkflowEnv, tempDataDir } from './support/workflow-env.js';

const host = '127.0.161.16';
const url = `http://${host}:4141`;
const dataDir = tempDataDir();
const attack = prepareAttack('ato-attack-');
const PR = 66;

let env: WorkflowEnv;
let server: CliProcess;

before(async () => {
  env = await createWorkflowEnv();
  // The secrets come as environment, not flags, as the operator's pods get them.
  const args = env.serverArgs(dataDir, host, ['--log-level', 'debug', '--repo-config', attack.repoConfig]);
  const withoutSecretFlags = args.filter(
    (a, i) => !['--gh-token', '--gh-webhook-secret'].includes(a) && !['--gh-token', '--gh-webhook-secret'].includes(args[i - 1] ?? ''),
  );
  server = startCli(withoutSecretFlags, {
    ATLANTIS_GH_TOKEN: env.gh.token,
    ATLANTIS_GH_WEBHOOK_SECRET: WEBHOOK_SECRET,
    GITHUB_TOKEN: env.gh.token,
    AWS_REGION: 'eu-attack-1',
    TF_VAR_probe: 'probe-from-server-env',
  });
  await waitForHttp(`${url}/healthz`).catch((e: Error) => {
    throw new Error(`${e.message}\n${server.output()}`);
  });
});
after(async () => {
  server.child.kill('SIGKILL');
  await env.close();
  attack.cleanup();
});

describe('an attacker cannot get the secrets out', () => {
  it('through terraform, local-exec, run steps and extra args; children get a clean environment', { timeout: 180_000 }, async () => {
    const token = env.gh.token;
    const { status } = await env.openPull(url, PR, 'attack', attack.files);
    assert.equal(status, 200);
    await env.waitForComment(PR, /^Ran Plan/, { timeoutMs: 90_000 });
    const afterPlan = env.commentsOn(PR).length;
    await env.comment(url, PR, 'atlantis apply');
    await env.waitForComment(PR, /^Ran Apply/, { after: afterPlan, timeoutMs: 90_000 });
    const afterApply = env.commentsOn(PR).length;
    await env.comment(url, PR, 'atlantis plan -d attack -- -var-file=/proc/self/environ');
    // Answered with terraform's output, or refused if -var-file outside the project is blocked:
    // either way nothing secret may be in the answer.
    await env.waitForComment(PR, /\S/, { after: afterApply, timeoutMs: 90_000 });

    // The attack ran: its output reached the PR (scrubbed) and its dumps were written.
    const allComments = env
      .commentsOn(PR)
      .map((c) => c.body)
      .join('\n');
    assert.match(allComments, /probe-from-server-env/, 'TF_VAR_probe from the server env reached terraform');
    const secrets = [
      ['the GitHub token', token],
      ['the webhook secret', WEBHOOK_SECRET],
    ] as const;
    assertCleanChildEnv(attack, secrets);
    for (const dump of attack.dumps) {
      const text = readFileSync(dump, 'utf8');
      const names = text.split('\n').map((l) => l.split('=')[0]!);
      assert.ok(text.includes('TF_VAR_probe=probe-from-server-env'), `${dump}: TF_VAR_* reaches the children`);
      assert.ok(names.includes('PATH') && names.includes('HOME'), `${dump}: PATH and HOME reach the children`);
      for (const line of text.split('\n').filter((l) => l.startsWith('ATLANTIS_TERRAFORM_VERSION=')))
        assert.match(line, /^ATLANTIS_TERRAFORM_VERSION=\d+\.\d+\.\d+\S*$/, `${dump}: a version only`);
      assert.ok(!names.includes('GITHUB_TOKEN'), `${dump}: GITHUB_TOKEN (holding the token) is withheld`);
    }

    const jobIds = readdirSync(path.join(dataDir, 'jobs'))
      .filter((f) => f.endsWith('.log'))
      .map((f) => f.slice(0, -4));
    const jobLogs = jobIds.map((id) => readFileSync(path.join(dataDir, 'jobs', `${id}.log`), 'utf8')).join('\n');
    assert.match(jobLogs, /stolen=\S{20}/, 'the run steps ran (their output is in the job logs)');
    // plan and apply; the -var-file comment is refused before a job starts (a path outside the checkout)
    const pages = await serverPages(url, dataDir);
    server.child.kill('SIGTERM');
    assert.equal((await server.exited).code, 0);
    const log = server.output();
    assert.match(
      log,
      /Environment variables withheld from child processes.*ATLANTIS_GH_TOKEN.*GITHUB_TOKEN/,
      'the server says which variables it withheld',
    );

    const places: Array<[string, string]> = [
      ['server log', log],
      ...pages,
      ...env.commentsOn(PR).map((c, i): [string, string] => [`PR comment ${i}`, c.body]),
      ...env.gh.statuses.map((s, i): [string, string] => [`commit status ${i}`, JSON.stringify(s)]),
      ...env.gh.calls.map((c, i): [string, string] => [
        `request ${i} to GitHub: ${c.method} ${c.path}`,
        JSON.stringify({ path: c.path, query: c.query, body: c.body }),
      ]),
      ...dataDirPlaces(dataDir),
    ];
    assert.ok(
      places.some(([w]) => w.includes(`${path.sep}jobs${path.sep}`)),
      'job logs on disk are searched',
    );
    // The server's own /proc/<pid>/environ still holds what it was started with: what the
    // local-exec printed of it reached the PR scrubbed.
    assert.match(allComments, /ATLANTIS_GH_TOKEN=\[REDACTED\]/, "the server's own environ, printed by the attacker, was scrubbed");
    const leaks = findLeaks(places, secrets);
    assert.deepEqual(leaks, []);
  });
});
