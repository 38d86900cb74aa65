// Rollouts on referenced content (issue 32), on the local cluster with the in-process
// controller: the data of a Secret the pods read (the webhook secret, by secretKeyRef) is
// changed, and the pods roll through the drain rollout, one at a time, each drained before it
// is deleted, none SIGKILLed, the new ones started with the new value; then the repos.yaml of
// a ConfigMap is changed and the pods roll again onto the new file. No value of the Secret, old
// or new, appears in the AtlantisDeployment, its status, the events or the controller's log.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { MERGE_PATCH, apiPath, kubeRequest, kubeRequestOk } from '../src/k8s/client.js';
import { assertBuilt } from './support/cli.js';
import { atlantisDeployment, createAd, ensureCrd, getAd, listPods, startController, type TestController } from './support/controller.js';
import { recordPods, rolloutComplete, serverEnviron, waitForAd } from './support/controller-asserts.js';
import { deleteNamespace, freshNamespace, getCluster, getLocalNode, type LocalNodeHandle, type TestCluster } from './support/k8s.js';

const NAME = 'rotating';
// Random per run, so finding one anywhere means it leaked there.
const TOKEN = randomBytes(16).toString('hex');
const OLD_SECRET = randomBytes(16).toString('hex');
const NEW_SECRET = randomBytes(16).toString('hex');
const REPOS_V1 = 'repos:\n  - id: /.*/\n';
const REPOS_V2 = 'repos:\n  - id: /.*/\n    apply_requirements: [approved]\n';

let cluster: TestCluster;
let node: LocalNodeHandle;
let ctrl: TestController | undefined;
let ns = '';

before(async () => {
  assertBuilt();
  cluster = await getCluster();
  node = await getLocalNode();
  await ensureCrd(cluster);
  ns = await freshNamespace('ctrl-content');
  await kubeRequestOk(cluster.kc, 'POST', apiPath('v1', 'secrets', ns), {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'vcs' },
    stringData: { token: TOKEN, 'webhook-secret': OLD_SECRET },
  });
  await kubeRequestOk(cluster.kc, 'POST', apiPath('v1', 'configmaps', ns), {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'repos' },
    data: { 'repos.yaml': REPOS_V1 },
  });
  // Read again every second (the default is 30 s), so the test waits on the rollout, not the interval.
  ctrl = await startController(cluster.kc, ns, { contentIntervalMs: 1000 });
});
after(async () => {
  await ctrl?.stop();
  if (ns) await deleteNamespace(ns);
});

const environOf = (p: V1Pod, name: string) =>
  serverEnviron(node, p)
    .find((e) => e.startsWith(`${name}=`))
    ?.slice(name.length + 1);

/** Changes `kind/name` with a merge patch, then waits for the rollout it starts: a new revision, complete. */
async function changeAndRoll(kind: 'secrets' | 'configmaps', name: string, patch: object, from: string): Promise<string> {
  const rec = await recordPods(cluster.kc, ns, NAME, { replicas: () => 2 });
  const before = await listPods(cluster.kc, ns, NAME);
  await kubeRequestOk(cluster.kc, 'PATCH', apiPath('v1', kind, ns, name), patch, { contentType: MERGE_PATCH });
  const done = await waitForAd(
    cluster.kc,
    ns,
    NAME,
    'a rollout to a new revision',
    (ad) => ad.status!.updateRevision !== from && rolloutComplete(2)(ad),
    180_000,
  );
  await rec.stop();
  assert.ok(rec.maxUnavailable() <= 1, `one pod at a time (saw ${rec.maxUnavailable()} unavailable)`);
  for (const p of before) {
    const r = rec.records.get(p.metadata!.uid!);
    assert.ok(r?.drainSeen !== undefined, `${p.metadata!.name} was drained`);
    const deleted = r.deletingSeen ?? r.goneSeen;
    assert.ok(deleted !== undefined && r.drainSeen < deleted, `${p.metadata!.name} drained before it was deleted`);
    const evs = node.events({ namespace: ns, pod: p.metadata!.name! }).filter((e) => e.uid === p.metadata!.uid);
    assert.ok(!evs.some((e) => e.type === 'SIGKILL sent'), `${p.metadata!.name} got no SIGKILL`);
  }
  return done.status!.updateRevision;
}

describe('a change to a referenced Secret or ConfigMap rolls the pods', () => {
  let revision = '';

  it('two pods at the first revision, started with the first webhook secret', { timeout: 180_000 }, async () => {
    const ad = atlantisDeployment(ns, NAME, {
      replicas: 2,
      terminationGracePeriodSeconds: 30,
      atlantis: { repoConfig: { configMapRef: { name: 'repos' } } },
    });
    await createAd(cluster.kc, ad);
    revision = (await waitForAd(cluster.kc, ns, NAME, 'a complete rollout', rolloutComplete(2), 150_000)).status!.updateRevision;
    for (const p of await listPods(cluster.kc, ns, NAME)) assert.equal(environOf(p, 'ATLANTIS_GH_WEBHOOK_SECRET'), OLD_SECRET);
  });

  it('the Secret changed: drained one by one onto a new revision, the new pods have the new value', { timeout: 240_000 }, async () => {
    const next = await changeAndRoll('secrets', 'vcs', { stringData: { 'webhook-secret': NEW_SECRET } }, revision);
    assert.notEqual(next, revision);
    revision = next;
    const pods = await listPods(cluster.kc, ns, NAME);
    assert.equal(pods.length, 2);
    for (const p of pods) {
      assert.equal(p.metadata?.labels?.['atlantis-operator.dev/revision'], revision);
      assert.equal(environOf(p, 'ATLANTIS_GH_WEBHOOK_SECRET'), NEW_SECRET, `${p.metadata!.name}: the new value`);
      assert.equal(environOf(p, 'ATLANTIS_GH_TOKEN'), TOKEN);
    }
    assert.ok(
      ctrl!.logs.some((l) => l.msg === 'Referenced content changed' && l.fields.object === 'secret/vcs'),
      'the controller says which object changed',
    );
  });

  it('the ConfigMap changed: rolled again, the new pods read the new repos.yaml', { timeout: 240_000 }, async () => {
    const next = await changeAndRoll('configmaps', 'repos', { data: { 'repos.yaml': REPOS_V2 } }, revision);
    assert.notEqual(next, revision);
    for (const p of await listPods(cluster.kc, ns, NAME)) {
      const file = environOf(p, 'ATLANTIS_REPO_CONFIG') ?? '';
      assert.ok(file.endsWith('/repos.yaml'), file);
      assert.equal(fs.readFileSync(file, 'utf8'), REPOS_V2, `${p.metadata!.name}: the new file`);
    }
  });

  it('no value of the Secret in the AtlantisDeployment, its status, the events or the controller log', async () => {
    const ad = await getAd(cluster.kc, ns, NAME);
    const events = await kubeRequest(cluster.kc, 'GET', apiPath('v1', 'events', ns));
    const places: Array<[string, string]> = [
      ['the AtlantisDeployment and its status', JSON.stringify(ad)],
      ['the events', JSON.stringify(events.body)],
      ['the controller log', JSON.stringify(ctrl!.logs)],
    ];
    assert.ok(ctrl!.logs.length > 0 && JSON.stringify(events.body).includes('AtlantisDeployment'), 'there is something to look in');
    for (const [where, text] of places)
      for (const [what, value] of [
        ['the old webhook secret', OLD_SECRET],
        ['the new webhook secret', NEW_SECRET],
        ['the token', TOKEN],
        ['the new webhook secret in base64', Buffer.from(NEW_SECRET).toString('base64')],
      ])
        assert.ok(!text.includes(value), `${what} in ${where}`);
  });
});
