// What keeps a test process alive after its last test. A file whose after() hooks are done
// but whose process does not exit runs into the runner's per-file timeout (600 s under
// `make test`) with no word of why. reportOpenHandlesAfter(), called at the end of the file's
// last after() hook, makes such a file say what it was:
//
//   - still running `ms` later (something ref'd keeps the event loop going): every active
//     handle, with its addresses, pid or timer, on stderr (which the runner shows);
//   - exiting with a handle Node.js itself lost (e.g. a socket whose resetAndDestroy()
//     failed: Node.js then never closes its handle, and the process spins in its exit cleanup
//     for good, where no timer fires any more): the same list, from the 'exit' event.
//
// Both only write when something is left; the timer is unref'd, so it never holds the process up.
import { ChildProcess } from 'node:child_process';
import net from 'node:net';

type ActiveHandlesProcess = NodeJS.Process & { _getActiveHandles?: () => unknown[] };

/** The handles that keep this process alive, one line each (its own stdin/stdout/stderr left out). */
export function describeOpenHandles(): string[] {
  const handles = (process as ActiveHandlesProcess)._getActiveHandles?.() ?? [];
  return handles.filter((h) => !isOwnStdio(h)).map(describeHandle);
}

function handleOf(s: net.Socket): { constructor?: { name?: string }; fd?: number } | null | undefined {
  return (s as unknown as { _handle?: { constructor?: { name?: string }; fd?: number } | null })._handle;
}

function isOwnStdio(h: unknown): boolean {
  if (!(h instanceof net.Socket)) return false;
  const fd = handleOf(h)?.fd;
  return fd !== undefined && fd >= 0 && fd <= 2;
}

function describeHandle(h: unknown): string {
  if (h instanceof ChildProcess)
    return `child process ${h.pid}: ${h.spawnargs.slice(0, 4).join(' ')} (exit code ${h.exitCode}, signal ${h.signalCode})`;
  if (h instanceof net.Server) {
    const a = h.address();
    return `server ${typeof a === 'object' && a ? `${a.address}:${a.port}` : String(a)} (listening ${h.listening})`;
  }
  if (h instanceof net.Socket) {
    const handle = handleOf(h);
    if (!handle && h.destroyed) return 'a destroyed socket whose handle Node.js never closed (a failed resetAndDestroy() leaves one)';
    const ends = h.remotePort ? `${h.localAddress}:${h.localPort} -> ${h.remoteAddress}:${h.remotePort}` : `fd ${handle?.fd ?? '?'}`;
    return `socket (${handle?.constructor?.name ?? 'no handle'}) ${ends}, destroyed ${h.destroyed}, readable ${h.readable}, writable ${h.writable}`;
  }
  const name = (h as { constructor?: { name?: string } } | null)?.constructor?.name ?? typeof h;
  if (name === 'Timeout') {
    const t = h as { _idleTimeout?: number; _onTimeout?: { name?: string; toString(): string } };
    return `timer of ${t._idleTimeout} ms: ${t._onTimeout?.name || t._onTimeout?.toString().slice(0, 160).replace(/\s+/g, ' ')}`;
  }
  return name;
}

/**
 * Call at the end of the file's last after() hook. If this process is still running `ms` from
 * now, or exits with handles still open, writes what they are (and `extra()`, e.g. a proxy's
 * counters) to stderr, prefixed with `label`.
 */
export function reportOpenHandlesAfter(ms: number, label: string, extra?: () => unknown): void {
  const armed = Date.now();
  const report = (why: string, lines: string[]) => {
    let more = '';
    try {
      more = extra ? `\n${label}: ${JSON.stringify(extra())}` : '';
    } catch (e) {
      more = `\n${label}: ${(e as Error).message}`;
    }
    process.stderr.write(
      `${label}: ${why}; active resources ${JSON.stringify(process.getActiveResourcesInfo())}:\n` +
        `${lines.map((l) => `  ${l}`).join('\n')}${more}\n`,
    );
  };
  setTimeout(
    () => report(`the process is still running ${Date.now() - armed} ms after its last after() hook`, describeOpenHandles()),
    ms,
  ).unref();
  process.once('exit', () => {
    const lines = describeOpenHandles();
    if (lines.length > 0) report('the process exits with handles still open (it may never get out of its exit cleanup)', lines);
  });
}
