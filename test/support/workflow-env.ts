// A complete PR-workflow environment for end-to-end tests: the GitHub stand-in, a real git
// repository on disk, and helpers to open PRs, comment, and wait for the server's answers.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { forwardAuth } from '../../src/server/replicas/forward-auth.js';
import type { SentWebhook } from './github-standin-webhooks.js';
import { type StandinComment, GitHubStandin, issueCommentPayload, pullRequestPayload, sendWebhook } from './github-standin.js';
import { testSharedStateKey } from './redis-server.js';
import { type FileChanges, type TestRepo, createTestRepo } from './git-repos.js';
import { TERRAFORM } from './terraform.js';
import { type CliProcess, startCli, waitForHttp } from './cli.js';
import { sleep } from '../../src/async.js';

export const WEBHOOK_SECRET = 'webhook-secret-for-tests';

/**
 * Marks a webhook as handed over by another replica, with the proof a replica holding the
 * shared state key gives (src/server/replicas/forward-auth.ts): replica `to` handles it itself
 * (the loop guard of src/server/replicas/router.ts), as when two replicas' lists of the live
 * replicas disagree for a moment. Tests use it to run one PR's commands on chosen replicas.
 */
export function handleHere(to: string): (sent: SentWebhook) => Record<string, string> {
  return (sent) => ({
    'x-atlantis-forwarded-by': 'test',
    'x-atlantis-forward-auth': forwardAuth(
      testSharedStateKey(),
      // GitHub's headers in the host's order (vcs/github/webhooks.ts): event, delivery, signature.
      { from: 'test', to, headers: [sent.event, sent.deliveryId, sent.signature], body: sent.body },
      Date.now(),
    ).header,
  });
}

type WebhookHeaders = Record<string, string> | ((sent: SentWebhook) => Record<string, string>);

export interface WorkflowEnv {
  gh: GitHubStandin;
  repo: TestRepo;
  /** Server flags pointing at the stand-in. */
  serverArgs(dataDir: string, host: string, extra?: string[]): string[];
  /** `headers`: more webhook headers, e.g. handleHere(id) to keep replica `id` from handing it to the PR's owner. */
  openPull(
    serverUrl: string,
    number: number,
    branch: string,
    files: FileChanges,
    headers?: WebhookHeaders,
  ): Promise<{ status: number; headSha: string }>;
  comment(
    serverUrl: string,
    number: number,
    body: string,
    user?: string,
    headers?: WebhookHeaders,
  ): Promise<{ status: number; body: string }>;
  closePull(serverUrl: string, number: number): Promise<{ status: number; body: string }>;
  /** Waits until PR `number` has a comment matching `re` posted after `after` comments; returns it. */
  waitForComment(number: number, re: RegExp, opts?: { after?: number; timeoutMs?: number; pollMs?: number }): Promise<StandinComment>;
  commentsOn(number: number): StandinComment[];
  close(): Promise<void>;
}

/**
 * The flags of a server on `host`:4141 against the GitHub stand-in `gh` for `github.com/acme/*`,
 * running the machine's terraform; `extra` appended.
 */
export function githubServerArgs(
  gh: GitHubStandin,
  o: { dataDir: string; host: string; secret: string; extra?: readonly string[] },
): string[] {
  return [
    'server',
    '--bind-address',
    o.host,
    '--port',
    '4141',
    '--data-dir',
    o.dataDir,
    '--atlantis-url',
    `http://${o.host}:4141`,
    '--repo-allowlist',
    'github.com/acme/*',
    '--gh-user',
    'atlantis-bot',
    '--gh-token',
    gh.token,
    '--gh-webhook-secret',
    o.secret,
    '--gh-api-url',
    gh.url,
    '--tf-binary',
    TERRAFORM,
    ...(o.extra ?? []),
  ];
}

/**
 * `ghHost`: the loopback address the GitHub stand-in listens on (default 127.0.0.1);
 * `webhookSecret`: the server's --gh-webhook-secret, which webhooks are signed with (default WEBHOOK_SECRET).
 */
export async function createWorkflowEnv(opts: { ghHost?: string; webhookSecret?: string } = {}): Promise<WorkflowEnv> {
  const secret = opts.webhookSecret ?? WEBHOOK_SECRET;
  const gh = await GitHubStandin.start({ botLogin: 'atlantis-bot', host: opts.ghHost });
  const repo = await createTestRepo({ fullName: 'acme/infra' });
  gh.addRepo(repo.fullName, { cloneUrl: repo.cloneUrl });
  const env: WorkflowEnv = {
    gh,
    repo,
    serverArgs(dataDir, host, extra = []) {
      return githubServerArgs(gh, { dataDir, host, secret, extra });
    },
    async openPull(serverUrl, number, branch, files, headers) {
      const headSha = await repo.createBranch(branch, files);
      await repo.publishPull(number, branch);
      gh.addPull(repo.fullName, {
        number,
        headSha,
        headRef: branch,
        baseRef: repo.baseBranch,
        files: (await repo.changedFiles(branch)).map((filename) => ({ filename })),
      });
      const r = await sendWebhook(
        `${serverUrl}/events`,
        'pull_request',
        pullRequestPayload({ repo: repo.fullName, cloneUrl: repo.cloneUrl, action: 'opened', number, headSha, headRef: branch }),
        { secret, ...(headers ? { headers } : {}) },
      );
      return { status: r.status, headSha };
    },
    async comment(serverUrl, number, body, user = 'dev', headers) {
      const r = await sendWebhook(
        `${serverUrl}/events`,
        'issue_comment',
        issueCommentPayload({ repo: repo.fullName, cloneUrl: repo.cloneUrl, number, body, user }),
        { secret, ...(headers ? { headers } : {}) },
      );
      return { status: r.status, body: r.body };
    },
    async closePull(serverUrl, number) {
      const pr = gh.getPull(repo.fullName, number)!;
      gh.updatePull(repo.fullName, number, { state: 'closed' });
      const r = await sendWebhook(
        `${serverUrl}/events`,
        'pull_request',
        pullRequestPayload({
          repo: repo.fullName,
          cloneUrl: repo.cloneUrl,
          action: 'closed',
          number,
          headSha: pr.headSha,
          headRef: pr.headRef,
        }),
        { secret },
      );
      return { status: r.status, body: r.body };
    },
    commentsOn(number) {
      return gh.comments(repo.fullName, number);
    },
    async waitForComment(number, re, opts = {}) {
      const end = Date.now() + (opts.timeoutMs ?? 60_000);
      while (Date.now() < end) {
        const found = env
          .commentsOn(number)
          .slice(opts.after ?? 0)
          .find((c) => re.test(c.body));
        if (found) return found;
        await sleep(opts.pollMs ?? 100);
      }
      const seen = env
        .commentsOn(number)
        .map((c) => c.body.slice(0, 300))
        .join('\n---\n');
      throw new Error(`no comment matching ${re} on PR #${number} within ${opts.timeoutMs ?? 60_000} ms; comments:\n${seen}`);
    },
    close: () => gh.close(),
  };
  return env;
}

export function tempDataDir(): string {
  return mkdtempSync(path.join(tmpdir(), 'ato-data-'));
}

/** Starts the real server process on `host`:4141 for this env; fails with its output if it does not come up. */
export async function startWorkflowServer(
  env: WorkflowEnv,
  dataDir: string,
  host: string,
  extra: string[] = [],
): Promise<{ p: CliProcess; url: string }> {
  const p = startCli(env.serverArgs(dataDir, host, extra));
  const url = `http://${host}:4141`;
  await waitForHttp(`${url}/healthz`).catch((e: Error) => {
    p.child.kill('SIGKILL');
    throw new Error(`${e.message}\n${p.output()}`);
  });
  return { p, url };
}
