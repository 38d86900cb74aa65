// Cross-site request protection of the web page's actions (discard a lock, the apply lock).
// The page has no session cookie: with --web-basic-auth a browser sends the credentials with
// any request to this server, also one a page of another site makes it send, so an action is
// refused unless the browser says the request comes from this server's own pages. Browsers
// say so in Sec-Fetch-Site (every current browser, on HTTPS and loopback) or, without it, in
// Origin (sent with every POST and DELETE). A request with neither comes from no browser
// (curl, a script: Atlantis's API-style `DELETE /locks?id=` callers) and cannot have been
// forged by a page, so it goes on. A GET never changes state, so it is never checked. Pure.

export interface RequestFacts {
  method: string;
  /** Sec-Fetch-Site as sent. */
  fetchSite: string | undefined;
  /** Origin as sent. */
  origin: string | undefined;
  /** Host as sent: the browser's origin for a page of this server when no proxy rewrote it. */
  host: string | undefined;
  /** Origins that are this server besides its Host (--atlantis-url's, when a proxy in front rewrites Host). */
  ownOrigins: readonly string[];
}

export type CrossSiteDecision = { kind: 'allowed' } | { kind: 'refused'; reason: string };

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export function decideCrossSite(r: RequestFacts): CrossSiteDecision {
  if (SAFE_METHODS.has(r.method.toUpperCase())) return { kind: 'allowed' };
  if (r.fetchSite !== undefined) {
    // `none`: the user opened it (typed, bookmarked); same-site is not enough: another port or
    // a sibling host name is another origin, possibly someone else's.
    if (r.fetchSite === 'same-origin' || r.fetchSite === 'none') return { kind: 'allowed' };
    return { kind: 'refused', reason: `Sec-Fetch-Site: ${r.fetchSite}` };
  }
  if (r.origin === undefined) return { kind: 'allowed' };
  const origin = originOf(r.origin);
  if (origin === undefined) return { kind: 'refused', reason: `Origin: ${r.origin}` };
  const u = new URL(origin);
  if (r.host !== undefined && hostOf(u.protocol, r.host) === u.host) return { kind: 'allowed' };
  if (r.ownOrigins.some((o) => originOf(o) === origin)) return { kind: 'allowed' };
  return { kind: 'refused', reason: `Origin: ${r.origin}` };
}

/** A Host header as URL.host has it for that scheme (lower case, its default port left out). */
function hostOf(protocol: string, host: string): string | undefined {
  try {
    return new URL(`${protocol}//${host}`).host;
  } catch {
    return undefined;
  }
}

/** `scheme://host[:port]` of a URL, normalised (lower case, default port left out); undefined for `null` or junk. */
export function originOf(url: string): string | undefined {
  try {
    const u = new URL(url);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.origin : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether an action's caller is a page (a form of this web UI: answered with a redirect to
 * the page that shows the result) rather than a script (answered with Atlantis's text): the
 * Accept header names text/html, which browsers send for a form and no HTTP client by default.
 */
export function prefersHtml(accept: string | undefined): boolean {
  if (accept === undefined) return false;
  return accept.split(',').some((part) => {
    const [type, ...params] = part.split(';').map((x) => x.trim().toLowerCase());
    const q = params.find((p) => p.startsWith('q='));
    return type === 'text/html' && (q === undefined || Number(q.slice(2)) > 0);
  });
}
