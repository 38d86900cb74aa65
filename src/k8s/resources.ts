// A typed client for one kind of object: the write path every controller request goes
// through (kubeRequest's 429 retries, one success check, KubeApiError on failure).
//
//   const pods = new ResourceClient<V1Pod>(kc, { apiVersion: 'v1', plural: 'pods' });
//   await pods.patch(ns, name, body, MERGE_PATCH, { signal });
//   const svc = await services.apply(desired, { fieldManager: FIELD_MANAGER, force: true });
import { APPLY_PATCH, type HttpMethod, KubeApiError, MERGE_PATCH, type RequestOptions, apiPath, kubeRequestOk } from './client.js';
import type { KubeClientConfig } from './kubeconfig.js';

export interface ResourceKind {
  apiVersion: string;
  plural: string;
}

/** What a ResourceClient call accepts besides its arguments. */
export type CallOptions = Pick<RequestOptions, 'signal' | 'timeoutMs' | 'retry'>;

/** Objects with at least the metadata this client needs. */
export interface NamedObject {
  metadata?: { name?: string; namespace?: string };
}

export function isNotFound(e: unknown): boolean {
  return e instanceof KubeApiError && e.status === 404;
}

/** 409: already exists (create), or changed since the resourceVersion we sent. */
export function isConflict(e: unknown): boolean {
  return e instanceof KubeApiError && e.status === 409;
}

export class ResourceClient<T extends NamedObject> {
  constructor(
    private readonly kc: KubeClientConfig,
    readonly kind: ResourceKind,
  ) {}

  /** The object, or undefined when it does not exist. */
  async get(namespace: string | undefined, name: string, o: CallOptions = {}): Promise<T | undefined> {
    try {
      return await this.call<T>('GET', apiPath(this.kind.apiVersion, this.kind.plural, namespace, name), undefined, o);
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw e;
    }
  }

  async list(
    namespace: string | undefined,
    query: { labelSelector?: string; fieldSelector?: string } = {},
    o: CallOptions = {},
  ): Promise<T[]> {
    const r = await this.call<{ items?: T[] }>('GET', apiPath(this.kind.apiVersion, this.kind.plural, namespace), undefined, {
      ...o,
      query,
    });
    return r.items ?? [];
  }

  /** `query` e.g. `{ dryRun: 'All' }`. */
  create(namespace: string | undefined, obj: T, o: CallOptions & { query?: RequestOptions['query'] } = {}): Promise<T> {
    return this.call<T>('POST', apiPath(this.kind.apiVersion, this.kind.plural, namespace), obj, o);
  }

  patch(
    namespace: string | undefined,
    name: string,
    body: unknown,
    contentType = MERGE_PATCH,
    o: CallOptions & { subresource?: string } = {},
  ): Promise<T> {
    return this.call<T>('PATCH', apiPath(this.kind.apiVersion, this.kind.plural, namespace, name, o.subresource), body, {
      ...o,
      contentType,
    });
  }

  /**
   * Server-side apply: the fields in `obj` become owned by `fieldManager`; with `force`, taken
   * from any other manager that changed them (so an edit by someone else is reverted).
   * Creates the object when it does not exist.
   */
  apply(obj: T & { apiVersion?: string; kind?: string }, o: CallOptions & { fieldManager: string; force: boolean }): Promise<T> {
    const { name, namespace } = obj.metadata ?? {};
    if (!name) throw new Error(`apply ${this.kind.plural}: the object has no name`);
    // JSON is YAML, so the apply content type takes the JSON body as it is.
    return this.call<T>('PATCH', apiPath(this.kind.apiVersion, this.kind.plural, namespace, name), obj, {
      ...o,
      contentType: APPLY_PATCH,
      query: { fieldManager: o.fieldManager, force: o.force ? 'true' : undefined },
    });
  }

  /** `options`: a DeleteOptions body (preconditions, grace period, propagation). */
  async delete(namespace: string | undefined, name: string, options?: unknown, o: CallOptions = {}): Promise<void> {
    await this.call('DELETE', apiPath(this.kind.apiVersion, this.kind.plural, namespace, name), options, o);
  }

  private call<R>(method: HttpMethod, path: string, body: unknown, o: RequestOptions): Promise<R> {
    return kubeRequestOk<R>(this.kc, method, path, body, o);
  }
}
