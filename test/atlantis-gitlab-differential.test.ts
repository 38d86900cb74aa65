// The GitLab differential: what a real Atlantis v0.47 did against the GitLab stand-in, session
// by session (test/support/atlantis-gitlab-sessions*.ts), recorded in
// test/fixtures/atlantis-v0.47-gitlab/ (README.md there says how). This test holds the stand-in
// to those recordings (every request Atlantis made is replayed, in order, into a fresh stand-in
// set up the same way, and each answer must be the one Atlantis got), then runs the sessions
// against the project's server (compareGitlabWithAtlantis in
// test/support/atlantis-gitlab-differential.ts): each step's webhook answers, notes, statuses
// and API requests must be Atlantis's, or a deliberate difference of
// deliberate-differences.json. The webhook-auth, fork and group-allowlist sessions run in
// their own files (gitlab-webhook-auth, gitlab-fork, gitlab-group-allowlist), the scenario on
// two replicas in gitlab-replicas. Loopback: 127.0.34 (the comparing half's own check), 127.0.111.
//
// `--summary` prints each session's steps with the GitLab API calls Atlantis made.
//
// Recording (never part of `make test`; needs an Atlantis binary built beforehand, see
// ../shared/ATLANTIS-REFERENCE.md):
//
//   ATLANTIS_REFERENCE_BIN=/path/to/atlantis node --import tsx test/atlantis-gitlab-differential.test.ts --record [--session <name>[,<name>...]]
//
// Atlantis listens on every interface, so the recorder runs itself in a network namespace of
// its own with only loopback (`unshare -rn`); Atlantis on 127.0.0.1:4141, the stand-in on
// 127.0.0.1 over HTTPS with a self-signed certificate (SSL_CERT_FILE, GIT_SSL_CAINFO),
// TF_CLI_CONFIG_FILE unset, CHECKPOINT_DISABLE=1, --tf-download=false, terraform from PATH.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { terraformOnPath } from './support/atlantis-scenario.js';
import {
  GL_FIXTURE_DIR,
  type GlFixture,
  RECORDED_ATLANTIS_URL,
  type StartServer,
  compareGitlabWithAtlantis,
  readGlFixture,
  runSessionAgainst,
} from './support/atlantis-gitlab-differential.js';
import { recordedAtlantis } from './support/gitlab-recorded-atlantis.js';
import { ourGitlabServer } from './support/gitlab-our-server.js';
import { SESSIONS } from './support/atlantis-gitlab-sessions-more.js';
import { replayFixture } from './support/gitlab-standin-replay.js';
import { waitForHttp } from './support/cli.js';

// ---- recorder ---------------------------------------------------------------------------

/** The fixture as JSON: indented, but each of the stand-in's answers on one line. */
function fixtureText(f: GlFixture): string {
  const { answers, ...rest } = f;
  const head = JSON.stringify(rest, null, 2).replace(/\n}$/, '');
  const lines = Object.entries(answers).map(([k, v]) => `    ${JSON.stringify(k)}: ${JSON.stringify(v)}`);
  return `${head},\n  "answers": {\n${lines.join(',\n')}\n  }\n}\n`;
}

function onlyLoopback(): boolean {
  return Object.values(networkInterfaces()).every((addrs) => (addrs ?? []).every((a) => a.internal));
}

function atlantis(bin: string, logFile: string): StartServer {
  return async (flags, env) => {
    let log = '';
    const child = spawn(bin, flags, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (d: Buffer) => (log += d.toString()));
    child.stderr.on('data', (d: Buffer) => (log += d.toString()));
    const url = RECORDED_ATLANTIS_URL;
    await waitForHttp(`${url}/healthz`, 60_000).catch((e: Error) => {
      throw new Error(`${e.message}\n${log}`);
    });
    return {
      url,
      stop: async () => {
        child.kill('SIGTERM');
        if (child.exitCode === null && child.signalCode === null) await new Promise((r) => child.once('exit', r));
        writeFileSync(logFile, log);
      },
    };
  };
}

async function record(): Promise<void> {
  const bin = process.env.ATLANTIS_REFERENCE_BIN;
  if (!bin || !existsSync(bin)) throw new Error('set ATLANTIS_REFERENCE_BIN to an Atlantis v0.47 binary built beforehand (see the header)');
  if (!onlyLoopback()) {
    const r = spawnSync(
      'unshare',
      ['-rn', 'sh', '-c', 'ip link set lo up && exec "$@"', 'sh', process.execPath, ...process.execArgv, ...process.argv.slice(1)],
      {
        stdio: 'inherit',
      },
    );
    process.exit(r.status ?? 1);
  }
  terraformOnPath();
  const only = process.argv.includes('--session') ? process.argv[process.argv.indexOf('--session') + 1]?.split(',') : undefined;
  const version = spawnSync(bin, ['version'], { encoding: 'utf8' }).stdout.trim();
  mkdirSync(GL_FIXTURE_DIR, { recursive: true });
  for (const session of SESSIONS.filter((s) => only === undefined || only.includes(s.name))) {
    console.log(`# session ${session.name}`);
    const logFile = path.join(tmpdir(), `atlantis-gitlab-${session.name}.log`);
    let gitlabVersion = '';
    const start = atlantis(bin, logFile);
    const run = await runSessionAgainst(session, {
      start: async (flags, env, gl, s) => {
        gitlabVersion = gl.version;
        return start(flags, env, gl, s);
      },
      host: '127.0.0.1',
      serverUrl: RECORDED_ATLANTIS_URL,
      port: 4141,
      quietMs: 6000,
      expect: (_name, recording) => recording,
      onStep: (r) =>
        console.log(
          `${r.name}: ${r.events.length} events, ${r.requests.length} requests, webhooks ${r.webhooks.map((w) => w.status).join(',')}`,
        ),
    });
    const fixture: GlFixture = {
      session: session.name,
      about: session.about,
      recordedFrom: version,
      gitlabVersion,
      flags: run.flags,
      startup: run.startup,
      steps: run.steps,
      answers: run.answers,
    };
    writeFileSync(path.join(GL_FIXTURE_DIR, `${session.name}.json`), fixtureText(fixture));
    console.log(`wrote ${session.name}.json; Atlantis's log in ${logFile}`);
  }
}

// ---- summary: the calls Atlantis made, step by step -------------------------------------

/** `--summary`: each session's steps with the GitLab API calls Atlantis made (method, path, status). */
function summary(): void {
  const short = (p: string): string => p.replace(/^.*?\/api\/v4/, '').replace(/\b[0-9a-f]{40}\b/g, ':sha');
  for (const session of SESSIONS) {
    const f = readGlFixture(session.name);
    console.log(`## ${session.name}\n\n${f.about}\n\nFlags beyond the shared ones: ${session.flags.join(' ') || '(none)'}\n`);
    console.log(`- start-up: ${f.startup.map((r) => `${r.method} ${short(r.path)}`).join(', ')}`);
    for (const s of f.steps) {
      const calls = s.requests.map(
        (r) => `${r.method} ${short(r.path)}${r.query ? `?${new URLSearchParams(r.query).toString()}` : ''} ${r.status}`,
      );
      console.log(`- ${s.name} (webhook ${s.webhooks.map((w) => w.status).join(', ')}): ${calls.join('; ') || 'no call'}`);
      if (s.git.length > 0) console.log(`  - git: ${s.git.join('; ')}`);
    }
    console.log('');
  }
}

// ---- test: the stand-in answers as it answered Atlantis ---------------------------------

if (process.argv.includes('--record')) await record();
else if (process.argv.includes('--summary')) summary();
else {
  describe('the GitLab stand-in answers each request as it answered Atlantis v0.47', () => {
    for (const session of SESSIONS) {
      it(`session ${session.name}`, async () => {
        const fixture = readGlFixture(session.name);
        assert.deepEqual(
          fixture.steps.map((s) => s.name),
          session.steps.map((s) => s.name),
          'the fixture was recorded from another version of the session: record it again',
        );
        const requests = fixture.startup.length + fixture.steps.reduce((n, s) => n + s.requests.length, 0);
        assert.ok(requests > 0, 'the fixture holds no request');
        const mismatches = await replayFixture(session, fixture);
        assert.deepEqual(mismatches, [], mismatches.map((m) => `${m.step}: ${m.request}: ${m.problem}`).join('\n'));
      });
    }
  });
  // The comparing half's own test: a server that repeats Atlantis's recorded requests matches
  // the fixtures. When the server speaks GitLab, the same call with a `start` that runs it
  // (flags and env as given, plus --bind-address) is the GitLab differential.
  compareGitlabWithAtlantis({
    title: 'the comparing half, against a server repeating what Atlantis did',
    sessions: SESSIONS,
    start: recordedAtlantis(readGlFixture, '127.0.34.2'),
    net: '127.0.34',
    quietMs: 300,
    deliberate: false,
  });
  const OWN_FILES = ['webhook-auth', 'fork', 'group-allowlist'];
  // The server gets Atlantis's own --atlantis-url (it listens on 127.0.111.2): long-comment's
  // fixture keeps each note by its length, links included.
  compareGitlabWithAtlantis({
    title: 'our server posts and asks what Atlantis v0.47 posts and asks (GitLab)',
    sessions: SESSIONS.filter((s) => !OWN_FILES.includes(s.name)),
    start: ourGitlabServer('127.0.111'),
    net: '127.0.111',
    quietMs: 1500,
    atlantisUrl: RECORDED_ATLANTIS_URL,
  });
}
