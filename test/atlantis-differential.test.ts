// The differential test: our server, run through the scenario of test/support/atlantis-scenario.ts
// (PR events and comments on two repos), must post the same comments and set the same commit
// statuses, in the same order, as Atlantis v0.47 did, step by step. What Atlantis did is in
// test/fixtures/atlantis-v0.47/scenario.json: facts recorded from the real Atlantis, normalised
// (URLs, data dir, SHAs, ids, times) by the same code that normalises our server's run.
// Where we differ on purpose (documented in docs/server.md), deliberate-differences.json next to
// it says why and rewrites Atlantis's lines of that step into ours; the rest of the step must
// still match exactly, and the rewrite must still be needed. ATLANTIS_DIFF_REPORT=<file> writes
// every step's line diff as markdown. The comparing half is in test/support/atlantis-differential.ts;
// test/atlantis-differential-replicas.test.ts runs it against three replicas sharing one Redis.
//
// Recording the fixtures (never part of `make test`; needs an Atlantis binary built beforehand):
//
//   Build Atlantis v0.47 outside this repo from its source (here the bare mirror of
//   runatlantis/atlantis, commit 078d0a8 = v0.47.0 + 7 commits, incl. the v0.47.1 fix):
//     mkdir -p /tmp/atlantis-ref/src && cd /tmp/atlantis-ref/src
//     git -C <mirror> archive HEAD $(git -C <mirror> ls-tree --name-only HEAD | grep -v '^runatlantis.io$') | tar -x
//       (the snapshot lacks one image under runatlantis.io/, so that tree is left out)
//     nice -n 19 go build -ldflags "-X main.version=0.47.0 -X main.commit=078d0a82081e8a2b1645268c5f5bfec578246fa9 \
//       -X main.date=2026-08-22T00:51:47Z" -o /tmp/atlantis-ref/atlantis .
//   Then, from this repo:
//     ATLANTIS_REFERENCE_BIN=/tmp/atlantis-ref/atlantis node --import tsx test/atlantis-differential.test.ts --record
//
// Atlantis listens on every interface (it has no bind address), so the recorder runs itself in
// a network namespace of its own with only loopback (`unshare -rn`). Both servers get the same
// flags (ours also --bind-address, which Atlantis lacks): the stand-in as a GitHub Enterprise
// host over HTTPS with a self-signed certificate, TF_CLI_CONFIG_FILE unset,
// CHECKPOINT_DISABLE=1, --tf-download=false, terraform from PATH.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import path from 'node:path';
import { GitHubStandin } from './support/github-standin.js';
import { type NormaliseContext, SCENARIO_BOT, createScenarioRepos, removeScenarioRepos, runScenario } from './support/atlantis-scenario.js';
import { FIXTURE, FIXTURE_DIR, type Fixture, compareWithAtlantis, serverEnv, sharedFlags } from './support/atlantis-differential.js';
import { waitForHttp } from './support/cli.js';

/** Replaces the token and the scenario's secrets, which the fixture must never hold. */
function flagsForFixture(flags: string[], gh: GitHubStandin, ctx: NormaliseContext): string[] {
  return flags.map((f) =>
    f === gh.token
      ? '<token>'
      : ctx.dataDirs.includes(f)
        ? '<data-dir>'
        : f === ctx.serverUrl
          ? '<atlantis-url>'
          : f === gh.hostPort
            ? '<github-host>'
            : f,
  );
}

// ---- recorder ---------------------------------------------------------------------------

function onlyLoopback(): boolean {
  return Object.values(networkInterfaces()).every((addrs) => (addrs ?? []).every((a) => a.internal));
}

async function record(): Promise<void> {
  const bin = process.env.ATLANTIS_REFERENCE_BIN;
  if (!bin || !existsSync(bin)) throw new Error('set ATLANTIS_REFERENCE_BIN to an Atlantis v0.47 binary built beforehand (see the header)');
  if (!onlyLoopback()) {
    // Atlantis binds every interface: run again in a network namespace that has only loopback.
    const r = spawnSync(
      'unshare',
      ['-rn', 'sh', '-c', 'ip link set lo up && exec "$@"', 'sh', process.execPath, ...process.execArgv, ...process.argv.slice(1)],
      { stdio: 'inherit' },
    );
    process.exit(r.status ?? 1);
  }
  const gh = await GitHubStandin.start({ botLogin: SCENARIO_BOT, tls: true });
  const scenario = await createScenarioRepos(gh);
  const dataDir = mkdtempSync(path.join(tmpdir(), 'atlantis-ref-data-'));
  const home = mkdtempSync(path.join(tmpdir(), 'atlantis-ref-home-'));
  const port = 4141;
  const serverUrl = `http://127.0.0.1:${port}`;
  const flags = sharedFlags(gh, dataDir, serverUrl, port);
  const env = serverEnv(gh, home);
  const version = spawnSync(bin, ['version'], { env, encoding: 'utf8' }).stdout.trim();
  let log = '';
  const child = spawn(bin, flags, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.on('data', (d: Buffer) => (log += d.toString()));
  child.stderr.on('data', (d: Buffer) => (log += d.toString()));
  try {
    await waitForHttp(`${serverUrl}/healthz`, 30_000).catch((e: Error) => {
      throw new Error(`${e.message}\n${log}`);
    });
    const ctx: NormaliseContext = { serverUrl, githubUrl: gh.url, dataDirs: [dataDir] };
    const steps = await runScenario({
      gh,
      scenario,
      serverUrls: [serverUrl],
      ctx,
      expect: (step) => ({ comments: step.comments, statuses: step.statuses ?? 0 }),
      waitMs: 180_000,
      quietMs: 4000,
      onStep: (r) => console.log(`${r.name}: ${r.events.length} events`),
    });
    const fixture: Fixture = { recordedFrom: version, flags: flagsForFixture(flags, gh, ctx), steps };
    mkdirSync(FIXTURE_DIR, { recursive: true });
    writeFileSync(FIXTURE, `${JSON.stringify(fixture, null, 2)}\n`);
    writeFileSync(path.join(tmpdir(), 'atlantis-ref-log.txt'), log);
    console.log(`wrote ${FIXTURE}; Atlantis's log in ${path.join(tmpdir(), 'atlantis-ref-log.txt')}`);
    const unknown = gh.calls.filter((call) => call.status === 404).map((call) => `${call.method} ${call.path}`);
    if (unknown.length > 0) console.log(`404s from the stand-in:\n${[...new Set(unknown)].join('\n')}`);
  } finally {
    child.kill('SIGTERM');
    if (child.exitCode === null && child.signalCode === null) await new Promise((r) => child.once('exit', r));
    await gh.close();
    removeScenarioRepos(scenario);
    for (const d of [dataDir, home]) rmSync(d, { recursive: true, force: true });
  }
}

// ---- test ---------------------------------------------------------------------------

if (process.argv.includes('--record')) await record();
else compareWithAtlantis({ title: 'our server posts what Atlantis v0.47 posts', replicas: 1, net: '127.0.18' });
