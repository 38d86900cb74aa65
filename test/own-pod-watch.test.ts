// The decision of the own-Pod watch (the real watch is tested against the local API server
// in test/server-pod-annotation.test.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { ANNOTATION_DRAIN } from '../src/contract/drain-protocol.js';
import { ownPodIdentity, podRequestsDrain } from '../src/server/drain/own-pod-watch.js';

const pod = (name: string, annotations?: Record<string, string>): V1Pod => ({ metadata: { name, namespace: 'atlantis', annotations } });

describe('own pod drain annotation', () => {
  const rows: Array<[string, V1Pod | undefined, boolean]> = [
    ['no pod', undefined, false],
    ['no annotations', pod('atlantis-0'), false],
    ['other annotations', pod('atlantis-0', { 'example.com/x': 'y' }), false],
    ['empty value', pod('atlantis-0', { [ANNOTATION_DRAIN]: '' }), false],
    ['blank value', pod('atlantis-0', { [ANNOTATION_DRAIN]: '  ' }), false],
    ['RFC 3339 time from the controller', pod('atlantis-0', { [ANNOTATION_DRAIN]: '2026-11-29T19:00:00Z' }), true],
    ['"now" from kubectl annotate', pod('atlantis-0', { [ANNOTATION_DRAIN]: 'now' }), true],
    ['another pod', pod('atlantis-1', { [ANNOTATION_DRAIN]: 'now' }), false],
  ];
  for (const [name, p, want] of rows) it(name, () => assert.equal(podRequestsDrain(p, 'atlantis-0'), want));

  it('is active only with POD_NAME and POD_NAMESPACE', () => {
    assert.equal(ownPodIdentity({}), undefined);
    assert.equal(ownPodIdentity({ POD_NAME: 'a' }), undefined);
    assert.deepEqual(ownPodIdentity({ POD_NAME: 'a', POD_NAMESPACE: 'ns' }), { name: 'a', namespace: 'ns' });
  });
});
