// The controller as real processes (dist/atlantis-operator.cjs) against the local API server: two
// replicas with --leader-elect, exactly one reports atlantis_operator_leader 1; SIGTERM on the
// leader exits 0 and releases the Lease so the standby takes over at its next poll; a
// SIGKILLed leader is replaced after the lease duration; a leader whose Lease is taken away
// exits 1; without --leader-elect it leads at once; bad flags exit 2 with one line.
// Each process watches only a fresh namespace, so it never touches other tests' objects.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { apiPath, kubeRequest, kubeRequestOk } from '../src/k8s/client.js';
import type { Lease } from '../src/controller/leader-election.js';
import { buildControllerConfig, CONTROLLER_FLAGS } from '../src/controller/main.js';
import { parseFlags } from '../src/config/flags.js';
import { type CliProcess, runCli, startCli, waitForHttp } from './support/cli.js';
import { childList } from './support/children.js';
import { deleteNamespace, freshNamespace, getCluster, waitFor, waitForCrdEstablished, type TestCluster } from './support/k8s.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CRD_PATH = path.join(root, 'crds/atlantisdeployments.atlantis-operator.dev.yaml');

let cluster: TestCluster;
let ns: string;
const procs = childList();
let leaseCounter = 0;

before(async () => {
  cluster = await getCluster();
  // The reconciler's informers list AtlantisDeployments: the CRD must be served.
  const r = await cluster.kubectl([
    'apply',
    '--server-side',
    '--force-conflicts',
    '--field-manager',
    'atlantis-operator-tests',
    '-f',
    CRD_PATH,
  ]);
  assert.equal(r.exitCode, 0, `CRD apply: ${r.stderr}`);
  await waitForCrdEstablished(cluster.kc, 'atlantisdeployments.atlantis-operator.dev');
  ns = await freshNamespace('ctrl-process');
});

after(async () => {
  procs.killAll();
  if (ns) await deleteNamespace(ns);
});

interface Replica {
  p: CliProcess;
  url: string;
}

/**
 * A free port on 127.0.0.1. Not a fixed 127.0.N.M:8080: the local node gives pods loopback
 * addresses in 127.1.0.0/16, and other test files may run controllers of their own.
 */
async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

async function startReplica(lease: string, extra: string[] = [], leaderElect = true): Promise<Replica> {
  const addr = `127.0.0.1:${await freePort()}`;
  const args = [
    'controller',
    ...(leaderElect ? ['--leader-elect'] : []),
    '--kubeconfig',
    cluster.kubeconfigPath,
    '--metrics-bind-address',
    addr,
    '--namespace',
    ns,
    '--leader-election-namespace',
    ns,
    '--leader-election-id',
    lease,
    ...extra,
  ];
  const p = startCli(args);
  procs.push(p);
  return { p, url: `http://${addr}` };
}

async function leaderGauge(r: Replica): Promise<number | undefined> {
  try {
    const res = await fetch(`${r.url}/metrics`, { signal: AbortSignal.timeout(2_000) });
    const m = /^atlantis_operator_leader (\d+)$/m.exec(await res.text());
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

async function readyz(r: Replica): Promise<{ status: number; body: { status?: string; leader?: boolean } }> {
  const res = await fetch(`${r.url}/readyz`, { signal: AbortSignal.timeout(2_000) });
  return { status: res.status, body: (await res.json()) as { status?: string; leader?: boolean } };
}

async function getLease(name: string): Promise<Lease> {
  return kubeRequestOk<Lease>(cluster.kc, 'GET', apiPath('coordination.k8s.io/v1', 'leases', ns, name));
}

async function exitOf(r: Replica, timeoutMs: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`process did not exit within ${timeoutMs} ms:\n${r.p.output()}`)), timeoutMs);
  });
  try {
    return await Promise.race([r.p.exited, t]);
  } finally {
    clearTimeout(timer);
  }
}

/** Every log line is SPEC 8 JSON: level, time, constant capitalised msg without a final period. */
function assertJsonLogs(output: string): Array<Record<string, unknown>> {
  const lines = output.split('\n').filter((l) => l.trim() !== '');
  assert.ok(lines.length > 0);
  return lines.map((l) => {
    const o = JSON.parse(l) as Record<string, unknown>;
    assert.ok(typeof o.level === 'string' && typeof o.time === 'string', l);
    assert.match(String(o.msg), /^[A-Z][^\n]*[^.]$/, l);
    for (const k of Object.keys(o)) assert.match(k, /^[a-z][a-zA-Z0-9]*$/, `key ${k} in ${l}`);
    return o;
  });
}

/** Waits until `r` reports leader 1; fails with the process's output when it does not (or died). */
async function leads(r: Replica, timeoutMs: number, intervalMs: number): Promise<void> {
  try {
    await waitFor(
      'atlantis_operator_leader 1',
      async () => {
        if (r.p.child.exitCode !== null || r.p.child.signalCode !== null)
          throw new Error(`exited (${r.p.child.exitCode ?? r.p.child.signalCode})`);
        return (await leaderGauge(r)) === 1;
      },
      { timeoutMs, intervalMs },
    );
  } catch (e) {
    throw new Error(`${r.url}: ${(e as Error).message}; output:\n${r.p.output().slice(-4000)}`);
  }
}

/** Waits until exactly one of `rs` reports leader 1 and all the others 0. */
async function oneLeader(rs: Replica[], timeoutMs: number): Promise<Replica> {
  return waitFor(
    'exactly one leader on /metrics',
    async () => {
      const g = await Promise.all(rs.map(leaderGauge));
      if (g.filter((x) => x === 1).length === 1 && g.filter((x) => x === 0).length === rs.length - 1) return rs[g.indexOf(1)];
      return undefined;
    },
    { timeoutMs, intervalMs: 50 },
  );
}

describe('controller processes with --leader-elect', () => {
  it('two replicas: exactly one leads; SIGTERM on it exits 0 and the standby takes over at its next poll (default timings)', async () => {
    const lease = `ctrl-${++leaseCounter}`;
    const a = await startReplica(lease);
    await waitForHttp(`${a.url}/healthz`, 15_000);
    await leads(a, 15_000, 50);
    const b = await startReplica(lease);
    await waitForHttp(`${b.url}/healthz`, 15_000);
    const leader = await oneLeader([a, b], 15_000);
    assert.equal(leader, a);
    // Stays that way over more than one retry period (2 s by default), and both are ready:
    // the leader once its caches synced, the standby once its elector ran.
    for (let i = 0; i < 6; i++) {
      assert.deepEqual(await Promise.all([leaderGauge(a), leaderGauge(b)]), [1, 0]);
      await new Promise((r) => setTimeout(r, 500));
    }
    await waitFor('leader ready', async () => (await readyz(a)).status === 200, { timeoutMs: 15_000, intervalMs: 100 });
    assert.deepEqual((await readyz(a)).body, { status: 'ok', leader: true });
    await waitFor('standby ready', async () => (await readyz(b)).status === 200, { timeoutMs: 15_000, intervalMs: 100 });
    assert.deepEqual((await readyz(b)).body, { status: 'ok', leader: false });
    const held = await getLease(lease);
    assert.match(held.spec?.holderIdentity ?? '', /^.+_[0-9a-f-]{36}$/);
    assert.equal(held.spec?.leaseDurationSeconds, 15);
    assert.equal(held.spec?.leaseTransitions, 0);

    a.p.child.kill('SIGTERM');
    const t0 = Date.now();
    const ex = await exitOf(a, 30_000);
    const exitedAfter = Date.now() - t0;
    assert.deepEqual(ex, { code: 0, signal: null }, a.p.output());
    await leads(b, 10_000, 20);
    const takeover = Date.now() - t0;
    console.log(
      `# process: leader exited ${exitedAfter} ms after SIGTERM; standby leading ${takeover} ms after SIGTERM (retry period 2 s)`,
    );
    // well under the 15 s lease duration: the standby saw the release, it did not wait for expiry
    assert.ok(takeover <= exitedAfter + 2_000 * 1.2 + 2_000, `takeover took ${takeover} ms`);
    const lease2 = await getLease(lease);
    assert.notEqual(lease2.spec?.holderIdentity, held.spec?.holderIdentity);
    assert.equal(lease2.spec?.leaseTransitions, 1);
    await waitFor('b ready as leader', async () => (await readyz(b)).status === 200, { timeoutMs: 15_000, intervalMs: 100 });

    const logs = assertJsonLogs(a.p.output());
    const msgs = logs.map((l) => l.msg);
    for (const m of [
      'Controller started',
      'Leader lease acquired',
      'Reconciler started',
      'Reconciler stopped',
      'Leader lease released',
      'Controller stopped',
    ]) {
      assert.ok(msgs.includes(m), `missing log "${m}" in:\n${a.p.output()}`);
    }
    // the reconciler stops before the Lease is released
    assert.ok(msgs.indexOf('Reconciler stopped') < msgs.indexOf('Leader lease released'));
    assert.ok(
      logs.some(
        (l) =>
          l.msg === 'Leader lease acquired' &&
          (l.lease as { name?: string }).name === lease &&
          (l.lease as { namespace?: string }).namespace === ns,
      ),
    );

    b.p.child.kill('SIGTERM');
    assert.deepEqual(await exitOf(b, 30_000), { code: 0, signal: null }, b.p.output());
    assert.equal((await getLease(lease)).spec?.holderIdentity, '', 'released on exit');
  });

  // debug: a failure shows every election attempt in the output
  const fast = [
    '--leader-elect-lease-duration',
    '3s',
    '--leader-elect-renew-deadline',
    '2s',
    '--leader-elect-retry-period',
    '250ms',
    '--log-level',
    'debug',
  ];

  it('a SIGKILLed leader is replaced only after the lease duration', async () => {
    const lease = `ctrl-${++leaseCounter}`;
    const a = await startReplica(lease, fast);
    await leads(a, 15_000, 50);
    const b = await startReplica(lease, fast);
    await waitForHttp(`${b.url}/healthz`, 15_000);
    await oneLeader([a, b], 5_000);
    a.p.child.kill('SIGKILL');
    const t0 = Date.now();
    await exitOf(a, 10_000);
    const held = await getLease(lease);
    await leads(b, 15_000, 20);
    const takeover = Date.now() - t0;
    const now = await getLease(lease);
    assert.notEqual(now.spec?.holderIdentity, held.spec?.holderIdentity);
    // Safety from the Lease (one machine, one clock): the standby acquired it no sooner than
    // a whole lease duration after the killed leader's last renew.
    const gap = Date.parse(now.spec!.acquireTime!) - Date.parse(held.spec!.renewTime!);
    console.log(`# process: standby leading ${takeover} ms after SIGKILL, acquired ${gap} ms after the last renew (lease duration 3 s)`);
    assert.ok(gap >= 3_000, `took over ${gap} ms after the last renew`);
    assert.ok(takeover <= 3_000 + 2.4 * 250 + 2_000, `takeover took ${takeover} ms`);
    b.p.child.kill('SIGTERM');
    assert.deepEqual(await exitOf(b, 30_000), { code: 0, signal: null });
  });

  it('a leader whose Lease is taken away stops and exits 1', async () => {
    const lease = `ctrl-${++leaseCounter}`;
    const a = await startReplica(lease, fast);
    await leads(a, 15_000, 50);
    const p = apiPath('coordination.k8s.io/v1', 'leases', ns, lease);
    await waitFor(
      'lease taken by force',
      async () => {
        const l = await getLease(lease);
        return (await kubeRequest(cluster.kc, 'PUT', p, { ...l, spec: { ...l.spec, holderIdentity: 'intruder' } })).status === 200;
      },
      { timeoutMs: 10_000, intervalMs: 10 },
    );
    const ex = await exitOf(a, 30_000);
    assert.deepEqual(ex, { code: 1, signal: null }, a.p.output());
    const msgs = assertJsonLogs(a.p.output()).map((l) => l.msg);
    assert.ok(msgs.includes('Leader lease lost, exiting'), a.p.output());
    assert.ok(msgs.includes('Reconciler stopped'), a.p.output());
    assert.ok(!msgs.includes('Leader lease released'), 'a lost Lease is not released');
    assert.equal((await getLease(lease)).spec?.holderIdentity, 'intruder');
  });
});

describe('controller process without --leader-elect and with bad flags', () => {
  it('leads at once, is ready once synced, exits 0 on SIGTERM', async () => {
    const lease = `ctrl-${++leaseCounter}`;
    const a = await startReplica(lease, [], false);
    await waitForHttp(`${a.url}/healthz`, 15_000);
    assert.equal(await leaderGauge(a), 1);
    await waitFor('ready', async () => (await readyz(a)).status === 200, { timeoutMs: 15_000, intervalMs: 100 });
    const metrics = await (await fetch(`${a.url}/metrics`)).text();
    for (const m of [
      'atlantis_operator_reconcile_total',
      'atlantis_operator_workqueue_depth',
      'atlantis_operator_workqueue_queue_duration_seconds',
      'atlantis_operator_kube_api_requests_total{method="GET",code="200"}',
      'process_resident_memory_bytes',
    ])
      assert.match(metrics, new RegExp(m));
    assert.equal(
      (await kubeRequest(cluster.kc, 'GET', apiPath('coordination.k8s.io/v1', 'leases', ns, lease))).status,
      404,
      'no Lease without --leader-elect',
    );
    a.p.child.kill('SIGINT');
    assert.deepEqual(await exitOf(a, 30_000), { code: 0, signal: null }, a.p.output());
  });

  const bad: Array<[string, string[], RegExp]> = [
    ['an unknown flag', ['--leader-elect-now'], /unknown flag: --leader-elect-now/],
    ['a non-integer worker count', ['--max-concurrent-reconciles', 'many'], /--max-concurrent-reconciles: must be an integer/],
    ['zero workers', ['--max-concurrent-reconciles', '0'], /--max-concurrent-reconciles: must be between 1 and 1000/],
    ['a bad bind address', ['--metrics-bind-address', '127.0.0.1'], /--metrics-bind-address: must be host:port/],
    ['a missing kubeconfig', ['--kubeconfig', '/nonexistent/kubeconfig'], /cannot load --kubeconfig \/nonexistent\/kubeconfig/],
    [
      'a renew deadline above the lease duration',
      ['--leader-elect-renew-deadline', '20s'],
      /--leader-elect-renew-deadline.*lease duration must be greater than the renew deadline/,
    ],
    ['a bad log level', ['--log-level', 'loud'], /--log-level/],
    ['a watch silence timeout below 1s', ['--watch-silence-timeout', '500ms'], /--watch-silence-timeout: must be at least 1s/],
    [
      'a referenced content interval below 1s',
      ['--referenced-content-interval', '200ms'],
      /--referenced-content-interval: must be at least 1s/,
    ],
    ['a negative API rate limit', ['--kube-api-qps', '-5'], /--kube-api-qps: must be between 0 \(no limit\) and 100000/],
  ];
  for (const [name, args, re] of bad) {
    it(`exits 2 with one line for ${name}`, () => {
      const r = runCli(['controller', '--leader-elect', '--metrics-bind-address', '127.0.0.1:1', ...args]);
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, re);
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
      assert.match(r.stderr, /^atlantis-operator: /);
    });
  }

  it('exits 2 with one line when the metrics address is taken', async () => {
    const srv = net.createServer();
    await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', () => resolve()));
    try {
      const addr = `127.0.0.1:${(srv.address() as net.AddressInfo).port}`;
      const r = runCli(['controller', '--kubeconfig', cluster.kubeconfigPath, '--namespace', ns, '--metrics-bind-address', addr]);
      assert.equal(r.code, 2, r.stderr);
      assert.equal(r.stderr.trim(), `atlantis-operator: cannot listen on ${addr} (--metrics-bind-address): EADDRINUSE`);
    } finally {
      await new Promise<void>((r) => srv.close(() => r()));
    }
  });

  it('takes every flag from ATLANTIS_OPERATOR_* env too', () => {
    const r = runCli(['controller', '--metrics-bind-address', '127.0.0.1:1'], { ATLANTIS_OPERATOR_MAX_CONCURRENT_RECONCILES: 'x' });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /ATLANTIS_OPERATOR_MAX_CONCURRENT_RECONCILES \(--max-concurrent-reconciles\)/);
  });
});

describe('controller flags (pure)', () => {
  const cfg = (argv: string[], env: NodeJS.ProcessEnv = {}) => buildControllerConfig(parseFlags(argv, CONTROLLER_FLAGS, env).values, env);
  it('defaults: client-go timings, 16 workers, the Lease atlantis-operator-leader in atlantis-operator', () => {
    const c = cfg([]);
    assert.deepEqual(
      [
        c.host,
        c.port,
        c.leaderElect,
        c.leaderElectionNamespace,
        c.leaderElectionId,
        c.leaseDurationMs,
        c.renewDeadlineMs,
        c.retryPeriodMs,
        c.workers,
        c.namespace,
        c.kubeconfig,
      ],
      ['0.0.0.0', 8080, false, 'atlantis-operator', 'atlantis-operator-leader', 15_000, 10_000, 2_000, 16, undefined, undefined],
    );
  });
  it('the Lease namespace follows POD_NAMESPACE unless the flag is given', () => {
    assert.equal(cfg([], { POD_NAMESPACE: 'ops' }).leaderElectionNamespace, 'ops');
    assert.equal(cfg(['--leader-election-namespace', 'x'], { POD_NAMESPACE: 'ops' }).leaderElectionNamespace, 'x');
    assert.equal(cfg([], { POD_NAMESPACE: 'ops', ATLANTIS_OPERATOR_LEADER_ELECTION_NAMESPACE: 'y' }).leaderElectionNamespace, 'y');
  });
  it('reads ATLANTIS_OPERATOR_* env, the command line wins', () => {
    const env = {
      ATLANTIS_OPERATOR_LEADER_ELECT: 'true',
      ATLANTIS_OPERATOR_MAX_CONCURRENT_RECONCILES: '9',
      ATLANTIS_OPERATOR_LEADER_ELECT_RETRY_PERIOD: '500ms',
    };
    const c = cfg(['--max-concurrent-reconciles', '2'], env);
    assert.deepEqual([c.leaderElect, c.workers, c.retryPeriodMs], [true, 2, 500]);
    assert.deepEqual(
      [cfg(['--metrics-bind-address', '[::1]:9090']).host, cfg(['--metrics-bind-address', ':9090']).host],
      ['::1', '0.0.0.0'],
    );
  });
  it('watch silence timeout: 60s by default, from the flag or ATLANTIS_OPERATOR_WATCH_SILENCE_TIMEOUT', () => {
    assert.equal(cfg([]).watchSilenceTimeoutMs, 60_000);
    assert.equal(cfg(['--watch-silence-timeout', '4s']).watchSilenceTimeoutMs, 4_000);
    assert.equal(cfg([], { ATLANTIS_OPERATOR_WATCH_SILENCE_TIMEOUT: '2m' }).watchSilenceTimeoutMs, 120_000);
  });
  it('referenced content interval: 30s by default, from the flag or ATLANTIS_OPERATOR_REFERENCED_CONTENT_INTERVAL', () => {
    assert.equal(cfg([]).contentIntervalMs, 30_000);
    assert.equal(cfg(['--referenced-content-interval', '5s']).contentIntervalMs, 5_000);
    assert.equal(cfg([], { ATLANTIS_OPERATOR_REFERENCED_CONTENT_INTERVAL: '2m' }).contentIntervalMs, 120_000);
  });
  it('client-side API rate limit: off by default; burst defaults to the qps', () => {
    assert.deepEqual([cfg([]).kubeApiQps, cfg([]).kubeApiBurst], [0, 0]);
    assert.deepEqual([cfg(['--kube-api-qps', '20']).kubeApiQps, cfg(['--kube-api-qps', '20']).kubeApiBurst], [20, 20]);
    assert.equal(cfg(['--kube-api-qps', '20', '--kube-api-burst', '50']).kubeApiBurst, 50);
  });
});
