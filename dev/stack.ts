// The local cluster plus the local node, started and stopped together: used by
// dev/up.ts (by hand), dev/with-cluster.ts (make test) and the test helpers.
import fs from 'node:fs';
import path from 'node:path';
import { createLogger, type Logger } from '../src/log.js';
import { LocalCluster, type LocalClusterOptions } from './cluster.js';
import { LocalNode, type LocalNodeOptions } from './local-node/index.js';
import { type ServiceProxy, type ServiceProxyOptions, startServiceProxy } from './service-proxy/index.js';

export interface StackOptions {
  cluster?: LocalClusterOptions;
  node?: Partial<LocalNodeOptions>;
  /** start no local node */
  noNode?: boolean;
  /** also start a Service proxy (dev/service-proxy/, a kube-proxy stand-in) for one namespace's Services */
  serviceProxy?: Pick<ServiceProxyOptions, 'namespace' | 'addresses' | 'listenPorts' | 'logLevel'>;
}

export interface Stack {
  cluster: LocalCluster;
  node: LocalNode | undefined;
  /** the local node's log (JSON lines) */
  nodeLog: string;
  /** with the serviceProxy option: the proxy, and its log (JSON lines) */
  serviceProxy: ServiceProxy | undefined;
  serviceProxyLog: string;
  startSeconds: number;
  /** stops the Service proxy, the node and the cluster; keepDir keeps the cluster dir (logs, node state) */
  stop(opts?: { keepDir?: boolean }): Promise<void>;
}

/** Env vars through which a shared stack is handed to test processes. */
export const ENV_KUBECONFIG = 'ATLANTIS_TEST_KUBECONFIG';
export const ENV_NODE_ROOT = 'ATLANTIS_TEST_NODE_ROOT';
export const ENV_NODE_NAME = 'ATLANTIS_TEST_NODE_NAME';

export async function startStack(opts: StackOptions = {}): Promise<Stack> {
  const t0 = Date.now();
  const cluster = new LocalCluster(opts.cluster);
  await cluster.start();
  const nodeRoot = path.join(cluster.dir, 'node');
  fs.mkdirSync(nodeRoot, { recursive: true });
  const nodeLog = path.join(cluster.dir, 'logs', 'local-node.log');
  let node: LocalNode | undefined;
  if (!opts.noNode) {
    const logger: Logger = opts.node?.logger ?? createLogger({ level: 'info', stream: fs.createWriteStream(nodeLog, { flags: 'a' }) });
    node = new LocalNode({ kubeconfigPath: cluster.kubeconfigPath, root: nodeRoot, logger, ...opts.node });
    try {
      await node.start();
    } catch (err) {
      await node.stop().catch(() => {});
      await cluster.stop();
      throw err;
    }
  }
  const serviceProxyLog = path.join(cluster.dir, 'logs', 'service-proxy.log');
  let serviceProxy: ServiceProxy | undefined;
  if (opts.serviceProxy) {
    try {
      serviceProxy = await startServiceProxy({ kubeconfigPath: cluster.kubeconfigPath, logPath: serviceProxyLog, ...opts.serviceProxy });
    } catch (err) {
      await node?.stop().catch(() => {});
      await cluster.stop();
      throw err;
    }
  }
  let stopping: Promise<void> | undefined;
  return {
    cluster,
    node,
    nodeLog,
    serviceProxy,
    serviceProxyLog,
    startSeconds: (Date.now() - t0) / 1000,
    stop(opts = {}) {
      stopping ??= (async () => {
        await serviceProxy?.stop().catch(() => {});
        await node?.stop().catch(() => {});
        await cluster.stop(opts);
      })();
      return stopping;
    },
  };
}
