// The pod's volumes and the server container's mounts: the data dir (PVC or emptyDir), the
// GitHub App key and the repo config as files (the Atlantis chart's paths), the shared state
// key (Redis only), then the user's.
import type { V1Volume, V1VolumeMount } from '@kubernetes/client-node';
import { DATA_DIR, type AtlantisDeploymentSpec, type SecretKeyRef } from '../types.js';
import { DEFAULTS } from './defaults.js';
import { usesDataClaims } from './pvc.js';

export const DATA_VOLUME = 'data';
export const APP_KEY_VOLUME = 'github-app-key';
export const REPO_CONFIG_VOLUME = 'repo-config';
export const APP_KEY_DIR = '/var/github-app';
export const APP_KEY_FILE = `${APP_KEY_DIR}/key.pem`;
export const REPO_CONFIG_DIR = '/etc/atlantis';
export const REPO_CONFIG_FILE = `${REPO_CONFIG_DIR}/repos.yaml`;
/** The shared state key's Secret volume (Redis only): one file, read-only, readable by the pod's fsGroup. */
export const SHARED_STATE_KEY_VOLUME = 'shared-state-key';
export const SHARED_STATE_KEY_DIR = '/etc/atlantis/shared-state';
export const SHARED_STATE_KEY_FILE = `${SHARED_STATE_KEY_DIR}/key`;
/**
 * Owner and group read only: the pod's fsGroup (1000 by default) owns the file, and the kubelet
 * adds that group to every container's processes.
 */
export const SECRET_FILE_MODE = 0o440;
// The template's claimName before renderPod sets the ordinal's PVC; constant so the hash is too.
export const CLAIM_PLACEHOLDER = '';

/**
 * With the embedded store the data dir is the ordinal's PVC (its locks and plans outlive the
 * pod). With Redis it holds only working copies, which a new pod clones again: an emptyDir,
 * so a pod of a new revision can start beside the old one. Its sizeLimit makes the kubelet
 * evict a pod that fills it rather than let it fill the node.
 */
function dataVolume(spec: AtlantisDeploymentSpec): V1Volume {
  if (usesDataClaims(spec)) return { name: DATA_VOLUME, persistentVolumeClaim: { claimName: CLAIM_PLACEHOLDER } };
  return { name: DATA_VOLUME, emptyDir: { sizeLimit: spec.storage.size } };
}

/** spec.atlantis.lockingDB.redis.sharedStateKeySecretRef with type redis (the CRD requires it there), else nothing. */
export function sharedStateKeyRef(spec: AtlantisDeploymentSpec): SecretKeyRef | undefined {
  const db = spec.atlantis.lockingDB;
  return db.type === 'redis' ? db.redis.sharedStateKeySecretRef : undefined;
}

/** The operator's volumes, then podTemplate.spec.extraVolumes (the CRD keeps their names apart). */
export function podVolumes(spec: AtlantisDeploymentSpec): V1Volume[] {
  const a = spec.atlantis;
  const volumes: V1Volume[] = [dataVolume(spec)];
  if (a.githubApp)
    volumes.push({
      name: APP_KEY_VOLUME,
      secret: {
        secretName: a.githubApp.keySecretRef.name,
        items: [{ key: a.githubApp.keySecretRef.key, path: 'key.pem' }],
        defaultMode: SECRET_FILE_MODE,
      },
    });
  if (a.repoConfig)
    volumes.push({
      name: REPO_CONFIG_VOLUME,
      configMap: {
        name: a.repoConfig.configMapRef.name,
        items: [{ key: a.repoConfig.configMapRef.key ?? DEFAULTS.repoConfigKey, path: 'repos.yaml' }],
      },
    });
  // The kubelet mounts the key; it is never a value in the pod spec or its env, and the
  // controller reads only its Secret's metadata (a rotation rolls the pods, content.ts).
  const key = sharedStateKeyRef(spec);
  if (key)
    volumes.push({
      name: SHARED_STATE_KEY_VOLUME,
      secret: { secretName: key.name, items: [{ key: key.key, path: 'key' }], defaultMode: SECRET_FILE_MODE },
    });
  return [...volumes, ...(spec.podTemplate?.spec?.extraVolumes ?? [])];
}

/** The server container's mounts: whole directories (a subPath mount never sees an update). */
export function serverMounts(spec: AtlantisDeploymentSpec): V1VolumeMount[] {
  const a = spec.atlantis;
  const mounts: V1VolumeMount[] = [{ name: DATA_VOLUME, mountPath: DATA_DIR }];
  if (a.githubApp) mounts.push({ name: APP_KEY_VOLUME, mountPath: APP_KEY_DIR, readOnly: true });
  if (a.repoConfig) mounts.push({ name: REPO_CONFIG_VOLUME, mountPath: REPO_CONFIG_DIR, readOnly: true });
  if (sharedStateKeyRef(spec)) mounts.push({ name: SHARED_STATE_KEY_VOLUME, mountPath: SHARED_STATE_KEY_DIR, readOnly: true });
  return [...mounts, ...(spec.podTemplate?.spec?.extraVolumeMounts ?? [])];
}
