// The Service proxy's decisions (dev/service-proxy/endpoints.ts, addresses.ts): which pods are
// a Service's endpoints, at which port, what changed, which endpoint a connection takes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod, V1Service, V1ServicePort } from '@kubernetes/client-node';
import {
  diffEndpoints,
  type Endpoint,
  endpointsOf,
  exclusionOf,
  pickEndpoint,
  proxiedPorts,
  targetPortOf,
} from '../dev/service-proxy/endpoints.js';
import { serviceAddress } from '../dev/service-proxy/addresses.js';

const NS = 'ns1';

function service(spec: V1Service['spec'], name = 'web'): V1Service {
  return { apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: NS }, spec };
}

interface PodOpts {
  labels?: Record<string, string>;
  ip?: string | null;
  ready?: boolean | 'absent';
  deleting?: boolean;
  phase?: string;
  namespace?: string;
  ports?: Array<{ name?: string; containerPort: number; protocol?: string }>;
  sidecarPorts?: Array<{ name?: string; containerPort: number }>;
  initPorts?: Array<{ name?: string; containerPort: number }>;
  podIPsOnly?: boolean;
}

function pod(name: string, o: PodOpts = {}): V1Pod {
  const ip = o.ip === undefined ? `127.1.0.${name.length}` : o.ip;
  const ready = o.ready ?? true;
  return {
    metadata: {
      name,
      namespace: o.namespace ?? NS,
      labels: o.labels ?? { app: 'web' },
      ...(o.deleting ? { deletionTimestamp: new Date('2026-12-01T10:00:00Z') } : {}),
    },
    spec: {
      containers: [{ name: 'main', image: 'x', ports: o.ports ?? [{ name: 'http', containerPort: 8080 }] }],
      initContainers: [
        ...(o.sidecarPorts ? [{ name: 'side', image: 'x', restartPolicy: 'Always', ports: o.sidecarPorts }] : []),
        ...(o.initPorts ? [{ name: 'init', image: 'x', ports: o.initPorts }] : []),
      ],
    },
    status: {
      phase: o.phase ?? 'Running',
      ...(ip === null ? {} : o.podIPsOnly ? { podIPs: [{ ip }] } : { podIP: ip, podIPs: [{ ip }] }),
      conditions: ready === 'absent' ? [] : [{ type: 'Ready', status: ready ? 'True' : 'False' }],
    },
  } as V1Pod;
}

const webPort: V1ServicePort = { name: 'http', port: 80, targetPort: 'http', protocol: 'TCP' };
const web = service({ selector: { app: 'web' }, ports: [webPort] });

test('which pods are endpoints: selected, not terminal, with an IP, Ready and not terminating', () => {
  const rows: Array<[string, V1Service, V1Pod, ReturnType<typeof exclusionOf>]> = [
    ['selected, Ready, with an IP', web, pod('a'), undefined],
    ['labels differ', web, pod('a', { labels: { app: 'api' } }), 'not selected'],
    ['a selector key missing on the pod', service({ selector: { app: 'web', tier: 'fe' }, ports: [webPort] }), pod('a'), 'not selected'],
    ['more labels than the selector', web, pod('a', { labels: { app: 'web', extra: 'y' } }), undefined],
    ['another namespace', web, pod('a', { namespace: 'ns2' }), 'not selected'],
    ['a Service without a selector selects nothing', service({ ports: [webPort] }), pod('a'), 'not selected'],
    ['an empty selector selects nothing (stored as none)', service({ selector: {}, ports: [webPort] }), pod('a'), 'not selected'],
    ['no IP yet', web, pod('a', { ip: null }), 'no IP'],
    ['only podIPs set', web, pod('a', { podIPsOnly: true }), undefined],
    ['Ready=False', web, pod('a', { ready: false }), 'not ready'],
    ['no Ready condition', web, pod('a', { ready: 'absent' }), 'not ready'],
    ['terminating while still Ready', web, pod('a', { deleting: true }), 'terminating'],
    ['Succeeded', web, pod('a', { phase: 'Succeeded' }), 'terminal'],
    ['Failed', web, pod('a', { phase: 'Failed' }), 'terminal'],
    [
      'publishNotReadyAddresses: a not-Ready pod counts',
      service({ selector: { app: 'web' }, ports: [webPort], publishNotReadyAddresses: true }),
      pod('a', { ready: false }),
      undefined,
    ],
    [
      'publishNotReadyAddresses: a terminating pod counts',
      service({ selector: { app: 'web' }, ports: [webPort], publishNotReadyAddresses: true }),
      pod('a', { deleting: true }),
      undefined,
    ],
    [
      'publishNotReadyAddresses: still no IP, no endpoint',
      service({ selector: { app: 'web' }, ports: [webPort], publishNotReadyAddresses: true }),
      pod('a', { ip: null }),
      'no IP',
    ],
  ];
  for (const [why, svc, p, want] of rows) assert.equal(exclusionOf(svc, p), want, why);
});

test('targetPort: a number as is, a name looked up in the containers (same protocol), none: the port', () => {
  const p = pod('a', {
    ports: [
      { name: 'http', containerPort: 8080 },
      { name: 'dns', containerPort: 5353, protocol: 'UDP' },
      { name: 'metrics', containerPort: 9090, protocol: 'TCP' },
    ],
    sidecarPorts: [{ name: 'proxy', containerPort: 15001 }],
    initPorts: [{ name: 'setup', containerPort: 7000 }],
  });
  const rows: Array<[string, V1ServicePort, number | undefined]> = [
    ['number', { port: 80, targetPort: 9999 }, 9999],
    ['unset: the Service port', { port: 80 }, 80],
    ['name of a container port', { port: 80, targetPort: 'http' }, 8080],
    ['name with protocol TCP given', { port: 80, targetPort: 'metrics', protocol: 'TCP' }, 9090],
    ['name of a UDP port for a TCP Service port', { port: 53, targetPort: 'dns' }, undefined],
    ['name of a UDP port for a UDP Service port', { port: 53, targetPort: 'dns', protocol: 'UDP' }, 5353],
    ['name of a sidecar (init, restartPolicy Always) port', { port: 80, targetPort: 'proxy' }, 15001],
    ['name of a plain init container port: not used', { port: 80, targetPort: 'setup' }, undefined],
    ['unknown name', { port: 80, targetPort: 'nope' }, undefined],
  ];
  for (const [why, sp, want] of rows) assert.equal(targetPortOf(sp, p), want, why);
});

test('proxied ports: TCP ones of ClusterIP/NodePort/LoadBalancer Services; none for ExternalName or headless', () => {
  const ports: V1ServicePort[] = [
    { name: 'a', port: 80 },
    { name: 'b', port: 81, protocol: 'TCP' },
    { name: 'u', port: 53, protocol: 'UDP' },
    { name: 's', port: 99, protocol: 'SCTP' },
  ];
  const rows: Array<[string, V1Service['spec'], number[]]> = [
    ['ClusterIP', { type: 'ClusterIP', ports }, [80, 81]],
    ['type unset', { ports }, [80, 81]],
    ['NodePort', { type: 'NodePort', ports }, [80, 81]],
    ['LoadBalancer', { type: 'LoadBalancer', ports }, [80, 81]],
    ['ExternalName', { type: 'ExternalName', externalName: 'x.example', ports }, []],
    ['headless', { clusterIP: 'None', ports }, []],
    ['no ports', {}, []],
  ];
  for (const [why, spec, want] of rows)
    assert.deepEqual(
      proxiedPorts(service(spec)).map((p) => p.port),
      want,
      why,
    );
});

test('endpointsOf: each Ready pod at each port it has, sorted by port then pod; a pod without a named port is left out of that port', () => {
  const svc = service({
    selector: { app: 'web' },
    ports: [
      { name: 'metrics', port: 9100, targetPort: 'metrics' },
      { name: 'http', port: 80, targetPort: 'http' },
      { name: 'raw', port: 81, targetPort: 18081 },
    ],
  });
  const pods = [
    pod('web-b', { ip: '127.1.0.2', ports: [{ name: 'http', containerPort: 8080 }] }),
    pod('web-a', {
      ip: '127.1.0.1',
      ports: [
        { name: 'http', containerPort: 8000 },
        { name: 'metrics', containerPort: 9000 },
      ],
    }),
    pod('web-c', { ip: '127.1.0.3', ready: false }),
    pod('api-a', { ip: '127.1.0.4', labels: { app: 'api' } }),
    pod('web-d', { ip: '127.1.0.5', deleting: true }),
  ];
  assert.deepEqual(endpointsOf(svc, pods), [
    { servicePort: 80, podName: 'web-a', ip: '127.1.0.1', port: 8000 },
    { servicePort: 80, podName: 'web-b', ip: '127.1.0.2', port: 8080 },
    { servicePort: 81, podName: 'web-a', ip: '127.1.0.1', port: 18081 },
    { servicePort: 81, podName: 'web-b', ip: '127.1.0.2', port: 18081 },
    { servicePort: 9100, podName: 'web-a', ip: '127.1.0.1', port: 9000 },
  ]);
  assert.deepEqual(endpointsOf(svc, []), [], 'no pods');
  assert.deepEqual(endpointsOf(service({ type: 'ExternalName', selector: { app: 'web' }, ports: [webPort] }), pods), [], 'ExternalName');
  assert.deepEqual(endpointsOf(service({ ports: [webPort] }), pods), [], 'no selector');
});

test('diffEndpoints: added and removed by port, pod and address', () => {
  const e = (podName: string, ip: string, port = 8080, servicePort = 80): Endpoint => ({ servicePort, podName, ip, port });
  const rows: Array<[string, Endpoint[], Endpoint[], { added: Endpoint[]; removed: Endpoint[] }]> = [
    ['same', [e('a', '1')], [e('a', '1')], { added: [], removed: [] }],
    ['both empty', [], [], { added: [], removed: [] }],
    ['one added', [e('a', '1')], [e('a', '1'), e('b', '2')], { added: [e('b', '2')], removed: [] }],
    ['one removed', [e('a', '1'), e('b', '2')], [e('b', '2')], { added: [], removed: [e('a', '1')] }],
    ['all gone', [e('a', '1'), e('b', '2')], [], { added: [], removed: [e('a', '1'), e('b', '2')] }],
    ['a replaced pod with a new address', [e('a', '1')], [e('a', '3')], { added: [e('a', '3')], removed: [e('a', '1')] }],
    ['another target port', [e('a', '1', 8080)], [e('a', '1', 9090)], { added: [e('a', '1', 9090)], removed: [e('a', '1', 8080)] }],
    [
      'same pod, other Service port',
      [e('a', '1', 8080, 80)],
      [e('a', '1', 8080, 81)],
      { added: [e('a', '1', 8080, 81)], removed: [e('a', '1', 8080, 80)] },
    ],
  ];
  for (const [why, before, after, want] of rows) assert.deepEqual(diffEndpoints(before, after), want, why);
});

test('pickEndpoint: uniform over the list by the random number, none without endpoints', () => {
  const rows: Array<[string, string[], number, string | undefined]> = [
    ['empty', [], 0.5, undefined],
    ['one', ['a'], 0, 'a'],
    ['one, r near 1', ['a'], 0.999_999, 'a'],
    ['two, low half', ['a', 'b'], 0.49, 'a'],
    ['two, high half', ['a', 'b'], 0.5, 'b'],
    ['three, first third', ['a', 'b', 'c'], 0.33, 'a'],
    ['three, middle', ['a', 'b', 'c'], 0.34, 'b'],
    ['three, last', ['a', 'b', 'c'], 0.99, 'c'],
    ['r = 1 (out of range) stays in the list', ['a', 'b'], 1, 'b'],
    ['r < 0 (out of range) stays in the list', ['a', 'b'], -0.1, 'a'],
  ];
  for (const [why, eps, r, want] of rows) assert.equal(pickEndpoint(eps, r), want, why);
});

test('service addresses: 127.2.1.1 ... 127.2.254.254, wrapping', () => {
  const rows: Array<[number, string]> = [
    [0, '127.2.1.1'],
    [1, '127.2.1.2'],
    [253, '127.2.1.254'],
    [254, '127.2.2.1'],
    [254 * 254 - 1, '127.2.254.254'],
    [254 * 254, '127.2.1.1'],
    [-1, '127.2.254.254'],
  ];
  for (const [n, want] of rows) assert.equal(serviceAddress(n), want, String(n));
});
