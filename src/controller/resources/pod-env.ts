// The server container's environment: the server's settings as ATLANTIS_* variables, every
// credential through secretKeyRef (the value is never in the pod spec; the kubelet reads it),
// files mounted by pod-volumes.ts named by path.
import type { V1EnvVar } from '@kubernetes/client-node';
import { SERVER_PORT } from '../../contract/drain-protocol.js';
import { DATA_DIR, type AtlantisDeploymentSpec, type LockingDB, type SecretKeyRef, type SentinelSettingsInput } from '../types.js';
import { APP_KEY_FILE, REPO_CONFIG_FILE, SHARED_STATE_KEY_FILE } from './pod-volumes.js';
import { drainTiming, goDuration } from './timing.js';

/**
 * The --locking-db-type and --redis-* settings. Nothing for the embedded store: it is the
 * server's default, and pods rendered before lockingDB existed keep their revision.
 * Credentials only as secretKeyRef, so they are never in the pod spec.
 */
export function lockingDBEnv(db: LockingDB): V1EnvVar[] {
  if (db.type !== 'redis') return [];
  const r = db.redis;
  const env: V1EnvVar[] = [{ name: 'ATLANTIS_LOCKING_DB_TYPE', value: 'redis' }];
  // With Sentinel the sentinels name the master: the server refuses a host or port beside them.
  if (r.sentinel) env.push(...sentinelEnv(r.sentinel));
  else {
    if (r.host) env.push({ name: 'ATLANTIS_REDIS_HOST', value: r.host });
    env.push({ name: 'ATLANTIS_REDIS_PORT', value: String(r.port) });
  }
  env.push(
    { name: 'ATLANTIS_REDIS_DB', value: String(r.db) },
    { name: 'ATLANTIS_REDIS_TLS_ENABLED', value: String(r.tls) },
    { name: 'ATLANTIS_REDIS_INSECURE_SKIP_VERIFY', value: String(r.insecureSkipVerify) },
  );
  env.push(...fromSecret('ATLANTIS_REDIS_USERNAME', r.usernameSecretRef), ...fromSecret('ATLANTIS_REDIS_PASSWORD', r.passwordSecretRef));
  // The file pod-volumes.ts mounts; without the ref (stored before the CRD required it) the server refuses to start.
  if (r.sharedStateKeySecretRef) env.push({ name: 'ATLANTIS_SHARED_STATE_KEY_FILE', value: SHARED_STATE_KEY_FILE });
  return env;
}

/** The variable read from a Secret key by the kubelet, or nothing without a ref. */
export function fromSecret(env: string, ref: SecretKeyRef | undefined): V1EnvVar[] {
  return ref ? [{ name: env, valueFrom: { secretKeyRef: { name: ref.name, key: ref.key } } }] : [];
}

function sentinelEnv(s: SentinelSettingsInput): V1EnvVar[] {
  return [
    { name: 'ATLANTIS_REDIS_SENTINEL_ADDRESSES', value: s.addresses.join(',') },
    { name: 'ATLANTIS_REDIS_SENTINEL_MASTER_NAME', value: s.masterName },
    ...fromSecret('ATLANTIS_REDIS_SENTINEL_USERNAME', s.usernameSecretRef),
    ...fromSecret('ATLANTIS_REDIS_SENTINEL_PASSWORD', s.passwordSecretRef),
  ];
}

/**
 * How the replicas sharing a Redis name and reach each other. The id is the pod's name, given
 * explicitly: the host name is cut to 63 characters, which can make two pods' ids equal. The
 * URL is the pod IP (a pod's host name does not resolve), in brackets when it is IPv6; POD_IP
 * comes first so kubelet's $(VAR) expansion sees it. The CRD keeps both out of spec.atlantis.env.
 */
function replicaEnv(db: LockingDB): V1EnvVar[] {
  if (db.type !== 'redis') return [];
  const host = db.redis.podIPFamily === 'IPv6' ? '[$(POD_IP)]' : '$(POD_IP)';
  return [
    { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
    { name: 'ATLANTIS_REPLICA_ID', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
    { name: 'ATLANTIS_REPLICA_URL', value: `http://${host}:${SERVER_PORT}` },
  ];
}

/** ATLANTIS_ATLANTIS_URL: spec.atlantis.url, else the Ingress's host (https with TLS), as the Atlantis chart does. */
export function atlantisUrl(spec: AtlantisDeploymentSpec): string | undefined {
  if (spec.atlantis.url) return spec.atlantis.url;
  const ing = spec.ingress;
  if (!ing?.host) return undefined;
  return `${ing.tls && ing.tls.length > 0 ? 'https' : 'http'}://${ing.host}`;
}

/** The GitHub App, the repo config, the API secret and basic auth: nothing when unset, so older pods keep their revision. */
function settingsEnv(spec: AtlantisDeploymentSpec): V1EnvVar[] {
  const a = spec.atlantis;
  const env: V1EnvVar[] = [];
  if (a.githubApp) {
    env.push({ name: 'ATLANTIS_GH_APP_ID', value: String(a.githubApp.id) });
    if (a.githubApp.installationId !== undefined)
      env.push({ name: 'ATLANTIS_GH_APP_INSTALLATION_ID', value: String(a.githubApp.installationId) });
    if (a.githubApp.slug) env.push({ name: 'ATLANTIS_GH_APP_SLUG', value: a.githubApp.slug });
    env.push({ name: 'ATLANTIS_GH_APP_KEY_FILE', value: APP_KEY_FILE });
  }
  if (a.repoConfig) env.push({ name: 'ATLANTIS_REPO_CONFIG', value: REPO_CONFIG_FILE });
  env.push(...fromSecret('ATLANTIS_API_SECRET', a.api?.secretRef));
  if (a.basicAuth) {
    env.push({ name: 'ATLANTIS_WEB_BASIC_AUTH', value: 'true' });
    if (a.basicAuth.username) env.push({ name: 'ATLANTIS_WEB_USERNAME', value: a.basicAuth.username });
    env.push(
      ...fromSecret('ATLANTIS_WEB_USERNAME', a.basicAuth.usernameSecretRef),
      ...fromSecret('ATLANTIS_WEB_PASSWORD', a.basicAuth.passwordSecretRef),
    );
  }
  return env;
}

/** A preStop sleep delays the SIGTERM that starts the server's drain: its drain timeout is shortened by it. */
export function preStopSleepSeconds(spec: AtlantisDeploymentSpec): number {
  return Math.max(0, spec.podTemplate?.spec?.lifecycle?.preStop?.sleep?.seconds ?? 0);
}

export function serverEnv(spec: AtlantisDeploymentSpec): V1EnvVar[] {
  const timing = drainTiming(spec.terminationGracePeriodSeconds, preStopSleepSeconds(spec));
  const a = spec.atlantis;
  const env: V1EnvVar[] = [
    { name: 'ATLANTIS_PORT', value: String(SERVER_PORT) },
    { name: 'ATLANTIS_DATA_DIR', value: DATA_DIR },
  ];
  const url = atlantisUrl(spec);
  if (url) env.push({ name: 'ATLANTIS_ATLANTIS_URL', value: url });
  if (a.repoAllowlist) env.push({ name: 'ATLANTIS_REPO_ALLOWLIST', value: a.repoAllowlist });
  if (a.github?.user) env.push({ name: 'ATLANTIS_GH_USER', value: a.github.user });
  env.push(
    ...fromSecret('ATLANTIS_GH_TOKEN', a.github?.tokenSecretRef),
    ...fromSecret('ATLANTIS_GH_WEBHOOK_SECRET', a.github?.webhookSecretRef),
  );
  env.push(...settingsEnv(spec));
  env.push(...lockingDBEnv(a.lockingDB));
  env.push(
    { name: 'ATLANTIS_DRAIN_TIMEOUT', value: goDuration(timing.drainTimeoutSeconds) },
    { name: 'ATLANTIS_TERRAFORM_INTERRUPT_GRACE', value: goDuration(timing.interruptGraceSeconds) },
    { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
    { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
    ...replicaEnv(a.lockingDB),
  );
  // Appended last: for duplicate names Kubernetes uses the last entry, so the user's env wins.
  return [...env, ...(a.env ?? [])];
}
