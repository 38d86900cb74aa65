// spec.atlantis: the server's settings, passed to the pods as ATLANTIS_* environment
// variables, files mounted from Secrets and ConfigMaps, and arguments.
//
// A new server setting goes in `atlantisSchema` below (a Secret the pods read: `secretKeyRef`;
// its CEL rules beside it), then in src/controller/types.ts and the renderers.
import type { KubernetesSchemas } from './k8s-schemas.js';
import { FIELD_ENV, OPERATOR_ENV, OPERATOR_FLAGS, STORE_ENV } from '../../src/controller/resources/reserved.js';
import { type Schema, bool, int32, int64, keyRef, listOf, obj, rules, secretKeyRef, str } from './helpers.js';

const list = (names: readonly string[]) => `[${names.map((n) => `'${n}'`).join(', ')}]`;

function lockingDB(): Schema {
  const P = 'spec.atlantis.lockingDB.redis';
  return obj(
    {
      type: str('ATLANTIS_LOCKING_DB_TYPE. Changing it is a new revision; locks and plans are not moved between stores.', {
        default: 'boltdb',
        enum: ['boltdb', 'redis'],
      }),
      redis: obj(
        {
          host: str('ATLANTIS_REDIS_HOST, e.g. redis.infra.svc.', {
            maxLength: 253,
            ...rules(
              { rule: 'size(self) > 0', message: `${P}.host must not be empty` },
              { rule: '!self.matches("[ \\t\\n\\r/]")', message: `${P}.host must be a host name or address, without whitespace or '/'` },
            ),
          }),
          sentinel: obj(
            {
              masterName: str(
                'ATLANTIS_REDIS_SENTINEL_MASTER_NAME: the master group the sentinels monitor (sentinel monitor <name> ...).',
                {
                  maxLength: 253,
                  ...rules({
                    rule: "size(self) > 0 && !self.matches(r'\\s')",
                    message: `${P}.sentinel.masterName must be a non-empty name without whitespace`,
                  }),
                },
              ),
              addresses: listOf(
                str(undefined, {
                  maxLength: 260,
                  ...rules({
                    rule: "self.matches(r'^(\\[[0-9A-Fa-f:.]+\\]|[^\\s:/@\\[\\],]+)(:(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}))?$')",
                    message: `${P}.sentinel.addresses: each must be host:port (port 1-65535), [IPv6]:port, or a host alone`,
                  }),
                }),
                16,
                'ATLANTIS_REDIS_SENTINEL_ADDRESSES: the sentinels, each host:port, [IPv6]:port, or a host alone (port 26379).',
                { minItems: 1 },
              ),
              usernameSecretRef: secretKeyRef(
                `${P}.sentinel.usernameSecretRef`,
                'Secret key holding the user name for the sentinels (ATLANTIS_REDIS_SENTINEL_USERNAME, through secretKeyRef).',
              ),
              passwordSecretRef: secretKeyRef(
                `${P}.sentinel.passwordSecretRef`,
                'Secret key holding the password of the sentinels (ATLANTIS_REDIS_SENTINEL_PASSWORD, through secretKeyRef, so never in the pod spec).',
              ),
            },
            {
              description:
                "Redis Sentinel (ours; the server's --redis-sentinel-*): the pods ask these sentinels which server is the master of masterName, and follow a failover. db, tls (to the sentinels too), insecureSkipVerify and the username and password Secret refs above (the master's) still apply.",
              required: ['masterName', 'addresses'],
            },
          ),
          port: int32('ATLANTIS_REDIS_PORT.', {
            default: 6379,
            ...rules({ rule: 'self >= 1 && self <= 65535', message: `${P}.port must be between 1 and 65535` }),
          }),
          db: int32('ATLANTIS_REDIS_DB, the database number.', {
            default: 0,
            ...rules({ rule: 'self >= 0', message: `${P}.db must be 0 or more` }),
          }),
          tls: bool('ATLANTIS_REDIS_TLS_ENABLED (TLS 1.2 or newer).', { default: false }),
          insecureSkipVerify: bool('ATLANTIS_REDIS_INSECURE_SKIP_VERIFY. With tls, accept any certificate and host name.', {
            default: false,
          }),
          usernameSecretRef: secretKeyRef(
            `${P}.usernameSecretRef`,
            'Secret key holding the Redis user name (ATLANTIS_REDIS_USERNAME, through secretKeyRef).',
          ),
          passwordSecretRef: secretKeyRef(
            `${P}.passwordSecretRef`,
            'Secret key holding the Redis password (ATLANTIS_REDIS_PASSWORD, through secretKeyRef, so never in the pod spec).',
          ),
          sharedStateKeySecretRef: secretKeyRef(
            `${P}.sharedStateKeySecretRef`,
            "Secret key holding the replicas' shared state key (ours; the server's --shared-state-key-file; at least 32 bytes, e.g. openssl rand -hex 32). Required with type redis: the pods sign the records in Redis that decide what runs (plans, commands, replica addresses) with it, and Redis never sees it. Mounted read-only as a file (/etc/atlantis/shared-state/key, 0440, the pod's fsGroup) and named in ATLANTIS_SHARED_STATE_KEY_FILE; the controller reads only the Secret's metadata, and a change to the Secret rolls the pods.",
          ),
          podIPFamily: str(
            "IPv4 (unset) or IPv6: the family of the pods' primary IP (status.podIP), which ATLANTIS_REPLICA_URL is built from (http://[<IPv6>]:4141 with IPv6).",
            { enum: ['IPv4', 'IPv6'] },
          ),
        },
        {
          description:
            'The shared Redis (read only with type redis): one at host:port, or the master that Redis Sentinel names (sentinel).',
          ...rules(
            { rule: 'has(self.host) || has(self.sentinel)', message: `${P}.host (or redis.sentinel) is required with type redis` },
            {
              rule: '!has(self.host) || !has(self.sentinel)',
              message: `${P}: host and sentinel are both set; with sentinel the sentinels name the master, so leave host out`,
            },
            {
              rule: '!has(self.sentinel) || !has(self.port) || self.port == 6379',
              message: `${P}.port is not used with sentinel (the sentinels name the master's port), so leave it out`,
            },
          ),
        },
      ),
    },
    {
      description:
        "Where the servers keep locks, plans, PR statuses and the queue. boltdb: the embedded store in each pod's data dir, on one PVC per ordinal. redis: one Redis shared by every pod (ATLANTIS_LOCKING_DB_TYPE=redis and ATLANTIS_REDIS_*); the pods then act as one Atlantis and keep only working copies, on an emptyDir of spec.storage.size.",
      ...rules(
        { rule: "self.type != 'redis' || has(self.redis)", message: `${P}.host (or redis.sentinel) is required with type redis` },
        {
          rule: "self.type != 'redis' || !has(self.redis) || has(self.redis.sharedStateKeySecretRef)",
          message: `${P}.sharedStateKeySecretRef is required with type redis: the pods sign what they keep in Redis with that key, which Redis never sees, so that whoever can write to Redis cannot make them apply a plan or run a command`,
        },
      ),
    },
  );
}

function githubApp(): Schema {
  const P = 'spec.atlantis.githubApp';
  const positive = (field: string) => rules({ rule: 'self >= 1', message: `${P}.${field} must be a positive integer` });
  return obj(
    {
      id: int64('ATLANTIS_GH_APP_ID: the GitHub App id.', positive('id')),
      installationId: int64(
        'ATLANTIS_GH_APP_INSTALLATION_ID: needed when the App is installed more than once.',
        positive('installationId'),
      ),
      slug: str("ATLANTIS_GH_APP_SLUG: the App's URL name, for comment commands addressed to it.", {
        maxLength: 100,
        ...rules({
          rule: "self.matches('^[a-z0-9][-a-z0-9]*$')",
          message: `${P}.slug must be the App's slug: lowercase letters, digits and '-'`,
        }),
      }),
      keySecretRef: secretKeyRef(
        `${P}.keySecretRef`,
        "Secret key holding the App's private key (PEM). Mounted as a file (mode 0440) at /var/github-app/key.pem and given as ATLANTIS_GH_APP_KEY_FILE, never as an env value.",
      ),
    },
    {
      description:
        "Authenticate as a GitHub App instead of a user's token (chart: githubApp). The webhook secret is github.webhookSecretRef.",
      required: ['id', 'keySecretRef'],
    },
  );
}

function basicAuth(): Schema {
  const P = 'spec.atlantis.basicAuth';
  return obj(
    {
      username: str('ATLANTIS_WEB_USERNAME (default atlantis).', {
        maxLength: 256,
        ...rules({ rule: 'size(self) > 0', message: `${P}.username must not be empty` }),
      }),
      usernameSecretRef: secretKeyRef(
        `${P}.usernameSecretRef`,
        'Secret key holding the user name instead (ATLANTIS_WEB_USERNAME, through secretKeyRef).',
      ),
      passwordSecretRef: secretKeyRef(
        `${P}.passwordSecretRef`,
        'Secret key holding the password (ATLANTIS_WEB_PASSWORD, through secretKeyRef).',
      ),
    },
    {
      description:
        'Basic auth for the web pages, job logs and /metrics (ATLANTIS_WEB_BASIC_AUTH=true; chart: basicAuth, basicAuthSecretName).',
      required: ['passwordSecretRef'],
      ...rules({
        rule: '!has(self.username) || !has(self.usernameSecretRef)',
        message: `${P}: username and usernameSecretRef are both set; leave one out`,
      }),
    },
  );
}

export function atlantisSchema(k8s: KubernetesSchemas): Schema {
  const envVar = k8s.core('EnvVar');
  // The name bounded, so the cost of the rules below is too.
  const envItem = {
    ...envVar,
    properties: { ...(envVar.properties as Record<string, Schema>), name: str(undefined, { minLength: 1, maxLength: 256 }) },
  };
  const envFromItem = k8s.core('EnvFromSource');
  return obj(
    {
      url: str('Public URL of Atlantis (ATLANTIS_ATLANTIS_URL), used in PR comments. Unset with spec.ingress: http(s)://<ingress host>.', {
        maxLength: 2048,
        ...rules({
          rule: "isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",
          message: 'spec.atlantis.url must be an absolute http:// or https:// URL',
        }),
      }),
      repoAllowlist: str('ATLANTIS_REPO_ALLOWLIST, e.g. github.com/acme/*.', { maxLength: 4096 }),
      github: obj({
        user: str('ATLANTIS_GH_USER.', { maxLength: 256 }),
        tokenSecretRef: secretKeyRef('spec.atlantis.github.tokenSecretRef', 'Secret key holding the GitHub token (ATLANTIS_GH_TOKEN).'),
        webhookSecretRef: secretKeyRef(
          'spec.atlantis.github.webhookSecretRef',
          "Secret key holding the webhook secret (ATLANTIS_GH_WEBHOOK_SECRET), a user's or a GitHub App's.",
        ),
      }),
      githubApp: githubApp(),
      repoConfig: obj(
        {
          configMapRef: keyRef(
            'spec.atlantis.repoConfig.configMapRef',
            'ConfigMap key holding the repos.yaml (key default repos.yaml). Mounted at /etc/atlantis/repos.yaml.',
            { keyDefault: 'repos.yaml' },
          ),
        },
        {
          description:
            'The server-side repo config (ATLANTIS_REPO_CONFIG=/etc/atlantis/repos.yaml; chart: repoConfig). A change to the ConfigMap rolls the pods.',
          required: ['configMapRef'],
        },
      ),
      api: obj(
        {
          secretRef: secretKeyRef(
            'spec.atlantis.api.secretRef',
            'Secret key holding the API secret (ATLANTIS_API_SECRET, through secretKeyRef).',
          ),
        },
        { description: 'The /api endpoints (chart: api, apiSecretName): off unless a secret is given.', required: ['secretRef'] },
      ),
      basicAuth: basicAuth(),
      lockingDB: lockingDB(),
      env: listOf(
        {
          ...envItem,
          // Per item, so the message can name the variable at a bounded cost.
          'x-kubernetes-validations': [
            {
              rule: `!(self.name in ${list(OPERATOR_ENV)})`,
              messageExpression:
                "'spec.atlantis.env must not set ' + self.name + ': the operator sets it (probes, the data volume, the drain timing and replica identity depend on it)'",
            },
            {
              rule: `!(self.name in ${list(STORE_ENV)})`,
              messageExpression:
                "'spec.atlantis.env must not set ' + self.name + ': set spec.atlantis.lockingDB instead (the data volume and surge depend on the store)'",
            },
          ],
        },
        128,
        "Extra environment variables (core EnvVar), appended after the operator's own.",
      ),
      envFrom: listOf(
        envFromItem,
        32,
        "Variables from whole ConfigMaps and Secrets (core EnvFromSource; chart: loadEnvFromSecrets, loadEnvFromConfigMaps). env and the operator's own variables win over them. A change to their data rolls the pods.",
      ),
      extraArgs: listOf(
        str(undefined, {
          maxLength: 4096,
          ...rules({
            rule: `!self.matches('${OPERATOR_FLAGS}')`,
            messageExpression: "'spec.atlantis.extraArgs must not give ' + self + ': the operator sets that flag (or lockingDB does)'",
          }),
        }),
        64,
        'Arguments after `server` (chart: extraArgs). Never a secret: arguments are visible to every process of the node; use env and Secret refs.',
      ),
    },
    {
      default: {},
      description: 'Server settings, passed to the pods as ATLANTIS_* environment variables and files.',
      'x-kubernetes-validations': [
        {
          rule: '!has(self.githubApp) || !has(self.github) || !has(self.github.user)',
          message:
            'spec.atlantis.github.user and spec.atlantis.githubApp are both set: with a user the server uses its token and ignores the App (as Atlantis); leave one out',
        },
        ...FIELD_ENV.map(([field, vars]) => ({
          rule: `!has(self.${field}) || !has(self.env) || !self.env.exists(e, e.name in ${list(vars)})`,
          message: `spec.atlantis.env must not set ${vars.join(', ')} with spec.atlantis.${field}, which sets them`,
        })),
      ],
    },
  );
}
