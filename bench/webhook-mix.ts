// The per-PR webhook mix of the webhook-burst bench (see its header) and what each webhook must produce.
import { issueCommentPayload, pullRequestPayload } from '../test/support/github-standin.js';
import type { WorkflowEnv } from '../test/support/workflow-env.js';

/** The bot user the server runs as: its own comments are ignored. */
export const BOT = 'atlantis-bot';
/** What a webhook must produce. */
export interface Expect {
  /** HTTP status and the start of the body. */
  status: number;
  body: string;
  /** Comments the server must post on the PR for it, by kind. */
  comment?: 'plan' | 'unlock' | 'help' | 'did-you-mean';
  /** terraform project runs (init + plan) it causes. */
  runs: number;
  /** A plan command: one pending and one final atlantis/plan status. */
  planStatus: boolean;
  /** A command comment: the server reacts with :eyes:. */
  reaction: boolean;
}

export interface Hook {
  pull: number;
  kind: string;
  event: string;
  payload: unknown;
  expect: Expect;
}

export interface Pr {
  number: number;
  dir: string;
  branch: string;
  headSha: string;
}

export const noop = (body: string): Expect => ({ status: 200, body, runs: 0, planStatus: false, reaction: false });

/** The per-PR mix, commands first (see the header). */
export function prMix(env: WorkflowEnv, pr: Pr): Array<Omit<Hook, 'pull'>> {
  const repo = env.repo.fullName;
  const cloneUrl = env.repo.cloneUrl;
  const prPayload = (action: 'opened' | 'labeled' | 'edited') =>
    pullRequestPayload({ repo, cloneUrl, action, number: pr.number, headSha: pr.headSha, headRef: pr.branch });
  const comment = (body: string, user = 'dev', extra: { action?: 'created' | 'edited' | 'deleted'; onPullRequest?: boolean } = {}) =>
    issueCommentPayload({ repo, cloneUrl, number: pr.number, body, user, ...extra });
  const plan: Expect = { status: 200, body: 'Processing...', comment: 'plan', runs: 1, planStatus: true, reaction: true };
  const minimalRepo = { full_name: repo, name: repo.split('/')[1], owner: { login: repo.split('/')[0] }, clone_url: cloneUrl };
  return [
    { kind: 'pull_request opened (autoplan)', event: 'pull_request', payload: prPayload('opened'), expect: { ...plan, reaction: false } },
    { kind: `atlantis plan -d ${pr.dir}`, event: 'issue_comment', payload: comment(`atlantis plan -d ${pr.dir}`), expect: plan },
    { kind: 'atlantis plan (modified projects)', event: 'issue_comment', payload: comment('atlantis plan'), expect: plan },
    {
      kind: 'atlantis unlock',
      event: 'issue_comment',
      payload: comment('atlantis unlock'),
      expect: { status: 200, body: 'Processing...', comment: 'unlock', runs: 0, planStatus: false, reaction: true },
    },
    {
      kind: `atlantis plan -d ${pr.dir} (again)`,
      event: 'issue_comment',
      payload: comment(`atlantis plan -d ${pr.dir}`, 'reviewer1'),
      expect: plan,
    },
    {
      kind: 'atlantis help',
      event: 'issue_comment',
      payload: comment('atlantis help'),
      expect: { ...noop('Commenting back on pull request'), comment: 'help' },
    },
    {
      kind: 'terraform plan (did you mean)',
      event: 'issue_comment',
      payload: comment('terraform plan', 'reviewer2'),
      expect: { ...noop('Commenting back on pull request: invalid command'), comment: 'did-you-mean' },
    },
    {
      kind: 'review comment',
      event: 'issue_comment',
      payload: comment('LGTM, thanks!', 'reviewer1'),
      expect: noop('Ignoring non-command comment'),
    },
    {
      kind: 'review comment',
      event: 'issue_comment',
      payload: comment('Could we name this resource differently?', 'reviewer2'),
      expect: noop('Ignoring non-command comment'),
    },
    {
      kind: 'multi-line comment',
      event: 'issue_comment',
      payload: comment('atlantis plan\nand then apply please'),
      expect: noop('Ignoring non-command comment'),
    },
    {
      kind: 'comment by the bot user',
      event: 'issue_comment',
      payload: comment('Ran Plan for dir: `x` workspace: `default`', BOT),
      expect: noop('Ignoring comment from our own user'),
    },
    {
      kind: 'command by the bot user',
      event: 'issue_comment',
      payload: comment('atlantis plan', BOT),
      expect: noop('Ignoring comment from our own user'),
    },
    {
      kind: 'issue_comment edited',
      event: 'issue_comment',
      payload: comment('atlantis apply', 'dev', { action: 'edited' }),
      expect: noop('Ignoring issue_comment event: issue_comment action edited'),
    },
    {
      kind: 'issue_comment deleted',
      event: 'issue_comment',
      payload: comment('atlantis plan', 'dev', { action: 'deleted' }),
      expect: noop('Ignoring issue_comment event: issue_comment action deleted'),
    },
    {
      kind: 'pull_request labeled',
      event: 'pull_request',
      payload: prPayload('labeled'),
      expect: noop('Ignoring pull_request event: pull_request action labeled'),
    },
    {
      kind: 'pull_request edited',
      event: 'pull_request',
      payload: prPayload('edited'),
      expect: noop('Ignoring pull_request event: pull_request action edited'),
    },
    {
      kind: 'pull_request_review',
      event: 'pull_request_review',
      payload: {
        action: 'submitted',
        review: { id: pr.number, state: 'approved', user: { login: 'reviewer1' } },
        pull_request: { number: pr.number },
        repository: minimalRepo,
        sender: { login: 'reviewer1' },
      },
      expect: noop('Ignoring pull_request_review event: unsupported event'),
    },
    {
      kind: 'status',
      event: 'status',
      payload: { sha: pr.headSha, state: 'success', context: 'ci/build', repository: minimalRepo, sender: { login: 'ci-bot' } },
      expect: noop('Ignoring status event: unsupported event'),
    },
    {
      kind: 'comment on a plain issue',
      event: 'issue_comment',
      payload: comment('atlantis plan', 'dev', { onPullRequest: false }),
      expect: noop('Ignoring issue_comment event: comment on an issue'),
    },
    {
      kind: 'review comment',
      event: 'issue_comment',
      payload: comment('nit: trailing newline', 'reviewer1'),
      expect: noop('Ignoring non-command comment'),
    },
  ];
}

/** `n` webhooks for one PR: the mix cut from the end, or its no-op tail repeated. */
export function hooksFor(env: WorkflowEnv, pr: Pr, n: number): Hook[] {
  const mix = prMix(env, pr);
  const firstNoop = mix.findIndex((h) => h.kind === 'review comment');
  const out: Hook[] = [];
  for (let i = 0; i < n; i++) {
    const m = i < mix.length ? mix[i]! : mix[firstNoop + ((i - mix.length) % (mix.length - firstNoop))]!;
    // Repeated comments need their own comment id (reactions are keyed by it).
    const payload =
      i < mix.length
        ? m.payload
        : JSON.parse(JSON.stringify(m.payload).replace(/"id":(\d+),"html_url"/, `"id":${900_000 + pr.number * 1000 + i},"html_url"`));
    out.push({ ...m, payload, pull: pr.number });
  }
  return out;
}

export function mulberry32(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// ---- measurements of the server process -------------------------------------------------
