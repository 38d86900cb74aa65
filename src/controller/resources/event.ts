// core/v1 Events about an AtlantisDeployment (SPEC 7.7). The pod concerned is named in the
// message; the involved object is the AtlantisDeployment so `kubectl describe atd` shows them.
import type { CoreV1Event } from '@kubernetes/client-node';
import { API_VERSION, KIND, type AtlantisDeployment } from '../types.js';
import { requireName } from './names.js';

export const EVENT_COMPONENT = 'atlantis-operator';

export interface EventInput {
  eventType: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

/**
 * `suffix` makes the name unique (client-go uses a hex timestamp); passed in so this stays
 * pure. `instance` is the reporting controller replica (its pod name).
 */
export function renderEvent(ad: AtlantisDeployment, e: EventInput, now: Date, suffix: string, instance: string): CoreV1Event {
  const { name, namespace } = requireName(ad);
  return {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { name: `${name}.${suffix}`, namespace },
    involvedObject: {
      apiVersion: API_VERSION,
      kind: KIND,
      name,
      namespace,
      ...(ad.metadata.uid ? { uid: ad.metadata.uid } : {}),
      ...(ad.metadata.resourceVersion ? { resourceVersion: ad.metadata.resourceVersion } : {}),
    },
    type: e.eventType,
    reason: e.reason,
    // The API server limits an Event message to 1 KiB.
    message: e.message.length > 1024 ? `${e.message.slice(0, 1021)}...` : e.message,
    firstTimestamp: now,
    lastTimestamp: now,
    count: 1,
    source: { component: EVENT_COMPONENT },
    reportingComponent: EVENT_COMPONENT,
    reportingInstance: instance,
  };
}
