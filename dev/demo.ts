// `make run`: the main job as a local demo. On a real local control plane (etcd,
// kube-apiserver, kube-controller-manager built from Go modules) with the local node
// running pods as processes, it installs the manifests, runs the controller with the
// manifests' own ServiceAccount and RBAC, creates an AtlantisDeployment wired to the GitHub
// stand-in and a real git repo, starts a long `atlantis apply`, upgrades the image, and
// prints a timeline of the rollout: no terraform run is killed.
//
//   node --import tsx dev/demo.ts            stays up after the rollout until Ctrl-C
//   node --import tsx dev/demo.ts --exit     exits after the rollout (used by a test)
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawn, type ChildProcess } from 'node:child_process';
import type { V1Pod } from '@kubernetes/client-node';
import { SERVER_PORT, STATUS_PATH, type StatusBody } from '../src/contract/drain-protocol.js';
import { API_VERSION, type AtlantisDeployment, PLURAL } from '../src/controller/types.js';
import { MERGE_PATCH, apiPath, kubeRequestOk } from '../src/k8s/client.js';
import { kubeconfigYaml } from '../src/k8s/kubeconfig.js';
import { sleep } from '../src/async.js';
import { GitHubStandin, issueCommentPayload, pullRequestPayload, sendWebhook } from '../test/support/github-standin.js';
import { createTestRepo, terraformConfig } from '../test/support/git-repos.js';
import { startStack } from './stack.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const exitWhenDone = process.argv.includes('--exit');
const APPLY_SECONDS = Number(process.env.DEMO_APPLY_SECONDS ?? 20);
const NS = 'atlantis';
const SECRET = 'demo-webhook-secret';
const t0 = Date.now();
const say = (msg: string) => process.stdout.write(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(6)}s] ${msg}\n`);

async function until<T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 120_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    const v = await fn().catch(() => undefined);
    if (v) return v;
    await sleep(250);
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function main(): Promise<number> {
  say('Starting the local control plane and the local node (the first run builds Kubernetes; see docs/local-cluster.md)');
  const stack = await startStack({ cluster: { keepDir: true } });
  const { cluster } = stack;
  const kc = (await import('../src/k8s/kubeconfig.js')).kubeConfigFromFile(cluster.kubeconfigPath);
  const children: ChildProcess[] = [];
  let gh: GitHubStandin | undefined;
  const stopAll = async () => {
    for (const c of children) c.kill('SIGTERM');
    await gh?.close();
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
    say('kubectl apply -k manifests/   (CRD, namespace, RBAC, controller Deployment)');
    await k(['apply', '-k', path.join(repoRoot, 'manifests')]);
    await k(['wait', '--for=condition=Established', 'crd/atlantisdeployments.atlantis-operator.dev', '--timeout=60s']);

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
        path.join(repoRoot, 'dist/atlantis-operator.mjs'),
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

    gh = await GitHubStandin.start({ botLogin: 'atlantis-bot' });
    const repo = await createTestRepo({ fullName: 'acme/infra' });
    gh.addRepo(repo.fullName, { cloneUrl: repo.cloneUrl });
    say(`GitHub stand-in on ${gh.url}; git repository acme/infra at ${repo.cloneUrl}`);

    await k(['create', 'namespace', NS]);
    await k([
      '-n',
      NS,
      'create',
      'secret',
      'generic',
      'vcs',
      `--from-literal=token=${gh.token}`,
      `--from-literal=webhook-secret=${SECRET}`,
    ]);
    const ad: AtlantisDeployment = {
      apiVersion: API_VERSION,
      kind: 'AtlantisDeployment',
      metadata: { name: 'atlantis', namespace: NS },
      spec: {
        image: 'atlantis-operator:v1',
        replicas: 2,
        terminationGracePeriodSeconds: 120,
        atlantis: {
          url: 'http://atlantis.demo.local',
          repoAllowlist: 'github.com/acme/*',
          github: {
            user: 'atlantis-bot',
            tokenSecretRef: { name: 'vcs', key: 'token' },
            webhookSecretRef: { name: 'vcs', key: 'webhook-secret' },
          },
          env: [{ name: 'ATLANTIS_GH_API_URL', value: gh.url }],
        },
        updateStrategy: { maxUnavailable: 1, drainTimeoutSeconds: 3600, onDrainTimeout: 'Wait' },
      },
    };
    await kubeRequestOk(kc, 'POST', apiPath(API_VERSION, PLURAL, NS), ad);
    say('AtlantisDeployment atlantis created (2 replicas, image atlantis-operator:v1)');
    const pods = async () =>
      (
        await kubeRequestOk<{ items: V1Pod[] }>(kc, 'GET', apiPath('v1', 'pods', NS), undefined, {
          query: { labelSelector: 'app.kubernetes.io/instance=atlantis' },
        })
      ).items;
    const ready = (p: V1Pod) =>
      (p.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True') && !p.metadata?.deletionTimestamp;
    const initial = await until('2 Ready pods', async () => {
      const ps = await pods();
      return ps.length === 2 && ps.every(ready) ? ps : undefined;
    });
    for (const p of initial) say(`${p.metadata!.name} Ready at ${p.status!.podIP} (a real server process on the local node)`);

    // A PR whose apply takes a while, sent to atlantis-1 (the first to be replaced). There is
    // no kube-proxy here, so the webhook goes to the pod IP instead of the Service.
    const busy = initial.find((p) => p.metadata!.name === 'atlantis-1')!;
    const url = `http://${busy.status!.podIP}:${SERVER_PORT}`;
    const headSha = await repo.createBranch('slow-change', {
      'network/main.tf': terraformConfig({ marker: 'vpc-v2', sleepSeconds: APPLY_SECONDS }),
    });
    gh.addPull(repo.fullName, { number: 1, headSha, headRef: 'slow-change', files: [{ filename: 'network/main.tf' }] });
    await sendWebhook(
      `${url}/events`,
      'pull_request',
      pullRequestPayload({ repo: repo.fullName, cloneUrl: repo.cloneUrl, action: 'opened', number: 1, headSha, headRef: 'slow-change' }),
      { secret: SECRET },
    );
    say('PR #1 opened (network/main.tf changed): webhook sent to atlantis-1');
    await until('the autoplan comment', async () => gh!.comments(repo.fullName, 1).find((c) => c.body.startsWith('Ran Plan')));
    say('PR #1: atlantis posted the plan; commenting "atlantis apply"');
    await sendWebhook(
      `${url}/events`,
      'issue_comment',
      issueCommentPayload({ repo: repo.fullName, cloneUrl: repo.cloneUrl, number: 1, body: 'atlantis apply' }),
      { secret: SECRET },
    );
    await until(
      'the apply to run',
      async () => ((await (await fetch(`${url}${STATUS_PATH}`)).json()) as StatusBody).in_progress_operations === 1,
    );
    say(`PR #1: terraform apply running on atlantis-1 (it takes ${APPLY_SECONDS}s)`);

    say('Upgrading: kubectl patch atd atlantis image=atlantis-operator:v2');
    await kubeRequestOk(
      kc,
      'PATCH',
      apiPath(API_VERSION, PLURAL, NS, 'atlantis'),
      { spec: { image: 'atlantis-operator:v2' } },
      { contentType: MERGE_PATCH },
    );

    const seen = new Set<string>();
    const once = (key: string, msg: string) => {
      if (!seen.has(key)) {
        seen.add(key);
        say(msg);
      }
    };
    const oldUids = new Set(initial.map((p) => p.metadata!.uid!));
    for (let i = 0; i < 2400; i++) {
      // The result comment is posted before the operation ends, so a pod seen deleted had its
      // comment in place already: looking at the comments again right before reporting a
      // deletion keeps the timeline in the order things happened.
      const checkApplied = () => {
        const applied = gh!.comments(repo.fullName, 1).find((c) => c.body.startsWith('Ran Apply'));
        if (applied)
          once(
            'applied',
            `PR #1: apply finished on the draining pod: ${applied.body.includes('applied vpc-v2') ? 'terraform output "applied vpc-v2", state written' : 'see the PR comment'}`,
          );
      };
      checkApplied();
      const ps = await pods();
      // An old pod can be deleted and gone between two looks: its absence is its deletion.
      const present = new Set(ps.map((p) => p.metadata!.uid!));
      for (const p of initial) {
        const uid = p.metadata!.uid!;
        if (!present.has(uid) && seen.has(`drain-${uid}`)) {
          checkApplied();
          once(
            `del-${uid}`,
            `${p.metadata!.name!}: drained (/status shutting_down=true, in_progress_operations=0), deleted by the controller`,
          );
        }
      }
      for (const p of ps) {
        const name = p.metadata!.name!;
        const uid = p.metadata!.uid!;
        if (oldUids.has(uid)) {
          if (p.metadata?.annotations?.['atlantis-operator.dev/drain'])
            once(
              `drain-${uid}`,
              `${name}: drain started by the controller (annotation atlantis-operator.dev/drain); it stops taking new work and goes unready`,
            );
          if (p.metadata?.deletionTimestamp) checkApplied();
          if (p.metadata?.deletionTimestamp)
            once(`del-${uid}`, `${name}: drained (/status shutting_down=true, in_progress_operations=0), deleted by the controller`);
          if (seen.has(`drain-${uid}`) && p.status?.podIP && !p.metadata?.deletionTimestamp) {
            const st = await fetch(`http://${p.status.podIP}:${SERVER_PORT}${STATUS_PATH}`, { signal: AbortSignal.timeout(1000) })
              .then((r) => r.json() as Promise<StatusBody>)
              .catch(() => undefined);
            if (st?.shutting_down && st.in_progress_operations > 0)
              once(
                `busy-${uid}`,
                `${name}: /status shutting_down=true, in_progress_operations=${st.in_progress_operations} (${st.operations.map((o) => `${o.command} ${o.repo}#${o.pull}`).join(', ')}): the controller waits`,
              );
          }
        } else if (ready(p))
          once(`new-${uid}`, `${name}: replaced, Ready at ${p.status?.podIP} with image ${p.spec?.containers[0]?.image}`);
      }
      const a = await kubeRequestOk<AtlantisDeployment>(kc, 'GET', apiPath(API_VERSION, PLURAL, NS, 'atlantis'));
      const progressing = a.status?.conditions.find((c) => c.type === 'Progressing');
      if (
        seen.has('applied') &&
        progressing?.reason === 'RolloutComplete' &&
        a.status?.updatedReplicas === 2 &&
        a.status.readyReplicas === 2 &&
        ps.every((p) => !oldUids.has(p.metadata!.uid!))
      ) {
        say(`Rollout complete: 2/2 pods at revision ${a.status.updateRevision}`);
        break;
      }
      await sleep(250);
    }
    const sigkills = stack.node!.events().filter((e) => e.namespace === NS && e.type === 'SIGKILL sent').length;
    const interrupted = gh.comments(repo.fullName, 1).some((c) => c.body.includes('Interrupted'));
    say(`No terraform run killed: ${sigkills} SIGKILL sent by the node, ${interrupted ? 'an' : 'no'} interrupted run on the PR`);
    process.stdout.write(
      `\nThe cluster stays up. Try:\n  ${cluster.kubectlPath} --kubeconfig ${cluster.kubeconfigPath} get atd,pods -n ${NS}\n  ${cluster.kubectlPath} --kubeconfig ${cluster.kubeconfigPath} describe atd atlantis -n ${NS}\nCtrl-C stops everything.\n`,
    );
    if (exitWhenDone) {
      await stopAll();
      return sigkills === 0 && !interrupted ? 0 : 1;
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
