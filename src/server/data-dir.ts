// The data dir holds the lock store, plan files, job logs (terraform's output), working copies
// and the pid file: nobody but the server's user may read it. The server makes it 0700 at each
// start (also when it already existed with looser modes), and the CLI sets the process umask to
// PRIVATE_UMASK before it creates anything, so every file the server, git or terraform create
// is 0600 (directories 0700) whatever umask the server was started with.
import { chmodSync, lstatSync, readdirSync } from 'node:fs';
import path from 'node:path';

export const PRIVATE_UMASK = 0o077;

/**
 * chmod 0700 the data dir, and 0600 its top-level files left readable by an older version.
 * Returns why the data dir's own mode could not be changed, if so: a volume's root may belong
 * to root (Kubernetes' fsGroup changes only its group), and the server must still start; what
 * it creates inside stays private through the umask.
 */
export function secureDataDir(dataDir: string): string | undefined {
  let problem: string | undefined;
  try {
    chmodSync(dataDir, 0o700);
  } catch (e) {
    problem = (e as NodeJS.ErrnoException).code ?? String(e);
  }
  for (const name of readdirSync(dataDir)) {
    const file = path.join(dataDir, name);
    const st = lstatSync(file, { throwIfNoEntry: false });
    if (st?.isFile() && (st.mode & 0o077) !== 0) {
      try {
        chmodSync(file, 0o600);
      } catch (e) {
        problem ??= `${name}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`;
      }
    }
  }
  return problem;
}
