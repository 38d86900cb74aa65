// The start and end every controller test file shares: the built CLI checked, the shared
// cluster with the product CRD, a fresh namespace holding the VCS Secret the pods read, and the
// in-process controller stopped at the end (its log printed with DEBUG_CONTROLLER_LOGS).
import { assertBuilt } from './cli.js';
import { type TestController, createVcsSecret, ensureCrd } from './controller.js';
import { type TestCluster, freshNamespace, getCluster } from './k8s.js';
import { WEBHOOK_SECRET, type WorkflowEnv } from './workflow-env.js';

/**
 * The cluster and a fresh namespace `<prefix>-…` with the VCS Secret: the workflow env's token
 * and webhook secret when there is one (its servers then answer the env's stand-in). `built`:
 * the file starts the CLI's processes, so the build must exist (default true).
 */
export async function controllerTestNamespace(
  prefix: string,
  o: { env?: WorkflowEnv; built?: boolean } = {},
): Promise<{ cluster: TestCluster; ns: string }> {
  if (o.built !== false) assertBuilt();
  const cluster = await getCluster();
  await ensureCrd(cluster);
  const ns = await freshNamespace(prefix);
  if (o.env) await createVcsSecret(cluster.kc, ns, o.env.gh.token, WEBHOOK_SECRET);
  else await createVcsSecret(cluster.kc, ns);
  return { cluster, ns };
}

/** Stops the file's in-process controller, if it started; DEBUG_CONTROLLER_LOGS prints what it logged. */
export async function stopTestController(ctrl: TestController | undefined): Promise<void> {
  await ctrl?.stop();
  if (ctrl && process.env.DEBUG_CONTROLLER_LOGS) for (const l of ctrl.logs) console.error(l.level, l.msg, JSON.stringify(l.fields));
}
