// The comparing half of the Atlantis differential test (test/atlantis-differential.test.ts has
// the recorder and the fixture's story): runs the scenario against our server, one process or
// several replicas sharing one Redis with the webhooks spread round-robin over them, and checks
// each step's comments and statuses against what Atlantis v0.47 posted. Several replicas must
// look like one Atlantis: the same fixture, the same deliberate differences, nothing else.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { GitHubStandin } from './github-standin.js';
import {
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
export function serverEnv(gh: GitHubStandin, home: string): NodeJS.ProcessEnv {
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
/** One line per status or reaction, one per line of a comment, so that a failing step reads as a line diff. */
export function lines(r: StepRecord | undefined): string[] {
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

export interface DeliberateDifference {
  why: string;
  /** [pattern, replacement] applied in order to the step's lines joined by newlines (flags gmu). */
  rewrite: Array<[string, string]>;
}

/** Atlantis's lines of one step with a deliberate difference applied. */
export function rewriteLines(expected: string[], d: DeliberateDifference): string[] {
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
}

/** How many commands the servers have logged as over, all together. */
export function commandEnds(servers: CliProcess[]): number {
  return servers.reduce((n, s) => n + (s.output().match(/"msg":"Command (finished|failed)"/g)?.length ?? 0), 0);
}

export function compareWithAtlantis(o: CompareOptions): void {
  const fixture = JSON.parse(readFileSync(FIXTURE, 'utf8')) as Fixture;
  const deliberate = JSON.parse(readFileSync(DELIBERATE_DIFFERENCES, 'utf8')) as Record<string, DeliberateDifference>;
  const expected = new Map(fixture.steps.map((s) => [s.name, s]));
  let gh: GitHubStandin;
  let scenario: ScenarioRepos;
  let redis: RedisServer | undefined;
  const servers: CliProcess[] = [];
  let ours: StepRecord[] = [];
  const tempDirs: string[] = [];

  describe(o.title, () => {
    before(async () => {
      terraformOnPath();
      gh = await GitHubStandin.start({ botLogin: SCENARIO_BOT, tls: true, host: `${o.net}.1` });
      scenario = await createScenarioRepos(gh);
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
        const flags = [...sharedFlags(gh, dataDir, serverUrl, 4141), '--bind-address', host];
        if (redis) flags.push(...replicaArgs(redis, `r${i + 1}`));
        const server = startCli(flags, serverEnv(gh, home));
        servers.push(server);
        urls.push(`http://${host}:4141`);
        await waitForHttp(`http://${host}:4141/healthz`).catch((e: Error) => {
          throw new Error(`${e.message}\n${server.output()}`);
        });
      }
      ours = await runScenario({
        gh,
        scenario,
        serverUrls: urls,
        ctx: { serverUrl, githubUrl: gh.url, dataDirs },
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
        const steps = STEPS.map((st) => {
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
