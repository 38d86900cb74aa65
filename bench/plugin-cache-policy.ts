// Two figures of issue 35, each against a baseline measured in the same run, with real servers:
// - plugin-cache: the plan of a project with one provider (the test provider from a provider
//   network mirror on loopback, docs/test-tools.md; the project commits its lock file), through
//   a server with the plugin cache (the default) and one with --use-tf-plugin-cache=false; each
//   run is a new PR, so a new working copy whose init installs the provider again: from the
//   cache, or from the mirror. Figures: median wall time per plan, the ratio, and the provider
//   bytes each plan downloaded. Target: with the cache no byte downloaded once warm, and no slower.
// - policy-check: the plan of a project through a server with --enable-policy-checks (one policy
//   set, real conftest) and one without; the difference is the policy check's cost per project
//   (terraform show, conftest, the comment and status). Target: it costs less than the plan
//   itself (ratio under 2x), a ratio so that it holds on a loaded machine as on an idle one.
import { mkdtempSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { NO_FORBIDDEN_REGO } from '../test/support/atlantis-policy-scenario.js';
import { type CliProcess, startCli, waitForHttp } from '../test/support/cli.js';
import { terraformConfig } from '../test/support/git-repos.js';
import { goTool } from '../test/support/go-tools.js';
import { type ProviderMirror, fixtureConfig, startProviderMirror } from '../test/support/provider-mirror.js';
import { TERRAFORM } from '../test/support/terraform.js';
import { runTfOk } from '../test/support/tf-cli.js';
import { type WorkflowEnv, createWorkflowEnv } from '../test/support/workflow-env.js';
import { percentile, printTable } from './support.js';

const RUNS = 7;
const med = (xs: number[]): number =>
  percentile(
    [...xs].sort((a, b) => a - b),
    50,
  );

interface Server {
  name: string;
  p: CliProcess;
  url: string;
}

async function startServer(
  env: WorkflowEnv,
  name: string,
  host: string,
  root: string,
  extra: string[],
  childEnv: NodeJS.ProcessEnv,
): Promise<Server> {
  const p = startCli(env.serverArgs(path.join(root, `data-${name}`), host, ['--disable-autoplan', ...extra]), childEnv);
  const url = `http://${host}:4141`;
  await waitForHttp(`${url}/healthz`, 30_000).catch((e: Error) => {
    throw new Error(`${e.message}\n${p.output()}`);
  });
  return { name, p, url };
}

/** Opens a PR changing `files`, comments `atlantis plan -d dir` and waits for `comments` answers; returns the wall time. */
async function planThrough(
  env: WorkflowEnv,
  s: Server,
  pull: number,
  dir: string,
  files: Record<string, string>,
  comments: number,
): Promise<number> {
  await env.openPull(s.url, pull, `bench-${s.name}-${pull}`, files);
  const before = env.commentsOn(pull).length;
  const t0 = performance.now();
  await env.comment(s.url, pull, `atlantis plan -d ${dir}`);
  const end = Date.now() + 180_000;
  while (Date.now() < end && env.commentsOn(pull).length < before + comments) await new Promise((r) => setTimeout(r, 5));
  const ms = performance.now() - t0;
  const got = env.commentsOn(pull).slice(before);
  if (got.length < comments || !/^Ran Plan for dir/.test(got[0]?.body ?? '') || /Plan Error/.test(got[0]?.body ?? ''))
    throw new Error(`${s.name}: the plan of #${pull} did not succeed:\n${got.map((c) => c.body.slice(0, 1500)).join('\n---\n')}`);
  return ms;
}

export async function benchPluginCache(): Promise<{ ok: boolean }> {
  const root = mkdtempSync(path.join(tmpdir(), 'bench-plugin-cache-'));
  let mirror: ProviderMirror | undefined;
  const env = await createWorkflowEnv({ ghHost: '127.0.78.1' });
  const servers: Server[] = [];
  try {
    mirror = await startProviderMirror({ host: '127.0.78.5' });
    const cli = mirror.writeCliConfig(path.join(root, 'cli.tfrc'));
    const lockDir = mkdtempSync(path.join(root, 'lock-'));
    writeFileSync(path.join(lockDir, 'main.tf'), fixtureConfig());
    await runTfOk(TERRAFORM, ['init', '-input=false', '-no-color'], lockDir, mirror.env(cli));
    const lock = readFileSync(path.join(lockDir, '.terraform.lock.hcl'), 'utf8');
    const childEnv = mirror.env(cli);
    servers.push(await startServer(env, 'cache', '127.0.78.2', root, [], childEnv));
    servers.push(await startServer(env, 'nocache', '127.0.78.3', root, ['--use-tf-plugin-cache=false'], childEnv));
    const rows: Array<{ run: number; server: string; ms: number; bytes: number }> = [];
    let pull = 1000;
    // Run 0 warms the cache (and both servers' first-time costs); runs 1.. are measured.
    for (let run = 0; run <= RUNS; run++) {
      for (const s of servers) {
        const dir = `p${pull}`;
        const since = mirror.requests.length;
        const ms = await planThrough(
          env,
          s,
          pull,
          dir,
          { [`${dir}/main.tf`]: fixtureConfig({ value: `v${pull}` }), [`${dir}/.terraform.lock.hcl`]: lock },
          1,
        );
        if (run > 0) rows.push({ run, server: s.name, ms, bytes: mirror.counts(since).archiveBytes });
        pull++;
      }
    }
    const of = (name: string) => rows.filter((r) => r.server === name);
    printTable(
      'plan of a one-provider project through the server, a new PR each run (ms; provider bytes downloaded)',
      of('cache').map((r, i) => ({
        run: r.run,
        'with cache': r.ms.toFixed(0),
        'bytes (cache)': r.bytes,
        'without cache': of('nocache')[i]!.ms.toFixed(0),
        'bytes (no cache)': of('nocache')[i]!.bytes,
      })),
    );
    const withCache = med(of('cache').map((r) => r.ms));
    const without = med(of('nocache').map((r) => r.ms));
    const warmBytes = of('cache').reduce((n, r) => n + r.bytes, 0);
    const ok = warmBytes === 0 && withCache <= without;
    console.log(
      `median plan with the plugin cache: ${withCache.toFixed(0)} ms, without: ${without.toFixed(0)} ms, ratio with/without ${(withCache / without).toFixed(2)}x; ` +
        `provider bytes per plan: ${warmBytes / RUNS} with the cache, ${med(of('nocache').map((r) => r.bytes))} without (target: 0 with the cache, no slower): ${ok ? 'OK' : 'MISSED'}`,
    );
    return { ok };
  } finally {
    for (const s of servers) s.p.child.kill('SIGTERM');
    await Promise.all(servers.map((s) => s.p.exited));
    await env.close();
    await mirror?.close();
    rmSync(root, { recursive: true, force: true });
  }
}

export async function benchPolicyCheck(): Promise<{ ok: boolean }> {
  const root = mkdtempSync(path.join(tmpdir(), 'bench-policy-'));
  const env = await createWorkflowEnv({ ghHost: '127.0.79.1' });
  const servers: Server[] = [];
  try {
    const bin = path.join(root, 'bin');
    mkdirSync(bin);
    symlinkSync(await goTool('conftest'), path.join(bin, 'conftest'));
    mkdirSync(path.join(root, 'config', 'policies', 'no-forbidden'), { recursive: true });
    writeFileSync(path.join(root, 'config', 'policies', 'no-forbidden', 'policy.rego'), NO_FORBIDDEN_REGO);
    const repos = path.join(root, 'config', 'repos.yaml');
    writeFileSync(repos, 'repos:\n  - id: /.*/\npolicies:\n  policy_sets:\n    - name: no-forbidden\n      path: policies/no-forbidden\n');
    const childEnv = { PATH: `${bin}:${process.env.PATH ?? ''}` };
    servers.push(await startServer(env, 'policy', '127.0.79.2', root, ['--enable-policy-checks', '--repo-config', repos], childEnv));
    servers.push(await startServer(env, 'plain', '127.0.79.3', root, [], childEnv));
    const rows: Array<{ server: string; ms: number }> = [];
    let pull = 2000;
    for (let run = 0; run <= RUNS; run++) {
      for (const s of servers) {
        const dir = `q${pull}`;
        const ms = await planThrough(
          env,
          s,
          pull,
          dir,
          { [`${dir}/main.tf`]: terraformConfig({ marker: `m${pull}` }) },
          s.name === 'policy' ? 2 : 1,
        );
        if (run > 0) rows.push({ server: s.name, ms });
        pull++;
      }
    }
    const withPolicy = rows.filter((r) => r.server === 'policy').map((r) => r.ms);
    const plain = rows.filter((r) => r.server === 'plain').map((r) => r.ms);
    printTable(
      'plan of one project through the server with and without policy checks (ms, to the last comment)',
      withPolicy.map((ms, i) => ({
        run: i + 1,
        'with policy checks': ms.toFixed(0),
        without: plain[i]!.toFixed(0),
        overhead: (ms - plain[i]!).toFixed(0),
      })),
    );
    const overhead = med(withPolicy) - med(plain);
    const ratio = med(withPolicy) / med(plain);
    const ok = ratio < 2;
    console.log(
      `median plan with policy checks: ${med(withPolicy).toFixed(0)} ms, without: ${med(plain).toFixed(0)} ms; policy check overhead per project: ${overhead.toFixed(0)} ms, ratio ${ratio.toFixed(2)}x (target < 2x: the check costs less than the plan): ${ok ? 'OK' : 'MISSED'}`,
    );
    return { ok };
  } finally {
    for (const s of servers) s.p.child.kill('SIGTERM');
    await Promise.all(servers.map((s) => s.p.exited));
    await env.close();
    rmSync(root, { recursive: true, force: true });
  }
}
