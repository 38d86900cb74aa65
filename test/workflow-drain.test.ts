// Draining the real server process while real `terraform apply` runs, driven through
// webhooks: refusal text, readiness, finishing, deadlines, second signal, the drain
// command, and the durable queue.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { StatusBody } from '../src/contract/drain-protocol.js';
import { type CliProcess, runCli, startCli } from './support/cli.js';
import { childList } from './support/children.js';
import { terraformConfig } from './support/git-repos.js';
import { waitFor } from './support/server.js';
import { lockFileExists } from './support/terraform.js';
import { type WorkflowEnv, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';

let env: WorkflowEnv;
const procs = childList();
let hostSeq = 1;
let pullSeq = 100;

async function startServer(dataDir: string, extra: string[] = []): Promise<{ p: CliProcess; url: string }> {
  const started = await startWorkflowServer(env, dataDir, `127.0.45.${hostSeq++}`, extra);
  procs.push(started.p);
  return started;
}

async function status(url: string): Promise<StatusBody> {
  return (await (await fetch(`${url}/status`)).json()) as StatusBody;
}

/** Opens a PR whose apply sleeps `sleepSeconds`, waits for its plan, comments apply, and waits until terraform is applying. */
async function startLongApply(url: string, dataDir: string, sleepSeconds: number): Promise<number> {
  const pull = pullSeq++;
  const dir = `app${pull}`;
  await env.openPull(url, pull, `long-${pull}`, { [`${dir}/main.tf`]: terraformConfig({ marker: `m${pull}`, sleepSeconds }) });
  await env.waitForComment(pull, new RegExp(`^Ran Plan for dir: \`${dir}\``));
  assert.equal((await env.comment(url, pull, 'atlantis apply')).status, 200);
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
  return pull;
}

/** A second PR, opened and planned before the drain, to comment on during it. */
async function plannedPull(url: string): Promise<number> {
  const pull = pullSeq++;
  await env.openPull(url, pull, `other-${pull}`, { [`other${pull}/main.tf`]: terraformConfig({ marker: `o${pull}` }) });
  await env.waitForComment(pull, /^Ran Plan for dir: `other/);
  return pull;
}

function stateDir(dataDir: string, pull: number): string {
  return path.join(dataDir, 'repos', 'acme/infra', String(pull), 'default', `app${pull}`);
}

before(async () => {
  env = await createWorkflowEnv();
});
after(async () => {
  procs.killAll();
  await env.close();
});

describe('drain of the real server process with webhooks', () => {
  it("SIGTERM: refuses new commands with Atlantis's text, is unready, finishes the apply, exits 0", async () => {
    const dataDir = tempDataDir();
    const { p, url } = await startServer(dataDir);
    const other = await plannedPull(url);
    const pull = await startLongApply(url, dataDir, 5);
    p.child.kill('SIGTERM');
    await waitFor('shutting_down', async () => (await status(url)).shutting_down);
    const st = await status(url);
    assert.equal(st.in_progress_operations, 1);
    assert.equal(st.operations[0]?.command, 'apply');
    assert.equal((await fetch(`${url}/readyz`)).status, 503);
    assert.equal((await fetch(`${url}/healthz`)).status, 200);
    const before = env.commentsOn(other).length;
    const r = await env.comment(url, other, 'atlantis plan');
    assert.equal(r.status, 503);
    const refusal = await env.waitForComment(other, /shutting down/, { after: before });
    assert.equal(refusal.body, 'Atlantis server is shutting down, please try again later.');
    assert.equal((await p.exited).code, 0, p.output());
    const applied = await env.waitForComment(pull, /^Ran Apply/);
    assert.match(applied.body, new RegExp(`applied m${pull}`));
    assert.equal(env.commentsOn(other).length, before + 1, 'the refused command ran nothing');
    const state = JSON.parse(readFileSync(path.join(stateDir(dataDir, pull), 'terraform.tfstate'), 'utf8')) as { resources: unknown[] };
    assert.equal(state.resources.length, 1);
  });

  it('a second SIGTERM interrupts terraform with SIGINT: state consistent, lock released, PR told, non-zero exit', async () => {
    const dataDir = tempDataDir();
    const { p, url } = await startServer(dataDir, ['--terraform-interrupt-grace', '30s']);
    const pull = await startLongApply(url, dataDir, 120);
    p.child.kill('SIGTERM');
    await waitFor('shutting_down', async () => (await status(url)).shutting_down);
    p.child.kill('SIGTERM');
    const { code } = await p.exited;
    assert.equal(code, 3, p.output());
    const c = await env.waitForComment(pull, /Apply Interrupted/);
    assert.match(c.body, /drain deadline passed/);
    assert.equal(lockFileExists(stateDir(dataDir, pull)), false, 'terraform released its state lock');
    JSON.parse(readFileSync(path.join(stateDir(dataDir, pull), 'terraform.tfstate'), 'utf8'));
    assert.match(p.output(), /"msg":"Interrupting terraform"/);
    assert.doesNotMatch(p.output(), /"msg":"Killing terraform after interrupt grace"/);
  });

  it('--drain-timeout shorter than the apply interrupts terraform cleanly and exits non-zero', async () => {
    const dataDir = tempDataDir();
    const { p, url } = await startServer(dataDir, ['--drain-timeout', '2s', '--terraform-interrupt-grace', '30s']);
    const pull = await startLongApply(url, dataDir, 120);
    const t0 = Date.now();
    p.child.kill('SIGTERM');
    assert.equal((await p.exited).code, 3, p.output());
    assert.ok(Date.now() - t0 < 60_000);
    await env.waitForComment(pull, /Apply Interrupted/);
    assert.equal(lockFileExists(stateDir(dataDir, pull)), false);
  });

  it('`atlantis-operator drain` waits for the busy server and exits 0; with a short --timeout it exits 1', async () => {
    const dataDir = tempDataDir();
    const { p, url } = await startServer(dataDir);
    // Long enough that the apply still runs after the short `drain` (a whole CLI start on a
    // loaded machine can take seconds) has given up.
    await startLongApply(url, dataDir, 20);
    const short = runCli(['drain', '--data-dir', dataDir, '--timeout', '1s']);
    assert.equal(short.code, 1, short.stdout + short.stderr);
    assert.match(short.stdout, /timeout: still 1 operation/);
    assert.equal((await status(url)).shutting_down, true, 'the drain goes on after the command gave up');
    const full = startCli(['drain', '--data-dir', dataDir, '--timeout', '2m']);
    procs.push(full);
    assert.equal((await full.exited).code, 0, full.output());
    assert.match(full.output(), /draining: 1 operation\(s\) in progress: apply acme\/infra#/);
    assert.equal((await p.exited).code, 0);
  });

  it('--queue-during-drain: the draining server stays ready; a command received while draining runs first on the next server', async () => {
    const dataDir = tempDataDir();
    const first = await startServer(dataDir, ['--queue-during-drain']);
    const other = await plannedPull(first.url);
    await startLongApply(first.url, dataDir, 4);
    first.p.child.kill('SIGTERM');
    await waitFor('shutting_down', async () => (await status(first.url)).shutting_down);
    // Still in the Service while it drains: it takes webhooks in and queues their commands.
    const ready = await fetch(`${first.url}/readyz`);
    assert.equal(ready.status, 200);
    assert.deepEqual(await ready.json(), { status: 'draining, queueing commands' });
    const before = env.commentsOn(other).length;
    const r = await env.comment(first.url, other, 'atlantis plan');
    assert.equal(r.status, 202);
    await env.waitForComment(other, /has been queued and will run when the server is back/, { after: before });
    assert.equal((await first.p.exited).code, 0, first.p.output());
    const second = await startServer(dataDir, ['--queue-during-drain']);
    await env.waitForComment(other, /running the queued command `atlantis plan` now/, { after: before });
    await env.waitForComment(other, /^Ran Plan for dir: `other/, { after: before });
    second.p.child.kill('SIGTERM');
    assert.equal((await second.p.exited).code, 0);
  });
});
