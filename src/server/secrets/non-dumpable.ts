// Makes this process non-dumpable (prctl PR_SET_DUMPABLE 0, through the tiny Node-API addon
// native/non-dumpable.c, built into dist/native/ by hack/bundle.mjs). Why: code a PR runs
// (terraform providers, local-exec, run steps) runs as the server's user, and a process of
// the same user may read another's /proc/<pid>/environ and /proc/<pid>/mem. The server's
// environment holds its secrets (the operator passes the token, the webhook secret and the
// App key as env); the child environment (child-env.ts) kept them out of terraform's own
// environ, but `cat /proc/$PPID/environ` up the parent chain still printed them. A
// non-dumpable process's /proc files belong to root and ptrace refuses it: another process of
// the same user gets "Permission denied" (root, or a process with CAP_SYS_PTRACE, still
// reads them). /proc/<pid>/cmdline and /proc/<pid>/stat stay readable (`atlantis-operator
// drain` checks them). execve() makes a process dumpable again, so children are not affected:
// terraform, git and the process host's worker (which calls this again itself) start dumpable.
import { nativeFile } from '../../native-file.js';

export type NonDumpable = { ok: true } | { ok: false; reason: string };

interface Addon {
  setNonDumpable(): void;
  isDumpable(): boolean;
}

function loadAddon(): Addon | string {
  const file = nativeFile('non-dumpable.node');
  if (!file) return 'dist/native/non-dumpable.node was not built (make build)';
  const module = { exports: {} as Addon };
  try {
    process.dlopen(module, file);
  } catch (e) {
    return `loading ${file} failed: ${(e as Error).message}`;
  }
  return module.exports;
}

/** Makes this process non-dumpable; says why not when it cannot (not Linux, the addon missing). */
export function makeNonDumpable(): NonDumpable {
  if (process.platform !== 'linux') return { ok: false, reason: `not Linux (${process.platform})` };
  const addon = loadAddon();
  if (typeof addon === 'string') return { ok: false, reason: addon };
  try {
    addon.setNonDumpable();
  } catch (e) {
    return { ok: false, reason: `prctl(PR_SET_DUMPABLE, 0) failed: ${(e as Error).message}` };
  }
  return addon.isDumpable() ? { ok: false, reason: 'the kernel kept the process dumpable' } : { ok: true };
}
