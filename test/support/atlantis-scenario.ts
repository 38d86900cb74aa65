// The scenario of the Atlantis differential test (test/atlantis-differential.test.ts), shared
// by its recorder (which runs it against a real Atlantis v0.47) and the test (which runs it
// against our server): the repos, the PR events and comments of each step, when a step is
// over, what is recorded of it, and the one normaliser both sides go through.
import { existsSync, rmSync } from 'node:fs';
import path from 'node:path';
import { type FileChanges, type TestRepo, createTestRepo, terraformConfig } from './git-repos.js';
import { type GitHubStandin, type RecordedCall, issueCommentPayload, pullRequestPayload, sendWebhook } from './github-standin.js';
import { sleep } from '../../src/async.js';

export const SCENARIO_WEBHOOK_SECRET = 'differential-webhook-secret';
export const SCENARIO_BOT = 'atlantis-bot';

/** The repo with two plain dirs and no atlantis.yaml. */
export const DIRS_REPO = 'acme/infra';
/** The repo whose atlantis.yaml names its projects. */
export const NAMED_REPO = 'acme/named';

/** A project whose plan fails: terraform rejects the reference to an undeclared variable. */
const ERRORED_CONFIG = `resource "terraform_data" "broken" {
  input = var.not_declared
}
`;

/** A project whose plan has no changes: nothing to create, no outputs. */
const NO_CHANGE_CONFIG = `locals {
  unused = "no resources here"
}
`;

export const NAMED_ATLANTIS_YAML = `version: 3
projects:
  - name: alpha
    dir: dir1
  - name: beta
    dir: dir2
`;

export type Action = { kind: 'open'; branch: string; files: FileChanges } | { kind: 'comment'; body: string } | { kind: 'close' };

export interface Step {
  name: string;
  /** `owner/name` of a repo the scenario created. */
  repo: string;
  pull: number;
  action: Action;
  /** Who comments (default `dev`, the PR's author). */
  user?: string;
  /** The step is over (when recording) once this many comments have come, then nothing more for a while. */
  comments: number;
  /** And this many commit statuses (for a step that comments nothing but sets statuses). */
  statuses?: number;
}

const c = (name: string, repo: Step['repo'], pull: number, body: string, comments = 1): Step => ({
  name,
  repo,
  pull,
  action: { kind: 'comment', body },
  comments,
});

/** The steps, in order; names are unique and become the fixture's keys. */
export const STEPS: Step[] = [
  {
    name: 'autoplan',
    repo: DIRS_REPO,
    pull: 1,
    action: {
      kind: 'open',
      branch: 'change-both',
      files: { 'dir1/main.tf': terraformConfig({ marker: 'dir1-v2' }), 'dir2/main.tf': terraformConfig({ marker: 'dir2-v2' }) },
    },
    comments: 1,
  },
  c('plan -d dir1', DIRS_REPO, 1, 'atlantis plan -d dir1'),
  c('plan', DIRS_REPO, 1, 'atlantis plan'),
  c('version with plans', DIRS_REPO, 1, 'atlantis version'),
  {
    name: 'second PR hits the lock',
    repo: DIRS_REPO,
    pull: 2,
    action: { kind: 'open', branch: 'also-dir1', files: { 'dir1/main.tf': terraformConfig({ marker: 'dir1-other' }) } },
    comments: 1,
  },
  c('apply -d dir1', DIRS_REPO, 1, 'atlantis apply -d dir1'),
  c('apply', DIRS_REPO, 1, 'atlantis apply'),
  c('version after apply', DIRS_REPO, 1, 'atlantis version', 0),
  c('unlock', DIRS_REPO, 1, 'atlantis unlock'),
  c('version without plans', DIRS_REPO, 1, 'atlantis version', 0),
  c('apply without plans', DIRS_REPO, 1, 'atlantis apply'),
  c('help', DIRS_REPO, 1, 'atlantis help'),
  c('did you mean', DIRS_REPO, 1, 'atlantis pla'),
  c('unknown command', DIRS_REPO, 1, 'atlantis frobnicate'),
  c('bad dir', DIRS_REPO, 1, 'atlantis plan -d nope'),
  c('unknown project', DIRS_REPO, 1, 'atlantis plan -p nope'),
  {
    name: 'errored plan',
    repo: DIRS_REPO,
    pull: 3,
    action: { kind: 'open', branch: 'broken', files: { 'dir3/main.tf': ERRORED_CONFIG } },
    comments: 1,
  },
  c('apply of an errored plan', DIRS_REPO, 3, 'atlantis apply'),
  { name: 'close without locks', repo: DIRS_REPO, pull: 1, action: { kind: 'close' }, comments: 0 },
  // An errored plan releases its lock, so this close has nothing to report.
  { name: 'close after an errored plan', repo: DIRS_REPO, pull: 3, action: { kind: 'close' }, comments: 0 },
  {
    name: 'autoplan without projects',
    repo: DIRS_REPO,
    pull: 4,
    action: { kind: 'open', branch: 'docs-only', files: { 'README.md': '# infra, documented\n' } },
    comments: 0,
    statuses: 3,
  },
  {
    name: 'no-change plan',
    repo: DIRS_REPO,
    pull: 5,
    action: { kind: 'open', branch: 'no-change', files: { 'dir4/main.tf': NO_CHANGE_CONFIG } },
    comments: 1,
  },
  { name: 'close with a lock', repo: DIRS_REPO, pull: 5, action: { kind: 'close' }, comments: 1 },
  {
    name: 'named projects autoplan',
    repo: NAMED_REPO,
    pull: 1,
    action: {
      kind: 'open',
      branch: 'change-alpha-beta',
      files: { 'dir1/main.tf': terraformConfig({ marker: 'alpha-v2' }), 'dir2/main.tf': terraformConfig({ marker: 'beta-v2' }) },
    },
    comments: 1,
  },
  c('plan -p alpha', NAMED_REPO, 1, 'atlantis plan -p alpha'),
  c('named unknown project', NAMED_REPO, 1, 'atlantis plan -p nope'),
  c('apply -p alpha', NAMED_REPO, 1, 'atlantis apply -p alpha'),
  c('apply -p beta', NAMED_REPO, 1, 'atlantis apply -p beta'),
  { name: 'named close', repo: NAMED_REPO, pull: 1, action: { kind: 'close' }, comments: 1 },
];

/** What a step caused on GitHub, in the order GitHub received it. */
export type Event =
  | { kind: 'comment'; pull: number; body: string }
  | { kind: 'comment-edit'; body: string }
  | { kind: 'status'; context: string; state: string; description: string | null; target_url: string | null }
  | { kind: 'reaction'; content: string }
  | { kind: 'call'; method: string; path: string };

export interface StepRecord {
  name: string;
  /** What was done (for the reader of the fixture). */
  did: string;
  events: Event[];
}

/** The strings of one run that vary from run to run, replaced by placeholders. */
export interface NormaliseContext {
  serverUrl: string;
  githubUrl: string;
  /** Every server's data dir (one per replica). */
  dataDirs: string[];
  /** More run-specific strings and their placeholders (a scenario's config dir), replaced first. */
  replace?: Array<[string, string]>;
}

/**
 * Terraform's notes that taking or releasing the state lock is slow: printed only when it takes
 * longer than 400 ms, so on a busy machine, by either server.
 */
export const SLOW_LOCK_NOTE = /(?:Acquiring|Releasing) state lock\. This may take a few moments\.\.\.\n(?:\n)?/g;

/**
 * Replaces only what differs between runs and machines: the server's and GitHub's URLs, the
 * data dir, SHAs, UUIDs and other ids, timestamps and durations, terraform's slow-lock notes.
 */
export function normalise(text: string, ctx: NormaliseContext): string {
  const githubHost = ctx.githubUrl.replace(/^https?:\/\//, '');
  const replaced = (ctx.replace ?? []).reduce((t, [from, to]) => t.split(from).join(to), text);
  const withoutDataDirs = ctx.dataDirs.reduce((t, dir) => t.split(dir).join('<data-dir>'), replaced);
  return withoutDataDirs
    .split(ctx.serverUrl)
    .join('<atlantis-url>')
    .split(ctx.githubUrl)
    .join('<github-url>')
    .split(githubHost)
    .join('<github-host>')
    .replace(/\b[0-9a-f]{40}\b/g, '<sha>')
    .replace(/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/g, '<uuid>')
    .replace(/\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?( [A-Z]{3,4})?/g, '<time>')
    .replace(/\b(after|in) \d+(\.\d+)?(ms|s|m)\b/g, '$1 <duration>')
    .replace(/\bissuecomment-\d+\b/g, 'issuecomment-<id>')
    .replace(SLOW_LOCK_NOTE, '');
}

/** The events of the stand-in's recorded `calls` (GitHub's writes), normalised. */
export function eventsOf(calls: RecordedCall[], ctx: NormaliseContext): Event[] {
  const out: Event[] = [];
  const n = (s: unknown): string | null => (typeof s === 'string' ? normalise(s, ctx) : null);
  for (const call of calls) {
    if (call.method === 'GET' || call.status < 200 || call.status >= 300) continue;
    const b = (typeof call.body === 'object' && call.body !== null ? call.body : {}) as Record<string, unknown>;
    const comment = /^\/repos\/[^/]+\/[^/]+\/issues\/(\d+)\/comments$/.exec(call.path);
    if (comment && call.method === 'POST') out.push({ kind: 'comment', pull: Number(comment[1]), body: n(b.body) ?? '' });
    else if (/\/issues\/comments\/\d+$/.test(call.path) && call.method === 'PATCH')
      out.push({ kind: 'comment-edit', body: n(b.body) ?? '' });
    else if (/\/issues\/comments\/\d+\/reactions$/.test(call.path)) out.push({ kind: 'reaction', content: String(b.content) });
    else if (/\/statuses\/[0-9a-f]+$/.test(call.path)) {
      out.push({
        kind: 'status',
        context: String(b.context),
        state: String(b.state),
        description: n(b.description),
        target_url: n(b.target_url),
      });
    } else if (/\.git\//.test(call.path)) {
      // A clone is reading, not a write GitHub shows.
    } else if ((call.path === '/graphql' || call.path === '/api/graphql') && !/^\s*mutation/.test(String(b.query ?? ''))) {
      // A GraphQL query reads.
    } else out.push({ kind: 'call', method: call.method, path: normalise(call.path, ctx).replace(/\/\d+(?=\/|$)/g, '/<n>') });
  }
  return out;
}

/** A short line diff (longest common subsequence): `-` expected only (Atlantis), `+` actual only (ours). */
export function lineDiff(expected: string[], actual: string[]): string[] {
  const n = expected.length;
  const m = actual.length;
  const lcs: number[][] = Array.from({ length: n + 1 }, () => new Array<number>(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--)
    for (let j = m - 1; j >= 0; j--)
      lcs[i]![j] = expected[i] === actual[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
  const out: string[] = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && expected[i] === actual[j]) {
      out.push(`  ${expected[i++]}`);
      j++;
    } else if (i < n && (j >= m || lcs[i + 1]![j]! >= lcs[i]![j + 1]!)) out.push(`- ${expected[i++]}`);
    else out.push(`+ ${actual[j++]}`);
  }
  return out;
}

/** The two repos, served by the stand-in over git smart-HTTP, and what a step needs to act. */
export interface ScenarioRepos {
  repos: Map<string, TestRepo>;
}

export async function createScenarioRepos(gh: GitHubStandin): Promise<ScenarioRepos> {
  const repos = new Map<string, TestRepo>();
  const base = {
    'README.md': '# infra\n',
    'dir1/main.tf': terraformConfig({ marker: 'dir1-v1' }),
    'dir2/main.tf': terraformConfig({ marker: 'dir2-v1' }),
  };
  repos.set(DIRS_REPO, await createTestRepo({ fullName: DIRS_REPO, files: base }));
  repos.set(NAMED_REPO, await createTestRepo({ fullName: NAMED_REPO, files: { ...base, 'atlantis.yaml': NAMED_ATLANTIS_YAML } }));
  for (const [name, repo] of repos) gh.addRepo(name, { cloneUrl: gh.gitUrl(name), bareDir: repo.bareDir });
  return { repos };
}

/** Deletes the repos' directories (each under its own temp root: <root>/remote/<owner>/<name>.git). */
export function removeScenarioRepos(scenario: ScenarioRepos): void {
  for (const repo of scenario.repos.values()) rmSync(path.resolve(repo.bareDir, '..', '..', '..'), { recursive: true, force: true });
}

function describeAction(a: Action, user = 'dev'): string {
  if (a.kind === 'open') return `opened with ${Object.keys(a.files).join(', ')} changed`;
  if (a.kind === 'close') return 'closed (not merged)';
  return user === 'dev' ? `comment "${a.body}"` : `comment "${a.body}" by ${user}`;
}

/** Does the step's action: a PR event or a comment, sent as GitHub sends webhooks. */
async function act(step: Step, gh: GitHubStandin, scenario: ScenarioRepos, serverUrl: string): Promise<void> {
  const repo = scenario.repos.get(step.repo)!;
  const cloneUrl = gh.gitUrl(step.repo);
  const a = step.action;
  let event: string;
  let payload: Record<string, unknown>;
  if (a.kind === 'open') {
    const headSha = await repo.createBranch(a.branch, a.files);
    await repo.publishPull(step.pull, a.branch);
    const files = (await repo.changedFiles(a.branch)).map((filename) => ({ filename }));
    gh.addPull(step.repo, { number: step.pull, headSha, headRef: a.branch, baseRef: repo.baseBranch, baseSha: repo.baseSha, files });
    event = 'pull_request';
    payload = pullRequestPayload({
      repo: step.repo,
      cloneUrl,
      action: 'opened',
      number: step.pull,
      headSha,
      headRef: a.branch,
      baseSha: repo.baseSha,
    });
  } else if (a.kind === 'close') {
    const pr = gh.getPull(step.repo, step.pull)!;
    gh.updatePull(step.repo, step.pull, { state: 'closed' });
    event = 'pull_request';
    payload = pullRequestPayload({
      repo: step.repo,
      cloneUrl,
      action: 'closed',
      number: step.pull,
      headSha: pr.headSha,
      headRef: pr.headRef,
      baseSha: pr.baseSha,
    });
  } else {
    event = 'issue_comment';
    payload = issueCommentPayload({ repo: step.repo, cloneUrl, number: step.pull, body: a.body, user: step.user ?? 'dev' });
  }
  const r = await sendWebhook(`${serverUrl}/events`, event, payload, { secret: SCENARIO_WEBHOOK_SECRET, timeoutMs: 30_000 });
  if (r.status >= 300) throw new Error(`step "${step.name}": the server answered the webhook with ${r.status}: ${r.body.slice(0, 300)}`);
}

export interface RunOptions {
  gh: GitHubStandin;
  /** The steps to run (default STEPS, the GitHub differential's). */
  steps?: Step[];
  scenario: ScenarioRepos;
  /** Where the webhooks go: step i to `serverUrls[i % length]` (several replicas: round-robin). */
  serverUrls: string[];
  ctx: NormaliseContext;
  /**
   * When a step counts as over: the comments and statuses to wait for (at most `waitMs`),
   * then `quietMs` with no write to GitHub. The recorder waits for `step.comments` comments;
   * the test for as many comments and statuses as the fixture has.
   */
  expect: (step: Step) => { comments: number; statuses: number };
  waitMs: number;
  quietMs: number;
  /**
   * The server's own word that the step's command is over (e.g. its log line), told by a
   * function made at the step's start: the wait for comments and statuses ends then too.
   */
  finishedSince?: () => () => boolean;
  /** Called as each step ends (progress output). */
  onStep?: (r: StepRecord) => void;
}

function writes(calls: RecordedCall[]): RecordedCall[] {
  return calls.filter((call) => call.method !== 'GET' && !/\.git\//.test(call.path));
}

/** Runs every step against the servers at `serverUrls`; returns what each step caused. */
export async function runScenario(o: RunOptions): Promise<StepRecord[]> {
  const out: StepRecord[] = [];
  for (const [i, step] of (o.steps ?? STEPS).entries()) {
    const from = o.gh.calls.length;
    const finished = o.finishedSince?.() ?? (() => false);
    await act(step, o.gh, o.scenario, o.serverUrls[i % o.serverUrls.length] as string);
    const want = o.expect(step);
    const since = (): RecordedCall[] => o.gh.calls.slice(from);
    const count = (re: RegExp): number => writes(since()).filter((call) => re.test(call.path) && call.method === 'POST').length;
    const end = Date.now() + o.waitMs;
    const missing = (): boolean => count(/\/issues\/\d+\/comments$/) < want.comments || count(/\/statuses\//) < want.statuses;
    while (Date.now() < end && missing() && !finished()) await sleep(100);
    // Settle: the step is over once nothing was written for quietMs (bounded by waitMs more).
    const settleEnd = Date.now() + o.waitMs;
    let seen = writes(since()).length;
    let quietSince = Date.now();
    while (Date.now() < settleEnd && Date.now() - quietSince < o.quietMs) {
      await sleep(100);
      const now = writes(since()).length;
      if (now !== seen) {
        seen = now;
        quietSince = Date.now();
      }
    }
    const rec: StepRecord = {
      name: step.name,
      did: `${step.repo}#${step.pull}: ${describeAction(step.action, step.user)}`,
      events: eventsOf(since(), o.ctx),
    };
    out.push(rec);
    o.onStep?.(rec);
  }
  return out;
}

/** The terraform Atlantis and our server run: the machine's, found on PATH by both. */
export function terraformOnPath(): string {
  for (const dir of (process.env.PATH ?? '').split(':')) if (dir && existsSync(`${dir}/terraform`)) return `${dir}/terraform`;
  throw new Error('terraform is required on PATH for the differential test');
}
