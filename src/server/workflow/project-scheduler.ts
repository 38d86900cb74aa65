// When the projects of a PR's commands run: the pool that bounds how many run at once
// across all PRs (--parallel-pool-size) and the mutex that keeps two commands of one PR off
// the same project.
import { KeyedMutex, Semaphore } from './concurrency.js';

export interface ProjectKey {
  repo: string;
  pull: number;
  dir: string;
  workspace: string;
}

export class ProjectScheduler {
  private readonly pool: Semaphore;
  private readonly projectMutex = new KeyedMutex();

  constructor(poolSize: number) {
    this.pool = new Semaphore(poolSize);
  }

  /** Serializes per project of this PR and bounds parallelism by the pool. */
  guarded<T>(k: ProjectKey, fn: () => Promise<T>): Promise<T> {
    return this.projectMutex.run(`${k.repo}#${k.pull}#${k.dir}#${k.workspace}`, () => this.pool.run(fn));
  }
}
