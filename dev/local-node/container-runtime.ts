// Container mode of the local node: a pod's container whose image is in local container storage
// (images.ts) runs in a real container, `podman run` with runc, like a kubelet's CRI runtime:
//   - securityContext: runAsUser/runAsGroup (the container's over the pod's), runAsNonRoot
//     (checked against the image's user), fsGroup and supplementalGroups as extra groups,
//     fsGroup applied to the volumes (fsgroup.ts), readOnlyRootFilesystem, capabilities
//     add/drop, allowPrivilegeEscalation: false (no_new_privs), seccomp Unconfined;
//   - env and valueFrom resolved as for processes (env.ts), plus KUBERNETES_SERVICE_HOST/PORT
//     (the API server) for the projected ServiceAccount token's in-cluster config; values go
//     through a 0600 env file, never the command line;
//   - volumes bind-mounted at their mountPath (subPath, readOnly; secret / configMap /
//     projected / downwardAPI read-only), emptyDirs 0777 as a kubelet makes them;
//   - network: the host's (`--network host`), with ATLANTIS_BIND_ADDRESS=<pod IP> as in process
//     mode: pod IPs are loopback addresses here, and everything a pod talks to (API server,
//     Redis, the GitHub stand-in, other pods) listens on loopback, which a network namespace
//     of its own (slirp4netns, a bridge) would not reach under the same addresses. Probes
//     and the Service proxy reach the pod at its IP as for processes;
//   - CPU: the container's cgroups under the pod's cgroup (cgroups.ts) and the node's nice;
//   - output: podman's passthrough log driver writes the container's stdout and stderr
//     straight into <pod dir>/logs/<container>.log;
//   - termination: signals go to the container's PID 1 with `podman kill` (the image's tini
//     passes them to the server only); the grace period and SIGKILL are stopContainer's.
// Containers carry their owner's pid as a label: leftovers of a node killed with SIGKILL are
// removed when a node starts (podman.ts), and an exiting node removes its own synchronously.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { V1Container, V1Pod, V1Volume } from '@kubernetes/client-node';
import { sleep } from '../../src/async.js';
import { spawnGroup, type GroupProcess } from '../procs.js';
import { podCgroupOf } from './cgroups.js';
import { expandVars, resolveEnv } from './env.js';
import { applyFsGroup } from './fsgroup.js';
import type { ImageMode } from './images.js';
import { OWNER_LABEL, PODMAN_RUN_FLAGS, podman } from './podman.js';
import { errMsg, SetupError, type CRt, type NodeCtx, type PodRt } from './types.js';

/** A container of a pod, seen by the node as the process it supervises (the attached `podman run`). */
export interface PodContainer extends GroupProcess {
  readonly containerName: string;
  readonly imageId: string;
}

export const isPodContainer = (p: GroupProcess | undefined): p is PodContainer =>
  p !== undefined && typeof (p as Partial<PodContainer>).containerName === 'string';

/** The containerID a status shows: podman's container name, or the process's pid. */
export const containerIdOf = (p: GroupProcess): string => (isPodContainer(p) ? `podman://${p.containerName}` : `local://${p.pid}`);

/** Volume kinds a kubelet always mounts read-only. */
const READ_ONLY_KINDS = ['secret', 'configMap', 'projected', 'downwardAPI'] as const;
const isReadOnlyKind = (v: V1Volume | undefined) => v !== undefined && READ_ONLY_KINDS.some((k) => v[k] !== undefined);

export interface RunSpec {
  name: string;
  imageId: string;
  /** the image's configured user (USER), for runAsNonRoot */
  imageUser: string;
  pod: V1Pod;
  container: V1Container;
  /** the resolved env (for $(VAR) in command and args) */
  env: Record<string, string>;
  envFile: string;
  /** names whose values are passed through podman's own environment (multi-line values) */
  envFromClient: string[];
  /** mountPath -> host path, read-only flag */
  mounts: Array<{ host: string; target: string; readOnly: boolean }>;
  cgroupParent?: string;
  ownerPid: number;
}

/** Pure: the `podman run` arguments for a container (throws SetupError where a kubelet refuses). */
export function podmanRunArgs(s: RunSpec): string[] {
  const ps = s.pod.spec?.securityContext ?? {};
  const cs = s.container.securityContext ?? {};
  const runAsUser = cs.runAsUser ?? ps.runAsUser;
  const runAsGroup = cs.runAsGroup ?? ps.runAsGroup;
  if (cs.runAsNonRoot ?? ps.runAsNonRoot) {
    const image = s.imageUser.split(':')[0] ?? '';
    if (runAsUser === undefined && image !== '' && !/^\d+$/.test(image)) {
      throw new SetupError(
        'CreateContainerConfigError',
        `container has runAsNonRoot and image has non-numeric user (${image}), cannot verify user is non-root`,
      );
    }
    const uid = runAsUser ?? (image === '' ? 0 : Number(image));
    if (uid === 0) throw new SetupError('CreateContainerConfigError', 'container has runAsNonRoot and image will run as root');
  }
  const a = ['run', ...PODMAN_RUN_FLAGS, '--name', s.name, '--label', `${OWNER_LABEL}=${s.ownerPid}`];
  a.push('--pull=never', '--network', 'host', '--hostname', s.pod.metadata?.name ?? s.name, '--log-driver', 'passthrough');
  if (s.cgroupParent) a.push('--cgroup-parent', s.cgroupParent);
  if (runAsUser !== undefined) a.push('--user', runAsGroup !== undefined ? `${runAsUser}:${runAsGroup}` : String(runAsUser));
  else if (runAsGroup !== undefined)
    throw new SetupError('CreateContainerConfigError', 'runAsGroup without runAsUser is not supported here');
  for (const g of [...(ps.fsGroup !== undefined ? [ps.fsGroup] : []), ...(ps.supplementalGroups ?? [])]) a.push('--group-add', String(g));
  if (cs.readOnlyRootFilesystem) a.push('--read-only', '--read-only-tmpfs=false');
  for (const c of cs.capabilities?.drop ?? []) a.push('--cap-drop', c.toUpperCase() === 'ALL' ? 'all' : c);
  for (const c of cs.capabilities?.add ?? []) a.push('--cap-add', c);
  if (cs.privileged) a.push('--privileged');
  if (cs.allowPrivilegeEscalation === false) a.push('--security-opt', 'no-new-privileges');
  if ((cs.seccompProfile ?? ps.seccompProfile)?.type === 'Unconfined') a.push('--security-opt', 'seccomp=unconfined');
  if (s.container.workingDir) a.push('--workdir', s.container.workingDir);
  a.push('--env-file', s.envFile);
  for (const k of s.envFromClient) a.push('--env', k);
  for (const m of s.mounts) a.push('--volume', `${m.host}:${m.target}${m.readOnly ? ':ro' : ''}`);
  const command = (s.container.command ?? []).map((x) => expandVars(x, s.env));
  if (command.length > 0) a.push('--entrypoint', JSON.stringify(command));
  a.push(s.imageId, ...(s.container.args ?? []).map((x) => expandVars(x, s.env)));
  return a;
}

/** Pure: the env file text (single-line values) and the names passed through the client's env. */
export function envFileOf(env: Record<string, string>): { text: string; fromClient: string[] } {
  const lines: string[] = [];
  const fromClient: string[] = [];
  for (const [k, v] of Object.entries(env)) {
    if (/[\r\n]/.test(v)) fromClient.push(k);
    else lines.push(`${k}=${v}`);
  }
  return { text: lines.length ? `${lines.join('\n')}\n` : '', fromClient };
}

/** Pods whose volumes got their container-mode preparation (emptyDir modes, fsGroup). */
const prepared = new WeakSet<PodRt>();

function prepareVolumes(n: NodeCtx, rt: PodRt): void {
  if (prepared.has(rt)) return;
  const sc = rt.pod.spec?.securityContext ?? {};
  for (const v of rt.pod.spec?.volumes ?? []) {
    const dir = rt.mounts.get(v.name);
    if (!dir || v.hostPath) continue;
    if (v.emptyDir) fs.chmodSync(dir, 0o777);
    if (sc.fsGroup !== undefined) {
      const changed = applyFsGroup(dir, sc.fsGroup, { readOnly: isReadOnlyKind(v), policy: sc.fsGroupChangePolicy });
      if (changed > 0) n.log.debug('fsGroup applied', { pod: rt.name, volume: v.name, fsGroup: sc.fsGroup, changed });
    }
  }
  prepared.add(rt);
}

const live = new Set<string>();
let exitHook = false;

/** Starts a container of a pod; resolves once `podman run` is spawned. Throws SetupError for what a kubelet reports as config errors. */
export async function startPodContainer(
  n: NodeCtx,
  rt: PodRt,
  c: CRt,
  mode: Extract<ImageMode, { kind: 'container' }>,
): Promise<{ proc: PodContainer; description: string }> {
  const spec = c.spec;
  const server = new URL(n.kc.getCurrentCluster()?.server ?? 'https://127.0.0.1:443');
  const env: Record<string, string> = {
    KUBERNETES_SERVICE_HOST: server.hostname,
    KUBERNETES_SERVICE_PORT: server.port || '443',
    ATLANTIS_BIND_ADDRESS: rt.ip,
    ...(await resolveEnv(n, rt, spec)),
  };
  const volumes = new Map((rt.pod.spec?.volumes ?? []).map((v) => [v.name, v]));
  const mounts: RunSpec['mounts'] = [];
  for (const m of spec.volumeMounts ?? []) {
    const host = rt.mounts.get(m.name);
    if (!host) throw new SetupError('CreateContainerConfigError', `volume "${m.name}" of volumeMount ${m.mountPath} is not set up`);
    const src = m.subPath ? path.join(host, m.subPath) : host;
    if (m.subPath) fs.mkdirSync(src, { recursive: true });
    mounts.push({ host: src, target: m.mountPath, readOnly: Boolean(m.readOnly) || isReadOnlyKind(volumes.get(m.name)) });
  }
  prepareVolumes(n, rt);
  const name = `ato-${rt.uid.slice(0, 8)}-${spec.name}-${c.restartCount}`.slice(0, 63);
  const envDir = path.join(rt.dir, 'container-env');
  fs.mkdirSync(envDir, { recursive: true, mode: 0o700 });
  const envFile = path.join(envDir, `${spec.name}.env`);
  const { text, fromClient } = envFileOf(env);
  fs.writeFileSync(envFile, text, { mode: 0o600 });
  const cgroupParent = n.podCgroup ? `/${path.relative('/sys/fs/cgroup/cpu', path.dirname(podCgroupOf(n, rt)))}` : undefined;
  const args = podmanRunArgs({
    name,
    imageId: mode.id,
    imageUser: mode.user,
    pod: rt.pod,
    container: spec,
    env,
    envFile,
    envFromClient: fromClient,
    mounts,
    ...(cgroupParent ? { cgroupParent } : {}),
    ownerPid: process.pid,
  });
  // A container left by an earlier start of this name (the node restarted) would block it.
  await podman(['rm', '-f', '-t', '0', name]);
  const clientEnv: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin' };
  for (const k of fromClient) clientEnv[k] = env[k]!;
  const logFile = path.join(rt.dir, 'logs', `${spec.name}.log`);
  const fd = fs.openSync(logFile, 'a');
  let group: GroupProcess;
  try {
    // The pod's nice, absolute as for processes (nice -n is relative to this process's own);
    // conmon, runc and the container's processes inherit it.
    const delta = n.podNice === 0 ? 0 : n.podNice - os.getPriority();
    const argv = delta !== 0 ? ['nice', '-n', String(delta), 'podman', ...args] : ['podman', ...args];
    group = spawnGroup(argv[0]!, argv.slice(1), { cwd: rt.dir, env: clientEnv, stdio: ['ignore', fd, fd] });
  } finally {
    fs.closeSync(fd);
  }
  live.add(name);
  if (!exitHook) {
    exitHook = true;
    process.on('exit', () => {
      // Synchronous: the node's own containers must not outlive it.
      if (live.size > 0) {
        try {
          execFileSync('podman', ['rm', '-f', '-t', '0', ...live], { stdio: 'ignore', timeout: 30_000 });
        } catch {
          // removed at the next node start (removeOrphanContainers)
        }
      }
    });
  }
  return { proc: podContainer(n, name, mode.id, group, cgroupParent), description: `podman ${args.join(' ')}` };
}

function podContainer(n: NodeCtx, name: string, imageId: string, group: GroupProcess, cgroupParent: string | undefined): PodContainer {
  let running = true;
  // Running once podman says so: a signal before that would find no container to kill.
  const ready = (async () => {
    for (let i = 0; i < 600 && group.isRunning(); i++) {
      const r = await podman(['inspect', '--format', '{{.State.Running}}', name], 10_000);
      if (r.code === 0 && r.stdout.trim() === 'true') return true;
      await sleep(100);
    }
    return false;
  })();
  const exited = group.exited.then(async ({ code }) => {
    const r = await podman(['inspect', '--format', '{{.State.ExitCode}}', name]);
    await podman(['rm', '-f', '-t', '0', name]);
    live.delete(name);
    running = false;
    if (cgroupParent) removeConmonCgroups(cgroupParent);
    const exitCode = r.code === 0 ? Number(r.stdout.trim()) : code;
    if (r.code !== 0) n.log.warn('Container ended without a record of its exit', { container: name, clientExit: code });
    return { code: Number.isFinite(exitCode) ? exitCode : code, signal: null };
  });
  const signal = (sig: NodeJS.Signals): boolean => {
    if (!running) return false;
    void ready.then(async (ok) => {
      if (!ok || !running) return;
      const r = await podman(['kill', '--signal', sig, name], 30_000);
      if (r.code !== 0 && running) n.log.warn('podman kill failed', { container: name, signal: sig, err: r.stderr.trim() });
    });
    return true;
  };
  const stop = async (graceMs: number): Promise<void> => {
    if (!running) return;
    signal('SIGTERM');
    const t = setTimeout(() => signal('SIGKILL'), graceMs);
    await exited;
    clearTimeout(t);
  };
  return { child: group.child, pid: group.pid, exited, signal, stop, isRunning: () => running, containerName: name, imageId };
}

/** Runs a command in a running container (exec probe, exec hook); resolves with its exit code, null when it ran out of time. */
export async function execInContainer(proc: PodContainer, command: string[], timeoutMs: number, logFile: string): Promise<number | null> {
  const fd = fs.openSync(logFile, 'a');
  let p: GroupProcess;
  try {
    p = spawnGroup('podman', ['exec', proc.containerName, ...command], {
      stdio: ['ignore', fd, fd],
      env: { PATH: process.env.PATH ?? '' },
    });
  } finally {
    fs.closeSync(fd);
  }
  const t = setTimeout(() => p.signal('SIGKILL'), Math.max(1, timeoutMs));
  const r = await p.exited;
  clearTimeout(t);
  return r.signal ? null : r.code;
}

/** conmon's cgroups under a pod's (each hierarchy) and the pod's in the hierarchies other than cpu (cgroups.ts owns that one). */
function removeConmonCgroups(parent: string): void {
  for (const h of hierarchies()) {
    for (const d of [path.join(h, parent, 'conmon'), ...(path.basename(h) === 'cpu' ? [] : [path.join(h, parent)])]) {
      try {
        fs.rmdirSync(d);
      } catch {
        // in use (another container of the pod) or gone
      }
    }
  }
}

/** At node stop: the node's cgroup in the hierarchies other than cpu, which runc made for the containers' parents. */
export function removeNodeContainerCgroups(n: NodeCtx): void {
  if (!n.podCgroup) return;
  const rel = path.relative('/sys/fs/cgroup/cpu', path.dirname(n.podCgroup));
  for (const h of hierarchies()) {
    if (path.basename(h) === 'cpu') continue;
    const top = path.join(h, rel);
    try {
      for (const pod of fs.readdirSync(top, { withFileTypes: true }).filter((d) => d.isDirectory())) {
        fs.rmdirSync(path.join(top, pod.name, 'conmon'), { recursive: false });
      }
    } catch {
      // nothing there
    }
    try {
      for (const pod of fs.readdirSync(top, { withFileTypes: true }).filter((d) => d.isDirectory())) fs.rmdirSync(path.join(top, pod.name));
      fs.rmdirSync(top);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') n.log.debug('cgroup left', { dir: top, err: errMsg(e) });
    }
  }
}

function hierarchies(): string[] {
  try {
    return fs
      .readdirSync('/sys/fs/cgroup', { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => path.join('/sys/fs/cgroup', d.name));
  } catch {
    return [];
  }
}
