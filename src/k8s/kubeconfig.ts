// Where the Kubernetes client gets its API server address, TLS material and credentials.
//
// The common configurations are read here, without @kubernetes/client-node: in-cluster (the
// service-account token, CA and namespace files) and a kubeconfig file whose user has a
// token, a token file, a client certificate or a user name and password. Anything else
// (exec and auth-provider plugins, proxies, impersonation, several files in KUBECONFIG) is
// handed to client-node's KubeConfig, loaded only then. Why: client-node and what it pulls in
// are a large part of the bundle, and loading them costs every server CPU at start, which
// adds up when a rollout starts many server pods at once and the old ones, still draining,
// wait for CPU.
import fs from 'node:fs';
import type https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import YAML from 'yaml';

/**
 * What the client needs from a configuration. @kubernetes/client-node's KubeConfig has this
 * shape, so either can be passed wherever one is asked for.
 */
export interface KubeClientConfig {
  getCurrentCluster(): { readonly server: string; readonly skipTLSVerify: boolean } | null;
  getCurrentContext(): string;
  getContextObject(name: string): { readonly namespace?: string } | null;
  /** Adds TLS material and the Authorization header (re-read per call: tokens rotate). */
  applyToHTTPSOptions(opts: https.RequestOptions): Promise<void>;
}

const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** A token file is read again after this long: projected service-account tokens rotate. */
const TOKEN_FILE_TTL_MS = 60_000;

interface StaticCluster {
  server: string;
  skipTLSVerify: boolean;
  ca?: Buffer;
  servername?: string;
}
interface StaticUser {
  token?: string;
  tokenFile?: string;
  cert?: Buffer;
  key?: Buffer;
  username?: string;
  password?: string;
}

/** A configuration fully known at load time (plus a token file, re-read as it rotates). */
class StaticKubeConfig implements KubeClientConfig {
  private token: { value: string; readAt: number } | undefined;

  constructor(
    private readonly contextName: string,
    private readonly cluster: StaticCluster,
    private readonly user: StaticUser,
    private readonly namespace: string | undefined,
  ) {}

  getCurrentCluster(): { server: string; skipTLSVerify: boolean } {
    return { server: this.cluster.server, skipTLSVerify: this.cluster.skipTLSVerify };
  }

  getCurrentContext(): string {
    return this.contextName;
  }

  getContextObject(name: string): { namespace?: string } | null {
    return name === this.contextName ? { namespace: this.namespace } : null;
  }

  async applyToHTTPSOptions(opts: https.RequestOptions): Promise<void> {
    const { cluster, user } = this;
    if (cluster.skipTLSVerify) opts.rejectUnauthorized = false;
    if (cluster.servername) opts.servername = cluster.servername;
    if (cluster.ca) opts.ca = cluster.ca;
    if (user.cert) opts.cert = user.cert;
    if (user.key) opts.key = user.key;
    if (user.username !== undefined) opts.auth = `${user.username}:${user.password ?? ''}`;
    const token = user.token ?? (user.tokenFile ? this.tokenFromFile(user.tokenFile) : undefined);
    if (token) opts.headers = { ...opts.headers, Authorization: `Bearer ${token}` };
  }

  private tokenFromFile(file: string): string {
    const now = Date.now();
    if (!this.token || now - this.token.readAt > TOKEN_FILE_TTL_MS)
      this.token = { value: fs.readFileSync(file, 'utf8').trim(), readAt: now };
    return this.token.value;
  }
}

/** The kubeconfig asks for something only client-node's KubeConfig does. */
class NeedsFullClient extends Error {}

/**
 * Reads a kubeconfig file the client can use directly; throws (naming what is missing) when
 * it has no usable current context, or uses a feature only client-node has (see the top).
 */
export function kubeConfigFromFile(file: string): KubeClientConfig {
  const doc = YAML.parse(fs.readFileSync(file, 'utf8')) as Kubeconfig | null;
  const dir = path.dirname(path.resolve(file));
  const contextName = doc?.['current-context'];
  if (!contextName) throw new Error(`${file}: no current-context`);
  const ctx = named(doc.contexts, contextName, 'context')?.context;
  if (!ctx) throw new Error(`${file}: context "${contextName}" not found`);
  const c = named(doc.clusters, ctx.cluster, 'cluster')?.cluster;
  if (!c?.server) throw new Error(`${file}: cluster "${ctx.cluster}" not found or has no server`);
  const u = (ctx.user ? named(doc.users, ctx.user, 'user')?.user : undefined) ?? {};
  const unsupported = ['exec', 'auth-provider', 'as', 'as-groups', 'as-uid', 'as-user-extra'].filter((k) => k in u);
  if (c['proxy-url']) unsupported.push('proxy-url');
  if (unsupported.length > 0) throw new NeedsFullClient(`${file}: uses ${unsupported.join(', ')}`);
  const fileOrData = (f: string | undefined, data: string | undefined): Buffer | undefined =>
    f ? fs.readFileSync(path.resolve(dir, f)) : data ? Buffer.from(data, 'base64') : undefined;
  return new StaticKubeConfig(
    contextName,
    {
      server: c.server,
      skipTLSVerify: c['insecure-skip-tls-verify'] === true,
      ca: fileOrData(c['certificate-authority'], c['certificate-authority-data']),
      servername: c['tls-server-name'],
    },
    {
      token: u.token,
      tokenFile: u.tokenFile ? path.resolve(dir, u.tokenFile) : undefined,
      cert: fileOrData(u['client-certificate'], u['client-certificate-data']),
      key: fileOrData(u['client-key'], u['client-key-data']),
      username: u.username,
      password: u.password,
    },
    ctx.namespace,
  );
}

/** The pod's own service account, as client-go's rest.InClusterConfig reads it. */
export function inClusterConfig(env: NodeJS.ProcessEnv = process.env, dir = SERVICE_ACCOUNT_DIR): KubeClientConfig {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) throw new Error('not in a cluster: KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT unset');
  const namespace = readIfExists(path.join(dir, 'namespace'))?.toString('utf8').trim();
  return new StaticKubeConfig(
    'inClusterContext',
    {
      server: `https://${net.isIPv6(host) ? `[${host}]` : host}:${port}`,
      skipTLSVerify: false,
      ca: readIfExists(path.join(dir, 'ca.crt')),
    },
    { tokenFile: path.join(dir, 'token') },
    namespace,
  );
}

/**
 * The client configuration: `file` when given, else the KUBECONFIG env var (or
 * ~/.kube/config) when there is one, else the in-cluster service account.
 */
export async function loadKubeConfig(file?: string): Promise<KubeClientConfig> {
  const home = process.env.HOME ?? '';
  const envFile = process.env.KUBECONFIG;
  const chosen = file ?? (envFile ? envFile : home !== '' && fs.existsSync(`${home}/.kube/config`) ? `${home}/.kube/config` : undefined);
  if (!chosen) {
    if (process.env.KUBERNETES_SERVICE_HOST && fs.existsSync(path.join(SERVICE_ACCOUNT_DIR, 'token'))) return inClusterConfig();
    throw new Error('No Kubernetes cluster configured (set KUBECONFIG or run in a cluster)');
  }
  // KUBECONFIG may list several files to merge: client-node does the merging.
  if (!chosen.includes(path.delimiter)) {
    try {
      return kubeConfigFromFile(chosen);
    } catch (e) {
      if (!(e instanceof NeedsFullClient)) throw e;
    }
  }
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kc = new KubeConfig();
  if (file) kc.loadFromFile(file);
  else kc.loadFromDefault();
  if (!kc.getCurrentCluster()) throw new Error(`No current cluster in ${chosen}`);
  return kc;
}

/** The namespace of the current context ("default" when unset). */
export function currentNamespace(kc: KubeClientConfig): string {
  return kc.getContextObject(kc.getCurrentContext())?.namespace || 'default';
}

/** The credentials a kubeconfig user entry holds (kubectl's field names). */
export type KubeconfigUser = NonNullable<NonNullable<Kubeconfig['users']>[number]['user']>;

/**
 * The text of a kubeconfig with one cluster (its CA inline), one user and one context, all
 * named `name`: what the local cluster writes for its admin, for pods and for the controller.
 */
export function kubeconfigYaml(o: { name: string; server: string; caData: string; user: KubeconfigUser; namespace: string }): string {
  const doc: Kubeconfig & { apiVersion: string; kind: string } = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: o.name, cluster: { server: o.server, 'certificate-authority-data': o.caData } }],
    users: [{ name: o.name, user: o.user }],
    contexts: [{ name: o.name, context: { cluster: o.name, user: o.name, namespace: o.namespace } }],
    'current-context': o.name,
  };
  return YAML.stringify(doc, { lineWidth: 0 });
}

function readIfExists(file: string): Buffer | undefined {
  try {
    return fs.readFileSync(file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

function named<T extends { name?: string }>(list: T[] | undefined, name: string, what: string): T | undefined {
  const found = (list ?? []).filter((x) => x.name === name);
  if (found.length > 1) throw new Error(`${found.length} ${what}s named "${name}"`);
  return found[0];
}

/** The fields of a kubeconfig file read here (kubectl's names). */
interface Kubeconfig {
  'current-context'?: string;
  contexts?: Array<{ name?: string; context?: { cluster: string; user?: string; namespace?: string } }>;
  clusters?: Array<{
    name?: string;
    cluster?: {
      server?: string;
      'certificate-authority'?: string;
      'certificate-authority-data'?: string;
      'insecure-skip-tls-verify'?: boolean;
      'tls-server-name'?: string;
      'proxy-url'?: string;
    };
  }>;
  users?: Array<{
    name?: string;
    user?: {
      token?: string;
      tokenFile?: string;
      'client-certificate'?: string;
      'client-certificate-data'?: string;
      'client-key'?: string;
      'client-key-data'?: string;
      username?: string;
      password?: string;
      exec?: unknown;
      'auth-provider'?: unknown;
    };
  }>;
}
