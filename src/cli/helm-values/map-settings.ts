// The chart's server settings: the URL, the allowlist, the switches the chart turns into
// ATLANTIS_* variables, repoConfig, basic auth, the API secret, the store and the replica
// count. Pure: values in, the Conversion filled.
import type { V1EnvVar } from '@kubernetes/client-node';
import { parseServerSideRepoConfig } from '../../server/workflow/repo-config/server-side.js';
import type { Conversion, SecretSource } from './conversion.js';
import { envOfFlag, judgeFlag, SECRET_FLAGS } from './flags.js';
import { truthy, type Values } from './values.js';

/** A chart value the chart passes as `--flag` (through ATLANTIS_*), when it is set. */
const FLAG_VALUES: ReadonlyArray<[value: string, flag: string, type: 'bool' | 'string']> = [
  ['allowForkPRs', 'allow-fork-prs', 'bool'],
  ['allowDraftPRs', 'allow-draft-prs', 'bool'],
  ['hidePrevPlanComments', 'hide-prev-plan-comments', 'bool'],
  ['hideUnchangedPlanComments', 'hide-unchanged-plan-comments', 'bool'],
  ['disableApply', 'disable-apply', 'bool'],
  ['disableApplyAll', 'disable-apply-all', 'bool'],
  ['disableRepoLocking', 'disable-repo-locking', 'bool'],
  ['enableDiffMarkdownFormat', 'enable-diff-markdown-format', 'bool'],
  ['defaultTFVersion', 'default-tf-version', 'string'],
  ['defaultTFDistribution', 'default-tf-distribution', 'string'],
  ['logLevel', 'log-level', 'string'],
];

/**
 * `--flag` set to `value` as the server takes it: a variable (a secret one read from a Secret
 * key named after the variable), nothing when the server does that anyway, or a finding.
 */
export function flagVar(
  c: Conversion,
  value: string,
  flag: string,
  v: string | number | boolean,
  secret: () => SecretSource,
  holds: string,
): V1EnvVar | undefined {
  const verdict = judgeFlag(flag, v);
  if (verdict.kind === 'unmapped') {
    c.notMapped(value, verdict.reason);
    return undefined;
  }
  if (verdict.kind === 'same') return undefined;
  const name = envOfFlag(flag);
  if (SECRET_FLAGS.has(flag)) return { name, valueFrom: { secretKeyRef: c.secretRef(secret(), name, holds) } };
  return { name, value: String(v) };
}

export function mapSettings(v: Values, c: Conversion): void {
  mapUrl(v, c);
  const allow = v.str('orgAllowlist');
  const old = v.str('orgWhitelist');
  // As the chart: orgWhitelist only when orgAllowlist is empty.
  if (allow) c.atlantis.repoAllowlist = allow;
  else if (old) c.atlantis.repoAllowlist = old;
  for (const [value, flag, type] of FLAG_VALUES) {
    const x = type === 'bool' ? v.bool(value) : v.str(value);
    // As the chart: only a value that is set (true, or not empty).
    if (x === undefined || !truthy(x)) continue;
    const e = flagVar(c, value, flag, x, () => c.newSecret('env'), `the value of ${value}`);
    if (e) c.settingsEnv.push(e);
  }
  mapRepoConfig(v, c);
  mapBasicAuth(v, c);
  mapApi(v, c);
  mapStore(v, c);
}

function mapUrl(v: Values, c: Conversion): void {
  const url = v.str('atlantisUrl');
  let chosen = url;
  // The chart's fallback: the Ingress's host, https with tls.
  if (!url && v.bool('ingress', 'enabled')) {
    const host = v.get('ingress', 'host');
    if (typeof host === 'string' && host) chosen = `${truthy(v.get('ingress', 'tls')) ? 'https' : 'http'}://${host}`;
  }
  if (!chosen) return;
  if (!isHttpUrl(chosen)) {
    c.notMapped('atlantisUrl', 'not an absolute http:// or https:// URL, which spec.atlantis.url must be');
    return;
  }
  c.atlantis.url = chosen;
}

export function isHttpUrl(s: string): boolean {
  try {
    const u = new URL(s);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.hostname !== '';
  } catch {
    return false;
  }
}

function mapRepoConfig(v: Values, c: Conversion): void {
  const text = v.str('repoConfig');
  if (!text) return;
  const name = c.configMap('repos', { 'repos.yaml': text.endsWith('\n') ? text : `${text}\n` });
  c.atlantis.repoConfig = { configMapRef: { name, key: 'repos.yaml' } };
  try {
    parseServerSideRepoConfig(text, 'repos.yaml');
  } catch (e) {
    c.notMapped(
      'repoConfig',
      `converted into the ConfigMap ${name}, but this server refuses it and would not start: ${(e as Error).message}`,
    );
  }
}

function mapBasicAuth(v: Values, c: Conversion): void {
  const user = v.str('basicAuth', 'username');
  const password = v.str('basicAuth', 'password');
  const named = v.str('basicAuthSecretName');
  // As the chart: on with an existing Secret, or with both a user name and a password.
  if (!named && !(user && password)) {
    if (user || password)
      c.notMapped('basicAuth', 'the chart turns basic auth on only with both username and password (or basicAuthSecretName)');
    return;
  }
  const src: SecretSource = named ? { name: named, create: false } : c.newSecret('web-auth', 'basic-auth');
  c.atlantis.basicAuth = {
    usernameSecretRef: c.secretRef(src, 'username', 'the user name of the web pages (basicAuth.username)'),
    passwordSecretRef: c.secretRef(src, 'password', 'the password of the web pages (basicAuth.password)'),
  };
}

function mapApi(v: Values, c: Conversion): void {
  const secret = v.str('api', 'secret');
  const named = v.str('apiSecretName');
  const api = v.section('api');
  if (!named && !truthy(api)) return;
  if (!named && !secret) {
    c.notMapped('api', 'no api.secret: the chart gives Atlantis an empty API secret, which leaves the API off');
    return;
  }
  const src: SecretSource = named ? { name: named, create: false } : c.newSecret('api-secret', 'api');
  c.atlantis.api = { secretRef: c.secretRef(src, 'apisecret', 'the API secret (api.secret)') };
}

function mapStore(v: Values, c: Conversion): void {
  const type = v.str('lockingDbType');
  const host = v.str('redis', 'host');
  const password = v.str('redis', 'password');
  const port = v.int(['redis', 'port']);
  const db = v.int(['redis', 'db']);
  const tls = v.bool('redis', 'tlsEnabled');
  const skip = v.bool('redis', 'insecureSkipVerify');
  const named = v.str('redisSecretName');
  const passwordKey = v.str('redisSecretPasswordKey') || 'password';
  let replicas = v.int(['replicaCount']) ?? 1;
  if (replicas < 0) {
    c.notMapped('replicaCount', 'must be 0 or more');
    replicas = 1;
  }
  const redisGiven = [host, password, port, db, tls, skip, named].some((x) => truthy(x));
  if (type === 'redis' && !host) {
    c.notMapped('lockingDbType', 'redis without redis.host: the chart gives Atlantis no Redis to use; the embedded store is used');
  }
  if (type !== 'redis' || !host) {
    if (type && type !== 'boltdb' && type !== 'redis')
      c.notMapped('lockingDbType', 'Atlantis takes boltdb or redis; the embedded store (boltdb) is used');
    if (redisGiven && type !== 'redis')
      c.notMapped('redis', 'lockingDbType is not redis, so Atlantis did not use this Redis; the embedded store is used');
    if (replicas > 1)
      c.notMapped(
        'replicaCount',
        `${replicas} pods with the embedded store would each keep their own locks: spec.replicas is 1 (more need lockingDbType redis, spec.atlantis.lockingDB)`,
      );
    c.spec.replicas = Math.min(replicas, 1);
    return;
  }
  const src: SecretSource | undefined = named ? { name: named, create: false } : password ? c.newSecret('redis-auth', 'redis') : undefined;
  const key = c.newSecret('shared-state-key');
  c.atlantis.lockingDB = {
    type: 'redis',
    redis: {
      host,
      ...(port !== undefined ? { port } : {}),
      ...(db !== undefined ? { db } : {}),
      ...(tls !== undefined ? { tls } : {}),
      ...(skip !== undefined ? { insecureSkipVerify: skip } : {}),
      ...(src ? { passwordSecretRef: c.secretRef(src, named ? passwordKey : 'password', 'the Redis password (redis.password)') } : {}),
      sharedStateKeySecretRef: c.secretRef(
        key,
        'key',
        "the replicas' shared state key, at least 32 bytes (e.g. `openssl rand -hex 32`); the chart has none: new with this server, which signs what it keeps in Redis with it",
      ),
    },
  };
  c.spec.replicas = replicas;
}
