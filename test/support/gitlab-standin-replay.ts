// Holds the GitLab stand-in to what a real Atlantis v0.47 accepted from it: replays a
// fixture's recorded requests (test/fixtures/atlantis-v0.47-gitlab/<session>.json) in order
// into a fresh stand-in set up by the same session, each step's changes made first as when
// recording, and checks every answer (status and normalised body) is the one Atlantis got.
// Fixture placeholders are filled from the replay's own stand-in; long bodies (kept by
// length) are sent as that many characters.
import crypto from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import {
  type GlNormaliseContext,
  type GlSession,
  type RequestRecord,
  normaliseJson,
  removeRepos,
  startSessionStandin,
} from './atlantis-gitlab-session.js';
import type { GlFixture } from './atlantis-gitlab-differential.js';
import { requestLine } from './atlantis-gitlab-differential.js';

/** The values the replay puts where the fixture has placeholders. */
const REPLAY_SERVER_URL = 'http://127.0.0.1:4141';
const REPLAY_DATA_DIR = '/tmp/atlantis-replay-data';

export interface ReplayMismatch {
  step: string;
  request: string;
  problem: string;
}

/** What fills a fixture's placeholders. */
export interface Placeholders {
  /** The stand-in's URL (with its relative root) and host:port. */
  gitlabUrl: string;
  gitlabHostPort: string;
  serverUrl: string;
  dataDir: string;
}

/** A fixture value with its placeholders filled; `<long text: N chars>` becomes N characters. */
export function fillPlaceholders(v: unknown, p: Placeholders): unknown {
  if (typeof v === 'string') {
    const long = /^<long text: (\d+) chars>$/.exec(v);
    if (long) return 'x'.repeat(Number(long[1]));
    return v
      .split('<gitlab-url>')
      .join(p.gitlabUrl)
      .split('<gitlab-host>')
      .join(p.gitlabHostPort)
      .split('<atlantis-url>')
      .join(p.serverUrl)
      .split('<data-dir>')
      .join(p.dataDir)
      .replace(/<uuid>/g, () => crypto.randomUUID());
  }
  if (Array.isArray(v)) return v.map((x) => fillPlaceholders(x, p));
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, fillPlaceholders(x, p)]));
  return v;
}

/** Sends a recorded request to the stand-in at `p.gitlabUrl`'s host with `token`; resolves with the status (`ca`: a certificate to trust). */
export async function sendRecorded(r: RequestRecord, p: Placeholders, token: string, ca?: Buffer): Promise<number> {
  const headers: Record<string, string> = {};
  if (r.auth === 'private-token') headers['private-token'] = token;
  else if (r.auth === 'bearer') headers.authorization = `Bearer ${token}`;
  const query = r.query ? `?${new URLSearchParams(fillPlaceholders(r.query, p) as Record<string, string>).toString()}` : '';
  const base = new URL(p.gitlabUrl);
  // The recorded path is the whole path as sent (with any relative root).
  const url = new URL(`${base.protocol}//${base.host}${fillPlaceholders(r.path, p) as string}${query}`);
  let body: string | undefined;
  if (r.body !== undefined) {
    const b = fillPlaceholders(r.body, p);
    body = typeof b === 'string' ? b : JSON.stringify(b);
    headers['content-type'] = 'application/json';
  }
  return new Promise((resolve, reject) => {
    const mod = url.protocol === 'https:' ? https : http;
    const req = mod.request(url, { method: r.method, headers, ...(ca ? { ca } : {}), timeout: 30_000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error(`${r.method} ${url.pathname} timed out`)));
    req.end(body);
  });
}

/** Where two JSON values first differ: `<path>: <got> vs <want>`, or undefined when equal. */
export function firstDifference(got: unknown, want: unknown, at = ''): string | undefined {
  if (JSON.stringify(got) === JSON.stringify(want)) return undefined;
  const bothObjects = got && want && typeof got === 'object' && typeof want === 'object' && Array.isArray(got) === Array.isArray(want);
  if (bothObjects) {
    const g = got as Record<string, unknown>;
    const w = want as Record<string, unknown>;
    for (const k of new Set([...Object.keys(w), ...Object.keys(g)])) {
      const d = firstDifference(g[k], w[k], `${at}.${k}`);
      if (d) return d;
    }
  }
  const show = (v: unknown): string => (v === undefined ? '(absent)' : JSON.stringify(v).slice(0, 300));
  return `${at || '(the answer)'}: ${show(got)}, Atlantis got ${show(want)}`;
}

/** Replays `fixture` into a stand-in built by `session`; returns every answer that differs from the recorded one. */
export async function replayFixture(session: GlSession, fixture: GlFixture): Promise<ReplayMismatch[]> {
  const ctx = await startSessionStandin(session, {});
  const norm: GlNormaliseContext = {
    serverUrl: REPLAY_SERVER_URL,
    gitlabUrl: ctx.gl.url,
    gitlabHostPort: ctx.gl.hostPort,
    dataDirs: [REPLAY_DATA_DIR],
    token: ctx.gl.token,
  };
  const places: Placeholders = {
    gitlabUrl: ctx.gl.url,
    gitlabHostPort: ctx.gl.hostPort,
    serverUrl: REPLAY_SERVER_URL,
    dataDir: REPLAY_DATA_DIR,
  };
  const out: ReplayMismatch[] = [];
  const check = async (step: string, records: RequestRecord[]): Promise<void> => {
    for (const r of records) {
      const from = ctx.gl.calls.length;
      await sendRecorded(r, places, ctx.gl.token);
      const call = ctx.gl.calls[from];
      const line = requestLine(r);
      if (!call) {
        out.push({ step, request: line, problem: 'the stand-in recorded no call' });
        continue;
      }
      if (call.status !== r.status) out.push({ step, request: line, problem: `answered ${call.status}, Atlantis got ${r.status}` });
      const want = r.answer === undefined ? undefined : fixture.answers[r.answer];
      const got = call.answer === undefined ? undefined : normaliseJson(call.answer, norm);
      const d = firstDifference(got, want);
      if (d) out.push({ step, request: line, problem: `answered differently at ${d}` });
    }
  };
  try {
    await check('(start-up)', fixture.startup);
    for (const step of session.steps) {
      const recorded = fixture.steps.find((s) => s.name === step.name);
      if (!recorded) {
        out.push({ step: step.name, request: '', problem: 'the fixture has no such step' });
        continue;
      }
      await step.prepare(ctx);
      await check(step.name, recorded.requests);
    }
  } finally {
    await ctx.gl.close();
    removeRepos(ctx);
  }
  return out;
}
