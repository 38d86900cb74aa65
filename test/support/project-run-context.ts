// A ProjectRunContext for tests that drive the real ProjectRunner on a project dir of their own.
import path from 'node:path';
import type { ProjectRunContext } from '../../src/server/workflow/jobs/project-runner.js';

/** The context of a run of `jobId` in `dir` (the project at the checkout's root), workspace `workspace`. */
export function projectRunContext(dir: string, jobId: string, workspace = 'default'): ProjectRunContext {
  return {
    jobId,
    projectDir: dir,
    dir: '.',
    workspace,
    planFile: path.join(dir, `${workspace}.tfplan`),
    repo: 'acme/infra',
    pull: 1,
    user: 'dev',
    headSha: 'abc',
    headRef: 'feat',
    baseRef: 'main',
    commentArgs: [],
    logFile: path.join(dir, 'job.log'),
    onOutput: () => undefined,
  };
}
