// Readiness, liveness and startup probes (httpGet on the pod's address, tcpSocket, exec), and
// exec actions run like the container's own process.
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import type { V1Container, V1ExecAction, V1HTTPGetAction, V1Probe } from '@kubernetes/client-node';
import { spawnGroup, type GroupProcess } from '../procs.js';
import { deprioritize } from './cgroups.js';
import { execInContainer, isPodContainer } from './container-runtime.js';
import { mapCommand, mountMap, processEnv } from './env.js';
import type { CRt, NodeCtx, PodRt } from './types.js';

export function stopProbes(c: CRt): void {
  for (const t of c.probeTimers) clearTimeout(t);
  c.probeTimers = [];
}

export function startProbes(n: NodeCtx, rt: PodRt, c: CRt): void {
  const proc = c.proc;
  const loop = (probe: V1Probe, kind: 'readiness' | 'liveness' | 'startup') => {
    const period = Math.max(1, probe.periodSeconds ?? 10) * 1000;
    const successThreshold = Math.max(1, probe.successThreshold ?? 1);
    const failureThreshold = Math.max(1, probe.failureThreshold ?? 3);
    let ok = 0;
    let bad = 0;
    const tick = async () => {
      if (c.proc !== proc || rt.terminating || n.stopped) return;
      if (kind !== 'startup' && !c.started) {
        schedule(period);
        return;
      }
      if (kind === 'startup' && c.started) return;
      const success = await runProbe(n, rt, c, probe);
      if (c.proc !== proc || rt.terminating || n.stopped) return;
      if (success) {
        ok++;
        bad = 0;
      } else {
        bad++;
        ok = 0;
      }
      if (kind === 'readiness') {
        if (success && ok >= successThreshold && !c.ready) {
          c.ready = true;
          n.scheduleStatus(rt);
        } else if (!success && bad >= failureThreshold && c.ready) {
          c.ready = false;
          n.scheduleStatus(rt);
        }
      } else if (kind === 'startup') {
        if (success) {
          c.started = true;
          n.scheduleStatus(rt);
          return;
        }
        if (bad >= failureThreshold) {
          void killForRestart(n, rt, c, 'startup probe failed', probe);
          return;
        }
      } else if (!success && bad >= failureThreshold) {
        void killForRestart(n, rt, c, 'liveness probe failed', probe);
        return;
      }
      schedule(period);
    };
    const schedule = (ms: number) => {
      const t = setTimeout(() => void tick(), ms);
      t.unref();
      c.probeTimers.push(t);
      if (c.probeTimers.length > 16) c.probeTimers.splice(0, c.probeTimers.length - 16);
    };
    schedule(Math.max(0, (probe.initialDelaySeconds ?? 0) * 1000));
  };
  if (c.spec.startupProbe) loop(c.spec.startupProbe, 'startup');
  if (c.spec.readinessProbe) loop(c.spec.readinessProbe, 'readiness');
  else {
    // no readiness probe: ready as soon as it started
    const t = setInterval(() => {
      if (c.proc !== proc) return clearInterval(t);
      if (c.started && !c.ready) {
        c.ready = true;
        n.scheduleStatus(rt);
        clearInterval(t);
      }
    }, 50);
    t.unref();
    c.probeTimers.push(t);
  }
  if (c.spec.livenessProbe) loop(c.spec.livenessProbe, 'liveness');
}

export async function killForRestart(n: NodeCtx, rt: PodRt, c: CRt, why: string, probe: V1Probe): Promise<void> {
  const proc = c.proc;
  if (!proc) return;
  n.record({
    type: 'LivenessFailed',
    namespace: rt.namespace,
    pod: rt.name,
    uid: rt.uid,
    container: c.spec.name,
    pid: proc.pid,
    message: why,
  });
  const grace = (probe.terminationGracePeriodSeconds ?? rt.pod.spec?.terminationGracePeriodSeconds ?? 30) * 1000;
  stopProbes(c);
  c.ready = false;
  n.scheduleStatus(rt);
  if (proc.signal('SIGTERM'))
    n.record({
      type: 'SIGTERM sent',
      namespace: rt.namespace,
      pod: rt.name,
      uid: rt.uid,
      container: c.spec.name,
      pid: proc.pid,
      message: why,
    });
  const t = setTimeout(() => {
    if (proc.isRunning() && proc.signal('SIGKILL'))
      n.record({
        type: 'SIGKILL sent',
        namespace: rt.namespace,
        pod: rt.name,
        uid: rt.uid,
        container: c.spec.name,
        pid: proc.pid,
        message: why,
      });
  }, grace);
  t.unref();
  await proc.exited;
  clearTimeout(t);
}

export async function runProbe(n: NodeCtx, rt: PodRt, c: CRt, probe: V1Probe): Promise<boolean> {
  const timeout = Math.max(1, probe.timeoutSeconds ?? 1) * 1000;
  try {
    if (probe.httpGet) return await httpProbe(rt.ip, portOf(c.spec, probe.httpGet.port), probe.httpGet, timeout);
    if (probe.tcpSocket) return await tcpProbe(rt.ip, portOf(c.spec, probe.tcpSocket.port), timeout);
    if (probe.exec) return (await runExec(n, rt, c, probe.exec, timeout)) === 0;
  } catch {
    return false;
  }
  return false;
}

export function portOf(c: V1Container, port: number | string | object): number {
  if (typeof port === 'number') return port;
  const s = String(port);
  if (/^\d+$/.test(s)) return Number(s);
  const p = (c.ports ?? []).find((x) => x.name === s);
  if (!p) throw new Error(`unknown port name ${s}`);
  return p.containerPort;
}

/** Runs an exec action (hook or probe) like the container's process: same env, cwd, mounts. Resolves with the exit code (null when killed at the timeout). */
export async function runExec(
  n: NodeCtx,
  rt: PodRt,
  c: CRt,
  action: V1ExecAction,
  timeoutMs: number,
  logPrefix?: string,
): Promise<number | null> {
  const logFile = path.join(rt.dir, 'logs', `${c.spec.name}${logPrefix ? `.${logPrefix}` : '.exec'}.log`);
  if (isPodContainer(c.proc)) return execInContainer(c.proc, action.command ?? [], timeoutMs, logFile);
  const env = await processEnv(n, rt, c.spec);
  const argv = mapCommand(n, action.command ?? [], mountMap(n, rt, c.spec));
  const fd = fs.openSync(logFile, 'a');
  let p: GroupProcess;
  try {
    p = spawnGroup(argv[0]!, argv.slice(1), { cwd: path.join(rt.dir, 'cwd'), env, stdio: ['ignore', fd, fd] });
  } finally {
    fs.closeSync(fd);
  }
  deprioritize(n, rt, p);
  const t = setTimeout(() => p.signal('SIGKILL'), Math.max(1, timeoutMs));
  const r = await p.exited;
  clearTimeout(t);
  return r.signal ? null : r.code;
}

export function httpProbe(ip: string, port: number, get: V1HTTPGetAction, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const headers: Record<string, string> = { 'user-agent': 'kube-probe/local-node' };
    for (const h of get.httpHeaders ?? []) headers[h.name] = h.value;
    // Not httpRequest: a kubelet opens a new connection per probe (no keep-alive agent) and reads only the status.
    const req = http.get({ host: ip, port, path: get.path ?? '/', headers, timeout: timeoutMs }, (res) => {
      res.resume();
      const code = res.statusCode ?? 0;
      resolve(code >= 200 && code < 400);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve(false));
  });
}

export function tcpProbe(ip: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: ip, port, timeout: timeoutMs });
    s.on('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.on('timeout', () => {
      s.destroy();
      resolve(false);
    });
    s.on('error', () => resolve(false));
  });
}
