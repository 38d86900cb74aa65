// Atlantis v0.47's own metric names and labels, served on /metrics beside ours so that the
// dashboards and alerts written for Atlantis keep working with no change. Atlantis makes them
// with uber-go/tally's Prometheus reporter from its stats scopes (server/metrics and the
// `SubScope` calls of its code): the scope names joined by `_` under `atlantis_`, counters without
// `_total`, timers as summaries in seconds (quantiles 0.5, 0.75, 0.95, 0.99, 0.999), and every
// character of a name or label value outside [A-Za-z0-9_] replaced by `_` (`acme/infra` is
// `acme_infra`). test/fixtures/atlantis-v0.47/metrics.txt is a real Atlantis's /metrics after
// plans and an apply; test/atlantis-metrics.test.ts holds these to it. docs/metrics.md lists
// what is exported and what is not.
//
// Like Atlantis, the per-pull-request series (`base_repo`, `pr_number`) are never dropped: one
// set per pull request and project for the life of the process. Only a request whose signature
// checked out makes webhook series, so no unauthenticated sender can add any.
import { AsyncLocalStorage } from 'node:async_hooks';
import { Counter, type Registry, Summary } from 'prom-client';

/** tally's Prometheus sanitizer: each character outside [A-Za-z0-9_] becomes `_`. */
export const tallySafe = (s: string): string => s.replace(/[^A-Za-z0-9_]/g, '_');

const QUANTILES = [0.5, 0.75, 0.95, 0.99, 0.999];
const GIT_LABELS = ['base_repo', 'pr_number'] as const;
const PROJECT_LABELS = [
  'base_repo',
  'pr_number',
  'project',
  'project_path',
  'terraform_distribution',
  'terraform_version',
  'workspace',
] as const;

export type ProjectResult = 'success' | 'error' | 'failure';

export interface ProjectLabels {
  repo: string;
  pull: number;
  /** '' for a project without a name. */
  project: string;
  dir: string;
  workspace: string;
  /** The version the project asks for (atlantis.yaml's terraform_version), '' when none. */
  terraformVersion: string;
}

/** Our GitHub client's methods and the name of Atlantis's scope for the same call. */
export const GITHUB_OPERATIONS = {
  createComment: 'create_comment',
  addReaction: 'react_to_comment',
  setCommitStatus: 'update_status',
  getPull: 'get_pull_request',
  isMergeable: 'pull_is_mergeable',
  getPullForMergeable: 'pull_is_mergeable',
  isApproved: 'pull_is_approved',
  getApproval: 'pull_is_approved',
  listChangedFiles: 'get_modified_files',
  mergePull: 'merge_pull',
} as const;

export class AtlantisMetrics {
  private readonly counters = new Map<string, Counter<string>>();
  private readonly summaries = new Map<string, Summary<string>>();

  constructor(private readonly registry: Registry) {
    // As Atlantis (metrics.InitCounter): there from the start, at 0.
    for (const r of ['success', 'error']) this.counter(`atlantis_pullclosed_cleanup_execution_${r}`, []);
  }

  private counter(name: string, labels: readonly string[]): Counter<string> {
    let c = this.counters.get(name);
    if (!c) {
      // tally's help text is the name and the type.
      c = new Counter({ name, help: `${name} counter`, labelNames: [...labels], registers: [this.registry] });
      this.counters.set(name, c);
    }
    return c;
  }

  private summary(name: string, labels: readonly string[]): Summary<string> {
    let s = this.summaries.get(name);
    if (!s) {
      s = new Summary({ name, help: `${name} summary`, labelNames: [...labels], percentiles: QUANTILES, registers: [this.registry] });
      this.summaries.set(name, s);
    }
    return s;
  }

  /**
   * `atlantis_github_event_<comment|pr>_<action>_<success_200|error_CODE>`: a pull_request or
   * issue_comment webhook whose signature checked out, and the status it was answered with.
   */
  webhook(event: 'issue_comment' | 'pull_request', action: string, repo: string, pull: number, status: number): void {
    const kind = event === 'issue_comment' ? 'comment' : 'pr';
    const outcome = status === 200 ? 'success_200' : `error_${status}`;
    const name = `atlantis_github_event_${kind}_${tallySafe(action)}_${outcome}`;
    this.counter(name, GIT_LABELS).inc(git(repo, pull));
  }

  /**
   * `atlantis_cmd_autoplan_execution_time`, `atlantis_cmd_comment_<command>_execution_time`: one
   * command, whole. API runs (`api_plan`, `api_apply`) have no such timer in Atlantis.
   */
  command(command: string, seconds: number): void {
    if (command.startsWith('api_')) return;
    const scope = command === 'autoplan' ? 'autoplan' : `comment_${tallySafe(command)}`;
    this.summary(`atlantis_cmd_${scope}_execution_time`, []).observe(seconds);
  }

  /** `atlantis_project_<command>_execution_{success,error,failure,time}`: one project of a command. */
  project(command: string, p: ProjectLabels, result: ProjectResult, seconds: number): void {
    const base = `atlantis_project_${tallySafe(command)}_execution`;
    const labels = {
      base_repo: tallySafe(p.repo),
      pr_number: String(p.pull),
      project: tallySafe(p.project),
      project_path: tallySafe(p.dir),
      terraform_distribution: '',
      terraform_version: tallySafe(p.terraformVersion),
      workspace: tallySafe(p.workspace),
    };
    // As tally's InitCounter: the three counters exist (at 0) once a project ran.
    for (const r of ['success', 'error', 'failure'] as const)
      this.counter(`${base}_${r}`, PROJECT_LABELS).inc(labels, r === result ? 1 : 0);
    this.summary(`${base}_time`, PROJECT_LABELS).observe(labels, seconds);
  }

  /** `atlantis_github_<operation>_execution_{success,error,time}`: one call to GitHub. */
  github(operation: string, repo: string, pull: number | undefined, ok: boolean, seconds: number): void {
    const base = `atlantis_github_${operation}_execution`;
    const labels = git(repo, pull);
    this.counter(`${base}_success`, GIT_LABELS).inc(labels, ok ? 1 : 0);
    this.counter(`${base}_error`, GIT_LABELS).inc(labels, ok ? 0 : 1);
    this.summary(`${base}_time`, GIT_LABELS).observe(labels, seconds);
  }

  /** `atlantis_pullclosed_cleanup_execution_{success,error,time}`: the locks and plans of a closed pull request released. */
  pullClosed(ok: boolean, seconds: number): void {
    this.counter('atlantis_pullclosed_cleanup_execution_success', []).inc(ok ? 1 : 0);
    this.counter('atlantis_pullclosed_cleanup_execution_error', []).inc(ok ? 0 : 1);
    this.summary('atlantis_pullclosed_cleanup_execution_time', []).observe(seconds);
  }
}

const git = (repo: string, pull: number | undefined): Record<string, string> => ({
  base_repo: tallySafe(repo),
  pr_number: pull === undefined ? '' : String(pull),
});

/** Seconds since `start` (a `process.hrtime.bigint()`). */
export const since = (start: bigint): number => Number(process.hrtime.bigint() - start) / 1e9;

/** Set while an instrumented call runs: the calls it makes itself (getPull inside getPullForMergeable) are its own, not counted. */
const inCall = new AsyncLocalStorage<true>();

/**
 * Times the calls of `client`'s methods named in GITHUB_OPERATIONS as Atlantis's instrumented
 * VCS client does. The repo is each call's first argument and the pull request its second when
 * that is the pull number (not for a reaction or a commit status: their pr_number is '').
 */
export function instrumentGitHub<T extends object>(client: T, m: AtlantisMetrics): T {
  const target = client as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
  for (const [method, op] of Object.entries(GITHUB_OPERATIONS)) {
    const orig = target[method];
    if (typeof orig !== 'function') continue;
    const withPull = method !== 'addReaction' && method !== 'setCommitStatus';
    target[method] = async (...args: unknown[]) => {
      if (inCall.getStore()) return orig.apply(client, args);
      return inCall.run(true, () => timed(args));
    };
    const timed = async (args: unknown[]): Promise<unknown> => {
      const start = process.hrtime.bigint();
      const repo = String(args[0]);
      const pull = withPull && typeof args[1] === 'number' ? args[1] : undefined;
      try {
        const r = await orig.apply(client, args);
        m.github(op, repo, pull, true, since(start));
        return r;
      } catch (e) {
        m.github(op, repo, pull, false, since(start));
        throw e;
      }
    };
  }
  return client;
}

/**
 * The webhook series for a request that was answered `status`: only a pull_request or
 * issue_comment event whose signature checks out (or any, without a webhook secret), read from
 * its own body. Anything else counts nothing, as in Atlantis.
 */
export function countWebhook(
  m: AtlantisMetrics,
  req: { event: string | undefined; signature: string | undefined; rawBody: Buffer },
  status: number,
  signatureOk: (rawBody: Buffer, signature: string | undefined) => boolean,
): void {
  if (req.event !== 'issue_comment' && req.event !== 'pull_request') return;
  if (!signatureOk(req.rawBody, req.signature)) return;
  let body: unknown;
  try {
    body = JSON.parse(req.rawBody.toString('utf8'));
  } catch {
    return;
  }
  const f = (o: unknown, k: string): unknown => (typeof o === 'object' && o !== null ? (o as Record<string, unknown>)[k] : undefined);
  const action = f(body, 'action');
  const repo = f(f(body, 'repository'), 'full_name');
  const pull = req.event === 'issue_comment' ? f(f(body, 'issue'), 'number') : f(body, 'number');
  if (typeof action !== 'string' || typeof repo !== 'string' || typeof pull !== 'number') return;
  m.webhook(req.event, action.slice(0, 64), repo.slice(0, 256), pull, status);
}
