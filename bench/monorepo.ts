// The large-PR bench (issue 36): a monorepo of 200 projects in atlantis.yaml, each using a
// provider installed from a network mirror on loopback (monorepo-repo.ts); a pull request
// changes a shared module used by n of them (10, 50, 100, 150); `atlantis plan`, then
// `atlantis apply`. The same run against a real Atlantis v0.47 and against our server, one
// after the other for each n (the order alternating), each server fresh (new data dir, cold
// plugin cache) in a pod-like cgroup (pod-cgroup.ts) with a memory limit of 2 GiB, at the same
// --parallel-pool-size. Figures: webhook to the last plan comment and to the last apply
// comment, peak RSS of the server (ours: with its process host worker) and of its whole tree,
// CPU seconds of the tree, terraform commands run, provider bytes downloaded per init,
// OOM kills. Goals (issue 36) as ratios of the two servers in the same run. Beside them, the
// floor: the same inits and plans run directly at the same pool size (monorepo-direct.ts).
//
//   ATLANTIS_REFERENCE_BIN=/path/to/atlantis make bench BENCH=monorepo
//   env: BENCH_MONOREPO_SIZES=10,50,100,150  BENCH_MONOREPO_POOL=4  BENCH_MONOREPO_MEMORY_MIB=2048
//        BENCH_MONOREPO_FLAGS='--use-tf-plugin-cache=false' (more flags for both servers)
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sleep } from '../src/async.js';
import { createTestRepo } from '../test/support/git-repos.js';
import { GitHubStandin, issueCommentPayload, pullRequestPayload, sendWebhook } from '../test/support/github-standin.js';
import { fixtureProviderVersion, startProviderMirror } from '../test/support/provider-mirror.js';
import {
  type BenchServer,
  type ServerKind,
  SCENARIO_BOT,
  atlantisBinary,
  atlantisVersion,
  makeBenchWorld,
  startBenchServer,
} from './bench-servers.js';
import { type DirectRow, directPlans } from './monorepo-direct.js';
import { SHARED_SIZES, monorepoFiles, sharedModuleChange } from './monorepo-repo.js';
import { onlyLoopback, runInLoopbackNamespace } from './netns.js';
import { PodCgroup } from './pod-cgroup.js';
import { benchTempDir, printTable } from './support.js';

const SECRET = 'monorepo-bench-webhook-secret';
const REPO = 'acme/mono';

export interface MonorepoRow {
  server: ServerKind;
  projects: number;
  startupMs: number;
  planMs: number;
  applyMs: number;
  planComments: number;
  applyComments: number;
  /** Each plan comment part's first and last line: how the result was split. */
  planParts: string[];
  /** Peak RSS (MiB) of the server (+ worker) and of the whole tree, over plan and apply. */
  serverMiB: number;
  treeMiB: number;
  hwmMiB: number;
  cpuPlanS: number;
  cpuApplyS: number;
  /** CPU seconds of the server process and of our process host worker over the whole run. */
  serverCpuS: number;
  workerCpuS: number;
  inits: number;
  terraformCommands: number;
  archives: number;
  mirrorBytes: number;
  oomKills: number;
  error?: string;
}

interface Settings {
  sizes: number[];
  pool: number;
  memoryMiB: number;
  flags: string[];
}

function settings(): Settings {
  const sizes = (process.env.BENCH_MONOREPO_SIZES ?? SHARED_SIZES.join(',')).split(',').map(Number);
  return {
    sizes,
    pool: Number(process.env.BENCH_MONOREPO_POOL ?? 4),
    memoryMiB: Number(process.env.BENCH_MONOREPO_MEMORY_MIB ?? 2048),
    flags: (process.env.BENCH_MONOREPO_FLAGS ?? '').split(/\s+/).filter(Boolean),
  };
}

/** Waits for the combined status `context` on `sha` to leave pending (set after index `from`), then for 1.5 s without a new comment. */
async function settled(
  gh: GitHubStandin,
  sha: string,
  context: string,
  from: number,
  pull: number,
  timeoutMs = 1_800_000,
): Promise<string> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    const last = gh.statuses
      .slice(from)
      .filter((s) => s.sha === sha && s.context === context)
      .at(-1);
    if (last && last.state !== 'pending') {
      let n = gh.comments(REPO, pull).length;
      for (;;) {
        await sleep(1500);
        const now = gh.comments(REPO, pull).length;
        if (now === n) return last.state;
        n = now;
      }
    }
    await sleep(50);
  }
  throw new Error(`${context} did not settle within ${timeoutMs / 1000} s`);
}

/** Time from t0 to the last comment the bot posted on `pull` since, and how many it posted. */
function lastComment(gh: GitHubStandin, pull: number, t0: number): { ms: number; count: number; bodies: string[] } {
  const cs = gh.comments(REPO, pull).filter((c) => c.user === SCENARIO_BOT && Date.parse(c.createdAt) >= t0);
  return { ms: Math.max(...cs.map((c) => Date.parse(c.createdAt))) - t0, count: cs.length, bodies: cs.map((c) => c.body) };
}

interface RunCtx {
  gh: GitHubStandin;
  world: ReturnType<typeof makeBenchWorld>;
  mirror: Awaited<ReturnType<typeof startProviderMirror>>;
  heads: Map<number, { branch: string; sha: string; files: string[] }>;
  bin?: string;
  s: Settings;
  nextPull: number;
}

async function runOne(c: RunCtx, kind: ServerKind, n: number): Promise<MonorepoRow> {
  const name = `${kind}-${n}`;
  const work = benchTempDir(`bench-mono-${name}-`);
  // The mirror's certificate is in the world's CA bundle already (SSL_CERT_FILE).
  c.world.tfEnv = { TF_CLI_CONFIG_FILE: c.mirror.writeCliConfig(path.join(work, 'cli.tfrc'), { tag: name }) };
  const since = c.mirror.requests.length;
  const server: BenchServer = await startBenchServer(c.world, {
    kind,
    bin: c.bin,
    host: '127.0.0.2',
    port: kind === 'atlantis' ? 4141 : 4242,
    flags: ['--parallel-pool-size', String(c.s.pool), '--disable-autoplan', ...c.s.flags],
    memoryBytes: c.s.memoryMiB * 1024 * 1024,
    name,
  });
  const row: MonorepoRow = {
    server: kind,
    projects: n,
    startupMs: server.startupMs,
    planMs: NaN,
    applyMs: NaN,
    planComments: 0,
    applyComments: 0,
    planParts: [],
    serverMiB: NaN,
    treeMiB: NaN,
    hwmMiB: NaN,
    cpuPlanS: NaN,
    cpuApplyS: NaN,
    serverCpuS: NaN,
    workerCpuS: NaN,
    inits: 0,
    terraformCommands: 0,
    archives: 0,
    mirrorBytes: 0,
    oomKills: 0,
  };
  const pull = c.nextPull++;
  const head = c.heads.get(n)!;
  try {
    c.gh.addPull(REPO, { number: pull, headSha: head.sha, headRef: head.branch, files: head.files.map((filename) => ({ filename })) });
    const opened = pullRequestPayload({
      repo: REPO,
      cloneUrl: c.gh.gitUrl(REPO),
      action: 'opened',
      number: pull,
      headSha: head.sha,
      headRef: head.branch,
    });
    await sendWebhook(`${server.url}/events`, 'pull_request', opened, { secret: SECRET });
    await sleep(500);
    const comment = async (body: string): Promise<void> => {
      const r = await sendWebhook(
        `${server.url}/events`,
        'issue_comment',
        issueCommentPayload({ repo: REPO, cloneUrl: c.gh.gitUrl(REPO), number: pull, body }),
        {
          secret: SECRET,
        },
      );
      if (r.status >= 300) throw new Error(`${body}: the server answered ${r.status} ${r.body.slice(0, 200)}`);
    };
    const phase = async (cmd: 'plan' | 'apply'): Promise<{ ms: number; count: number; cpu: number; state: string; bodies: string[] }> => {
      const from = c.gh.statuses.length;
      const cpu0 = server.cgroup.cpuSeconds();
      const t0 = Date.now();
      await comment(`atlantis ${cmd}`);
      const state = await settled(c.gh, head.sha, `atlantis/${cmd}`, from, pull);
      const last = lastComment(c.gh, pull, t0);
      return { ...last, cpu: server.cgroup.cpuSeconds() - cpu0, state };
    };
    const plan = await phase('plan');
    row.planMs = plan.ms;
    row.planComments = plan.count;
    row.planParts = plan.bodies.map(partShape);
    row.cpuPlanS = plan.cpu;
    const planned = new RegExp(`Ran Plan for ${n} projects`).test(plan.bodies[0] ?? '');
    if (plan.state !== 'success' || !planned)
      row.error = `plan ${plan.state}${planned ? '' : ` (first comment: ${(plan.bodies[0] ?? '').slice(0, 300)})`}`;
    const apply = await phase('apply');
    row.applyMs = apply.ms;
    row.applyComments = apply.count;
    row.cpuApplyS = apply.cpu;
    if (apply.state !== 'success' && !row.error) row.error = `apply ${apply.state}: ${(apply.bodies[0] ?? '').slice(0, 300)}`;
  } catch (e) {
    row.error = (e as Error).message;
  } finally {
    const cmds = server.tfCommands();
    const stop = await server.stop();
    row.serverMiB = stop.peaks.serverMiB;
    row.treeMiB = stop.peaks.treeMiB;
    row.hwmMiB = stop.hwmMiB;
    row.oomKills = stop.oomKills;
    row.serverCpuS = stop.serverCpuS;
    row.workerCpuS = stop.workerCpuS;
    row.terraformCommands = cmds.length;
    row.inits = cmds.filter((l) => / init( |$)/.test(l)).length;
    const counts = c.mirror.counts(since, name);
    row.archives = counts.archives;
    row.mirrorBytes = counts.bytes;
    if (row.error) console.log(`${name}: ${row.error}\n  log: ${server.logFile} (BENCH_KEEP_TMP=1 keeps it after the bench)`);
  }
  return row;
}

/** A part's first and last non-empty line. */
function partShape(body: string): string {
  const lines = body.split('\n').filter((l) => l.trim() !== '');
  return `${lines[0] ?? ''} … ${lines.at(-1) ?? ''}`;
}

const mib = (x: number): string => (Number.isFinite(x) ? x.toFixed(0) : '-');
const sec = (ms: number): string => (Number.isFinite(ms) ? (ms / 1000).toFixed(1) : '-');

function show(rows: MonorepoRow[]): void {
  printTable(
    'monorepo: webhook to the last plan and apply comment, peak RSS, CPU, provider downloads',
    rows.map((r) => ({
      server: r.server,
      projects: r.projects,
      'plan s': sec(r.planMs),
      'apply s': sec(r.applyMs),
      comments: `${r.planComments}/${r.applyComments}`,
      'server MiB': mib(r.serverMiB),
      'tree MiB': mib(r.treeMiB),
      'CPU s plan/apply': `${r.cpuPlanS.toFixed(1)}/${r.cpuApplyS.toFixed(1)}`,
      'server CPU s': r.workerCpuS ? `${r.serverCpuS.toFixed(1)}+${r.workerCpuS.toFixed(1)}` : r.serverCpuS.toFixed(1),
      'tf cmds': r.terraformCommands,
      inits: r.inits,
      downloads: r.archives,
      'KiB/init': r.inits ? (r.mirrorBytes / 1024 / r.inits).toFixed(0) : '-',
      oom: r.oomKills,
      ok: r.error ? 'ERROR' : 'ok',
    })),
  );
}

/** The floor beside the servers: terraform alone, and each server's time to all plans as a multiple of it. */
function showDirect(rows: MonorepoRow[], direct: DirectRow[]): void {
  printTable(
    "monorepo: the changed projects' init + plan run directly at the same pool size, no server: the floor",
    direct.map((d) => {
      const of = (k: ServerKind) => rows.find((r) => r.server === k && r.projects === d.projects && !r.error);
      const a = of('atlantis');
      const o = of('ours');
      return {
        projects: d.projects,
        'terraform alone s': sec(d.planMs),
        'CPU s': d.cpuS.toFixed(1),
        'ours / alone': o ? `${(o.planMs / d.planMs).toFixed(2)}×` : '-',
        'Atlantis / alone': a ? `${(a.planMs / d.planMs).toFixed(2)}×` : '-',
      };
    }),
  );
}

interface Goal {
  name: string;
  value: string;
  ok: boolean;
}

function goals(rows: MonorepoRow[]): Goal[] {
  const out: Goal[] = [];
  const get = (k: ServerKind, n: number) => rows.find((r) => r.server === k && r.projects === n && !r.error);
  for (const r of rows.filter((x) => x.server === 'ours'))
    out.push({
      name: `no error, no OOM kill (${r.projects} projects)`,
      value: r.error ?? `${r.oomKills} OOM kills`,
      ok: !r.error && r.oomKills === 0,
    });
  for (const r of rows.filter((x) => x.server === 'ours' && !x.error))
    out.push({
      name: `no provider downloaded twice (${r.projects} projects)`,
      value: `${r.archives} downloads of 1 provider`,
      ok: r.archives <= 1,
    });
  for (const n of [50, 150]) {
    const [a, o] = [get('atlantis', n), get('ours', n)];
    if (a && o)
      out.push({
        name: `time to all plans ≤ 0.7× Atlantis (${n})`,
        value: `${(o.planMs / a.planMs).toFixed(2)}×`,
        ok: o.planMs <= 0.7 * a.planMs,
      });
  }
  for (const o of rows.filter((x) => x.server === 'ours' && !x.error)) {
    const a = get('atlantis', o.projects);
    if (!a) continue;
    const same = JSON.stringify(a.planParts) === JSON.stringify(o.planParts);
    out.push({
      name: `plan comment split as Atlantis's: parts, each part's first and last line (${o.projects})`,
      value: same ? `${o.planParts.length} parts alike` : `Atlantis ${JSON.stringify(a.planParts)}, ours ${JSON.stringify(o.planParts)}`,
      ok: same,
    });
  }
  const [a50, o50] = [get('atlantis', 50), get('ours', 50)];
  if (a50 && o50)
    out.push({
      name: 'peak RSS of server and worker ≤ 1.5× Atlantis (50)',
      value: `${(o50.serverMiB / a50.serverMiB).toFixed(2)}×`,
      ok: o50.serverMiB <= 1.5 * a50.serverMiB,
    });
  return out;
}

/** The bench, in this process (the namespace). Writes rows and goals to `out`. */
async function inner(out: string): Promise<void> {
  const s = settings();
  const { bin, skipped } = atlantisBinary();
  if (skipped) console.log(skipped);
  else console.log(`reference: ${atlantisVersion(bin!)}`);
  const cg = PodCgroup.available();
  if (cg) throw new Error(`the monorepo bench needs cgroups for its servers: ${cg}`);
  const gh = await GitHubStandin.start({ botLogin: SCENARIO_BOT, tls: true, host: '127.0.0.1' });
  const mirror = await startProviderMirror({ host: '127.0.0.3' });
  const version = fixtureProviderVersion();
  const rel = mirror.releases.get(version)!;
  const repo = await createTestRepo({
    root: benchTempDir('bench-repo-'),
    fullName: REPO,
    files: monorepoFiles({ version, h1: rel.h1, zh: rel.zh }),
  });
  gh.addRepo(REPO, { cloneUrl: gh.gitUrl(REPO), bareDir: repo.bareDir });
  const heads = new Map<number, { branch: string; sha: string; files: string[] }>();
  for (const n of s.sizes) {
    const branch = `shared-${n}`;
    const sha = await repo.createBranch(branch, sharedModuleChange(n));
    heads.set(n, { branch, sha, files: await repo.changedFiles(branch) });
  }
  const world = makeBenchWorld(gh, { webhookSecret: SECRET, extraCaFiles: [mirror.caFile] });
  const c: RunCtx = { gh, world, mirror, heads, bin, s, nextPull: 1 };
  console.log(
    `pool ${s.pool}, memory limit ${s.memoryMiB} MiB, sizes ${s.sizes.join(', ')}${s.flags.length ? `, flags ${s.flags.join(' ')}` : ''}`,
  );
  const rows: MonorepoRow[] = [];
  const direct: DirectRow[] = [];
  for (const [i, n] of s.sizes.entries()) {
    const order: ServerKind[] = bin ? (i % 2 === 0 ? ['atlantis', 'ours'] : ['ours', 'atlantis']) : ['ours'];
    for (const kind of order) {
      const row = await runOne(c, kind, n);
      rows.push(row);
      console.log(
        `${kind} ${n}: plan ${sec(row.planMs)} s, apply ${sec(row.applyMs)} s, server ${mib(row.serverMiB)} MiB, tree ${mib(row.treeMiB)} MiB`,
      );
    }
    const d = await directPlans({
      world,
      cliConfig: (file, pluginCacheDir) => mirror.writeCliConfig(file, { pluginCacheDir, tag: `direct-${n}` }),
      cloneUrl: repo.cloneUrl,
      branch: heads.get(n)!.branch,
      projects: n,
      pool: s.pool,
    });
    direct.push(d);
    console.log(`terraform alone ${n}: init + plan ${sec(d.planMs)} s, CPU ${d.cpuS.toFixed(1)} s`);
  }
  show(rows);
  showDirect(rows, direct);
  const g = goals(rows);
  printTable(
    'monorepo goals (issue 36)',
    g.map((x) => ({ goal: x.name, measured: x.value, met: x.ok ? 'yes' : 'NO' })),
  );
  writeFileSync(out, JSON.stringify({ rows, direct, goals: g, settings: s, atlantis: bin ? atlantisVersion(bin) : skipped }, null, 2));
  await gh.close();
  await mirror.close();
}

/** `make bench` entry: runs the bench in a loopback-only namespace; ok when every goal is met. */
export async function benchMonorepo(): Promise<{ ok: boolean }> {
  const out = path.join(mkdtempSync(path.join(tmpdir(), 'bench-mono-')), 'result.json');
  if (onlyLoopback()) await inner(out);
  else if ((await runInLoopbackNamespace(fileURLToPath(import.meta.url), ['--inner', out])) !== 0) return { ok: false };
  const r = JSON.parse(readFileSync(out, 'utf8')) as { goals: Goal[] };
  console.log(`results: ${out}`);
  return { ok: r.goals.every((g) => g.ok) };
}

if (process.argv[2] === '--inner') {
  await inner(process.argv[3]!);
  process.exit(0);
}
