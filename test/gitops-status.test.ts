// GitOps tools see a rollout as it is, on the real local control plane: the real kstatus
// library, Flux's own wait (fluxcd/pkg/ssa WaitForSet, as kustomize-controller runs it for
// `wait: true`) and deploy/argocd/health.lua in gopher-lua (hack/kstatus), run on every version
// of the AtlantisDeployment the API server delivered to a watch during real rollouts: an
// image-only change while a long terraform apply runs (InProgress / Progressing naming the
// draining pod, Current / Healthy only after the busy pod is gone; Flux and `kubectl wait`
// return only then), a drain past its timeout with onDrainTimeout Wait, and an image that never
// starts (Failed / Degraded, Flux fails early). Each timeline is written to $GITOPS_STATUS_OUT
// (else a temp dir) for docs/gitops.md.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { apiPath } from '../src/k8s/client.js';
import { API_VERSION, PLURAL, type AtlantisDeployment, type AtlantisDeploymentSpecInput } from '../src/controller/types.js';
import { assertBuilt } from './support/cli.js';
import {
  atlantisDeployment,
  createAd,
  createVcsSecret,
  ensureCrd,
  isReady,
  listPods,
  patchAdSpec,
  startController,
  type TestController,
} from './support/controller.js';
import { terraformConfig } from './support/git-repos.js';
import {
  argoHealthOf,
  fluxWait,
  gitopsTool,
  kstatusOf,
  recordObjects,
  since,
  type Recorder,
  type Seen,
  type ToolResult,
} from './support/gitops.js';
import { freshNamespace, getCluster, waitFor, type TestCluster } from './support/k8s.js';
import { WEBHOOK_SECRET, type WorkflowEnv, createWorkflowEnv } from './support/workflow-env.js';

let cluster: TestCluster;
let env: WorkflowEnv;
let ctrl: TestController;
let ns: string;
let pullSeq = 700;
const OUT = process.env.GITOPS_STATUS_OUT ?? fs.mkdtempSync(path.join(os.tmpdir(), 'gitops-status-'));

before(async () => {
  assertBuilt();
  cluster = await getCluster();
  await ensureCrd(cluster);
  ns = await freshNamespace('gitops');
  env = await createWorkflowEnv();
  await createVcsSecret(cluster.kc, ns, env.gh.token, WEBHOOK_SECRET);
  ctrl = await startController(cluster.kc, ns);
  await gitopsTool();
  fs.mkdirSync(OUT, { recursive: true });
});
after(async () => {
  await ctrl?.stop();
  await env?.close();
});

/** An AtlantisDeployment whose first rollout `kubectl wait --for=condition=Ready` saw end. */
async function readyDeployment(name: string, spec: Partial<AtlantisDeploymentSpecInput>): Promise<V1Pod[]> {
  await createAd(
    cluster.kc,
    atlantisDeployment(ns, name, { ...spec, atlantis: { env: [{ name: 'ATLANTIS_GH_API_URL', value: env.gh.url }] } as never }),
  );
  const w = await kubectlWaitReady(name, 120);
  assert.equal(w.exitCode, 0, `kubectl wait --for=condition=Ready atd/${name}: ${w.stderr}`);
  const pods = await listPods(cluster.kc, ns, name);
  assert.equal(pods.length, spec.replicas ?? 1);
  assert.ok(pods.every(isReady), 'Ready means every pod is Ready');
  return pods;
}

async function kubectlWaitReady(name: string, timeoutS: number): Promise<{ exitCode: number; stdout: string; stderr: string; at: number }> {
  const r = await cluster.kubectl(['wait', '--for=condition=Ready', `atd/${name}`, '-n', ns, `--timeout=${timeoutS}s`], {
    timeoutMs: (timeoutS + 30) * 1000,
  });
  return { ...r, at: Date.now() };
}

/** Starts an apply that sleeps `seconds` on the pod; resolves once its /status counts it. */
async function longApply(pod: V1Pod, seconds: number): Promise<number> {
  const pull = pullSeq++;
  const url = `http://${pod.status!.podIP}:4141`;
  const opened = await env.openPull(url, pull, `gitops-${pull}`, {
    [`g${pull}/main.tf`]: terraformConfig({ marker: `g${pull}`, sleepSeconds: seconds }),
  });
  assert.equal(opened.status, 200);
  await env.waitForComment(pull, /^Ran Plan for dir/, { timeoutMs: 120_000 });
  assert.equal((await env.comment(url, pull, 'atlantis apply')).status, 200);
  await waitFor(
    'the apply to run',
    async () => {
      const r = (await fetch(`${url}/status`, { signal: AbortSignal.timeout(2000) }).then((x) => x.json())) as {
        in_progress_operations: number;
      };
      return r.in_progress_operations === 1;
    },
    { timeoutMs: 60_000 },
  );
  return pull;
}

interface Phase {
  at: number;
  obj: AtlantisDeployment;
  generation: number;
  observed: number | undefined;
  ks: ToolResult;
  argo: ToolResult;
}

/** kstatus and the Argo CD script on every version the watch delivered, in order. */
async function phasesOf(seen: Seen<AtlantisDeployment>[]): Promise<Phase[]> {
  const out: Phase[] = [];
  for (const s of seen) {
    if (s.type === 'DELETED') continue;
    out.push({
      at: s.at,
      obj: s.obj,
      generation: s.obj.metadata.generation ?? 0,
      observed: s.obj.status?.observedGeneration,
      ks: await kstatusOf(s.obj),
      argo: await argoHealthOf(s.obj),
    });
  }
  return out;
}

/** The times the watch first saw each pod deleting (or gone), by UID. */
function deletions(pods: Recorder<V1Pod>): Map<string, { at: number; name: string }> {
  const m = new Map<string, { at: number; name: string }>();
  for (const s of pods.seen) {
    const uid = s.obj.metadata?.uid ?? '';
    if ((s.type === 'DELETED' || s.obj.metadata?.deletionTimestamp) && !m.has(uid)) m.set(uid, { at: s.at, name: s.obj.metadata!.name! });
  }
  return m;
}

/** One line per change of what kstatus and Argo CD say, with the marks in between; written to OUT. */
function writeTimeline(file: string, t0: number, phases: Phase[], marks: Array<{ at: number; text: string }>): string {
  const rows: Array<{ at: number; text: string }> = [...marks];
  let last = '';
  for (const p of phases) {
    const said = `kstatus ${p.ks.status}: ${p.ks.message}\n           Argo CD ${p.argo.status}: ${p.argo.message}`;
    if (said === last) continue;
    last = said;
    rows.push({ at: p.at, text: `generation ${p.generation}, observed ${p.observed ?? '-'}\n           ${said}` });
  }
  const text = rows
    .filter((r) => r.at >= t0)
    .sort((a, b) => a.at - b.at)
    .map((r) => `[${since(t0, r.at).padStart(7)}] ${r.text}`)
    .join('\n');
  fs.writeFileSync(path.join(OUT, file), `${text}\n`);
  return text;
}

const condition = (ad: AtlantisDeployment, type: string) => ad.status?.conditions.find((c) => c.type === type);

describe('GitOps tools on a real rollout', () => {
  it('image change only, an apply in flight: InProgress / Progressing naming the draining pod, Current / Healthy only after it is gone; Flux and kubectl wait wait for it', {
    timeout: 420_000,
  }, async (t) => {
    const NAME = 'roll';
    const pods = await readyDeployment(NAME, { replicas: 2, terminationGracePeriodSeconds: 90 });
    const busy = pods.find((p) => p.metadata!.name === `${NAME}-1`)!;
    const pull = await longApply(busy, 25);
    const ads = await recordObjects<AtlantisDeployment>(cluster.kc, apiPath(API_VERSION, PLURAL, ns), {
      fieldSelector: `metadata.name=${NAME}`,
    });
    const podRec = await recordObjects<V1Pod>(cluster.kc, apiPath('v1', 'pods', ns), {
      labelSelector: `app.kubernetes.io/instance=${NAME}`,
    });
    const generation0 = ads.seen.at(-1)!.obj.metadata.generation!;

    const t0 = Date.now();
    await patchAdSpec(cluster.kc, ns, NAME, { image: 'atlantis-operator:v2' });
    // As kustomize-controller does after applying: wait for the object (and kubectl wait beside it).
    const [flux, kubectl] = await Promise.all([
      fluxWait({ kubeconfig: cluster.kubeconfigPath, namespace: ns, name: NAME, timeoutS: 240 }),
      kubectlWaitReady(NAME, 240),
    ]);
    ads.stop();
    podRec.stop();
    assert.equal(flux.result, 'Current', `flux-wait: ${flux.error}`);
    assert.equal(flux.exitCode, 0);
    assert.equal(kubectl.exitCode, 0, kubectl.stderr);
    assert.match((await env.waitForComment(pull, /^Ran Apply for dir/, { timeoutMs: 30_000 })).body, new RegExp(`applied g${pull}`));

    // Both returned only after every old pod was gone, the busy one included (its apply done).
    const gone = deletions(podRec);
    const oldGone = pods.map((p) => gone.get(p.metadata!.uid!));
    assert.ok(
      oldGone.every((g) => g !== undefined),
      'both old pods were deleted',
    );
    const lastOldGone = Math.max(...oldGone.map((g) => g!.at));
    const busyGone = gone.get(busy.metadata!.uid!)!.at;
    assert.ok(flux.startedAt < busyGone, 'flux-wait was waiting before the busy pod went');
    assert.ok(flux.endedAt > lastOldGone, `flux-wait returned ${flux.endedAt - lastOldGone} ms after the last old pod went`);
    assert.ok(kubectl.at > lastOldGone, 'kubectl wait returned after the last old pod went');

    const phases = (await phasesOf(ads.seen)).filter((p) => p.generation > generation0);
    assert.ok(phases.length > 0, 'the watch saw the change');
    assert.equal(phases[0]!.ks.status, 'InProgress', 'before the controller observes the new generation');
    assert.match(phases[0]!.ks.message, /generation is \d+, but latest observed generation is \d+/);
    assert.equal(phases[0]!.argo.status, 'Progressing');
    const draining = phases.filter(
      (p) => p.observed === p.generation && p.obj.status?.pods.some((x) => x.name === `${NAME}-1` && x.drainingSince),
    );
    assert.ok(draining.length > 0, 'a status written while the busy pod drained');
    for (const p of draining) {
      assert.equal(p.ks.status, 'InProgress', `kstatus while draining: ${p.ks.message}`);
      assert.equal(p.argo.status, 'Progressing', `Argo CD while draining: ${p.argo.message}`);
    }
    const busyDrain = `Draining ${NAME}-1: 1 operation(s) in progress`;
    assert.ok(
      draining.some((p) => p.ks.message.includes(busyDrain) && p.argo.message === `DrainInProgress: ${p.ks.message}`),
      `kstatus and Argo CD name the pod and its operation: ${draining.map((p) => p.ks.message).join(' | ')}`,
    );
    // Nothing said done before the end, and the end is done.
    const firstDone = phases.findIndex((p) => p.ks.status === 'Current');
    assert.ok(firstDone >= 0, 'kstatus reached Current');
    for (const p of phases.slice(0, firstDone)) assert.notEqual(p.argo.status, 'Healthy', `Argo CD Healthy too early: ${p.argo.message}`);
    for (const p of phases.slice(firstDone)) {
      assert.equal(p.ks.status, 'Current');
      assert.equal(p.argo.status, 'Healthy');
    }
    const done = phases[firstDone]!.obj;
    assert.equal(condition(done, 'Ready')?.status, 'True');
    assert.equal(condition(done, 'Ready')?.observedGeneration, done.metadata.generation);
    assert.ok(done.status?.pods.every((p) => p.revision === done.status?.updateRevision && p.ready && !p.drainingSince));

    const text = writeTimeline('rollout.txt', t0, phases, [
      { at: t0, text: 'kubectl patch atd roll image=atlantis-operator:v2; flux-wait and kubectl wait start' },
      ...pods.map((p) => ({ at: gone.get(p.metadata!.uid!)!.at, text: `old pod ${p.metadata!.name} deleted` })),
      { at: flux.endedAt, text: `flux-wait: ${flux.result} (exit ${flux.exitCode}) after ${flux.elapsedSeconds.toFixed(1)}s` },
      { at: kubectl.at, text: `kubectl wait --for=condition=Ready: exit ${kubectl.exitCode}: ${kubectl.stdout.trim()}` },
    ]);
    t.diagnostic(`timeline in ${path.join(OUT, 'rollout.txt')}:\n${text}`);
  });

  it('a drain past drainTimeoutSeconds with onDrainTimeout Wait: Stalled, so kstatus Failed, Argo CD Degraded and Flux fails early; Current again once the apply ends', {
    timeout: 420_000,
  }, async (t) => {
    const NAME = 'stall';
    const [pod] = await readyDeployment(NAME, {
      replicas: 1,
      terminationGracePeriodSeconds: 90,
      updateStrategy: { maxUnavailable: 1, drainTimeoutSeconds: 3, onDrainTimeout: 'Wait' },
    });
    const pull = await longApply(pod!, 40);
    const ads = await recordObjects<AtlantisDeployment>(cluster.kc, apiPath(API_VERSION, PLURAL, ns), {
      fieldSelector: `metadata.name=${NAME}`,
    });
    const podRec = await recordObjects<V1Pod>(cluster.kc, apiPath('v1', 'pods', ns), {
      labelSelector: `app.kubernetes.io/instance=${NAME}`,
    });
    const generation0 = ads.seen.at(-1)!.obj.metadata.generation!;
    const t0 = Date.now();
    await patchAdSpec(cluster.kc, ns, NAME, { image: 'atlantis-operator:v2' });
    const flux = await fluxWait({ kubeconfig: cluster.kubeconfigPath, namespace: ns, name: NAME, timeoutS: 120 });
    assert.equal(flux.exitCode, 1, 'flux-wait fails');
    assert.equal(flux.error, `failed early due to stalled resources: [AtlantisDeployment/${ns}/${NAME} status: 'Failed']`);
    // Early: the busy pod was still there when Flux gave up.
    const recovered = await kubectlWaitReady(NAME, 180);
    ads.stop();
    podRec.stop();
    assert.equal(recovered.exitCode, 0, `Ready once the apply ended: ${recovered.stderr}`);
    await env.waitForComment(pull, /^Ran Apply for dir/, { timeoutMs: 30_000 });
    const busyGone = deletions(podRec).get(pod!.metadata!.uid!);
    assert.ok(busyGone && busyGone.at > flux.endedAt, 'Flux failed while the busy pod was still draining');

    const phases = (await phasesOf(ads.seen)).filter((p) => p.generation > generation0);
    const stalled = phases.filter((p) => condition(p.obj, 'Stalled')?.status === 'True');
    assert.ok(stalled.length > 0, 'a Stalled status was written');
    // What the server reports comes with the timed-out pod (its first /status answer may come after the timeout).
    const head = `Drains past drainTimeoutSeconds 3, waiting (onDrainTimeout=Wait): ${NAME}-0: `;
    for (const p of stalled) {
      assert.equal(p.ks.status, 'Failed');
      assert.ok(p.ks.message.startsWith(head), p.ks.message);
      assert.deepEqual(p.argo, { status: 'Degraded', message: `DrainTimeout: ${p.ks.message}` });
    }
    assert.ok(
      stalled.some((p) => p.ks.message === `${head}1 operation(s) in progress`),
      `Stalled names the running operation: ${stalled.map((p) => p.ks.message).join(' | ')}`,
    );
    assert.ok(
      phases.some((p) => p.ks.status === 'InProgress' && p.ks.message.startsWith(`Draining ${NAME}-0`)),
      'InProgress before the timeout',
    );
    assert.deepEqual([phases.at(-1)!.ks.status, phases.at(-1)!.argo.status], ['Current', 'Healthy']);

    const text = writeTimeline('stalled-drain.txt', t0, phases, [
      { at: t0, text: 'kubectl patch atd stall image=atlantis-operator:v2 (drainTimeoutSeconds 3, onDrainTimeout Wait); flux-wait starts' },
      { at: flux.endedAt, text: `flux-wait: exit ${flux.exitCode} after ${flux.elapsedSeconds.toFixed(1)}s: ${flux.error}` },
      { at: busyGone.at, text: `pod ${NAME}-0 deleted (its apply ended)` },
      { at: recovered.at, text: `kubectl wait --for=condition=Ready: exit ${recovered.exitCode}` },
    ]);
    t.diagnostic(`timeline in ${path.join(OUT, 'stalled-drain.txt')}:\n${text}`);
  });

  it('an image that never starts: Stalled PodsFailing, so kstatus Failed, Argo CD Degraded and Flux fails', {
    timeout: 300_000,
  }, async (t) => {
    const NAME = 'noimage';
    await readyDeployment(NAME, { replicas: 1, terminationGracePeriodSeconds: 30 });
    const ads = await recordObjects<AtlantisDeployment>(cluster.kc, apiPath(API_VERSION, PLURAL, ns), {
      fieldSelector: `metadata.name=${NAME}`,
    });
    const generation0 = ads.seen.at(-1)!.obj.metadata.generation!;
    const t0 = Date.now();
    await patchAdSpec(cluster.kc, ns, NAME, { image: 'registry.invalid/atlantis:never' });
    const flux = await fluxWait({ kubeconfig: cluster.kubeconfigPath, namespace: ns, name: NAME, timeoutS: 120 });
    ads.stop();
    assert.equal(flux.exitCode, 1);
    assert.equal(flux.error, `failed early due to stalled resources: [AtlantisDeployment/${ns}/${NAME} status: 'Failed']`);
    const phases = (await phasesOf(ads.seen)).filter((p) => p.generation > generation0);
    const last = phases.at(-1)!;
    assert.equal(last.ks.status, 'Failed');
    assert.match(last.ks.message, new RegExp(`^Pods failing: ${NAME}-0: (ErrImagePull|ImagePullBackOff)$`));
    assert.deepEqual(last.argo, { status: 'Degraded', message: `PodsFailing: ${last.ks.message}` });
    const text = writeTimeline('image-never-starts.txt', t0, phases, [
      { at: t0, text: `kubectl patch atd ${NAME} image=registry.invalid/atlantis:never; flux-wait starts` },
      { at: flux.endedAt, text: `flux-wait: exit ${flux.exitCode} after ${flux.elapsedSeconds.toFixed(1)}s: ${flux.error}` },
    ]);
    t.diagnostic(`timeline in ${path.join(OUT, 'image-never-starts.txt')}:\n${text}`);
  });
});
