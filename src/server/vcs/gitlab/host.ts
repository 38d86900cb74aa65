// GitLab behind the host interface (vcs/host.ts), as Atlantis v0.47's GitLab client does each
// thing: merge requests by project path and iid, notes split over 1,000,000 characters, award
// emoji, earlier notes hidden by editing them into a folded block, commit statuses joined to
// the commit's pipeline (statuses.ts), approvals (approvals_left), mergeability judged from the
// merge request, its project, its head commit's statuses and GitLab's version
// (mergeability.ts), group membership for the group allowlist and policy-set owners, merging with Atlantis's
// message, and resetting approvals (--discard-approval-on-plan).
import type { Logger } from '../../../log.js';
import { sleep as realSleep } from '../../../async.js';
import { splitComment } from '../comment-split.js';
import type { HostComment, MergeableStatus, PullRequest, VcsHost } from '../host.js';
import { GitLabApiError, GitLabClient } from './client.js';
import { gitlabMergeable, hasDetailedMergeStatus } from './mergeability.js';
import type { GitLabSettings } from './settings.js';
import { setGitlabStatus } from './statuses.js';
import type { GlMergeRequest } from './types.js';
import { checkedProject, gitlabWebhooks } from './webhooks.js';

/** GitLab's longest note is 1,000,000 characters; Atlantis keeps 100 free for the folded header of a hidden note. */
export const GITLAB_MAX_NOTE = 1_000_000 - 100;

/** What a hidden (superseded) note starts with, as Atlantis writes it. */
export const supersededHeader = (title: string): string =>
  `<!--- +-Superseded Command-+ ---><details><summary>Superseded Atlantis ${title}</summary>`;

/** The commit message of an automerge, Atlantis's words. */
export const automergeMessage = (pull: number): string => `[Atlantis] Automatically merging after successful apply: PR #${pull}`;

export interface GitLabHostOptions {
  logger: Logger;
  /** Instead of a client made from the settings (tests). */
  client?: GitLabClient;
  /** --vcs-status-name: the server's own statuses, some of which never block (mergeability.ts). */
  statusName?: string;
  /** Waits between looks for a pipeline or a merge's pipeline (tests). */
  sleep?: (ms: number) => Promise<void>;
  /** The groups the server-side config names as policy-set owners (policies.owners.teams, at any level). */
  policyOwnerTeams?: readonly string[];
}

export function gitlabHost(s: GitLabSettings, o: GitLabHostOptions): VcsHost {
  const log = o.logger;
  const gl = o.client ?? new GitLabClient({ apiUrl: s.apiUrl, token: s.token, logger: log });
  const sleep = o.sleep ?? realSleep;
  const statusName = o.statusName ?? 'atlantis';
  // As Atlantis's ConfiguredGroups: the allowlist's groups and the policy-set owners' groups,
  // sorted, each once. Membership of every one is asked for the allowlist and for policy owners alike.
  const groups = [...new Set([...s.groups, ...(o.policyOwnerTeams ?? [])])].sort();

  /** The clone URL of a project GitLab names, checked as a webhook's are. */
  const cloneUrlOf = (path: string, url: string): string => {
    const checked = checkedProject({ path_with_namespace: path, git_http_url: url }, s);
    if (checked instanceof Error) throw new Error(`GitLab project ${path}: ${checked.message}`);
    return checked.cloneUrl;
  };

  // Source projects as the authenticated webhooks named them (a fork's path and clone URL), so
  // that a comment's command does not ask GitLab for the fork again; bounded, oldest dropped.
  const sourceProjects = new Map<number, { repo: string; cloneUrl: string }>();
  const rememberSource = (id: number, p: { repo: string; cloneUrl: string }): void => {
    sourceProjects.delete(id);
    sourceProjects.set(id, p);
    if (sourceProjects.size > 1000) sourceProjects.delete(sourceProjects.keys().next().value as number);
  };

  const pullOf = async (repo: string, mr: GlMergeRequest): Promise<PullRequest> => {
    const out: PullRequest = {
      repo,
      number: mr.iid,
      state: mr.state === 'opened' ? 'open' : 'closed',
      author: mr.author?.username ?? '',
      headSha: mr.sha,
      headRef: mr.source_branch,
      baseRef: mr.target_branch,
      headRepo: repo,
      baseRepo: repo,
    };
    if (mr.source_project_id === mr.target_project_id) return out;
    // A fork: its path and clone URL are its project's. One gone (deleted, or hidden from the token) is no head.
    const known = sourceProjects.get(mr.source_project_id);
    if (known) {
      out.headRepo = known.repo;
      out.headCloneUrl = known.cloneUrl;
    } else
      try {
        const fork = await gl.getProject(mr.source_project_id);
        out.headRepo = fork.path_with_namespace;
        out.headCloneUrl = cloneUrlOf(fork.path_with_namespace, fork.http_url_to_repo);
      } catch (e) {
        if (!(e instanceof GitLabApiError) || (e.status !== 404 && e.status !== 403)) throw e;
        out.headRepo = null;
      }
    out.baseCloneUrl = cloneUrlOf(repo, `${mr.web_url.replace(/\/-\/merge_requests\/\d+$/, '')}.git`);
    return out;
  };

  const approved = async (repo: string, pull: number): Promise<boolean> => (await gl.approvalsLeft(repo, pull)) <= 0;

  const mergeability = async (repo: string, pull: number): Promise<MergeableStatus> => {
    const mr = await gl.getMergeRequest(repo, pull);
    const project = await gl.getProject(mr.project_id);
    const statuses = await gl.commitStatuses(mr.project_id, mr.head_pipeline?.sha ?? mr.sha);
    const detailed = hasDetailedMergeStatus(await gl.version());
    return gitlabMergeable(mr, project, statuses, { detailed, statusName });
  };

  return {
    kind: 'gitlab',
    typeName: 'Gitlab',
    hostname: s.hostname,
    user: s.user,
    webhooks: gitlabWebhooks({ secret: s.webhookSecret, host: s.host, basePath: s.basePath, onSourceProject: rememberSource }),
    // GitLab takes any user name with a personal, group or project access token.
    git: { username: s.user, token: s.token },
    initCredentials: { user: s.user, hostname: s.host, token: s.token },
    async botLogin() {
      // As Atlantis at start: which GitLab this is (logged); and whose token, when not --gitlab-user's.
      try {
        log.info(`GitLab host '${s.host}' is running version ${await gl.version()}`);
        const me = await gl.currentUser();
        return me.username.toLowerCase() === s.user.toLowerCase() ? undefined : me.username;
      } catch (e) {
        log.warn('Could not ask GitLab for its version and the token user at start', { error: (e as Error).message });
        return undefined;
      }
    },
    pullRequestName: 'Merge Request',
    pullLink: (pull) => `!${pull}`,
    pullUrl: (repo, pull) => `${s.webUrl}/${repo}/-/merge_requests/${pull}`,
    getPull: async (repo, pull) => pullOf(repo, await gl.getMergeRequest(repo, pull)),
    cloneUrl: async (repo) => {
      const p = await gl.getProject(repo);
      return cloneUrlOf(p.path_with_namespace, p.http_url_to_repo);
    },
    async changedFiles(repo, pull) {
      // As Atlantis: the merge request until GitLab has counted its changes (30 s at most), then its diffs.
      const until = Date.now() + 30_000;
      for (;;) {
        const mr = await gl.getMergeRequest(repo, pull);
        if (mr.changes_count !== null && mr.changes_count !== undefined && mr.changes_count !== '') break;
        if (Date.now() > until) throw new Error(`giving up waiting for GitLab to count the changes of !${pull} after 30s`);
        await sleep(1000);
      }
      const files: string[] = [];
      for (const d of await gl.diffs(repo, pull)) {
        files.push(d.new_path);
        if (d.renamed_file === true) files.push(d.old_path);
      }
      return files;
    },
    async comment(repo, pull, body, opts = {}) {
      const parts = splitComment(gl.redact(body), {
        maxSize: GITLAB_MAX_NOTE,
        // As Atlantis's GitLab client: every part is posted (--max-comments-per-command is GitHub's).
        maxComments: 0,
        ...(opts.command === undefined ? {} : { command: opts.command }),
      });
      for (const part of parts) await gl.createNote(repo, pull, part);
    },
    setStatus: (repo, sha, status, on) =>
      setGitlabStatus({ client: gl, logger: log, statusRetryEnabled: s.statusRetryEnabled, sleep }, repo, sha, status, on?.headRef),
    async listComments(repo, pull): Promise<HostComment[]> {
      // GitLab's system notes ("added 1 commit") are not comments.
      return (await gl.notes(repo, pull))
        .filter((n) => n.system !== true)
        .map((n) => ({ id: String(n.id), author: n.author?.username ?? null, body: n.body }));
    },
    approved,
    mergeability,
    async requirementFacts(repo, pull) {
      return { approved: await approved(repo, pull), mergeable: await mergeability(repo, pull) };
    },
    labels: async (repo, pull) => (await gl.getMergeRequest(repo, pull)).labels ?? [],
    async merge(repo, pull, m) {
      try {
        const mr = await gl.getMergeRequest(repo, pull);
        const project = await gl.getProject(mr.project_id);
        if (project.only_allow_merge_if_pipeline_succeeds === true) {
          // As Atlantis: up to 10 s for the head pipeline to succeed (Atlantis's own statuses may still be settling).
          const until = Date.now() + 10_000;
          while (Date.now() < until) {
            if ((await gl.getMergeRequest(repo, pull)).head_pipeline?.status === 'success') break;
            await sleep(1000);
          }
        }
        await gl.acceptMergeRequest(repo, pull, { message: automergeMessage(pull), removeSourceBranch: m.deleteSourceBranch });
        return undefined;
      } catch (e) {
        return `unable to merge merge request, it may not be in a mergeable state: ${(e as Error).message}`;
      }
    },
    isNotFound: (e) => e instanceof GitLabApiError && e.status === 404,
    react: (repo, pull, commentId, reaction) => gl.awardEmojiOnNote(repo, pull, commentId, reaction),
    async hideComment(repo, pull, c, { commandTitle }) {
      const header = supersededHeader(commandTitle);
      // Hidden before, for this command: left as it is (as Atlantis).
      if ((c.body.split('\n')[0] ?? '').toLowerCase() === header.toLowerCase()) return;
      await gl.updateNote(repo, pull, Number(c.id), `${header}\n${c.body}\n</details>\n`);
    },
    async userTeams(_repo, user) {
      // As Atlantis: the user by name (a 404 is no group), then direct membership of each group
      // the allowlist or a policy set's owners name.
      let users: Array<{ id: number }>;
      try {
        users = await gl.usersByName(user);
      } catch (e) {
        if (e instanceof GitLabApiError && e.status === 404) return [];
        throw e;
      }
      if (users.length !== 1) throw new Error(`GET /users returned ${users.length === 0 ? 'no user' : 'more than 1 user'}`);
      const id = (users[0] as { id: number }).id;
      const member: string[] = [];
      for (const g of groups) if ((await gl.groupMember(g, id))?.state === 'active') member.push(g);
      return member;
    },
    discardApprovals: (repo, pull) => gl.resetApprovals(repo, pull),
    fileContent: (repo, ref, file, maxBytes) => gl.rawFile(repo, ref, file, maxBytes),
  };
}
