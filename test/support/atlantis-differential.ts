// The comparing half of the Atlantis differential test (test/atlantis-differential.test.ts has
// the recorder and the fixture's story): runs the scenario against our server, one process or
// several replicas sharing one Redis with the webhooks spread round-robin over them, and checks
// each step's comments and statuses against what Atlantis v0.47 posted. Several replicas must
// look like one Atlantis: the same fixture, the same deliberate differences, nothing else.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { GitHubStandin } from './github-standin.js';
import {
  type NormaliseContext,
  type ScenarioRepos,
  SCENARIO_BOT,
  SCENARIO_WEBHOOK_SECRET,
  STEPS,
  type Step,
  type StepRecord,
  createScenarioRepos,
  removeScenarioRepos,
  lineDiff,
  runScenario,
  terraformOnPath,
} from './atlantis-scenario.js';
import { type CliProcess, startCli, waitForHttp } from './cli.js';
import { type RedisServer, replicaArgs, startRedisServer } from './redis-server.js';

export const FIXTURE_DIR = fileURLToPath(new URL('../fixtures/atlantis-v0.47/', import.meta.url));
export const FIXTURE = path.join(FIXTURE_DIR, 'scenario.json');

export interface Fixture {
  recordedFrom: string;
  flags: string[];
  steps: StepRecord[];
}

/** What one scenario needs besides the stand-in and the servers' shared flags. */
export interface PreparedScenario {
  scenario: ScenarioRepos;
  /** More flags, the same for both servers (after sharedFlags). */
  flags: string[];
  /** Dirs put first on both servers' PATH (the tools a scenario runs). */
  pathDirs: string[];
  /** Strings of this run (a config dir) and their placeholders in both records. */
  replace: Array<[string, string]>;
  cleanup(): void;
}

/** A differential scenario: its steps, its fixture files and how its repos and files are made. */
export interface ScenarioSpec {
  fixture: string;
  deliberate: string;
  steps: Step[];
  prepare(gh: GitHubStandin): Promise<PreparedScenario>;
}

/** The GitHub differential's scenario (atlantis-scenario.ts). */
export const GITHUB_SCENARIO: ScenarioSpec = {
  fixture: FIXTURE,
  deliberate: path.join(FIXTURE_DIR, 'deliberate-differences.json'),
  steps: STEPS,
  prepare: async (gh) => {
    const scenario = await createScenarioRepos(gh);
    return { scenario, flags: [], pathDirs: [], replace: [], cleanup: () => removeScenarioRepos(scenario) };
  },
};

/** The flags both servers get (Atlantis's names; ours are the same). */
export function sharedFlags(gh: GitHubStandin, dataDir: string, serverUrl: string, port: number): string[] {
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
export function serverEnv(gh: GitHubStandin, home: string, pathDirs: string[] = []): NodeJS.ProcessEnv {
  const ca = gh.caFile!;
  return {
    PATH: [...pathDirs, process.env.PATH ?? ''].join(':'),
    HOME: home,
    CHECKPOINT_DISABLE: '1',
    SSL_CERT_FILE: ca,
    GIT_SSL_CAINFO: ca,
    NODE_EXTRA_CA_CERTS: ca,
  };
}
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

export interface CompareOptions {
  /** The describe block's title. */
  title: string;
  /** Server processes: 1, or several sharing one Redis (webhooks round-robin over them). */
  replicas: number;
  /** Loopback prefix (`a.b.c`) of this run's addresses: .1 the stand-in, .2 onwards the servers. */
  net: string;
  /** The scenario (default the GitHub differential's). */
  spec?: ScenarioSpec;
}

/** How many commands the servers have logged as over, all together. */
function commandEnds(servers: CliProcess[]): number {
  return servers.reduce((n, s) => n + (s.output().match(/"msg":"Command (finished|failed)"/g)?.length ?? 0), 0);
}

export function compareWithAtlantis(o: CompareOptions): void {
  const spec = o.spec ?? GITHUB_SCENARIO;
  const fixture = JSON.parse(readFileSync(spec.fixture, 'utf8')) as Fixture;
  const deliberate = JSON.parse(readFileSync(spec.deliberate, 'utf8')) as Record<string, DeliberateDifference>;
  const expected = new Map(fixture.steps.map((s) => [s.name, s]));
  let gh: GitHubStandin;
  let prepared: PreparedScenario | undefined;
  let redis: RedisServer | undefined;
  const servers: CliProcess[] = [];
  let ours: StepRecord[] = [];
  const tempDirs: string[] = [];

  describe(o.title, () => {
    before(async () => {
      terraformOnPath();
      gh = await GitHubStandin.start({ botLogin: SCENARIO_BOT, tls: true, host: `${o.net}.1` });
      prepared = await spec.prepare(gh);
      if (o.replicas > 1) redis = await startRedisServer();
      // Behind a Service every replica has the same public URL; here the first one's address.
      const serverUrl = `http://${o.net}.2:4141`;
      const urls: string[] = [];
      const dataDirs: string[] = [];
      for (let i = 0; i < o.replicas; i++) {
        const host = `${o.net}.${i + 2}`;
        const dataDir = mkdtempSync(path.join(tmpdir(), 'ato-diff-data-'));
        const home = mkdtempSync(path.join(tmpdir(), 'ato-diff-home-'));
        tempDirs.push(dataDir, home);
        dataDirs.push(dataDir);
        const flags = [...sharedFlags(gh, dataDir, serverUrl, 4141), ...prepared.flags, '--bind-address', host];
        if (redis) flags.push(...replicaArgs(redis, `r${i + 1}`));
        const server = startCli(flags, serverEnv(gh, home, prepared.pathDirs));
        servers.push(server);
        urls.push(`http://${host}:4141`);
        await waitForHttp(`http://${host}:4141/healthz`).catch((e: Error) => {
          throw new Error(`${e.message}\n${server.output()}`);
        });
      }
      ours = await runScenario({
        gh,
        scenario: prepared.scenario,
        steps: spec.steps,
        serverUrls: urls,
        ctx: { serverUrl, githubUrl: gh.url, dataDirs, replace: prepared.replace },
        expect: (step) => {
          const events = expected.get(step.name)?.events ?? [];
          return {
            comments: events.filter((e) => e.kind === 'comment').length,
            statuses: events.filter((e) => e.kind === 'status').length,
          };
        },
        waitMs: 60_000,
        quietMs: 1500,
        // Our servers log the end of each command they run; a step whose command never ends
        // that way (a parse error, a close) is over when its comments and statuses came.
        finishedSince: () => {
          const before = commandEnds(servers);
          return () => commandEnds(servers) > before;
        },
        onStep: (r) => console.log(`# ${r.name}: ${r.events.length} events`),
      });
      // ATLANTIS_DIFF_REPORT=<file>: also write every step's diff as markdown.
      const reportFile = process.env.ATLANTIS_DIFF_REPORT;
      if (reportFile) {
        const steps = spec.steps.map((st) => {
          const got = ours.find((r) => r.name === st.name);
          return { name: st.name, did: got?.did ?? '', expected: lines(expected.get(st.name)), got: lines(got) };
        });
        writeFileSync(reportFile, markdownReport(steps));
      }
    });
    after(async () => {
      for (const s of servers) s.child.kill('SIGTERM');
      await Promise.all(servers.map((s) => s.exited));
      await gh?.close();
      await redis?.cleanup();
      prepared?.cleanup();
      for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
    });
    it('the fixture covers every step of the scenario, in order; deliberate differences name steps', () => {
      assert.deepEqual(
        fixture.steps.map((s) => s.name),
        spec.steps.map((s) => s.name),
      );
      for (const name of Object.keys(deliberate)) assert.ok(expected.has(name), `deliberate-differences.json names no step "${name}"`);
    });
    if (o.replicas > 1)
      it('the webhooks were spread: several replicas ran commands, and webhooks reached PR owners through others', () => {
        const ran = servers.filter((s) => /"msg":"Command (finished|failed)"/.test(s.output())).length;
        const handed = servers.reduce(
          (n, s) => n + (s.output().match(/"msg":"Webhook handed to the replica that owns the pull request"/g)?.length ?? 0),
          0,
        );
        assert.ok(ran >= 2, `commands ran on ${ran} replica(s)`);
        assert.ok(handed > 0, 'no webhook was handed to its owner');
      });
    for (const step of spec.steps) {
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

// ---- recorder ---------------------------------------------------------------------------

/** Replaces the token and the run's paths and URLs, which the fixture must never hold. */
function flagsForFixture(flags: string[], gh: GitHubStandin, ctx: NormaliseContext): string[] {
  return flags.map((f) => {
    if (f === gh.token) return '<token>';
    if (ctx.dataDirs.includes(f)) return '<data-dir>';
    if (f === ctx.serverUrl) return '<atlantis-url>';
    if (f === gh.hostPort) return '<github-host>';
    return (ctx.replace ?? []).reduce((t, [from, to]) => t.split(from).join(to), f);
  });
}

function onlyLoopback(): boolean {
  return Object.values(networkInterfaces()).every((addrs) => (addrs ?? []).every((a) => a.internal));
}

/**
 * Runs the scenario against a real Atlantis (ATLANTIS_REFERENCE_BIN) and writes its fixture.
 * Atlantis binds every interface: the recorder runs itself again in a network namespace of
 * its own with only loopback (`unshare -rn`).
 */
export async function recordAtlantis(spec: ScenarioSpec): Promise<void> {
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
  const gh = await GitHubStandin.start({ botLogin: SCENARIO_BOT, tls: true });
  const prepared = await spec.prepare(gh);
  const dataDir = mkdtempSync(path.join(tmpdir(), 'atlantis-ref-data-'));
  const home = mkdtempSync(path.join(tmpdir(), 'atlantis-ref-home-'));
  const port = 4141;
  const serverUrl = `http://127.0.0.1:${port}`;
  const flags = [...sharedFlags(gh, dataDir, serverUrl, port), ...prepared.flags];
  const env = serverEnv(gh, home, prepared.pathDirs);
  const version = spawnSync(bin, ['version'], { env, encoding: 'utf8' }).stdout.trim();
  let log = '';
  const child = spawn(bin, flags, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.on('data', (d: Buffer) => (log += d.toString()));
  child.stderr.on('data', (d: Buffer) => (log += d.toString()));
  const logFile = path.join(tmpdir(), 'atlantis-ref-log.txt');
  try {
    await waitForHttp(`${serverUrl}/healthz`, 30_000).catch((e: Error) => {
      throw new Error(`${e.message}\n${log}`);
    });
    const ctx: NormaliseContext = { serverUrl, githubUrl: gh.url, dataDirs: [dataDir], replace: prepared.replace };
    const steps = await runScenario({
      gh,
      scenario: prepared.scenario,
      steps: spec.steps,
      serverUrls: [serverUrl],
      ctx,
      expect: (step) => ({ comments: step.comments, statuses: step.statuses ?? 0 }),
      waitMs: 180_000,
      quietMs: 4000,
      onStep: (r) => console.log(`${r.name}: ${r.events.length} events`),
    });
    const fixture: Fixture = { recordedFrom: version, flags: flagsForFixture(flags, gh, ctx), steps };
    mkdirSync(path.dirname(spec.fixture), { recursive: true });
    writeFileSync(spec.fixture, `${JSON.stringify(fixture, null, 2)}\n`);
    console.log(`wrote ${spec.fixture}; Atlantis's log in ${logFile}`);
    const unknown = gh.calls.filter((call) => call.status === 404).map((call) => `${call.method} ${call.path}`);
    if (unknown.length > 0) console.log(`404s from the stand-in:\n${[...new Set(unknown)].join('\n')}`);
  } finally {
    writeFileSync(logFile, log);
    child.kill('SIGTERM');
    if (child.exitCode === null && child.signalCode === null) await new Promise((r) => child.once('exit', r));
    await gh.close();
    prepared.cleanup();
    for (const d of [dataDir, home]) rmSync(d, { recursive: true, force: true });
  }
}
