// In-process drain tests: the real server module on a loopback port, the real operation
// tracker and process runner, real `terraform apply` runs held open by local-exec sleeps.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { after, describe, it } from 'node:test';
import type { StatusBody } from '../src/contract/drain-protocol.js';
import type { RunResult } from '../src/server/terraform/runner.js';
import type { AtlantisServer, RunOutcome } from '../src/server/server.js';
import { getJson, startTestServer, waitFor } from './support/server.js';
import { lockFileExists, makeTerraformDir, readState } from './support/terraform.js';

const servers: AtlantisServer[] = [];
after(async () => {
  for (const s of servers) await s.close();
});

function apply(server: AtlantisServer, dir: string, project: string): Promise<RunOutcome<RunResult>> {
  return server.runOperation({ command: 'apply', repo: 'acme/infra', pull: 7, project }, (op) =>
    server.runner.run({
      jobId: op.id,
      args: ['apply', '-auto-approve', '-input=false', '-no-color'],
      cwd: dir,
      logFile: server.jobLogPath(op.id),
    }),
  );
}

function processGroupOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
}

describe('server drain (in-process, real terraform)', () => {
  it('finishes running applies, refuses new work, reports draining, then exits 0', async () => {
    const { server, url } = await startTestServer(['--drain-timeout', '5m']);
    servers.push(server);
    const dirs = [makeTerraformDir(3, 2), makeTerraformDir(3, 1)];
    const runs = [apply(server, dirs[0]!, 'a'), apply(server, dirs[1]!, 'b')];
    await waitFor('two terraform processes', () => server.runner.running().length === 2);
    for (const p of server.runner.running()) assert.equal(processGroupOf(p.pid), p.pid, 'terraform leads its own process group');

    server.requestDrain('signal');
    const status = await getJson<StatusBody>(`${url}/status`);
    assert.equal(status.status, 200);
    assert.deepEqual(Object.keys(status.body).slice(0, 3), ['shutting_down', 'in_progress_operations', 'version']);
    assert.equal(status.body.shutting_down, true);
    assert.equal(status.body.in_progress_operations, 2);
    assert.equal(status.body.drain_reason, 'signal');
    assert.ok(status.body.draining_since && !Number.isNaN(Date.parse(status.body.draining_since)));
    assert.deepEqual(status.body.operations.map((o) => o.project).sort(), ['a', 'b']);
    assert.equal((await fetch(`${url}/readyz`)).status, 503);
    assert.equal((await fetch(`${url}/healthz`)).status, 200);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    assert.match(metrics, /^atlantis_draining 1$/m);
    assert.match(metrics, /^atlantis_operations_in_progress 2$/m);

    const refused = await server.runOperation({ command: 'plan', repo: 'acme/infra', pull: 8, project: 'c' }, async () => 'ran');
    assert.deepEqual(refused, { started: false });

    const results = await Promise.all(runs);
    assert.equal(await server.waitForExit(), 0);
    for (const r of results) {
      assert.ok(r.started);
      assert.equal(r.value.exitCode, 0, r.value.output);
      assert.equal(r.value.interrupted, false);
    }
    const state = readState(dirs[0]!);
    const steps = state.resources?.find((r) => r.type === 'terraform_data');
    assert.equal(steps?.instances.length, 2);
    assert.ok(
      steps?.instances.every((i) => i.status === undefined),
      'no instance tainted',
    );
    assert.equal(readState(dirs[1]!).resources?.length, 1);
    assert.equal(lockFileExists(dirs[0]!), false);
  });

  it('interrupts terraform with SIGINT at the drain deadline: state consistent, lock released, exit non-zero', async () => {
    const { server } = await startTestServer(['--drain-timeout', '1s', '--terraform-interrupt-grace', '20s']);
    servers.push(server);
    const dir = makeTerraformDir(60, 2);
    const run = apply(server, dir, 'slow');
    await waitFor('terraform creating resources', () => {
      const op = server.tracker.operations()[0];
      const log = op ? server.jobLogPath(op.id) : '';
      return op !== undefined && existsSync(log) && readFileSync(log, 'utf8').includes('local-exec');
    });
    const started = Date.now();
    server.requestDrain('signal');
    const r = await run;
    assert.ok(r.started);
    assert.equal(r.value.interrupted, true, 'SIGINT was sent');
    assert.equal(r.value.killed, false, 'no SIGKILL was needed');
    assert.equal(r.value.signal, null, 'terraform exited by itself');
    assert.notEqual(r.value.exitCode, 0);
    assert.match(r.value.output, /Interrupt received/);
    assert.ok(Date.now() - started < 20_000, 'ended well before the 60 s sleep');
    assert.equal(await server.waitForExit(), 3);
    assert.equal(lockFileExists(dir), false, 'the state lock was released');
    const state = readState(dir);
    assert.equal(state.resources?.[0]?.instances.length, 2, 'state records both instances (tainted) instead of losing them');
  });

  it('a second signal is the deadline even without --drain-timeout', async () => {
    const { server, url } = await startTestServer(['--terraform-interrupt-grace', '20s']);
    servers.push(server);
    const dir = makeTerraformDir(60, 1);
    const run = apply(server, dir, 'slow');
    await waitFor('terraform running', () => server.runner.running().length === 1);
    server.requestDrain('signal');
    await new Promise((r) => setTimeout(r, 300));
    assert.equal((await getJson<StatusBody>(`${url}/status`)).body.in_progress_operations, 1, 'still waiting after one signal');
    server.requestDrain('signal');
    const r = await run;
    assert.ok(r.started && r.value.interrupted && !r.value.killed);
    assert.equal(await server.waitForExit(), 3);
    assert.equal(lockFileExists(dir), false);
  });

  it('an annotation drain stays up when drained, until the pod is deleted (SIGTERM)', async () => {
    const { server, url } = await startTestServer(['--drain-timeout', '1s']);
    servers.push(server);
    const dir = makeTerraformDir(2, 1);
    const run = apply(server, dir, 'x');
    await waitFor('terraform running', () => server.runner.running().length === 1);
    server.requestDrain('annotation');
    const r = await run;
    assert.ok(r.started && r.value.exitCode === 0 && !r.value.interrupted, 'no deadline for annotation drains');
    const st = await getJson<StatusBody>(`${url}/status`);
    assert.equal(st.body.shutting_down, true);
    assert.equal(st.body.in_progress_operations, 0);
    assert.equal(st.body.drain_reason, 'annotation');
    server.requestDrain('signal');
    assert.equal(await server.waitForExit(), 0);
  });

  it('GET /status?wait_drained holds the answer until the drain is over, and says why bad values are refused', async () => {
    const { server, url } = await startTestServer();
    servers.push(server);
    for (const bad of ['abc', '61', '-1', '1e3', '']) {
      const res = await fetch(`${url}/status?wait_drained=${bad}`);
      assert.equal(res.status, 400, bad);
      assert.match(await res.text(), /^wait_drained must be a number of seconds from 0 to 60/, bad);
    }
    assert.equal((await fetch(`${url}/status?wait_drained=1&wait_drained=2`)).status, 400, 'given twice');
    assert.equal((await getJson<StatusBody>(`${url}/status?other=1`)).status, 200, 'other parameters are ignored, as Atlantis does');

    const dir = makeTerraformDir(2, 1);
    const run = apply(server, dir, 'x');
    await waitFor('terraform running', () => server.runner.running().length === 1);
    let answered = false;
    const held = getJson<StatusBody>(`${url}/status?wait_drained=30`).then((r) => {
      answered = true;
      return r;
    });
    // A wait that runs out answers with the status of that moment: serving, one operation.
    const short = await getJson<StatusBody>(`${url}/status?wait_drained=0.2`);
    assert.equal(short.body.shutting_down, false);
    assert.equal(short.body.in_progress_operations, 1);
    server.requestDrain('annotation');
    const draining = await getJson<StatusBody>(`${url}/status`);
    assert.equal(draining.body.shutting_down, true);
    assert.equal(draining.body.in_progress_operations, 1);
    assert.equal(answered, false, 'held while the apply runs');
    const r = await run;
    assert.ok(r.started && r.value.exitCode === 0);
    const drained = await held;
    assert.equal(drained.status, 200);
    assert.deepEqual(Object.keys(drained.body).slice(0, 3), ['shutting_down', 'in_progress_operations', 'version']);
    assert.equal(drained.body.shutting_down, true);
    assert.equal(drained.body.in_progress_operations, 0);
    // Drained is final: later waits answer at once.
    assert.equal((await getJson<StatusBody>(`${url}/status?wait_drained=60`)).body.in_progress_operations, 0);
    server.requestDrain('signal');
    assert.equal(await server.waitForExit(), 0);
  });

  it('SIGKILLs terraform when it ignores SIGINT past the interrupt grace', async () => {
    const { server } = await startTestServer(['--drain-timeout', '1s', '--terraform-interrupt-grace', '1s']);
    servers.push(server);
    // A "terraform" that ignores SIGINT, to prove the escalation path.
    const run = server.runOperation({ command: 'apply', repo: 'acme/infra', pull: 1, project: 'stubborn' }, (op) =>
      server.runner.run({ jobId: op.id, command: 'sh', args: ['-c', "trap '' INT; sleep 30"], cwd: '/tmp' }),
    );
    await waitFor('process running', () => server.runner.running().length === 1);
    server.requestDrain('signal');
    const r = await run;
    assert.ok(r.started);
    assert.deepEqual([r.value.interrupted, r.value.killed, r.value.signal], [true, true, 'SIGKILL']);
    assert.equal(await server.waitForExit(), 3);
  });
});
