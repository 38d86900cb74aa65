// `make run`: the main job as a local demo. On a real local control plane (etcd,
// kube-apiserver, kube-controller-manager built from Go modules) with the local node
// running pods as processes, it installs the manifests, runs the controller with the
// manifests' own ServiceAccount and RBAC, starts a real redis-server, and runs the scenario of
// dev/demo/scenario.ts: an AtlantisDeployment of 2 replicas sharing that Redis (maxSurge 1), a
// 60 s `atlantis apply` in flight, the image changed, webhooks through the Service (the Service
// proxy, dev/service-proxy/) every 200 ms for the whole rollout. It prints the timeline and the
// measured figures, then a `DEMO_SUMMARY {json}` line (read by test/demo.test.ts).
// DEMO_APPLY_SECONDS sets the apply's length (60).
//
//   node --import tsx dev/demo.ts            stays up after the rollout until Ctrl-C
//   node --import tsx dev/demo.ts --exit     exits after the rollout (used by a test)
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawn, type ChildProcess } from 'node:child_process';
import { kubeRequestOk } from '../src/k8s/client.js';
import { kubeconfigYaml } from '../src/k8s/kubeconfig.js';
import { createSharedStateKeySecret, createVcsSecret } from '../test/support/controller.js';
import { waitForCrdEstablished } from '../test/support/k8s.js';
import { type RedisServer, startRedisServer } from '../test/support/redis-server.js';
import { WEBHOOK_SECRET, type WorkflowEnv, createWorkflowEnv } from '../test/support/workflow-env.js';
import { fmtMs } from './demo/figures.js';
import { runScenario, verdict } from './demo/scenario.js';
import { formatTimeline } from './demo/timeline.js';
import { startStack } from './stack.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const exitWhenDone = process.argv.includes('--exit');
const APPLY_SECONDS = Number(process.env.DEMO_APPLY_SECONDS ?? 60);
const NS = 'atlantis';
const t0 = Date.now();
const say = (msg: string) => process.stdout.write(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(6)}s] ${msg}\n`);

async function main(): Promise<number> {
  say('Starting the local control plane and the local node (the first run builds Kubernetes; see docs/local-cluster.md)');
  const stack = await startStack({ cluster: { keepDir: true }, serviceProxy: { namespace: NS } });
  const { cluster } = stack;
  const kc = (await import('../src/k8s/kubeconfig.js')).kubeConfigFromFile(cluster.kubeconfigPath);
  const children: ChildProcess[] = [];
  let env: WorkflowEnv | undefined;
  let redis: RedisServer | undefined;
  const stopAll = async () => {
    for (const c of children) c.kill('SIGTERM');
    await env?.close();
    await redis?.cleanup();
    await stack.stop();
  };
  process.on('SIGINT', () => void stopAll().then(() => process.exit(0)));
  process.on('SIGTERM', () => void stopAll().then(() => process.exit(0)));
  try {
    say(`API server ${cluster.server}; kubeconfig ${cluster.kubeconfigPath}`);
    const k = async (args: string[]) => {
      const r = await cluster.kubectl(args);
      if (r.exitCode !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}`);
      return r.stdout;
    };
    say('kubectl apply --server-side -k manifests/   (CRD, namespace, RBAC, controller Deployment)');
    await k(['apply', '--server-side', '-k', path.join(repoRoot, 'manifests')]);
    await waitForCrdEstablished(kc, 'atlantisdeployments.atlantis-operator.dev');

    // The local control plane runs no Deployment controller, so the controller runs here as
    // a process, with a token of the Deployment's own ServiceAccount: the manifests' RBAC is
    // what it gets.
    const tr = await kubeRequestOk<{ status: { token: string } }>(
      kc,
      'POST',
      '/api/v1/namespaces/atlantis-operator/serviceaccounts/atlantis-operator/token',
      { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 86400 } },
    );
    const ctrlKubeconfig = path.join(cluster.dir, 'controller.kubeconfig');
    const cl = kc.getCurrentCluster()!;
    writeFileSync(
      ctrlKubeconfig,
      kubeconfigYaml({
        name: 'local',
        server: cl.server,
        caData: readFileSync(cluster.pki.caCert).toString('base64'),
        user: { token: tr.status.token },
        namespace: 'atlantis-operator',
      }),
      { mode: 0o600 },
    );
    const ctrl = spawn(
      process.execPath,
      [
        path.join(repoRoot, 'dist/atlantis-operator.cjs'),
        'controller',
        '--kubeconfig',
        ctrlKubeconfig,
        '--leader-elect',
        '--leader-election-namespace',
        'atlantis-operator',
        '--metrics-bind-address',
        '127.0.99.1:8080',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    children.push(ctrl);
    const ctrlLog = path.join(cluster.dir, 'logs', 'controller.log');
    ctrl.stderr!.pipe((await import('node:fs')).createWriteStream(ctrlLog));
    say(`Controller started as the atlantis-operator ServiceAccount (log ${ctrlLog}, metrics http://127.0.99.1:8080/metrics)`);

    env = await createWorkflowEnv();
    say(`GitHub stand-in on ${env.gh.url}; git repository acme/infra at ${env.repo.cloneUrl}`);
    redis = await startRedisServer();
    say(`redis-server ${redis.host}:${redis.port} (the replicas' shared state; its log ${redis.logFile})`);
    await k(['create', 'namespace', NS]);
    await createVcsSecret(kc, NS, env.gh.token, WEBHOOK_SECRET);
    // The replicas sign what they keep in Redis with this key; the kubelet mounts it from the Secret.
    const { ref: sharedStateKeySecretRef } = await createSharedStateKeySecret(kc, NS);
    const r = await runScenario(
      {
        kc,
        node: stack.node!,
        proxy: stack.serviceProxy!,
        env,
        ns: NS,
        redis: { host: redis.host, port: redis.port, sharedStateKeySecretRef },
        say,
      },
      { mode: 'redis-surge', replicas: 2, applySeconds: APPLY_SECONDS },
    );
    process.stdout.write(`\nTimeline (pod watch, Service endpoints, the servers' own logs):\n`);
    for (const line of formatTimeline(r.timeline, t0)) process.stdout.write(`${line}\n`);
    process.stdout.write(
      `\n${r.deliveries} webhooks through the Service during the rollout (${r.accepted} accepted), rollout ${r.rolloutSeconds.toFixed(1)} s, at most ${r.maxPods} pods, longest command wait ${fmtMs(r.longestCommandWaitMs)}\n`,
    );
    process.stdout.write(`${verdict(r)}\n`);
    const { timeline: _timeline, ...summary } = r;
    process.stdout.write(`DEMO_SUMMARY ${JSON.stringify(summary)}\n`);
    process.stdout.write(
      `\nThe cluster stays up. Try:\n  ${cluster.kubectlPath} --kubeconfig ${cluster.kubeconfigPath} get atd,pods -n ${NS}\n  ${cluster.kubectlPath} --kubeconfig ${cluster.kubeconfigPath} describe atd atlantis -n ${NS}\nCtrl-C stops everything.\n`,
    );
    const ok = r.failed === 0 && r.lost === 0 && !r.terraformKilled;
    if (exitWhenDone) {
      await stopAll();
      return ok ? 0 : 1;
    }
    await new Promise(() => undefined);
    return 0;
  } catch (e) {
    process.stderr.write(`demo failed: ${(e as Error).message}\n`);
    await stopAll();
    return 1;
  }
}

process.exit(await main());
