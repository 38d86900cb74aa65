// Which way a container's image runs on the local node, one rule for both modes:
//   - a reference with a registry host (`localhost/atlantis-operator:0.1.0`, what `make image`
//     builds, or any `host/...` name) runs in a real container when it is in local container
//     storage (podman's);
//   - a short name starting with the node's image prefix (`atlantis-operator:v2`) runs the
//     repository's build as a local process, as it always did (fast; the default of tests);
//   - anything else is an image the node does not have: it has no registry to pull from.
//     A `localhost/` reference (local storage only, nothing to pull) or imagePullPolicy Never
//     waits in ErrImageNeverPull, as a kubelet with a pull policy of Never; any other in
//     ErrImagePull, then ImagePullBackOff.
import type { V1Container } from '@kubernetes/client-node';
import { localImageId, podman } from './podman.js';
import type { NodeCtx } from './types.js';

export type ImageMode =
  | { kind: 'process' }
  | { kind: 'container'; id: string; user: string }
  | { kind: 'missing'; reason: 'ErrImagePull' | 'ErrImageNeverPull'; message: string };

/** Pure: the registry host of a reference, if it names one (Docker's rule: a first part with '.', ':' or "localhost"). */
export function registryHost(ref: string): string | undefined {
  const slash = ref.indexOf('/');
  if (slash < 0) return undefined;
  const first = ref.slice(0, slash);
  return first === 'localhost' || first.includes('.') || first.includes(':') ? first : undefined;
}

/** Pure: the mode for an image, given what local storage holds (`local`: its ID and user, when present). */
export function chooseMode(
  image: string,
  pullPolicy: string | undefined,
  prefix: string,
  local: { id: string; user: string } | undefined,
): ImageMode {
  if (registryHost(image) !== undefined && local) return { kind: 'container', ...local };
  if (registryHost(image) === undefined && image.startsWith(prefix)) return { kind: 'process' };
  if (registryHost(image) === 'localhost' || pullPolicy === 'Never') {
    return { kind: 'missing', reason: 'ErrImageNeverPull', message: `Container image "${image}" is not present with pull policy of Never` };
  }
  return {
    kind: 'missing',
    reason: 'ErrImagePull',
    message: `failed to pull image "${image}": the local node has no registry; it has the images in local container storage and runs "${prefix}..." as processes`,
  };
}

/** Local storage lookups, cached briefly: many pods of one image start at once. */
const CACHE_MS = 3_000;
const cache = new Map<string, { at: number; value: Promise<{ id: string; user: string } | undefined> }>();
let podmanChecked: Promise<boolean> | undefined;

async function lookUp(image: string): Promise<{ id: string; user: string } | undefined> {
  podmanChecked ??= podman(['--version'], 10_000).then((r) => r.code === 0);
  if (!(await podmanChecked)) return undefined;
  const id = await localImageId(image);
  if (!id) return undefined;
  const user = await podman(['image', 'inspect', '--format', '{{.Config.User}}', id], 30_000);
  return { id, user: user.code === 0 ? user.stdout.trim() : '' };
}

/** The mode for a container of a pod on this node. */
export async function imageMode(n: NodeCtx, c: V1Container): Promise<ImageMode> {
  const image = c.image ?? '';
  let local: { id: string; user: string } | undefined;
  if (n.containerMode && registryHost(image) !== undefined) {
    const hit = cache.get(image);
    if (hit && Date.now() - hit.at < CACHE_MS) local = await hit.value;
    else {
      const value = lookUp(image);
      cache.set(image, { at: Date.now(), value });
      local = await value;
    }
  }
  return chooseMode(image, c.imagePullPolicy, n.imagePrefix, local);
}
