// LocalCluster lifecycle (a second, private cluster: start time, kubectl, clean stop) and the
// orphan guard: process groups die with their owner, even when the owner is SIGKILLed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LocalCluster } from '../dev/cluster.js';
import { kubeRequest } from '../src/k8s/client.js';
import { waitFor } from './support/k8s.js';

const here = path.dirname(fileURLToPath(import.meta.url));

/** Running (a zombie waiting for its reaper counts as dead). */
function alive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

test('a LocalCluster starts (etcd, kube-apiserver, kube-controller-manager), answers kubectl, and stops without leftovers', async () => {
  const cluster = new LocalCluster();
  const t0 = Date.now();
  try {
    await cluster.start();
    const secs = (Date.now() - t0) / 1000;
    process.stdout.write(`# LocalCluster.start() took ${secs.toFixed(1)} s\n`);
    assert.match(cluster.server, /^https:\/\/127\.0\.0\.1:\d+$/);
    const v = await cluster.kubectl(['version', '-o', 'json']);
    assert.equal(v.exitCode, 0, v.stderr);
    const ver = JSON.parse(v.stdout) as { serverVersion?: { gitVersion?: string } };
    assert.match(ver.serverVersion?.gitVersion ?? '', /^v1\.\d+\.\d+/);
    const ns = await cluster.kubectl(['get', 'namespaces', '-o', 'name']);
    assert.match(ns.stdout, /namespace\/default/);
    assert.match(ns.stdout, /namespace\/kube-system/);
    const ready = await kubeRequest<string>(cluster.kubeConfig, 'GET', '/readyz');
    assert.equal(ready.status, 200);
  } finally {
    const pidsBefore = collectPids(cluster);
    await cluster.stop();
    for (const pid of pidsBefore) assert.equal(alive(pid), false, `process ${pid} survived stop()`);
  }
});

function collectPids(cluster: LocalCluster): number[] {
  return ((cluster as unknown as { procs: Array<{ proc: { pid: number } }> }).procs ?? []).map((p) => p.proc.pid);
}

test('process groups are killed when their owner dies, even by SIGKILL (no orphans)', async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(here, 'fixtures/local-node/spawn-groups.ts')], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const pids = await new Promise<number[]>((resolve, reject) => {
    let buf = '';
    const t = setTimeout(() => reject(new Error('no pids within 20 s')), 20_000);
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      const m = /\{.*\}/.exec(buf);
      if (m) {
        clearTimeout(t);
        resolve((JSON.parse(m[0]) as { pids: number[] }).pids);
      }
    });
  });
  assert.equal(pids.length, 2);
  for (const p of pids) assert.ok(alive(p), `${p} should run`);
  child.kill('SIGKILL');
  await waitFor('groups killed by the reaper', () => pids.every((p) => !alive(p)), { timeoutMs: 10_000, intervalMs: 100 });
});
