// Asks a server pod's GET /status (pod IP, port 4141). A short timeout: an answer that is
// late is treated like no answer, and the planner then waits ("StatusUnreachable") rather
// than deleting a pod whose work it cannot see. With `waitDrainedSeconds` the server holds
// the answer until it is drained or the wait is over (`?wait_drained`, see drain-watch.ts).
import type { ServerStatus, StatusProbe } from '../types.js';
import { SERVER_PORT } from '../types.js';

export interface ProbeOptions {
  /** On top of the wait. */
  timeoutMs?: number;
  port?: number;
  waitDrainedSeconds?: number;
  signal?: AbortSignal;
}

export async function probeServerStatus(podIP: string, o: ProbeOptions = {}): Promise<StatusProbe> {
  const host = podIP.includes(':') ? `[${podIP}]` : podIP;
  const wait = o.waitDrainedSeconds ?? 0;
  const timeout = AbortSignal.timeout((o.timeoutMs ?? 1500) + wait * 1000);
  const url = `http://${host}:${o.port ?? SERVER_PORT}/status${wait > 0 ? `?wait_drained=${wait}` : ''}`;
  try {
    const res = await fetch(url, { signal: o.signal ? AbortSignal.any([o.signal, timeout]) : timeout });
    const at = new Date();
    if (res.status !== 200) {
      await res.body?.cancel();
      return { ok: false, error: `HTTP ${res.status}`, at };
    }
    const body = (await res.json()) as Partial<ServerStatus>;
    if (typeof body.shutting_down !== 'boolean' || typeof body.in_progress_operations !== 'number') {
      return { ok: false, error: 'not an Atlantis /status answer', at };
    }
    return { ok: true, body: body as ServerStatus, at };
  } catch (e) {
    const err = e as Error & { cause?: { code?: string } };
    return { ok: false, error: err.cause?.code ?? err.name ?? err.message, at: new Date() };
  }
}
