// Watches the server's own Pod for the drain annotation `atlantis-operator.dev/drain`
// (set by the controller, or by hand with kubectl annotate). Active only when POD_NAME and
// POD_NAMESPACE are set and a cluster is configured. The Informer re-lists and restarts
// its watch after disconnects, and handlers are level-based: whatever the pod says now
// decides, so a missed event cannot leave a requested drain unnoticed.
import type { V1Pod } from '@kubernetes/client-node';
import { type KubeClientConfig, loadKubeConfig } from '../../k8s/kubeconfig.js';
import { Informer } from '../../k8s/informer.js';
import { ANNOTATION_DRAIN, drainRequested } from '../../contract/drain-protocol.js';
import type { AtlantisServer } from '../server.js';

/** The decision, pure: does this observation of our pod ask for a drain? */
export function podRequestsDrain(pod: V1Pod | undefined, podName: string): boolean {
  if (!pod || pod.metadata?.name !== podName) return false;
  return drainRequested(pod.metadata?.annotations?.[ANNOTATION_DRAIN]);
}

export interface OwnPodIdentity {
  name: string;
  namespace: string;
}

export function ownPodIdentity(env: NodeJS.ProcessEnv = process.env): OwnPodIdentity | undefined {
  return env.POD_NAME && env.POD_NAMESPACE ? { name: env.POD_NAME, namespace: env.POD_NAMESPACE } : undefined;
}

/** Server plugin: starts the watch with the server and stops it on close. */
export function ownPodWatchPlugin(server: AtlantisServer): { start?: () => Promise<void>; close?: () => void } {
  const me = ownPodIdentity();
  if (!me) return {};
  let informer: Informer<V1Pod> | undefined;
  return {
    start: async () => {
      let kc: KubeClientConfig;
      try {
        kc = await loadKubeConfig();
      } catch (e) {
        server.logger.warn('Own pod watch disabled: no cluster configuration', { pod: me, error: (e as Error).message });
        return;
      }
      informer = new Informer<V1Pod>(kc, `/api/v1/namespaces/${encodeURIComponent(me.namespace)}/pods`, {
        fieldSelector: `metadata.name=${me.name}`,
        logger: server.logger.child({ component: 'ownPodWatch' }),
      });
      informer.onEvent((type, pod) => {
        if (type !== 'DELETED' && podRequestsDrain(pod, me.name) && !server.tracker.isShuttingDown) {
          // Logged by the drain ("Drain started", with the annotation's value) once it has
          // taken effect: the held /status answers go out first.
          server.requestDrain('annotation', { annotation: pod.metadata?.annotations?.[ANNOTATION_DRAIN] });
        }
      });
      // Do not block startup on the API server: the Informer retries its first list (with
      // backoff) until it works or is stopped.
      informer.start().then(
        () => {
          if (informer?.hasSynced()) server.logger.info('Watching own pod for the drain annotation', { pod: me });
        },
        (e: unknown) => server.logger.error('Own pod watch failed', { pod: me, error: (e as Error).message }),
      );
    },
    close: () => informer?.stop(),
  };
}
