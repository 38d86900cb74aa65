// A Service proxy for the local cluster: a stand-in for kube-proxy (docs/local-cluster.md).
// It watches the Services and Pods of one namespace with the project's informer, derives
// each Service's Ready endpoints (endpoints.ts: the EndpointSlice controller's rules), and
// for each TCP port of each Service listens on a loopback address (one per Service, given
// by the caller or allocated, addresses.ts) and forwards each new connection to one Ready
// endpoint picked at random (forward.ts).
//
//   const proxy = await startServiceProxy({ client: kc, namespace: ns, logPath });
//   const { host, port } = proxy.addressOf('atlantis', 4141)!;   // once it listens
//   proxy.endpoints('atlantis'); proxy.stats('atlantis'); await proxy.stop();
//
// Each change of a Service's endpoints is one JSON log line ("Service endpoints changed",
// with `time` and `seq`), written after the change took effect: a connection opened after
// the line appeared uses the new endpoints. At debug level each connection is a line too.
import fs from 'node:fs';
import type { V1Pod, V1Service } from '@kubernetes/client-node';
import { apiPath } from '../../src/k8s/client.js';
import { Informer } from '../../src/k8s/informer.js';
import { type KubeClientConfig, kubeConfigFromFile } from '../../src/k8s/kubeconfig.js';
import { createLogger, type Logger, type LogLevel } from '../../src/log.js';
import { AddressPool } from './addresses.js';
import { diffEndpoints, type Endpoint, endpointsOf, type Exclusion, exclusionOf, proxiedPorts, selects } from './endpoints.js';
import { emptyStats, PortProxy, type PortStats } from './forward.js';

export type { Endpoint, Exclusion } from './endpoints.js';
export { endpointsOf, pickEndpoint, diffEndpoints, targetPortOf, exclusionOf } from './endpoints.js';
export type { PortStats } from './forward.js';

export interface ServiceProxyOptions {
  /** the API server: a kubeconfig file, or a loaded configuration */
  kubeconfigPath?: string;
  client?: KubeClientConfig;
  namespace: string;
  /** Service name -> the loopback address its ports listen on; other Services get one from 127.2.0.0/16 */
  addresses?: Record<string, string>;
  /** 'service' (default): each port listens on the Service's own port number; 'free': on a free port */
  listenPorts?: 'service' | 'free';
  /** where log lines go; or `logPath` (JSON lines appended, at `logLevel`, default info); else stderr */
  logger?: Logger;
  logPath?: string;
  logLevel?: LogLevel;
  /** an endpoint that does not accept a connection within this long fails it (default 2 s) */
  connectTimeoutMs?: number;
  /** the endpoint picker's random numbers in [0, 1) (default Math.random) */
  random?: () => number;
}

/** A removed endpoint and why it went. */
export interface RemovedEndpoint extends Endpoint {
  reason: Exclusion | 'deleted' | 'address changed' | 'service gone';
}

export interface EndpointChangeRecord {
  seq: number;
  /** ms since the epoch */
  time: number;
  service: string;
  endpoints: Endpoint[];
  added: Endpoint[];
  removed: RemovedEndpoint[];
}

export interface ServiceProxy {
  /** Where a Service port (its number or name) listens; undefined until it does. */
  addressOf(service: string, port: number | string): { host: string; port: number } | undefined;
  /** The Service's Ready endpoints as the proxy uses them now. */
  endpoints(service: string): Endpoint[];
  /** Connections of the Service so far (all its ports). */
  stats(service: string): PortStats;
  /** Every endpoint change so far, oldest first. */
  changes(): EndpointChangeRecord[];
  /** Stops watching, closes every listener and cuts every connection. */
  stop(): Promise<void>;
}

interface ServiceState {
  service: V1Service;
  host: string;
  allocated: boolean;
  /** by Service port number */
  ports: Map<number, PortProxy>;
  endpoints: Endpoint[];
  stats: PortStats;
}

const MAX_CHANGES = 10_000;

export async function startServiceProxy(opts: ServiceProxyOptions): Promise<ServiceProxy> {
  const kc = opts.client ?? (opts.kubeconfigPath ? kubeConfigFromFile(opts.kubeconfigPath) : undefined);
  if (!kc) throw new Error('startServiceProxy needs a kubeconfigPath or a client');
  const ns = opts.namespace;
  const log = (
    opts.logger ??
    createLogger({ level: opts.logLevel ?? 'info', stream: opts.logPath ? fs.createWriteStream(opts.logPath, { flags: 'a' }) : undefined })
  ).child({ component: 'service-proxy', namespace: ns });
  const random = opts.random ?? Math.random;
  const connectTimeoutMs = opts.connectTimeoutMs ?? 2_000;
  const pool = new AddressPool();
  const states = new Map<string, ServiceState>();
  const changes: EndpointChangeRecord[] = [];
  /** stats outlive a Service's deletion, so a test can read them after it */
  const statsBy = new Map<string, PortStats>();
  /** listeners closed before stop() (Service or port gone) whose open connections carry on until stop() */
  const retired = new Set<PortProxy>();
  const retire = (pp: PortProxy): Promise<void> => {
    for (const old of retired) if (old.openConnections() === 0) retired.delete(old);
    retired.add(pp);
    return pp.close(false);
  };
  let seq = 0;
  let live = false;
  let stopped = false;

  const informerOpts = { logger: log, silenceTimeoutMs: 30_000 };
  const services = new Informer<V1Service>(kc, apiPath('v1', 'services', ns), informerOpts);
  const pods = new Informer<V1Pod>(kc, apiPath('v1', 'pods', ns), informerOpts);

  const statsOf = (name: string) => {
    let s = statsBy.get(name);
    if (!s) {
      s = emptyStats();
      statsBy.set(name, s);
    }
    return s;
  };

  const whyRemoved = (svc: V1Service | undefined, e: Endpoint, now: readonly Endpoint[]): RemovedEndpoint['reason'] => {
    if (!svc) return 'service gone';
    const pod = pods.get(ns, e.podName);
    if (!pod) return 'deleted';
    const ex = exclusionOf(svc, pod);
    if (ex) return ex;
    return now.some((n) => n.servicePort === e.servicePort && n.podName === e.podName) ? 'address changed' : 'no such port';
  };

  /** Applies a new endpoint list to the Service's listeners, then logs it. */
  const applyEndpoints = (name: string, st: ServiceState, svc: V1Service | undefined, now: Endpoint[]) => {
    const { added, removed } = diffEndpoints(st.endpoints, now);
    st.endpoints = now;
    for (const [port, pp] of st.ports) pp.setEndpoints(now.filter((e) => e.servicePort === port));
    if (added.length === 0 && removed.length === 0) return;
    const rec: EndpointChangeRecord = {
      seq: ++seq,
      time: Date.now(),
      service: name,
      endpoints: now,
      added,
      removed: removed.map((e) => ({ ...e, reason: whyRemoved(svc, e, now) })),
    };
    changes.push(rec);
    if (changes.length > MAX_CHANGES) changes.splice(0, changes.length - MAX_CHANGES);
    log.info('Service endpoints changed', {
      service: name,
      seq: rec.seq,
      endpoints: rec.endpoints,
      added: rec.added,
      removed: rec.removed,
    });
  };

  const openPort = (name: string, st: ServiceState, port: number) => {
    const pp = new PortProxy({
      service: name,
      servicePort: port,
      stats: st.stats,
      connectTimeoutMs,
      random,
      onConnection: (r) => {
        const fields = { service: name, port, seq: ++seq, endpoint: r.endpoint, error: r.error };
        if (r.outcome === 'forwarded') log.debug('Connection forwarded', fields);
        else if (r.outcome === 'refused') log.debug('Connection reset: no Ready endpoint', fields);
        else log.debug('Connection reset: the endpoint did not accept it', fields);
      },
    });
    st.ports.set(port, pp);
    pp.setEndpoints(st.endpoints.filter((e) => e.servicePort === port));
    const listenPort = opts.listenPorts === 'free' ? 0 : port;
    const listening = (a: { host: string; port: number }) => {
      if (st.ports.get(port) === pp && !stopped)
        log.info('Service port listening', { service: name, port, address: `${a.host}:${a.port}` });
    };
    const cannot = (err: Error) =>
      log.error('Service port cannot listen', { service: name, port, address: `${st.host}:${listenPort}`, error: err.message });
    pp.listen(st.host, listenPort).then(listening, (err: NodeJS.ErrnoException) => {
      // A privileged port (e.g. 80) for an unprivileged user: a free port instead, as addressOf() reports.
      if (err.code !== 'EACCES' || pp.isClosed()) return cannot(err);
      log.warn('Service port is privileged, listening on a free port', { service: name, port });
      pp.listen(st.host, 0).then(listening, cannot);
    });
  };

  const dropService = (name: string, st: ServiceState) => {
    applyEndpoints(name, st, undefined, []);
    states.delete(name);
    const closing = [...st.ports.values()].map(retire);
    if (st.allocated) void Promise.all(closing).then(() => pool.release(st.host));
    log.info('Service removed', { service: name });
  };

  /** Brings one Service's listeners and endpoints in line with the caches. */
  const syncService = (name: string) => {
    const svc = services.get(ns, name);
    const ports = svc ? proxiedPorts(svc).map((p) => p.port) : [];
    let st = states.get(name);
    if (!svc || ports.length === 0) {
      if (st) dropService(name, st);
      return;
    }
    if (!st) {
      const given = opts.addresses?.[name];
      const host = given ?? pool.allocate();
      if (!host) {
        log.error('Service proxy has no address left', { service: name });
        return;
      }
      st = { service: svc, host, allocated: given === undefined, ports: new Map(), endpoints: [], stats: statsOf(name) };
      states.set(name, st);
    }
    st.service = svc;
    for (const [port, pp] of st.ports) {
      if (!ports.includes(port)) {
        st.ports.delete(port);
        void retire(pp);
      }
    }
    for (const port of ports) if (!st.ports.has(port)) openPort(name, st, port);
    applyEndpoints(name, st, svc, endpointsOf(svc, pods.list()));
  };

  services.onEvent((_t, svc) => {
    if (live && !stopped) syncService(svc.metadata?.name ?? '');
  });
  pods.onEvent((_t, pod) => {
    if (!live || stopped) return;
    const podName = pod.metadata?.name;
    const all = pods.list();
    for (const [name, st] of states) {
      // a pod matters to the Services it is selected by, or was an endpoint of
      if (selects(st.service, pod) || st.endpoints.some((e) => e.podName === podName))
        applyEndpoints(name, st, st.service, endpointsOf(st.service, all));
    }
  });

  const stop = async () => {
    if (stopped) return;
    stopped = true;
    services.stop();
    pods.stop();
    const all = [...retired, ...[...states.values()].flatMap((st) => [...st.ports.values()])];
    await Promise.all(all.map((pp) => pp.close(true)));
    retired.clear();
    states.clear();
    pool.releaseAll();
    log.info('Service proxy stopped', {});
  };

  try {
    // Both caches first, then one full sync: no endpoint change is logged from half a picture.
    await Promise.all([services.start(), pods.start()]);
  } catch (err) {
    await stop();
    throw err;
  }
  live = true;
  for (const svc of services.list()) syncService(svc.metadata?.name ?? '');
  log.info('Service proxy started', { services: states.size });

  return {
    addressOf(service, port) {
      const st = states.get(service);
      if (!st) return undefined;
      const number = typeof port === 'number' ? port : st.service.spec?.ports?.find((p) => p.name === port)?.port;
      return number === undefined ? undefined : st.ports.get(number)?.address();
    },
    endpoints: (service) => [...(states.get(service)?.endpoints ?? [])],
    stats: (service) => structuredClone(statsOf(service)),
    changes: () => changes.map((c) => structuredClone(c)),
    stop,
  };
}
