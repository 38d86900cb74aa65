// AtlantisDeployment objects for the CRD validation tests (test/crd-validation*.test.ts):
// a minimal valid object to mutate, and the check that the real API server refuses a bad one
// with 422 and a message naming the field.
import assert from 'node:assert/strict';
import { apiPath, kubeRequest, type KubeStatus } from '../../src/k8s/client.js';
import type { KubeClientConfig } from '../../src/k8s/kubeconfig.js';
import { API_VERSION, KIND, PLURAL } from '../../src/controller/types.js';

export type Obj = Record<string, unknown>;

/** A minimal valid object; `mutate` edits a deep copy. */
export function crObject(ns: string, name: string, mutate: (o: { metadata: Obj; spec: Obj }) => void = () => {}): Obj {
  const o = {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name, namespace: ns } as Obj,
    spec: {
      image: 'atlantis-operator:v1',
      atlantis: {
        url: 'https://atlantis.example.com',
        repoAllowlist: 'github.com/acme/*',
        github: {
          user: 'atlantis-bot',
          tokenSecretRef: { name: 'vcs', key: 'token' },
          webhookSecretRef: { name: 'vcs', key: 'webhook-secret' },
        },
      },
    } as Obj,
  };
  mutate(o);
  return o;
}

/** The object at a dotted path, created empty on the way. */
export const at = (o: Obj, dotted: string): Obj =>
  dotted.split('.').reduce((acc, k) => {
    acc[k] ??= {};
    return acc[k] as Obj;
  }, o);

export interface BadCase {
  what: string;
  obj: (name: string) => Obj;
  /** Substrings the API server's message must contain (the field and the reason). */
  expect: string[];
}

export function statusOf(body: unknown): KubeStatus {
  return (typeof body === 'object' && body !== null ? body : {}) as KubeStatus;
}

/** Created as `name` in `ns`: refused with 422 Invalid naming what `c` expects, and nothing stored. */
export async function assertRefused(kc: KubeClientConfig, ns: string, name: string, c: BadCase): Promise<void> {
  const r = await kubeRequest(kc, 'POST', apiPath(API_VERSION, PLURAL, ns), c.obj(name));
  const st = statusOf(r.body);
  assert.equal(r.status, 422, `${c.what}: want 422 Invalid, got ${r.status}: ${st.message ?? JSON.stringify(r.body)}`);
  assert.equal(st.reason, 'Invalid');
  for (const s of c.expect)
    assert.ok(st.message?.includes(s), `${c.what}: message should contain ${JSON.stringify(s)}; got: ${st.message}`);
  assert.equal((await kubeRequest(kc, 'GET', apiPath(API_VERSION, PLURAL, ns, name))).status, 404, 'nothing was stored');
}
