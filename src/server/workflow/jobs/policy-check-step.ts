// The `policy_check` step of a project's policy_check stage: conftest (the policies'
// conftest_version, found or downloaded, policy/conftest-install.ts) run over the plan's
// `show -json` once per policy set (policy/conftest-run.ts), through the project's job (its log,
// its interruption at a drain deadline). As Atlantis's step, its output is the results as JSON,
// also written to `<project dir>/<workspace>-policyout.json` (named after the project when it
// has a name) for run steps that come after it.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ConftestBinaries } from '../../policy/conftest-install.js';
import { runConftest } from '../../policy/conftest-run.js';
import type { PolicySetResult } from '../../policy/policy-results.js';
import type { ProcessRunner, RunResult } from '../../terraform/runner.js';
import type { PolicyCheckStepRunner, ProjectRunContext } from './project-runner.js';

/** Atlantis's GetPolicyCheckResultFileName. */
export function policyOutFileName(c: Pick<ProjectRunContext, 'projectName' | 'workspace'>): string {
  return c.projectName ? `${c.projectName.replace(/\//g, '::')}-${c.workspace}-policyout.json` : `${c.workspace}-policyout.json`;
}

/** The results as Atlantis's step prints them (its PolicySetResult JSON field names). */
export function resultsJson(results: readonly PolicySetResult[]): string {
  return JSON.stringify(
    results.map((r) => ({
      PolicySetName: r.policySetName,
      PolicyOutput: r.policyOutput,
      Passed: r.passed,
      ReqApprovalCount: r.reqApprovalCount,
      Approvals: r.approvals.length > 0 ? r.approvals.map((a) => ({ Approver: a.approver, Hashes: a.hashes })) : null,
      Hashes: r.hashes,
      PolicyItemRegex: r.policyItemRegex,
    })),
  );
}

/** Reads a step output back into results when it is the policy_check step's JSON; undefined otherwise. */
export function parseResultsJson(output: string): PolicySetResult[] | undefined {
  let v: unknown;
  try {
    v = JSON.parse(output);
  } catch {
    return undefined;
  }
  if (!Array.isArray(v)) return undefined;
  const out: PolicySetResult[] = [];
  for (const x of v) {
    if (typeof x !== 'object' || x === null) return undefined;
    const r = x as Record<string, unknown>;
    if (typeof r.PolicySetName !== 'string' || typeof r.Passed !== 'boolean') return undefined;
    out.push({
      policySetName: r.PolicySetName,
      policyOutput: typeof r.PolicyOutput === 'string' ? r.PolicyOutput : '',
      passed: r.Passed,
      reqApprovalCount: typeof r.ReqApprovalCount === 'number' ? r.ReqApprovalCount : 1,
      approvals: Array.isArray(r.Approvals)
        ? r.Approvals.map((a) => ({
            approver: String((a as Record<string, unknown>).Approver ?? ''),
            hashes: ((a as Record<string, unknown>).Hashes as string[]) ?? [],
          }))
        : [],
      hashes: Array.isArray(r.Hashes) ? (r.Hashes as string[]) : [],
      policyItemRegex: typeof r.PolicyItemRegex === 'string' ? r.PolicyItemRegex : '',
    });
  }
  return out;
}

const failed = (output: string): RunResult => ({ exitCode: 1, signal: null, durationMs: 0, output, interrupted: false, killed: false });

export function policyCheckStep(deps: { conftest: ConftestBinaries; runner: ProcessRunner }): PolicyCheckStepRunner {
  return async (step, c, env) => {
    const sets = c.policySets;
    if (!sets) return failed('no policies are configured (the policies: block of --repo-config)\n');
    let conftest: string;
    try {
      conftest = await deps.conftest.binaryFor(sets.version);
    } catch (e) {
      return failed(`${(e as Error).message}\n`);
    }
    const started = Date.now();
    const showFile = c.planFile.replace(/\.tfplan$/, '.json');
    const r = await runConftest({
      conftest,
      sets,
      inputFile: showFile,
      workdir: c.projectDir,
      extraArgs: step.extraArgs,
      run: async (command, args, cwd) => {
        const p = await deps.runner.run({ jobId: c.jobId, command, args, cwd, env, logFile: c.logFile, onOutput: c.onOutput });
        return { exitCode: p.exitCode, output: p.output, interrupted: p.interrupted };
      },
    });
    if (r.interrupted) return { ...failed(''), exitCode: null, interrupted: true };
    const json = resultsJson(r.results);
    writeFileSync(path.join(c.projectDir, policyOutFileName(c)), json, { mode: 0o600 });
    return { exitCode: 0, signal: null, durationMs: Date.now() - started, output: json, interrupted: false, killed: false };
  };
}
