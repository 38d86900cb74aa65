// Fault: the server process is SIGKILLed while terraform applies, then started again on the
// same data dir. The new server must find the interrupted job in its journal, tell the PR
// what happened and what to do, keep the project locked by that PR, mark the job finished
// (so a later restart does not comment again), and leave the store intact.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { SqliteStore } from '../src/server/locks/sqlite-store.js';
import { type CliProcess, startCli, waitForHttp } from './support/cli.js';
import { childList } from './support/children.js';
import { terraformConfig } from './support/git-repos.js';
import { waitFor } from './support/server.js';
import { type WorkflowEnv, createWorkflowEnv, tempDataDir } from './support/workflow-env.js';

let env: WorkflowEnv;
const procs = childList();
let hostSeq = 1;

async function startServer(dataDir: string): Promise<{ p: CliProcess; url: string }> {
  // 127.0.47.x: this file's own loopback addresses (pods of the local node use 127.1.x.x).
  const host = `127.0.47.${hostSeq++}`;
  const p = startCli(env.serverArgs(dataDir, host));
  procs.push(p);
  const url = `http://${host}:4141`;
  await waitForHttp(`${url}/healthz`, 60_000).catch((e: Error) => {
    throw new Error(`${e.message}\n${p.output()}`);
  });
  return { p, url };
}

interface ProcInfo {
  pid: number;
  pgid: number;
  state: string;
  cmdline: string[];
  cwd: string;
}

/** Every live process we can read in /proc (zombies count as dead). */
function processes(): ProcInfo[] {
  const out: ProcInfo[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const state = fields[0] ?? '?';
      if (state === 'Z' || state === 'X') continue;
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8')
        .split('\0')
        .filter((s) => s !== '');
      let cwd = '';
      try {
        cwd = readlinkSync(`/proc/${name}/cwd`);
      } catch {
        /* not ours */
      }
      out.push({ pid: Number(name), pgid: Number(fields[2]), state, cmdline, cwd });
    } catch {
      /* exited meanwhile */
    }
  }
  return out;
}

/** The process group of the `terraform apply` running in a working copy under `dataDir`. */
function terraformApplyGroup(dataDir: string): number | undefined {
  const tf = processes().find(
    (p) => p.cmdline.includes('apply') && /terraform|tofu/.test(path.basename(p.cmdline[0] ?? '')) && p.cwd.startsWith(dataDir),
  );
  return tf?.pgid;
}

before(async () => {
  env = await createWorkflowEnv();
});
after(async () => {
  procs.killAll();
  await env.close();
});

describe('server SIGKILLed mid-apply, restarted on the same data dir', () => {
  it('comments on the PR once, keeps the project locked, finishes the journal entry, store intact', { timeout: 300_000 }, async () => {
    const dataDir = tempDataDir();
    const pull = 71;
    const dir = 'crash';
    const first = await startServer(dataDir);

    // Plan, then an apply whose local-exec sleeps 20 s.
    await env.openPull(first.url, pull, 'crash-mid-apply', { [`${dir}/main.tf`]: terraformConfig({ marker: 'c1', sleepSeconds: 20 }) });
    await env.waitForComment(pull, new RegExp(`^Ran Plan for dir: \`${dir}\` workspace: \`default\``));
    assert.equal((await env.comment(first.url, pull, 'atlantis apply')).status, 200);
    await waitFor(
      'terraform to be provisioning the local-exec',
      () => {
        const jobs = path.join(dataDir, 'jobs');
        return (
          existsSync(jobs) &&
          readdirSync(jobs).some((f) => readFileSync(path.join(jobs, f), 'utf8').includes(`Provisioning with 'local-exec'`))
        );
      },
      120_000,
    );
    const pgid = terraformApplyGroup(dataDir);
    assert.ok(pgid !== undefined, 'found the running terraform apply under the data dir');
    const commentsBeforeCrash = env.commentsOn(pull).length;

    // The crash. SIGKILL reaches only the server: terraform runs in its own process group and
    // would go on as an orphan. We kill its whole group too (terraform and the local-exec
    // shell and sleep), right after the server: that is what a real crash of a server pod
    // does (OOM kill, node loss, or the kubelet killing the container kills every process of
    // the container at once), and an orphan terraform still writing state while the next
    // server starts on the same data dir is not a situation a pod can be in. The server goes
    // first so that it cannot see terraform die and journal the job as finished.
    first.p.child.kill('SIGKILL');
    assert.equal((await first.p.exited).signal, 'SIGKILL');
    process.kill(-pgid, 'SIGKILL');
    await waitFor("terraform's process group to be gone", () => !processes().some((p) => p.pgid === pgid), 30_000);
    assert.equal(env.commentsOn(pull).length, commentsBeforeCrash, 'the killed server posted nothing after the kill');
    assert.ok(!env.commentsOn(pull).some((c) => /^Ran Apply/.test(c.body)), 'no apply result was posted before the crash');

    // A new server on the same data dir, on another address.
    const second = await startServer(dataDir);
    const notice = await env.waitForComment(pull, /Interrupted/, { after: commentsBeforeCrash, timeoutMs: 60_000 });
    assert.match(
      notice.body,
      /^Ran Apply for dir: `crash` workspace: `default`\n\n\*\*Apply Interrupted\*\*: /,
      'names the command and the project, worded as at a drain deadline',
    );
    assert.match(notice.body, /server stopped unexpectedly/, 'says the server stopped');
    assert.match(notice.body, /project stays locked by this pull request/, 'says the lock is kept');
    assert.match(notice.body, /terraform force-unlock/, 'tells how to release a stale state lock');
    assert.match(notice.body, /comment `atlantis plan` to plan again/, 'tells the user what to comment next');

    // The project stays locked by this PR: the web page lists the lock ...
    const page = await (await fetch(`${second.url}/`)).text();
    assert.match(
      page,
      new RegExp(`<td>acme/infra</td><td>${dir}</td><td>default</td><td>#${pull} by dev</td>`),
      'the web page lists the lock of the crashed PR',
    );
    // ... and another PR planning the same dir gets the lock message.
    const other = 72;
    await env.openPull(second.url, other, 'crash-other', { [`${dir}/main.tf`]: terraformConfig({ marker: 'c2' }) });
    const locked = await env.waitForComment(other, /Plan Failed/, { timeoutMs: 60_000 });
    assert.match(locked.body, new RegExp(`This project is currently locked by an unapplied plan from pull #${pull}`));

    // What the comment says to do works: the PR plans again (still holding its lock).
    const beforeReplan = env.commentsOn(pull).length;
    await env.comment(second.url, pull, 'atlantis plan');
    const replan = await env.waitForComment(pull, /^Ran Plan|Plan Failed|Plan Error|\*\*Error\*\*/, {
      after: beforeReplan,
      timeoutMs: 90_000,
    });
    assert.match(
      replan.body,
      new RegExp(`^Ran Plan for dir: \`${dir}\` workspace: \`default\``),
      `re-plan after the crash: ${replan.body.slice(0, 800)}`,
    );

    second.p.child.kill('SIGTERM');
    assert.equal((await second.p.exited).code, 0, second.p.output());
    assert.match(second.p.output(), /"msg":"Found a job interrupted by a server crash"/, 'the recovery is logged');

    // The journal's job is finished: a third start does not comment again.
    const commentsBeforeThird = env.commentsOn(pull).length;
    const callsBeforeThird = env.gh.calls.length;
    const third = await startServer(dataDir);
    // Recovery runs before the server listens and its comment is posted in the background:
    // give it ample time to (wrongly) post one.
    await new Promise((r) => setTimeout(r, 3000));
    assert.equal(env.commentsOn(pull).length, commentsBeforeThird, 'a third start posted no new comment');
    assert.equal(
      env.gh.calls.slice(callsBeforeThird).filter((c) => c.method === 'POST' && /\/comments$/.test(c.path)).length,
      0,
      'no comment POST at all on the third start',
    );
    assert.doesNotMatch(third.p.output(), /Found a job interrupted/);
    assert.match(
      await (await fetch(`${third.url}/`)).text(),
      new RegExp(`#${pull} by dev`),
      'the lock is still there after another restart',
    );
    third.p.child.kill('SIGTERM');
    assert.equal((await third.p.exited).code, 0, third.p.output());

    // The store, opened after every server stopped.
    const store = SqliteStore.open(dataDir);
    try {
      assert.equal(store.integrityCheck(), 'ok');
      assert.deepEqual(await store.unfinishedJobs(), [], 'no unfinished job left in the journal');
      const applies = (await store.recentJobs(100)).filter((j) => j.command === 'apply' && j.pull === pull);
      assert.equal(applies.length, 1, 'one apply job in the journal');
      assert.equal(applies[0]?.result, 'interrupted');
      const lock = await store.getLock({ repo: 'acme/infra', dir, workspace: 'default' });
      assert.equal(lock?.pull, pull, 'the lock is held by the crashed PR');
    } finally {
      await store.close();
    }
  });
});
