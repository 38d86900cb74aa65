// `migrate helm-values`, value by value (no cluster): what each chart value becomes in the
// AtlantisDeployment, which Secret and key it reads, and the exact reason when a value is not
// converted. The whole outputs are applied to a real API server in helm-values-apply.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { convertValues } from '../src/cli/helm-values/convert.js';
import type { Obj } from '../src/cli/helm-values/values.js';

/** Converted with the Ingress off, so the chart's default host-less Ingress adds no finding. */
const convert = (values: Obj, release = 'atlantis') =>
  convertValues([{ ingress: { enabled: false }, ...values }], { release, image: 'atlantis-operator:test' });
const spec = (values: Obj) => convert(values).deployment.spec;
const unmapped = (values: Obj) => convert(values).unmapped;
const one = (value: string, reason: string) => [{ value, reason }];

describe('migrate helm-values: the VCS', () => {
  it('github: the user, and the token and webhook secret from the Secret the chart would make, to create', () => {
    const r = convert({ github: { user: 'bot', token: 'fixture-t', secret: 'fixture-s', hostname: 'github.acme.com' } });
    assert.deepEqual(r.deployment.spec.atlantis?.github, {
      user: 'bot',
      tokenSecretRef: { name: 'atlantis-vcs', key: 'github_token' },
      webhookSecretRef: { name: 'atlantis-vcs', key: 'github_secret' },
    });
    assert.deepEqual(r.deployment.spec.atlantis?.env, [{ name: 'ATLANTIS_GH_HOSTNAME', value: 'github.acme.com' }]);
    assert.deepEqual(r.secrets, [
      {
        name: 'atlantis-vcs',
        create: true,
        chartSecret: 'atlantis-webhook',
        keys: [
          { key: 'github_token', holds: 'the GitHub token (github.token)' },
          { key: 'github_secret', holds: 'the webhook secret (github.secret)' },
        ],
      },
    ]);
  });

  it('vcsSecretName: the Secret of the values, read as it is', () => {
    const r = convert({ vcsSecretName: 'my-vcs', github: { user: 'bot' } }, 'prod');
    assert.equal(r.deployment.spec.atlantis?.github?.tokenSecretRef?.name, 'my-vcs');
    assert.deepEqual(
      r.secrets.map((s) => [s.name, s.create]),
      [['my-vcs', false]],
    );
    assert.equal(r.deployment.metadata.name, 'prod-atlantis');
  });

  it('githubApp: id, installation, slug, the key as a file, the webhook secret, git credentials on', () => {
    const r = convert({ githubApp: { id: '123', installationId: 9, slug: 'acme-bot', key: 'fixture-pem', secret: 'fixture-s' } });
    assert.deepEqual(r.deployment.spec.atlantis?.githubApp, {
      id: 123,
      installationId: 9,
      slug: 'acme-bot',
      keySecretRef: { name: 'atlantis-vcs', key: 'key.pem' },
    });
    assert.deepEqual(r.deployment.spec.atlantis?.github, { webhookSecretRef: { name: 'atlantis-vcs', key: 'github_secret' } });
    assert.deepEqual(r.deployment.spec.atlantis?.env, [{ name: 'ATLANTIS_WRITE_GIT_CREDS', value: 'true' }]);
    assert.deepEqual(r.unmapped, []);
  });

  it('githubApp beside github.user: the user is kept, as Atlantis used its token', () => {
    const r = convert({ github: { user: 'bot' }, githubApp: { id: 1, key: 'k' } });
    assert.equal(r.deployment.spec.atlantis?.githubApp, undefined);
    assert.deepEqual(
      r.unmapped,
      one(
        'githubApp',
        "github.user is set too, so Atlantis used the user's token, not the App; the AtlantisDeployment takes one of them (github.user here)",
      ),
    );
  });

  it('githubApp without an id, or with a slug that is none', () => {
    assert.deepEqual(
      unmapped({ githubApp: { key: 'k' } }),
      one('githubApp', 'no githubApp.id: an App is known by its id (spec.atlantis.githubApp.id)'),
    );
    assert.deepEqual(
      unmapped({ githubApp: { id: 5, slug: 'Acme Bot' } }),
      one('githubApp.slug', "not an App's slug (lowercase letters, digits and '-'), which spec.atlantis.githubApp.slug must be"),
    );
  });

  it("gitea: the user and the base URL as ATLANTIS_GITEA_*, the token and webhook secret from the chart's Secret, nothing left out", () => {
    const r = convert({ gitea: { user: 'atlantis-bot', token: 'fixture-t', secret: 'fixture-s', baseUrl: 'https://gitea.acme.com' } });
    assert.deepEqual(r.unmapped, []);
    assert.equal(r.deployment.spec.atlantis?.github, undefined);
    assert.deepEqual(r.deployment.spec.atlantis?.env, [
      { name: 'ATLANTIS_GITEA_USER', value: 'atlantis-bot' },
      { name: 'ATLANTIS_GITEA_TOKEN', valueFrom: { secretKeyRef: { name: 'atlantis-vcs', key: 'gitea_token' } } },
      { name: 'ATLANTIS_GITEA_WEBHOOK_SECRET', valueFrom: { secretKeyRef: { name: 'atlantis-vcs', key: 'gitea_secret' } } },
      { name: 'ATLANTIS_GITEA_BASE_URL', value: 'https://gitea.acme.com' },
    ]);
    assert.deepEqual(
      r.secrets.map((x) => [x.name, x.create, x.keys.map((k) => k.key)]),
      [['atlantis-vcs', true, ['gitea_token', 'gitea_secret']]],
    );
    assert.ok(!JSON.stringify(r.deployment).includes('fixture-'), 'no secret value in the AtlantisDeployment');
  });

  it('gitlab: the user and hostname as env, the token and webhook secret from the Secret the chart would make', () => {
    const r = convert({ gitlab: { user: 'u', token: 't', secret: 's', hostname: 'gitlab.acme.com' } });
    assert.deepEqual(r.unmapped, []);
    const env = r.deployment.spec.atlantis?.env ?? [];
    assert.deepEqual(
      env.map((e) => [e.name, e.value ?? e.valueFrom?.secretKeyRef?.key]),
      [
        ['ATLANTIS_GITLAB_USER', 'u'],
        ['ATLANTIS_GITLAB_TOKEN', 'gitlab_token'],
        ['ATLANTIS_GITLAB_WEBHOOK_SECRET', 'gitlab_secret'],
        ['ATLANTIS_GITLAB_HOSTNAME', 'gitlab.acme.com'],
      ],
    );
  });

  it('github.org and github.token without a user: what the server does not support, with its reason', () => {
    assert.deepEqual(
      unmapped({ github: { user: 'u', org: 'acme' } }),
      one(
        'github.org',
        "this server does not support --gh-org: it is for Atlantis's App-creation web flow (/github-app/setup), which is not served; an App authenticates with --gh-app-id and its key",
      ),
    );
    assert.deepEqual(
      unmapped({ github: { token: 't' } }),
      one('github', 'the chart uses github.token and github.secret only with github.user'),
    );
  });
});

describe('migrate helm-values: server settings', () => {
  it('the URL, the allowlist and the switches the chart passes as ATLANTIS_*', () => {
    const s = spec({
      atlantisUrl: 'https://atlantis.acme.com',
      orgAllowlist: 'github.com/acme/*',
      allowForkPRs: true,
      disableApplyAll: true,
      enableDiffMarkdownFormat: false,
      defaultTFVersion: '1.9.0',
      defaultTFDistribution: 'terraform',
      logLevel: 'debug',
    });
    assert.equal(s.atlantis?.url, 'https://atlantis.acme.com');
    assert.equal(s.atlantis?.repoAllowlist, 'github.com/acme/*');
    assert.deepEqual(s.atlantis?.env, [
      { name: 'ATLANTIS_ALLOW_FORK_PRS', value: 'true' },
      { name: 'ATLANTIS_DISABLE_APPLY_ALL', value: 'true' },
      { name: 'ATLANTIS_DEFAULT_TF_VERSION', value: '1.9.0' },
      { name: 'ATLANTIS_LOG_LEVEL', value: 'debug' },
    ]);
    assert.equal(spec({ orgAllowlist: '', orgWhitelist: 'github.com/old/*' }).atlantis?.repoAllowlist, 'github.com/old/*');
  });

  it('a switch the server does not support is reported with the reason from its flag table', () => {
    assert.deepEqual(
      unmapped({ allowDraftPRs: true }),
      one('allowDraftPRs', 'this server does not support --allow-draft-prs: draft pull requests are never autoplanned here'),
    );
    // OpenTofu is run here: the switch becomes its variable.
    assert.deepEqual(unmapped({ defaultTFDistribution: 'opentofu' }), []);
    assert.ok(
      spec({ defaultTFDistribution: 'opentofu' }).atlantis?.env?.some(
        (e) => e.name === 'ATLANTIS_DEFAULT_TF_DISTRIBUTION' && e.value === 'opentofu',
      ),
    );
    assert.deepEqual(
      unmapped({ atlantisUrl: 'atlantis.acme.com' }),
      one('atlantisUrl', 'not an absolute http:// or https:// URL, which spec.atlantis.url must be'),
    );
  });

  it("without atlantisUrl, the chart's URL from the Ingress's host", () => {
    const r = convertValues([{ ingress: { host: 'atlantis.acme.com', path: '/events', tls: [{ secretName: 't' }] } }], {
      release: 'atlantis',
      image: 'i',
    });
    assert.equal(r.deployment.spec.atlantis?.url, 'https://atlantis.acme.com');
  });

  it('repoConfig: a ConfigMap, mounted by spec.atlantis.repoConfig; one the server refuses is reported', () => {
    const r = convert({ repoConfig: 'repos:\n- id: /.*/\n  allow_custom_workflows: true' });
    assert.deepEqual(r.deployment.spec.atlantis?.repoConfig, { configMapRef: { name: 'atlantis-repos', key: 'repos.yaml' } });
    assert.deepEqual(r.configMaps[0]?.data, { 'repos.yaml': 'repos:\n- id: /.*/\n  allow_custom_workflows: true\n' });
    assert.deepEqual(
      unmapped({ repoConfig: 'repos:\n- id: /.*/\n  no_such_key: 1\n' }).map((f) => f.value),
      ['repoConfig'],
    );
    assert.match(
      unmapped({ repoConfig: 'repos: 5\n' })[0]?.reason ?? '',
      /^converted into the ConfigMap atlantis-repos, but this server refuses it and would not start: repos.yaml: repos: must be a list$/,
    );
  });

  it('basicAuth and api: Secret references, never the values', () => {
    const s = spec({ basicAuth: { username: 'ops', password: 'fixture-p' }, api: { secret: 'fixture-a' } });
    assert.deepEqual(s.atlantis?.basicAuth, {
      usernameSecretRef: { name: 'atlantis-web-auth', key: 'username' },
      passwordSecretRef: { name: 'atlantis-web-auth', key: 'password' },
    });
    assert.deepEqual(s.atlantis?.api, { secretRef: { name: 'atlantis-api-secret', key: 'apisecret' } });
    assert.deepEqual(spec({ basicAuthSecretName: 'web', apiSecretName: 'api' }).atlantis?.api, {
      secretRef: { name: 'api', key: 'apisecret' },
    });
    assert.deepEqual(
      unmapped({ basicAuth: { username: 'ops' } }),
      one('basicAuth', 'the chart turns basic auth on only with both username and password (or basicAuthSecretName)'),
    );
  });

  it('lockingDbType redis: lockingDB with a shared state key to create, which the chart has no counterpart of', () => {
    const r = convert({
      lockingDbType: 'redis',
      redis: { host: 'r.svc', port: 6380, db: 1, tlsEnabled: true, password: 'fixture-r' },
      replicaCount: 3,
    });
    assert.deepEqual(r.deployment.spec.atlantis?.lockingDB, {
      type: 'redis',
      redis: {
        host: 'r.svc',
        port: 6380,
        db: 1,
        tls: true,
        passwordSecretRef: { name: 'atlantis-redis-auth', key: 'password' },
        sharedStateKeySecretRef: { name: 'atlantis-shared-state-key', key: 'key' },
      },
    });
    assert.equal(r.deployment.spec.replicas, 3);
    assert.deepEqual(
      r.secrets.find((s) => s.name === 'atlantis-shared-state-key')?.keys.map((k) => k.key),
      ['key'],
    );
    const named = convert({ lockingDbType: 'redis', redis: { host: 'r' }, redisSecretName: 'rs', redisSecretPasswordKey: 'pw' });
    assert.deepEqual(named.deployment.spec.atlantis?.lockingDB?.redis?.passwordSecretRef, { name: 'rs', key: 'pw' });
  });

  it('more than one replica on the embedded store: one, and why', () => {
    const r = convert({ replicaCount: 3 });
    assert.equal(r.deployment.spec.replicas, 1);
    assert.deepEqual(
      r.unmapped,
      one(
        'replicaCount',
        '3 pods with the embedded store would each keep their own locks: spec.replicas is 1 (more need lockingDbType redis, spec.atlantis.lockingDB)',
      ),
    );
    assert.equal(convert({ replicaCount: 0 }).deployment.spec.replicas, 0);
    assert.deepEqual(unmapped({ replicaCount: -1 }), one('replicaCount', 'must be 0 or more'));
  });
});

describe("migrate helm-values: the values' variables and arguments", () => {
  it('environment, environmentRaw, environmentSecrets, envFrom: kept; a secret-looking value moved into a Secret', () => {
    const r = convert({
      environmentRaw: [{ name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } }],
      environment: { TF_LOG: 'info', RETRIES: 3, GITHUB_TOKEN: 'fixture-g' },
      environmentSecrets: [{ name: 'TF_VAR_x', secretKeyRef: { name: 's', key: 'k' } }],
      loadEnvFromSecrets: ['es'],
      loadEnvFromConfigMaps: ['ec'],
    });
    assert.deepEqual(r.deployment.spec.atlantis?.env, [
      { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
      { name: 'TF_LOG', value: 'info' },
      { name: 'RETRIES', value: '3' },
      { name: 'GITHUB_TOKEN', valueFrom: { secretKeyRef: { name: 'atlantis-env', key: 'GITHUB_TOKEN' } } },
      { name: 'TF_VAR_x', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } },
    ]);
    assert.deepEqual(r.deployment.spec.atlantis?.envFrom, [{ secretRef: { name: 'es' } }, { configMapRef: { name: 'ec' } }]);
  });

  it("a variable of a flag: the server's table, the operator's own, and one a chart value set after it", () => {
    const r = convert({
      repoConfig: 'repos: []',
      environment: {
        ATLANTIS_CHECKOUT_STRATEGY: 'merge',
        ATLANTIS_DATA_DIR: '/data',
        ATLANTIS_REDIS_HOST: 'r',
        ATLANTIS_REPO_CONFIG: '/x.yaml',
        ATLANTIS_DISABLE_UNLOCK_LABEL: 'no-unlock',
        ATLANTIS_ENABLE_POLICY_CHECKS_TOO: 'x',
        POD_NAME: 'p',
      },
    });
    assert.deepEqual(r.deployment.spec.atlantis?.env, [
      { name: 'ATLANTIS_CHECKOUT_STRATEGY', value: 'merge' },
      { name: 'ATLANTIS_ENABLE_POLICY_CHECKS_TOO', value: 'x' },
    ]);
    assert.deepEqual(r.unmapped, [
      { value: 'environment.ATLANTIS_DATA_DIR', reason: 'the operator sets --data-dir itself' },
      {
        value: 'environment.ATLANTIS_REDIS_HOST',
        reason: "--redis-host is the store's, which spec.atlantis.lockingDB sets (chart: lockingDbType, redis)",
      },
      {
        value: 'environment.ATLANTIS_REPO_CONFIG',
        reason:
          "ATLANTIS_REPO_CONFIG is set by another chart value, which came later in the chart's pod and won; the AtlantisDeployment sets it from that value",
      },
      {
        value: 'environment.ATLANTIS_DISABLE_UNLOCK_LABEL',
        reason: 'this server does not support --disable-unlock-label: not implemented yet',
      },
      { value: 'environment.POD_NAME', reason: 'the operator sets POD_NAME itself' },
    ]);
  });

  it("extraArgs: kept, but a secret moved into a Secret, the operator's flags and what is no flag reported", () => {
    const r = convert({
      extraArgs: ['--disable-autoplan', '--parallel-pool-size', '4', '--port=5000', '--gh-token=fixture-t', 'plan', '--frobnicate'],
    });
    assert.deepEqual(r.deployment.spec.atlantis?.extraArgs, ['--disable-autoplan', '--parallel-pool-size', '4']);
    assert.deepEqual(r.deployment.spec.atlantis?.env, [
      { name: 'ATLANTIS_GH_TOKEN', valueFrom: { secretKeyRef: { name: 'atlantis-env', key: 'ATLANTIS_GH_TOKEN' } } },
    ]);
    assert.deepEqual(r.unmapped, [
      { value: 'extraArgs[3]', reason: 'the operator sets --port itself' },
      { value: 'extraArgs[5]', reason: 'not a flag (`server` takes no other arguments)' },
      { value: 'extraArgs[6]', reason: '--frobnicate is not a flag of Atlantis v0.47 or of this server' },
    ]);
  });

  it('config: each flag of the file as a variable; what env sets too, or no flag is, reported', () => {
    const r = convert({
      logLevel: 'warn',
      config: 'checkout-strategy: merge\nparallel-pool-size: 4\nlog-level: debug\nslack-token: fixture-x\nwebhooks: [{event: apply}]\n',
    });
    assert.deepEqual(r.deployment.spec.atlantis?.env, [
      { name: 'ATLANTIS_CHECKOUT_STRATEGY', value: 'merge' },
      { name: 'ATLANTIS_PARALLEL_POOL_SIZE', value: '4' },
      { name: 'ATLANTIS_LOG_LEVEL', value: 'warn' },
    ]);
    assert.deepEqual(r.unmapped, [
      { value: 'config.log-level', reason: 'ATLANTIS_LOG_LEVEL is set by a chart value too, which Atlantis took over the config file' },
      {
        value: 'config.slack-token',
        reason: 'this server does not support --slack-token: Slack notifications are not implemented (webhooks of kind http are)',
      },
      {
        value: 'config.webhooks',
        reason: 'HTTP webhooks are read from a --config file, which an AtlantisDeployment does not mount (Slack ones are not implemented)',
      },
    ]);
    assert.deepEqual(unmapped({ config: '- a\n' }), one('config', 'not a mapping of flags (the file --config reads)'));
  });
});
