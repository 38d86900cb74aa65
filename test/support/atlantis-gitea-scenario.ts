// The differential scenario (atlantis-scenario.ts STEPS: plan, apply, locks, unlock, autoplan,
// close) on a real Gitea: shared by the recorder, which runs it against a real Atlantis v0.47,
// and the test, which runs it against our server (test/atlantis-gitea-differential.test.ts).
// People act through Gitea's API and git; Gitea sends its own webhooks to the server; the
// server's API requests pass through a recorder (gitea-proxy.ts), whose writes are the step's
// events, normalised by the GitHub differential's normaliser.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { sleep } from '../../src/async.js';
import {
  DIRS_REPO,
  type Event,
  NAMED_ATLANTIS_YAML,
  NAMED_REPO,
  STEPS,
  type StepRecord,
  eventsOf,
  normalise,
} from './atlantis-scenario.js';
import { terraformConfig } from './git-repos.js';
import type { RecordedCall } from './github-standin.js';
import { type Gitea, type GiteaRepo, type GiteaUser, startGitea } from './gitea.js';
import { type ApiCall, type ApiRecorder, startApiRecorder } from './gitea-proxy.js';

export const GITEA_FIXTURE_DIR = fileURLToPath(new URL('../fixtures/atlantis-v0.47-gitea/', import.meta.url));
export const GITEA_FIXTURE = path.join(GITEA_FIXTURE_DIR, 'scenario.json');
export const GITEA_WEBHOOK_SECRET = 'gitea-differential-secret';
export const GITEA_BOT = 'atlantis-bot';

/** The events a repository webhook subscribes to, as Atlantis's docs set one up (configuring-webhooks.md, Gitea). */
export const ATLANTIS_HOOK_EVENTS = [
  'push',
  'issue_comment',
  'pull_request',
  'pull_request_comment',
  'pull_request_review_approved',
  'pull_request_review_rejected',
  'pull_request_sync',
];

export interface GiteaFixture {
  recordedFrom: string;
  flags: string[];
  steps: Array<StepRecord & { reads: string[] }>;
}

export function readGiteaFixture(): GiteaFixture {
  return JSON.parse(readFileSync(GITEA_FIXTURE, 'utf8')) as GiteaFixture;
}

/** The Gitea world of one run: Gitea, its people, the two repos, and the recorder the server talks through. */
export interface GiteaWorld {
  gitea: Gitea;
  owner: GiteaUser;
  dev: GiteaUser;
  bot: GiteaUser;
  repos: Map<string, GiteaRepo>;
  recorder: ApiRecorder;
  close(): Promise<void>;
}

/** The scopes docs/gitea.md asks of the server's token: nothing under /user. */
export const SERVER_TOKEN_SCOPES = ['write:issue', 'write:repository'];

/** A new token of `user` with only `scopes` (Gitea's API, as the user). */
async function scopedToken(gitea: Gitea, user: GiteaUser, scopes: string[]): Promise<string> {
  const r = await fetch(`${gitea.url}/api/v1/users/${user.name}/tokens`, {
    method: 'POST',
    headers: {
      authorization: `Basic ${Buffer.from(`${user.name}:${user.password}`).toString('base64')}`,
      'content-type': 'application/json',
    },
    body: JSON.stringify({ name: `server-${scopes.join('-')}`, scopes }),
  });
  const body = (await r.json()) as { sha1?: string };
  if (r.status !== 201 || !body.sha1) throw new Error(`gitea: a token of ${user.name} with ${scopes.join(', ')}: ${r.status}`);
  return body.sha1;
}

/**
 * Gitea on `giteaHost`, the recorder on `recorderHost`; repos acme/infra and acme/named as the
 * GitHub scenario has them. The bot's token has `botScopes` (default SERVER_TOKEN_SCOPES).
 */
export async function startGiteaWorld(giteaHost: string, recorderHost: string, o: { botScopes?: string[] } = {}): Promise<GiteaWorld> {
  const gitea = await startGitea({ host: giteaHost });
  try {
    const owner = await gitea.createUser('acme');
    const dev = await gitea.createUser('dev');
    const everyScope = await gitea.createUser(GITEA_BOT);
    const bot = { ...everyScope, token: await scopedToken(gitea, everyScope, o.botScopes ?? SERVER_TOKEN_SCOPES) };
    const base = {
      'README.md': '# infra\n',
      'dir1/main.tf': terraformConfig({ marker: 'dir1-v1' }),
      'dir2/main.tf': terraformConfig({ marker: 'dir2-v1' }),
    };
    const repos = new Map<string, GiteaRepo>();
    for (const [name, files] of [
      [DIRS_REPO, base],
      [NAMED_REPO, { ...base, 'atlantis.yaml': NAMED_ATLANTIS_YAML }],
    ] as const) {
      const repo = await gitea.createRepo(owner, name.split('/')[1] as string);
      await gitea.push(repo, owner, { branch: 'main', files, message: 'first' });
      await gitea.addCollaborator(repo, dev);
      await gitea.addCollaborator(repo, bot);
      repos.set(name, repo);
    }
    const recorder = await startApiRecorder(gitea.url, recorderHost);
    return {
      gitea,
      owner,
      dev,
      bot,
      repos,
      recorder,
      async close() {
        await recorder.close();
        await gitea.stop();
      },
    };
  } catch (e) {
    await gitea.stop();
    throw e;
  }
}

/** Adds the server's webhook (Atlantis's documented events, the scenario's secret) to both repos. */
export async function hookServer(w: GiteaWorld, eventsUrl: string): Promise<void> {
  for (const repo of w.repos.values())
    await w.gitea.addWebhook(repo, { url: eventsUrl, secret: GITEA_WEBHOOK_SECRET, events: ATLANTIS_HOOK_EVENTS });
}

/** The flags both servers get (Atlantis's names; ours are the same). */
export function giteaFlags(w: GiteaWorld, dataDir: string, serverUrl: string, port: number): string[] {
  return [
    'server',
    '--port',
    String(port),
    '--atlantis-url',
    serverUrl,
    '--data-dir',
    dataDir,
    '--gitea-base-url',
    w.recorder.url,
    '--gitea-user',
    GITEA_BOT,
    '--gitea-token',
    w.bot.token,
    '--gitea-webhook-secret',
    GITEA_WEBHOOK_SECRET,
    '--repo-allowlist',
    '*',
    '--tf-download=false',
  ];
}

/** The environment of either server: terraform from PATH, TF_CLI_CONFIG_FILE unset. */
export function giteaServerEnv(home: string): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: home, CHECKPOINT_DISABLE: '1' };
}

/** What varies from run to run: the URLs, the data dirs, the token (never kept). */
export interface GiteaNormaliseContext {
  serverUrl: string;
  dataDirs: string[];
  w: GiteaWorld;
}

export function normaliseGitea(text: string, c: GiteaNormaliseContext): string {
  const named = [
    [c.w.recorder.url, '<gitea-url>'],
    [c.w.gitea.url, '<gitea-url>'],
    [c.w.recorder.url.replace(/^http:\/\//, ''), '<gitea-host>'],
    [c.w.gitea.url.replace(/^http:\/\//, ''), '<gitea-host>'],
    [c.w.bot.token, '<token>'],
  ].reduce((t, [from, to]) => t.split(from as string).join(to as string), text);
  // The GitHub normaliser for the rest (SHAs, UUIDs, times, data dirs); its GitHub URL never occurs.
  return normalise(named, { serverUrl: c.serverUrl, githubUrl: 'http://no-github.invalid', dataDirs: c.dataDirs });
}

/** The writes among the calls, as events; the reads as `METHOD path?query` lines. */
export function giteaEvents(calls: ApiCall[], c: GiteaNormaliseContext): { events: Event[]; reads: string[] } {
  const n = (s: string): string => normaliseGitea(s, c);
  const asRecorded: RecordedCall[] = calls.map((call) => ({
    ...call,
    body: JSON.parse(n(JSON.stringify(call.body ?? null))) as unknown,
  }));
  const events = eventsOf(asRecorded, { serverUrl: '<atlantis-url>', githubUrl: 'http://no-github.invalid', dataDirs: [] }).map(
    (e): Event => (e.kind === 'call' ? { ...e, path: n(e.path) } : e),
  );
  const reads = calls
    .filter((call) => call.method === 'GET')
    .map((call) => {
      const q = new URLSearchParams(call.query).toString();
      return n(`${call.method} ${call.path.replace(/\/[0-9a-f]{40}(?=\/|$)/g, '/<sha>')}${q ? `?${q}` : ''}`).replace(
        /\/(issues\/comments|hooks)\/\d+/g,
        '/$1/<id>',
      );
    });
  return { events, reads };
}

/** What the people did in a step, through Gitea. */
async function act(step: (typeof STEPS)[number], w: GiteaWorld): Promise<void> {
  const repo = w.repos.get(step.repo)!;
  const a = step.action;
  if (a.kind === 'open') {
    const files: Record<string, string | null> = {};
    for (const [f, content] of Object.entries(a.files)) {
      if (typeof content === 'object' && content !== null) throw new Error(`step "${step.name}": a symlink cannot be pushed to Gitea here`);
      files[f] = content;
    }
    await w.gitea.push(repo, w.dev, { branch: a.branch, base: 'main', files, message: `change ${a.branch}` });
    const pr = await w.gitea.openPullRequest(repo, w.dev, { head: a.branch, title: `Change ${a.branch}` });
    if (pr.number !== step.pull)
      throw new Error(`step "${step.name}": Gitea numbered the pull request ${pr.number}, the scenario ${step.pull}`);
  } else if (a.kind === 'close') {
    const r = await w.gitea.api('PATCH', `/repos/${repo.fullName}/pulls/${step.pull}`, { state: 'closed' }, w.owner);
    if (r.status !== 201) throw new Error(`step "${step.name}": closing answered ${r.status} ${r.text.slice(0, 200)}`);
  } else await w.gitea.comment(repo, w.dev, step.pull, a.body);
}

function describeAction(step: (typeof STEPS)[number]): string {
  const a = step.action;
  const what =
    a.kind === 'open'
      ? `opened with ${Object.keys(a.files).join(', ')} changed`
      : a.kind === 'close'
        ? 'closed (not merged)'
        : `comment "${a.body}"`;
  return `${step.repo}#${step.pull}: ${what}`;
}

export interface GiteaRunOptions {
  w: GiteaWorld;
  ctx: GiteaNormaliseContext;
  /** The comments and statuses that end a step (then `quietMs` without a write, within `waitMs`). */
  expect: (step: (typeof STEPS)[number]) => { comments: number; statuses: number };
  waitMs: number;
  quietMs: number;
  /** The server's own word that the step's command is over (as atlantis-scenario.ts RunOptions). */
  finishedSince?: () => () => boolean;
  onStep?: (r: StepRecord) => void;
}

/** Runs every step; returns each step's events and reads. */
export async function runGiteaScenario(o: GiteaRunOptions): Promise<GiteaFixture['steps']> {
  const out: GiteaFixture['steps'] = [];
  const writes = (from: number): ApiCall[] => o.w.recorder.calls.slice(from).filter((c) => c.method !== 'GET');
  for (const step of STEPS) {
    const from = o.w.recorder.calls.length;
    const finished = o.finishedSince?.() ?? (() => false);
    await act(step, o.w);
    const want = o.expect(step);
    const count = (re: RegExp): number => writes(from).filter((c) => c.method === 'POST' && re.test(c.path)).length;
    const missing = (): boolean => count(/\/issues\/\d+\/comments$/) < want.comments || count(/\/statuses\//) < want.statuses;
    const end = Date.now() + o.waitMs;
    while (Date.now() < end && missing() && !finished()) await sleep(100);
    const settleEnd = Date.now() + o.waitMs;
    let seen = writes(from).length;
    let quietSince = Date.now();
    while (Date.now() < settleEnd && Date.now() - quietSince < o.quietMs) {
      await sleep(100);
      const now = writes(from).length;
      if (now !== seen) {
        seen = now;
        quietSince = Date.now();
      }
    }
    const { events, reads } = giteaEvents(o.w.recorder.calls.slice(from), o.ctx);
    const rec = { name: step.name, did: describeAction(step), events, reads };
    out.push(rec);
    o.onStep?.(rec);
  }
  return out;
}
