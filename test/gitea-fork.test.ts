// A pull request from a fork on a real Gitea v1.27.3, as Atlantis v0.47 treats one: by default
// it is neither autoplanned nor commanded (Atlantis's reply, no status, nothing cloned); with
// --allow-fork-prs it is planned and applied from the fork's repository (the branch exists only
// there).
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sleep } from '../src/async.js';
import { FORK_PR_COMMENT } from '../src/server/workflow/pr/messages.js';
import { type GiteaWorld, giteaFlags, giteaServerEnv, hookServer, startGiteaWorld } from './support/atlantis-gitea-scenario.js';
import { type CliProcess, startCli, waitForHttp } from './support/cli.js';
import { terraformConfig } from './support/git-repos.js';
import type { GiteaUser } from './support/gitea.js';

const NET = '127.0.243';
const serverUrl = `http://${NET}.3:4141`;
let w: GiteaWorld;
let forker: GiteaUser;
const servers: CliProcess[] = [];
const dirs: string[] = [];

function temp(prefix: string): string {
  const d = mkdtempSync(path.join(tmpdir(), prefix));
  dirs.push(d);
  return d;
}

async function startServer(dataDir: string, extra: string[]): Promise<CliProcess> {
  const s = startCli(
    [...giteaFlags(w, dataDir, serverUrl, 4141), '--bind-address', `${NET}.3`, ...extra],
    giteaServerEnv(temp('ato-gitea-fork-home-')),
  );
  servers.push(s);
  await waitForHttp(`${serverUrl}/healthz`).catch((e: Error) => {
    throw new Error(`${e.message}\n${s.output()}`);
  });
  return s;
}

async function stop(s: CliProcess): Promise<void> {
  s.child.kill('SIGTERM');
  await s.exited;
}

/** The comments the bot posted on the pull request, as Gitea shows them. */
async function botComments(number: number): Promise<string[]> {
  const r = await w.gitea.api<Array<{ user: { login: string }; body: string }>>('GET', `/repos/acme/infra/issues/${number}/comments`);
  return r.body.filter((c) => c.user.login === w.bot.name).map((c) => c.body);
}

async function waitForComments(number: number, n: number, s: CliProcess): Promise<string[]> {
  const end = Date.now() + 120_000;
  for (;;) {
    const got = await botComments(number);
    if (got.length >= n) return got;
    if (Date.now() > end) throw new Error(`${n} comments on #${number} not within 120 s (${got.length})\n${s.output().slice(-3000)}`);
    await sleep(200);
  }
}

before(async () => {
  w = await startGiteaWorld(`${NET}.1`, `${NET}.2`);
  forker = await w.gitea.createUser('forker');
  await hookServer(w, `${serverUrl}/events`);
});
after(async () => {
  for (const s of servers) if (s.child.exitCode === null && s.child.signalCode === null) await stop(s);
  await w?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('a pull request from a fork, on a real Gitea', () => {
  it("refused by default with Atlantis's reply; planned and applied from the fork with --allow-fork-prs", {
    timeout: 300_000,
  }, async () => {
    const base = w.repos.get('acme/infra')!;
    const fork = await w.gitea.fork(base, forker);
    await w.gitea.push(fork, forker, {
      branch: 'from-fork',
      base: 'main',
      files: { 'dir1/main.tf': terraformConfig({ marker: 'fork-1' }) },
    });

    const dataDir = temp('ato-gitea-fork-data-');
    const refusing = await startServer(dataDir, []);
    const pr = await w.gitea.openPullRequest(base, forker, { head: `${forker.name}:from-fork` });
    assert.deepEqual(await waitForComments(pr.number, 1, refusing), [FORK_PR_COMMENT]);
    await w.gitea.comment(base, forker, pr.number, 'atlantis plan');
    assert.deepEqual(await waitForComments(pr.number, 2, refusing), [FORK_PR_COMMENT, FORK_PR_COMMENT]);
    const writes = w.recorder.calls.filter((c) => c.method !== 'GET').map((c) => `${c.method} ${c.path}`);
    assert.deepEqual(writes, [
      `POST /repos/acme/infra/issues/${pr.number}/comments`,
      `POST /repos/acme/infra/issues/${pr.number}/comments`,
    ]);
    assert.equal(existsSync(path.join(dataDir, 'repos', 'acme')), false, 'nothing was cloned');
    await stop(refusing);

    const allowing = await startServer(temp('ato-gitea-fork-data-'), ['--allow-fork-prs']);
    await w.gitea.comment(base, forker, pr.number, 'atlantis plan');
    const planned = await waitForComments(pr.number, 3, allowing);
    assert.match(planned[2]!, /^Ran Plan for dir: `dir1` workspace: `default`/);
    assert.match(planned[2]!, /\+ input {2}= "fork-1"/, "the fork's change was planned");
    await w.gitea.comment(base, forker, pr.number, 'atlantis apply');
    const applied = await waitForComments(pr.number, 4, allowing);
    assert.match(applied[3]!, /^Ran Apply for dir: `dir1` workspace: `default`/);
    assert.match(applied[3]!, /applied fork-1/);
    // The combined apply status comes after the comment (as Atlantis sets it): wait for it to settle.
    const statusesNow = async () =>
      (
        await w.gitea.api<{ statuses: Array<{ context: string; status: string }> }>('GET', `/repos/acme/infra/commits/${pr.headSha}/status`)
      ).body.statuses.map((s) => [s.context, s.status]);
    const end = Date.now() + 60_000;
    let statuses = await statusesNow();
    while (statuses.some(([c, s]) => c === 'atlantis/apply' && s === 'pending') && Date.now() < end) {
      await sleep(200);
      statuses = await statusesNow();
    }
    assert.deepEqual(statuses.sort(), [
      ['atlantis/apply', 'success'],
      ['atlantis/apply: dir1/default', 'success'],
      ['atlantis/plan', 'success'],
      ['atlantis/plan: dir1/default', 'success'],
      ['atlantis/policy_check', 'success'],
    ]);
  });
});
