// Runs the workflow steps of one project in its checked-out dir: Atlantis's default
// workflow (init + plan, apply) or the repo's custom one (init, plan, apply, run steps).
// Every process goes through the ProcessRunner, so it is supervised, logged per job and
// interrupted cleanly at a drain deadline.
import { appendFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { lstat } from 'node:fs/promises';
import path from 'node:path';
import type { PolicySets } from '../../policy/policy-sets.js';
import type { Distribution } from '../../terraform/distribution.js';
import type { ProcessRunner, RunResult } from '../../terraform/runner.js';
import type { GitCredsForInit } from '../../terraform/git-creds.js';
import { initArgs } from '../../terraform/init-lock-file.js';
import type { PluginCache } from '../../terraform/plugin-cache.js';
import type { TerraformBinaries } from '../../terraform/tf-install.js';
import { readRequiredVersions } from '../../terraform/tf-module.js';
import { chooseTfVersion } from '../../terraform/tf-versions.js';
import type { Step } from '../repo-config/types.js';

export interface ProjectRunContext {
  jobId: string;
  /** Absolute dir of the project inside the working copy. */
  projectDir: string;
  /** Repo-relative dir. */
  dir: string;
  workspace: string;
  projectName?: string;
  planFile: string;
  repo: string;
  pull: number;
  user: string;
  headSha: string;
  headRef: string;
  baseRef: string;
  /** Extra args from the comment (after `--`), appended to plan/apply/import/state. */
  commentArgs: string[];
  logFile: string;
  onOutput: (chunk: string) => void;
  /** `terraform_version` of the project in atlantis.yaml, as written. */
  terraformVersion?: string;
  /** `terraform_distribution` of the project; unset: --default-tf-distribution. */
  terraformDistribution?: Distribution;
  /** The server's policy sets, for a policy_check step. */
  policySets?: PolicySets;
}

/** How the project's terraform versions are found (tf-versions.ts, tf-install.ts). */
export interface TerraformChoice {
  binaries: TerraformBinaries;
  /** OpenTofu's binaries (a project's terraform_distribution, or --default-tf-distribution opentofu). */
  tofu?: TerraformBinaries;
  /** --default-tf-distribution; default terraform. */
  defaultDistribution?: Distribution;
  /** --default-tf-version, normalised. */
  defaultVersion?: string;
  /** --write-git-creds: credentials for the modules `terraform init` fetches. */
  gitCreds?: GitCredsForInit;
  /** --use-tf-plugin-cache: the server's provider cache. */
  pluginCache?: PluginCache;
}

/** Runs a `policy_check` step (policy/conftest-run.ts); its output is the results' JSON, as Atlantis's step gives it. */
export type PolicyCheckStepRunner = (
  step: { kind: 'policy_check'; extraArgs: string[] },
  c: ProjectRunContext,
  env: Record<string, string>,
) => Promise<RunResult>;

/** Runs terraform <sub...> -no-color <args...> for one project (with variables for this process only). */
type Tf = (sub: string[], args: string[], env?: Record<string, string>) => Promise<RunResult>;

/** The binary a project's terraform steps run, and the version run steps are told. */
interface Terraform {
  binary?: string;
  version?: string;
  distribution?: Distribution;
}

export interface StepsResult {
  ok: boolean;
  /** Output of the last terraform step (what the PR comment shows). */
  output: string;
  /** The whole output, for verbose comments. */
  log: string;
  interrupted: boolean;
  /** The failed step, when not ok. */
  failedStep?: string;
  /** Each step's output that was not empty (a policy_check step's always), in order, as Atlantis collects them. */
  outputs: string[];
}

/** Env of `run` steps, with the names Atlantis documents for custom workflows. */
function stepEnv(c: ProjectRunContext, t: Terraform = {}, binDir?: string): Record<string, string> {
  return {
    ...(t.version ? { ATLANTIS_TERRAFORM_VERSION: t.version } : {}),
    // As Atlantis: downloaded versions are on the PATH of run steps.
    ...(binDir ? { PATH: `${process.env.PATH ?? ''}${path.delimiter}${binDir}` } : {}),
    WORKSPACE: c.workspace,
    DIR: c.projectDir,
    PLANFILE: c.planFile,
    SHOWFILE: c.planFile.replace(/\.tfplan$/, '.json'),
    // Where the policy_check step writes its results (policy-check-step.ts), as Atlantis names it.
    POLICYCHECKFILE: path.join(
      c.projectDir,
      c.projectName ? `${c.projectName.replace(/\//g, '::')}-${c.workspace}-policyout.json` : `${c.workspace}-policyout.json`,
    ),
    PROJECT_NAME: c.projectName ?? '',
    PULL_NUM: String(c.pull),
    PULL_AUTHOR: c.user,
    HEAD_COMMIT: c.headSha,
    HEAD_BRANCH_NAME: c.headRef,
    BASE_BRANCH_NAME: c.baseRef,
    BASE_REPO_OWNER: c.repo.split('/')[0] ?? '',
    BASE_REPO_NAME: c.repo.split('/')[1] ?? '',
    USER_NAME: c.user,
    COMMENT_ARGS: c.commentArgs.join(','),
    TF_WORKSPACE: '', // unset: workspaces are selected explicitly, TF_WORKSPACE would override that
  };
}

/**
 * Whether terraform, started in `projectDir` with `env`, is on the `default` workspace: it reads
 * its workspace from `<data dir>/environment` (TF_WORKSPACE overrides it, TF_DATA_DIR moves the
 * data dir from `.terraform`), and with no such file it is on `default`. Anything else, or a
 * file of any kind there (a PR may commit one), is not certain: the caller selects.
 */
export async function onDefaultWorkspace(projectDir: string, env: Record<string, string | undefined>): Promise<boolean> {
  if (env.TF_WORKSPACE || env.TF_DATA_DIR) return false;
  try {
    await lstat(path.join(projectDir, '.terraform', 'environment'));
    return false;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ENOENT';
  }
}

/** What a command adds to the steps: `import`/`state rm` arguments, or `version`. */
export interface StepExtras {
  importArgs?: string[];
  stateRmArgs?: string[];
  version?: boolean;
  /** The steps are a custom import/state_rm stage: its import/state_rm steps run the command. */
  customStage?: boolean;
}

export class ProjectRunner {
  constructor(
    private readonly runner: ProcessRunner,
    private readonly terraform?: TerraformChoice,
    private readonly policyCheck?: PolicyCheckStepRunner,
  ) {}

  /**
   * The project's terraform, as Atlantis picks it; throws Atlantis's message when the version
   * cannot be had (not on disk and downloads off, a failed download, a bad checksum).
   */
  private async terraformFor(c: ProjectRunContext, needVersion: boolean): Promise<Terraform> {
    if (!this.terraform) return {};
    const distribution = c.terraformDistribution ?? this.terraform.defaultDistribution ?? 'terraform';
    const binaries = distribution === 'opentofu' ? this.terraform.tofu : this.terraform.binaries;
    if (!binaries) throw new Error('OpenTofu is not set up on this server');
    const choice = chooseTfVersion({
      projectVersion: c.terraformVersion,
      requiredVersions: c.terraformVersion === undefined ? await readRequiredVersions(c.projectDir, distribution) : [],
      // --default-tf-version names a version of the default distribution only.
      ...(distribution === (this.terraform.defaultDistribution ?? 'terraform') && this.terraform.defaultVersion
        ? { defaultVersion: this.terraform.defaultVersion }
        : {}),
    });
    if (choice.kind === 'invalid') throw new Error(choice.message);
    // The local binary's version is asked only when someone needs it (run steps, the plugin cache's rule).
    if (choice.kind === 'binary') {
      const binary = distribution === 'opentofu' ? binaries.localBinary : undefined;
      const version = needVersion || this.terraform.pluginCache ? await binaries.localVersion() : undefined;
      return { distribution, ...(binary ? { binary } : {}), ...(version ? { version } : {}) };
    }
    return { distribution, binary: await binaries.binaryFor(choice.version), version: choice.version };
  }

  async runSteps(steps: Step[], c: ProjectRunContext, extra?: StepExtras): Promise<StepsResult> {
    let log = '';
    let last = '';
    const env: Record<string, string> = {};
    let t: Terraform;
    try {
      t = await this.terraformFor(
        c,
        steps.some((s) => s.kind === 'run' || s.kind === 'env'),
      );
    } catch (e) {
      // Nothing runs with another terraform than the one asked for.
      const output = `${(e as Error).message}\n`;
      mkdirSync(path.dirname(c.logFile), { recursive: true, mode: 0o700 });
      appendFileSync(c.logFile, output, { mode: 0o600 });
      c.onOutput(output);
      return { ok: false, output, log: output, interrupted: false, failedStep: 'terraform', outputs: [] };
    }
    const outputs: string[] = [];
    const tf: Tf = (sub, args, vars) => this.tf(c, t, sub, args, vars);
    for (const step of steps) {
      if (step.kind === 'plan' || step.kind === 'apply' || (extra?.customStage && (step.kind === 'import' || step.kind === 'state_rm'))) {
        const ws = await this.selectWorkspace(tf, c);
        log += ws.output;
        if (ws.interrupted || ws.exitCode !== 0)
          return { ok: false, output: ws.output, log, interrupted: ws.interrupted, failedStep: 'workspace', outputs };
      }
      const r = await this.runStep(step, c, env, tf, t, extra);
      if (step.kind !== 'policy_check') log += r.output;
      if (step.kind === 'env') continue;
      const shown = step.kind !== 'run' || step.output !== 'hide';
      if (shown && (r.output !== '' || step.kind === 'policy_check')) outputs.push(r.output);
      if (shown && step.kind !== 'policy_check' && (step.kind !== 'run' || steps.every((s) => s.kind === 'run' || s.kind === 'env')))
        last = r.output;
      if (r.interrupted) return { ok: false, output: r.output, log, interrupted: true, failedStep: step.kind, outputs };
      if (r.exitCode !== 0) return { ok: false, output: r.output, log, interrupted: false, failedStep: step.kind, outputs };
    }
    if (extra?.version) {
      const r = await tf(['version'], []);
      return { ok: r.exitCode === 0, output: r.output, log: log + r.output, interrupted: r.interrupted, outputs };
    }
    if ((extra?.importArgs || extra?.stateRmArgs) && !extra.customStage) {
      const ws = await this.selectWorkspace(tf, c);
      log += ws.output;
      if (ws.interrupted || ws.exitCode !== 0)
        return { ok: false, output: ws.output, log, interrupted: ws.interrupted, failedStep: 'workspace', outputs };
      const [sub, args] = extra.importArgs
        ? [['import'], ['-input=false', ...c.commentArgs, ...extra.importArgs]]
        : [
            ['state', 'rm'],
            [...c.commentArgs, ...extra.stateRmArgs!],
          ];
      const r = await tf(sub, args);
      log += r.output;
      return {
        ok: r.exitCode === 0,
        output: r.output,
        log,
        interrupted: r.interrupted,
        failedStep: r.exitCode === 0 ? undefined : sub.join(' '),
        outputs,
      };
    }
    return { ok: true, output: last, log, interrupted: false, outputs };
  }

  /** True when the project dir has been initialised (e.g. a working copy kept across a restart). */
  isInitialised(projectDir: string): boolean {
    return existsSync(path.join(projectDir, '.terraform'));
  }

  private async runStep(
    step: Step,
    c: ProjectRunContext,
    env: Record<string, string>,
    tf: Tf,
    t: Terraform,
    extra?: StepExtras,
  ): Promise<RunResult> {
    const runEnv = () => ({ ...stepEnv(c, t, this.terraform?.binaries.binDir), ...env });
    switch (step.kind) {
      case 'init': {
        // As Atlantis: a lock file left by an earlier init (not in git) goes, and without one init upgrades.
        const args = await initArgs(c.projectDir, step.extraArgs, (file: string) => this.gitTracked(c, file));
        const creds = this.terraform?.gitCreds;
        const init = () => (creds ? creds.during((env) => tf(['init'], args, env)) : tf(['init'], args));
        const cache = this.terraform?.pluginCache;
        return cache ? cache.init(t.distribution ?? 'terraform', t.version, init, { projectDir: c.projectDir, args }) : init();
      }
      case 'policy_check':
        if (!this.policyCheck || !c.policySets)
          return {
            exitCode: 1,
            signal: null,
            durationMs: 0,
            output: 'policy checks are not enabled on this server (--enable-policy-checks)\n',
            interrupted: false,
            killed: false,
          };
        return this.policyCheck({ kind: 'policy_check', extraArgs: step.extraArgs }, c, {
          ...stepEnv(c, t, this.terraform?.binaries.binDir),
          ...env,
        });
      case 'plan':
        mkdirSync(path.dirname(c.planFile), { recursive: true });
        return tf(['plan'], ['-input=false', `-out=${c.planFile}`, ...step.extraArgs, ...c.commentArgs]);
      case 'apply':
        return tf(['apply'], ['-input=false', ...step.extraArgs, ...c.commentArgs, c.planFile]);
      case 'show': {
        const r = await tf(['show'], ['-json', ...step.extraArgs, c.planFile]);
        if (r.exitCode === 0) writeFileSync(stepEnv(c).SHOWFILE!, r.output);
        return { ...r, output: '' };
      }
      case 'version':
        return tf(['version'], step.extraArgs);
      // In a custom import/state_rm stage, as Atlantis: extra_args, then the comment's args.
      case 'import':
        if (extra?.customStage && extra.importArgs)
          return tf(['import'], ['-input=false', ...step.extraArgs, ...c.commentArgs, ...extra.importArgs]);
        return { exitCode: 0, signal: null, durationMs: 0, output: '', interrupted: false, killed: false };
      case 'state_rm':
        if (extra?.customStage && extra.stateRmArgs)
          return tf(['state', 'rm'], [...step.extraArgs, ...c.commentArgs, ...extra.stateRmArgs]);
        return { exitCode: 0, signal: null, durationMs: 0, output: '', interrupted: false, killed: false };
      case 'env': {
        if (step.value !== undefined) {
          env[step.name] = step.value;
          return { exitCode: 0, signal: null, durationMs: 0, output: '', interrupted: false, killed: false };
        }
        const r = await this.runner.run({
          jobId: c.jobId,
          command: step.shell ?? 'sh',
          args: [...(step.shellArgs ?? ['-c']), step.command ?? ''],
          cwd: c.projectDir,
          env: runEnv(),
        });
        if (r.exitCode === 0) env[step.name] = r.output.trim();
        return { ...r, output: '' };
      }
      case 'run':
        // A repo owner's own command, as Atlantis runs it: through a shell, in the project dir.
        return this.runner.run({
          jobId: c.jobId,
          command: step.shell ?? 'sh',
          args: [...(step.shellArgs ?? ['-c']), step.command],
          cwd: c.projectDir,
          env: runEnv(),
          logFile: c.logFile,
          onOutput: c.onOutput,
        });
    }
  }

  /**
   * Selects the project's workspace, `default` included, before terraform touches state: a
   * `.terraform/environment` committed in the PR would otherwise choose the workspace (and so
   * the state) a `default` project plans and applies against. Atlantis asks `workspace show`
   * first; we select, so no text terraform prints can be mistaken for the answer, unless
   * terraform is on `default` without doubt (onDefaultWorkspace): then no process is started.
   */
  private async selectWorkspace(tf: Tf, c: ProjectRunContext): Promise<RunResult> {
    if (c.workspace === 'default' && (await onDefaultWorkspace(c.projectDir, process.env)))
      return { exitCode: 0, signal: null, durationMs: 0, output: '', interrupted: false, killed: false };
    return tf(['workspace', 'select'], ['-or-create', c.workspace]);
  }

  /** Whether git tracks `file` in the project dir (`git ls-files`, as Atlantis's IsFileTracked). */
  private async gitTracked(c: ProjectRunContext, file: string): Promise<boolean | undefined> {
    const r = await this.runner.run({ jobId: c.jobId, command: 'git', args: ['ls-files', '--', file], cwd: c.projectDir });
    return r.exitCode === 0 ? r.output.trim() !== '' : undefined;
  }

  /** terraform <subcommand...> -no-color <args...> in the project dir. */
  private tf(c: ProjectRunContext, t: Terraform, subcommand: string[], args: string[], env?: Record<string, string>): Promise<RunResult> {
    const cache = this.terraform?.pluginCache?.env();
    return this.runner.run({
      jobId: c.jobId,
      ...(env || cache ? { env: { ...cache, ...env } } : {}),
      ...(t.binary ? { command: t.binary } : {}),
      args: [...subcommand, '-no-color', ...args],
      cwd: c.projectDir,
      logFile: c.logFile,
      onOutput: c.onOutput,
    });
  }
}
