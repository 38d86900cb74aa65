// The runner of the GitLab differential sessions (test/support/atlantis-gitlab-sessions.ts has
// the sessions): a session is one server process with its flags, the stand-in's projects and
// people, and steps; a step changes the stand-in as a person or CI would (push a branch, open
// a merge request, write a note, finish a pipeline) and sends GitLab's webhooks. What a step
// caused is recorded three ways: the webhook answers, the events GitLab shows (notes, edits,
// award emoji, commit statuses, other writes) and every API request the server made, with the
// stand-in's answer. The same runner records a real Atlantis v0.47 (the fixtures) and runs a
// server to compare with them (atlantis-gitlab-differential.ts).
import crypto from 'node:crypto';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { type FileChanges, type TestRepo, createTestRepo, git } from './git-repos.js';
import { GitLabStandin, type GitLabStandinOptions, type GlRecordedCall } from './gitlab-standin.js';
import type { GlProjectSettings } from './gitlab-standin-model.js';
import { type GitlabEvent, type GitlabWebhookResponse, sendGitlabWebhook } from './gitlab-standin-webhooks.js';
import { sleep } from '../../src/async.js';
import { SLOW_LOCK_NOTE } from './atlantis-scenario.js';

export const GL_WEBHOOK_SECRET = 'gitlab-differential-secret';
export const GL_BOT = 'atlantis-bot';
/** Every commit of the sessions' repositories has this date, so each run has the same SHAs. */
export const COMMIT_DATE = '2026-01-01T00:00:00Z';

export interface Webhook {
  event: GitlabEvent | 'Push Hook';
  payload: unknown;
  /** The X-Gitlab-Token to send: the right secret unless set; null sends none. */
  token?: string | null;
}

export interface SessionCtx {
  gl: GitLabStandin;
  repos: Map<string, TestRepo>;
}

export interface GlStep {
  name: string;
  /** What was done, for the fixture's reader. */
  did: string;
  /** Changes the stand-in (as a person or CI would) and returns the webhooks GitLab would send. */
  prepare(ctx: SessionCtx): Promise<Webhook[]>;
  /** When recording, the step is over once this many notes and statuses were posted, then a quiet spell. */
  comments: number;
  statuses?: number;
}

export interface GlSession {
  /** The fixture's file name (without .json). */
  name: string;
  about: string;
  /** Flags beyond the shared ones (Atlantis's names). */
  flags: string[];
  standin?: Pick<GitLabStandinOptions, 'relativeRoot' | 'version' | 'botIsBotUser'>;
  setup(ctx: SessionCtx): Promise<void>;
  steps: GlStep[];
}

/** A request as the fixture keeps it. */
export interface RequestRecord {
  method: string;
  path: string;
  query?: Record<string, string>;
  /** How it authenticated: GitLab's PRIVATE-TOKEN header, a Bearer token, HTTP Basic, or none. */
  auth: 'private-token' | 'bearer' | 'basic' | 'none';
  body?: unknown;
  status: number;
  /** Key of the stand-in's answer in the fixture's `answers`. */
  answer?: string;
}

export type GlEvent =
  | { kind: 'comment'; pull: number; body: string }
  | { kind: 'comment-edit'; body: string }
  | { kind: 'status'; context: string; state: string; description: string | null; target_url: string | null }
  | { kind: 'reaction'; content: string }
  | { kind: 'call'; method: string; path: string };

export interface GlStepRecord {
  name: string;
  did: string;
  webhooks: GitlabWebhookResponse[];
  events: GlEvent[];
  requests: RequestRecord[];
  /** The git smart-HTTP requests (clones and fetches) the step caused, each distinct one once: `METHOD path[?service] status`. */
  git: string[];
}

export interface GlNormaliseContext {
  serverUrl: string;
  gitlabUrl: string;
  gitlabHostPort: string;
  dataDirs: string[];
  token: string;
}

/** Longer strings are kept in fixtures by length only (a plan split over notes is a megabyte). */
export const LONG_TEXT = 20_000;

/** Replaces what varies between runs: URLs, data dirs, the token, UUIDs, times, durations, terraform's slow-lock notes (SHAs and ids do not vary). */
export function normaliseGl(text: string, ctx: GlNormaliseContext): string {
  const withoutDataDirs = ctx.dataDirs.reduce((t, dir) => t.split(dir).join('<data-dir>'), text);
  return withoutDataDirs
    .split(ctx.token)
    .join('<token>')
    .split(ctx.serverUrl)
    .join('<atlantis-url>')
    .split(ctx.gitlabUrl)
    .join('<gitlab-url>')
    .split(ctx.gitlabHostPort)
    .join('<gitlab-host>')
    .split(`git@${ctx.gitlabHostPort.replace(/:\d+$/, '')}:`)
    .join('git@<gitlab-hostname>:')
    .replace(/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/g, '<uuid>')
    .replace(/\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?( [A-Z]{3,4})?/g, '<time>')
    .replace(/\b(after|in) \d+(\.\d+)?(ms|s|m)\b/g, '$1 <duration>')
    .replace(SLOW_LOCK_NOTE, '');
}

/** Normalises every string in a JSON value; strings over LONG_TEXT become `<long text: N chars>`. */
export function normaliseJson(v: unknown, ctx: GlNormaliseContext): unknown {
  if (typeof v === 'string') return v.length > LONG_TEXT ? `<long text: ${v.length} chars>` : normaliseGl(v, ctx);
  if (Array.isArray(v)) return v.map((x) => normaliseJson(x, ctx));
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, normaliseJson(x, ctx)]));
  return v;
}

function authKind(h: GlRecordedCall['headers']): RequestRecord['auth'] {
  if (h['private-token']) return 'private-token';
  const a = h.authorization ?? '';
  if (/^Bearer /i.test(a)) return 'bearer';
  if (/^Basic /i.test(a)) return 'basic';
  return 'none';
}

/** A stable key for a normalised answer. */
export function answerKey(v: unknown): string {
  return crypto.createHash('sha256').update(JSON.stringify(v)).digest('hex').slice(0, 16);
}

/** The API requests (git's excluded) of `calls`, normalised, their answers added to `answers`. */
export function requestsOf(calls: GlRecordedCall[], ctx: GlNormaliseContext, answers: Record<string, unknown>): RequestRecord[] {
  const out: RequestRecord[] = [];
  for (const c of calls) {
    if (!c.path.includes('/api/v4/')) continue;
    const r: RequestRecord = { method: c.method, path: normaliseGl(c.path, ctx), auth: authKind(c.headers), status: c.status };
    if (Object.keys(c.query).length > 0) r.query = normaliseJson(c.query, ctx) as Record<string, string>;
    if (c.body !== undefined) r.body = normaliseJson(c.body, ctx);
    if (c.answer !== undefined) {
      const a = normaliseJson(c.answer, ctx);
      const key = answerKey(a);
      answers[key] = a;
      r.answer = key;
    }
    out.push(r);
  }
  return out;
}

/** The distinct git requests of `calls`, in the order first seen. */
export function gitOf(calls: GlRecordedCall[], ctx: GlNormaliseContext): string[] {
  const lines = calls
    .filter((c) => /\.git\//.test(c.path))
    .map((c) => `${c.method} ${normaliseGl(c.path, ctx)}${c.query.service ? `?service=${c.query.service}` : ''} ${c.status}`);
  return [...new Set(lines)];
}

/** What GitLab shows of `calls`: notes, edits, award emoji, commit statuses, other writes (in order; failures and reads left out). */
export function eventsOfGl(calls: GlRecordedCall[], ctx: GlNormaliseContext): GlEvent[] {
  const out: GlEvent[] = [];
  const n = (s: unknown): string | null => (typeof s === 'string' ? (normaliseJson(s, ctx) as string) : null);
  for (const c of calls) {
    if (c.method === 'GET' || c.status < 200 || c.status >= 300 || !c.path.includes('/api/v4/')) continue;
    const b = (typeof c.body === 'object' && c.body !== null ? c.body : {}) as Record<string, unknown>;
    const notes = /\/merge_requests\/(\d+)\/notes$/.exec(c.path);
    if (notes && c.method === 'POST') out.push({ kind: 'comment', pull: Number(notes[1]), body: n(b.body) ?? '' });
    else if (/\/notes\/\d+$/.test(c.path) && c.method === 'PUT') out.push({ kind: 'comment-edit', body: n(b.body) ?? '' });
    else if (/\/notes\/\d+\/award_emoji$/.test(c.path)) out.push({ kind: 'reaction', content: String(b.name) });
    else if (/\/statuses\/[0-9a-f]+$/.test(c.path) && c.method === 'POST')
      out.push({
        kind: 'status',
        context: String(b.name ?? b.context ?? 'default'),
        state: String(b.state),
        description: n(b.description),
        target_url: n(b.target_url),
      });
    else out.push({ kind: 'call', method: c.method, path: normaliseGl(c.path, ctx) });
  }
  return out;
}

/** A project backed by a fresh repository (`files` on `main`), added to the stand-in. */
export async function addProjectRepo(
  ctx: SessionCtx,
  projectPath: string,
  files: Record<string, string>,
  o: { forkedFrom?: string; settings?: Partial<GlProjectSettings> } = {},
): Promise<TestRepo> {
  const repo = await createTestRepo({ fullName: projectPath, files, commitDate: COMMIT_DATE });
  ctx.repos.set(projectPath, repo);
  ctx.gl.addProject(projectPath, {
    bareDir: repo.bareDir,
    ...(o.forkedFrom ? { forkedFrom: o.forkedFrom } : {}),
    ...(o.settings ? { settings: o.settings } : {}),
  });
  return repo;
}

/** Pushes `branch` with `files` to the project's repository (as its author would). */
export async function pushBranch(ctx: SessionCtx, projectPath: string, branch: string, files: FileChanges): Promise<string> {
  const repo = ctx.repos.get(projectPath);
  if (!repo) throw new Error(`no repository for ${projectPath}`);
  return repo.createBranch(branch, files);
}

/** Deletes the sessions' repositories (each under its own temp root: <root>/remote/<ns>/<name>.git). */
export function removeRepos(ctx: SessionCtx): void {
  for (const repo of ctx.repos.values()) {
    const depth = repo.fullName.split('/').length + 1;
    rmSync(path.resolve(repo.bareDir, ...new Array<string>(depth).fill('..')), { recursive: true, force: true });
  }
}

export async function sendAll(ctx: SessionCtx, serverUrl: string, hooks: Webhook[]): Promise<GitlabWebhookResponse[]> {
  const out: GitlabWebhookResponse[] = [];
  for (const h of hooks) {
    const token = h.token === undefined ? GL_WEBHOOK_SECRET : h.token;
    out.push(
      await sendGitlabWebhook(`${serverUrl}/events`, h.event as GitlabEvent, h.payload, {
        token,
        instance: ctx.gl.url,
        version: ctx.gl.version,
        timeoutMs: 60_000,
      }),
    );
  }
  return out;
}

export interface RunSessionOptions {
  session: GlSession;
  ctx: SessionCtx;
  /** Where the webhooks go: step i to `serverUrls[i % length]`. */
  serverUrls: string[];
  norm: GlNormaliseContext;
  answers: Record<string, unknown>;
  expect: (step: GlStep) => { comments: number; statuses: number };
  waitMs: number;
  /** The step is over after this long without an API request (Atlantis sleeps 2 s between its pipeline lookups). */
  quietMs: number;
  finishedSince?: () => () => boolean;
  onStep?: (r: GlStepRecord) => void;
}

const isNotePost = (c: GlRecordedCall): boolean => c.method === 'POST' && /\/merge_requests\/\d+\/notes$/.test(c.path) && c.status < 300;
const isStatusPost = (c: GlRecordedCall): boolean => c.method === 'POST' && /\/statuses\/[0-9a-f]+$/.test(c.path) && c.status < 300;

/** Runs every step of the session; returns what each caused. */
export async function runSession(o: RunSessionOptions): Promise<GlStepRecord[]> {
  const out: GlStepRecord[] = [];
  for (const [i, step] of o.session.steps.entries()) {
    const finished = o.finishedSince?.() ?? (() => false);
    const hooks = await step.prepare(o.ctx);
    const from = o.ctx.gl.calls.length;
    const webhooks = await sendAll(o.ctx, o.serverUrls[i % o.serverUrls.length] as string, hooks);
    const since = (): GlRecordedCall[] => o.ctx.gl.calls.slice(from);
    const want = o.expect(step);
    const end = Date.now() + o.waitMs;
    const missing = (): boolean => since().filter(isNotePost).length < want.comments || since().filter(isStatusPost).length < want.statuses;
    while (Date.now() < end && missing() && !finished()) await sleep(100);
    const settleEnd = Date.now() + o.waitMs;
    let seen = since().length;
    let quietSince = Date.now();
    while (Date.now() < settleEnd && Date.now() - quietSince < o.quietMs) {
      await sleep(100);
      if (since().length !== seen) {
        seen = since().length;
        quietSince = Date.now();
      }
    }
    const calls = since();
    const rec: GlStepRecord = {
      name: step.name,
      did: step.did,
      webhooks: webhooks.map((w) => ({ status: w.status, body: normaliseGl(w.body, o.norm) })),
      events: eventsOfGl(calls, o.norm),
      requests: requestsOf(calls, o.norm, o.answers),
      git: gitOf(calls, o.norm),
    };
    out.push(rec);
    o.onStep?.(rec);
  }
  return out;
}

/** Starts a stand-in for the session and builds its projects and people. */
export async function startSessionStandin(session: GlSession, o: { host?: string; tls?: boolean }): Promise<SessionCtx> {
  const gl = await GitLabStandin.start({ ...session.standin, host: o.host ?? '127.0.0.1', tls: o.tls ?? false, botUsername: GL_BOT });
  const ctx: SessionCtx = { gl, repos: new Map() };
  await session.setup(ctx);
  return ctx;
}

/** A fork of `upstream`: the same history (same SHAs, COMMIT_DATE), a project forked from it. */
export async function forkProject(ctx: SessionCtx, upstream: string, forkPath: string, files: Record<string, string>): Promise<TestRepo> {
  const repo = await addProjectRepo(ctx, forkPath, files, { forkedFrom: upstream });
  const up = ctx.repos.get(upstream);
  if (up && (await git(repo.bareDir, ['rev-parse', 'refs/heads/main'])) !== up.baseSha)
    throw new Error(`fork ${forkPath} must start from the same files as ${upstream}`);
  return repo;
}
