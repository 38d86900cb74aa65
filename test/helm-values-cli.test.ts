// `atlantis-operator migrate helm-values` as a process (the built CLI): exit codes (0 all
// converted, 3 converted with values not converted, 1 bad input with nothing printed on
// stdout, 2 usage), the flags, stdin, several files, and that no secret of a values file ever
// reaches stdout or stderr, in clear or base64, whether it converts or fails.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { CLI, runCli } from './support/cli.js';
import { fixturePath } from './support/helm-values.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'helm-values-cli-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));
const file = (name: string, text: string) => {
  const p = path.join(tmp, name);
  fs.writeFileSync(p, text);
  return p;
};
const docs = (stdout: string) =>
  parseAllDocuments(stdout).map(
    (d) => d.toJSON() as { kind: string; metadata: { name: string; namespace?: string }; spec?: Record<string, unknown> },
  );

/** Every `fixture-secret-...` marker of a file, and its base64. */
function secretsOf(text: string): string[] {
  const markers = [...new Set(text.match(/fixture-secret-[a-z0-9-]+/g) ?? [])];
  // serviceAccountSecrets holds its value base64-encoded, as the chart wants it.
  for (const b64 of text.match(/[A-Za-z0-9+/]{20,}={0,2}/g) ?? []) {
    const plain = Buffer.from(b64, 'base64').toString('utf8');
    if (plain.startsWith('fixture-secret-')) markers.push(plain, b64);
  }
  return [...markers, ...markers.map((m) => Buffer.from(m).toString('base64'))];
}

describe('migrate helm-values: the command', () => {
  it('everything converted: exit 0, the objects on stdout, a summary on stderr', () => {
    const r = runCli([
      'migrate',
      'helm-values',
      fixturePath('helm-values/ingress.yaml'),
      '--namespace',
      'atlantis',
      '--image',
      'registry.acme.com/atlantis-operator:1.2.3',
    ]);
    assert.equal(r.code, 0, r.stderr);
    const d = docs(r.stdout);
    assert.deepEqual(
      d.map((o) => [o.kind, o.metadata.name, o.metadata.namespace]),
      [['AtlantisDeployment', 'atlantis', 'atlantis']],
    );
    assert.equal(d[0]?.spec?.image, 'registry.acme.com/atlantis-operator:1.2.3');
    assert.match(r.stdout, /^# Not converted: none\.$/m);
    assert.equal(r.stderr, 'Converted into the AtlantisDeployment atlantis.\n');
  });

  it("the chart's own values.yaml: exit 3, the one value not converted on stdout (a comment) and stderr", () => {
    const r = runCli(['migrate', 'helm-values', fixturePath('helm-chart/values.yaml')]);
    assert.equal(r.code, 3);
    const reason = "ingress: no host: the chart's Ingress answers every host; spec.ingress needs one (set host)";
    assert.match(r.stdout, /^# Not converted \(1\):$/m);
    assert.ok(r.stdout.includes(`#   ${reason}\n`));
    assert.equal(r.stderr, `Converted into the AtlantisDeployment atlantis.\nNot converted (1):\n  ${reason}\n`);
  });

  it('--release and --name: the chart named its objects after the release; the AtlantisDeployment may take another name', () => {
    const r = runCli([
      'migrate',
      'helm-values',
      fixturePath('helm-chart/test-values.yaml'),
      '--release',
      'prod',
      '--name',
      'atlantis-next',
    ]);
    assert.equal(r.code, 3, r.stderr);
    assert.deepEqual(
      docs(r.stdout).map((o) => o.metadata.name),
      ['atlantis-next'],
    );
    assert.match(r.stdout, /^# {3}atlantis-next-vcs \(create it; the chart's Secret prod-atlantis-webhook has these keys\):$/m);
    assert.match(r.stderr, /^Secrets to create before applying: atlantis-next-vcs /m);
  });

  it("several files merge as helm -f does (the later wins); '-' reads stdin", () => {
    const a = file('a.yaml', 'logLevel: debug\nreplicaCount: 1\ningress: {enabled: false}\n');
    const b = file('b.yaml', 'logLevel: warn\n');
    const r = runCli(['migrate', 'helm-values', a, b]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual((docs(r.stdout)[0]?.spec?.atlantis as { env?: unknown } | undefined)?.env, [
      { name: 'ATLANTIS_LOG_LEVEL', value: 'warn' },
    ]);
    const s = spawnSync(process.execPath, [CLI, 'migrate', 'helm-values', '-'], { input: 'ingress: {enabled: false}\n', encoding: 'utf8' });
    assert.equal(s.status, 0, s.stderr);
    assert.match(s.stdout, /^# From the values of the atlantis chart 6\.9\.3 \(-; release atlantis\)/);
  });

  it('bad input: exit 1, one line on stderr naming the file and the place, nothing on stdout', () => {
    const cases: Array<[string, string]> = [
      ['notyaml.yaml', 'github:\n  token: fixture-secret-bad\n - x\n'],
      ['list.yaml', '- a\n'],
      ['types.yaml', 'github:\n  user: [a]\n'],
      ['missing.yaml', ''],
    ];
    const want: Record<string, string> = {
      'notyaml.yaml': `atlantis-operator: nothing converted: ${path.join(tmp, 'notyaml.yaml')}:3:1: not valid YAML (BLOCK_AS_IMPLICIT_KEY)\n`,
      'list.yaml': `atlantis-operator: nothing converted: ${path.join(tmp, 'list.yaml')}: the values must be a YAML mapping (key: value), not a list\n`,
      'types.yaml': 'atlantis-operator: nothing converted: github.user must be a string, not a list\n',
      'missing.yaml': `atlantis-operator: nothing converted: ${path.join(tmp, 'missing.yaml')}: cannot be read (ENOENT)\n`,
    };
    for (const [name, text] of cases) {
      const p = name === 'missing.yaml' ? path.join(tmp, name) : file(name, text);
      const r = runCli(['migrate', 'helm-values', p]);
      assert.equal(r.code, 1, name);
      assert.equal(r.stdout, '', name);
      assert.equal(r.stderr, want[name], name);
    }
  });

  it('usage errors: exit 2', () => {
    const none = runCli(['migrate', 'helm-values']);
    assert.equal(none.code, 2);
    assert.equal(
      none.stderr,
      'atlantis-operator: migrate helm-values takes the values files to convert (helm get values <release> -o yaml > values.yaml)\n',
    );
    const flag = runCli(['migrate', 'helm-values', '--frobnicate', 'x.yaml']);
    assert.equal(flag.code, 2);
    assert.equal(flag.stderr, 'atlantis-operator: unknown flag: --frobnicate\n');
    const help = runCli(['migrate', 'helm-values', '--help']);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /--release string\n/);
  });

  it('no secret of a values file in the output, converted or refused, in clear or base64', () => {
    const text = fs.readFileSync(fixturePath('helm-values/secrets.yaml'), 'utf8');
    const secrets = secretsOf(text);
    assert.ok(secrets.length >= 40, `the fixture has its markers (${secrets.length})`);
    const ok = runCli(['migrate', 'helm-values', fixturePath('helm-values/secrets.yaml')]);
    assert.equal(ok.code, 3, ok.stderr);
    // A file the converter refuses after reading the secrets: a wrong type further on.
    const bad = runCli(['migrate', 'helm-values', file('secrets-bad.yaml', `${text}\nreplicaCount: many\n`)]);
    assert.equal(bad.code, 1);
    for (const r of [ok, bad])
      for (const s of secrets) {
        assert.ok(!r.stdout.includes(s), `stdout holds ${s.slice(0, 22)}…`);
        assert.ok(!r.stderr.includes(s), `stderr holds ${s.slice(0, 22)}…`);
      }
    // Every secret became a Secret reference instead.
    const ad = docs(ok.stdout).at(-1) as unknown as { spec: { atlantis: Record<string, unknown> } };
    assert.deepEqual(Object.keys(ad.spec.atlantis).sort(), ['api', 'basicAuth', 'env', 'github', 'lockingDB', 'repoAllowlist']);
    for (const name of [
      'atlantis-vcs',
      'atlantis-web-auth',
      'atlantis-api-secret',
      'atlantis-redis-auth',
      'atlantis-env',
      'atlantis-gitconfig-file',
      'atlantis-netrc-file',
      'atlantis-aws-files',
      'atlantis-gcp-credentials',
    ])
      assert.match(ok.stdout, new RegExp(`^# {3}${name} \\(create it`, 'm'), name);
  });
});
