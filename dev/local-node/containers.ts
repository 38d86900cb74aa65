// A container's process: start (with its env, mounts, log file and CPU weight; in a real
// container when its image is in local container storage: images.ts, container-runtime.ts),
// exit and restart with CrashLoopBackOff, and stop like kubelet (preStop hook, SIGTERM, the
// grace period, SIGKILL).
import fs from 'node:fs';
import path from 'node:path';
import type { V1HTTPGetAction } from '@kubernetes/client-node';
import { sleep } from '../../src/async.js';
import { backoffDelay } from '../../src/backoff.js';
import { spawnGroup, type GroupProcess } from '../procs.js';
import { deprioritize } from './cgroups.js';
import { containerIdOf, startPodContainer } from './container-runtime.js';
import { containerArgv, mountMap, processEnv } from './env.js';
import { imageMode } from './images.js';
import { httpProbe, portOf, runExec, startProbes, stopProbes } from './probes.js';
import { errMsg, now, SetupError, type CRt, type NodeCtx, type NodeEvent, type NodeEventType, type PodRt } from './types.js';

const SIGNUM: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGABRT: 6, SIGKILL: 9, SIGSEGV: 11, SIGPIPE: 13, SIGTERM: 15 };

const starting = new WeakSet<CRt>();

export async function startContainer(n: NodeCtx, rt: PodRt, c: CRt): Promise<void> {
  if (rt.terminating || n.stopped) return;
  const mode = await imageMode(n, c.spec);
  if (rt.terminating || n.stopped || c.proc) return;
  if (mode.kind === 'missing') {
    // This node has no image registry: local container storage and the project's build.
    c.imagePullAttempts++;
    if (mode.reason === 'ErrImageNeverPull') {
      c.waitingReason = mode.reason;
      c.waitingMessage = mode.message;
    } else {
      c.waitingReason = c.imagePullAttempts <= 1 ? 'ErrImagePull' : 'ImagePullBackOff';
      c.waitingMessage = c.imagePullAttempts <= 1 ? mode.message : `Back-off pulling image "${c.spec.image}"`;
    }
    return;
  }
  if (mode.kind === 'container') {
    // Starting takes several podman calls: a sync or a restart timer meanwhile must not start it twice.
    if (starting.has(c)) return;
    starting.add(c);
    let started: Awaited<ReturnType<typeof startPodContainer>>;
    try {
      started = await startPodContainer(n, rt, c, mode);
    } catch (err) {
      c.waitingReason = err instanceof SetupError ? err.reason : 'CreateContainerConfigError';
      c.waitingMessage = errMsg(err);
      return;
    } finally {
      starting.delete(c);
    }
    running(n, rt, c, started.proc, started.description);
    // Deleted while it was being created: stopContainer found nothing to stop then.
    if (rt.terminating || n.stopped) void started.proc.stop(2_000);
    return;
  }
  let argv: string[];
  let env: Record<string, string>;
  try {
    env = await processEnv(n, rt, c.spec);
    argv = containerArgv(n, c.spec, env, mountMap(n, rt, c.spec));
    if (argv[1] === n.cliPath && !fs.existsSync(n.cliPath)) {
      throw new SetupError('CreateContainerError', `${n.cliPath} does not exist (run \`make build\`)`);
    }
  } catch (err) {
    c.waitingReason = err instanceof SetupError ? err.reason : 'CreateContainerConfigError';
    c.waitingMessage = errMsg(err);
    return;
  }
  if (rt.terminating || n.stopped || c.proc) return;
  const logFile = path.join(rt.dir, 'logs', `${c.spec.name}.log`);
  const fd = fs.openSync(logFile, 'a');
  let proc: GroupProcess;
  try {
    proc = spawnGroup(argv[0]!, argv.slice(1), { cwd: path.join(rt.dir, 'cwd'), env, stdio: ['ignore', fd, fd] });
  } finally {
    fs.closeSync(fd);
  }
  deprioritize(n, rt, proc);
  running(n, rt, c, proc, argv.join(' '));
}

/** The container runs (a process, or podman's for a container): state, event, exit watch, probes. */
function running(n: NodeCtx, rt: PodRt, c: CRt, proc: GroupProcess, message: string): void {
  c.proc = proc;
  c.state = 'running';
  c.startedAt = now();
  c.startedMs = Date.now();
  c.terminated = undefined;
  c.ready = false;
  c.started = !c.spec.startupProbe;
  c.waitingReason = '';
  c.waitingMessage = undefined;
  n.record({
    type: 'ContainerStarted',
    namespace: rt.namespace,
    pod: rt.name,
    uid: rt.uid,
    container: c.spec.name,
    pid: proc.pid,
    message,
  });
  void proc.exited.then(({ code, signal }) => onExit(n, rt, c, proc, code, signal));
  startProbes(n, rt, c);
  n.scheduleStatus(rt);
}

export function onExit(n: NodeCtx, rt: PodRt, c: CRt, proc: GroupProcess, code: number | null, signal: NodeJS.Signals | null): void {
  if (c.proc !== proc) return;
  c.proc = undefined;
  stopProbes(c);
  const exitCode = code ?? 128 + (signal ? (SIGNUM[signal] ?? 0) : 0);
  c.terminated = {
    exitCode,
    ...(signal ? { signal: SIGNUM[signal] ?? 0 } : {}),
    reason: exitCode === 0 ? 'Completed' : 'Error',
    startedAt: c.startedAt ?? now(),
    finishedAt: now(),
    containerID: containerIdOf(proc),
  };
  c.state = 'terminated';
  c.ready = false;
  c.started = false;
  n.record({
    type: 'ContainerExited',
    namespace: rt.namespace,
    pod: rt.name,
    uid: rt.uid,
    container: c.spec.name,
    pid: proc.pid,
    exitCode: code,
    signal,
  });
  n.scheduleStatus(rt);
  if (rt.terminating || n.stopped || rt.evicted) return;
  const policy = rt.pod.spec?.restartPolicy ?? 'Always';
  const restart = policy === 'Always' || (policy === 'OnFailure' && exitCode !== 0);
  if (!restart) return;
  // kubelet: the backoff resets after a container ran 10 minutes without a problem
  if (c.startedMs && Date.now() - c.startedMs > 600_000) c.backoffSteps = 0;
  // kubelet: doubled per crash, at most 5 minutes
  const delay = backoffDelay(c.backoffSteps, n.backoffBase, 300_000);
  c.backoffSteps++;
  c.lastTerminated = c.terminated;
  c.state = 'waiting';
  c.waitingReason = 'CrashLoopBackOff';
  c.waitingMessage = `back-off ${Math.round(delay / 1000)}s restarting failed container=${c.spec.name} pod=${rt.name}_${rt.namespace}(${rt.uid})`;
  c.restartTimer = setTimeout(() => {
    c.restartTimer = undefined;
    if (rt.terminating || n.stopped) return;
    c.restartCount++;
    void startContainer(n, rt, c);
  }, delay);
  c.restartTimer.unref();
}

export async function stopContainer(n: NodeCtx, rt: PodRt, c: CRt): Promise<void> {
  const proc = c.proc;
  if (!proc) return;
  const ev = (type: NodeEventType, extra: Partial<NodeEvent> = {}) =>
    n.record({ type, namespace: rt.namespace, pod: rt.name, uid: rt.uid, container: c.spec.name, pid: proc.pid, ...extra });
  const hook = c.spec.lifecycle?.preStop;
  if (hook && !rt.removed) {
    ev('PreStopStarted');
    let result = '';
    try {
      const left = rt.deadline - Date.now();
      if (hook.exec) result = `exit code ${await runExec(n, rt, c, hook.exec, left, 'prestop')}`;
      else if (hook.httpGet)
        result = `http ${(await httpProbe(rt.ip, portOf(c.spec, hook.httpGet.port), hook.httpGet as V1HTTPGetAction, left)) ? 'ok' : 'failed'}`;
      else if (hook.sleep) await sleep(Math.min(left, hook.sleep.seconds * 1000));
    } catch (err) {
      result = `failed: ${errMsg(err)}`;
    }
    ev('PreStopFinished', { message: result });
    // kubelet grants 2 s more when the hook used up the grace period
    if (rt.deadline - Date.now() < 2_000) rt.deadline = Date.now() + 2_000;
  }
  if (proc.isRunning() && proc.signal('SIGTERM')) ev('SIGTERM sent');
  for (let i = 0; proc.isRunning() && i < 1_000_000; i++) {
    const left = rt.deadline - Date.now();
    if (left <= 0) break;
    await Promise.race([proc.exited, sleep(Math.min(left, 100))]);
  }
  if (proc.isRunning()) {
    if (proc.signal('SIGKILL')) ev('SIGKILL sent');
    await Promise.race([proc.exited, sleep(10_000)]);
  }
  // whatever else the process left in its group
  proc.signal('SIGKILL');
}
