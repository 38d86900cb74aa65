// What the workflow needs from a code host, as one interface: the way locks/state-store.ts is
// the one interface to storage. GitHub is behind it (vcs/github/); a host is chosen in one
// place (open-host.ts), and nothing in workflow/, http/ or replicas/ imports a host's own
// files. What a host lacks (reactions, hiding comments, teams) it leaves out: the optional
// methods below are capabilities, and the workflow does without one that is absent, never
// asking which host it talks to (Renovate's platforms work the same way). The host's own
// facts (GitHub's mergeable_state values, APPROVED reviews, x-access-token, /pull/ links, its
// webhook headers) stay in its adapter and its tests.
//
// Repositories are named as the host names them (GitHub `owner/name`); a pull request is its
// repository and number (GitLab's merge request iid).

/** The hosts the server can talk to; a new adapter adds its name. Logs and config only: the workflow never branches on it. */
export type VcsKind = 'github' | 'gitlab' | 'gitea';

/** A pull request (merge request) as the workflow reads it. */
export interface PullRequest {
  /** The base repository, as the request names it. */
  repo: string;
  number: number;
  /** Merged counts as closed. */
  state: 'open' | 'closed';
  /** Login of its author. */
  author: string;
  headSha: string;
  headRef: string;
  baseRef: string;
  /** The head repository; null when the host has none (a deleted fork). */
  headRepo: string | null;
  /** The base repository as the host spells it. */
  baseRepo: string;
  /** Clone URL of the head repository (a fork's for a fork), when the host gives one. */
  headCloneUrl?: string;
  /** Clone URL of the base repository, when the host gives one. */
  baseCloneUrl?: string;
}

/** The merge methods Atlantis knows (--automerge-method, a comment's --auto-merge-method). */
export const MERGE_METHODS = ['merge', 'rebase', 'squash'] as const;
export type MergeMethod = (typeof MERGE_METHODS)[number];

export type CommitState = 'pending' | 'success' | 'failure' | 'error';

export interface CommitStatus {
  state: CommitState;
  /** e.g. `atlantis/plan`, `atlantis/plan: dir1/default` */
  context: string;
  description?: string;
  targetUrl?: string;
}

/** A comment of a pull request, as --hide-prev-plan-comments chooses among them. */
export interface HostComment {
  /** The host's handle for it (what hideComment needs); opaque to the workflow. */
  id: string;
  /** null when the host gives no author (a deleted account). */
  author: string | null;
  body: string;
}

/** Whether the pull request may be merged, with Atlantis's reason when not (the `mergeable` requirement). */
export interface MergeableStatus {
  mergeable: boolean;
  reason?: string;
  /**
   * The commit statuses that make it unmergeable, when the host names them (GitLab): an
   * apply then ignores other projects' plan statuses among them, as Atlantis does.
   */
  blockingStatuses?: string[];
}

/** Approval and mergeability read together (VcsHost.requirementFacts). */
export interface HostRequirementFacts {
  approved: boolean;
  mergeable: MergeableStatus;
}

/** A webhook delivery as the server keeps it: the host's headers (VcsWebhooks.headerNames) and the exact body. */
export interface WebhookRequest {
  /** The headers named by the host's VcsWebhooks.headerNames, by lower-case name, as received. */
  headers: Readonly<Record<string, string | undefined>>;
  /** The event's name (GitHub's X-GitHub-Event), for logs. */
  event: string | undefined;
  /** The delivery's id (GitHub's X-GitHub-Delivery): a delivery accepted before is not run again. */
  deliveryId: string | undefined;
  rawBody: Buffer;
  /** Content-Type as received, passed on when the webhook is handed to another replica. */
  contentType?: string;
  /** X-Atlantis-Forwarded-By: another replica handed this webhook here (replicas/forward.ts). */
  forwardedBy?: string;
  /** X-Atlantis-Forward-Auth: the sender's proof that it holds the shared state key (replicas/forward-auth.ts). */
  forwardAuth?: string;
}

/**
 * A file of a repository read through the host's API (VcsHost.fileContent): its text; `none`
 * when there is no plain file at that path (absent, a directory, a symlink); `too-large` past
 * the bound the caller gave.
 */
export type FileContent = { kind: 'file'; text: string } | { kind: 'none' } | { kind: 'too-large' };

/** What a host reads of a delivery: its headers and its body. */
export type WebhookDelivery = Pick<WebhookRequest, 'headers' | 'rawBody'>;

/** What a webhook is, once authenticated; the host words its own answers to what it will not take. */
export type VcsEvent =
  /** A pull request opened, updated (new commits, out of draft) or closed. `autoplan`: opened or updated, and not a draft. */
  | {
      kind: 'pull';
      action: 'opened' | 'updated' | 'closed';
      /** A webhook gives both clone URLs (the head's is the base's when the head is not a fork). */
      pull: PullRequest & Required<Pick<PullRequest, 'headCloneUrl' | 'baseCloneUrl'>>;
      autoplan: boolean;
    }
  /** A new comment on a pull request. `cloneUrl`: the base repository's. */
  | { kind: 'comment'; repo: string; pull: number; cloneUrl: string; commentId: number; body: string; author: string }
  /** Nothing to run: an event the server does not act on (200), or a body it cannot read (400), in the host's words. */
  | ({ kind: 'answer' } & WebhookAnswer);

/** An answer to a webhook, in the host's words (a refusal, or an event the server does not act on). */
export interface WebhookAnswer {
  status: number;
  body: string;
}

/** A host's webhooks: which headers matter, how they authenticate, what they mean. */
export interface VcsWebhooks {
  /**
   * The headers of a delivery the server reads (lower-case names), in a fixed order: kept with
   * the body, sent on with it to the replica that owns the pull request, and covered, in this
   * order, by the forward's proof (replicas/forward-auth.ts).
   */
  readonly headerNames: readonly string[];
  eventName(headers: WebhookRequest['headers']): string | undefined;
  deliveryId(headers: WebhookRequest['headers']): string | undefined;
  /** atlantis_webhooks_total's `event` label: a known event name, `unknown` when absent, else `other` (bounded: it is read unauthenticated). */
  eventLabel(headers: WebhookRequest['headers']): string;
  /**
   * With a webhook secret: the refusal of a delivery whose headers cannot authenticate at all,
   * decided before its body is read (http/webhook-intake.ts); undefined when they may. Absent
   * without a secret.
   */
  refuseBeforeBody?(headers: WebhookRequest['headers']): WebhookAnswer | undefined;
  /** The refusal of a delivery that does not authenticate (wrong signature or token); undefined when it does, or without a secret. */
  authenticate(req: WebhookDelivery): WebhookAnswer | undefined;
  /** The delivery as an event (after `authenticate`). Never throws. */
  parse(req: WebhookDelivery): VcsEvent;
  /** Atlantis's own series for an authentic delivery answered `status` (GitHub's atlantis_github_event_*), where Atlantis has them. */
  tally?(req: WebhookDelivery, status: number): void;
}

/** What the workflow needs from a code host. */
export interface VcsHost {
  readonly kind: VcsKind;
  /** Atlantis's name of the host type, as the API's `Type` field takes it (`Github`). */
  readonly typeName: string;
  /** The host's name in --repo-allowlist and repos.yaml ids (`github.com`, a GitHub Enterprise host). */
  readonly hostname: string;
  /** The user the server acts as (`@user` calls it in comments; its comments are the ones hidden); '' when none is configured. */
  readonly user: string;
  readonly webhooks: VcsWebhooks;
  /** How git authenticates its clones: the user name, and the token read before each git command. */
  readonly git: { username: string; token: () => string | Promise<string> };
  /** What --write-git-creds writes for terraform init: the user, the host and its token. */
  readonly initCredentials: { user: string; hostname: string; token: () => string };
  /** The login of the server's own comments when it is not `user` (a GitHub App's `<slug>[bot]`); asked once at start. */
  botLogin(): Promise<string | undefined>;
  /** How Atlantis's comments name a pull request on this host (GitLab: `Merge Request`); absent: `Pull Request`. */
  readonly pullRequestName?: string;
  /** How a comment points at another pull request of the repository (GitLab: `!1`); absent: `#1`. */
  pullLink?(pull: number): string;
  /** The pull request's page (hooks' PULL_URL, the web page, the API's lock list). */
  pullUrl(repo: string, pull: number): string;
  getPull(repo: string, pull: number): Promise<PullRequest>;
  /** The repository's clone URL (an API run without a pull request). */
  cloneUrl(repo: string): Promise<string>;
  /** Every file the pull request changes; a renamed file also gives its old path (as Atlantis). */
  changedFiles(repo: string, pull: number): Promise<string[]>;
  /** Posts a comment, split over the host's size limit; `command` names the output in the continuation headers. */
  comment(repo: string, pull: number, body: string, opts?: { command?: string }): Promise<void>;
  /** `on`: the pull request the status is for (GitLab names its branch when the commit has no pipeline yet). */
  setStatus(repo: string, sha: string, status: CommitStatus, on?: { pull: number; headRef: string }): Promise<void>;
  /** Every comment of the pull request, oldest first. */
  listComments(repo: string, pull: number): Promise<HostComment[]>;
  /** The `approved` requirement, as Atlantis judges it on this host. */
  approved(repo: string, pull: number): Promise<boolean>;
  /** The `mergeable` requirement, as Atlantis judges it on this host. */
  mergeability(repo: string, pull: number): Promise<MergeableStatus>;
  labels(repo: string, pull: number): Promise<string[]>;
  /**
   * Merges as Atlantis's client for the host does (automerge); `method` '' lets the host
   * choose. Returns Atlantis's error text, or undefined once merged (the source branch then
   * deleted when asked; a failure to delete is only logged). `headSha`: the head the apply ran
   * on, for a host that can merge only that commit (Gitea's head_commit_id).
   */
  merge(repo: string, pull: number, o: { method: string; deleteSourceBranch: boolean; headSha?: string }): Promise<string | undefined>;
  /** Whether an error of a call says the thing asked for does not exist (a 404). */
  isNotFound(e: unknown): boolean;
  // Capabilities: absent, the workflow does without.
  /** Reacts to a comment of the pull request (--emoji-reaction). */
  react?(repo: string, pull: number, commentId: number, reaction: string): Promise<void>;
  /** Hides an earlier comment (--hide-prev-plan-comments), as the host allows it; `commandTitle` (`Plan`) names the command that superseded it. */
  hideComment?(repo: string, pull: number, c: HostComment, o: { commandTitle: string }): Promise<void>;
  /** The user's teams (GitHub) or groups, for the team allowlist; absent: the user is in none. */
  userTeams?(repo: string, user: string): Promise<string[]>;
  /**
   * Approval and mergeability read once, as the host's Atlantis reads them when a plan, apply
   * or import starts, before the command sets any status of its own (on GitLab its own
   * `running` statuses join the pipeline the mergeability is judged from). With it the
   * workflow reads them there and judges every project's `approved` and `mergeable` from that
   * answer; without it, it asks `approved` and `mergeability` for each project that needs them.
   */
  requirementFacts?(repo: string, pull: number): Promise<HostRequirementFacts>;
  /** Withdraws the pull request's approvals (--discard-approval-on-plan, on each comment `plan`). */
  discardApprovals?(repo: string, pull: number): Promise<void>;
  /**
   * One file of `repo` at commit `ref`, read through the API without a clone
   * (--skip-clone-no-changes), never more than `maxBytes` of it. Throws on any other failure.
   */
  fileContent?(repo: string, ref: string, path: string, maxBytes: number): Promise<FileContent>;
}
