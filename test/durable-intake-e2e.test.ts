// "Accepted means durable", with either store: a server process answers `200 Processing...`
// to an `atlantis plan` comment, then dies by SIGKILL before the command began (it is held
// in its read of the PR: the GitHub stand-in holds the answer to GET /pulls/N). A server
// started again on the same data dir (and, with Redis, the same replica id) finds the command
// in its journal, runs it, and the PR gets exactly one plan comment. Order is judged from the
// stand-in's recorded requests and the servers' log lines, never from sleeps. A command that
// had begun (its pre-workflow hook was running) is not run again: the PR is told it was
// interrupted and should be run again.
import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { RedisStore } from '../src/server/locks/redis-store.js';
import { SqliteStore } from '../src/server/locks/sqlite-store.js';
import type { AcceptedCommand } from '../src/server/locks/state-store.js';
import type { CliProcess } from './support/cli.js';
import { childList } from './support/children.js';
import { terraformConfig } from './support/git-repos.js';
import { type RedisServer, replicaArgs, startRedisServer, testSharedStateKey } from './support/redis-server.js';
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

const REPLICA = 'atlantis-0';

/** The server's JSON log lines with this `msg`. */
const logLines = (p: CliProcess, msg: string): Record<string, unknown>[] =>
  p
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{') && l.includes(`"msg":${JSON.stringify(msg)}`))
    .map((l) => JSON.parse(l) as Record<string, unknown>);

interface Variant {
  name: string;
  args: () => string[];
  /** The journal of the replica, read with the server stopped. */
  journal: (dataDir: string) => Promise<AcceptedCommand[]>;
}

const variants: Variant[] = [
  {
    name: 'SQLite store (--locking-db-type boltdb)',
    args: () => [],
    journal: async (dataDir) => {
      const s = SqliteStore.open(dataDir);
      try {
        return await s.acceptedCommands();
      } finally {
        await s.close();
      }
    },
  },
  {
    name: 'Redis store (--locking-db-type redis)',
    args: () => replicaArgs(redis, REPLICA),
    journal: async (dataDir) => {
      const s = await RedisStore.connect({
        host: redis.host,
        port: redis.port,
        dataDir,
        replicaId: REPLICA,
        sharedStateKey: testSharedStateKey(),
      });
      try {
        return await s.acceptedCommands();
      } finally {
        await s.close();
      }
    },
  },
];

let hostSeq = 1;
let pullSeq = 81;

describe('a command answered 200 survives a SIGKILL before it began', () => {
  for (const v of variants) {
    it(v.name, { timeout: 240_000 }, async () => {
      const dataDir = tempDataDir();
      dirs.push(dataDir);
      const pull = pullSeq++;
      const dir = `intake${pull}`;
      const pullPath = new RegExp(`^/repos/acme/infra/pulls/${pull}$`);
      const start = async () => {
        // 127.18.70.x: this file's own loopback addresses, one per server process.
        const s = await startWorkflowServer(env, dataDir, `127.18.70.${hostSeq++}`, ['--disable-autoplan', ...v.args()]);
        procs.push(s.p);
        return s;
      };
      const first = await start();
      assert.equal(
        (await env.openPull(first.url, pull, `intake-${pull}`, { [`${dir}/main.tf`]: terraformConfig({ marker: dir }) })).status,
        200,
      );

      // The command is accepted, then held in its read of the PR: before it began.
      const hold = env.gh.holdNext({ method: 'GET', path: pullPath });
      const r = await env.comment(first.url, pull, 'atlantis plan');
      assert.deepEqual(r, { status: 200, body: 'Processing...\n' });
      await Promise.race([
        hold.reached,
        new Promise((_, reject) => setTimeout(() => reject(new Error('the command never read the PR')), 30_000).unref()),
      ]);
      first.p.child.kill('SIGKILL');
      assert.equal((await first.p.exited).signal, 'SIGKILL');

      // Before the kill it did nothing visible: no comment, no reaction, no status on the PR.
      const head = env.gh.getPull(env.repo.fullName, pull)!.headSha;
      assert.deepEqual(env.commentsOn(pull), [], 'the killed server posted no comment');
      assert.deepEqual(env.gh.callsTo('POST', /\/reactions$/), [], 'nor a reaction');
      assert.deepEqual(env.gh.statusesFor(env.repo.fullName, head), [], 'nor a commit status');
      // And the journal has it, not begun.
      const journalled = await v.journal(dataDir);
      assert.deepEqual(
        journalled.map((c) => [c.pull, c.startedAt]),
        [[pull, undefined]],
        'the accepted command is in the journal, not started',
      );

      const readsBefore = env.gh.callsTo('GET', pullPath).length;
      const second = await start();
      // The held answer goes to the dead server's closed socket.
      hold.release();
      const plan = await env.waitForComment(pull, new RegExp(`^Ran Plan for dir: \`${dir}\` workspace: \`default\``), {
        timeoutMs: 120_000,
      });
      assert.match(plan.body, /Plan: 1 to add, 0 to change, 0 to destroy/);
      await waitFor('the command to finish on the second server', () => logLines(second.p, 'Command finished').length === 1, 60_000);

      const rerun = logLines(second.p, 'Running a command accepted before the server stopped');
      assert.deepEqual(
        rerun.map((l) => [l.repo, l.pull, l.command, l.commandId]),
        [[env.repo.fullName, pull, 'atlantis plan', journalled[0]?.id]],
        'the second server says it runs the journalled command',
      );
      assert.ok(env.gh.callsTo('GET', pullPath).length > readsBefore, 'the second server read the PR itself');
      assert.equal(env.commentsOn(pull).length, 1, `exactly one comment: ${env.commentsOn(pull).map((c) => c.body.slice(0, 80))}`);
      assert.deepEqual(
        logLines(second.p, 'Found a command interrupted by a server crash'),
        [],
        'a command that never began is not reported interrupted',
      );

      // The entry went when the command ended: a further restart runs nothing again.
      second.p.child.kill('SIGTERM');
      await second.p.exited;
      assert.deepEqual(await v.journal(dataDir), [], 'the journal is empty after the command ended');
    });
  }
});

describe('a command that had begun when the server was SIGKILLed, with no job of it journalled', () => {
  it('is not run again; the PR gets one comment saying so and what to do', { timeout: 240_000 }, async () => {
    const dataDir = tempDataDir();
    dirs.push(dataDir);
    const pull = 88;
    const dir = 'begun';
    // The pre-workflow hook runs after the command began and before its first job; it says
    // where it is (its pid) and waits, so the kill lands exactly there.
    const pidFile = path.join(dataDir, 'hook.pid');
    const repoConfig = JSON.stringify({ repos: [{ id: '/.*/', pre_workflow_hooks: [{ run: `echo $$ > '${pidFile}'; exec sleep 120` }] }] });
    const start = async () => {
      const s = await startWorkflowServer(env, dataDir, `127.18.70.${hostSeq++}`, ['--disable-autoplan', '--repo-config-json', repoConfig]);
      procs.push(s.p);
      return s;
    };
    const first = await start();
    assert.equal(
      (await env.openPull(first.url, pull, `begun-${pull}`, { [`${dir}/main.tf`]: terraformConfig({ marker: dir }) })).status,
      200,
    );
    assert.deepEqual(await env.comment(first.url, pull, 'atlantis plan'), { status: 200, body: 'Processing...\n' });
    await waitFor('the pre-workflow hook to run', () => existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim() !== '', 60_000);
    first.p.child.kill('SIGKILL');
    assert.equal((await first.p.exited).signal, 'SIGKILL');
    // A crash of a pod kills every process of it: the hook too.
    try {
      process.kill(Number(readFileSync(pidFile, 'utf8').trim()), 'SIGKILL');
    } catch {
      /* gone with the server */
    }
    const journalled = await variants[0]!.journal(dataDir);
    assert.equal(journalled.length, 1);
    assert.ok(journalled[0]?.startedAt !== undefined, 'the journal says the command began');
    const commentsBefore = env.commentsOn(pull).length;

    const second = await start();
    const notice = await env.waitForComment(pull, /Interrupted/, { after: commentsBefore, timeoutMs: 60_000 });
    assert.equal(
      notice.body,
      '**Plan Interrupted**: the Atlantis server stopped unexpectedly while running `atlantis plan` (it was not drained), ' +
        'before it posted a result. Comment `atlantis plan` to run it again.',
    );
    const found = logLines(second.p, 'Found a command interrupted by a server crash');
    assert.deepEqual(
      found.map((l) => [l.level, l.pull, l.command, l.interruptedJobs]),
      [['warn', pull, 'atlantis plan', 0]],
    );
    // Stopped (SIGTERM drains: it waits for its background comments), then nothing else came.
    second.p.child.kill('SIGTERM');
    await second.p.exited;
    assert.deepEqual(logLines(second.p, 'Running a command accepted before the server stopped'), [], 'not run again');
    assert.ok(!env.commentsOn(pull).some((c) => /^Ran Plan/.test(c.body)), 'no plan ran');
    assert.equal(env.commentsOn(pull).length, commentsBefore + 1, 'one comment: the notice');
    assert.deepEqual(await variants[0]!.journal(dataDir), [], 'the entry is gone: a further restart says nothing again');
  });
});
