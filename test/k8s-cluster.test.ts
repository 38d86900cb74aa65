// The real local control plane: CRDs through kubectl, watch, optimistic concurrency (409),
// schema and CEL validation (422), RBAC, garbage collection, namespace creation speed.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KubeApiError, kubeRequest, kubeRequestOk, MERGE_PATCH } from '../src/k8s/client.js';
import { Informer, type KubeObject } from '../src/k8s/informer.js';
import { loadKubeConfig } from '../src/k8s/kubeconfig.js';
import { KubeConfig } from '@kubernetes/client-node';
import { freshNamespace, getCluster, waitFor, waitForCrdEstablished } from './support/k8s.js';

const GROUP = 'k8stest.atlantis-operator.dev';
const CRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.${GROUP}
spec:
  group: ${GROUP}
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wdg]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            x-kubernetes-validations:
            - rule: "self.size <= 5 || self.color == 'blue'"
              message: "a widget larger than 5 must be blue"
            properties:
              size: {type: integer, minimum: 1, maximum: 10}
              color: {type: string, enum: [red, blue], default: red}
          status:
            type: object
            properties:
              observed: {type: integer}
`;

interface Widget extends KubeObject {
  spec?: { size?: number; color?: string };
  status?: { observed?: number };
}

async function ensureCrd(): Promise<void> {
  const c = await getCluster();
  const r = await c.kubectl(['apply', '-f', '-'], { input: CRD });
  assert.equal(r.exitCode, 0, `kubectl apply CRD failed: ${r.stderr}`);
  await waitForCrdEstablished(c.kc, `widgets.${GROUP}`, 30_000);
  // discovery can lag the Established condition by a moment
  await waitFor('widgets served', async () => (await kubeRequest(c.kc, 'GET', `/apis/${GROUP}/v1/widgets`)).status === 200, {
    timeoutMs: 20_000,
  });
}

test('kubectl applies a CRD and a custom resource, which a watch sees with its defaults', async () => {
  const c = await getCluster();
  await ensureCrd();
  const ns = await freshNamespace('crd');
  const inf = new Informer<Widget>(c.kc, `/apis/${GROUP}/v1/namespaces/${ns}/widgets`);
  const seen: Array<[string, Widget]> = [];
  inf.onEvent((t, o) => seen.push([t, o]));
  await inf.start();
  try {
    assert.equal(inf.hasSynced(), true);
    assert.equal(inf.list().length, 0);
    const r = await c.kubectl(['apply', '-n', ns, '-f', '-'], {
      input: `apiVersion: ${GROUP}/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: 3}\n`,
    });
    assert.equal(r.exitCode, 0, r.stderr);
    assert.match(r.stdout, /widget\.k8stest\.atlantis-operator\.dev\/w1 created/);
    const added = await waitFor('ADDED w1', () => seen.find(([t, o]) => t === 'ADDED' && o.metadata?.name === 'w1'), { timeoutMs: 10_000 });
    assert.equal(added[1].spec?.color, 'red', 'the schema default is applied');
    assert.equal(inf.get(ns, 'w1')?.spec?.size, 3);
    // the status subresource: status changes do not bump generation
    await kubeRequestOk(
      c.kc,
      'PATCH',
      `/apis/${GROUP}/v1/namespaces/${ns}/widgets/w1/status`,
      { status: { observed: 1 } },
      { contentType: MERGE_PATCH },
    );
    const mod = await waitFor('MODIFIED status', () => seen.find(([t, o]) => t === 'MODIFIED' && o.status?.observed === 1), {
      timeoutMs: 10_000,
    });
    assert.equal(mod[1].metadata?.generation, 1);
    // kubectl get by short name
    const g = await c.kubectl(['get', 'wdg', '-n', ns, '-o', 'jsonpath={.items[*].metadata.name}']);
    assert.equal(g.stdout.trim(), 'w1');
    const d = await c.kubectl(['delete', '-n', ns, 'widget', 'w1']);
    assert.equal(d.exitCode, 0, d.stderr);
    await waitFor('DELETED w1', () => seen.find(([t, o]) => t === 'DELETED' && o.metadata?.name === 'w1'), { timeoutMs: 10_000 });
    assert.equal(inf.get(ns, 'w1'), undefined);
  } finally {
    inf.stop();
  }
});

test('a stale update gets 409 Conflict', async () => {
  const c = await getCluster();
  await ensureCrd();
  const ns = await freshNamespace('conflict');
  const base = `/apis/${GROUP}/v1/namespaces/${ns}/widgets`;
  const created = await kubeRequestOk<Widget>(c.kc, 'POST', base, {
    apiVersion: `${GROUP}/v1`,
    kind: 'Widget',
    metadata: { name: 'w' },
    spec: { size: 1 },
  });
  const stale = structuredClone(created);
  // someone else updates it first
  await kubeRequestOk(c.kc, 'PUT', `${base}/w`, { ...created, spec: { size: 2, color: 'red' } });
  const res = await kubeRequest<{ reason?: string; message?: string }>(c.kc, 'PUT', `${base}/w`, {
    ...stale,
    spec: { size: 4, color: 'red' },
  });
  assert.equal(res.status, 409);
  assert.equal(res.body.reason, 'Conflict');
  assert.match(res.body.message ?? '', /the object has been modified; please apply your changes to the latest version/);
  await assert.rejects(kubeRequestOk(c.kc, 'PUT', `${base}/w`, stale), (e: unknown) => e instanceof KubeApiError && e.status === 409);
  const now = await kubeRequestOk<Widget>(c.kc, 'GET', `${base}/w`);
  assert.equal(now.spec?.size, 2, 'the stale write changed nothing');
});

test('an object that breaks the schema gets 422 with a readable message', async () => {
  const c = await getCluster();
  await ensureCrd();
  const ns = await freshNamespace('invalid');
  const base = `/apis/${GROUP}/v1/namespaces/${ns}/widgets`;
  const tooBig = await kubeRequest<{ reason?: string; message?: string; details?: { causes?: Array<{ field?: string }> } }>(
    c.kc,
    'POST',
    base,
    {
      apiVersion: `${GROUP}/v1`,
      kind: 'Widget',
      metadata: { name: 'big' },
      spec: { size: 50 },
    },
  );
  assert.equal(tooBig.status, 422);
  assert.equal(tooBig.body.reason, 'Invalid');
  assert.match(tooBig.body.message ?? '', /spec\.size: Invalid value: 50: spec\.size in body should be less than or equal to 10/);
  assert.ok(tooBig.body.details?.causes?.some((x) => x.field === 'spec.size'));
  const badEnum = await kubeRequest<{ message?: string }>(c.kc, 'POST', base, {
    apiVersion: `${GROUP}/v1`,
    kind: 'Widget',
    metadata: { name: 'green' },
    spec: { size: 1, color: 'green' },
  });
  assert.equal(badEnum.status, 422);
  assert.match(badEnum.body.message ?? '', /spec\.color: Unsupported value: "green": supported values: "red", "blue"/);
  // CEL rule
  const cel = await kubeRequest<{ message?: string }>(c.kc, 'POST', base, {
    apiVersion: `${GROUP}/v1`,
    kind: 'Widget',
    metadata: { name: 'cel' },
    spec: { size: 7 },
  });
  assert.equal(cel.status, 422);
  assert.match(cel.body.message ?? '', /a widget larger than 5 must be blue/);
  const missing = await kubeRequest<{ message?: string }>(c.kc, 'POST', base, {
    apiVersion: `${GROUP}/v1`,
    kind: 'Widget',
    metadata: { name: 'nosize' },
    spec: {},
  });
  assert.equal(missing.status, 422);
  assert.match(missing.body.message ?? '', /spec\.size: Required value/);
  // kubectl shows the same message and fails
  const k = await c.kubectl(['apply', '-n', ns, '-f', '-'], {
    input: `apiVersion: ${GROUP}/v1\nkind: Widget\nmetadata: {name: big}\nspec: {size: 50}\n`,
  });
  assert.notEqual(k.exitCode, 0);
  assert.match(
    k.stderr,
    /The Widget "big" is invalid:[\s\S]*spec\.size: Invalid value: 50: spec\.size in body should be less than or equal to 10/,
  );
  const list = await kubeRequestOk<{ items: unknown[] }>(c.kc, 'GET', base);
  assert.equal(list.items.length, 0, 'nothing invalid was stored');
});

test('the garbage collector deletes an owned object after its owner is deleted', async () => {
  const c = await getCluster();
  const ns = await freshNamespace('gc');
  const cms = `/api/v1/namespaces/${ns}/configmaps`;
  const owner = await kubeRequestOk<KubeObject>(c.kc, 'POST', cms, {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'owner' },
    data: { a: '1' },
  });
  const ref = { apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: owner.metadata!.uid!, controller: true, blockOwnerDeletion: true };
  await kubeRequestOk(c.kc, 'POST', cms, {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'owned', ownerReferences: [ref] },
    data: { b: '2' },
  });
  await kubeRequestOk(c.kc, 'POST', cms, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'unowned' }, data: { c: '3' } });
  // background deletion, as kubectl delete does by default
  const del = await c.kubectl(['delete', '-n', ns, 'configmap', 'owner']);
  assert.equal(del.exitCode, 0, del.stderr);
  const t0 = Date.now();
  await waitFor('owned ConfigMap deleted by the GC', async () => (await kubeRequest(c.kc, 'GET', `${cms}/owned`)).status === 404, {
    timeoutMs: 60_000,
    intervalMs: 200,
  });
  const gcSeconds = (Date.now() - t0) / 1000;
  assert.equal((await kubeRequest(c.kc, 'GET', `${cms}/unowned`)).status, 200, 'an object without owner stays');
  // foreground deletion: the owner waits for its dependents
  const owner2 = await kubeRequestOk<KubeObject>(c.kc, 'POST', cms, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'owner2' } });
  await kubeRequestOk(c.kc, 'POST', cms, {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'owned2', ownerReferences: [{ ...ref, name: 'owner2', uid: owner2.metadata!.uid! }] },
  });
  await kubeRequestOk(c.kc, 'DELETE', `${cms}/owner2`, { apiVersion: 'v1', kind: 'DeleteOptions', propagationPolicy: 'Foreground' });
  await waitFor(
    'foreground deletion of owner2 and owned2',
    async () =>
      (await kubeRequest(c.kc, 'GET', `${cms}/owner2`)).status === 404 && (await kubeRequest(c.kc, 'GET', `${cms}/owned2`)).status === 404,
    { timeoutMs: 60_000, intervalMs: 200 },
  );
  process.stdout.write(`# garbage collection took ${gcSeconds.toFixed(2)} s\n`);
});

test('RBAC: a service account token authenticates but is only allowed what a RoleBinding grants', async () => {
  const c = await getCluster();
  const ns = await freshNamespace('rbac');
  const tr = await kubeRequestOk<{ status: { token: string } }>(c.kc, 'POST', `/api/v1/namespaces/${ns}/serviceaccounts/default/token`, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { expirationSeconds: 600 },
  });
  const sa = new KubeConfig();
  const cluster = c.full.getCurrentCluster()!;
  sa.loadFromOptions({
    clusters: [{ name: 'c', server: cluster.server, caData: cluster.caData }],
    users: [{ name: 'u', token: tr.status.token }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  const denied = await kubeRequest<{ message?: string }>(sa, 'GET', `/api/v1/namespaces/${ns}/configmaps`);
  assert.equal(denied.status, 403);
  assert.match(denied.body.message ?? '', new RegExp(`"system:serviceaccount:${ns}:default" cannot list resource "configmaps"`));
  await kubeRequestOk(c.kc, 'POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name: 'cm-reader' },
    rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list'] }],
  });
  await kubeRequestOk(c.kc, 'POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'cm-reader' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'cm-reader' },
    subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: ns }],
  });
  await waitFor('RoleBinding effective', async () => (await kubeRequest(sa, 'GET', `/api/v1/namespaces/${ns}/configmaps`)).status === 200, {
    timeoutMs: 10_000,
  });
  const bad = new KubeConfig();
  bad.loadFromOptions({
    clusters: [{ name: 'c', server: cluster.server, caData: cluster.caData }],
    users: [{ name: 'u', token: 'not-a-token' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  assert.equal((await kubeRequest(bad, 'GET', `/api/v1/namespaces/${ns}/configmaps`)).status, 401);
});

// How long it takes is printed, not asserted (timings belong to make bench).
test('freshNamespace returns a labelled namespace whose default ServiceAccount already exists', async () => {
  const c = await getCluster();
  const t0 = process.hrtime.bigint();
  const ns = await freshNamespace('ready');
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  process.stdout.write(`# freshNamespace: ${ms.toFixed(0)} ms\n`);
  assert.match(ns, /^ready-\d+-\d+-[a-z0-9]+$/);
  const nsObj = (await kubeRequest(c.kc, 'GET', `/api/v1/namespaces/${ns}`)).body as { metadata: { labels: Record<string, string> } };
  assert.equal(nsObj.metadata.labels['atlantis-operator.dev/test'], 'true');
  assert.equal((await kubeRequest(c.kc, 'GET', `/api/v1/namespaces/${ns}/serviceaccounts/default`)).status, 200);
});

test('a kubeconfig with an exec credential plugin is handed to client-node and works with our client', async () => {
  const c = await getCluster();
  const cl = c.full.getCurrentCluster()!;
  const user = c.full.getCurrentUser()!;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'exec-kubeconfig-'));
  try {
    // The plugin prints an ExecCredential with the admin's client certificate, as
    // client-go's credential plugins do (e.g. for a cloud provider's short-lived certificates).
    const credential = {
      apiVersion: 'client.authentication.k8s.io/v1',
      kind: 'ExecCredential',
      status: {
        clientCertificateData: Buffer.from(user.certData!, 'base64').toString(),
        clientKeyData: Buffer.from(user.keyData!, 'base64').toString(),
      },
    };
    const plugin = path.join(dir, 'plugin.sh');
    fs.writeFileSync(plugin, `#!/bin/sh\ncat <<'JSON'\n${JSON.stringify(credential)}\nJSON\n`, { mode: 0o755 });
    const file = path.join(dir, 'kubeconfig');
    fs.writeFileSync(
      file,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        'current-context': 'x',
        clusters: [{ name: 'c', cluster: { server: cl.server, 'certificate-authority-data': cl.caData } }],
        users: [
          { name: 'u', user: { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: plugin, interactiveMode: 'Never' } } },
        ],
        contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      }),
    );
    const kc = await loadKubeConfig(file);
    assert.ok(kc instanceof KubeConfig, 'client-node reads an exec plugin');
    const res = await kubeRequest<{ kind: string }>(kc, 'GET', '/api/v1/namespaces/default');
    assert.equal(res.status, 200);
    assert.equal(res.body.kind, 'Namespace');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
