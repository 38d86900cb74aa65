// A real Gitea for tests (built by hack/gitea/build.sh, docs/test-tools.md): started headless
// on a loopback address with SQLite in a temp dir, an admin made with Gitea's own CLI, and
// everything else (users, tokens, repos, pushes over HTTP with git, pull requests, comments,
// webhooks) done through Gitea's API and git, as a user would.
import crypto from 'node:crypto';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os, { tmpdir } from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { type GroupProcess, spawnGroup } from '../../dev/procs.js';
import { goTool } from './go-tools.js';

export interface GiteaUser {
  name: string;
  password: string;
  email: string;
  /** An access token with every scope (`Authorization: token <token>`). */
  token: string;
}

export interface GiteaRepo {
  id: number;
  owner: string;
  name: string;
  /** owner/name */
  fullName: string;
  /** http://<host>:<port>/owner/name.git */
  cloneUrl: string;
  defaultBranch: string;
}

export interface ApiAnswer<T = unknown> {
  status: number;
  body: T;
  text: string;
}

export interface Gitea {
  /** http://<host>:<port> (what --gitea-base-url takes). */
  url: string;
  host: string;
  port: number;
  admin: GiteaUser;
  /** Gitea's stdout and stderr. */
  logFile: string;
  /** Gitea's API under /api/v1: `api('GET', '/repos/o/r')`, as `as` (default the admin). */
  api<T = unknown>(method: string, apiPath: string, body?: unknown, as?: GiteaUser): Promise<ApiAnswer<T>>;
  /** A user (not an admin unless asked) with a token of every scope. */
  createUser(name: string, opts?: { admin?: boolean }): Promise<GiteaUser>;
  /** An empty repository owned by `owner`. */
  createRepo(owner: GiteaUser, name: string, opts?: { private?: boolean }): Promise<GiteaRepo>;
  /** `as`'s fork of a repository (pull requests from it name their head `<as>:<branch>`). */
  fork(repo: GiteaRepo, as: GiteaUser): Promise<GiteaRepo>;
  /** An organisation (made by the admin, who owns it) with a team of `members` (write access); returns the team's id. */
  createOrgTeam(org: string, team: string, members: GiteaUser[]): Promise<number>;
  /** Gives `user` write (or the given) access to a repository. */
  addCollaborator(repo: GiteaRepo, user: GiteaUser, permission?: 'read' | 'write' | 'admin'): Promise<void>;
  /**
   * Commits `files` (path → content; null deletes) on `branch` and pushes it over HTTP with
   * git as `as`. A new branch starts from `base` (or as the first commit of an empty repo).
   * Returns the new commit's sha once Gitea's API shows the branch at it.
   */
  push(
    repo: GiteaRepo,
    as: GiteaUser,
    opts: { branch: string; base?: string; files: Record<string, string | null>; message?: string },
  ): Promise<string>;
  /** Opens a pull request of head (`branch`, or `user:branch` from a fork) into base; returns its number and head sha. */
  openPullRequest(
    repo: GiteaRepo,
    as: GiteaUser,
    opts: { head: string; base?: string; title?: string; body?: string },
  ): Promise<{ number: number; headSha: string }>;
  /** Comments on an issue or pull request; returns the comment's id. */
  comment(repo: GiteaRepo, as: GiteaUser, number: number, body: string): Promise<number>;
  /**
   * A repository webhook (type gitea, JSON) to `url` signed with `secret`; default events:
   * pull_request (which includes comments on pull requests) and issue_comment.
   */
  addWebhook(repo: GiteaRepo, opts: { url: string; secret: string; events?: string[] }): Promise<number>;
  /** SIGTERM, wait for Gitea to exit (SIGKILL after 10 s), remove its temp dir; resolves with how it ended. */
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export interface StartGiteaOptions {
  /** Loopback address to listen on (default 127.0.0.1). */
  host?: string;
  /** Admin login (default gitea-admin). */
  adminName?: string;
  /** `[webhook] ALLOWED_HOST_LIST` (default loopback: where the tests' receivers listen). */
  webhookAllowedHosts?: string;
  /** `[log] FLAGS` (default Gitea's stdflags); e.g. `stdflags,microseconds,utc` to time requests from its router log. */
  logFlags?: string;
}

const rand = (n = 12): string => crypto.randomBytes(n).toString('hex');

async function freePort(host: string): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve, reject) => srv.once('error', reject).listen(0, host, resolve));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

function appIni(o: {
  dir: string;
  host: string;
  port: number;
  staticRoot: string;
  runUser: string;
  allowedHosts: string;
  logFlags?: string;
}): string {
  const d = (p: string): string => path.join(o.dir, p);
  return `APP_NAME = atlantis-operator tests
RUN_USER = ${o.runUser}
RUN_MODE = prod
WORK_PATH = ${o.dir}

[server]
PROTOCOL = http
HTTP_ADDR = ${o.host}
HTTP_PORT = ${o.port}
DOMAIN = ${o.host}
ROOT_URL = http://${o.host}:${o.port}/
APP_DATA_PATH = ${d('data')}
STATIC_ROOT_PATH = ${o.staticRoot}
DISABLE_SSH = true
START_SSH_SERVER = false
OFFLINE_MODE = true
LFS_START_SERVER = false
GRACEFUL_HAMMER_TIME = 5s

[database]
DB_TYPE = sqlite3
PATH = ${d('data/gitea.db')}
SQLITE_JOURNAL_MODE = WAL

[repository]
ROOT = ${d('repositories')}
DEFAULT_BRANCH = main

[security]
INSTALL_LOCK = true
SECRET_KEY = ${rand(24)}
INTERNAL_TOKEN = ${rand(32)}
PASSWORD_HASH_ALGO = pbkdf2_v2

[oauth2]
ENABLED = false

[service]
DISABLE_REGISTRATION = true
ENABLE_NOTIFY_MAIL = false
DEFAULT_KEEP_EMAIL_PRIVATE = false

[mailer]
ENABLED = false

[webhook]
ALLOWED_HOST_LIST = ${o.allowedHosts}
DELIVER_TIMEOUT = 10

[indexer]
ISSUE_INDEXER_TYPE = db
REPO_INDEXER_ENABLED = false

[session]
PROVIDER = memory

[cache]
ADAPTER = memory

[actions]
ENABLED = false

[packages]
ENABLED = false

[cron.update_checker]
ENABLED = false

[log]
MODE = console
LEVEL = Info
ROOT_PATH = ${d('log')}
${o.logFlags ? `FLAGS = ${o.logFlags}\n` : ''}`;
}

/** Starts Gitea; stop() ends it. Throws with Gitea's log when it does not come up. */
export async function startGitea(opts: StartGiteaOptions = {}): Promise<Gitea> {
  const bin = await goTool('gitea');
  const host = opts.host ?? '127.0.0.1';
  const dir = mkdtempSync(path.join(tmpdir(), 'ato-gitea-'));
  for (const sub of ['data', 'repositories', 'log', 'home', 'work']) mkdirSync(path.join(dir, sub));
  const port = await freePort(host);
  const root = process.getuid?.() === 0;
  const runUser = root ? 'root' : os.userInfo().username;
  const ini = path.join(dir, 'app.ini');
  writeFileSync(
    ini,
    appIni({
      dir,
      host,
      port,
      staticRoot: path.dirname(bin),
      runUser,
      allowedHosts: opts.webhookAllowedHosts ?? 'loopback',
      ...(opts.logFlags ? { logFlags: opts.logFlags } : {}),
    }),
  );
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: path.join(dir, 'home'),
    USER: runUser,
    GITEA_WORK_DIR: dir,
    ...(root ? { GITEA_I_AM_BEING_UNSAFE_RUNNING_AS_ROOT: 'true' } : {}),
  };
  const cli = async (args: string[]): Promise<string> => {
    const r = await execa(bin, [...args, '--config', ini], { env, extendEnv: false, cwd: dir, reject: false, timeout: 120_000 });
    if (r.exitCode !== 0) throw new Error(`gitea ${args.join(' ')} exited ${r.exitCode}: ${r.stderr || r.stdout}`);
    return String(r.stdout);
  };

  let proc: GroupProcess | undefined;
  const logFile = path.join(dir, 'gitea.log');
  const base = `http://${host}:${port}`;
  const cleanup = async (): Promise<{ code: number | null; signal: NodeJS.Signals | null }> => {
    await proc?.stop(10_000);
    const ended = proc ? await proc.exited : { code: null, signal: null };
    rmSync(dir, { recursive: true, force: true });
    return ended;
  };
  try {
    await cli(['migrate']);
    const admin: GiteaUser = { name: opts.adminName ?? 'gitea-admin', password: `P-${rand()}`, email: 'admin@example.test', token: '' };
    await cli(
      ['admin', 'user', 'create', '--admin', '--username', admin.name, '--password', admin.password].concat([
        '--email',
        admin.email,
        '--must-change-password=false',
      ]),
    );

    const out = openSync(logFile, 'a');
    proc = spawnGroup(bin, ['web', '--config', ini], { env, cwd: dir, stdio: ['ignore', out, out] });
    closeSync(out);
    const deadline = Date.now() + 120_000;
    for (;;) {
      if (!proc.isRunning()) throw new Error(`gitea web exited at start:\n${readFileSync(logFile, 'utf8').slice(-4000)}`);
      const up = await fetch(`${base}/api/v1/version`).then(
        (r) => r.ok,
        () => false,
      );
      if (up) break;
      if (Date.now() > deadline)
        throw new Error(`gitea did not answer on ${base} within 120 s:\n${readFileSync(logFile, 'utf8').slice(-4000)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    admin.token = await createToken(base, admin);
    return makeGitea({ base, host, port, dir, admin, logFile, stop: cleanup });
  } catch (err) {
    await cleanup();
    throw err;
  }
}

async function createToken(base: string, u: Pick<GiteaUser, 'name' | 'password'>): Promise<string> {
  const r = await fetch(`${base}/api/v1/users/${encodeURIComponent(u.name)}/tokens`, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${u.name}:${u.password}`).toString('base64')}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: `tests-${rand(4)}`, scopes: ['all'] }),
  });
  const body = (await r.json()) as { sha1?: string };
  if (r.status !== 201 || !body.sha1) throw new Error(`gitea: token for ${u.name}: ${r.status} ${JSON.stringify(body)}`);
  return body.sha1;
}

function makeGitea(s: {
  base: string;
  host: string;
  port: number;
  dir: string;
  admin: GiteaUser;
  logFile: string;
  stop: Gitea['stop'];
}): Gitea {
  const api = async <T>(method: string, apiPath: string, body?: unknown, as: GiteaUser = s.admin): Promise<ApiAnswer<T>> => {
    const r = await fetch(`${s.base}/api/v1${apiPath}`, {
      method,
      headers: {
        authorization: `token ${as.token}`,
        accept: 'application/json',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await r.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // not JSON: keep the text
    }
    return { status: r.status, body: parsed as T, text };
  };
  const must = async <T>(want: number, method: string, apiPath: string, body?: unknown, as?: GiteaUser): Promise<T> => {
    const r = await api<T>(method, apiPath, body, as);
    if (r.status !== want) throw new Error(`gitea: ${method} ${apiPath} answered ${r.status}, wanted ${want}: ${r.text.slice(0, 500)}`);
    return r.body;
  };
  const git = async (cwd: string, as: GiteaUser, args: string[]): Promise<string> => {
    const auth = Buffer.from(`${as.name}:${as.token}`).toString('base64');
    const r = await execa('git', ['-c', `http.extraHeader=Authorization: Basic ${auth}`, ...args], {
      cwd,
      reject: false,
      timeout: 60_000,
      env: {
        GIT_CONFIG_NOSYSTEM: '1',
        GIT_CONFIG_GLOBAL: '/dev/null',
        GIT_TERMINAL_PROMPT: '0',
        GIT_AUTHOR_NAME: as.name,
        GIT_AUTHOR_EMAIL: as.email,
        GIT_COMMITTER_NAME: as.name,
        GIT_COMMITTER_EMAIL: as.email,
      },
    });
    if (r.exitCode !== 0) throw new Error(`git ${args[0]} failed (${r.exitCode}): ${r.stderr}`);
    return String(r.stdout).trim();
  };
  // Right after a push Gitea may still be indexing the branch (a 500 or 404 for about a
  // second after the first push into an empty repo): wait until the API shows it at `sha`.
  const waitForBranch = async (repo: GiteaRepo, branch: string, sha: string): Promise<void> => {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const r = await api<{ commit?: { id?: string } }>('GET', `/repos/${repo.fullName}/branches/${encodeURIComponent(branch)}`);
      if (r.status === 200 && r.body.commit?.id === sha) return;
      if (Date.now() > deadline)
        throw new Error(`gitea: branch ${branch} of ${repo.fullName} not at ${sha} after 30 s (${r.status} ${r.text.slice(0, 200)})`);
      await new Promise((res) => setTimeout(res, 100));
    }
  };

  return {
    url: s.base,
    host: s.host,
    port: s.port,
    admin: s.admin,
    logFile: s.logFile,
    api,
    async createUser(name, o = {}) {
      const u: GiteaUser = { name, password: `P-${rand()}`, email: `${name}@example.test`, token: '' };
      await must(201, 'POST', '/admin/users', {
        username: name,
        email: u.email,
        password: u.password,
        must_change_password: false,
        send_notify: false,
      });
      if (o.admin) await must(200, 'PATCH', `/admin/users/${name}`, { admin: true, login_name: name, source_id: 0 });
      u.token = await createToken(s.base, u);
      return u;
    },
    async createRepo(owner, name, o = {}) {
      const r = await must<{ id: number; full_name: string; clone_url: string; default_branch: string }>(
        201,
        'POST',
        '/user/repos',
        { name, private: o.private ?? false, auto_init: false, default_branch: 'main' },
        owner,
      );
      return { id: r.id, owner: owner.name, name, fullName: r.full_name, cloneUrl: r.clone_url, defaultBranch: r.default_branch };
    },
    async fork(repo, as) {
      const r = await must<{ id: number; full_name: string; clone_url: string; default_branch: string }>(
        202,
        'POST',
        `/repos/${repo.fullName}/forks`,
        {},
        as,
      );
      return { id: r.id, owner: as.name, name: repo.name, fullName: r.full_name, cloneUrl: r.clone_url, defaultBranch: r.default_branch };
    },
    async createOrgTeam(org, team, members) {
      if ((await api('GET', `/orgs/${org}`)).status === 404) await must(201, 'POST', '/orgs', { username: org, visibility: 'public' });
      const t = await must<{ id: number }>(201, 'POST', `/orgs/${org}/teams`, {
        name: team,
        permission: 'write',
        units: ['repo.code', 'repo.issues', 'repo.pulls'],
        includes_all_repositories: false,
      });
      for (const m of members) await must(204, 'PUT', `/teams/${t.id}/members/${m.name}`);
      return t.id;
    },
    async addCollaborator(repo, user, permission = 'write') {
      await must(204, 'PUT', `/repos/${repo.fullName}/collaborators/${user.name}`, { permission });
    },
    async push(repo, as, o) {
      const work = mkdtempSync(path.join(s.dir, 'work', 'push-'));
      try {
        await git(work, as, ['init', '-q', '-b', o.branch]);
        await git(work, as, ['remote', 'add', 'origin', repo.cloneUrl]);
        const start = (await git(work, as, ['ls-remote', 'origin', `refs/heads/${o.branch}`])) ? o.branch : o.base;
        if (start) {
          await git(work, as, ['fetch', '-q', 'origin', `refs/heads/${start}`]);
          await git(work, as, ['checkout', '-q', '-B', o.branch, 'FETCH_HEAD']);
        }
        for (const [file, content] of Object.entries(o.files)) {
          const p = path.join(work, file);
          if (content === null) rmSync(p, { force: true });
          else {
            mkdirSync(path.dirname(p), { recursive: true });
            writeFileSync(p, content);
          }
        }
        await git(work, as, ['add', '-A']);
        await git(work, as, ['commit', '-q', '--allow-empty', '-m', o.message ?? `change ${o.branch}`]);
        await git(work, as, ['push', '-q', 'origin', `HEAD:refs/heads/${o.branch}`]);
        const sha = await git(work, as, ['rev-parse', 'HEAD']);
        await waitForBranch(repo, o.branch, sha);
        return sha;
      } finally {
        rmSync(work, { recursive: true, force: true });
      }
    },
    async openPullRequest(repo, as, o) {
      const pr = await must<{ number: number; head: { sha: string } }>(
        201,
        'POST',
        `/repos/${repo.fullName}/pulls`,
        { head: o.head, base: o.base ?? repo.defaultBranch, title: o.title ?? `Change ${o.head}`, body: o.body ?? '' },
        as,
      );
      return { number: pr.number, headSha: pr.head.sha };
    },
    async comment(repo, as, number, body) {
      const c = await must<{ id: number }>(201, 'POST', `/repos/${repo.fullName}/issues/${number}/comments`, { body }, as);
      return c.id;
    },
    async addWebhook(repo, o) {
      const h = await must<{ id: number }>(201, 'POST', `/repos/${repo.fullName}/hooks`, {
        type: 'gitea',
        active: true,
        branch_filter: '*',
        events: o.events ?? ['pull_request', 'issue_comment'],
        config: { url: o.url, content_type: 'json', secret: o.secret },
      });
      return h.id;
    },
    stop: s.stop,
  };
}
