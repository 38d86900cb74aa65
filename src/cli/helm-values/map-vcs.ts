// The chart's VCS values: github (a user and its token), githubApp, and gitea, gitlab,
// bitbucket, azuredevops. Every token, key and webhook secret becomes a reference to a key of
// the Secret the chart read it from (vcsSecretName, or the one the chart made: here a Secret
// to create with the same keys). Pure.
import type { Conversion, SecretSource } from './conversion.js';
import { envOfFlag, judgeFlag } from './flags.js';
import { type Obj, truthy, type Values } from './values.js';

/** The Secret the chart reads every VCS token and webhook secret from. */
function vcsSecret(v: Values, c: Conversion): SecretSource {
  const named = v.str('vcsSecretName');
  return named ? { name: named, create: false } : c.newSecret('vcs', 'webhook');
}

export function mapVcs(v: Values, c: Conversion): void {
  const gh = v.section('github');
  const app = v.section('githubApp');
  const user = v.str('github', 'user');
  const hostname = v.str('github', 'hostname');
  const org = v.str('github', 'org');
  const token = v.str('github', 'token');
  const secret = v.str('github', 'secret');
  v.str('vcsSecretName');
  if (user) {
    const src = vcsSecret(v, c);
    c.atlantis.github = {
      user,
      tokenSecretRef: c.secretRef(src, 'github_token', 'the GitHub token (github.token)'),
      webhookSecretRef: c.secretRef(src, 'github_secret', 'the webhook secret (github.secret)'),
    };
  } else if (token || secret) {
    c.notMapped('github', 'the chart uses github.token and github.secret only with github.user');
  }
  if (hostname) c.settingsEnv.push({ name: envOfFlag('gh-hostname'), value: hostname });
  if (org) {
    const verdict = judgeFlag('gh-org', org);
    if (verdict.kind === 'unmapped') c.notMapped('github.org', verdict.reason);
    else if (verdict.kind === 'set') c.settingsEnv.push({ name: envOfFlag('gh-org'), value: org });
  }
  mapGithubApp(v, c, app, truthy(gh) && !!user);
  for (const other of OTHER_VCS) mapOtherVcs(v, c, other);
}

function mapGithubApp(v: Values, c: Conversion, app: Obj, withUser: boolean): void {
  const id = v.int(['githubApp', 'id'], { orString: true });
  const installationId = v.int(['githubApp', 'installationId'], { orString: true });
  const slug = v.str('githubApp', 'slug');
  const key = v.str('githubApp', 'key');
  const secret = v.str('githubApp', 'secret');
  if (!truthy(app)) return;
  if (withUser) {
    c.notMapped(
      'githubApp',
      "github.user is set too, so Atlantis used the user's token, not the App; the AtlantisDeployment takes one of them (github.user here)",
    );
    return;
  }
  if (id === undefined || id < 1) {
    c.notMapped('githubApp', 'no githubApp.id: an App is known by its id (spec.atlantis.githubApp.id)');
    return;
  }
  if (slug !== undefined && slug !== '' && !/^[a-z0-9][-a-z0-9]*$/.test(slug))
    c.notMapped('githubApp.slug', "not an App's slug (lowercase letters, digits and '-'), which spec.atlantis.githubApp.slug must be");
  const named = v.str('vcsSecretName');
  const src = vcsSecret(v, c);
  if (!key && !named)
    c.note('githubApp.key', `not given: the AtlantisDeployment reads the App's key from ${src.name}, key key.pem, which must hold it`);
  c.atlantis.githubApp = {
    id,
    ...(installationId !== undefined ? { installationId } : {}),
    ...(slug && /^[a-z0-9][-a-z0-9]*$/.test(slug) ? { slug } : {}),
    keySecretRef: c.secretRef(src, 'key.pem', "the App's private key, PEM (githubApp.key)"),
  };
  // As the chart: the webhook secret from the same Secret, with a secret or an existing Secret.
  if (secret || named)
    c.atlantis.github = {
      ...c.atlantis.github,
      webhookSecretRef: c.secretRef(src, 'github_secret', 'the webhook secret (githubApp.secret)'),
    };
  // The chart turns --write-git-creds on with an App (terraform's module downloads over HTTPS).
  c.settingsEnv.push({ name: envOfFlag('write-git-creds'), value: 'true' });
}

interface OtherVcs {
  value: string;
  /** [sub-value, flag, key of the VCS Secret (a secret) or undefined (a plain value), the sub-value it needs], in the chart's order. */
  settings: Array<[sub: string, flag: string, secretKey?: string, needs?: string]>;
}

/** The other providers as the chart sets them (statefulset.yaml): the user always, the rest when given. */
const OTHER_VCS: OtherVcs[] = [
  {
    value: 'gitea',
    settings: [
      ['user', 'gitea-user'],
      ['token', 'gitea-token', 'gitea_token'],
      ['secret', 'gitea-webhook-secret', 'gitea_secret'],
      ['baseUrl', 'gitea-base-url'],
    ],
  },
  {
    value: 'gitlab',
    settings: [
      ['user', 'gitlab-user'],
      ['token', 'gitlab-token', 'gitlab_token'],
      ['secret', 'gitlab-webhook-secret', 'gitlab_secret'],
      ['hostname', 'gitlab-hostname'],
    ],
  },
  {
    value: 'bitbucket',
    settings: [
      ['user', 'bitbucket-user'],
      ['apiUser', 'bitbucket-api-user'],
      ['token', 'bitbucket-token', 'bitbucket_token'],
      ['baseURL', 'bitbucket-base-url'],
      ['secret', 'bitbucket-webhook-secret', 'bitbucket_secret', 'baseURL'],
    ],
  },
  {
    value: 'azuredevops',
    settings: [
      ['user', 'azuredevops-user'],
      ['token', 'azuredevops-token', 'azuredevops_token'],
      ['webhookUser', 'azuredevops-webhook-user'],
      ['webhookPassword', 'azuredevops-webhook-password', 'azuredevops_webhook_password'],
    ],
  },
];

function mapOtherVcs(v: Values, c: Conversion, o: OtherVcs): void {
  const given = v.section(o.value);
  const subs = new Map(o.settings.map(([sub]) => [sub, v.str(o.value, sub)]));
  if (!truthy(given)) return;
  // Every setting the chart would give Atlantis; a secret's is read from the VCS Secret.
  const wanted = o.settings.filter(
    ([sub, , secretKey, needs]) => (needs === undefined || subs.get(needs)) && (secretKey !== undefined || sub === 'user' || subs.get(sub)),
  );
  for (const [sub, flag, secretKey] of wanted) {
    const verdict = judgeFlag(flag, secretKey ? 'set' : (subs.get(sub) ?? ''));
    if (verdict.kind === 'unmapped') {
      c.notMapped(o.value, verdict.reason);
      return;
    }
  }
  const src = vcsSecret(v, c);
  for (const [sub, flag, secretKey] of wanted) {
    const name = envOfFlag(flag);
    if (secretKey) c.settingsEnv.push({ name, valueFrom: { secretKeyRef: c.secretRef(src, secretKey, `${o.value}.${sub}`) } });
    else c.settingsEnv.push({ name, value: subs.get(sub) ?? '' });
  }
}
