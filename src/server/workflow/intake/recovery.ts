// What a server does with work a dead server left in the journal: its own after a restart
// (same data dir, or same --replica-id on Redis), or, with replicas, a dead replica's when this
// one won the claim on its death (replicas/registry.ts: one survivor per death). Jobs that were
// running are reported interrupted once; commands accepted and never begun run here; begun
// ones are not run again (they may have commented, locked or applied) but are answered.
import type { Logger } from '../../../log.js';
import type { JobRecord, StateStore } from '../../locks/state-store.js';
import { crashedJobComment, interruptedCommandComment } from '../pr/messages.js';
import type { WorkItem } from './webhook-decision.js';

export interface RecoveryDeps {
  store: StateStore;
  logger: Logger;
  executableName: string;
  /** Posts a PR comment in the background (tracked by the server). */
  comment: (repo: string, pull: number, body: string) => void;
  lineOf: (item: WorkItem) => string;
  nameOf: (item: WorkItem) => string;
  /** Runs a never-begun command of this server again under its journal entry; false when draining (it stays journalled). */
  resume: (item: WorkItem, id: string) => boolean;
  /** Accepts a dead replica's never-begun command here, as a new webhook would be (journalled under this replica). */
  adopt: (item: WorkItem) => Promise<void>;
  /**
   * Releases what an API run without a pull request (pull <= 0) left: its locks, plans and
   * working copy. Nobody else ever would: no pull request closes, and none is told.
   */
  releasePullless?: (repo: string, pull: number) => Promise<void>;
}

/** The journal of `of` (undefined: this server's own): interrupted jobs, then accepted commands. */
export async function recoverJournal(d: RecoveryDeps, of?: string): Promise<void> {
  const unfinished = await d.store.unfinishedJobs(of);
  await reportInterruptedJobs(d, unfinished);
  await recoverAcceptedCommands(d, unfinished, of);
}

async function reportInterruptedJobs(d: RecoveryDeps, unfinished: JobRecord[]): Promise<void> {
  for (const j of unfinished) {
    await d.store.jobFinished(j.id, 'interrupted', 'server stopped while the job ran');
    // The lock stays, whatever the job, as Atlantis v0.47 leaves it when killed (it frees a
    // lock only when a plan fails in its own process): after an apply the state may be half
    // written; after a plan the killed terraform may hold its state lock, and the PR's next
    // plan takes the lock again (re-entrant). Only an apply's saved plan goes (stale); a plan
    // saved before an interrupted plan stays, as does the status that describes it.
    if (j.command === 'apply') await d.store.deletePlan(j.repo, j.pull, j.dir ?? '.', j.workspace ?? 'default');
    d.logger.warn('Found a job interrupted by a server crash', { jobId: j.id, repo: j.repo, pull: j.pull, command: j.command });
    if (j.pull <= 0) await d.releasePullless?.(j.repo, j.pull);
    else d.comment(j.repo, j.pull, crashedJobComment(j, d.executableName));
  }
}

/**
 * Never begun: run now (this server's, under their entry) or accepted here (a dead replica's,
 * then its entry removed: a crash in between runs it twice, which the PR's locks and plans make
 * harmless, rather than never). Begun: removed; one with no job left running (it died before
 * its first job, or after its jobs and before its result) is answered here.
 */
async function recoverAcceptedCommands(d: RecoveryDeps, unfinished: JobRecord[], of: string | undefined): Promise<void> {
  for (const c of await d.store.acceptedCommands(of)) {
    const item = c.payload as WorkItem;
    const info = { repo: c.repo, pull: c.pull, command: d.lineOf(item), commandId: c.id, ...(of ? { replica: of } : {}) };
    if (c.startedAt === undefined) {
      if (of === undefined) {
        if (d.resume(item, c.id)) d.logger.info('Running a command accepted before the server stopped', info);
        else d.logger.info('Command accepted before the server stopped stays journalled: the server is draining', info);
        continue;
      }
      d.logger.info('Running a command a dead replica had accepted', info);
      await d.adopt(item);
      await d.store.commandFinished(c.id, of);
      continue;
    }
    const began = Date.parse(c.startedAt);
    const jobs = unfinished.filter((j) => j.repo === c.repo && j.pull === c.pull && Date.parse(j.startedAt) >= began).length;
    await d.store.commandFinished(c.id, of);
    d.logger.warn('Found a command interrupted by a server crash', { ...info, interruptedJobs: jobs });
    if (jobs === 0) d.comment(c.repo, c.pull, interruptedCommandComment(d.nameOf(item), d.lineOf(item)));
  }
}
