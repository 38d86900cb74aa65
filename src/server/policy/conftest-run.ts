// The `policy_check` step: conftest run once per policy set over the plan's `show -json`, as
// Atlantis v0.47's ConfTestExecutorWorkflow runs it (`conftest test -p <set path> <show file>
// --no-color <extra args>` in the project dir). A set passes when conftest exits 0 and reports
// no failure; its output (with the show file's path replaced by `<redacted plan file>`) is what
// the comment shows and what approvals cover. As in Atlantis, conftest failing to run at all (a
// policy that does not compile, a missing dir) fails the set with conftest's own error as its
// output, so nothing is applied until the policy is fixed or an owner approves.
import { type PolicySetResult, hasFailures, newPolicySetResult } from './policy-results.js';
import type { PolicySets } from './policy-sets.js';

export interface ConftestProcess {
  exitCode: number | null;
  output: string;
  interrupted: boolean;
}

export interface ConftestRunInput {
  conftest: string;
  sets: PolicySets;
  /** The plan's `show -json` file. */
  inputFile: string;
  /** The project dir (conftest's working dir). */
  workdir: string;
  /** The step's extra_args, each split on whitespace and quotes (not through a shell). */
  extraArgs: readonly string[];
  run: (command: string, args: string[], cwd: string) => Promise<ConftestProcess>;
}

export type ConftestRunResult = { interrupted: true } | { interrupted: false; results: PolicySetResult[] };

/** Splits one configured argument as a shell would split words: whitespace, '...' and "..." (no expansion). */
export function splitArg(value: string): string[] {
  const out: string[] = [];
  let word = '';
  let started = false;
  let quote: '"' | "'" | undefined;
  for (let i = 0; i < value.length; i++) {
    const c = value[i]!;
    if (quote) {
      if (c === quote) quote = undefined;
      else if (c === '\\' && quote === '"' && i + 1 < value.length) word += value[++i];
      else word += c;
      continue;
    }
    if (c === '"' || c === "'") {
      quote = c;
      started = true;
    } else if (c === '\\' && i + 1 < value.length) {
      word += value[++i];
      started = true;
    } else if (/\s/.test(c)) {
      if (started) out.push(word);
      word = '';
      started = false;
    } else {
      word += c;
      started = true;
    }
  }
  // An unclosed quote: the value as one argument, as Atlantis passes a value it cannot split.
  if (quote) return [value];
  if (started) out.push(word);
  return out;
}

export const REDACTED_PLAN_FILE = '<redacted plan file>';

export async function runConftest(i: ConftestRunInput): Promise<ConftestRunResult> {
  const results: PolicySetResult[] = [];
  for (const set of i.sets.policySets) {
    const args = ['test', '-p', set.path, i.inputFile, '--no-color', ...i.extraArgs.flatMap(splitArg)];
    const r = await i.run(i.conftest, args, i.workdir);
    if (r.interrupted) return { interrupted: true };
    const passed = r.exitCode === 0 && !hasFailures(r.output);
    const output = r.output.split(i.inputFile).join(REDACTED_PLAN_FILE);
    results.push(newPolicySetResult(set.name, output, passed, set.approveCount, set.policyItemRegex));
  }
  return { interrupted: false, results };
}
