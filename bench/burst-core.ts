// The building blocks of a webhook burst, shared by webhook-burst (one server) and
// replicas-burst (servers sharing one Redis): the PRs and their shuffled webhook mix, sending
// them the way GitHub delivers them, what they must produce, the bounded wait for the answers,
// and the count of the answers the GitHub stand-in got.
import crypto from 'node:crypto';
import http from 'node:http';
import { NODE_ARGS } from '../src/node-args.js';
import { type CliProcess, startCli } from '../test/support/cli.js';
import { sendWebhook } from '../test/support/github-standin.js';
import { terraformConfig } from '../test/support/git-repos.js';
import { WEBHOOK_SECRET, type WorkflowEnv } from '../test/support/workflow-env.js';
import { printTable } from './support.js';
import { BOT, type Hook, type Pr, hooksFor, mulberry32 } from './webhook-mix.js';

/** GitHub closes a webhook delivery that gets no answer within 10 s and marks it failed (no automatic redelivery). */
export const GITHUB_TIMEOUT_MS = 10_000;

/** Still running: a process killed by a signal (a V8 abort is SIGABRT) has no exit code. */
export const running = (p: CliProcess) => p.child.exitCode === null && p.child.signalCode === null;

/**
 * A webhook the way GitHub delivers one: signed like sendWebhook, on a connection of its own
 * (no keep-alive), answered within GITHUB_TIMEOUT_MS or given up.
 */
export function postOnNewConnection(
  target: string,
  event: string,
  payload: unknown,
  deliveryId: string,
): Promise<{ status: number; body: string }> {
  const raw = Buffer.from(JSON.stringify(payload));
  const headers = {
    'content-type': 'application/json',
    'content-length': String(raw.length),
    'user-agent': 'GitHub-Hookshot/3b5e1c2',
    connection: 'close',
    'x-github-event': event,
    'x-github-delivery': deliveryId,
    'x-github-hook-id': '123456',
    'x-github-hook-installation-target-type': 'repository',
    'x-hub-signature-256': 'sha256=' + crypto.createHmac('sha256', WEBHOOK_SECRET).update(raw).digest('hex'),
    'x-hub-signature': 'sha1=' + crypto.createHmac('sha1', WEBHOOK_SECRET).update(raw).digest('hex'),
  };
  return new Promise((resolve, reject) => {
    const req = http.request(target, { method: 'POST', headers, agent: false, signal: AbortSignal.timeout(GITHUB_TIMEOUT_MS) }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(raw);
  });
}

/**
 * The CLI (or BENCH_SERVER_CLI, another build of the bundle, for before/after comparisons)
 * with the image's node flags and with stdout and stderr going straight to `logFile`, not a pipe to this busy process: when
 * it falls behind reading, the server's event loop stands still on its own log lines. See
 * startCli.
 */
export function startServer(args: string[], env: NodeJS.ProcessEnv, logFile: string): CliProcess {
  return startCli(args, env, { logFile, cli: process.env.BENCH_SERVER_CLI, nodeArgs: NODE_ARGS });
}

/** The burst's size and pace, from BENCH_* (see webhook-burst's header). */
export function burstParams() {
  const p = {
    WEBHOOKS: Number(process.env.BENCH_WEBHOOKS ?? 1000),
    PRS: Number(process.env.BENCH_PRS ?? 50),
    POOL: Number(process.env.BENCH_POOL ?? 4),
    CONCURRENCY: Number(process.env.BENCH_CONCURRENCY ?? 50),
    TIMEOUT_MS: Number(process.env.BENCH_TIMEOUT_S ?? 600) * 1000,
    KEEPALIVE: process.env.BENCH_KEEPALIVE === '1',
  };
  if (!(p.PRS >= 1 && p.WEBHOOKS >= p.PRS && p.POOL >= 1 && p.CONCURRENCY >= 1))
    throw new Error('need BENCH_PRS >= 1, BENCH_WEBHOOKS >= BENCH_PRS, BENCH_POOL >= 1, BENCH_CONCURRENCY >= 1');
  return p;
}

/**
 * `count` PRs, each adding its own project burst<N>/ (so no PR waits for another's lock), and
 * `webhooks` webhooks over them, shuffled with a fixed seed.
 */
export async function createBurst(env: WorkflowEnv, count: number, webhooks: number): Promise<{ prs: Pr[]; hooks: Hook[] }> {
  const prs: Pr[] = [];
  for (let n = 1; n <= count; n++) {
    const pr: Pr = { number: n, dir: `burst${n}`, branch: `burst-${n}`, headSha: '' };
    pr.headSha = await env.repo.createBranch(pr.branch, { [`${pr.dir}/main.tf`]: terraformConfig({ marker: `burst${n}` }) });
    await env.repo.publishPull(n, pr.branch);
    env.gh.addPull(env.repo.fullName, {
      number: n,
      headSha: pr.headSha,
      headRef: pr.branch,
      baseRef: env.repo.baseBranch,
      files: [{ filename: `${pr.dir}/main.tf`, status: 'added' }],
    });
    prs.push(pr);
  }
  const hooks: Hook[] = prs.flatMap((pr, i) => hooksFor(env, pr, Math.floor(webhooks / count) + (i < webhooks % count ? 1 : 0)));
  const rand = mulberry32(20_260_601);
  for (let i = hooks.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [hooks[i], hooks[j]] = [hooks[j]!, hooks[i]!];
  }
  return { prs, hooks };
}

/** The mix table: each kind of webhook, how many, its answer and its effect. */
export function printMix(hooks: Hook[], prs: number, concurrency: number, keepalive: boolean, extra = ''): void {
  const mixRows = new Map<string, { kind: string; total: number; answer: string; effect: string }>();
  for (const h of hooks) {
    const k = h.kind.replace(/burst\d+/, 'burstN');
    const row = mixRows.get(k) ?? {
      kind: k,
      total: 0,
      answer: `${h.expect.status} ${h.expect.body}`,
      effect: h.expect.runs ? `${h.expect.runs} plan run + comment + status` : h.expect.comment ? `${h.expect.comment} comment` : 'none',
    };
    row.total++;
    mixRows.set(k, row);
  }
  printTable(
    `mix: ${hooks.length} signed webhooks over ${prs} PRs, shuffled, ${concurrency} in flight, ${keepalive ? `on up to ${concurrency} kept-alive connections` : 'each on a new connection (as GitHub delivers them)'}${extra}`,
    [...mixRows.values()],
  );
}

export interface SendResult {
  status: number;
  body: string;
  ms: number;
  /** ms after sendStart. */
  at: number;
  error?: string;
}

/**
 * Every webhook, as fast as `concurrency` allows, hook i to `urlFor(i)` (its server's base URL),
 * with delivery id burst-<i> (so that a late one can be found in a server log).
 */
export async function sendBurst(
  hooks: Hook[],
  urlFor: (i: number) => string,
  concurrency: number,
  keepalive: boolean,
  sendStart: number,
): Promise<SendResult[]> {
  const results: SendResult[] = new Array(hooks.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, hooks.length) }, async () => {
      while (next < hooks.length) {
        const i = next++;
        const h = hooks[i]!;
        const url = urlFor(i);
        const t0 = performance.now();
        const at = Date.now() - sendStart;
        try {
          const r = keepalive
            ? await sendWebhook(`${url}/events`, h.event, h.payload, {
                secret: WEBHOOK_SECRET,
                timeoutMs: GITHUB_TIMEOUT_MS,
                deliveryId: `burst-${i}`,
              })
            : await postOnNewConnection(`${url}/events`, h.event, h.payload, `burst-${i}`);
          results[i] = { status: r.status, body: r.body, ms: performance.now() - t0, at };
        } catch (e) {
          const ms = performance.now() - t0;
          // Given up at GitHub's timeout (TimeoutError from fetch, AbortError from http.request).
          const timedOut = ms >= GITHUB_TIMEOUT_MS - 100 && /abort|timeout/i.test(`${(e as Error).name} ${(e as Error).message}`);
          results[i] = {
            status: -1,
            body: '',
            ms,
            at,
            error: timedOut ? `no answer within ${GITHUB_TIMEOUT_MS / 1000} s` : (e as Error).message,
          };
        }
      }
    }),
  );
  return results;
}

export interface Want {
  plan: number;
  unlock: number;
  help: number;
  'did-you-mean': number;
  runs: number;
  planStatuses: number;
  reactions: number;
  /** Webhooks answered 'Processing...': accepted operations. */
  commands: number;
  /** Bot comments in all. */
  comments: number;
}

/** What the webhooks must produce in all. */
export function expected(hooks: Hook[]): Want {
  const want = { plan: 0, unlock: 0, help: 0, 'did-you-mean': 0, runs: 0, planStatuses: 0, reactions: 0, commands: 0, comments: 0 };
  for (const h of hooks) {
    if (h.expect.comment) want[h.expect.comment]++;
    want.runs += h.expect.runs;
    if (h.expect.planStatus) want.planStatuses++;
    if (h.expect.reaction) want.reactions++;
    if (h.expect.body === 'Processing...') want.commands++;
  }
  want.comments = want.plan + want.unlock + want.help + want['did-you-mean'];
  return want;
}

export const botComments = (env: WorkflowEnv) => [...env.gh.commentsById.values()].filter((c) => c.user === BOT);
export const finalStatuses = (env: WorkflowEnv) => env.gh.statuses.filter((s) => s.context === 'atlantis/plan' && s.state !== 'pending');

/**
 * Until every answer is there with no operation in progress on any of `urls`; or, when some
 * never come, until nothing has moved for 15 s with no operation left (what is missing then is
 * lost, not late); or until `deadline`, or until `alive` says a server is gone.
 */
export async function waitForAnswers(env: WorkflowEnv, want: Want, urls: string[], deadline: number, alive: () => boolean): Promise<void> {
  let inProgress = -1;
  let lastProgress = { at: Date.now(), n: -1 };
  while (Date.now() < deadline && alive()) {
    inProgress = 0;
    for (const url of urls) {
      try {
        const n = (
          (await (await fetch(`${url}/status`, { signal: AbortSignal.timeout(5000) })).json()) as { in_progress_operations: number }
        ).in_progress_operations;
        if (inProgress >= 0) inProgress += n;
      } catch {
        inProgress = -1;
      }
    }
    const n = botComments(env).length + finalStatuses(env).length;
    if (inProgress === 0 && botComments(env).length >= want.comments && finalStatuses(env).length >= want.planStatuses) break;
    if (n !== lastProgress.n || inProgress !== 0) lastProgress = { at: Date.now(), n };
    else if (Date.now() - lastProgress.at > 15_000) break;
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** What the stand-in got: bot comments by kind, per-PR placement, statuses and reactions. */
export function countAnswers(env: WorkflowEnv, hooks: Hook[], prs: Pr[]) {
  const comments = botComments(env);
  const got = {
    plan: comments.filter(
      (c) => /^Ran Plan for dir: `burst\d+` workspace: `default`/.test(c.body) && c.body.includes('To **apply** all unapplied plans'),
    ).length,
    planFailed: comments.filter((c) => /^Ran Plan/.test(c.body) && !c.body.includes('To **apply** all unapplied plans')).length,
    unlock: comments.filter((c) => c.body.startsWith('All Atlantis locks for this PR have been unlocked')).length,
    help: comments.filter((c) => c.body.startsWith('```cmake\natlantis\nTerraform Pull Request Automation')).length,
    'did-you-mean': comments.filter((c) => c.body.startsWith('Did you mean to use `atlantis` instead of `terraform`?')).length,
  };
  // Per PR: each plan comment on the PR it belongs to, each final status on its head commit.
  let misplaced = 0;
  for (const pr of prs) {
    const expPlans = hooks.filter((h) => h.pull === pr.number && h.expect.comment === 'plan').length;
    const onPr = env.gh.comments(env.repo.fullName, pr.number).filter((c) => c.body.startsWith(`Ran Plan for dir: \`${pr.dir}\``)).length;
    const statusesOnPr = env.gh
      .statusesFor(env.repo.fullName, pr.headSha)
      .filter((s) => s.context === 'atlantis/plan' && s.state === 'success').length;
    if (onPr !== expPlans || statusesOnPr !== expPlans) misplaced++;
  }
  const pending = env.gh.statuses.filter((s) => s.context === 'atlantis/plan' && s.state === 'pending').length;
  const success = finalStatuses(env).filter((s) => s.state === 'success').length;
  const eyes = env.gh.reactions.filter((r) => r.content === 'eyes').length;
  return { comments, got, misplaced, pending, success, eyes };
}
