// The chart's pod: image, scheduling, security contexts, the StatefulSet's settings, probes,
// the ServiceAccount, extra volumes and containers, and the data volume. The pod is the
// operator's (its probes, port, data dir and accounts are its own), so the values that would
// change those are reported. Pure.
import type { V1Container, V1EnvVar, V1Volume, V1VolumeMount } from '@kubernetes/client-node';
import { RESERVED_VOLUMES } from '../../controller/resources/reserved.js';
import { LABEL_INSTANCE, LABEL_MANAGED_BY, LABEL_NAME } from '../../controller/types.js';
import { CHART_APP_VERSION } from './chart-defaults.js';
import { asK8s, type Conversion, quantities } from './conversion.js';
import { secretByName } from './flags.js';
import { type Json, isObj, type Obj, show, truthy, ValuesError, type Values } from './values.js';

const CHART_IMAGE = 'ghcr.io/runatlantis/atlantis';
const DNS_POLICIES = ['ClusterFirst', 'ClusterFirstWithHostNet', 'Default', 'None'];
/** The operator's default grace period (spec.terminationGracePeriodSeconds). */
const DEFAULT_GRACE = 120;
const QUANTITY = /^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?$/;

/** Label keys the operator selects its pods by, which no label of ours may set. */
export function reservedLabel(k: string): boolean {
  return [LABEL_NAME, LABEL_INSTANCE, LABEL_MANAGED_BY].includes(k) || k.startsWith('atlantis-operator.dev/');
}

/** `m` without the keys `reserved` refuses, each reported under `value`. */
export function allowedKeys(
  c: Conversion,
  value: string,
  m: Record<string, string>,
  reserved: (k: string) => boolean,
  why: string,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(m)) {
    if (reserved(k)) c.notMapped(show([value, k]), why);
    else out[k] = x;
  }
  return out;
}

export function mapPod(v: Values, c: Conversion): void {
  mapImage(v, c);
  const resources = v.obj('resources');
  if (truthy(resources)) c.pod.resources = asK8s(resourcesOf(resources));
  const nodeSelector = v.strMap('nodeSelector');
  if (truthy(nodeSelector)) c.pod.nodeSelector = nodeSelector;
  const tolerations = v.list(['tolerations'], 'mapping');
  if (tolerations.length) c.pod.tolerations = asK8s(tolerations);
  const affinity = v.obj('affinity');
  if (truthy(affinity)) c.pod.affinity = asK8s(affinity);
  const spread = v.list(['topologySpreadConstraints'], 'mapping');
  if (spread.length) c.pod.topologySpreadConstraints = asK8s(spread);
  const aliases = v.list(['hostAliases'], 'mapping');
  if (aliases.length) c.pod.hostAliases = asK8s(aliases);
  mapDns(v, c);
  mapStatefulSet(v, c);
  mapContainerSettings(v, c);
  mapServiceAccount(v, c);
  mapExtraVolumes(v, c);
  const init = v.list(['initContainers'], 'mapping');
  if (init.length) c.pod.initContainers = init.map((x, i) => container(c, `initContainers[${i}]`, x as Obj));
  const extra = v.list(['extraContainers'], 'mapping').flatMap((x, i) => {
    if ((x as Obj).name === 'atlantis') {
      c.notMapped(`extraContainers[${i}]`, "the name atlantis is the server container's");
      return [];
    }
    return [container(c, `extraContainers[${i}]`, x as Obj)];
  });
  if (extra.length) c.pod.extraContainers = extra;
  mapStorage(v, c);
}

function mapImage(v: Values, c: Conversion): void {
  const repo = v.str('image', 'repository');
  const tag = v.get('image', 'tag');
  const policy = v.str('image', 'pullPolicy');
  if (tag !== undefined && typeof tag !== 'string') throw new ValuesError('image.tag must be a string');
  const chartImage = `${repo}:${tag || CHART_APP_VERSION}`;
  if (repo && repo !== CHART_IMAGE)
    c.notMapped(
      'image.repository',
      `an Atlantis image of your own (tools built in?) cannot run here: spec.image is this server's, ${c.names.image}; build yours FROM it and give it with --image`,
    );
  else
    c.note(
      'image',
      `the chart runs Atlantis itself (${chartImage}), which cannot run here: spec.image is atlantis-operator's, ${c.names.image} (--image)`,
    );
  if (!v.isDefault('image', 'pullPolicy') && policy)
    c.notMapped(
      'image.pullPolicy',
      "spec has no pull policy for the server's image: Kubernetes' default (IfNotPresent for a tagged image)",
    );
  const pulls = v.list(['imagePullSecrets']).map((x, i) => {
    if (typeof x === 'string') return { name: x };
    if (isObj(x) && typeof x.name === 'string') return { name: x.name };
    throw new ValuesError(`imagePullSecrets[${i}] must be the name of a Secret`);
  });
  if (pulls.length) c.pod.imagePullSecrets = pulls;
}

function resourcesOf(r: Obj): Obj {
  const out: Obj = { ...r };
  for (const k of ['requests', 'limits']) if (isObj(r[k])) out[k] = quantities(r[k]) as Json;
  return out;
}

function mapDns(v: Values, c: Conversion): void {
  const policy = v.str('dnsPolicy');
  const config = v.obj('dnsConfig');
  if (policy === 'None' && !truthy(config)) {
    c.notMapped('dnsPolicy', 'None needs dnsConfig (the chart refuses it too)');
    return;
  }
  if (policy && policy !== 'ClusterFirst') {
    if (DNS_POLICIES.includes(policy)) c.pod.dnsPolicy = policy;
    else c.notMapped('dnsPolicy', `not one of ${DNS_POLICIES.join(', ')}`);
  }
  if (truthy(config)) c.pod.dnsConfig = asK8s(config);
}

function mapStatefulSet(v: Values, c: Conversion): void {
  Object.assign(c.annotations, v.strMap('statefulSet', 'annotations'));
  Object.assign(c.labels, v.strMap('statefulSet', 'labels'));
  const sc = { ...v.obj('statefulSet', 'securityContext') };
  if (sc.runAsUser === 100) {
    delete sc.runAsUser;
    c.note(
      'statefulSet.securityContext.runAsUser',
      "100 is the Atlantis image's user; this image's is 1000, the operator's default (and its home and data dir are 1000's)",
    );
  }
  if (truthy(sc)) c.pod.securityContext = asK8s(sc);
  const priority = v.str('statefulSet', 'priorityClassName');
  if (priority) c.pod.priorityClassName = priority;
  if (v.bool('statefulSet', 'shareProcessNamespace'))
    c.notMapped(
      'statefulSet.shareProcessNamespace',
      "spec.podTemplate.spec has no shareProcessNamespace: the server's processes (terraform's too) stay its own",
    );
  const us = v.obj('statefulSet', 'updateStrategy');
  const rolling = isObj(us.rollingUpdate) ? us.rollingUpdate : {};
  if (us.type === 'OnDelete')
    c.notMapped(
      'statefulSet.updateStrategy.type',
      'OnDelete: the controller replaces pods itself, each after its drain (spec.paused holds new drains)',
    );
  else if (us.type !== undefined && us.type !== 'RollingUpdate')
    c.notMapped('statefulSet.updateStrategy.type', 'not RollingUpdate or OnDelete');
  if (rolling.partition !== undefined && rolling.partition !== 0)
    c.notMapped(
      'statefulSet.updateStrategy.rollingUpdate.partition',
      'the controller rolls every pod out, each after its drain; there is no partition',
    );
  const mu = rolling.maxUnavailable;
  if (typeof mu === 'number' && Number.isInteger(mu) && mu >= 1) c.spec.updateStrategy = { maxUnavailable: mu };
  else if (mu !== undefined)
    c.notMapped(
      'statefulSet.updateStrategy.rollingUpdate.maxUnavailable',
      'spec.updateStrategy.maxUnavailable is a number of pods, at least 1',
    );
  const labels = allowedKeys(
    c,
    'podTemplate.labels',
    v.strMap('podTemplate', 'labels'),
    reservedLabel,
    'the operator selects its pods by this label',
  );
  Object.assign(c.podLabels, labels);
  const ann = allowedKeys(
    c,
    'podTemplate.annotations',
    v.strMap('podTemplate', 'annotations'),
    (k) => k.startsWith('atlantis-operator.dev/'),
    "the operator's own annotation",
  );
  Object.assign(c.podAnnotations, ann);
}

function mapContainerSettings(v: Values, c: Conversion): void {
  const grace = v.int(['terminationGracePeriodSeconds']);
  if (grace !== undefined) {
    if (grace >= 30) c.spec.terminationGracePeriodSeconds = grace;
    else
      c.notMapped(
        'terminationGracePeriodSeconds',
        "at least 30 here: the server's drain timeout and terraform's interrupt grace are cut from it (spec.terminationGracePeriodSeconds, default 120)",
      );
  }
  const lifecycle = v.obj('lifecycle');
  if (truthy(lifecycle)) {
    const g = c.spec.terminationGracePeriodSeconds ?? DEFAULT_GRACE;
    const sleep = isObj(lifecycle.preStop) && isObj(lifecycle.preStop.sleep) ? lifecycle.preStop.sleep.seconds : undefined;
    if (typeof sleep === 'number' && g - Math.min(60, Math.floor(g / 3)) - 10 - sleep < 10)
      c.notMapped('lifecycle', `a preStop sleep of ${sleep} s leaves the server less than 10 s to drain within a grace period of ${g} s`);
    else c.pod.lifecycle = asK8s(lifecycle);
  }
  for (const probe of ['livenessProbe', 'readinessProbe']) {
    v.get(probe);
    if (!v.isDefault(probe))
      c.notMapped(
        probe,
        "the operator sets the server's probes (readiness /readyz every 2 s, so a draining pod leaves the Service at once; liveness /healthz)",
      );
  }
  // The chart's container port is containerPort, else service.targetPort; the Service targets service.targetPort.
  const containerPort = v.int(['containerPort']);
  const target = v.get('service', 'targetPort');
  const listens = containerPort || target;
  if (listens !== undefined && String(listens) !== '4141')
    c.note(
      containerPort ? 'containerPort' : 'service.targetPort',
      `the server listens on 4141 here, not ${String(listens)} (the operator sets ATLANTIS_PORT): a sidecar or hook of yours that calls ${String(listens)} must call 4141`,
    );
  if (target !== undefined && listens !== undefined && String(target) !== String(listens))
    c.notMapped(
      'service.targetPort',
      "the chart's Service went to a port other than Atlantis's; the Service's http port goes to the server, and service.extraPorts to a sidecar",
    );
  if (v.list(['command']).length)
    c.notMapped('command', "the pods run this image's entrypoint with `server`; the Atlantis image's (docker-entrypoint.sh) is not in it");
  if (v.bool('hostNetwork')) c.notMapped('hostNetwork', "the operator's pods never use the node's network");
}

function mapServiceAccount(v: Values, c: Conversion): void {
  const create = v.bool('serviceAccount', 'create');
  const mount = v.bool('serviceAccount', 'mount');
  const name = v.get('serviceAccount', 'name');
  if (name !== undefined && typeof name !== 'string') throw new ValuesError('serviceAccount.name must be a string');
  const annotations = v.strMap('serviceAccount', 'annotations');
  if (mount === false)
    c.notMapped(
      'serviceAccount.mount',
      "the server reads its own Pod (the drain annotation) with the account's token, which is always mounted",
    );
  if (create === false && name) {
    c.pod.serviceAccountName = name;
    c.note('serviceAccount.name', `every pod runs as ${name}; the operator binds its Role (read the pods) to it`);
    if (truthy(annotations))
      c.notMapped('serviceAccount.annotations', 'the chart annotates only an account it creates (serviceAccount.create)');
    return;
  }
  if (create === false)
    c.note(
      'serviceAccount.create',
      "the chart ran the pods as the namespace's default account; the operator makes one account per pod, <name>-atlantis-<ordinal>",
    );
  else if (name)
    c.note(
      'serviceAccount.name',
      `the operator makes its own accounts, one per pod (${c.names.name}-atlantis-<ordinal>), instead of ${name}`,
    );
  const all = { ...annotations, ...(create === false ? {} : c.extraAnnotations) };
  if (create !== false && truthy(all)) {
    const ok = allowedKeys(
      c,
      'serviceAccount.annotations',
      all,
      (k) => k.startsWith('atlantis-operator.dev/'),
      "the operator's own annotation",
    );
    c.spec.serviceAccount = { ...c.spec.serviceAccount, annotations: ok };
  }
  if (v.bool('enableKubernetesBackend'))
    c.notMapped(
      'enableKubernetesBackend',
      `the operator grants the pods no Leases or Secrets for terraform's kubernetes backend: bind such a Role to the accounts ${c.names.name}-atlantis-<ordinal> yourself`,
    );
}

function mapExtraVolumes(v: Values, c: Conversion): void {
  const dropped = new Set<string>();
  const volumes = v.list(['extraVolumes'], 'mapping').flatMap((x, i) => {
    const vol = asK8s<V1Volume>(x);
    if (typeof vol.name !== 'string') throw new ValuesError(`extraVolumes[${i}] needs a name`);
    if (RESERVED_VOLUMES.includes(vol.name)) {
      dropped.add(vol.name);
      c.notMapped(`extraVolumes[${i}]`, `the name ${vol.name} is one of the operator's volumes (${RESERVED_VOLUMES.join(', ')})`);
      return [];
    }
    return [vol];
  });
  if (volumes.length) c.pod.extraVolumes = volumes;
  const mounts = v.list(['extraVolumeMounts'], 'mapping').flatMap((x, i) => {
    const m = asK8s<V1VolumeMount>(x);
    if (m.mountPath === '/atlantis') c.notMapped(`extraVolumeMounts[${i}]`, '/atlantis is the data dir, which the operator mounts');
    else if (dropped.has(m.name)) c.notMapped(`extraVolumeMounts[${i}]`, `its volume ${m.name} is not carried over`);
    else return [m];
    return [];
  });
  if (mounts.length) c.pod.extraVolumeMounts = mounts;
}

/** A container of the values: quantities as text, a plain secret-looking variable moved into a Secret. */
function container(c: Conversion, path: string, x: Obj): V1Container {
  const ct = { ...x } as Obj;
  if (isObj(ct.resources)) ct.resources = resourcesOf(ct.resources);
  if (Array.isArray(ct.env)) {
    ct.env = ct.env.map((e) => {
      const ev = asK8s<V1EnvVar>(e);
      if (!isObj(e) || typeof ev.name !== 'string' || ev.value === undefined || !secretByName(ev.name)) return e;
      const key = `${String(ct.name)}.${ev.name}`;
      const ref = c.secretRef(c.newSecret('env'), key, `the value of ${ev.name} in ${path}`);
      return { name: ev.name, valueFrom: { secretKeyRef: { name: ref.name, key: ref.key } } };
    });
  }
  return asK8s<V1Container>(ct);
}

function mapStorage(v: Values, c: Conversion): void {
  const enabled = v.bool('volumeClaim', 'enabled');
  const size = v.str('volumeClaim', 'dataStorage');
  const cls = v.str('volumeClaim', 'storageClassName');
  const vac = v.str('volumeClaim', 'volumeAttributesClassName');
  const modes = v.list(['volumeClaim', 'accessModes']);
  const oldSize = v.str('dataStorage');
  const oldCls = v.str('storageClassName');
  const dir = v.str('atlantisDataDirectory') ?? '/atlantis-data';
  const storage = (s: string | undefined, sc: string | undefined, where: string) => {
    if (s && !QUANTITY.test(s)) c.notMapped(where, 'not a quantity such as 5Gi');
    else if (s) c.spec.storage = { size: s };
    if (sc) c.spec.storage = { ...c.spec.storage, storageClassName: sc };
  };
  let pvc: string | undefined;
  if (oldSize) {
    storage(oldSize, oldCls, 'dataStorage');
    pvc = `atlantis-data-${c.names.fullname}-0`;
  } else if (enabled) {
    storage(size, cls, 'volumeClaim.dataStorage');
    if (vac) c.notMapped('volumeClaim.volumeAttributesClassName', "the operator's PVCs have no VolumeAttributesClass");
    if (JSON.stringify(modes) !== '["ReadWriteOnce"]')
      c.notMapped('volumeClaim.accessModes', "the operator's PVCs are ReadWriteOnce, one per pod");
    pvc = `${c.names.fullname}-data`;
  } else if (oldCls) storage(undefined, oldCls, 'storageClassName');
  c.note(
    'atlantisDataDirectory',
    pvc
      ? `the data dir is /atlantis here; Atlantis's locks are in ${dir}/atlantis.db on the PVC ${pvc}: carry them over with \`atlantis-operator migrate atlantis-db\` (docs/migrating-from-atlantis.md)`
      : `the data dir is /atlantis here, on a PVC per pod; the chart kept ${dir} on no volume, so Atlantis's locks went with its pod`,
  );
}
