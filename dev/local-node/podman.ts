// The podman command line the local node's container mode and the image tests share: how a
// container is run on this machine kind, and podman's short commands.
import { execFile } from 'node:child_process';

/**
 * Flags every `podman run` / `podman create` here needs. runc: crun refuses the hybrid cgroup
 * v1 layout. The ulimits: podman's defaults are above what root without CAP_SYS_RESOURCE may
 * set here (`setrlimit ... operation not permitted`); these are at or below the current ones.
 */
export const PODMAN_RUN_FLAGS: readonly string[] = ['--runtime', 'runc', '--ulimit', 'nofile=16384:16384', '--ulimit', 'nproc=8192:8192'];

/** A label on every container the local node or a test starts: whose it is, so leftovers of a dead owner can be removed. */
export const OWNER_LABEL = 'dev.atlantis-operator.owner-pid';

export interface PodmanResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs one podman command to its end (bounded by timeoutMs); never throws for a non-zero exit. */
export function podman(args: string[], timeoutMs = 60_000): Promise<PodmanResult> {
  return new Promise((resolve) => {
    execFile('podman', args, { timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024, encoding: 'utf8' }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code ?? 1) : null) : 0;
      resolve({ code, stdout, stderr: stderr || (err && code === null ? err.message : '') });
    });
  });
}

/** Whether podman is installed here. */
export async function havePodman(): Promise<boolean> {
  return (await podman(['--version'], 10_000)).code === 0;
}

/** The image's ID when `ref` names an image in local container storage; undefined otherwise (or without podman). */
export async function localImageId(ref: string): Promise<string | undefined> {
  const r = await podman(['image', 'inspect', '--format', '{{.Id}}', ref], 30_000);
  return r.code === 0 ? r.stdout.trim() || undefined : undefined;
}

/** Removes the containers labelled with an owner pid that no longer runs (a node or test killed with SIGKILL). */
export async function removeOrphanContainers(): Promise<string[]> {
  const r = await podman(['ps', '-a', '--filter', `label=${OWNER_LABEL}`, '--format', `{{.ID}} {{index .Labels "${OWNER_LABEL}"}}`]);
  if (r.code !== 0) return [];
  const dead: string[] = [];
  for (const line of r.stdout.split('\n')) {
    const [id, pid] = line.trim().split(' ');
    if (!id || !pid) continue;
    if (!pidAlive(Number(pid))) dead.push(id);
  }
  if (dead.length > 0) await podman(['rm', '-f', '-t', '0', ...dead]);
  return dead;
}

function pidAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
