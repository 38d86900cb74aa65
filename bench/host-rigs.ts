// The three code hosts of bench/host-overhead.ts, each with our server (a real process, the
// built CLI) in front of it: GitHub and GitLab through their stand-ins, Gitea as the real
// binary built from its Go modules. A rig opens a pull request that adds one terraform project,
// sends the `atlantis plan` comment webhook as its host sends it (Gitea's own delivery, caught
// and passed on), and reads when the server's plan comment was taken by the host: the stand-ins'
// own time of the comment, and for Gitea the time in its router log of the POST that made it.
// Every clone goes over HTTP on loopback: HTTPS for the stand-ins, whose repositories need the
// server's token (which it sends over https only), plain HTTP for Gitea with a public repository,
// as in the Gitea tests. The server runs with --disable-autoplan and debug logs.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sleep } from '../src/async.js';
import { GITEA_BOT, ATLANTIS_HOOK_EVENTS, SERVER_TOKEN_SCOPES } from '../test/support/atlantis-gitea-scenario.js';
import { type CliProcess, startCli, waitForHttp } from '../test/support/cli.js';
import { type TestRepo, createTestRepo, terraformConfig } from '../test/support/git-repos.js';
import { type CaughtDelivery, startDeliveryCatcher, waitMergeable } from '../test/support/gitea-site.js';
import { type Gitea, startGitea } from '../test/support/gitea.js';
import { GitHubStandin, issueCommentPayload, pullRequestPayload, sendWebhook } from '../test/support/github-standin.js';
import { GitLabStandin } from '../test/support/gitlab-standin.js';
import type { GlMergeRequest } from '../test/support/gitlab-standin-model.js';
import { mergeRequestHook, noteHook, sendGitlabWebhook } from '../test/support/gitlab-standin-webhooks.js';
import { TERRAFORM } from '../test/support/terraform.js';

export type HostName = 'GitHub' | 'GitLab' | 'Gitea';

/** Loopback addresses of this bench (127.0.134.0/24): the hosts, Gitea's delivery catcher, one server per host. */
export const NET = '127.0.134';
const SECRET = 'host-overhead-bench-secret';
const BOT = GITEA_BOT;
const REPO = 'acme/infra';

export interface RigPull {
  number: number;
  branch: string;
  /** The project's directory: `bench<i>`. */
  dir: string;
}

/** The server's plan comment as the host has it. */
export interface HostComment {
  body: string;
  /** When the host took it (epoch ms, the host's own clock). */
  postedAt: number;
}

export interface HostRig {
  name: HostName;
  server: CliProcess;
  /** Where the direct run clones the same commit from. */
  cloneUrl: string;
  /** Opens pull request `i` adding bench<i>/main.tf; its opened webhook is delivered and answered. */
  open(i: number): Promise<RigPull>;
  /** Sends the comment's webhook as the host sends it; returns Date.now() at sending. */
  sendComment(p: RigPull, body: string): Promise<number>;
  /** The server's first comment on `p`, waited for up to `timeoutMs`; throws when none came. */
  answer(p: RigPull, timeoutMs: number): Promise<HostComment>;
  stop(): Promise<void>;
}

const files = (i: number): Record<string, string> => ({ [`bench${i}/main.tf`]: terraformConfig({ marker: `b${i}` }) });

interface Started {
  server: CliProcess;
  url: string;
  dirs: string[];
}

/** Our server on `<NET>.<last>:4141`, its log in a file (cli.ts: a busy reader must not stall it). */
async function startServer(last: number, hostFlags: string[], caFile?: string): Promise<Started> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-host-data-'));
  const home = mkdtempSync(path.join(tmpdir(), 'bench-host-home-'));
  const host = `${NET}.${last}`;
  const url = `http://${host}:4141`;
  const args = ['server', '--bind-address', host, '--port', '4141', '--data-dir', dataDir, '--atlantis-url', url];
  args.push('--repo-allowlist', '*', '--tf-binary', TERRAFORM, '--tf-download=false', '--disable-autoplan', '--log-level', 'debug');
  const ca = caFile ? { SSL_CERT_FILE: caFile, GIT_SSL_CAINFO: caFile, NODE_EXTRA_CA_CERTS: caFile } : {};
  const server = startCli(
    [...args, ...hostFlags],
    { CHECKPOINT_DISABLE: '1', HOME: home, ...ca },
    { logFile: path.join(home, 'server.log') },
  );
  const started = { server, url, dirs: [dataDir, home] };
  try {
    await waitForHttp(`${url}/healthz`, 60_000);
  } catch (e) {
    await stopServer(started);
    throw new Error(`${(e as Error).message}\n${server.output().slice(-3000)}`);
  }
  return started;
}

async function stopServer(s: Started): Promise<void> {
  if (s.server.child.exitCode === null && s.server.child.signalCode === null) {
    s.server.child.kill('SIGTERM');
    const t = setTimeout(() => s.server.child.kill('SIGKILL'), 30_000);
    await s.server.exited;
    clearTimeout(t);
  }
  for (const d of s.dirs) rmSync(d, { recursive: true, force: true });
}

/** Polls `find` every `everyMs` until it returns a value or `timeoutMs` passes. */
async function waitFor<T>(
  what: string,
  timeoutMs: number,
  everyMs: number,
  find: () => T | undefined | Promise<T | undefined>,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const got = await find();
    if (got !== undefined) return got;
    if (Date.now() > end) throw new Error(`${what}: not within ${Math.round(timeoutMs / 1000)} s`);
    await sleep(everyMs);
  }
}

const removeRepo = (r: TestRepo): void => rmSync(path.resolve(r.bareDir, '..', '..', '..'), { recursive: true, force: true });

export async function githubRig(): Promise<HostRig> {
  const gh = await GitHubStandin.start({ botLogin: BOT, host: `${NET}.1`, tls: true });
  const repo = await createTestRepo({ fullName: REPO, files: { 'README.md': '# infra\n' } });
  const cloneUrl = gh.gitUrl(REPO);
  gh.addRepo(REPO, { cloneUrl, bareDir: repo.bareDir });
  let s: Started;
  try {
    s = await startServer(11, ['--gh-user', BOT, '--gh-token', gh.token, '--gh-webhook-secret', SECRET, '--gh-api-url', gh.url], gh.caFile);
  } catch (e) {
    await gh.close();
    removeRepo(repo);
    throw e;
  }
  const send = async (event: string, payload: unknown): Promise<void> => {
    const r = await sendWebhook(`${s.url}/events`, event, payload, { secret: SECRET });
    if (r.status !== 200) throw new Error(`GitHub: the server answered ${event} with ${r.status}: ${r.body}`);
  };
  return {
    name: 'GitHub',
    server: s.server,
    cloneUrl: repo.cloneUrl,
    async open(i) {
      const number = i + 1;
      const branch = `bench-${i}`;
      const headSha = await repo.createBranch(branch, files(i));
      await repo.publishPull(number, branch);
      const changed = (await repo.changedFiles(branch)).map((filename) => ({ filename }));
      gh.addPull(REPO, { number, headSha, headRef: branch, baseRef: 'main', files: changed });
      await send('pull_request', pullRequestPayload({ repo: REPO, cloneUrl, action: 'opened', number, headSha, headRef: branch }));
      return { number, branch, dir: `bench${i}` };
    },
    async sendComment(p, body) {
      const payload = issueCommentPayload({ repo: REPO, cloneUrl, number: p.number, body, user: 'dev' });
      const t0 = Date.now();
      await send('issue_comment', payload);
      return t0;
    },
    answer: (p, timeoutMs) =>
      waitFor(`GitHub: the server's comment on #${p.number}`, timeoutMs, 5, () => {
        const c = gh.comments(REPO, p.number).find((x) => x.user === BOT);
        return c && { body: c.body, postedAt: Date.parse(c.createdAt) };
      }),
    async stop() {
      await stopServer(s);
      await gh.close();
      removeRepo(repo);
    },
  };
}

export async function gitlabRig(): Promise<HostRig> {
  const gl = await GitLabStandin.start({ host: `${NET}.2`, botUsername: BOT, tls: true });
  const repo = await createTestRepo({ fullName: REPO, files: { 'README.md': '# infra\n' } });
  gl.addProject(REPO, { bareDir: repo.bareDir });
  let s: Started;
  try {
    s = await startServer(
      12,
      ['--gitlab-user', BOT, '--gitlab-token', gl.token, '--gitlab-webhook-secret', SECRET, '--gitlab-hostname', gl.hostname],
      gl.caFile,
    );
  } catch (e) {
    await gl.close();
    removeRepo(repo);
    throw e;
  }
  const mrs = new Map<number, GlMergeRequest>();
  const send = async (event: 'Merge Request Hook' | 'Note Hook', payload: unknown): Promise<void> => {
    const r = await sendGitlabWebhook(`${s.url}/events`, event, payload, { token: SECRET, instance: gl.url });
    if (r.status !== 200) throw new Error(`GitLab: the server answered ${event} with ${r.status}: ${r.body}`);
  };
  return {
    name: 'GitLab',
    server: s.server,
    cloneUrl: repo.cloneUrl,
    async open(i) {
      const branch = `bench-${i}`;
      await repo.createBranch(branch, files(i));
      const mr = gl.openMergeRequest(REPO, { sourceBranch: branch, author: 'dev' });
      mrs.set(mr.iid, mr);
      await send('Merge Request Hook', mergeRequestHook(gl, mr, { action: 'open' }));
      return { number: mr.iid, branch, dir: `bench${i}` };
    },
    async sendComment(p, body) {
      const mr = mrs.get(p.number)!;
      const payload = noteHook(gl, gl.addNote(mr, body, 'dev'));
      const t0 = Date.now();
      await send('Note Hook', payload);
      return t0;
    },
    answer(p, timeoutMs) {
      const mr = mrs.get(p.number)!;
      return waitFor(`GitLab: the server's note on !${p.number}`, timeoutMs, 5, () => {
        const n = gl.notesOf(mr.projectId, mr.iid).find((x) => x.authorId === gl.bot.id && !x.system);
        return n && { body: n.body, postedAt: Date.parse(n.createdAt) };
      });
    },
    async stop() {
      await stopServer(s);
      await gl.close();
      removeRepo(repo);
    },
  };
}

/** `2026/12/03 16:40:01.123456 ...` (Gitea's log with FLAGS stdflags,microseconds,utc) as epoch ms. */
export function giteaLogTime(line: string): number {
  const m = /^(\d{4})\/(\d\d)\/(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6}) /.exec(line);
  if (!m) return NaN;
  const [y, mo, d, h, mi, se, us] = m.slice(1).map(Number) as [number, number, number, number, number, number, number];
  return Date.UTC(y, mo - 1, d, h, mi, se) + us / 1000;
}

export async function giteaRig(): Promise<HostRig> {
  const gitea: Gitea = await startGitea({ host: `${NET}.3`, logFlags: 'stdflags,microseconds,utc' });
  const catcher = await startDeliveryCatcher(`${NET}.4`).catch(async (e: unknown) => {
    await gitea.stop();
    throw e;
  });
  let s: Started | undefined;
  const stop = async (): Promise<void> => {
    if (s) await stopServer(s);
    await catcher.close();
    await gitea.stop();
  };
  try {
    const owner = await gitea.createUser('acme');
    const dev = await gitea.createUser('dev');
    const bot = await gitea.createUser(BOT);
    // The server's token has only the scopes docs/gitea.md asks for.
    const tok = await fetch(`${gitea.url}/api/v1/users/${BOT}/tokens`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`${BOT}:${bot.password}`).toString('base64')}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'server', scopes: SERVER_TOKEN_SCOPES }),
    });
    const token = ((await tok.json()) as { sha1?: string }).sha1;
    if (tok.status !== 201 || !token) throw new Error(`Gitea: the server's token: ${tok.status}`);
    const repo = await gitea.createRepo(owner, 'infra');
    await gitea.push(repo, owner, { branch: 'main', files: { 'README.md': '# infra\n' }, message: 'first' });
    await gitea.addCollaborator(repo, dev);
    await gitea.addCollaborator(repo, bot);
    await gitea.addWebhook(repo, { url: catcher.url('right'), secret: SECRET, events: ATLANTIS_HOOK_EVENTS });
    s = await startServer(13, [
      '--gitea-base-url',
      gitea.url,
      '--gitea-user',
      BOT,
      '--gitea-token',
      token,
      '--gitea-webhook-secret',
      SECRET,
    ]);
    const server = s;
    // Gitea's delivery passed on to the server as it came (its headers and body, its signature).
    const pass = async (d: CaughtDelivery): Promise<void> => {
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(d.headers))
        if (typeof v === 'string' && !['host', 'content-length', 'connection'].includes(k)) headers[k] = v;
      const r = await fetch(`${server.url}/events`, { method: 'POST', headers, body: d.raw, signal: AbortSignal.timeout(30_000) });
      const text = await r.text();
      if (r.status !== 200)
        throw new Error(`Gitea: the server answered ${String(d.headers['x-gitea-event-type'])} with ${r.status}: ${text}`);
    };
    const logBytes = (): number => readFileSync(gitea.logFile).length;
    const logFrom = new Map<number, number>();
    return {
      name: 'Gitea',
      server: s.server,
      cloneUrl: repo.cloneUrl,
      async open(i) {
        const branch = `bench-${i}`;
        await gitea.push(repo, dev, { branch, base: 'main', files: files(i) });
        const pr = await gitea.openPullRequest(repo, dev, { head: branch, title: `bench ${i}` });
        const opened = await catcher.next(
          (d) => d.headers['x-gitea-event-type'] === 'pull_request' && d.json.action === 'opened' && d.json.number === pr.number,
        );
        await pass(opened);
        // Gitea checks mergeability in the background after a pull request opens: not during the measured plan.
        await waitMergeable(gitea, repo.fullName, pr.number, true);
        return { number: pr.number, branch, dir: `bench${i}` };
      },
      async sendComment(p, body) {
        const id = await gitea.comment(repo, dev, p.number, body);
        const d = await catcher.next(
          (x) => x.headers['x-gitea-event-type'] === 'pull_request_comment' && (x.json.comment as { id?: number } | undefined)?.id === id,
        );
        logFrom.set(p.number, logBytes());
        const t0 = Date.now();
        await pass(d);
        return t0;
      },
      async answer(p, timeoutMs) {
        // The router's line for the POST that made the comment, read from Gitea's log (no API polls during the plan).
        const re = new RegExp(`router: completed POST /api/v1/repos/${repo.fullName}/issues/${p.number}/comments for .*, 201 `);
        const from = logFrom.get(p.number) ?? 0;
        const line = await waitFor(`Gitea: the server's comment on #${p.number}`, timeoutMs, 10, () =>
          readFileSync(gitea.logFile)
            .subarray(from)
            .toString('utf8')
            // biome-ignore lint/suspicious/noControlCharactersInRegex: colour codes, should Gitea write any
            .replace(/\u001b\[[0-9;]*m/g, '')
            .split('\n')
            .find((l) => re.test(l)),
        );
        const postedAt = giteaLogTime(line);
        if (Number.isNaN(postedAt)) throw new Error(`Gitea: no time in its log line: ${line}`);
        const list = await gitea.api<Array<{ user: { login: string }; body: string }>>(
          'GET',
          `/repos/${repo.fullName}/issues/${p.number}/comments`,
        );
        const c = list.body.find((x) => x.user.login === BOT);
        if (!c) throw new Error(`Gitea: the POST of a comment on #${p.number} is logged, but the API lists none by ${BOT}`);
        return { body: c.body, postedAt };
      },
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}
