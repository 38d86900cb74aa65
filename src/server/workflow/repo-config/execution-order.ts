// The order in which the projects of one plan or apply run, as Atlantis v0.47 orders them:
// `execution_order_group` (lowest first), `parallel_plan`/`parallel_apply` (default false:
// one project after another), `abort_on_execution_order_fail`, and `atlantis cancel`, which
// stops the PR's projects that have not started yet. The grouping is pure; the runner only
// sequences the callbacks it is given (the I/O lives in them).

/** A project to schedule: only its group matters here. */
export interface Scheduled {
  executionOrderGroup: number;
}

/**
 * The groups that run one after another. Projects of one group keep their order. As
 * Atlantis: when every project is in the same group and parallel is off, each project is a
 * group of its own, so a cancel can stop any project that has not started.
 */
export function executionGroups<T extends Scheduled>(items: readonly T[], parallel: boolean): T[][] {
  const byGroup = new Map<number, T[]>();
  for (const it of items) byGroup.set(it.executionOrderGroup, [...(byGroup.get(it.executionOrderGroup) ?? []), it]);
  const groups = [...byGroup.keys()].sort((a, b) => a - b).map((k) => byGroup.get(k) as T[]);
  if (groups.length === 1 && !parallel) return items.map((it) => [it]);
  return groups;
}

export interface OrderOptions<T, R> {
  /** parallel_plan / parallel_apply in effect for this command. */
  parallel: boolean;
  /** abort_on_execution_order_fail of the repo config (Atlantis honours it only in parallel mode). */
  abortOnFail: boolean;
  /** True once `atlantis cancel` was commented on this PR. */
  isCancelled: () => boolean;
  /**
   * Runs one project. `gate` is called by the callee when the project is about to start (after
   * it got its pool slot); false means it was cancelled meanwhile and must not start.
   */
  run: (item: T, gate: () => boolean) => Promise<R>;
  failed: (r: R) => boolean;
  /** The result of a project that was cancelled before it started. */
  cancelled: (item: T) => R;
  /** After each group (Atlantis updates the PR's project statuses there, which depends_on reads). */
  groupDone?: (items: T[], results: R[]) => void;
}

/** Runs the groups in order and returns every result (none for projects after an abort). */
export async function runInExecutionOrder<T extends Scheduled, R>(items: readonly T[], o: OrderOptions<T, R>): Promise<R[]> {
  const groups = executionGroups(items, o.parallel);
  const results: R[] = [];
  for (const [i, group] of groups.entries()) {
    // The first group always starts: a cancel only stops what comes after running work.
    if (i > 0 && o.isCancelled()) {
      for (const rest of groups.slice(i)) for (const it of rest) results.push(o.cancelled(it));
      break;
    }
    let groupResults: R[];
    if (o.parallel && group.length > 1) {
      groupResults = await Promise.all(group.map((it) => o.run(it, () => !o.isCancelled())));
    } else {
      groupResults = [];
      for (const it of group) groupResults.push(await o.run(it, () => true));
    }
    results.push(...groupResults);
    o.groupDone?.(group, groupResults);
    if (o.parallel && o.abortOnFail && groupResults.some(o.failed)) break;
  }
  return results;
}

/** The PRs on which `atlantis cancel` was commented while their commands run (in memory, as Atlantis). */
export class CancellationTracker {
  private readonly cancelled = new Set<string>();
  private key(repo: string, pull: number): string {
    return `${repo}#${pull}`;
  }
  cancel(repo: string, pull: number): void {
    this.cancelled.add(this.key(repo, pull));
  }
  isCancelled(repo: string, pull: number): boolean {
    return this.cancelled.has(this.key(repo, pull));
  }
  /** After each plan or apply run, and when the PR closes. */
  clear(repo: string, pull: number): void {
    this.cancelled.delete(this.key(repo, pull));
  }
}

/** Atlantis's project error for a project a cancel stopped (its text names `atlantis` whatever the executable). */
export const CANCELLED_PROJECT_ERROR = 'operation cancelled via `atlantis cancel` command';
