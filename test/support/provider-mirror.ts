// A provider network mirror on a loopback address, as terraform and tofu speak to one
// (`provider_installation { network_mirror { url = ... } }`): HTTPS with a certificate made
// for that address (children trust it through SSL_CERT_FILE), `<host>/<namespace>/<type>/
// index.json`, `<version>.json` with zh: and h1: hashes, and release zips of the test provider
// built from hack/provider. Every request is recorded with the bytes sent, so a test or a bench
// can say what each init downloaded.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { repoRoot } from '../../dev/binaries.js';
import { selfSignedCert } from './github-standin-git.js';
import { goTool } from './go-tools.js';
import { type PackedRelease, packProviderRelease } from './release-zip.js';

/** The provider's namespace/type, what a config's `source` names. */
export const FIXTURE_NAMESPACE = 'atlantis-operator';
export const FIXTURE_TYPE = 'fixture';
export const FIXTURE_SOURCE = `${FIXTURE_NAMESPACE}/${FIXTURE_TYPE}`;
/** terraform's and tofu's default registry hosts: a bare `source` means one of them. */
export const DEFAULT_REGISTRY_HOSTS = ['registry.terraform.io', 'registry.opentofu.org'];

/** The version hack/provider/VERSION stamps into the build. */
export function fixtureProviderVersion(): string {
  return readFileSync(path.join(repoRoot, 'hack/provider/VERSION'), 'utf8').trim();
}

export type MirrorRequestKind = 'index' | 'version' | 'archive' | 'other';

export interface MirrorRequest {
  /** Date.now() when the answer finished. */
  at: number;
  method: string;
  path: string;
  /** The registry host the path names (registry.terraform.io, ...), if any. */
  registryHost: string | undefined;
  /** The tag of the CLI config that made the request (CliConfigOptions.tag), if any. */
  tag: string | undefined;
  kind: MirrorRequestKind;
  status: number;
  /** Body bytes sent. */
  bytes: number;
  userAgent: string;
}

export interface MirrorCounts {
  requests: number;
  /** Release zips sent whole (GET, status 200): provider downloads. terraform HEADs each first. */
  archives: number;
  /** Body bytes of every answer. */
  bytes: number;
  archiveBytes: number;
}

export interface CliConfigOptions {
  /** `plugin_cache_dir`: the shared provider cache. */
  pluginCacheDir?: string;
  /** `plugin_cache_may_break_dependency_lock_file = true` (terraform ≥ 1.4 otherwise downloads when no lock file records the hash yet). */
  pluginCacheMayBreakLockFile?: boolean;
  /**
   * Tags every request made through this config (the mirror URL gets a `/t/<tag>/` prefix),
   * so parallel inits with different configs can be told apart in `requests`.
   */
  tag?: string;
}

export interface ProviderMirror {
  /** The network_mirror URL (ends with a slash). */
  url: string;
  /** The certificate to trust (SSL_CERT_FILE). */
  caFile: string;
  /** Versions served, oldest first. */
  versions: string[];
  /** The release of each version: its zip's zh: hash and the package's h1: hash. */
  releases: Map<string, Omit<PackedRelease, 'zip'> & { file: string }>;
  /** Every request so far, in order of completion. */
  requests: MirrorRequest[];
  /** Counts over requests[since..] (since: a length of `requests` taken earlier), or over one tag's. */
  counts(since?: number, tag?: string): MirrorCounts;
  /** Writes a CLI config that installs every provider from this mirror and returns its path. */
  writeCliConfig(file: string, opts?: CliConfigOptions): string;
  /** Env for terraform/tofu children: TF_CLI_CONFIG_FILE, SSL_CERT_FILE, CHECKPOINT_DISABLE. */
  env(cliConfigFile: string): Record<string, string>;
  close(): Promise<void>;
}

export interface ProviderMirrorOptions {
  /** Loopback address to listen on (default 127.0.0.1), port 0. */
  host?: string;
  /** Versions to serve (default: hack/provider/VERSION's). The same binary is packed as each. */
  versions?: string[];
  /** Registry hosts whose namespace the mirror answers for (default DEFAULT_REGISTRY_HOSTS). */
  registryHosts?: string[];
  /** Hold each archive answer this long first (to make parallel inits overlap). */
  archiveDelayMs?: number;
  /** Publish hashes that match no zip (a tampered mirror): installs must fail. */
  wrongHashes?: boolean;
}

const packed = new Map<string, PackedRelease>();

async function release(version: string): Promise<PackedRelease> {
  const bin = await goTool('provider');
  const key = `${bin}@${version}`;
  let r = packed.get(key);
  if (!r) {
    r = packProviderRelease(FIXTURE_TYPE, version, readFileSync(bin));
    packed.set(key, r);
  }
  return r;
}

const zipName = (version: string): string => `terraform-provider-${FIXTURE_TYPE}_${version}_linux_amd64.zip`;

/** Starts the mirror; close() stops it and removes its certificate. */
export async function startProviderMirror(opts: ProviderMirrorOptions = {}): Promise<ProviderMirror> {
  const host = opts.host ?? '127.0.0.1';
  const versions = opts.versions ?? [fixtureProviderVersion()];
  const hosts = new Set(opts.registryHosts ?? DEFAULT_REGISTRY_HOSTS);
  const zips = new Map<string, PackedRelease>();
  for (const v of versions) zips.set(v, await release(v));
  const byFile = new Map([...zips].map(([v, r]) => [zipName(v), r.zip]));
  const tls = selfSignedCert(host);
  const requests: MirrorRequest[] = [];

  const answer = (p: string): { kind: MirrorRequestKind; status: number; type?: string; body: Buffer | string } => {
    // <registry host>/<namespace>/<type>/<leaf>
    const [regHost, ns, type, leaf, ...rest] = p.split('/').filter(Boolean);
    const known = regHost && hosts.has(regHost) && ns === FIXTURE_NAMESPACE && type === FIXTURE_TYPE && rest.length === 0;
    if (!known || !leaf) return { kind: 'other', status: 404, body: 'not found\n' };
    if (leaf === 'index.json') {
      return {
        kind: 'index',
        status: 200,
        type: 'application/json',
        body: JSON.stringify({ versions: Object.fromEntries(versions.map((v) => [v, {}])) }),
      };
    }
    const v = leaf.endsWith('.json') ? leaf.slice(0, -5) : undefined;
    if (v !== undefined) {
      const r = zips.get(v);
      if (!r) return { kind: 'version', status: 404, body: 'no such version\n' };
      // The URL is relative to this document, so one zip serves every registry host's path.
      const hashes = opts.wrongHashes ? [`zh:${'0'.repeat(64)}`] : [r.h1, r.zh];
      const archives = { linux_amd64: { url: zipName(v), hashes } };
      return { kind: 'version', status: 200, type: 'application/json', body: JSON.stringify({ archives }) };
    }
    const zip = byFile.get(leaf);
    if (zip) return { kind: 'archive', status: 200, type: 'application/zip', body: zip };
    return { kind: 'archive', status: 404, body: 'no such archive\n' };
  };

  const server = https.createServer({ cert: readFileSync(tls.certFile), key: readFileSync(tls.keyFile) }, (req, res) => {
    let p = decodeURIComponent(new URL(req.url ?? '/', 'https://mirror').pathname);
    const tagged = /^\/t\/([^/]+)(\/.*)$/.exec(p);
    if (tagged) p = tagged[2]!;
    const a = req.method === 'GET' || req.method === 'HEAD' ? answer(p) : { kind: 'other' as const, status: 405, body: '' };
    const send = (): void => {
      const body = typeof a.body === 'string' ? Buffer.from(a.body) : a.body;
      const regHost = p.split('/').filter(Boolean)[0];
      res.once('finish', () =>
        requests.push({
          at: Date.now(),
          method: req.method ?? '',
          path: p,
          registryHost: regHost && hosts.has(regHost) ? regHost : undefined,
          tag: tagged?.[1],
          kind: a.kind,
          status: a.status,
          bytes: req.method === 'HEAD' ? 0 : body.length,
          userAgent: String(req.headers['user-agent'] ?? ''),
        }),
      );
      res.writeHead(a.status, { 'content-type': a.type ?? 'text/plain', 'content-length': body.length });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    if (a.kind === 'archive' && opts.archiveDelayMs) setTimeout(send, opts.archiveDelayMs);
    else send();
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const url = `https://${host}:${(server.address() as AddressInfo).port}/`;

  return {
    url,
    caFile: tls.certFile,
    versions,
    releases: new Map([...zips].map(([v, r]) => [v, { zh: r.zh, h1: r.h1, file: zipName(v) }])),
    requests,
    counts(since = 0, tag) {
      const rs = requests.slice(since).filter((r) => tag === undefined || r.tag === tag);
      const archives = rs.filter((r) => r.kind === 'archive' && r.status === 200 && r.method === 'GET');
      return {
        requests: rs.length,
        archives: archives.length,
        bytes: rs.reduce((n, r) => n + r.bytes, 0),
        archiveBytes: archives.reduce((n, r) => n + r.bytes, 0),
      };
    },
    writeCliConfig(file, o = {}) {
      if (o.tag !== undefined && !/^[\w.-]+$/.test(o.tag)) throw new Error(`mirror tag ${o.tag}: letters, digits, _ . - only`);
      const u = o.tag === undefined ? url : `${url}t/${o.tag}/`;
      const lines = [
        'disable_checkpoint = true',
        'provider_installation {',
        '  network_mirror {',
        `    url = ${JSON.stringify(u)}`,
        '  }',
        '}',
      ];
      if (o.pluginCacheDir) lines.push(`plugin_cache_dir = ${JSON.stringify(o.pluginCacheDir)}`);
      if (o.pluginCacheMayBreakLockFile) lines.push('plugin_cache_may_break_dependency_lock_file = true');
      writeFileSync(file, `${lines.join('\n')}\n`);
      return file;
    },
    env(cliConfigFile) {
      return { TF_CLI_CONFIG_FILE: cliConfigFile, SSL_CERT_FILE: tls.certFile, CHECKPOINT_DISABLE: '1' };
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(tls.dir, { recursive: true, force: true });
    },
  };
}

export interface FixtureConfigOptions {
  /** Version constraint in required_providers (default: none). */
  version?: string;
  /** fixture_value resources to declare (default 1). */
  values?: number;
  /** Their sleep_ms (create and update time). */
  applySleepMs?: number;
  /** A data "fixture_sleep" read for this long during plan (0: none). */
  planSleepMs?: number;
  /** A fixture_file written at this path on apply. */
  filePath?: string;
  /** The value every fixture_value holds (change it to get an update). */
  value?: string;
}

/** A main.tf that uses the test provider from the mirror (`source = "atlantis-operator/fixture"`). */
export function fixtureConfig(o: FixtureConfigOptions = {}): string {
  const req = [`source = ${JSON.stringify(FIXTURE_SOURCE)}`, ...(o.version ? [`version = ${JSON.stringify(o.version)}`] : [])];
  const parts = [`terraform {\n  required_providers {\n    fixture = {\n      ${req.join('\n      ')}\n    }\n  }\n}\n`];
  if (o.planSleepMs) parts.push(`data "fixture_sleep" "plan" {\n  milliseconds = ${o.planSleepMs}\n  input        = "slept"\n}\n`);
  const n = o.values ?? 1;
  if (n > 0) {
    const sleep = o.applySleepMs ? `\n  sleep_ms = ${o.applySleepMs}` : '';
    const value = o.planSleepMs ? `"\${data.fixture_sleep.plan.output}-${o.value ?? 'v'}"` : JSON.stringify(o.value ?? 'v');
    parts.push(`resource "fixture_value" "v" {\n  count    = ${n}\n  value    = ${value}${sleep}\n}\n`);
    parts.push('output "values" {\n  value = fixture_value.v[*].output\n}\n');
  }
  if (o.filePath) {
    parts.push(`resource "fixture_file" "f" {\n  path    = ${JSON.stringify(o.filePath)}\n  content = "written by fixture_file\\n"\n}\n`);
  }
  return parts.join('\n');
}
