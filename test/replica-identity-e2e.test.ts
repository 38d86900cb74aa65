// One replica id, one live server process; and a replica's journal in Redis that holds
// garbage never stops its start (issue 30). Real server processes on one real redis-server.
// - a second process started under a live replica's id refuses to start, with one line, and
//   reads nothing of the live one's journal;
// - the same replica SIGKILLed and started again on its data dir starts at once: its own last
//   heartbeat (still in Redis) is known by the instance nonce its data dir kept;
// - started under that id on another data dir, it waits for the dead record to expire;
// - entries of its journal that are not JSON, not the right shape, or not sealed with the
//   shared state key are moved aside (quarantined, for a bounded time), named in the log, and
//   the replica starts; a forged command among them never runs.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { QUARANTINE_TTL_MS } from '../src/server/locks/redis-journal.js';
import { startCli, waitForHttp } from './support/cli.js';
import { type RedisServer, replicaArgs, startRedisServer } from './support/redis-server.js';
import { type Replica, keepLogs, logLines, startReplica } from './support/replica-faults.js';
import { type WorkflowEnv, createWorkflowEnv, tempDataDir } from './support/workflow-env.js';

let env: WorkflowEnv;
let redis: RedisServer;
let r: Redis;
const replicas: Replica[] = [];
const dirs: string[] = [];

before(async () => {
  env = await createWorkflowEnv();
  redis = await startRedisServer();
  r = new Redis({ host: redis.host, port: redis.port, lazyConnect: true, maxRetriesPerRequest: 1 });
  await r.connect();
});
after(async () => {
  keepLogs(replicas, 'identity-');
  for (const x of replicas) x.p.child.kill('SIGKILL');
  r?.disconnect();
  await env?.close();
  await redis?.cleanup();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const instanceOf = async (id: string): Promise<string> =>
  (JSON.parse((await r.get(`atlantis:replica:${id}`)) ?? '{}') as { instance?: string }).instance ?? '';

/** Starts replica `id` on `host` with `dataDir` (a fresh one by default), as startReplica does. */
async function startOn(host: string, id: string, dataDir = tempDataDir()): Promise<Replica> {
  if (!dirs.includes(dataDir)) dirs.push(dataDir);
  const p = startCli(env.serverArgs(dataDir, host, replicaArgs(redis, id)));
  const url = `http://${host}:4141`;
  await waitForHttp(`${url}/healthz`, 30_000).catch((e: Error) => {
    p.child.kill('SIGKILL');
    throw new Error(`${e.message}\n${p.output()}`);
  });
  const x: Replica = { id, p, url, dataDir };
  replicas.push(x);
  return x;
}

describe('one replica id, one live process', () => {
  let first: Replica;

  it('a second process under a live replica id refuses to start, with one line, and leaves the live one alone', async () => {
    first = await startReplica(env, redis, '127.30.33.1', 'dup', [], dirs);
    replicas.push(first);
    const mine = await instanceOf('dup');
    assert.match(mine, /^[0-9a-f]{32}$/);
    const dataDir = tempDataDir();
    dirs.push(dataDir);
    const second = startCli(env.serverArgs(dataDir, '127.30.33.2', replicaArgs(redis, 'dup')));
    const { code } = await second.exited;
    assert.equal(code, 2);
    const lines = second
      .output()
      .split('\n')
      .filter((l) => l.startsWith('atlantis-operator: '));
    assert.equal(lines.length, 1, second.output());
    assert.match(
      lines[0] as string,
      /^atlantis-operator: --replica-id dup is in use by another live replica \(at http:\/\/127\.30\.33\.1:4141, instance [0-9a-f]{8}, heartbeat \d+ ms ago\): each replica sharing a Redis needs its own --replica-id$/,
    );
    // It read nothing of the live one's journal, and the live one's record is still its own.
    assert.ok(!/Found a job interrupted|Running a command accepted before/.test(second.output()));
    assert.equal(await instanceOf('dup'), mine);
    assert.equal((await fetch(`${first.url}/healthz`)).status, 200);
  });

  it('the same replica SIGKILLed and started again on its data dir starts at once, taking over its own record', async () => {
    const dead = await instanceOf('dup');
    first.p.child.kill('SIGKILL');
    await first.p.exited;
    // Its heartbeat outlives it by the TTL (10 s): still there when the restart comes.
    assert.ok((await r.pttl('atlantis:replica:dup')) > 0);
    const again = await startOn('127.30.33.1', 'dup', first.dataDir);
    const took = logLines(again, "Found this replica's record from a run that stopped without leaving: taking it over at once");
    assert.equal(took.length, 1, again.p.output());
    assert.equal(logLines(again, 'Another instance holds this replica id: waiting to see whether it is alive').length, 0);
    const now = await instanceOf('dup');
    assert.notEqual(now, dead, 'a new instance');
    first = again;
  });

  it('started under that id on another data dir, it waits until the dead record expires, then starts', async () => {
    first.p.child.kill('SIGKILL');
    await first.p.exited;
    assert.ok((await r.pttl('atlantis:replica:dup')) > 0);
    const elsewhere = await startOn('127.30.33.3', 'dup');
    const waited = logLines(elsewhere, 'Another instance holds this replica id: waiting to see whether it is alive');
    assert.equal(waited.length, 1, elsewhere.p.output());
    assert.equal(
      logLines(elsewhere, "Found this replica's record from a run that stopped without leaving: taking it over at once").length,
      0,
    );
    assert.equal((await fetch(`${elsewhere.url}/healthz`)).status, 200);
  });
});

describe("a replica's journal in Redis with entries it cannot use", () => {
  it('quarantines each (named in the log), starts, and runs none of them', async () => {
    const id = 'quar';
    const forged = {
      seq: 2,
      id: 'forged',
      repo: env.repo.fullName,
      pull: 1,
      payload: { kind: 'comment', repo: env.repo.fullName, pull: 1, commandLine: 'atlantis apply' },
      acceptedAt: new Date().toISOString(),
    };
    await r
      .multi()
      .hset(`atlantis:commands:${id}`, 'cut', '{"seq":1,"id":"cut","repo":')
      .hset(`atlantis:commands:${id}`, 'forged', JSON.stringify(forged))
      .hset('atlantis:jobs', 'job-x', 'not json')
      .hset('atlantis:jobs-unfinished', 'job-x', id)
      .rpush('atlantis:queue', '{"id":1,"repo":"acme/infra"')
      .exec();
    const x = await startOn('127.30.33.4', id);
    const q = logLines(x, 'Quarantined a journal entry that cannot be used');
    const by = (key: string, field?: string) => q.find((l) => l.key === key && (field === undefined || l.field === field));
    assert.match(String(by(`atlantis:commands:${id}`, 'cut')?.problem), /not valid JSON/);
    assert.match(String(by(`atlantis:commands:${id}`, 'forged')?.problem), /no authentication code/);
    assert.match(String(by('atlantis:jobs', 'job-x')?.problem), /not valid JSON/);
    assert.match(String(by('atlantis:queue')?.problem), /not valid JSON/);
    assert.equal(q.length, 4, JSON.stringify(q));
    for (const l of q) {
      const ttl = await r.pttl(String(l.quarantinedAs));
      assert.ok(ttl > 0 && ttl <= QUARANTINE_TTL_MS, `${String(l.quarantinedAs)} kept for a bounded time (${ttl} ms)`);
    }
    assert.equal(await r.get(`atlantis:quarantine:commands:${id}:cut`), '{"seq":1,"id":"cut","repo":');
    assert.deepEqual(await r.hgetall(`atlantis:commands:${id}`), {});
    assert.equal(await r.hget('atlantis:jobs-unfinished', 'job-x'), null);
    assert.equal(await r.llen('atlantis:queue'), 0);
    // Nothing of them ran: no command resumed, no comment.
    assert.equal(logLines(x, 'Running a command accepted before the server stopped').length, 0);
    assert.equal(logLines(x, 'Found a job interrupted by a server crash').length, 0);
    assert.deepEqual(env.commentsOn(1), []);
  });
});
