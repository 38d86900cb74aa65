// What the operator keeps for itself in the server's pod: the variables spec.atlantis.env may
// not set, the flags spec.atlantis.extraArgs may not give, and the volume names of its own.
// The CRD's rules (hack/crd/) are written from these lists, and `migrate helm-values` keeps a
// chart's values out of them.
import { APP_KEY_VOLUME, DATA_VOLUME, REPO_CONFIG_VOLUME, SHARED_STATE_KEY_VOLUME } from './pod-volumes.js';

/** Variables the operator sets itself (probes, the data volume, the drain timing, the replicas' identity). */
export const OPERATOR_ENV: readonly string[] = [
  'POD_NAME',
  'POD_NAMESPACE',
  'ATLANTIS_PORT',
  'ATLANTIS_DATA_DIR',
  'ATLANTIS_DRAIN_TIMEOUT',
  'ATLANTIS_TERRAFORM_INTERRUPT_GRACE',
  'ATLANTIS_REPLICA_ID',
  'ATLANTIS_REPLICA_URL',
];

/** The store's variables: lockingDB is their one source (the data volume, surge and the shared state key's file depend on it). */
export const STORE_ENV: readonly string[] = [
  'ATLANTIS_LOCKING_DB_TYPE',
  'ATLANTIS_REDIS_HOST',
  'ATLANTIS_REDIS_PORT',
  'ATLANTIS_REDIS_DB',
  'ATLANTIS_REDIS_TLS_ENABLED',
  'ATLANTIS_REDIS_INSECURE_SKIP_VERIFY',
  'ATLANTIS_REDIS_USERNAME',
  'ATLANTIS_REDIS_PASSWORD',
  'ATLANTIS_REDIS_SENTINEL_ADDRESSES',
  'ATLANTIS_REDIS_SENTINEL_MASTER_NAME',
  'ATLANTIS_REDIS_SENTINEL_USERNAME',
  'ATLANTIS_REDIS_SENTINEL_PASSWORD',
  'ATLANTIS_SHARED_STATE_KEY_FILE',
];

/** Flags the operator sets through env (a regular expression over one argument): a flag given as an argument would win over them. */
export const OPERATOR_FLAGS =
  '^--?(port|data-dir|drain-timeout|terraform-interrupt-grace|locking-db-type|redis-[a-z-]+|shared-state-key-file|replica-id|replica-url)(=.*)?$';

/** Fields of spec.atlantis and the variables each sets: env may not set them too. */
export const FIELD_ENV: ReadonlyArray<readonly [field: string, vars: readonly string[]]> = [
  [
    'githubApp',
    ['ATLANTIS_GH_APP_ID', 'ATLANTIS_GH_APP_KEY', 'ATLANTIS_GH_APP_KEY_FILE', 'ATLANTIS_GH_APP_SLUG', 'ATLANTIS_GH_APP_INSTALLATION_ID'],
  ],
  ['repoConfig', ['ATLANTIS_REPO_CONFIG', 'ATLANTIS_REPO_CONFIG_JSON']],
  ['api', ['ATLANTIS_API_SECRET']],
  ['basicAuth', ['ATLANTIS_WEB_BASIC_AUTH', 'ATLANTIS_WEB_USERNAME', 'ATLANTIS_WEB_PASSWORD']],
];

/** Volumes the operator adds itself (the data dir, the App key, the repo config, the shared state key). */
export const RESERVED_VOLUMES: readonly string[] = [DATA_VOLUME, APP_KEY_VOLUME, REPO_CONFIG_VOLUME, SHARED_STATE_KEY_VOLUME];
