// The client configuration loader (src/k8s/kubeconfig.ts): kubeconfig files read without
// client-node, in-cluster files, and the hand-over to client-node for what it alone does.
// The suites on the local control plane use it for every request (admin client certificate,
// pods' token kubeconfigs); these cases cover the file formats.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import type https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { currentNamespace, inClusterConfig, kubeConfigFromFile, kubeconfigYaml, loadKubeConfig } from '../src/k8s/kubeconfig.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kubeconfig-test-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

function write(name: string, text: string): string {
  const file = path.join(tmp, name);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text);
  return file;
}

function kubeconfig(user: string, cluster = '    server: https://127.0.0.1:6443', extra = ''): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'current-context: ctx',
    'contexts:',
    '- name: other',
    '  context: { cluster: c, user: u, namespace: wrong }',
    '- name: ctx',
    '  context: { cluster: c, user: u, namespace: team-a }',
    'clusters:',
    '- name: c',
    '  cluster:',
    cluster,
    'users:',
    '- name: u',
    '  user:',
    user,
    extra,
  ].join('\n');
}

async function optionsOf(kc: { applyToHTTPSOptions(o: https.RequestOptions): Promise<void> }): Promise<https.RequestOptions> {
  const o: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(o);
  return o;
}

describe('kubeConfigFromFile', () => {
  it('reads a token user and a CA file relative to the kubeconfig', async () => {
    write('dir1/certs/ca.crt', 'CA PEM');
    const file = write(
      'dir1/config',
      kubeconfig(
        '    token: abc.def',
        '    server: https://10.0.0.1:6443\n    certificate-authority: certs/ca.crt\n    tls-server-name: kubernetes.default.svc',
      ),
    );
    const kc = kubeConfigFromFile(file);
    assert.deepEqual(kc.getCurrentCluster(), { server: 'https://10.0.0.1:6443', skipTLSVerify: false });
    assert.equal(currentNamespace(kc), 'team-a');
    const o = await optionsOf(kc);
    assert.equal(o.ca?.toString(), 'CA PEM');
    assert.equal(o.servername, 'kubernetes.default.svc');
    assert.deepEqual(o.headers, { Authorization: 'Bearer abc.def' });
    assert.equal(o.rejectUnauthorized, undefined);
  });

  it('reads client certificate data, and insecure-skip-tls-verify', async () => {
    const b64 = (s: string) => Buffer.from(s).toString('base64');
    const file = write(
      'certs.yaml',
      kubeconfig(
        `    client-certificate-data: ${b64('CERT')}\n    client-key-data: ${b64('KEY')}`,
        '    server: https://127.0.0.1:6443\n    insecure-skip-tls-verify: true',
      ),
    );
    const kc = kubeConfigFromFile(file);
    const o = await optionsOf(kc);
    assert.equal(o.cert?.toString(), 'CERT');
    assert.equal(o.key?.toString(), 'KEY');
    assert.equal(o.rejectUnauthorized, false);
    assert.equal(o.headers, undefined, 'no Authorization header without a token');
    assert.equal(kc.getCurrentCluster()?.skipTLSVerify, true);
  });

  it('reads a token file, and basic auth', async () => {
    write('dir2/token', 'from-file\n');
    const o = await optionsOf(kubeConfigFromFile(write('dir2/config', kubeconfig('    tokenFile: token'))));
    assert.deepEqual(o.headers, { Authorization: 'Bearer from-file' });
    const basic = await optionsOf(kubeConfigFromFile(write('basic.yaml', kubeconfig('    username: admin\n    password: pw'))));
    assert.equal(basic.auth, 'admin:pw');
  });

  it('says what is missing in a kubeconfig it cannot use', () => {
    assert.throws(() => kubeConfigFromFile(write('nocontext.yaml', 'apiVersion: v1\nkind: Config\n')), /no current-context/);
    assert.throws(
      () => kubeConfigFromFile(write('badctx.yaml', kubeconfig('    token: t').replace('current-context: ctx', 'current-context: nope'))),
      /context "nope" not found/,
    );
    assert.throws(
      () => kubeConfigFromFile(write('noserver.yaml', kubeconfig('    token: t', '    insecure-skip-tls-verify: true'))),
      /cluster "c" not found or has no server/,
    );
    assert.throws(
      () =>
        kubeConfigFromFile(
          write('nofile.yaml', kubeconfig('    token: t', '    server: https://x\n    certificate-authority: missing.crt')),
        ),
      /ENOENT/,
    );
    assert.throws(
      () =>
        kubeConfigFromFile(write('exec.yaml', kubeconfig('    exec: { apiVersion: client.authentication.k8s.io/v1, command: /bin/true }'))),
      /uses exec/,
    );
  });
});

describe('kubeconfigYaml', () => {
  it('writes what kubeConfigFromFile and client-node read back: server, CA, credentials, namespace', async () => {
    const b64 = (s: string) => Buffer.from(s).toString('base64');
    const token = `eyJ${'x'.repeat(900)}.sig`; // longer than a YAML line: must stay one scalar
    const file = write(
      'built/token.yaml',
      kubeconfigYaml({ name: 'local', server: 'https://127.0.0.1:6443', caData: b64('CA PEM'), user: { token }, namespace: 'team-b' }),
    );
    const kc = kubeConfigFromFile(file);
    assert.deepEqual(kc.getCurrentCluster(), { server: 'https://127.0.0.1:6443', skipTLSVerify: false });
    assert.equal(currentNamespace(kc), 'team-b');
    const o = await optionsOf(kc);
    assert.equal(o.ca?.toString(), 'CA PEM');
    assert.deepEqual(o.headers, { Authorization: `Bearer ${token}` });
    const full = new KubeConfig();
    full.loadFromFile(file);
    assert.equal(full.getCurrentUser()?.token, token);

    const certs = kubeConfigFromFile(
      write(
        'built/certs.yaml',
        kubeconfigYaml({
          name: 'local',
          server: 'https://127.0.0.1:6443',
          caData: b64('CA'),
          user: { 'client-certificate-data': b64('CERT'), 'client-key-data': b64('KEY') },
          namespace: 'default',
        }),
      ),
    );
    const c = await optionsOf(certs);
    assert.equal(c.cert?.toString(), 'CERT');
    assert.equal(c.key?.toString(), 'KEY');
    assert.equal(
      fs
        .readFileSync(file, 'utf8')
        .split('\n')
        .filter((l) => l.includes(token)).length,
      1,
    );
  });
});

describe('loadKubeConfig', () => {
  it('hands a kubeconfig with an exec plugin to client-node', async () => {
    const file = write('exec2.yaml', kubeconfig('    exec: { apiVersion: client.authentication.k8s.io/v1, command: /bin/true }'));
    const kc = await loadKubeConfig(file);
    assert.ok(kc instanceof KubeConfig, 'client-node KubeConfig');
    assert.equal(kc.getCurrentCluster()?.server, 'https://127.0.0.1:6443');
    assert.equal(currentNamespace(kc), 'team-a');
  });

  it('reads a plain kubeconfig itself', async () => {
    const kc = await loadKubeConfig(write('plain.yaml', kubeconfig('    token: t')));
    assert.ok(!(kc instanceof KubeConfig));
    assert.deepEqual((await optionsOf(kc)).headers, { Authorization: 'Bearer t' });
  });

  it('fails with the reason for a broken file, and does not fall back', async () => {
    await assert.rejects(loadKubeConfig(write('broken.yaml', 'current-context: [')), /current-context|YAML|Flow/i);
    await assert.rejects(loadKubeConfig(path.join(tmp, 'absent.yaml')), /ENOENT/);
  });
});

describe('inClusterConfig', () => {
  it('reads the service-account files; brackets an IPv6 service host', async () => {
    const dir = path.join(tmp, 'sa');
    write('sa/token', 'sa-token');
    write('sa/ca.crt', 'SA CA');
    write('sa/namespace', 'atlantis\n');
    const kc = inClusterConfig({ KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' }, dir);
    assert.equal(kc.getCurrentCluster()?.server, 'https://[fd00::1]:443');
    assert.equal(currentNamespace(kc), 'atlantis');
    const o = await optionsOf(kc);
    assert.equal(o.ca?.toString(), 'SA CA');
    assert.deepEqual(o.headers, { Authorization: 'Bearer sa-token' });
    assert.equal(
      inClusterConfig({ KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' }, dir).getCurrentCluster()?.server,
      'https://10.96.0.1:443',
    );
    assert.throws(() => inClusterConfig({}, dir), /KUBERNETES_SERVICE_HOST/);
  });
});
