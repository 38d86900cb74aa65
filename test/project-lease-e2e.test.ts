// The project lease across replicas: two server processes on one real redis-server, one PR,
// `atlantis plan -d p1` sent to replica A and, while A's terraform runs, the same to replica
// B, each marked to be handled where it lands (handleHere: as when two replicas' views of who
// owns the PR disagree). The project lock lets both through (same PR); the lease makes B wait.
// Each job's own steps record when it starts and ends (date +%s%N, around init and plan and a
// sleep), with its plan file's path, which names the replica's data dir. Real git, terraform.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { CliProcess } from './support/cli.js';
import { childList } from './support/children.js';
import { terraformConfig } from './support/git-repos.js';
import { type RedisServer, startRedisServer, replicaArgs } from './support/redis-server.js';
import { waitFor } from './support/server.js';
import { handleHere, type WorkflowEnv, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';

let env: WorkflowEnv;
let redis: RedisServer;
const procs = childList();
const dirs: string[] = [];
const eventsDir = mkdtempSync(path.join(tmpdir(), 'ato-lease-'));
const events = path.join(eventsDir, 'events');
dirs.push(eventsDir);

/** A trusted workflow whose plan records its start and end around init, plan and a 4 s sleep. */
function reposYaml(): string {
  const stamp = (what: string) => `printf '${what} %s %s\\n' "$(date +%s%N)" "$PLANFILE" >> '${events}'`;
  return `repos:
- id: /.*/
  allowed_overrides: [workflow]
workflows:
  stamped:
    plan:
      steps:
      - run: ${JSON.stringify(stamp('start'))}
      - init
      - plan
      - run: ${JSON.stringify(`sleep 4; ${stamp('end')}`)}
`;
}

before(async () => {
  env = await createWorkflowEnv();
  redis = await startRedisServer();
  writeFileSync(path.join(eventsDir, 'repos.yaml'), reposYaml());
});
after(async () => {
  procs.killAll();
  await env.close();
  await redis.cleanup();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function startReplica(host: string, id: string): Promise<{ p: CliProcess; url: string; dataDir: string }> {
  const dataDir = tempDataDir();
  dirs.push(dataDir);
  const started = await startWorkflowServer(env, dataDir, host, [
    ...replicaArgs(redis, id),
    '--repo-config',
    path.join(eventsDir, 'repos.yaml'),
    '--disable-autoplan',
  ]);
  procs.push(started.p);
  return { ...started, dataDir };
}

interface Run {
  start: bigint;
  end?: bigint;
}
/** Each job's recorded start and end (ns), by the data dir its plan file is in. */
function runs(): Map<string, Run> {
  const out = new Map<string, Run>();
  if (!existsSync(events)) return out;
  for (const line of readFileSync(events, 'utf8').trim().split('\n')) {
    const [what, ns, planFile] = line.split(' ') as [string, string, string];
    const who = planFile.split('/plans/')[0]!;
    if (what === 'start') out.set(who, { start: BigInt(ns) });
    else (out.get(who) as Run).end = BigInt(ns);
  }
  return out;
}

/** The JSON log lines of a server process with message `msg`. */
const logLines = (p: CliProcess, msg: string): Array<Record<string, unknown>> =>
  p
    .output()
    .split('\n')
    .filter((l) => l.includes(`"msg":"${msg}"`))
    .map((l) => JSON.parse(l) as Record<string, unknown>);

describe('the project lease across two replicas sharing one Redis', () => {
  it('a plan of the same PR and project sent to B while A plans waits for A: the two terraform runs never overlap', async () => {
    const a = await startReplica('127.18.80.1', 'replica-a');
    const b = await startReplica('127.18.80.2', 'replica-b');
    await env.openPull(
      a.url,
      1,
      'lease-1',
      {
        'p1/main.tf': terraformConfig({ marker: 'p1-v1' }),
        'atlantis.yaml': 'version: 3\nprojects:\n- dir: p1\n  workflow: stamped\n',
      },
      handleHere('replica-a'),
    );
    assert.equal((await env.comment(a.url, 1, 'atlantis plan -d p1', 'dev', handleHere('replica-a'))).status, 200);
    await waitFor('A to start its terraform', () => runs().size === 1, 60_000);
    const [aDir] = [...runs().keys()];
    assert.ok(aDir?.startsWith(a.dataDir), `the first run is A's (${aDir})`);
    assert.equal(runs().get(aDir!)?.end, undefined, 'A is still running when B is asked');
    assert.equal((await env.comment(b.url, 1, 'atlantis plan -d p1', 'dev', handleHere('replica-b'))).status, 200);

    await waitFor('both plans to end', () => [...runs().values()].filter((r) => r.end !== undefined).length === 2, 90_000);
    await waitFor('both plan comments', () => env.commentsOn(1).filter((c) => /^Ran Plan for dir: `p1`/.test(c.body)).length === 2, 30_000);
    const all = runs();
    assert.equal(all.size, 2, 'one run per replica');
    const ra = all.get(aDir!) as Required<Run>;
    const rb = [...all.entries()].find(([k]) => k.startsWith(b.dataDir))?.[1] as Required<Run>;
    assert.ok(rb, "B's run was recorded");
    assert.ok(ra.end <= rb.start, `B started after A ended: A ${ra.start}..${ra.end}, B ${rb.start}..${rb.end}`);
    for (const c of env.commentsOn(1).filter((x) => /^Ran Plan for dir: `p1`/.test(x.body)))
      assert.match(c.body, /Plan: 1 to add, 0 to change, 0 to destroy\./);

    // B said why it waited: in its log and in the job's log.
    const waits = logLines(b.p, 'Waiting for the project lease');
    assert.equal(waits.length, 1);
    assert.equal((waits[0]!.holder as { replicaId: string }).replicaId, 'replica-a');
    const jobLog = readFileSync(path.join(b.dataDir, 'jobs', `${waits[0]!.jobId as string}.log`), 'utf8');
    assert.match(jobLog, /^waiting for replica-a \(job [0-9a-f-]+\) to finish terraform in this project\n/);
    assert.deepEqual(logLines(a.p, 'Waiting for the project lease'), [], 'A never waited');
    assert.deepEqual(
      [
        ...logLines(a.p, 'Lost the project lease: it expired, another replica may have run terraform in the project'),
        ...logLines(b.p, 'Lost the project lease: it expired, another replica may have run terraform in the project'),
      ],
      [],
    );
  });
});
