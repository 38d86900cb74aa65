// The zero-downtime rollout scenario, shared by the demo (dev/demo.ts, Redis with surge) and
// the bench (bench/rollout-modes.ts, three modes): an AtlantisDeployment is created, a PR's
// long apply starts, webhooks go through the Service every `intervalMs`, the image changes,
// and once the rollout is complete and every accepted command had time to answer, the
// figures are taken from what the processes recorded themselves.
import type { ServiceProxy } from '../service-proxy/index.js';
import type { KubeClientConfig } from '../../src/k8s/kubeconfig.js';
import { sleep } from '../../src/async.js';
import { atlantisDeployment, controllerRevision, createAd, getAd, isReady, listPods, patchAdSpec } from '../../test/support/controller.js';
import { rolloutComplete, serverLog, serverStatus, waitForAd } from '../../test/support/controller-asserts.js';
import { terraformConfig } from '../../test/support/git-repos.js';
import type { LocalNodeHandle } from '../../test/support/k8s.js';
import type { WorkflowEnv } from '../../test/support/workflow-env.js';
import { commentPayload, openedPayload, postWebhook, preparePull, quickConfig, startDeliveryLoop, type Target } from './deliveries.js';
import { deliveryFigures, type DeliveryFigures, type DeliveryRecord, fmtMs, isApplyArgs, killReasons } from './figures.js';
import { type TimelineEntry, watchPods } from './timeline.js';

export type Mode = 'embedded' | 'embedded-queue' | 'redis-surge';

export interface ScenarioContext {
  kc: KubeClientConfig;
  node: Pick<LocalNodeHandle, 'events' | 'logPath'>;
  /** the Service proxy of `ns` */
  proxy: ServiceProxy;
  env: WorkflowEnv;
  ns: string;
  /** needed for redis-surge: where Redis is, and the Secret key holding the replicas' shared state key */
  redis?: { host: string; port: number; sharedStateKeySecretRef: { name: string; key: string } };
  /** progress lines */
  say?: (msg: string) => void;
}

export interface ScenarioOptions {
  mode: Mode;
  replicas: number;
  applySeconds: number;
  /** between two deliveries (200) */
  intervalMs?: number;
  name?: string;
}

export interface ScenarioResult extends DeliveryFigures {
  mode: Mode;
  replicas: number;
  applySeconds: number;
  /** from the image change to the rollout complete */
  rolloutSeconds: number;
  /** the busy pod and its apply's start and end, by its own log */
  busyPod: string;
  applyStart?: number;
  applyEnd?: number;
  /** at the image change (ms since the epoch) */
  patchedAt: number;
  completedAt: number;
  maxPods: number;
  terraformKilled: boolean;
  killReasons: string[];
  timeline: TimelineEntry[];
}

const BUSY_PULL = 1;
const UNLOCK_PULLS = [2, 3, 4];

async function waitUntil<T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs: number, everyMs = 250): Promise<T> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    const v = await fn().catch(() => undefined);
    if (v) return v;
    await sleep(everyMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

export async function runScenario(ctx: ScenarioContext, o: ScenarioOptions): Promise<ScenarioResult> {
  const { kc, ns, env, proxy } = ctx;
  const say = ctx.say ?? (() => undefined);
  const name = o.name ?? 'atlantis';
  const intervalMs = o.intervalMs ?? 200;
  const redis = o.mode === 'redis-surge';
  if (redis && !ctx.redis) throw new Error('redis-surge needs a Redis');
  const ad = atlantisDeployment(ns, name, {
    replicas: o.replicas,
    terminationGracePeriodSeconds: 120,
    updateStrategy: { maxUnavailable: 1, drainTimeoutSeconds: 3600, onDrainTimeout: 'Wait' },
    atlantis: {
      env: [
        { name: 'ATLANTIS_GH_API_URL', value: env.gh.url },
        // debug: each terraform process's start and exit is a line of the server's log
        { name: 'ATLANTIS_LOG_LEVEL', value: 'debug' },
        ...(o.mode === 'embedded-queue' ? [{ name: 'ATLANTIS_QUEUE_DURING_DRAIN', value: 'true' }] : []),
      ],
      ...(redis
        ? {
            lockingDB: {
              type: 'redis',
              redis: { host: ctx.redis!.host, port: ctx.redis!.port, sharedStateKeySecretRef: ctx.redis!.sharedStateKeySecretRef },
            },
          }
        : {}),
    },
  });
  await createAd(kc, ad);
  const store = redis ? `lockingDB redis at ${ctx.redis!.host}:${ctx.redis!.port}, maxSurge 1` : 'embedded store, maxSurge 0';
  const queueing = o.mode === 'embedded-queue' ? ', --queue-during-drain' : '';
  say(`AtlantisDeployment ${name} created: ${o.replicas} replica(s), image atlantis-operator:v1, ${store}${queueing}`);
  const pods = await waitUntil(
    `${o.replicas} Ready pods in the Service`,
    async () => {
      const ps = (await listPods(kc, ns, name)).filter(isReady);
      return ps.length === o.replicas && proxy.endpoints(name).length === o.replicas && proxy.addressOf(name, 'http') ? ps : undefined;
    },
    180_000,
  );
  const target: Target = proxy.addressOf(name, 'http')!;
  say(`${pods.map((p) => `${p.metadata!.name} Ready at ${p.status!.podIP}`).join(', ')}; Service ${name} at ${target.host}:${target.port}`);

  // The long apply, and the PRs the deliveries comment on, all through the Service.
  const busySha = await preparePull(env, BUSY_PULL, 'slow-change', {
    'network/main.tf': terraformConfig({ marker: 'vpc-v2', sleepSeconds: o.applySeconds }),
  });
  await postOk(target, 'pull_request', openedPayload(env, BUSY_PULL, 'slow-change', busySha));
  for (const pull of UNLOCK_PULLS) {
    const sha = await preparePull(env, pull, `change-${pull}`, { [`app${pull}/main.tf`]: quickConfig(`app${pull}`) });
    await postOk(target, 'pull_request', openedPayload(env, pull, `change-${pull}`, sha));
  }
  for (const pull of [BUSY_PULL, ...UNLOCK_PULLS]) await env.waitForComment(pull, /^Ran Plan for/, { timeoutMs: 180_000 });
  say(`PR #${BUSY_PULL} and PRs ${UNLOCK_PULLS.map((p) => `#${p}`).join(', ')} planned; commenting "atlantis apply" on PR #${BUSY_PULL}`);
  await postOk(target, 'issue_comment', commentPayload(env, BUSY_PULL, 'atlantis apply'));
  const busy = await waitUntil(
    'the apply to run',
    async () => {
      for (const p of pods) if ((await serverStatus(p.status!.podIP!))?.operations.some((op) => op.command === 'apply')) return p;
      return undefined;
    },
    60_000,
    100,
  );
  const busyName = busy.metadata!.name!;
  say(`PR #${BUSY_PULL}: terraform apply running on ${busyName} (it takes ${o.applySeconds} s)`);

  const watch = watchPods(kc, ns, name);
  const deliveries = startDeliveryLoop(env, target, {
    intervalMs,
    unlockPulls: UNLOCK_PULLS,
    autoplanEvery: 25,
    firstNewPull: 100,
    maxMs: (o.applySeconds + 600) * 1000,
  });
  say(`Webhooks through the Service every ${intervalMs} ms ("atlantis unlock" on PRs #2-#4; every 25th a new PR with a plan)`);
  await sleep(1_000);
  const patchedAt = Date.now();
  await patchAdSpec(kc, ns, name, { image: 'atlantis-operator:v2' });
  // The controller's revision: the template and the content of the Secrets the pods read.
  const rev = await controllerRevision(kc, await getAd(kc, ns, name));
  say(`Upgrading: image atlantis-operator:v2 (revision ${rev})`);
  let records: DeliveryRecord[] = [];
  let completedAt = 0;
  try {
    await waitForAd(
      kc,
      ns,
      name,
      'the rollout to complete',
      (a) => rolloutComplete(o.replicas)(a) && a.status!.updateRevision === rev,
      (o.applySeconds + 300) * 1000,
    );
    completedAt = Date.now();
    // Still sending while the last endpoint change settles: the Service must hold after the rollout too.
    await sleep(2_000);
  } finally {
    records = await deliveries.stop();
    watch.stop();
  }
  say(`Rollout complete after ${((completedAt - patchedAt) / 1000).toFixed(1)} s; waiting for every accepted command's answer`);

  const comments = () =>
    [BUSY_PULL, ...UNLOCK_PULLS, ...records.map((d) => d.pull)]
      .filter((p, i, all) => all.indexOf(p) === i)
      .flatMap((pull) => env.commentsOn(pull).map((c) => ({ pull, body: c.body, at: Date.parse(c.createdAt) })));
  // Bounded: a queued command runs when its server starts; a quick plan takes seconds.
  const answeredBy = Date.now() + 120_000;
  while (Date.now() < answeredBy && deliveryFigures(records, comments()).lost > 0) await sleep(500);
  const applyComment = await env
    .waitForComment(BUSY_PULL, /^Ran Apply for/, { timeoutMs: 60_000 })
    .then((c) => c.body)
    .catch(() => undefined);

  // Every server pod of the namespace (old and new), by the node's records, and its own log.
  const podsSeen = new Map<string, string>();
  for (const e of ctx.node.events({ namespace: ns })) if (e.pod && e.uid) podsSeen.set(e.uid, e.pod);
  const logs = [...podsSeen].map(([uid, pod]) => ({ pod, uid, lines: serverLog(ctx.node as LocalNodeHandle, ns, pod, uid) }));
  const sigkills = ctx.node.events({ namespace: ns }).filter((e) => e.type === 'SIGKILL sent').length;
  const reasons = killReasons({ sigkills, serverLogs: logs, applyComment });
  // The watch lists the pods already there when it starts: the rollout's timeline begins at the image change.
  const timeline: TimelineEntry[] = watch.entries.filter((e) => e.at >= patchedAt);
  const busyLog = logs.filter((l) => l.uid === busy.metadata!.uid).flatMap((l) => l.lines);
  const applyStart = busyLog.find((l) => l.msg === 'Process started' && isApplyArgs(l.args));
  // A job runs several processes (init, then apply): its apply's end is the line of the same pid.
  const applyEnd =
    applyStart && busyLog.find((l) => l.msg === 'Process finished' && l.jobId === applyStart.jobId && l.pid === applyStart.pid);
  if (applyStart)
    timeline.push({ at: applyStart.at, what: `${busyName}: terraform apply started (pid ${String(applyStart.pid)}), by its log` });
  if (applyEnd)
    timeline.push({
      at: applyEnd.at,
      what: `${busyName}: terraform apply exited ${String(applyEnd.exitCode)}${applyEnd.signal ? ` by ${String(applyEnd.signal)}` : ''} after ${fmtMs(Number(applyEnd.durationMs))}, by its log`,
    });
  for (const l of logs) {
    const drained = l.lines.find((x) => x.msg === 'Drain finished');
    if (drained) timeline.push({ at: drained.at, what: `${l.pod}: server exited ${String(drained.exitCode)} after its drain, by its log` });
  }
  for (const c of proxy.changes().filter((x) => x.service === name && x.time >= patchedAt))
    timeline.push({
      at: c.time,
      what: `Service ${name} endpoints: ${c.endpoints.map((e) => e.podName).join(', ') || '(none)'}`,
    });
  timeline.push({ at: patchedAt, what: 'image changed to atlantis-operator:v2' });
  timeline.push({ at: completedAt, what: `rollout complete: ${o.replicas}/${o.replicas} pods at revision ${rev}` });
  const figures = deliveryFigures(records, comments());
  if (figures.failedFrom !== undefined)
    timeline.push(
      { at: figures.failedFrom, what: `first failed delivery (${figures.failed} failed in all)` },
      {
        at: figures.failedUntil!,
        what: 'last failed delivery',
      },
    );
  return {
    ...figures,
    mode: o.mode,
    replicas: o.replicas,
    applySeconds: o.applySeconds,
    rolloutSeconds: (completedAt - patchedAt) / 1000,
    busyPod: busyName,
    applyStart: applyStart?.at,
    applyEnd: applyEnd?.at,
    patchedAt,
    completedAt,
    maxPods: watch.maxLive(),
    terraformKilled: reasons.length > 0,
    killReasons: reasons,
    timeline,
  };
}

async function postOk(t: Target, event: string, payload: unknown): Promise<void> {
  const r = await postWebhook(t, event, payload);
  if (r.status < 200 || r.status >= 300) throw new Error(`${event} webhook answered ${r.status}: ${r.body}`);
}

/** The final line: "0 failed deliveries, 0 lost commands, longest answer 180 ms, no terraform run killed". */
export function verdict(r: ScenarioResult): string {
  const killed = r.terraformKilled ? `terraform run killed (${r.killReasons.join('; ')})` : 'no terraform run killed';
  return `${r.failed} failed deliveries, ${r.lost} lost commands, longest answer ${fmtMs(r.longestAnswerMs)}, ${killed}`;
}
