// Webhook authentication with a real Gitea v1.27.3: the deliveries Gitea itself sends through a
// hook with another secret and through a hook with none are refused (401, Atlantis's words;
// Atlantis answers 400) and run nothing: no comment, no status, no clone, no command in the
// server's log. Then the same PR through a hook with the right secret runs exactly one plan,
// so the refused ones were not merely slow.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sleep } from '../src/async.js';
import {
  ATLANTIS_HOOK_EVENTS,
  GITEA_WEBHOOK_SECRET,
  type GiteaWorld,
  giteaFlags,
  giteaServerEnv,
  startGiteaWorld,
} from './support/atlantis-gitea-scenario.js';
import { type CliProcess, startCli, waitForHttp } from './support/cli.js';
import { terraformConfig } from './support/git-repos.js';
import { type Forwarder, type PassedDelivery, startRoundRobin } from './support/gitea-proxy.js';

const NET = '127.0.242';
const serverUrl = `http://${NET}.3:4141`;
let w: GiteaWorld;
let server: CliProcess;
let wrong: Forwarder & { passed: PassedDelivery[] };
let none: Forwarder & { passed: PassedDelivery[] };
const dirs = [mkdtempSync(path.join(tmpdir(), 'ato-gitea-auth-data-')), mkdtempSync(path.join(tmpdir(), 'ato-gitea-auth-home-'))];
const [dataDir, home] = dirs as [string, string];

async function until(what: string, ok: () => boolean, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms\n${server.output().slice(-3000)}`);
    await sleep(100);
  }
}

const commandsRun = (): number => server.output().match(/"msg":"Command (finished|failed)"/g)?.length ?? 0;

before(async () => {
  w = await startGiteaWorld(`${NET}.1`, `${NET}.2`);
  server = startCli([...giteaFlags(w, dataDir, serverUrl, 4141), '--bind-address', `${NET}.3`], giteaServerEnv(home));
  await waitForHttp(`${serverUrl}/healthz`).catch((e: Error) => {
    throw new Error(`${e.message}\n${server.output()}`);
  });
  wrong = await startRoundRobin([`${serverUrl}/events`], `${NET}.8`);
  none = await startRoundRobin([`${serverUrl}/events`], `${NET}.9`);
});
after(async () => {
  server?.child.kill('SIGTERM');
  await server?.exited;
  await wrong?.close();
  await none?.close();
  await w?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe("Gitea's webhooks are authenticated by X-Gitea-Signature", () => {
  it('a wrong or missing signature is refused and runs nothing; the right one runs', { timeout: 240_000 }, async () => {
    const repo = w.repos.get('acme/infra')!;
    await w.gitea.addWebhook(repo, { url: `${wrong.url}/events`, secret: `not-${GITEA_WEBHOOK_SECRET}`, events: ATLANTIS_HOOK_EVENTS });
    await w.gitea.addWebhook(repo, { url: `${none.url}/events`, secret: '', events: ATLANTIS_HOOK_EVENTS });
    await w.gitea.push(repo, w.dev, { branch: 'auth', base: 'main', files: { 'dir1/main.tf': terraformConfig({ marker: 'auth' }) } });
    const pr = await w.gitea.openPullRequest(repo, w.dev, { head: 'auth' });
    await w.gitea.comment(repo, w.dev, pr.number, 'atlantis plan');
    for (const fw of [wrong, none])
      await until('Gitea delivered the push, the opened pull request and the comment', () =>
        ['push', 'pull_request', 'pull_request_comment'].every((t) => fw.passed.some((p) => p.eventType === t)),
      );
    for (const [name, fw] of [
      ['another secret', wrong],
      ['no secret', none],
    ] as const)
      for (const p of fw.passed)
        assert.deepEqual(
          [p.status, p.text],
          [401, 'request did not pass validation: invalid signature\n'],
          `a ${p.eventType} delivery signed with ${name}`,
        );
    assert.deepEqual(
      w.recorder.calls.map((c) => `${c.method} ${c.path}`),
      [],
      'the server asked Gitea nothing',
    );
    assert.equal(commandsRun(), 0);
    assert.equal(existsSync(path.join(dataDir, 'repos', 'acme')), false, 'nothing was cloned');

    // The right secret: the next comment runs one plan, and it is the only command run.
    const right = await w.gitea.addWebhook(repo, {
      url: `${serverUrl}/events`,
      secret: GITEA_WEBHOOK_SECRET,
      events: ATLANTIS_HOOK_EVENTS,
    });
    assert.ok(right > 0);
    await w.gitea.comment(repo, w.dev, pr.number, 'atlantis plan');
    await until('the plan ran', () => commandsRun() === 1);
    const comments = w.recorder.calls.filter((c) => c.method === 'POST' && /\/issues\/\d+\/comments$/.test(c.path));
    assert.equal(comments.length, 1);
    assert.match(String((comments[0]?.body as { body?: string } | undefined)?.body), /^Ran Plan for dir: `dir1` workspace: `default`/);
    assert.equal(commandsRun(), 1, 'only the delivery with the right signature ran a command');
  });
});
