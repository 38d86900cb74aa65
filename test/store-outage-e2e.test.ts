// Redis unreachable: a comment webhook whose journal write fails is answered 503 with a
// one-line body, and nothing is half done (no comment, no reaction, no operation left
// running); a close is answered 503 too; /readyz is 503 and /metrics shows atlantis_store_up
// 0 and the refusal. Redis back (restarted, its AOF brings the data back): the same server
// process, never restarted, answers the next comment with 200 and a plan; /readyz 200,
// atlantis_store_up 1; the close sent again releases the plan's lock.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { childList } from './support/children.js';
import { terraformConfig } from './support/git-repos.js';
import { type RedisServer, startRedisServer, replicaArgs } from './support/redis-server.js';
import { waitFor } from './support/server.js';
import { type WorkflowEnv, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';

let env: WorkflowEnv;
let redis: RedisServer;
const procs = childList();
const dirs: string[] = [];

before(async () => {
  env = await createWorkflowEnv();
  redis = await startRedisServer();
});
after(async () => {
  procs.killAll();
  await env.close();
  await redis.cleanup();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const readyz = async (url: string): Promise<number> => (await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(5000) })).status;

/** One sample of /metrics, `name{labels}` exactly as written there; undefined when absent. */
async function metric(url: string, series: string): Promise<number | undefined> {
  const text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('Redis unreachable, then back', () => {
  it('503 with the reason while it is down, nothing done; by itself back to 200 and a plan', { timeout: 240_000 }, async () => {
    const dataDir = tempDataDir();
    dirs.push(dataDir);
    // 127.18.71.x: this file's own loopback address.
    const { p, url } = await startWorkflowServer(env, dataDir, '127.18.71.1', [
      '--disable-autoplan',
      '--emoji-reaction',
      'eyes',
      ...replicaArgs(redis, 'outage-0'),
    ]);
    procs.push(p);
    const pull = 91;
    const dir = 'outage';
    assert.equal((await env.openPull(url, pull, 'store-outage', { [`${dir}/main.tf`]: terraformConfig({ marker: dir }) })).status, 200);
    assert.equal(await readyz(url), 200);
    assert.equal(await metric(url, 'atlantis_store_up'), 1);

    await redis.kill();
    const refused = await env.comment(url, pull, 'atlantis plan');
    assert.equal(refused.status, 503);
    assert.equal(refused.body, 'The state store cannot be reached: the command was not accepted, try again later\n');
    assert.equal(await readyz(url), 503);
    assert.equal(await metric(url, 'atlantis_store_up'), 0);
    assert.equal(await metric(url, 'atlantis_commands_refused_total{reason="store_unavailable"}'), 1);
    assert.equal(await metric(url, 'atlantis_operations_in_progress'), 0, 'the refused command left no operation running');
    const warn = p
      .output()
      .split('\n')
      .filter((l) => l.includes('"msg":"Command refused: the state store cannot be reached"'))
      .map((l) => JSON.parse(l) as { level: string; pull: number; command: string; error: string });
    assert.equal(warn.length, 1, 'one log line for the refusal');
    assert.equal(warn[0]?.level, 'warn');
    assert.equal(warn[0]?.pull, pull);
    assert.equal(warn[0]?.command, 'atlantis plan');
    assert.ok((warn[0]?.error ?? '').length > 0, 'the log line has the error');
    assert.deepEqual(env.commentsOn(pull), [], 'no comment on the PR');
    assert.deepEqual(env.gh.callsTo('POST', /\/reactions$/), [], 'no reaction either');
    const status = (await (await fetch(`${url}/status`)).json()) as { in_progress_operations: number };
    assert.equal(status.in_progress_operations, 0, '/status lists no operation');
    // A close cannot release anything either: 503 with the reason, so that it is sent again.
    const closeRefused = await env.closePull(url, pull);
    assert.equal(closeRefused.status, 503);
    assert.equal(closeRefused.body, "The state store cannot be reached: the pull request's locks were not released, try again later\n");
    env.gh.updatePull(env.repo.fullName, pull, { state: 'open' });

    // Redis back: the same process resumes without a restart.
    await redis.restart();
    await waitFor('/readyz to be 200 again', async () => (await readyz(url)) === 200, 20_000);
    assert.equal(await metric(url, 'atlantis_store_up'), 1);
    const accepted = await env.comment(url, pull, 'atlantis plan');
    assert.deepEqual(accepted, { status: 200, body: 'Processing...\n' });
    const plan = await env.waitForComment(pull, new RegExp(`^Ran Plan for dir: \`${dir}\` workspace: \`default\``), { timeoutMs: 120_000 });
    assert.match(plan.body, /Plan: 1 to add, 0 to change, 0 to destroy/);
    assert.equal(env.commentsOn(pull).length, 1, 'one comment: the plan of the accepted command');
    assert.equal(await metric(url, 'atlantis_commands_refused_total{reason="store_unavailable"}'), 1);
    // The close sent again now releases the lock the plan took, and says so.
    assert.equal((await env.closePull(url, pull)).status, 200);
    const closed = await env.waitForComment(
      pull,
      /^Locks and plans deleted for the projects and workspaces modified in this pull request:/,
    );
    assert.match(closed.body, new RegExp(`- dir: \`${dir}\` workspace: \`default\``));
    assert.equal(p.child.exitCode, null, 'the server never exited');
  });
});
