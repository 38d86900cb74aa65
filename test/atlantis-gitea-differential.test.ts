// The Gitea differential: our server, run through the GitHub differential's scenario
// (test/support/atlantis-scenario.ts STEPS: autoplan, plan, apply, locks, unlock, errors, close)
// on a real Gitea v1.27.3, must write to Gitea the same comments and commit statuses, in the
// same order, as Atlantis v0.47 wrote to a real Gitea of the same version in the same scenario.
// What Atlantis did is test/fixtures/atlantis-v0.47-gitea/scenario.json (facts, normalised by
// the same code as our run: URLs, data dir, SHAs, ids, times); where we differ on purpose,
// deliberate-differences.json beside it says why and rewrites Atlantis's lines into ours. The
// comparing half is test/support/atlantis-gitea-differential.ts (also run with two replicas on
// one Redis by test/atlantis-gitea-replicas.test.ts).
//
// Recording the fixture (never part of `make test`; an Atlantis v0.47 binary built beforehand
// from its source, outside this repository, as the header of test/atlantis-differential.test.ts
// says):
//
//   ATLANTIS_REFERENCE_BIN=/path/to/atlantis node --import tsx test/atlantis-gitea-differential.test.ts --record
//
// Atlantis binds every interface, so the recorder runs itself in a network namespace with only
// loopback (`unshare -rn`): Gitea on 127.0.241.1, the API recorder on .2, Atlantis on
// 127.0.0.1:4141 with the flags in the fixture, TF_CLI_CONFIG_FILE unset,
// CHECKPOINT_DISABLE=1, --tf-download=false, terraform from PATH. A step is over once its
// comments and statuses came and nothing was written to Gitea for 4 s.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import path from 'node:path';
import {
  GITEA_FIXTURE,
  GITEA_FIXTURE_DIR,
  type GiteaFixture,
  type GiteaNormaliseContext,
  giteaEvents,
  giteaFlags,
  giteaServerEnv,
  hookServer,
  normaliseGitea,
  runGiteaScenario,
  startGiteaWorld,
} from './support/atlantis-gitea-scenario.js';
import { compareGiteaWithAtlantis } from './support/atlantis-gitea-differential.js';
import { waitForHttp } from './support/cli.js';

function onlyLoopback(): boolean {
  return Object.values(networkInterfaces()).every((addrs) => (addrs ?? []).every((a) => a.internal));
}

async function record(): Promise<void> {
  const bin = process.env.ATLANTIS_REFERENCE_BIN;
  if (!bin || !existsSync(bin)) throw new Error('set ATLANTIS_REFERENCE_BIN to an Atlantis v0.47 binary built beforehand (see the header)');
  if (!onlyLoopback()) {
    const r = spawnSync(
      'unshare',
      ['-rn', 'sh', '-c', 'ip link set lo up && exec "$@"', 'sh', process.execPath, ...process.execArgv, ...process.argv.slice(1)],
      { stdio: 'inherit' },
    );
    process.exit(r.status ?? 1);
  }
  // Atlantis's token had every scope when the fixture was recorded.
  const w = await startGiteaWorld('127.0.241.1', '127.0.241.2', { botScopes: ['all'] });
  const dataDir = mkdtempSync(path.join(tmpdir(), 'atlantis-ref-data-'));
  const home = mkdtempSync(path.join(tmpdir(), 'atlantis-ref-home-'));
  const serverUrl = 'http://127.0.0.1:4141';
  const flags = giteaFlags(w, dataDir, serverUrl, 4141);
  const env = giteaServerEnv(home);
  const version = spawnSync(bin, ['version'], { env, encoding: 'utf8' }).stdout.trim();
  let log = '';
  const child = spawn(bin, flags, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.on('data', (d: Buffer) => (log += d.toString()));
  child.stderr.on('data', (d: Buffer) => (log += d.toString()));
  try {
    await waitForHttp(`${serverUrl}/healthz`, 30_000).catch((e: Error) => {
      throw new Error(`${e.message}\n${log}`);
    });
    await hookServer(w, `${serverUrl}/events`);
    const ctx: GiteaNormaliseContext = { serverUrl, dataDirs: [dataDir], w };
    const startup = giteaEvents(w.recorder.calls, ctx).reads;
    const steps = await runGiteaScenario({
      w,
      ctx,
      expect: (step) => ({ comments: step.comments, statuses: step.statuses ?? 0 }),
      waitMs: 180_000,
      quietMs: 4000,
      onStep: (r) => console.log(`${r.name}: ${r.events.length} events`),
    });
    const fixture: GiteaFixture & { startup: string[] } = {
      recordedFrom: version,
      flags: flags.map((f) => normaliseGitea(f, ctx)),
      startup,
      steps,
    };
    mkdirSync(GITEA_FIXTURE_DIR, { recursive: true });
    writeFileSync(GITEA_FIXTURE, `${JSON.stringify(fixture, null, 2)}\n`);
    writeFileSync(path.join(tmpdir(), 'atlantis-gitea-ref-log.txt'), log);
    console.log(`wrote ${GITEA_FIXTURE}; Atlantis's log in ${path.join(tmpdir(), 'atlantis-gitea-ref-log.txt')}`);
  } finally {
    child.kill('SIGTERM');
    if (child.exitCode === null && child.signalCode === null) await new Promise((r) => child.once('exit', r));
    await w.close();
    for (const d of [dataDir, home]) rmSync(d, { recursive: true, force: true });
  }
}

if (process.argv.includes('--record')) await record();
else compareGiteaWithAtlantis({ title: 'our server writes to a real Gitea what Atlantis v0.47 writes', replicas: 1, net: '127.0.241' });
