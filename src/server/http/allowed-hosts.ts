// Which host names the web UI answers to: a guard against DNS rebinding. A page on a site the
// attacker controls (evil.example) makes its name resolve to this server's address, then its
// scripts send requests that the browser takes as same-origin: Origin and Host are both
// evil.example, so the cross-site check (web/csrf.ts) lets an action through, and a
// page read through it is readable by the attacker's script. A request whose Host is not one
// of this server's names is refused: the host of --atlantis-url, the names of
// --allowed-hosts (ours; `*` turns the check off), `localhost`, and any IP address (an
// address cannot be rebound: it is what the browser connects to). Checked on the web page,
// job pages and their streams and logs, and the web actions; not on the paths that other
// programs reach by whatever name or address they use and that hold no page: `/events`
// (GitHub, signed), the probes and `/status` (the kubelet and the controller, by pod IP),
// `/metrics` (Prometheus, by pod IP or Service name) and `/api/...` (its own token, which a
// page of another site does not have). Pure; table-tested in test/allowed-hosts.test.ts.
import { isIP } from 'node:net';
import { LIVENESS_PATH, READINESS_PATH, STATUS_PATH } from '../../contract/drain-protocol.js';

export interface AllowedHosts {
  /** `*` in --allowed-hosts: no check. */
  any: boolean;
  /** Lower-case host names, without a port or a final dot. */
  names: ReadonlySet<string>;
}

const normalise = (name: string): string => name.trim().toLowerCase().replace(/\.$/, '');

/** The names from --atlantis-url and --allowed-hosts (entries may carry a scheme or port: only the name counts). */
export function allowedHosts(atlantisUrl: string, extra: readonly string[]): AllowedHosts {
  const names = new Set<string>(['localhost']);
  let any = false;
  for (const raw of [atlantisUrl, ...extra]) {
    const entry = raw.trim();
    if (entry === '') continue;
    if (entry === '*') {
      any = true;
      continue;
    }
    const name = hostName(entry.includes('://') ? entry : `http://${entry}`);
    if (name !== undefined) names.add(name);
  }
  return { any, names };
}

/** The host name of a URL (IPv6 without brackets), normalised; undefined when it is no URL. */
function hostName(url: string): string | undefined {
  try {
    const h = new URL(url).hostname;
    return normalise(h.startsWith('[') ? h.slice(1, -1) : h);
  } catch {
    return undefined;
  }
}

/** Paths reached by other programs than a browser, by any name: never checked (see the header). */
export function hostChecked(path: string): boolean {
  if (path === '/events' || path === LIVENESS_PATH || path === READINESS_PATH || path === STATUS_PATH || path === '/metrics') return false;
  return !path.startsWith('/api/');
}

export type HostDecision = { kind: 'allowed' } | { kind: 'refused'; host: string };

/** Whether a request with this Host header may reach a checked path. */
export function decideHost(host: string | undefined, allowed: AllowedHosts): HostDecision {
  // No Host: HTTP/1.0 from a script; a browser always sends one.
  if (allowed.any || host === undefined || host === '') return { kind: 'allowed' };
  const name = hostName(`http://${host}`);
  if (name === undefined) return { kind: 'refused', host };
  if (isIP(name) !== 0 || allowed.names.has(name)) return { kind: 'allowed' };
  return { kind: 'refused', host };
}

/** The answer to a refused request. */
export const unknownHostMessage = (host: string): string =>
  `Forbidden: this server does not answer to the host name ${JSON.stringify(host)}; add it to --allowed-hosts if it is one of its names\n`;
