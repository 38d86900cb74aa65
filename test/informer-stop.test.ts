// An informer whose first list keeps failing (API server down, CRD missing) must still stop:
// stop() ends start() instead of leaving it waiting on a retry timer forever.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { Informer } from '../src/k8s/informer.js';

describe('Informer.stop during failing lists', () => {
  it('makes a pending start() return', async () => {
    const kc = new KubeConfig();
    // Port 1 on loopback: connection refused at once, so the list retries with backoff.
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: 'http://127.0.0.1:1', skipTLSVerify: true }],
      users: [{ name: 'u' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    const inf = new Informer(kc, '/api/v1/pods', { minBackoffMs: 5_000, maxBackoffMs: 5_000 });
    let done = false;
    const started = inf.start().then(() => {
      done = true;
    });
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(done, false, 'still retrying the list');
    const t0 = Date.now();
    inf.stop();
    await started;
    assert.ok(Date.now() - t0 < 1000, 'start() returned promptly after stop()');
    assert.equal(inf.hasSynced(), false);
  });
});
