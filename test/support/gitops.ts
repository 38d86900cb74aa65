// What GitOps tools see of an AtlantisDeployment, through their own libraries (hack/kstatus):
// kstatus's status.Compute, Flux's WaitForSet, and the Argo CD health script in gopher-lua.
// Plus a recorder that keeps every version of watched objects as the API server delivered
// them, so each phase a tool could see is judged, not the few a poll happens to catch.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { Informer, type KubeObject } from '../../src/k8s/informer.js';
import type { KubeClientConfig } from '../../src/k8s/kubeconfig.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const HEALTH_LUA = path.join(repoRoot, 'deploy', 'argocd', 'health.lua');

let toolPromise: Promise<string> | undefined;

/** The hack/kstatus binary: built by its build.sh when missing (minutes cold), else the cached one. */
export function gitopsTool(): Promise<string> {
  toolPromise ??= (async () => {
    const r = await execa('bash', [path.join(repoRoot, 'hack', 'kstatus', 'build.sh')], { reject: false, timeout: 1_500_000 });
    if (r.exitCode !== 0) throw new Error(`hack/kstatus/build.sh failed (${r.exitCode}):\n${r.stderr}`);
    const bin = String(r.stdout).trim().split('\n').pop() ?? '';
    if (!fs.existsSync(bin)) throw new Error(`hack/kstatus/build.sh printed no binary: ${r.stdout}`);
    return bin;
  })();
  return toolPromise;
}

export interface ToolResult {
  status: string;
  message: string;
}

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'gitops-objects-'));
let fileSeq = 0;

async function runOn(args: (file: string) => string[], obj: unknown): Promise<ToolResult> {
  const file = path.join(scratch, `object-${++fileSeq}.json`);
  fs.writeFileSync(file, JSON.stringify(obj));
  const r = await execa(await gitopsTool(), args(file), { reject: false, timeout: 30_000 });
  fs.rmSync(file, { force: true });
  if (r.exitCode !== 0) throw new Error(`kstatus ${args(file).join(' ')} failed (${r.exitCode}): ${r.stderr}`);
  return JSON.parse(String(r.stdout)) as ToolResult;
}

/** kstatus's verdict on an object: InProgress, Current, Failed, Terminating. */
export const kstatusOf = (obj: unknown): Promise<ToolResult> => runOn((f) => ['kstatus', f], obj);
/** deploy/argocd/health.lua run as Argo CD runs it: Healthy, Progressing, Degraded, Suspended. */
export const argoHealthOf = (obj: unknown): Promise<ToolResult> => runOn((f) => ['argo-health', HEALTH_LUA, f], obj);

export interface FluxWaitResult {
  exitCode: number;
  result: 'Current' | 'Failed';
  error?: string;
  startedAt: number;
  /** By the process's own clock, just before it exited. */
  endedAt: number;
  elapsedSeconds: number;
}

/** Flux's WaitForSet on one AtlantisDeployment, with kustomize-controller's 5 s interval. */
export async function fluxWait(o: { kubeconfig: string; namespace: string; name: string; timeoutS: number }): Promise<FluxWaitResult> {
  const args = ['flux-wait', '--kubeconfig', o.kubeconfig, '--namespace', o.namespace, '--name', o.name, '--timeout', `${o.timeoutS}s`];
  const r = await execa(await gitopsTool(), args, { reject: false, timeout: (o.timeoutS + 60) * 1000 });
  if (r.exitCode !== 0 && r.exitCode !== 1) throw new Error(`flux-wait failed to run (${r.exitCode}): ${r.stderr}`);
  const out = JSON.parse(String(r.stdout)) as {
    result: 'Current' | 'Failed';
    error?: string;
    startedAt: string;
    endedAt: string;
    elapsedSeconds: number;
  };
  return { ...out, exitCode: r.exitCode ?? -1, startedAt: Date.parse(out.startedAt), endedAt: Date.parse(out.endedAt) };
}

export interface Seen<T> {
  /** Date.now() when the event arrived (after the change happened). */
  at: number;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  obj: T;
}

export interface Recorder<T> {
  seen: Seen<T>[];
  stop(): void;
}

/** Every version of the objects at `listPath` from now on, in the API server's order. */
export async function recordObjects<T extends KubeObject>(
  kc: KubeClientConfig,
  listPath: string,
  opts: { labelSelector?: string; fieldSelector?: string } = {},
): Promise<Recorder<T>> {
  const seen: Seen<T>[] = [];
  const informer = new Informer<T>(kc, listPath, { ...opts, silenceTimeoutMs: 30_000 });
  informer.onEvent((type, obj) => void seen.push({ at: Date.now(), type, obj: structuredClone(obj) }));
  await informer.start();
  return { seen, stop: () => informer.stop() };
}

/** Seconds since `t0`, as `+12.3s`, for timelines. */
export const since = (t0: number, t: number): string => `+${((t - t0) / 1000).toFixed(1)}s`;
