// Runs terraform or tofu for the tool tests: a clean env (the machine's TF_CLI_CONFIG_FILE
// names a file that does not exist), the caller's extra env on top, output kept for asserts.
import { execa } from 'execa';

export interface TfRun {
  exitCode: number;
  stdout: string;
  stderr: string;
  /** Wall time of the run in ms. */
  ms: number;
}

/** Runs `bin args` in `cwd`; never throws on a non-zero exit. */
export async function runTf(
  bin: string,
  args: string[],
  cwd: string,
  env: Record<string, string> = {},
  timeoutMs = 180_000,
): Promise<TfRun> {
  const base: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('TF_')) base[k] = v;
  const start = Date.now();
  const r = await execa(bin, args, {
    cwd,
    env: { ...base, TF_IN_AUTOMATION: '1', CHECKPOINT_DISABLE: '1', ...env },
    extendEnv: false,
    reject: false,
    timeout: timeoutMs,
  });
  return { exitCode: r.exitCode ?? 1, stdout: String(r.stdout ?? ''), stderr: String(r.stderr ?? ''), ms: Date.now() - start };
}

/** Like runTf, but throws with the output when the exit code is not 0. */
export async function runTfOk(
  bin: string,
  args: string[],
  cwd: string,
  env: Record<string, string> = {},
  timeoutMs?: number,
): Promise<TfRun> {
  const r = await runTf(bin, args, cwd, env, timeoutMs);
  if (r.exitCode !== 0) throw new Error(`${bin} ${args.join(' ')} exited ${r.exitCode}:\n${r.stdout}\n${r.stderr}`);
  return r;
}
