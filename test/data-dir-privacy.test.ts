// The data dir on a real server process: 0700, and every file the server, git and terraform
// write in it 0600 (directories 0700), even when the server is started with umask 000; job
// logs pruned by count and age at start, then periodically, never while their job runs.
// Order is judged from the server's own log timestamps.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type CliProcess, startCli, waitForHttp } from './support/cli.js';
import { terraformConfig } from './support/git-repos.js';
import { type WorkflowEnv, createWorkflowEnv, tempDataDir } from './support/workflow-env.js';

let env: WorkflowEnv;
const dataDir = tempDataDir();
const jobsDir = path.join(dataDir, 'jobs');
const MIN = 60_000;
const DAY = 24 * 60 * MIN;

interface LogLine {
  level: string;
  time: string;
  msg: string;
  [k: string]: unknown;
}
const lines = (p: CliProcess): LogLine[] =>
  p
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine);

/** Starts the server with umask 000 inherited, as a careless init system might. */
async function startServer(host: string, extra: string[]): Promise<{ p: CliProcess; url: string }> {
  const previous = process.umask(0);
  let p: CliProcess;
  try {
    p = startCli(env.serverArgs(dataDir, host, ['--log-level', 'debug', ...extra]));
  } finally {
    process.umask(previous);
  }
  const url = `http://${host}:4141`;
  await waitForHttp(`${url}/healthz`, 30_000).catch((e: Error) => {
    p.child.kill('SIGKILL');
    throw new Error(`${e.message}\n${p.output()}`);
  });
  return { p, url };
}

async function stop(p: CliProcess): Promise<void> {
  p.child.kill('SIGTERM');
  assert.equal((await p.exited).code, 0, p.output());
}

/** Every file and directory under `dir` (symlinks aside) that group or others can use. */
function loosePaths(dir: string): string[] {
  const out: string[] = [];
  const all = readdirSync(dir, { recursive: true, encoding: 'utf8' });
  assert.ok(all.length >= 50, `a real run leaves many files (store, plans, logs, working copy with .git and .terraform): ${all.length}`);
  for (const rel of all) {
    const st = lstatSync(path.join(dir, rel), { throwIfNoEntry: false });
    if (rel === 'jobs/notes.txt') continue; // the test's own file, not the server's
    if (st && !st.isSymbolicLink() && (st.mode & 0o077) !== 0) out.push(`${rel} ${(st.mode & 0o777).toString(8)}`);
  }
  return out;
}

const mode = (p: string) => statSync(p).mode & 0o777;

/** A job log as an older version left it: 0644, last written `ago` ms ago. */
function oldLog(ago: number): string {
  const id = randomUUID();
  const file = path.join(jobsDir, `${id}.log`);
  writeFileSync(file, `old output ${id}\n`);
  chmodSync(file, 0o644);
  const t = new Date(Date.now() - ago);
  utimesSync(file, t, t);
  return id;
}

before(async () => {
  env = await createWorkflowEnv();
});
after(async () => {
  await env.close();
});

describe('data dir privacy and job log retention', () => {
  it('0700 data dir, 0600 files with umask 000; count and age pruning at start', { timeout: 240_000 }, async () => {
    // What an older version left behind: a 0755 data dir, a 0644 top-level file, 0644 job logs.
    chmodSync(dataDir, 0o755);
    writeFileSync(path.join(dataDir, 'last-exit.json'), '{"pid":1,"code":0}');
    chmodSync(path.join(dataDir, 'last-exit.json'), 0o644);
    mkdirSync(jobsDir);
    chmodSync(jobsDir, 0o755);
    const tooOld = [oldLog(10 * DAY), oldLog(8 * DAY)];
    const recent = [1, 2, 3, 4, 5].map((m) => oldLog(m * MIN)); // newest first
    const notALog = path.join(jobsDir, 'notes.txt');
    writeFileSync(notALog, 'kept');
    utimesSync(notALog, new Date(Date.now() - 30 * DAY), new Date(Date.now() - 30 * DAY));
    const outside = path.join(dataDir, '..', `${path.basename(dataDir)}-outside.txt`);
    writeFileSync(outside, "not the server's");
    const link = path.join(jobsDir, `${randomUUID()}.log`);
    symlinkSync(outside, link);

    const { p, url } = await startServer('127.61.16.2', ['--job-log-max-count', '4']);
    try {
      const umask = /^Umask:\s*(\d+)$/m.exec(readFileSync(`/proc/${p.child.pid}/status`, 'utf8'))?.[1];
      assert.equal(umask, '0077', 'the server runs with umask 077 whatever it was started with');
      assert.equal(mode(dataDir), 0o700, 'the data dir is made private at start');
      assert.equal(mode(path.join(dataDir, 'last-exit.json')), 0o600, 'a leftover top-level file is made private');
      assert.equal(mode(jobsDir), 0o700, 'a leftover jobs dir is made private');

      // Pruned at start: both logs past 7 days by age, the oldest recent one by count (4 kept).
      const pruned = lines(p).filter((l) => l.msg === 'Pruned job logs');
      assert.equal(pruned.length, 1, p.output());
      assert.deepEqual([pruned[0]!.removedByAge, pruned[0]!.removedByCount, pruned[0]!.kept], [2, 1, 4]);
      const started = lines(p).find((l) => l.msg === 'Server started')!;
      assert.ok(pruned[0]!.time <= started.time, 'pruned before the server listens');
      for (const id of [...tooOld, recent[4]!]) assert.ok(!existsSync(path.join(jobsDir, `${id}.log`)), `${id} was pruned`);
      for (const id of recent.slice(0, 4)) assert.equal(mode(path.join(jobsDir, `${id}.log`)), 0o600, `${id} kept, made private`);
      assert.ok(existsSync(notALog), 'a file not named like a job log is left alone');
      assert.ok(lstatSync(link).isSymbolicLink() && existsSync(outside), 'a symlink is neither followed nor removed');
      assert.equal(readFileSync(outside, 'utf8'), "not the server's");
      const prunedPage = await fetch(`${url}/jobs/${tooOld[0]}`);
      assert.equal(prunedPage.status, 404);

      // A plan and an apply: store, plan file, job logs, pid file, working copy.
      await env.openPull(url, 21, 'privacy', { 'privacy/main.tf': terraformConfig({ marker: 'p1' }) });
      await env.waitForComment(21, /^Ran Plan/, { timeoutMs: 120_000 });
      const plans = readdirSync(dataDir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.tfplan'));
      assert.ok(plans.length >= 1, 'a plan file exists');
      assert.deepEqual(loosePaths(dataDir), [], 'nothing readable by others after the plan');
      await env.comment(url, 21, 'atlantis apply');
      await env.waitForComment(21, /^Ran Apply/, { timeoutMs: 120_000 });
      for (const f of ['atlantis-operator.pid', 'atlantis-operator.db']) assert.equal(mode(path.join(dataDir, f)), 0o600, f);
      const logs = readdirSync(jobsDir).filter((f) => f.endsWith('.log') && !lstatSync(path.join(jobsDir, f)).isSymbolicLink());
      assert.equal(logs.length, 6, 'the 4 kept logs and the 2 new ones');
      assert.ok(
        readdirSync(path.join(dataDir, 'repos'), { recursive: true, encoding: 'utf8' }).some((f) => f.endsWith('main.tf')),
        'a working copy exists',
      );
      assert.deepEqual(loosePaths(dataDir), [], 'nothing readable by others after the apply');
      assert.equal(mode(dataDir), 0o700);
    } finally {
      await stop(p);
    }
    assert.equal(mode(path.join(dataDir, 'last-exit.json')), 0o600, 'written at exit, private');
  });

  it('prunes by age periodically, and never the log of a running job', { timeout: 240_000 }, async () => {
    const RETENTION_MS = 5_000;
    const { p, url } = await startServer('127.61.16.3', ['--job-log-retention', '5s', '--job-log-max-count', '0']);
    try {
      const atStart = lines(p).find((l) => l.msg === 'Pruned job logs');
      assert.ok((atStart?.removedByAge as number) >= 4, 'the logs of the previous run older than 5 s are pruned at start');
      // The apply sleeps 9 s without output: its log is staler than the retention while it runs.
      await env.openPull(url, 22, 'privacy-2', { 'privacy2/main.tf': terraformConfig({ marker: 'p2', sleepSeconds: 9 }) });
      await env.waitForComment(22, /^Ran Plan/, { timeoutMs: 120_000 });
      await env.comment(url, 22, 'atlantis apply');
      await env.waitForComment(22, /^Ran Apply/, { timeoutMs: 120_000 });
      assert.match(env.commentsOn(22).at(-1)!.body, /applied p2/);
      const applyStart = lines(p).find((l) => l.msg === 'Process started' && (l.args as string[])[0] === 'apply')!;
      const jobId = applyStart.jobId as string;
      // Wait until the server has pruned it (its log line says so), bounded.
      const end = Date.now() + 60_000;
      while (!lines(p).some((l) => l.msg === 'Pruned job log' && l.jobId === jobId) && Date.now() < end)
        await new Promise((r) => setTimeout(r, 200));
      const prunes = lines(p).filter((l) => l.msg === 'Pruned job log' && l.jobId === jobId);
      assert.equal(prunes.length, 1, p.output());
      const finished = lines(p).find((l) => l.msg === 'Process finished' && l.pid === applyStart.pid)!;
      assert.ok((finished.durationMs as number) >= 9_000, 'terraform apply ran at least 9 s');
      const prunedAt = Date.parse(prunes[0]!.time);
      const lastWritten = Date.parse(prunes[0]!.lastWritten as string);
      // The log was still being written at the end of the job, so it was not deleted while it ran...
      assert.ok(
        lastWritten >= Date.parse(applyStart.time) + 9_000,
        `last written ${prunes[0]!.lastWritten}, apply started ${applyStart.time}`,
      );
      assert.ok(prunedAt >= Date.parse(finished.time), 'pruned after the job finished');
      // ...and deleted once older than the retention, within an interval (1.25 s) and a loaded machine's delay.
      assert.ok(prunedAt - lastWritten > RETENTION_MS, `pruned ${prunedAt - lastWritten} ms after its last write`);
      assert.ok(prunedAt - lastWritten < RETENTION_MS + 15_000, `pruned ${prunedAt - lastWritten} ms after its last write`);
      assert.equal(prunes[0]!.reason, 'age');
      assert.ok(!existsSync(path.join(jobsDir, `${jobId}.log`)));
      assert.equal((await fetch(`${url}/jobs/${jobId}`)).status, 404, 'the pruned job is gone from the web page too');
      assert.ok(!(await (await fetch(`${url}/`)).text()).includes(jobId));
    } finally {
      await stop(p);
    }
  });
});
