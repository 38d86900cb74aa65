// The security table through a real Gitea v1.27.3 (as test/secrets-attack.test.ts does it
// through the GitHub stand-in): a developer's pull request tries to get the server's Gitea
// token and webhook secret out, through terraform (file("/proc/self/environ") as outputs),
// a local-exec printing its and its ancestors' environ plain and base64, run steps, and extra
// args (`-- -var-file=/proc/self/environ`, refused). The secrets are given as environment
// (ATLANTIS_GITEA_TOKEN, ATLANTIS_GITEA_WEBHOOK_SECRET), as the operator's pods get them. Then
// everything the server wrote is searched for them, verbatim, URL-encoded and base64: what
// Gitea shows (comments, commit statuses), every request the server sent to Gitea (path, query,
// body), the server log, job logs and pages, the web page, /status, the data dir; and the
// children's environment, dumped by the attacker's code outside the data dir, holds neither
// secret nor any ATLANTIS_* variable.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sleep } from '../src/async.js';
import {
  GITEA_WEBHOOK_SECRET,
  type GiteaWorld,
  giteaFlags,
  giteaServerEnv,
  hookServer,
  startGiteaWorld,
} from './support/atlantis-gitea-scenario.js';
import { type CliProcess, startCli, waitForHttp } from './support/cli.js';
import { assertCleanChildEnv, dataDirPlaces, findLeaks, prepareAttack, serverPages } from './support/secrets-attack.js';

const NET = '127.0.244';
const serverUrl = `http://${NET}.3:4141`;
const attack = prepareAttack('ato-gitea-attack-', { echoEnvironB64: false });
const dataDir = mkdtempSync(path.join(tmpdir(), 'ato-gitea-attack-data-'));
const home = mkdtempSync(path.join(tmpdir(), 'ato-gitea-attack-home-'));

let w: GiteaWorld;
let server: CliProcess;

async function comments(number: number): Promise<Array<{ user: string; body: string }>> {
  const r = await w.gitea.api<Array<{ user: { login: string }; body: string }>>('GET', `/repos/acme/infra/issues/${number}/comments`);
  return r.body.map((c) => ({ user: c.user.login, body: c.body }));
}

async function waitForBotComment(number: number, n: number): Promise<string> {
  const end = Date.now() + 150_000;
  for (;;) {
    const got = (await comments(number)).filter((c) => c.user === w.bot.name);
    if (got.length >= n) return got[n - 1]!.body;
    if (Date.now() > end) throw new Error(`comment ${n} on #${number} not within 150 s\n${server.output().slice(-3000)}`);
    await sleep(200);
  }
}

before(async () => {
  w = await startGiteaWorld(`${NET}.1`, `${NET}.2`);
  const flags = giteaFlags(w, dataDir, serverUrl, 4141);
  // The secrets come as environment, not flags.
  const secretFlags = ['--gitea-token', '--gitea-webhook-secret'];
  const withoutSecrets = flags.filter((a, i) => !secretFlags.includes(a) && !secretFlags.includes(flags[i - 1] ?? ''));
  server = startCli([...withoutSecrets, '--bind-address', `${NET}.3`, '--log-level', 'debug', '--repo-config', attack.repoConfig], {
    ...giteaServerEnv(home),
    ATLANTIS_GITEA_TOKEN: w.bot.token,
    ATLANTIS_GITEA_WEBHOOK_SECRET: GITEA_WEBHOOK_SECRET,
    AWS_REGION: 'eu-attack-1',
    TF_VAR_probe: 'probe-from-server-env',
  });
  await waitForHttp(`${serverUrl}/healthz`).catch((e: Error) => {
    throw new Error(`${e.message}\n${server.output()}`);
  });
  await hookServer(w, `${serverUrl}/events`);
});
after(async () => {
  if (server?.child.exitCode === null) server.child.kill('SIGKILL');
  await w?.close();
  for (const d of [dataDir, home]) rmSync(d, { recursive: true, force: true });
  attack.cleanup();
});

describe('an attacker on Gitea cannot get the secrets out', () => {
  it('through terraform, local-exec, run steps and extra args; children get a clean environment', { timeout: 300_000 }, async () => {
    const token = w.bot.token;
    const repo = w.repos.get('acme/infra')!;
    await w.gitea.push(repo, w.dev, {
      branch: 'attack',
      base: 'main',
      files: attack.files,
    });
    const pr = await w.gitea.openPullRequest(repo, w.dev, { head: 'attack' });
    assert.match(await waitForBotComment(pr.number, 1), /^Ran Plan/);
    await w.gitea.comment(repo, w.dev, pr.number, 'atlantis apply');
    assert.match(await waitForBotComment(pr.number, 2), /^Ran Apply/);
    await w.gitea.comment(repo, w.dev, pr.number, 'atlantis plan -d attack -- -var-file=/proc/self/environ');
    const refused = await waitForBotComment(pr.number, 3);
    assert.match(refused, /^```\nError: .*-var-file.*\/proc\/self\/environ/s, 'the extra arg is refused with a usage error');

    const all = await comments(pr.number);
    const allText = all.map((c) => c.body).join('\n');
    assert.match(allText, /probe-from-server-env/, 'TF_VAR_probe from the server env reached terraform');
    const secrets = [
      ['the Gitea token', token],
      ['the webhook secret', GITEA_WEBHOOK_SECRET],
    ] as const;
    assertCleanChildEnv(attack, secrets);
    // The server's own environ, printed by the local-exec, reached the PR scrubbed.
    assert.match(allText, /ATLANTIS_GITEA_TOKEN=\[REDACTED\]/);

    const statuses = await w.gitea.api('GET', `/repos/acme/infra/commits/${pr.headSha}/statuses?limit=50`);
    const pages = await serverPages(serverUrl, dataDir);
    server.child.kill('SIGTERM');
    assert.equal((await server.exited).code, 0);
    const log = server.output();
    assert.match(log, /Environment variables withheld from child processes.*ATLANTIS_GITEA_TOKEN/);

    const places: Array<[string, string]> = [
      ['server log', log],
      ...pages,
      ...all.map((c, i): [string, string] => [`PR comment ${i}`, c.body]),
      ['commit statuses', statuses.text],
      ...w.recorder.calls.map((c, i): [string, string] => [
        `request ${i} to Gitea: ${c.method} ${c.path}`,
        JSON.stringify({ path: c.path, query: c.query, body: c.body }),
      ]),
      ...dataDirPlaces(dataDir),
    ];
    const leaks = findLeaks(places, secrets);
    assert.deepEqual(leaks, []);
  });
});
