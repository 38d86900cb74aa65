// What `migrate helm-values` builds while it reads a chart's values: the AtlantisDeployment's
// parts, the ConfigMaps, the Secrets it references (by name and key: a value is never copied),
// and the values it could not carry over, each with the reason. The mappings (map-*.ts) fill
// it; render.ts prints it.
import type { V1ConfigMap, V1EnvFromSource, V1EnvVar, V1Volume, V1VolumeMount } from '@kubernetes/client-node';
import {
  API_VERSION,
  type AtlantisDeployment,
  type AtlantisDeploymentSpecInput,
  type AtlantisSettings,
  KIND,
  type PodTemplateOverrides,
  type SecretKeyRef,
} from '../../controller/types.js';
import { type Json, isObj } from './values.js';

export interface Names {
  /** The Helm release the values were installed as. */
  release: string;
  /** The chart's full name for that release (its StatefulSet, Service, Secrets are named after it). */
  fullname: string;
  /** The AtlantisDeployment's name. */
  name: string;
  namespace?: string;
  /** The atlantis-operator image for spec.image. */
  image: string;
}

/** A value and what happened to it (or why nothing could). */
export interface Finding {
  value: string;
  reason: string;
}

export interface SecretKeyNeeded {
  key: string;
  /** What the key must hold, e.g. "the GitHub token (github.token)". */
  holds: string;
}

export interface SecretNeeded {
  name: string;
  /** true: to be created (the values had the secret, or the chart made the Secret); false: the values name an existing Secret. */
  create: boolean;
  /** The chart's Secret that holds the same keys, to copy them from. */
  chartSecret?: string;
  keys: SecretKeyNeeded[];
  /** Mounted whole as a directory: what it must hold (its keys are the file names). */
  whole?: string;
}

/** Where a Secret reference points: a Secret the values name, or one to create. */
export interface SecretSource {
  name: string;
  create: boolean;
  chartSecret?: string;
}

type PodSpecFields = NonNullable<PodTemplateOverrides['spec']>;

export class Conversion {
  readonly atlantis: AtlantisSettings = {};
  /** The chart's own settings as variables (logLevel, github.hostname, ...), in the chart's order. */
  readonly settingsEnv: V1EnvVar[] = [];
  /** The values' own variables (environmentRaw, environment, environmentSecrets, ...), before the settings as in the chart. */
  readonly userEnv: V1EnvVar[] = [];
  readonly envFrom: V1EnvFromSource[] = [];
  readonly extraArgs: string[] = [];
  readonly pod: PodSpecFields = {};
  readonly volumes: V1Volume[] = [];
  readonly mounts: V1VolumeMount[] = [];
  readonly podLabels: Record<string, string> = {};
  readonly podAnnotations: Record<string, string> = {};
  readonly spec: Omit<AtlantisDeploymentSpecInput, 'image' | 'atlantis' | 'podTemplate'> = {};
  readonly labels: Record<string, string> = {};
  readonly annotations: Record<string, string> = {};
  readonly configMaps: V1ConfigMap[] = [];
  readonly secrets = new Map<string, SecretNeeded>();
  readonly unmapped: Finding[] = [];
  readonly notes: Finding[] = [];
  /** Labels and annotations the chart put on every object it made (commonLabels, extraAnnotations). */
  commonLabels: Record<string, string> = {};
  extraAnnotations: Record<string, string> = {};

  constructor(readonly names: Names) {}

  notMapped(value: string, reason: string): void {
    this.unmapped.push({ value, reason });
  }

  note(value: string, reason: string): void {
    this.notes.push({ value, reason });
  }

  /** A Secret to create, named after the AtlantisDeployment, that takes the place of the chart's `chartSuffix` Secret. */
  newSecret(suffix: string, chartSuffix?: string): SecretSource {
    return {
      name: `${this.names.name}-${suffix}`,
      create: true,
      ...(chartSuffix ? { chartSecret: `${this.names.fullname}-${chartSuffix}` } : {}),
    };
  }

  /** `{name, key}` of a key the AtlantisDeployment reads; the Secret is listed in the output with what the key holds. */
  secretRef(src: SecretSource, key: string, holds: string): SecretKeyRef {
    let s = this.secrets.get(src.name);
    if (!s) {
      s = { name: src.name, create: src.create, ...(src.chartSecret ? { chartSecret: src.chartSecret } : {}), keys: [] };
      this.secrets.set(src.name, s);
    }
    if (!s.keys.some((k) => k.key === key)) s.keys.push({ key, holds });
    return { name: src.name, key };
  }

  /** A Secret mounted whole as a directory, listed with what it must hold. */
  secretWhole(src: SecretSource, holds: string): void {
    if (!this.secrets.has(src.name))
      this.secrets.set(src.name, {
        name: src.name,
        create: src.create,
        ...(src.chartSecret ? { chartSecret: src.chartSecret } : {}),
        keys: [],
      });
    (this.secrets.get(src.name) as SecretNeeded).whole = holds;
  }

  /** Names of the variables the operator or the chart's own settings set. */
  envSet(): Set<string> {
    return new Set(this.settingsEnv.map((e) => e.name));
  }

  /** A ConfigMap named `<name>-<suffix>` with the chart's labels and annotations; returns its name. */
  configMap(suffix: string, data: Record<string, string>): string {
    const name = `${this.names.name}-${suffix}`;
    this.configMaps.push({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name,
        ...(this.names.namespace ? { namespace: this.names.namespace } : {}),
        ...nonEmpty('labels', this.commonLabels),
        ...nonEmpty('annotations', this.extraAnnotations),
      },
      data,
    });
    return name;
  }

  deployment(): AtlantisDeployment {
    const atlantis: AtlantisSettings = { ...this.atlantis };
    const env = [...this.userEnv, ...this.settingsEnv];
    if (env.length) atlantis.env = env;
    if (this.envFrom.length) atlantis.envFrom = this.envFrom;
    if (this.extraArgs.length) atlantis.extraArgs = this.extraArgs;
    const podSpec: PodSpecFields = { ...this.pod };
    if (this.volumes.length) podSpec.extraVolumes = [...this.volumes, ...(podSpec.extraVolumes ?? [])];
    if (this.mounts.length) podSpec.extraVolumeMounts = [...this.mounts, ...(podSpec.extraVolumeMounts ?? [])];
    const podTemplate: PodTemplateOverrides = {
      ...(Object.keys(this.podLabels).length || Object.keys(this.podAnnotations).length
        ? { metadata: { ...nonEmpty('labels', this.podLabels), ...nonEmpty('annotations', this.podAnnotations) } }
        : {}),
      ...(Object.keys(podSpec).length ? { spec: podSpec } : {}),
    };
    const { replicas, ...rest } = this.spec;
    const spec: AtlantisDeploymentSpecInput = {
      image: this.names.image,
      ...(replicas !== undefined ? { replicas } : {}),
      ...(Object.keys(atlantis).length ? { atlantis } : {}),
      ...rest,
      ...(Object.keys(podTemplate).length ? { podTemplate } : {}),
    };
    return {
      apiVersion: API_VERSION,
      kind: KIND,
      metadata: {
        name: this.names.name,
        ...(this.names.namespace ? { namespace: this.names.namespace } : {}),
        ...nonEmpty('labels', { ...this.commonLabels, ...this.labels }),
        ...nonEmpty('annotations', { ...this.annotations, ...this.extraAnnotations }),
      },
      spec,
    };
  }
}

function nonEmpty<K extends string>(key: K, m: Record<string, string>): { [P in K]?: Record<string, string> } {
  return (Object.keys(m).length ? { [key]: m } : {}) as { [P in K]?: Record<string, string> };
}

/** A Kubernetes object from the values (a volume, a container), as the JSON it is. */
export const asK8s = <T>(v: Json): T => v as unknown as T;

/** Numbers in quantity positions as strings: Helm renders `cpu: 0.5` as text, and the CRD takes a quantity only as an integer or a string. */
export function quantities(v: Json | undefined): Json | undefined {
  if (!isObj(v)) return v;
  const out: Record<string, Json> = {};
  for (const [k, q] of Object.entries(v)) out[k] = typeof q === 'number' && !Number.isInteger(q) ? String(q) : q;
  return out;
}
