// Asks a server pod's GET /status (pod IP, SERVER_PORT). A short timeout: an answer that is
// late is treated like no answer, and the planner then waits ("StatusUnreachable") rather
// than deleting a pod whose work it cannot see. With `waitDrainedSeconds` the server holds
// the answer until it is drained or the wait is over (`?wait_drained`, see drain-watch.ts).
import { httpRequest } from '../../net/http-request.js';
import { SERVER_PORT, parseStatusBody, statusRequestPath } from '../../contract/drain-protocol.js';
import type { StatusProbe } from '../types.js';

export interface ProbeOptions {
  /** On top of the wait. */
  timeoutMs?: number;
  port?: number;
  waitDrainedSeconds?: number;
  signal?: AbortSignal;
  /** Called once the request is on its way (see httpRequest's onSent). */
  onSent?: () => void;
}

export async function probeServerStatus(podIP: string, o: ProbeOptions = {}): Promise<StatusProbe> {
  const host = podIP.includes(':') ? `[${podIP}]` : podIP;
  const wait = o.waitDrainedSeconds ?? 0;
  const url = `http://${host}:${o.port ?? SERVER_PORT}${statusRequestPath(wait)}`;
  try {
    const res = await httpRequest(url, {
      method: 'GET',
      headers: { accept: 'application/json' },
      timeoutMs: (o.timeoutMs ?? 1500) + wait * 1000,
      signal: o.signal,
      onSent: o.onSent,
    });
    const at = new Date();
    if (res.status !== 200) return { ok: false, error: `HTTP ${res.status}`, at };
    return { ...parseStatusBody(res.text), at };
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    return { ok: false, error: err.code ?? err.name ?? err.message, at: new Date() };
  }
}
