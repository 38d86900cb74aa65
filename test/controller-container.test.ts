// A rollout with the real image: an AtlantisDeployment of 2 pods of `make image`'s image,
// which the local node runs in real containers (podman/runc), sharing a real redis-server
// (lockingDB redis, maxSurge 1), as test/controller-surge.test.ts proves for processes. A long
// apply held on one pod (its gate is a file inside that pod's container) survives the rollout
// to a new tag of the image: each new pod is Ready before its old pod's drain starts, the busy
// pod is deleted only after its apply ended (the server's own log), no SIGKILL, every old
// container exits 0. Then an image that is not in local storage: the surge pod waits in
// ErrImageNeverPull, the AtlantisDeployment is Stalled, the running pods are left alone.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { claimLoopbackAddress, releaseLoopbackAddress } from '../dev/local-node/index.js';
import { podman } from '../dev/local-node/podman.js';
import { podNameFor } from '../src/controller/resources/index.js';
import { apiPath, kubeRequestOk } from '../src/k8s/client.js';
import { IMAGE, ensureImage } from './support/container.js';
import {
  type PodRecorder,
  applyEndedAt,
  cond,
  recordPods,
  rolloutComplete,
  serverLog,
  serverStatus,
  waitForAd,
  waitForReadyPods,
} from './support/controller-asserts.js';
import { maxLive, podHistories } from './support/controller-surge.js';
import {
  atlantisDeployment,
  controllerRevision,
  createAd,
  createVcsSecret,
  ensureCrd,
  getAd,
  listPods,
  patchAdSpec,
  startController,
  type TestController,
} from './support/controller.js';
import { gatedConfig } from './support/git-repos.js';
import {
  deleteNamespace,
  freshNamespace,
  getCluster,
  getLocalNode,
  waitFor,
  type LocalNodeHandle,
  type TestCluster,
} from './support/k8s.js';
import { startRedisServer, type RedisServer } from './support/redis-server.js';
import { WEBHOOK_SECRET, type WorkflowEnv, createWorkflowEnv } from './support/workflow-env.js';

const NAME = 'ctr';
const REPLICAS = 2;
const MAX_SURGE = 1;
let gitHost = '';
/** The same image under a second tag: a new revision of the pods, as an upgrade is. */
const NEXT = `${IMAGE}-next`;
const PASSWORD = randomBytes(18).toString('hex');

let cluster: TestCluster;
let node: LocalNodeHandle;
let ctrl: TestController | undefined;
let redis: RedisServer | undefined;
let env: WorkflowEnv | undefined;
let gitDaemon: ChildProcess | undefined;
let ns = '';

const podName = (ordinal: number, rev: string) => podNameFor(NAME, ordinal, rev, 'revision');
const ordinalOf = (r: { name: string }) => Number(r.name.split('-')[1]);
const containerOf = (p: V1Pod) => (p.status?.containerStatuses?.[0]?.containerID ?? '').replace(/^podman:\/\//, '');

/**
 * The store settings: Redis with its password from a Secret. Secrets the pods need beside it
 * (e.g. a shared-state key) go into the same Secret and spec.
 */
async function redisLockingDB(r: RedisServer): Promise<Record<string, unknown>> {
  await kubeRequestOk(cluster.kc, 'POST', apiPath('v1', 'secrets', ns), {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'redis', namespace: ns },
    type: 'Opaque',
    stringData: { password: PASSWORD, sharedStateKey: randomBytes(32).toString('hex') },
  });
  return {
    type: 'redis',
    redis: {
      host: r.host,
      port: r.port,
      passwordSecretRef: { name: 'redis', key: 'password' },
      sharedStateKeySecretRef: { name: 'redis', key: 'sharedStateKey' },
    },
  };
}

before(async () => {
  await ensureImage();
  assert.equal((await podman(['tag', IMAGE, NEXT])).code, 0);
  cluster = await getCluster();
  node = await getLocalNode();
  await ensureCrd(cluster);
  ns = await freshNamespace('ctrl-ctr');
  env = await createWorkflowEnv();
  await createVcsSecret(cluster.kc, ns, env.gh.token, WEBHOOK_SECRET);
  // The PR's repository served by `git daemon` (git://): the containers cannot see the test's
  // file:// remote, and a pod has no CA for the test's own HTTPS (test/image.test.ts covers HTTPS).
  for (let i = 2; i < 255 && !gitHost; i++) if (claimLoopbackAddress(`127.0.132.${i}`)) gitHost = `127.0.132.${i}`;
  assert.ok(gitHost, 'a free address in 127.0.132.0/24');
  const base = path.dirname(path.dirname(env.repo.bareDir));
  gitDaemon = spawn('git', ['daemon', '--export-all', '--reuseaddr', `--base-path=${base}`, `--listen=${gitHost}`, '--port=9418', base], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  env.repo.cloneUrl = `git://${gitHost}:9418/${env.repo.fullName}.git`;
  env.gh.addRepo(env.repo.fullName, { cloneUrl: env.repo.cloneUrl });
  redis = await startRedisServer({ password: PASSWORD });
  ctrl = await startController(cluster.kc, ns);
});

after(async () => {
  await ctrl?.stop();
  if (ns) await deleteNamespace(ns);
  gitDaemon?.kill('SIGTERM');
  if (gitHost) releaseLoopbackAddress(gitHost);
  await redis?.cleanup();
  await env?.close();
  await podman(['untag', NEXT, NEXT]);
});

async function currentPods(rev: string): Promise<V1Pod[]> {
  return waitForReadyPods(
    cluster.kc,
    ns,
    NAME,
    [0, 1].map((i) => podName(i, rev)),
    { revision: rev, timeoutMs: 180_000 },
  );
}

interface Busy {
  pull: number;
  marker: string;
  gate: string;
  pod: V1Pod;
}

/** A PR whose apply runs until a file exists in its pod's container (/tmp/gate-N); returns that pod. */
async function busyApply(pull: number, pods: V1Pod[]): Promise<Busy> {
  const marker = `ctr${pull}`;
  const gate = `/tmp/gate-${pull}`;
  const url = `http://${pods[0]!.status!.podIP}:4141`;
  assert.equal((await env!.openPull(url, pull, `ctr-${pull}`, { [`${marker}/main.tf`]: gatedConfig(marker, gate) })).status, 200);
  await env!.waitForComment(pull, /^Ran Plan for dir/, { timeoutMs: 120_000 });
  assert.equal((await env!.comment(url, pull, 'atlantis apply')).status, 200);
  const pod = await waitFor(
    `the apply of PR #${pull} to run`,
    async () => {
      for (const p of pods) if ((await serverStatus(p.status!.podIP!))?.operations.some((o) => o.command === 'apply')) return p;
      return undefined;
    },
    { timeoutMs: 60_000, intervalMs: 200 },
  );
  return { pull, marker, gate, pod };
}

describe('a rollout of the real image in containers (Redis, maxSurge 1)', () => {
  let pods: V1Pod[] = [];
  let rev = '';

  it('the busy pod drains beside its Ready replacement and is deleted only after its apply ended; no SIGKILL', {
    timeout: 600_000,
  }, async () => {
    const ad = atlantisDeployment(ns, NAME, {
      image: IMAGE,
      replicas: REPLICAS,
      terminationGracePeriodSeconds: 120,
      updateStrategy: { maxSurge: MAX_SURGE },
      atlantis: {
        env: [{ name: 'ATLANTIS_GH_API_URL', value: env!.gh.url }],
        lockingDB: await redisLockingDB(redis!),
      },
    } as Parameters<typeof atlantisDeployment>[2]);
    await createAd(cluster.kc, ad);
    rev = await controllerRevision(cluster.kc, ad);
    pods = await currentPods(rev);
    await waitForAd(cluster.kc, ns, NAME, 'a complete rollout', rolloutComplete(REPLICAS), 180_000);
    for (const p of pods) {
      assert.match(p.status?.containerStatuses?.[0]?.containerID ?? '', /^podman:\/\//, `${p.metadata!.name} runs in a container`);
      const id = await podman(['exec', containerOf(p), 'id', '-u']);
      assert.equal(id.stdout.trim(), '1000', 'as the controller asks: UID 1000');
    }
    const busy = await busyApply(100, pods);
    const busyName = busy.pod.metadata!.name!;
    const busyUid = busy.pod.metadata!.uid!;

    const rec: PodRecorder = await recordPods(cluster.kc, ns, NAME, { replicas: () => REPLICAS });
    const old = pods;
    await patchAdSpec(cluster.kc, ns, NAME, { image: NEXT });
    rev = await controllerRevision(cluster.kc, await getAd(cluster.kc, ns, NAME));
    await waitForAd(
      cluster.kc,
      ns,
      NAME,
      `${busyName} draining with its apply, beside its Ready replacement`,
      (a) =>
        a.status?.updateRevision === rev &&
        a.status.rolloutPhase === 'Draining' &&
        new RegExp(`${busyName}: OperationsInProgress`).test(cond(a, 'Progressing')?.message ?? ''),
      240_000,
    );
    const st = await serverStatus(busy.pod.status!.podIP!);
    assert.ok(st?.shutting_down && st.in_progress_operations === 1, `${busyName} drains with its apply running: ${JSON.stringify(st)}`);
    assert.ok(
      (await listPods(cluster.kc, ns, NAME)).some((p) => p.metadata!.uid === busyUid),
      `${busyName} is not deleted while its apply runs`,
    );
    // The gate, inside the busy pod's container.
    const opened = await podman(['exec', containerOf(busy.pod), 'touch', busy.gate]);
    assert.equal(opened.code, 0, opened.stderr);

    await waitForAd(
      cluster.kc,
      ns,
      NAME,
      'the rollout to complete',
      (a) => rolloutComplete(REPLICAS)(a) && a.status!.updateRevision === rev,
      240_000,
    );
    pods = await currentPods(rev);
    await rec.stop();
    await env!.waitForComment(busy.pull, /^Ran Apply for dir/, { timeoutMs: 60_000 });

    const hist = podHistories([rec], ordinalOf);
    assert.ok(maxLive(hist.values()) <= REPLICAS + MAX_SURGE, `never more than replicas + maxSurge pods (saw ${maxLive(hist.values())})`);
    const log = ctrl!.logs;
    for (const p of old) {
      const h = hist.get(p.metadata!.uid!)!;
      const replacement = [...hist.values()].find((x) => x.ordinal === h.ordinal && x.revision === rev)!;
      assert.ok(
        replacement.readySeen !== undefined && h.drainSeen !== undefined && replacement.readySeen < h.drainSeen,
        `${replacement.name} Ready before ${h.name}'s drain`,
      );
      assert.ok(h.deletingSeen !== undefined && h.deletingSeen > h.drainSeen!, `${h.name} deleted after its drain`);
      const deletes = log.filter((l) => l.msg === 'Deleting pod' && l.fields.uid === h.uid);
      assert.ok(deletes.length >= 1 && deletes.every((d) => d.fields.reason === 'Drained'), `${h.name} deleted as Drained only`);
      const evs = node.events({ namespace: ns, pod: h.name }).filter((e) => e.uid === h.uid);
      assert.equal(evs.filter((e) => e.type === 'SIGTERM sent').length, 1, `${h.name} stopped once`);
      assert.ok(!evs.some((e) => e.type === 'SIGKILL sent'), `${h.name} got no SIGKILL`);
      assert.deepEqual(
        evs.filter((e) => e.type === 'ContainerExited').map((e) => e.exitCode),
        [0],
        `${h.name}'s container exited 0`,
      );
      assert.ok(
        serverLog(node, ns, h.name, h.uid).some((l) => l.msg === 'Drain finished' && l.exitCode === 0),
        `${h.name} drained cleanly`,
      );
    }
    // The busy pod: the node's SIGTERM after its apply ended, by the server's own clock.
    const ended = applyEndedAt(node, ns, busyName, busyUid);
    assert.ok(ended !== undefined, `${busyName} logged the end of its apply`);
    const term = node.events({ namespace: ns, pod: busyName }).find((e) => e.uid === busyUid && e.type === 'SIGTERM sent')!;
    assert.ok(Date.parse(term.time) >= ended, `${busyName}: SIGTERM at ${term.time} after its apply ended`);
    const applied = env!.commentsOn(busy.pull).filter((c) => /^Ran Apply for dir/.test(c.body));
    assert.equal(applied.length, 1, 'the apply answered once');
    assert.match(applied[0]!.body, new RegExp(`applied ${busy.marker}`));
    assert.doesNotMatch(applied[0]!.body, /Interrupt/);
  });

  it('an image that is not in local storage: ErrImageNeverPull, Stalled, the running pods left alone', { timeout: 300_000 }, async () => {
    assert.equal(pods.length, REPLICAS, 'the pods of the previous step');
    await patchAdSpec(cluster.kc, ns, NAME, { image: 'localhost/atlantis-operator:not-built' });
    const stalled = await waitForAd(
      cluster.kc,
      ns,
      NAME,
      'Stalled',
      (a) => cond(a, 'Stalled')?.status === 'True' && /ErrImageNeverPull/.test(cond(a, 'Stalled')?.message ?? ''),
      120_000,
    );
    assert.equal(cond(stalled, 'Stalled')?.reason, 'PodsFailing');
    const all = await listPods(cluster.kc, ns, NAME);
    const waiting = all.filter((p) => p.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'ErrImageNeverPull');
    assert.equal(waiting.length, 1, 'one surge pod, waiting for its image');
    for (const p of pods) {
      const now = all.find((x) => x.metadata!.uid === p.metadata!.uid);
      assert.ok(now, `${p.metadata!.name} still there`);
      assert.equal(now.metadata?.annotations?.['atlantis-operator.dev/drain'], undefined, `${p.metadata!.name} not drained`);
      assert.equal((await serverStatus(p.status!.podIP!))?.shutting_down, false);
    }
  });
});
