// Records the atlantis.db fixtures of test/fixtures/atlantis-db/ (its README tells the story)
// from a real Atlantis v0.47 run against the GitHub stand-in. Never part of `make test`; it
// needs an Atlantis binary built beforehand, outside this repository:
//
//   ATLANTIS_REFERENCE_BIN=/path/to/atlantis node --import tsx test/support/atlantis-db-recorder.ts
//
// Atlantis binds every interface, so the recorder runs itself again in a network namespace of
// its own with only loopback (`unshare -rn`), as the differential recorder does. It also
// scrapes Atlantis's /metrics after a plan and an apply (test/fixtures/atlantis-v0.47/metrics.txt).
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { serverEnv, sharedFlags } from './atlantis-differential.js';
import { type Ctx, REPOS_YAML, createLocksRepos, open, runLocksScenario, settled } from './atlantis-db-scenario.js';
import { SCENARIO_BOT } from './atlantis-scenario.js';
import { waitForHttp } from './cli.js';
import { type FileChanges, createTestRepo } from './git-repos.js';
import { GitHubStandin } from './github-standin.js';

const OUT = fileURLToPath(new URL('../fixtures/atlantis-db/', import.meta.url));
const METRICS_OUT = fileURLToPath(new URL('../fixtures/atlantis-v0.47/metrics.txt', import.meta.url));
/** No secret: the stand-in's token, which Atlantis writes into the clone URLs it records. */
export const RECORDER_TOKEN = 'fixture-token-not-a-secret';

/** The monorepo of the many-locks file: this many project dirs, this many per pull request. */
export const MANY_DIRS = 320;
export const MANY_PER_PULL = 40;

async function record(): Promise<void> {
  const bin = process.env.ATLANTIS_REFERENCE_BIN;
  if (!bin) throw new Error('set ATLANTIS_REFERENCE_BIN to an Atlantis v0.47 binary built beforehand');
  if (!Object.values(networkInterfaces()).every((a) => (a ?? []).every((x) => x.internal))) {
    const r = spawnSync(
      'unshare',
      ['-rn', 'sh', '-c', 'ip link set lo up && exec "$@"', 'sh', process.execPath, ...process.execArgv, ...process.argv.slice(1)],
      {
        stdio: 'inherit',
      },
    );
    process.exit(r.status ?? 1);
  }
  const gh = await GitHubStandin.start({ botLogin: SCENARIO_BOT, tls: true, token: RECORDER_TOKEN });
  const repos = await createLocksRepos(gh);
  const mono: Record<string, string> = { 'README.md': '# mono\n' };
  for (let i = 0; i < MANY_DIRS; i++) mono[`stacks/s${String(i).padStart(3, '0')}/main.tf`] = '# v1\n';
  repos.set('acme/mono', await createTestRepo({ fullName: 'acme/mono', files: mono }));
  gh.addRepo('acme/mono', { cloneUrl: gh.gitUrl('acme/mono'), bareDir: repos.get('acme/mono')!.bareDir });

  const work = mkdtempSync(path.join(tmpdir(), 'atlantis-db-rec-'));
  const reposYaml = path.join(work, 'repos.yaml');
  writeFileSync(reposYaml, REPOS_YAML);
  const port = 4141;
  const url = `http://127.0.0.1:${port}`;
  const version = spawnSync(bin, ['version'], { encoding: 'utf8' }).stdout.trim();
  const runs: Array<{ dataDir: string; log: string }> = [];

  async function withAtlantis(name: string, fn: (c: Ctx) => Promise<void>): Promise<void> {
    const dataDir = path.join(work, `${name}-data`);
    const home = path.join(work, `${name}-home`);
    mkdirSync(home, { recursive: true });
    const flags = [...sharedFlags(gh, dataDir, url, port), '--repo-config', reposYaml];
    const child = spawn(bin as string, flags, { env: serverEnv(gh, home), stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    child.stdout.on('data', (d: Buffer) => (log += d.toString()));
    child.stderr.on('data', (d: Buffer) => (log += d.toString()));
    try {
      await waitForHttp(`${url}/healthz`, 30_000);
      await fn({ gh, url, repos });
    } finally {
      child.kill('SIGTERM');
      if (child.exitCode === null && child.signalCode === null) await new Promise((r) => child.once('exit', r));
      runs.push({ dataDir, log });
      writeFileSync(path.join(tmpdir(), `atlantis-db-rec-${name}.log`), log);
    }
    mkdirSync(OUT, { recursive: true });
    copyFileSync(path.join(dataDir, 'atlantis.db'), path.join(OUT, `${name}.db`));
    console.log(`wrote ${name}.db`);
  }

  // The small file: the cases one by one.
  await withAtlantis('atlantis-locks', async (c) => {
    await runLocksScenario(c);
    const metrics = await fetch(`${url}/metrics`).then((r) => r.text());
    // Go's runtime and process collectors say nothing about Atlantis: left out.
    const kept = metrics.split('\n').filter((l) => !/^(# (HELP|TYPE) )?(go|process)_/.test(l));
    writeFileSync(
      METRICS_OUT,
      `# Scraped from ${version} (${url}/metrics) after the plans and the apply of test/support/atlantis-db-recorder.ts\n# Only the atlantis_* and tally_* series are kept here; Go's runtime (go_*) and process (process_*) collectors are left out.\n${kept.join('\n')}`,
    );
  });

  // The many-locks file: MANY_DIRS project dirs locked by MANY_DIRS / MANY_PER_PULL pull requests, and the apply lock on.
  await withAtlantis('atlantis-many-locks', async (c) => {
    for (let p = 0; p < MANY_DIRS / MANY_PER_PULL; p++) {
      const files: FileChanges = {};
      for (let i = p * MANY_PER_PULL; i < (p + 1) * MANY_PER_PULL; i++)
        files[`stacks/s${String(i).padStart(3, '0')}/main.tf`] = `# v2 ${i}\n`;
      const from = gh.statuses.length;
      const sha = await open(c, 'acme/mono', 100 + p, `batch-${p}`, files, `user${p}`);
      console.log(`pull ${100 + p}: ${await settled(c, sha, 'atlantis/plan', from)}`);
    }
    const r = await fetch(`${url}/apply/lock`, { method: 'POST' });
    if (!r.ok) throw new Error(`POST /apply/lock: ${r.status}`);
  });

  const clone = runs.flatMap((r) => r.log.split('\n')).filter((l) => /level":"(error|warn)/.test(l));
  if (clone.length) console.log(`Atlantis's warnings and errors:\n${clone.slice(0, 40).join('\n')}`);
  console.log(`recorded with ${version}`);
  await gh.close();
  for (const r of repos.values()) rmSync(path.resolve(r.bareDir, '..', '..', '..'), { recursive: true, force: true });
  rmSync(work, { recursive: true, force: true });
}

await record();
