// Automerge, as Atlantis v0.47 does it (server/events/automerger.go): when `--automerge` or
// `automerge: true` in atlantis.yaml is on and an apply leaves every planned project of the PR
// applied, the server comments that it merges and has the host merge (the comment's
// `--auto-merge-method`, else `--automerge-method`, else the host's choice: on GitHub the first
// the repository allows of merge, rebase, squash); a failure is commented
// with Atlantis's text. With automerge on, a plan with errors discards the plans of its
// projects, so a partial set can never be applied and merged. `delete_source_branch_on_merge`
// has the host delete the head branch after the merge (see docs: Atlantis documents it, its
// GitHub client ignores it).
//
// Decisions are pure and table-tested; the class at the end does the I/O.
import type { Logger } from '../../../log.js';
import type { ServerConfig } from '../../config.js';
import type { ServerMetrics } from '../../metrics.js';
import type { ProjectPlanStatus, PullStatus } from '../../locks/pull-status.js';
import type { StateStore } from '../../locks/state-store.js';
import type { VcsHost } from '../../vcs/host.js';
import type { ParsedCommand } from '../comment-parser/index.js';
import { type ServerSettings, type ServerSideRepoConfig, serverSettingsFor } from '../repo-config/server-side.js';
import type { RepoConfig } from '../repo-config/types.js';

/** Atlantis's comment before it merges, word for word. */
export const AUTOMERGE_COMMENT = 'Automatically merging because all plans have been successfully applied.';

/** Atlantis's comment when the merge failed, word for word. */
export function automergeFailedComment(error: string): string {
  return `Automerging failed:\n\`\`\`\n${error}\n\`\`\``;
}

/** What a command's projects say about automerge (Atlantis reads them from its first project). */
export interface AutomergeSettings {
  enabled: boolean;
  deleteSourceBranch: boolean;
}

/**
 * Pure: automerge and branch deletion for a repo. `automerge` in atlantis.yaml, when set, wins
 * over --automerge. delete_source_branch_on_merge: the server side's value, replaced by the
 * repo's top-level one and then the first project's, only when the server side allows the
 * override (Atlantis's merge order).
 */
export function automergeSettings(
  serverAutomerge: boolean,
  server: Pick<ServerSettings, 'deleteSourceBranchOnMerge' | 'allowedOverrides'>,
  repo: Pick<RepoConfig, 'automerge' | 'deleteSourceBranchOnMerge'> | undefined,
  firstProject: { deleteSourceBranchOnMerge?: boolean } | undefined,
): AutomergeSettings {
  let deleteSourceBranch = server.deleteSourceBranchOnMerge ?? false;
  if (server.allowedOverrides.includes('delete_source_branch_on_merge')) {
    if (repo?.deleteSourceBranchOnMerge !== undefined) deleteSourceBranch = repo.deleteSourceBranchOnMerge;
    if (firstProject?.deleteSourceBranchOnMerge !== undefined) deleteSourceBranch = firstProject.deleteSourceBranchOnMerge;
  }
  return { enabled: repo?.automerge ?? serverAutomerge, deleteSourceBranch };
}

/**
 * automergeSettings for a command, from what the runner holds: the repo's `host/owner/name`,
 * its atlantis.yaml (undefined: none) and the command's first project (dir, workspace, name).
 */
export function automergeSettingsFor(
  serverAutomerge: boolean,
  serverConfig: ServerSideRepoConfig | undefined,
  repoId: string,
  repo: RepoConfig | undefined,
  first: { dir: string; workspace: string; project?: string | undefined } | undefined,
): AutomergeSettings {
  const project =
    first === undefined
      ? undefined
      : repo?.projects.find((p) => (first.project ? p.name === first.project : p.dir === first.dir && p.workspace === first.workspace));
  return automergeSettings(serverAutomerge, serverSettingsFor(serverConfig, repoId), repo, project);
}

export type AutomergeDecision = { kind: 'merge'; method: string } | { kind: 'skip'; reason: string };

/**
 * Pure: after an apply, whether to merge now. Atlantis merges only when the apply had no
 * error and every project of the PR is applied; `--auto-merge-disabled` on the comment and
 * the --disable-automerge-label stop it. The method is the comment's, else the server's
 * (empty: the host chooses, from the repository's settings on GitHub).
 */
export function decideAutomerge(i: {
  settings: AutomergeSettings;
  applySucceeded: boolean;
  /**
   * Projects of the PR's status (after this apply) that are not applied, whatever the reason:
   * planned, planned with no changes, plan or apply errored, plan discarded (Atlantis merges
   * only when every project's status is "applied").
   */
  unapplied: ReadonlyArray<{ dir: string; workspace: string; status: string }>;
  autoMergeDisabled: boolean;
  commentMethod: string | undefined;
  serverMethod: string;
  /** The PR's labels and --disable-automerge-label ('' = none); labels undefined: not read. */
  labels?: readonly string[];
  disableLabel: string;
}): AutomergeDecision {
  if (!i.settings.enabled) return { kind: 'skip', reason: 'automerge is not enabled' };
  if (i.autoMergeDisabled) return { kind: 'skip', reason: 'the comment has --auto-merge-disabled' };
  if (!i.applySucceeded) return { kind: 'skip', reason: 'the apply had errors' };
  const left = i.unapplied[0];
  if (left) return { kind: 'skip', reason: `project at dir "${left.dir}", workspace "${left.workspace}" has status "${left.status}"` };
  if (i.disableLabel !== '' && i.labels?.includes(i.disableLabel))
    return { kind: 'skip', reason: `the pull request has the label "${i.disableLabel}"` };
  return { kind: 'merge', method: i.commentMethod || i.serverMethod };
}

/** The comment's `--auto-merge-method` (parsed by the comment parser as `autoMergeMethod`). */
export function commentMergeMethod(c: ParsedCommand): string | undefined {
  const m = (c as ParsedCommand & { autoMergeMethod?: unknown }).autoMergeMethod;
  return typeof m === 'string' && m !== '' ? m : undefined;
}

/** Pure: the projects of a PR's status that are not applied (none recorded: none). */
export function notApplied(ps: PullStatus | undefined): Array<{ dir: string; workspace: string; status: ProjectPlanStatus }> {
  return (ps?.projects ?? []).filter((p) => p.status !== 'applied').map(({ dir, workspace, status }) => ({ dir, workspace, status }));
}

export interface AutomergerDeps {
  config: Pick<ServerConfig, 'automerge' | 'automergeMethod' | 'disableAutomergeLabel'>;
  serverRepoConfig?: ServerSideRepoConfig | undefined;
  host: VcsHost;
  store: StateStore;
  metrics: ServerMetrics;
  logger: Logger;
}

export interface PullRef {
  repo: string;
  pull: number;
  /** The head the command ran on (a host may merge only that commit). */
  headSha?: string;
}

export class Automerger {
  constructor(private readonly d: AutomergerDeps) {}

  private settings(
    ref: PullRef,
    repo: RepoConfig | undefined,
    first: { dir: string; workspace: string; project?: string | undefined } | undefined,
  ) {
    return automergeSettingsFor(this.d.config.automerge, this.d.serverRepoConfig, `${this.d.host.hostname}/${ref.repo}`, repo, first);
  }

  /**
   * After a plan of `projects` (the first decides, as in Atlantis): with automerge on and
   * errors, the plans (and this PR's locks) of those projects are discarded.
   */
  async afterPlan(
    ref: PullRef,
    repo: RepoConfig | undefined,
    projects: ReadonlyArray<{ dir: string; workspace: string; name?: string | undefined }>,
    hadErrors: boolean,
  ): Promise<void> {
    const first = projects[0] && { dir: projects[0].dir, workspace: projects[0].workspace, project: projects[0].name };
    if (!hadErrors || !this.settings(ref, repo, first).enabled) return;
    for (const p of projects) {
      await this.d.store.deletePlan(ref.repo, ref.pull, p.dir, p.workspace);
      // Only this PR's locks: a project locked by another PR failed for that reason. One
      // store call, so a lock another PR takes meanwhile is never the one released.
      await this.d.store.unlockIfOwnedBy({ repo: ref.repo, dir: p.dir, workspace: p.workspace }, ref.pull);
    }
    this.d.logger.info('Deleted plans because there were errors and automerge requires all plans succeed', {
      repo: ref.repo,
      pull: ref.pull,
    });
  }

  /** After an apply: merges when decideAutomerge says so; failures are commented, never thrown. */
  async afterApply(
    ref: PullRef,
    repo: RepoConfig | undefined,
    applied: ReadonlyArray<{ dir: string; workspace: string; project?: string | undefined }>,
    c: ParsedCommand,
    applySucceeded: boolean,
  ): Promise<void> {
    const settings = this.settings(ref, repo, applied[0]);
    const base = {
      settings,
      applySucceeded,
      // The PR-wide status, not the plan files: a project whose plan failed has no plan file
      // but its status ("plan_errored") still blocks the merge, as in Atlantis.
      unapplied: notApplied(await this.d.store.getPullStatus(ref.repo, ref.pull)),
      autoMergeDisabled: c.autoMergeDisabled,
      commentMethod: commentMergeMethod(c),
      serverMethod: this.d.config.automergeMethod,
      disableLabel: this.d.config.disableAutomergeLabel,
    };
    let decision = decideAutomerge(base);
    if (decision.kind === 'merge' && this.d.config.disableAutomergeLabel !== '') {
      let labels: string[];
      try {
        labels = await this.d.host.labels(ref.repo, ref.pull);
      } catch (e) {
        this.d.logger.error('Unable to get pull request labels so not automerging', {
          repo: ref.repo,
          pull: ref.pull,
          error: (e as Error).message,
        });
        return;
      }
      decision = decideAutomerge({ ...base, labels });
    }
    const log = this.d.logger.child({ repo: ref.repo, pull: ref.pull });
    if (decision.kind === 'skip') {
      if (settings.enabled) log.info('Not automerging', { reason: decision.reason });
      return;
    }
    // Commenting is not required for the merge: a lost comment is logged by comment().
    await this.comment(ref, AUTOMERGE_COMMENT);
    log.info('Automerging pull request', { method: decision.method || '(from the repository settings)' });
    // The host merges as Atlantis's client for it does, and deletes the source branch when asked.
    const error = await this.d.host.merge(ref.repo, ref.pull, {
      method: decision.method,
      deleteSourceBranch: settings.deleteSourceBranch,
      ...(ref.headSha ? { headSha: ref.headSha } : {}),
    });
    if (error !== undefined) {
      log.error('Automerging failed', { error });
      await this.comment(ref, automergeFailedComment(error));
    }
  }

  /** Posts on the PR as the apply's output (command `apply`); a lost comment is logged and counted. */
  private async comment(ref: PullRef, body: string): Promise<void> {
    try {
      await this.d.host.comment(ref.repo, ref.pull, body, { command: 'apply' });
    } catch (e) {
      this.d.metrics.githubRequestFailures.inc({ operation: 'create_comment' });
      this.d.logger.error('Could not post PR comment', { repo: ref.repo, pull: ref.pull, command: 'apply', error: (e as Error).message });
    }
  }
}
