// The GitLab differential's fixtures and comparing half. `runSessionAgainst` runs one session
// (atlantis-gitlab-sessions*.ts) against any server started by the caller, with the flags
// both servers share: the recorder (test/atlantis-gitlab-differential.test.ts --record) runs
// it against a real Atlantis v0.47 and writes test/fixtures/atlantis-v0.47-gitlab/<session>.json;
// `compareGitlabWithAtlantis` runs it against the project's server and checks every step's
// webhook answers, events and API requests against the fixture, line by line, with
// deliberate-differences.json (as the GitHub differential's) for what differs on purpose.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { lineDiff } from './atlantis-scenario.js';
import {
  GL_BOT,
  GL_WEBHOOK_SECRET,
  type GlNormaliseContext,
  type GlSession,
  type GlStepRecord,
  type RequestRecord,
  type SessionCtx,
  removeRepos,
  requestsOf,
  runSession,
  startSessionStandin,
} from './atlantis-gitlab-session.js';
import type { GitLabStandin } from './gitlab-standin.js';

export const GL_FIXTURE_DIR = fileURLToPath(new URL('../fixtures/atlantis-v0.47-gitlab/', import.meta.url));

export interface GlFixture {
  session: string;
  about: string;
  recordedFrom: string;
  /** What the stand-in's GET /version said. */
  gitlabVersion: string;
  flags: string[];
  /** The requests made while the server started (before the first step). */
  startup: RequestRecord[];
  steps: GlStepRecord[];
  /** The stand-in's answers, normalised, by key (RequestRecord.answer). */
  answers: Record<string, unknown>;
}

/** The --atlantis-url Atlantis had when the fixtures were recorded (it listened there). */
export const RECORDED_ATLANTIS_URL = 'http://127.0.0.1:4141';

export function readGlFixture(session: string): GlFixture {
  return JSON.parse(readFileSync(path.join(GL_FIXTURE_DIR, `${session}.json`), 'utf8')) as GlFixture;
}

/** The flags both servers get (Atlantis's names). */
export function sharedGlFlags(gl: GitLabStandin, dataDir: string, serverUrl: string, port: number): string[] {
  return [
    'server',
    '--port',
    String(port),
    '--atlantis-url',
    serverUrl,
    '--data-dir',
    dataDir,
    '--gitlab-hostname',
    gl.hostname,
    '--gitlab-user',
    GL_BOT,
    '--gitlab-token',
    gl.token,
    '--gitlab-webhook-secret',
    GL_WEBHOOK_SECRET,
    '--repo-allowlist',
    '*',
    '--tf-download=false',
  ];
}

/** Either server's environment: TF_CLI_CONFIG_FILE unset, the stand-in's certificate trusted. */
export function glServerEnv(gl: GitLabStandin, home: string): NodeJS.ProcessEnv {
  const ca = gl.caFile!;
  return { PATH: process.env.PATH, HOME: home, CHECKPOINT_DISABLE: '1', SSL_CERT_FILE: ca, GIT_SSL_CAINFO: ca, NODE_EXTRA_CA_CERTS: ca };
}

/** The flags as the fixture keeps them: no token, no temp dirs, no ports. */
export function flagsForFixture(flags: string[], norm: GlNormaliseContext): string[] {
  return flags.map((f) =>
    f === norm.token
      ? '<token>'
      : norm.dataDirs.includes(f)
        ? '<data-dir>'
        : f === norm.serverUrl
          ? '<atlantis-url>'
          : f.replace(norm.gitlabHostPort, '<gitlab-host>'),
  );
}

/** A server the caller started for a session. */
export interface StartedServer {
  url: string;
  /** Where the steps' webhooks go, round-robin (several replicas); default `url` alone. */
  urls?: string[];
  stop(): Promise<void>;
  /** The server's own word that a step's command is over (made at the step's start). */
  finishedSince?: () => () => boolean;
}

export type StartServer = (flags: string[], env: NodeJS.ProcessEnv, gl: GitLabStandin, session: GlSession) => Promise<StartedServer>;

export interface SessionRun {
  flags: string[];
  norm: GlNormaliseContext;
  startup: RequestRecord[];
  steps: GlStepRecord[];
  answers: Record<string, unknown>;
}

/**
 * Runs `session` against the server `start` starts (on `serverUrl`, `port`), the stand-in on
 * `host` over HTTPS. `expect` says when a step is over (see RunSessionOptions).
 */
export async function runSessionAgainst(
  session: GlSession,
  o: {
    start: StartServer;
    host: string;
    serverUrl: string;
    port: number;
    expect: (stepName: string, recording: { comments: number; statuses: number }) => { comments: number; statuses: number };
    quietMs: number;
    onStep?: (r: GlStepRecord) => void;
  },
): Promise<SessionRun> {
  const ctx: SessionCtx = await startSessionStandin(session, { host: o.host, tls: true });
  const dataDir = mkdtempSync(path.join(tmpdir(), 'gl-diff-data-'));
  const home = mkdtempSync(path.join(tmpdir(), 'gl-diff-home-'));
  const flags = [...sharedGlFlags(ctx.gl, dataDir, o.serverUrl, o.port), ...session.flags];
  const norm: GlNormaliseContext = {
    serverUrl: o.serverUrl,
    gitlabUrl: ctx.gl.url,
    gitlabHostPort: ctx.gl.hostPort,
    dataDirs: [dataDir],
    token: ctx.gl.token,
  };
  let server: StartedServer | undefined;
  try {
    server = await o.start(flags, glServerEnv(ctx.gl, home), ctx.gl, session);
    const answers: Record<string, unknown> = {};
    const startup = requestsOf(ctx.gl.calls, norm, answers);
    const started = server;
    const steps = await runSession({
      session,
      ctx,
      serverUrls: server.urls ?? [server.url],
      norm,
      answers,
      expect: (step) => o.expect(step.name, { comments: step.comments, statuses: step.statuses ?? 0 }),
      waitMs: 180_000,
      quietMs: o.quietMs,
      ...(started.finishedSince ? { finishedSince: started.finishedSince } : {}),
      ...(o.onStep ? { onStep: o.onStep } : {}),
    });
    return { flags: flagsForFixture(flags, norm), norm, startup, steps, answers };
  } finally {
    await server?.stop();
    await ctx.gl.close();
    removeRepos(ctx);
    for (const d of [dataDir, home]) rmSync(d, { recursive: true, force: true });
  }
}

/** A request as one line: method, path, query, body, status. */
export function requestLine(r: RequestRecord): string {
  const q = r.query ? `?${new URLSearchParams(r.query).toString()}` : '';
  const body = r.body === undefined ? '' : ` ${JSON.stringify(r.body)}`;
  return `${r.method} ${r.path}${q}${body} -> ${r.status}`;
}

/**
 * A step as lines (webhook answers, events, API requests), so that a difference reads as a line
 * diff. Its git requests are facts of the fixture, not compared: a clone from the wrong place
 * shows in the plan that follows.
 */
export function glStepLines(r: GlStepRecord | undefined): string[] {
  if (!r) return ['(step not run)'];
  const out: string[] = [];
  for (const w of r.webhooks) out.push(`webhook answered ${w.status} ${JSON.stringify(w.body)}`);
  for (const e of r.events) {
    if (e.kind === 'comment' || e.kind === 'comment-edit') {
      out.push(e.kind === 'comment' ? `comment on !${e.pull}:` : 'comment edited to:');
      for (const l of e.body.split('\n')) out.push(`  | ${l}`);
    } else if (e.kind === 'status')
      out.push(`status ${JSON.stringify(e.context)} ${e.state} ${JSON.stringify(e.description)} ${JSON.stringify(e.target_url)}`);
    else if (e.kind === 'reaction') out.push(`award emoji ${e.content}`);
    else out.push(`${e.method} ${e.path}`);
  }
  out.push('requests:');
  for (const q of r.requests) out.push(`  ${requestLine(q)}`);
  return out;
}

export interface GlDeliberateDifference {
  why: string;
  /** [pattern, replacement] applied in order to the step's lines joined by newlines (flags gmu). */
  rewrite: Array<[string, string]>;
}

/**
 * The line diff of one step (`-` Atlantis only, `+` the server only), after a deliberate
 * difference rewrote Atlantis's lines; empty when they match. A deliberate difference that is
 * no longer needed is itself reported.
 */
export function compareGlStep(expected: GlStepRecord | undefined, got: GlStepRecord | undefined, d?: GlDeliberateDifference): string[] {
  const atlantis = glStepLines(expected);
  const ours = glStepLines(got);
  if (d) {
    if (!lineDiff(atlantis, ours).some((l) => !l.startsWith('  ')))
      return ['the step now matches Atlantis v0.47 as it is: remove its deliberate difference'];
    let text = atlantis.join('\n');
    for (const [pattern, replacement] of d.rewrite) text = text.replace(new RegExp(pattern, 'gmu'), replacement);
    const diff = lineDiff(text.split('\n'), ours);
    return diff.some((l) => !l.startsWith('  ')) ? diff : [];
  }
  const diff = lineDiff(atlantis, ours);
  return diff.some((l) => !l.startsWith('  ')) ? diff : [];
}

/** deliberate-differences.json: by session, by step. */
export function readGlDeliberate(): Record<string, Record<string, GlDeliberateDifference>> {
  return JSON.parse(readFileSync(path.join(GL_FIXTURE_DIR, 'deliberate-differences.json'), 'utf8')) as Record<
    string,
    Record<string, GlDeliberateDifference>
  >;
}

/**
 * The comparing half: runs each session against the server `start` starts (flags and env as
 * Atlantis had them) and checks each step against the fixture. A step is over when the server
 * says so (`finishedSince`), or when the fixture's notes and statuses came, then `quietMs`.
 */
export function compareGitlabWithAtlantis(o: {
  title: string;
  sessions: GlSession[];
  start: StartServer;
  net: string;
  quietMs?: number;
  /** false: compare with the recording as it is (a server repeating Atlantis's requests has no deliberate difference). */
  deliberate?: boolean;
  /** More checks of each session's run, by title (what the file tests beyond Atlantis's recording). */
  checks?: Record<string, (run: SessionRun, session: GlSession) => void>;
  /**
   * The server's --atlantis-url; default its own address, `http://<net>.2:4141`. Given
   * RECORDED_ATLANTIS_URL, its notes are as long as Atlantis's, which a session whose fixture
   * keeps a long note by its length only (long-comment) needs: the length is counted before the
   * URL in the note's links is normalised.
   */
  atlantisUrl?: string;
}): void {
  const deliberate = o.deliberate === false ? {} : readGlDeliberate();
  for (const session of o.sessions) {
    const fixture = readGlFixture(session.name);
    const expected = new Map(fixture.steps.map((s) => [s.name, s]));
    let run: SessionRun | undefined;
    describe(`${o.title}: session ${session.name}`, () => {
      before(async () => {
        run = await runSessionAgainst(session, {
          start: o.start,
          host: `${o.net}.1`,
          serverUrl: o.atlantisUrl ?? `http://${o.net}.2:4141`,
          port: 4141,
          quietMs: o.quietMs ?? 6000,
          expect: (name) => {
            const events = expected.get(name)?.events ?? [];
            return {
              comments: events.filter((e) => e.kind === 'comment').length,
              statuses: events.filter((e) => e.kind === 'status').length,
            };
          },
        });
      });
      after(() => {
        run = undefined;
      });
      it('the fixture has every step of the session, in order', () => {
        assert.deepEqual(
          fixture.steps.map((s) => s.name),
          session.steps.map((s) => s.name),
        );
      });
      for (const [title, check] of Object.entries(o.checks ?? {}))
        it(title, () => {
          assert.ok(run, 'the session ran');
          check(run, session);
        });
      for (const step of session.steps) {
        it(`step "${step.name}"`, () => {
          const got = run?.steps.find((r) => r.name === step.name);
          const diff = compareGlStep(expected.get(step.name), got, deliberate[session.name]?.[step.name]);
          assert.deepEqual(
            diff,
            [],
            `step "${step.name}" (${step.did}) differs from Atlantis v0.47 (- Atlantis, + ours):\n${diff.join('\n')}`,
          );
        });
      }
    });
  }
}
