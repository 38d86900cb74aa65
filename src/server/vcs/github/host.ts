// GitHub behind the host interface (vcs/host.ts): the REST client (client.ts) with the App's
// tokens when there is an App (app.ts), Atlantis's metrics of its calls, and GitHub's own
// rules for what the workflow asks (mergeability.ts, merge.ts, webhooks.ts).
import type { Logger } from '../../../log.js';
import { type AtlantisMetrics, instrumentGitHub } from '../../atlantis-metrics.js';
import type { HostComment, MergeableStatus, PullRequest, VcsHost } from '../host.js';
import { githubAuth } from './app.js';
import { GitHubApiError, GitHubClient, type PullInfo, type ReactionContent } from './client.js';
import { mergePull } from './merge.js';
import { approvedByReviews, mergeableMinusApply, mergeableStatus } from './mergeability.js';
import { getMergeabilityInfo } from './mergeability-query.js';
import type { GitHubSettings } from './settings.js';
import { githubWebhooks } from './webhooks.js';

export interface GitHubHostOptions {
  logger: Logger;
  /** Atlantis's metrics: each call timed as Atlantis's instrumented GitHub client does, the webhook series. */
  metrics?: AtlantisMetrics;
  /** --max-comments-per-command (0: no limit). */
  maxCommentsPerCommand?: number;
  /** Instead of a client made from the settings (tests). */
  client?: GitHubClient;
  /** --vcs-status-name (default atlantis): its `<name>/apply` checks do not hold a bypassed apply. */
  statusName?: string;
  /** --ignore-vcs-status-names: the other Atlantis servers whose checks do not hold it either. */
  ignoreStatusNames?: readonly string[];
}

/** A PullInfo (GitHub's answer) as the workflow reads a pull request. */
export function pullRequestOf(repo: string, pr: PullInfo): PullRequest {
  const out: PullRequest = {
    repo,
    number: pr.number,
    state: pr.state === 'open' ? 'open' : 'closed',
    author: pr.user,
    headSha: pr.headSha,
    headRef: pr.headRef,
    baseRef: pr.baseRef,
    headRepo: pr.headRepo,
    baseRepo: pr.baseRepo ?? repo,
  };
  if (pr.headCloneUrl !== undefined) out.headCloneUrl = pr.headCloneUrl;
  if (pr.baseCloneUrl !== undefined) out.baseCloneUrl = pr.baseCloneUrl;
  return out;
}

/** A pull request's page on GitHub (or GitHub Enterprise at `hostname`), as Atlantis links it. */
export const githubPullUrl =
  (hostname: string) =>
  (repo: string, pull: number): string =>
    `https://${hostname}/${repo}/pull/${pull}`;

export function githubHost(s: GitHubSettings, o: GitHubHostOptions): VcsHost {
  const log = o.logger;
  const auth = githubAuth(s, log);
  const made =
    o.client ??
    new GitHubClient({
      baseUrl: s.apiUrl,
      logger: log,
      ...(o.maxCommentsPerCommand !== undefined ? { maxCommentsPerCommand: o.maxCommentsPerCommand } : {}),
      ...auth.clientOptions,
    });
  // Its calls also counted and timed under Atlantis's metric names (atlantis-metrics.ts).
  const gh = o.metrics ? instrumentGitHub(made, o.metrics) : made;
  return {
    kind: 'github',
    typeName: 'Github',
    hostname: s.hostname,
    user: s.user,
    webhooks: githubWebhooks({ secret: s.webhookSecret, ...(o.metrics ? { metrics: o.metrics } : {}) }),
    // GitHub takes any user name with a token; x-access-token is the one its docs give for App tokens.
    git: { username: 'x-access-token', token: auth.clientOptions.token },
    initCredentials: { user: s.user, hostname: s.hostname, token: s.token },
    botLogin: () => auth.botLogin(),
    pullUrl: githubPullUrl(s.hostname),
    getPull: async (repo, pull) => pullRequestOf(repo, await gh.getPull(repo, pull)),
    cloneUrl: (repo) => gh.getCloneUrl(repo),
    changedFiles: (repo, pull) => gh.listChangedFiles(repo, pull),
    comment: async (repo, pull, body, opts = {}) => {
      await gh.createComment(repo, pull, body, opts);
    },
    setStatus: (repo, sha, status) => gh.setCommitStatus(repo, sha, status),
    listComments: async (repo, pull): Promise<HostComment[]> =>
      (await gh.listComments(repo, pull)).map((c) => ({ id: c.nodeId, author: c.login, body: c.body })),
    approved: async (repo, pull) => approvedByReviews(await gh.listReviews(repo, pull)),
    mergeability: async (repo, pull): Promise<MergeableStatus> => {
      const pr = await gh.getPullForMergeable(repo, pull);
      // Only a blocked PR is asked again, without the atlantis/apply check (as Atlantis).
      const bypass =
        s.allowMergeableBypassApply && !pr.draft && pr.mergeableState === 'blocked'
          ? { minusApply: mergeableMinusApply(await getMergeabilityInfo(gh, repo, pull), o.statusName, o.ignoreStatusNames) }
          : undefined;
      return mergeableStatus(pr, bypass);
    },
    labels: (repo, pull) => gh.listPullLabels(repo, pull),
    merge: (repo, pull, m) => mergePull(gh, log, repo, pull, m),
    isNotFound: (e) => e instanceof GitHubApiError && e.status === 404,
    react: (repo, _pull, commentId, reaction) => gh.addReaction(repo, commentId, reaction as ReactionContent),
    hideComment: (_repo, _pull, c) => gh.minimizeComment(c.id, 'OUTDATED'),
    // Teams of the repository's organisation (the owner of `owner/name`).
    userTeams: (repo, user) => gh.listUserTeams(repo.split('/')[0]!, user),
    fileContent: (repo, ref, file, maxBytes) => gh.getFileContent(repo, ref, file, maxBytes),
  };
}
