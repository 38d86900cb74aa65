// What the web page lists as running and recent jobs: this replica's own (live, from memory)
// and every replica's from the store's journal. Pure.
import type { JobRecord } from '../../locks/state-store.js';
import type { JobView } from './jobs.js';

/** Job ids are UUIDs; anything else is no job (and never reaches the store or the disk). */
export const isJobId = (id: string): boolean => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id);

export function viewOfRecord(r: JobRecord): JobView {
  return {
    id: r.id,
    command: r.command,
    repo: r.repo,
    pull: r.pull,
    project: r.project ?? null,
    dir: r.dir ?? '',
    workspace: r.workspace ?? '',
    startedAt: new Date(r.startedAt),
    finishedAt: r.finishedAt ? new Date(r.finishedAt) : null,
    status: r.result ?? 'running',
  };
}

/**
 * Both lists, newest first. A job in both is shown as this replica sees it: its memory is
 * ahead of the journal (it finished, the journal write is on its way).
 */
export function mergeJobs(local: readonly JobView[], shared: readonly JobRecord[]): { running: JobView[]; recent: JobView[] } {
  const byId = new Map<string, JobView>();
  for (const r of shared) byId.set(r.id, viewOfRecord(r));
  for (const j of local) byId.set(j.id, j);
  const all = [...byId.values()].sort((a, b) => b.startedAt.getTime() - a.startedAt.getTime() || (a.id < b.id ? 1 : -1));
  return { running: all.filter((j) => j.status === 'running'), recent: all.filter((j) => j.status !== 'running') };
}
