// `helm install` of the project's chart with an AtlantisDeployment in its values (issue 32),
// on the shared local cluster with a real helm: the release creates the AtlantisDeployment
// with the spec of the values, which a controller reconciles into Ready pods; `helm upgrade`
// with other values changes it (the controller scales it); `helm uninstall` removes it.
// The shared cluster runs no Deployment controller, so the chart's controller Deployment
// makes no pod here: the in-process controller acts instead (test/helm-install.test.ts runs
// the chart's own controller on a cluster of its own).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { apiPath, kubeRequest } from '../src/k8s/client.js';
import { API_VERSION, PLURAL } from '../src/controller/types.js';
import { assertBuilt } from './support/cli.js';
import { createVcsSecret, ensureCrd, getAd, listPods, startController, type TestController } from './support/controller.js';
import { rolloutComplete, waitForAd } from './support/controller-asserts.js';
import { CHART_DIR, type Helm, helmRunner } from './support/helm.js';
import { deleteNamespace, freshNamespace, getCluster, waitFor, type TestCluster } from './support/k8s.js';

// Unique per run: the release's objects are namespaced, but its name is the cluster's to share.
const RELEASE = `atl-${randomBytes(3).toString('hex')}`;
const AD = 'atlantis';
let cluster: TestCluster;
let helm: Helm | undefined;
let ctrl: TestController | undefined;
let ns = '';

const values = (replicas: number) => ({
  replicaCount: 1,
  leaderElection: { enabled: false },
  // Cluster-scoped RBAC is not needed by the in-process controller and would outlive a failed run.
  rbac: { create: false },
  atlantisDeployment: {
    enabled: true,
    name: AD,
    labels: { team: 'platform' },
    spec: {
      replicas,
      terminationGracePeriodSeconds: 30,
      atlantis: {
        url: 'http://atlantis.test',
        repoAllowlist: 'github.com/acme/*',
        github: {
          user: 'atlantis-bot',
          tokenSecretRef: { name: 'vcs', key: 'token' },
          webhookSecretRef: { name: 'vcs', key: 'webhook-secret' },
        },
      },
    },
  },
});

before(async () => {
  assertBuilt();
  cluster = await getCluster();
  await ensureCrd(cluster);
  ns = await freshNamespace('helm-ad');
  await createVcsSecret(cluster.kc, ns);
  helm = helmRunner({ kubeconfig: cluster.kubeconfigPath });
  ctrl = await startController(cluster.kc, ns);
});
after(async () => {
  await ctrl?.stop();
  await helm?.run(['uninstall', RELEASE, '--namespace', ns]);
  helm?.cleanup();
  if (ns) await deleteNamespace(ns);
});

describe('an AtlantisDeployment from the chart values', () => {
  it('helm install creates it from the values (image the chart default); the controller rolls it out', { timeout: 180_000 }, async () => {
    const r = await helm!.run(['install', RELEASE, CHART_DIR, '--namespace', ns, '--skip-crds', '-f', helm!.valuesFile(values(1))]);
    assert.equal(r.exitCode, 0, `helm install: ${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, new RegExp(`The release also holds the AtlantisDeployment ${ns}/${AD}`));
    const ad = await getAd(cluster.kc, ns, AD);
    assert.equal(ad.metadata.labels?.team, 'platform');
    assert.equal(ad.metadata.annotations?.['meta.helm.sh/release-name'], RELEASE);
    assert.match(ad.spec.image, /^atlantis-operator:/, "the chart's own image");
    assert.equal(ad.spec.replicas, 1);
    await waitForAd(cluster.kc, ns, AD, 'a complete rollout', rolloutComplete(1), 150_000);
  });

  it('helm upgrade with two replicas: the AtlantisDeployment changes, the controller scales it', { timeout: 180_000 }, async () => {
    const r = await helm!.run(['upgrade', RELEASE, CHART_DIR, '--namespace', ns, '-f', helm!.valuesFile(values(2))]);
    assert.equal(r.exitCode, 0, `helm upgrade: ${r.stdout}\n${r.stderr}`);
    assert.equal((await getAd(cluster.kc, ns, AD)).spec.replicas, 2);
    await waitForAd(cluster.kc, ns, AD, 'two pods', rolloutComplete(2), 150_000);
    assert.equal((await listPods(cluster.kc, ns, AD)).length, 2);
  });

  it('helm uninstall removes it', { timeout: 60_000 }, async () => {
    const r = await helm!.run(['uninstall', RELEASE, '--namespace', ns, '--wait', '--timeout', '45s'], { timeoutMs: 50_000 });
    assert.equal(r.exitCode, 0, `helm uninstall: ${r.stdout}\n${r.stderr}`);
    await waitFor(
      'the AtlantisDeployment gone',
      async () => (await kubeRequest(cluster.kc, 'GET', apiPath(API_VERSION, PLURAL, ns, AD))).status === 404,
      { timeoutMs: 30_000, intervalMs: 200 },
    );
  });
});
