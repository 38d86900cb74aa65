// node:https and node:tls, loaded when the first HTTPS connection is made rather than at every
// server start: a server makes no HTTPS request before its first webhook or call to its VCS.
import { createRequire } from 'node:module';
import type https from 'node:https';
import type tls from 'node:tls';

const load = createRequire(import.meta.url);
let httpsLoaded: typeof https | undefined;
let tlsLoaded: typeof tls | undefined;

export function httpsModule(): typeof https {
  httpsLoaded ??= load('node:https') as typeof https;
  return httpsLoaded;
}

export function tlsModule(): typeof tls {
  tlsLoaded ??= load('node:tls') as typeof tls;
  return tlsLoaded;
}
