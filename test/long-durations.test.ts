// Durations past Node's timer limit (2^31-1 ms, about 24.8 days): Node would fire such a timer
// after 1 ms. A real server with --drain-timeout 720h must wait for its apply, not interrupt it;
// the timer helpers and the controller's requeue must not fire early either.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { MAX_TIMER_DELAY_MS, clampTimerDelay, setLongTimeout } from '../src/async.js';
import { WorkQueue, realClock } from '../src/controller/workqueue.js';
import { runCli } from './support/cli.js';
import { childList } from './support/children.js';
import { terraformConfig } from './support/git-repos.js';
import { waitFor } from './support/server.js';
import { type WorkflowEnv, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';

const THIRTY_DAYS_MS = 720 * 3_600_000;

describe("timers past Node's limit", () => {
  it('setLongTimeout with 30 days does not fire at once, and a short one fires', async () => {
    let early = false;
    const t = setLongTimeout(() => {
      early = true;
    }, THIRTY_DAYS_MS);
    let fired = 0;
    setLongTimeout(() => {
      fired = Date.now();
    }, 20);
    const start = Date.now();
    await new Promise((r) => setTimeout(r, 300));
    t.clear();
    assert.equal(early, false);
    assert.ok(fired - start >= 19, `fired after ${fired - start} ms`);
    assert.throws(() => setLongTimeout(() => undefined, Number.POSITIVE_INFINITY), RangeError);
  });

  it('clampTimerDelay keeps delays within the limit', () => {
    assert.equal(clampTimerDelay(THIRTY_DAYS_MS), MAX_TIMER_DELAY_MS);
    assert.equal(clampTimerDelay(-5), 0);
    assert.equal(clampTimerDelay(1500), 1500);
  });

  it("the controller's work queue does not hand out a key requeued 30 days ahead (drainTimeoutSeconds 2592000)", async () => {
    const q = new WorkQueue({ clock: realClock });
    q.addAfter('ns/big', THIRTY_DAYS_MS);
    q.add('ns/now');
    assert.equal(await q.get(), 'ns/now');
    q.done('ns/now');
    const next = q.get();
    const got = await Promise.race([next, new Promise((r) => setTimeout(() => r('nothing'), 300))]);
    assert.equal(got, 'nothing');
    q.shutDown();
  });
});

let env: WorkflowEnv;
const procs = childList();
before(async () => {
  env = await createWorkflowEnv();
});
after(async () => {
  procs.killAll();
  await env.close();
});

describe('--drain-timeout 720h on the real server', () => {
  it('SIGTERM waits for the running apply and exits 0; terraform is not interrupted', async () => {
    const dataDir = tempDataDir();
    const { p, url } = await startWorkflowServer(env, dataDir, '127.0.163.101', [
      '--drain-timeout',
      '720h',
      '--terraform-interrupt-grace',
      '720h',
    ]);
    procs.push(p);
    await env.openPull(url, 1, 'long-1', { 'app1/main.tf': terraformConfig({ marker: 'm1', sleepSeconds: 4 }) });
    await env.waitForComment(1, /^Ran Plan for dir: `app1`/);
    assert.equal((await env.comment(url, 1, 'atlantis apply')).status, 200);
    await waitFor(
      'the apply to be provisioning',
      () => {
        const jobs = path.join(dataDir, 'jobs');
        return (
          existsSync(jobs) &&
          readdirSync(jobs).some((f) => readFileSync(path.join(jobs, f), 'utf8').includes(`Provisioning with 'local-exec'`))
        );
      },
      60_000,
    );
    p.child.kill('SIGTERM');
    const { code } = await p.exited;
    const out = p.output();
    assert.equal(code, 0, out);
    assert.doesNotMatch(out, /Drain deadline reached|"msg":"Interrupting terraform"/);
    assert.match((await env.waitForComment(1, /^Ran Apply/)).body, /applied m1/);
  });

  it('refuses a drain timeout past ten years with one line, exit 2', () => {
    const r = runCli(env.serverArgs(tempDataDir(), '127.0.163.102', ['--drain-timeout', '87601h']));
    assert.equal(r.code, 2);
    assert.equal(r.stderr.trim(), 'atlantis-operator: invalid value "87601h" for --drain-timeout: must be at most 87600h');
  });
});
