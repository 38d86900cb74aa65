// `migrate helm-values`, its reading of values (no cluster): the chart's defaults as in its
// values.yaml, Helm's merge and YAML 1.1, the chart's names, the type checks (a clear error
// naming the value, never showing it), and what the server's flag table makes of a flag.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import { CHART_DEFAULTS } from '../src/cli/helm-values/chart-defaults.js';
import { chartFullname, convertValues } from '../src/cli/helm-values/convert.js';
import { judgeFlag, secretByName } from '../src/cli/helm-values/flags.js';
import { coalesce, type Obj, parseValues, ValuesError } from '../src/cli/helm-values/values.js';
import { fixturePath } from './support/helm-values.js';

const convert = (values: Obj, release = 'atlantis') => convertValues([values], { release, image: 'atlantis-operator:test' });

describe('migrate helm-values: reading values', () => {
  it("the chart's defaults are its values.yaml (6.9.3), read as Helm reads YAML", () => {
    const file = parse(fs.readFileSync(fixturePath('helm-chart/values.yaml'), 'utf8'), { version: '1.1' });
    assert.deepEqual(CHART_DEFAULTS, file);
  });

  it("the chart's full name (atlantis.fullname)", () => {
    const cases: Array<[string, string | undefined, string | undefined, string]> = [
      ['atlantis', undefined, undefined, 'atlantis'],
      ['my-release', undefined, undefined, 'my-release-atlantis'],
      ['prod-atlantis-eu', undefined, undefined, 'prod-atlantis-eu'],
      ['my', 'tf', undefined, 'my-tf'],
      ['my', 'tf', 'custom', 'custom'],
      ['r', undefined, `${'a'.repeat(62)}-b`, 'a'.repeat(62)],
      [`${'x'.repeat(60)}-y`, undefined, undefined, `${'x'.repeat(60)}-y`.slice(0, 63)],
    ];
    for (const [release, nameOverride, fullnameOverride, want] of cases)
      assert.equal(chartFullname(release, nameOverride, fullnameOverride), want, `${release} ${nameOverride} ${fullnameOverride}`);
  });

  it("Helm's merge: maps key by key, lists and scalars replaced, null removes", () => {
    const base: Obj = { a: { b: 1, c: [1, 2], d: { e: 'x' } }, f: 'keep', g: 'drop' };
    assert.deepEqual(coalesce(base, { a: { b: 2, c: [3], d: { h: 'y' } }, g: null, i: true }), {
      a: { b: 2, c: [3], d: { e: 'x', h: 'y' } },
      f: 'keep',
      i: true,
    });
    // Later files win.
    const r = convertValues([{ logLevel: 'debug' }, { logLevel: 'warn' }], { release: 'atlantis', image: 'i' });
    assert.deepEqual(r.deployment.spec.atlantis?.env, [{ name: 'ATLANTIS_LOG_LEVEL', value: 'warn' }]);
    // A null takes a default away: no Service type, so the operator's ClusterIP.
    assert.equal(convert({ service: { type: null } }).deployment.spec.service?.type, undefined);
  });

  it('YAML 1.1 as Helm: yes and on are true', () => {
    const v = parseValues('allowForkPRs: yes\nhidePrevPlanComments: on\n', 'v.yaml');
    assert.deepEqual(v, { allowForkPRs: true, hidePrevPlanComments: true });
    assert.deepEqual(convert(v).deployment.spec.atlantis?.env, [
      { name: 'ATLANTIS_ALLOW_FORK_PRS', value: 'true' },
      { name: 'ATLANTIS_HIDE_PREV_PLAN_COMMENTS', value: 'true' },
    ]);
  });

  it('a file that is not YAML or not a mapping: an error naming the place, never the text', () => {
    const bad: Array<[string, string]> = [
      ['github:\n  token: fixture-secret-in-bad-yaml\n - x\n', 'v.yaml:3:1: not valid YAML (BLOCK_AS_IMPLICIT_KEY)'],
      ['github: {token: fixture-secret-in-flow\n', 'v.yaml:2:1: not valid YAML (BAD_INDENT)'],
      ['github:\n\ttoken: fixture-secret-after-tab\n', 'v.yaml:2:1: not valid YAML (TAB_AS_INDENT)'],
      ['a: "fixture-secret-unterminated\n', 'v.yaml:2:1: not valid YAML (MISSING_CHAR)'],
      ['- a\n- b\n', 'v.yaml: the values must be a YAML mapping (key: value), not a list'],
      ['fixture-secret-scalar\n', 'v.yaml: the values must be a YAML mapping (key: value), not a string'],
      ['42\n', 'v.yaml: the values must be a YAML mapping (key: value), not an integer'],
    ];
    for (const [text, message] of bad) {
      assert.throws(
        () => parseValues(text, 'v.yaml'),
        (e: Error) => e instanceof ValuesError && e.message === message,
        text,
      );
    }
    assert.deepEqual(parseValues('', 'v.yaml'), {}, 'an empty file is no values');
    assert.deepEqual(parseValues('# only a comment\n', 'v.yaml'), {});
  });

  it('a value of the wrong type: an error naming the value and the type, never the value', () => {
    const bad: Array<[Obj, string]> = [
      [{ github: 'fixture-secret-token' }, 'github must be a mapping, not a string'],
      [{ github: { user: 42 } }, 'github.user must be a string, not an integer'],
      [{ github: { user: 'u', token: ['fixture-secret'] } }, 'github.token must be a string, not a list'],
      [{ allowForkPRs: 'sometimes' }, 'allowForkPRs must be true or false, not a string'],
      [{ replicaCount: '3' }, 'replicaCount must be an integer, not a string'],
      [{ replicaCount: 1.5 }, 'replicaCount must be an integer, not a number'],
      [{ githubApp: { id: 'abc' } }, 'githubApp.id must be an integer (or a string of digits), not a string'],
      [{ service: { port: true } }, 'service.port must be an integer (or a string of digits), not a boolean'],
      [{ nodeSelector: { zone: 1 } }, 'nodeSelector.zone must be a string, not an integer'],
      [{ tolerations: { key: 'x' } }, 'tolerations must be a list, not a mapping'],
      [{ extraVolumes: ['v'] }, 'extraVolumes[0] must be a mapping, not a string'],
      [{ environment: { A: { b: 1 } } }, 'environment.A must be a string, a number or true/false, not a mapping'],
      [{ environmentSecrets: [{ name: 'A', secretKeyRef: 'x' }] }, 'environmentSecrets[0] must be {name, secretKeyRef: {name, key}}'],
      [{ loadEnvFromSecrets: [{ name: 'x' }] }, 'loadEnvFromSecrets[0] must be a string, not a mapping'],
      [{ repoConfig: { repos: [] } }, 'repoConfig must be a string, not a mapping'],
      [{ redis: { port: '6379x' } }, 'redis.port must be an integer, not a string'],
      [{ basicAuth: { password: 1234 } }, 'basicAuth.password must be a string, not an integer'],
      [{ googleServiceAccountSecrets: [{ name: 'a' }] }, 'googleServiceAccountSecrets[0] must be {name, secretName}'],
      [{ ingress: { enabled: 'yes please' } }, 'ingress.enabled must be true or false, not a string'],
      [{ extraArgs: [{ a: 1 }] }, 'extraArgs[0] must be a string, not a mapping'],
    ];
    for (const [values, message] of bad)
      assert.throws(
        () => convert(values),
        (e: Error) => e instanceof ValuesError && e.message === message,
        JSON.stringify(values),
      );
  });

  it('a name that is no DNS label: an error asking for --name', () => {
    assert.throws(
      () => convert({ fullnameOverride: 'Atlantis_Prod' }),
      (e: Error) =>
        e instanceof ValuesError &&
        e.message ===
          `the AtlantisDeployment's name "Atlantis_Prod" (the chart's full name) must be a DNS label of at most 63 characters (lowercase letters, digits, '-', a letter first): give --name`,
    );
    assert.equal(
      convertValues([{ fullnameOverride: 'Atlantis_Prod' }], { release: 'r', name: 'atlantis-prod', image: 'i' }).deployment.metadata.name,
      'atlantis-prod',
    );
  });

  it('a value the chart does not have is reported, not dropped', () => {
    const r = convert({ githb: { user: 'typo' }, github: { user: 'u', tokn: 'x' }, ingress: { enabled: false } });
    const why = 'not a value of the atlantis chart 6.9.3 (its values.schema.json has no such value, so Helm refuses it)';
    assert.deepEqual(r.unmapped, [
      { value: 'github.tokn', reason: why },
      { value: 'githb', reason: why },
    ]);
  });
});

describe("migrate helm-values: the server's flag table decides", () => {
  it('judgeFlag', () => {
    const cases: Array<[string, string | boolean | number, ReturnType<typeof judgeFlag>]> = [
      ['log-level', 'debug', { kind: 'set' }],
      ['checkout-strategy', 'merge', { kind: 'set' }],
      ['job-log-retention', '24h', { kind: 'set' }],
      ['drain-timeout', '10m', { kind: 'unmapped', reason: 'the operator sets --drain-timeout itself' }],
      ['allow-draft-prs', false, { kind: 'same' }],
      ['allow-draft-prs', 'false', { kind: 'same' }],
      [
        'allow-draft-prs',
        true,
        { kind: 'unmapped', reason: 'this server does not support --allow-draft-prs: draft pull requests are never autoplanned here' },
      ],
      ['default-tf-distribution', 'terraform', { kind: 'same' }],
      ['default-tf-distribution', 'opentofu', { kind: 'set' }],
      ['use-tf-plugin-cache', true, { kind: 'same' }],
      ['use-tf-plugin-cache', false, { kind: 'set' }],
      ['language', 'de', { kind: 'unmapped', reason: 'this server ignores --language: comments are in English' }],
      ['port', 8080, { kind: 'unmapped', reason: 'the operator sets --port itself' }],
      ['data-dir', '/x', { kind: 'unmapped', reason: 'the operator sets --data-dir itself' }],
      ['shared-state-key-file', '/k', { kind: 'unmapped', reason: 'the operator sets --shared-state-key-file itself' }],
      [
        'redis-host',
        'r',
        { kind: 'unmapped', reason: "--redis-host is the store's, which spec.atlantis.lockingDB sets (chart: lockingDbType, redis)" },
      ],
      ['no-such-flag', true, { kind: 'unmapped', reason: '--no-such-flag is not a flag of Atlantis v0.47 or of this server' }],
    ];
    for (const [flag, value, want] of cases) assert.deepEqual(judgeFlag(flag, value), want, `${flag}=${value}`);
  });

  it('a variable holds a secret by its name, not when it names a file or an id', () => {
    const yes = [
      'GITHUB_TOKEN',
      'TF_VAR_db_password',
      'AWS_SECRET_ACCESS_KEY',
      'VAULT_TOKEN',
      'DATADOG_API_KEY',
      'GOOGLE_CREDENTIALS',
      'SSH_PRIVATE_KEY',
    ];
    const no = [
      'AWS_WEB_IDENTITY_TOKEN_FILE',
      'AWS_ACCESS_KEY_ID',
      'VAULT_TOKEN_PATH',
      'SECRETS_DIR',
      'TF_LOG',
      'AWS_ROLE_ARN',
      'GOOGLE_APPLICATION_CREDENTIALS',
    ];
    for (const n of yes) assert.equal(secretByName(n), true, n);
    for (const n of no) assert.equal(secretByName(n), false, n);
  });

  it('docs/migrating-from-atlantis.md: the chart value by value table names every value of the chart', () => {
    const doc = fs.readFileSync(fixturePath('../../docs/migrating-from-atlantis.md'), 'utf8');
    const table = doc.slice(doc.indexOf('### Chart value by value'), doc.indexOf('## How the import works'));
    const named = new Set(
      table
        .split('\n')
        .filter((l) => l.startsWith('| `'))
        .flatMap((l) => [...(l.split(' | ')[0] ?? '').matchAll(/`([A-Za-z_]+)/g)].map((m) => m[1])),
    );
    const schema = JSON.parse(fs.readFileSync(fixturePath('helm-chart/values.schema.json'), 'utf8')) as { properties: Obj };
    for (const key of new Set([...Object.keys(CHART_DEFAULTS), ...Object.keys(schema.properties)]))
      assert.ok(named.has(key), `${key} is in the table`);
  });
});
