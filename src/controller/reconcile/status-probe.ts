// Polls a server pod's GET /status (pod IP, port 4141). A short timeout: an answer that is
// late is treated like no answer, and the planner then waits ("StatusUnreachable") rather
// than deleting a pod whose work it cannot see.
import type { ServerStatus, StatusProbe } from '../types.js';
import { SERVER_PORT } from '../types.js';

export async function probeServerStatus(podIP: string, timeoutMs = 1500, port = SERVER_PORT): Promise<StatusProbe> {
  const host = podIP.includes(':') ? `[${podIP}]` : podIP;
  const at = new Date();
  try {
    const res = await fetch(`http://${host}:${port}/status`, { signal: AbortSignal.timeout(timeoutMs) });
    if (res.status !== 200) return { ok: false, error: `HTTP ${res.status}`, at };
    const body = (await res.json()) as Partial<ServerStatus>;
    if (typeof body.shutting_down !== 'boolean' || typeof body.in_progress_operations !== 'number') {
      return { ok: false, error: 'not an Atlantis /status answer', at };
    }
    return { ok: true, body: body as ServerStatus, at };
  } catch (e) {
    const err = e as Error & { cause?: { code?: string } };
    return { ok: false, error: err.cause?.code ?? err.name ?? err.message, at };
  }
}
