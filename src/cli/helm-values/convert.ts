// The official Atlantis chart's values to an AtlantisDeployment (`migrate helm-values`): the
// values merged as Helm merges them, then each mapping in turn (map-*.ts), then every value no
// mapping read is reported as not a value of the chart. Pure: files' values in, objects and
// findings out; command.ts does the I/O.
import type { V1ConfigMap } from '@kubernetes/client-node';
import type { AtlantisDeployment } from '../../controller/types.js';
import { CHART_DEFAULTS, CHART_NAME, CHART_VERSION } from './chart-defaults.js';
import { Conversion, type Finding, type SecretNeeded } from './conversion.js';
import { mapUserEnv } from './map-env.js';
import { mapFiles } from './map-files.js';
import { mapNetwork } from './map-network.js';
import { allowedKeys, mapPod, reservedLabel } from './map-pod.js';
import { mapSettings } from './map-settings.js';
import { mapVcs } from './map-vcs.js';
import { coalesce, isObj, type Obj, show, truthy, ValuesError, Values } from './values.js';

export interface ConvertOptions {
  /** The Helm release the values belong to (the chart names its objects after it). */
  release: string;
  /** The AtlantisDeployment's name; default the chart's full name. */
  name?: string;
  namespace?: string;
  image: string;
}

export interface Converted {
  deployment: AtlantisDeployment;
  configMaps: V1ConfigMap[];
  secrets: SecretNeeded[];
  unmapped: Finding[];
  notes: Finding[];
  /** The chart's full name for the release. */
  fullname: string;
}

const DNS_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

/** Go's strings.TrimSuffix(s, "-") after a cut to 63 characters, as the chart's helpers do. */
const trunc63 = (s: string): string => {
  const t = s.slice(0, 63);
  return t.endsWith('-') ? t.slice(0, -1) : t;
};

/** The chart's `atlantis.fullname`: fullnameOverride, else the release name (when it holds the chart's name) or `<release>-<name>`. */
export function chartFullname(release: string, nameOverride?: string, fullnameOverride?: string): string {
  if (fullnameOverride) return trunc63(fullnameOverride);
  const name = nameOverride || CHART_NAME;
  return release.includes(name) ? trunc63(release) : trunc63(`${release}-${name}`);
}

/** The values of `files` (in order, later ones winning) over the chart's defaults. */
export function convertValues(files: Obj[], opts: ConvertOptions): Converted {
  const effective = files.reduce((acc, f) => coalesce(acc, f), CHART_DEFAULTS);
  const v = new Values(effective, CHART_DEFAULTS);
  const fullname = chartFullname(opts.release, v.str('nameOverride'), v.str('fullnameOverride'));
  const name = opts.name ?? fullname;
  if (name.length > 63 || !DNS_LABEL.test(name))
    throw new ValuesError(
      `the AtlantisDeployment's name ${JSON.stringify(name)} (${opts.name ? '--name' : "the chart's full name"}) must be a DNS label of at most 63 characters (lowercase letters, digits, '-', a letter first): give --name`,
    );
  const c = new Conversion({
    release: opts.release,
    fullname,
    name,
    ...(opts.namespace ? { namespace: opts.namespace } : {}),
    image: opts.image,
  });
  c.commonLabels = allowedKeys(
    c,
    'commonLabels',
    v.strMap('commonLabels'),
    reservedLabel,
    'the operator selects its objects by this label',
  );
  c.extraAnnotations = allowedKeys(
    c,
    'extraAnnotations',
    v.strMap('extraAnnotations'),
    (k) => k.startsWith('atlantis-operator.dev/'),
    "the operator's own annotation",
  );
  mapSettings(v, c);
  mapVcs(v, c);
  mapPod(v, c);
  mapFiles(v, c);
  mapNetwork(v, c);
  mapUserEnv(v, c);
  mapExtras(v, c);
  if (truthy(c.commonLabels)) c.spec.serviceAccount = { ...c.spec.serviceAccount, labels: { ...c.commonLabels } };
  for (const p of v.unread())
    c.notMapped(
      show(p),
      `not a value of the ${CHART_NAME} chart ${CHART_VERSION} (its values.schema.json has no such value, so Helm refuses it)`,
    );
  return {
    deployment: c.deployment(),
    configMaps: c.configMaps,
    secrets: [...c.secrets.values()],
    unmapped: c.unmapped,
    notes: c.notes,
    fullname,
  };
}

/** What the chart makes beside Atlantis's pod: its test pod, monitors, extra manifests. */
function mapExtras(v: Values, c: Conversion): void {
  v.get('test');
  if (!v.isDefault('test'))
    c.notMapped('test', `the chart's \`helm test\` pod: the operator has none (kubectl wait --for=condition=Ready atd/${c.names.name})`);
  const monitor = v.obj('servicemonitor');
  if (monitor.enabled === true)
    c.notMapped(
      'servicemonitor',
      `the operator makes no ServiceMonitor: write one for the Service ${c.names.name}, port http, path /metrics (docs/metrics.md)`,
    );
  const pod = v.obj('podMonitor');
  if (pod.enabled === true)
    c.notMapped('podMonitor', 'the operator makes no PodMonitor: write one for its pods, port 4141, path /metrics (docs/metrics.md)');
  if (truthy(v.strMap('secret', 'annotations')))
    c.notMapped('secret.annotations', 'the operator makes no Secrets: annotate the ones listed above as you create them');
  for (const key of ['extraManifests', 'extraSecretManifests']) {
    const objs = v.list([key]);
    if (!objs.length) continue;
    const what = objs
      .map((o) => (isObj(o) ? `${String(o.kind)} ${String(isObj(o.metadata) ? o.metadata.name : '')}`.trim() : 'an object'))
      .join(', ');
    c.notMapped(key, `objects beside Atlantis (${what}) are not copied: apply them yourself (the chart renders them as templates)`);
  }
  if (truthy(v.obj('sops'))) c.notMapped('sops', 'for extraSecretManifests, which are not copied');
  if (truthy(v.obj('global'))) c.notMapped('global', "Helm's global values, for subcharts: this chart has none");
}
