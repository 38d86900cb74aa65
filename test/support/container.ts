// Containers of the project's image for tests: the image built by `make image` (built here when
// a test file runs alone and it is missing or stale), and `podman run` with this machine kind's
// flags, its output kept, its exit code read from podman.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { OWNER_LABEL, PODMAN_RUN_FLAGS, podman, removeOrphanContainers } from '../../dev/local-node/podman.js';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const version = (JSON.parse(readFileSync(`${repo}/package.json`, 'utf8')) as { version: string }).version;

/** The image `make image` builds. */
export const IMAGE = process.env.ATLANTIS_TEST_IMAGE ?? `localhost/atlantis-operator:${version}`;

let ensured = false;
/** Builds the image unless it is up to date (a no-op under `make test`, which built it). */
export async function ensureImage(): Promise<void> {
  if (ensured) return;
  await removeOrphanContainers();
  if (!process.env.ATLANTIS_TEST_IMAGE) execFileSync('bash', [`${repo}/hack/image/build.sh`], { stdio: ['ignore', 'ignore', 'inherit'] });
  ensured = true;
}

export interface RunOptions {
  args?: string[];
  env?: Record<string, string>;
  /** host path -> container path (":ro" appended to the container path for read-only) */
  mounts?: Array<[string, string]>;
  readOnly?: boolean;
  user?: string;
  /** more `podman run` flags */
  flags?: string[];
  entrypoint?: string;
  /** nice value of the podman client, which the container's processes inherit (a niced runtime) */
  nice?: number;
}

export interface Container {
  name: string;
  child: ChildProcess;
  output(): string;
  /** The container's exit code (podman's record of it), once it ended. */
  exited: Promise<number>;
  /** Sends a signal to the container's PID 1, as a kubelet's runtime does. */
  kill(signal: 'TERM' | 'INT' | 'KILL'): Promise<void>;
  exec(args: string[], user?: string): Promise<{ code: number | null; stdout: string; stderr: string }>;
  remove(): Promise<void>;
}

/** `podman run` attached (host network, the machine kind's flags); output kept in memory. */
export function runContainer(opts: RunOptions): Container {
  const name = `ato-test-${randomUUID().slice(0, 8)}`;
  const argv = ['run', ...PODMAN_RUN_FLAGS, '--name', name, '--label', `${OWNER_LABEL}=${process.pid}`, '--network', 'host'];
  argv.push('--sig-proxy=false');
  if (opts.readOnly) argv.push('--read-only', '--read-only-tmpfs=false');
  if (opts.user) argv.push('--user', opts.user);
  if (opts.entrypoint) argv.push('--entrypoint', opts.entrypoint);
  for (const [k, v] of Object.entries(opts.env ?? {})) argv.push('--env', `${k}=${v}`);
  for (const [host, target] of opts.mounts ?? []) argv.push('--volume', `${host}:${target}`);
  argv.push(...(opts.flags ?? []), IMAGE, ...(opts.args ?? []));
  const child =
    opts.nice === undefined
      ? spawn('podman', argv, { stdio: ['ignore', 'pipe', 'pipe'] })
      : spawn('nice', ['-n', String(opts.nice), 'podman', ...argv], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<number>((resolve) => {
    child.on('exit', async (code) => {
      const r = await podman(['inspect', '--format', '{{.State.ExitCode}}', name]);
      resolve(r.code === 0 ? Number(r.stdout.trim()) : (code ?? -1));
    });
  });
  return {
    name,
    child,
    output: () => out,
    exited,
    async kill(signal) {
      await podman(['kill', '--signal', signal, name]);
    },
    exec: (args, user) => podman(['exec', ...(user ? ['--user', user] : []), name, ...args]),
    async remove() {
      await podman(['rm', '-f', '-t', '0', name]);
    },
  };
}
