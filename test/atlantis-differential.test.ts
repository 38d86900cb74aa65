// The differential test: our server, run through the scenario of test/support/atlantis-scenario.ts
// (PR events and comments on two repos), must post the same comments and set the same commit
// statuses, in the same order, as Atlantis v0.47 did, step by step. What Atlantis did is in
// test/fixtures/atlantis-v0.47/scenario.json: facts recorded from the real Atlantis, normalised
// (URLs, data dir, SHAs, ids, times) by the same code that normalises our server's run.
// Where we differ on purpose (documented in docs/server.md), deliberate-differences.json next to
// it says why and rewrites Atlantis's lines of that step into ours; the rest of the step must
// still match exactly, and the rewrite must still be needed. ATLANTIS_DIFF_REPORT=<file> writes
// every step's line diff as markdown.
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
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { GitHubStandin } from './support/github-standin.js';
import {
  type NormaliseContext,
  type ScenarioRepos,
  SCENARIO_BOT,
  SCENARIO_WEBHOOK_SECRET,
  STEPS,
  type StepRecord,
  createScenarioRepos,
  removeScenarioRepos,
  lineDiff,
  runScenario,
  terraformOnPath,
} from './support/atlantis-scenario.js';
import { type CliProcess, startCli, waitForHttp } from './support/cli.js';

const FIXTURE_DIR = fileURLToPath(new URL('./fixtures/atlantis-v0.47/', import.meta.url));
const FIXTURE = path.join(FIXTURE_DIR, 'scenario.json');

interface Fixture {
  recordedFrom: string;
  flags: string[];
  steps: StepRecord[];
}

/** The flags both servers get (Atlantis's names; ours are the same). */
function sharedFlags(gh: GitHubStandin, dataDir: string, serverUrl: string, port: number): string[] {
  return [
    'server',
    '--port',
    String(port),
    '--atlantis-url',
    serverUrl,
    '--data-dir',
    dataDir,
    '--gh-hostname',
    gh.hostPort,
    '--gh-user',
    SCENARIO_BOT,
    '--gh-token',
    gh.token,
    '--gh-webhook-secret',
    SCENARIO_WEBHOOK_SECRET,
    '--repo-allowlist',
    '*',
    '--tf-download=false',
  ];
}

/** The environment of either server: TF_CLI_CONFIG_FILE unset, the stand-in's certificate trusted. */
function serverEnv(gh: GitHubStandin, home: string): NodeJS.ProcessEnv {
  const ca = gh.caFile!;
  return {
    PATH: process.env.PATH,
    HOME: home,
    CHECKPOINT_DISABLE: '1',
    SSL_CERT_FILE: ca,
    GIT_SSL_CAINFO: ca,
    NODE_EXTRA_CA_CERTS: ca,
  };
}

/** Replaces the token and the scenario's secrets, which the fixture must never hold. */
function flagsForFixture(flags: string[], gh: GitHubStandin, ctx: NormaliseContext): string[] {
  return flags.map((f) =>
    f === gh.token
      ? '<token>'
      : f === ctx.dataDir
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
    const ctx: NormaliseContext = { serverUrl, githubUrl: gh.url, dataDir };
    const steps = await runScenario({
      gh,
      scenario,
      serverUrl,
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

/** One line per status or reaction, one per line of a comment, so that a failing step reads as a line diff. */
function lines(r: StepRecord | undefined): string[] {
  if (!r) return ['(step not run)'];
  const out: string[] = [];
  for (const e of r.events) {
    if (e.kind === 'comment' || e.kind === 'comment-edit') {
      out.push(e.kind === 'comment' ? `comment on #${e.pull}:` : 'comment edited to:');
      for (const l of e.body.split('\n')) out.push(`  | ${l}`);
    } else if (e.kind === 'status')
      out.push(`status ${JSON.stringify(e.context)} ${e.state} ${JSON.stringify(e.description)} ${JSON.stringify(e.target_url)}`);
    else if (e.kind === 'reaction') out.push(`reaction ${e.content}`);
    else out.push(`${e.method} ${e.path}`);
  }
  return out;
}

/** Steps where we differ from Atlantis on purpose: why, and how Atlantis's lines become ours. */
const DELIBERATE_DIFFERENCES = path.join(FIXTURE_DIR, 'deliberate-differences.json');

interface DeliberateDifference {
  why: string;
  /** [pattern, replacement] applied in order to the step's lines joined by newlines (flags gmu). */
  rewrite: Array<[string, string]>;
}

/** Atlantis's lines of one step with a deliberate difference applied. */
function rewriteLines(expected: string[], d: DeliberateDifference): string[] {
  let text = expected.join('\n');
  for (const [pattern, replacement] of d.rewrite) text = text.replace(new RegExp(pattern, 'gmu'), replacement);
  return text.split('\n');
}

function markdownReport(steps: Array<{ name: string; did: string; expected: string[]; got: string[] }>): string {
  const differing = steps.filter((s) => lineDiff(s.expected, s.got).some((l) => !l.startsWith('  ')));
  const out = [
    '# Our server vs Atlantis v0.47, step by step',
    '',
    `${steps.length - differing.length} of ${steps.length} steps match. Lines: \`-\` only Atlantis posted it, \`+\` only we did.`,
    '',
  ];
  for (const s of steps) {
    const diff = lineDiff(s.expected, s.got);
    const same = diff.every((l) => l.startsWith('  '));
    out.push(`## ${s.name}: ${same ? 'same' : 'DIFFERS'}`, '', s.did, '');
    if (!same) out.push('```diff', ...diff, '```', '');
  }
  return out.join('\n');
}

/** How many commands the server has logged as over. */
function commandEnds(log: string): number {
  return log.match(/"msg":"Command (finished|failed)"/g)?.length ?? 0;
}

function compare(): void {
  const fixture = JSON.parse(readFileSync(FIXTURE, 'utf8')) as Fixture;
  const deliberate = JSON.parse(readFileSync(DELIBERATE_DIFFERENCES, 'utf8')) as Record<string, DeliberateDifference>;
  const expected = new Map(fixture.steps.map((s) => [s.name, s]));
  const HOST = '127.0.18.1';
  const SERVER_HOST = '127.0.18.2';
  let gh: GitHubStandin;
  let scenario: ScenarioRepos;
  let server: CliProcess;
  let ours: StepRecord[] = [];
  const tempDirs: string[] = [];

  describe('our server posts what Atlantis v0.47 posts', () => {
    before(async () => {
      terraformOnPath();
      gh = await GitHubStandin.start({ botLogin: SCENARIO_BOT, tls: true, host: HOST });
      scenario = await createScenarioRepos(gh);
      const dataDir = mkdtempSync(path.join(tmpdir(), 'ato-diff-data-'));
      const home = mkdtempSync(path.join(tmpdir(), 'ato-diff-home-'));
      tempDirs.push(dataDir, home);
      const serverUrl = `http://${SERVER_HOST}:4141`;
      server = startCli([...sharedFlags(gh, dataDir, serverUrl, 4141), '--bind-address', SERVER_HOST], serverEnv(gh, home));
      await waitForHttp(`${serverUrl}/healthz`).catch((e: Error) => {
        server.child.kill('SIGKILL');
        throw new Error(`${e.message}\n${server.output()}`);
      });
      ours = await runScenario({
        gh,
        scenario,
        serverUrl,
        ctx: { serverUrl, githubUrl: gh.url, dataDir },
        expect: (step) => {
          const events = expected.get(step.name)?.events ?? [];
          return {
            comments: events.filter((e) => e.kind === 'comment').length,
            statuses: events.filter((e) => e.kind === 'status').length,
          };
        },
        waitMs: 60_000,
        quietMs: 1500,
        // Our server logs the end of each command it runs; a step whose command never ends
        // that way (a parse error, a close) is over when its comments and statuses came.
        finishedSince: () => {
          const before = commandEnds(server.output());
          return () => commandEnds(server.output()) > before;
        },
        onStep: (r) => console.log(`# ${r.name}: ${r.events.length} events`),
      });
      // ATLANTIS_DIFF_REPORT=<file>: also write every step's diff as markdown.
      const reportFile = process.env.ATLANTIS_DIFF_REPORT;
      if (reportFile) {
        const steps = STEPS.map((st) => {
          const got = ours.find((r) => r.name === st.name);
          return { name: st.name, did: got?.did ?? '', expected: lines(expected.get(st.name)), got: lines(got) };
        });
        writeFileSync(reportFile, markdownReport(steps));
      }
    });
    after(async () => {
      server?.child.kill('SIGTERM');
      await server?.exited;
      await gh?.close();
      if (scenario) removeScenarioRepos(scenario);
      for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
    });

    it('the fixture covers every step of the scenario, in order; deliberate differences name steps', () => {
      assert.deepEqual(
        fixture.steps.map((s) => s.name),
        STEPS.map((s) => s.name),
      );
      for (const name of Object.keys(deliberate)) assert.ok(expected.has(name), `deliberate-differences.json names no step "${name}"`);
    });
    for (const step of STEPS) {
      it(`step "${step.name}"`, () => {
        const got = ours.find((r) => r.name === step.name);
        const atlantis = lines(expected.get(step.name));
        const d = deliberate[step.name];
        if (d !== undefined) {
          const plain = lineDiff(atlantis, lines(got)).some((l) => !l.startsWith('  '));
          assert.ok(plain, `step "${step.name}" now matches Atlantis v0.47 as it is: remove it from deliberate-differences.json`);
        }
        const diff = lineDiff(d ? rewriteLines(atlantis, d) : atlantis, lines(got));
        const differs = diff.some((l) => !l.startsWith('  '));
        assert.ok(
          !differs,
          `step "${step.name}" (${got?.did ?? ''}) differs from Atlantis v0.47 (- Atlantis, + ours):\n${diff.join('\n')}`,
        );
      });
    }
  });
}

if (process.argv.includes('--record')) await record();
else compare();
