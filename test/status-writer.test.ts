// The controller's StatusWriter against the real API server: writes after the caller has
// returned, one write at a time per object with the newest status winning, shows what it
// was asked for until the write lands, and reports a failed write instead of dropping it.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { apiPath, kubeRequestOk } from '../src/k8s/client.js';
import { StatusWriter } from '../src/controller/reconcile/status-writer.js';
import { API_VERSION, PLURAL, type AtlantisDeployment, type AtlantisDeploymentStatus } from '../src/controller/types.js';
import { createLogger } from '../src/log.js';
import { atlantisDeployment, ensureCrd, getAd } from './support/controller.js';
import { deleteNamespace, freshNamespace, getCluster, waitFor, type TestCluster } from './support/k8s.js';

let cluster: TestCluster;
let ns: string;

before(async () => {
  cluster = await getCluster();
  await ensureCrd(cluster);
  ns = await freshNamespace('status-writer');
});
after(async () => {
  if (ns) await deleteNamespace(ns);
});

function status(readyReplicas: number): AtlantisDeploymentStatus {
  return {
    observedGeneration: 1,
    replicas: 3,
    readyReplicas,
    updatedReplicas: 0,
    drainingReplicas: 0,
    currentRevision: 'r1',
    updateRevision: 'r1',
    selector: 'app=x',
    conditions: [],
    pods: [],
  };
}

describe('StatusWriter', () => {
  it('writes in the background, one at a time, newest wins; pendingFor shows the status until it lands', async () => {
    const ad = await kubeRequestOk<AtlantisDeployment>(
      cluster.kc,
      'POST',
      apiPath(API_VERSION, PLURAL, ns),
      atlantisDeployment(ns, 'sw', { replicas: 3 }),
    );
    const written: number[] = [];
    const failed: string[] = [];
    const writer = new StatusWriter({
      kc: cluster.kc,
      logger: createLogger({ level: 'error' }),
      onWritten: (_key, obj) => written.push(obj.status!.readyReplicas),
      onFailed: (key) => failed.push(key),
    });
    writer.submit(ad, status(1)); // sent at once
    writer.submit(ad, status(2)); // waits behind it...
    writer.submit(ad, status(3)); // ...and is replaced by this one
    assert.equal(writer.pendingFor(ad)?.readyReplicas, 3, 'the newest status asked for');
    assert.equal(writer.pendingFor({ ...ad, metadata: { ...ad.metadata, uid: 'another-object' } }), undefined, 'only for the same object');
    await waitFor('the writes to land', () => writer.pendingFor(ad) === undefined, { timeoutMs: 30_000 });
    assert.deepEqual(written, [1, 3], 'status 2 was never sent: a newer one replaced it while 1 was in flight');
    assert.equal((await getAd(cluster.kc, ns, 'sw')).status?.readyReplicas, 3);
    assert.deepEqual(failed, []);
    await writer.stop();
    writer.submit(ad, status(0));
    assert.equal(writer.pendingFor(ad), undefined, 'stopped: nothing more is taken');
  });

  it('reports a write the API server refuses, and gives up nothing silently', async () => {
    const ad = await kubeRequestOk<AtlantisDeployment>(
      cluster.kc,
      'POST',
      apiPath(API_VERSION, PLURAL, ns),
      atlantisDeployment(ns, 'sw-bad', { replicas: 1 }),
    );
    const failed: Array<{ key: string; message: string }> = [];
    const writer = new StatusWriter({
      kc: cluster.kc,
      logger: createLogger({ level: 'error' }),
      onWritten: () => {},
      onFailed: (key, e) => failed.push({ key, message: e.message }),
    });
    // readyReplicas must be an integer (the CRD's status schema): a 422.
    writer.submit(ad, { ...status(1), readyReplicas: 'x' as unknown as number });
    await waitFor('the failure to be reported', () => failed.length === 1, { timeoutMs: 30_000 });
    assert.equal(failed[0]!.key, `${ns}/sw-bad`);
    assert.match(failed[0]!.message, /422/);
    assert.equal(writer.pendingFor(ad), undefined);
    await writer.stop();
  });
});
