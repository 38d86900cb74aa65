// Webhooks as GitHub sends them: each delivery on a new connection (GitHub does not reuse one
// across deliveries, and a reused connection would stay on its pod past the Service's
// endpoint change), signed, with a bounded wait for the answer.
import crypto from 'node:crypto';
import http from 'node:http';
import { issueCommentPayload, pullRequestPayload } from '../../test/support/github-standin.js';
import type { FileChanges } from '../../test/support/git-repos.js';
import { WEBHOOK_SECRET, type WorkflowEnv } from '../../test/support/workflow-env.js';
import { sleep } from '../../src/async.js';
import type { DeliveryKind, DeliveryRecord } from './figures.js';

export interface Target {
  host: string;
  port: number;
}

/** POSTs one signed webhook to <target>/events on a fresh connection; rejects when the connection fails. */
export function postWebhook(t: Target, event: string, payload: unknown, timeoutMs = 10_000): Promise<{ status: number; body: string }> {
  const raw = Buffer.from(JSON.stringify(payload));
  const headers = {
    'content-type': 'application/json',
    'content-length': String(raw.length),
    connection: 'close',
    'user-agent': 'GitHub-Hookshot/demo',
    'x-github-event': event,
    'x-github-delivery': crypto.randomUUID(),
    'x-hub-signature-256': `sha256=${crypto.createHmac('sha256', WEBHOOK_SECRET).update(raw).digest('hex')}`,
  };
  return new Promise((resolve, reject) => {
    const req = http.request({ host: t.host, port: t.port, path: '/events', method: 'POST', headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        body += d;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(raw);
  });
}

/** Creates PR `number`'s branch and registers the PR with the stand-in (no webhook yet). */
export async function preparePull(env: WorkflowEnv, number: number, branch: string, files: FileChanges): Promise<string> {
  const headSha = await env.repo.createBranch(branch, files);
  await env.repo.publishPull(number, branch);
  env.gh.addPull(env.repo.fullName, {
    number,
    headSha,
    headRef: branch,
    baseRef: env.repo.baseBranch,
    files: (await env.repo.changedFiles(branch)).map((filename) => ({ filename })),
  });
  return headSha;
}

export function openedPayload(env: WorkflowEnv, number: number, branch: string, headSha: string): unknown {
  const { fullName, cloneUrl } = env.repo;
  return pullRequestPayload({ repo: fullName, cloneUrl, action: 'opened', number, headSha, headRef: branch });
}

export function commentPayload(env: WorkflowEnv, number: number, body: string): unknown {
  return issueCommentPayload({ repo: env.repo.fullName, cloneUrl: env.repo.cloneUrl, number, body, user: 'dev' });
}

export interface DeliveryLoop {
  records: DeliveryRecord[];
  /** Stops sending and waits for every delivery in flight. */
  stop(): Promise<DeliveryRecord[]>;
}

export interface DeliveryLoopOptions {
  intervalMs: number;
  /** PRs that get `atlantis unlock` comments, in turn */
  unlockPulls: readonly number[];
  /** every this many deliveries, a new PR is opened instead (its autoplan runs a quick plan) */
  autoplanEvery: number;
  firstNewPull: number;
  /** bound on the whole loop */
  maxMs: number;
}

/**
 * Sends one delivery every `intervalMs` on a fixed schedule (not waiting for the previous
 * answer, as GitHub does not), until stopped or `maxMs`.
 */
export function startDeliveryLoop(env: WorkflowEnv, target: Target, o: DeliveryLoopOptions): DeliveryLoop {
  const records: DeliveryRecord[] = [];
  const inFlight = new Set<Promise<void>>();
  let running = true;
  const send = async (kind: DeliveryKind, pull: number, prepare: () => Promise<[string, unknown]>) => {
    let rec: DeliveryRecord | undefined;
    try {
      const [event, payload] = await prepare();
      rec = { kind, pull, sentAt: Date.now() };
      records.push(rec);
      const r = await postWebhook(target, event, payload);
      rec.status = r.status;
    } catch (e) {
      if (!rec) throw e;
      rec.error = (e as Error).message;
    } finally {
      if (rec) rec.answeredAt = Date.now();
    }
  };
  const loop = (async () => {
    const start = Date.now();
    const max = Math.ceil(o.maxMs / o.intervalMs);
    for (let i = 0; i < max && running; i++) {
      let p: Promise<void>;
      if (i % o.autoplanEvery === o.autoplanEvery - 1) {
        const pull = o.firstNewPull + Math.floor(i / o.autoplanEvery);
        const branch = `change-${pull}`;
        p = send('autoplan', pull, async () => {
          const sha = await preparePull(env, pull, branch, { [`app${pull}/main.tf`]: quickConfig(`app${pull}`) });
          return ['pull_request', openedPayload(env, pull, branch, sha)];
        });
      } else {
        const pull = o.unlockPulls[i % o.unlockPulls.length]!;
        p = send('unlock', pull, async () => ['issue_comment', commentPayload(env, pull, 'atlantis unlock')]);
      }
      const tracked = p.catch(() => undefined).finally(() => inFlight.delete(tracked));
      inFlight.add(tracked);
      await sleep(Math.max(0, start + (i + 1) * o.intervalMs - Date.now()));
    }
  })();
  return {
    records,
    stop: async () => {
      running = false;
      await loop;
      await Promise.all([...inFlight]);
      return records;
    },
  };
}

/** A root module whose plan is quick: one terraform_data resource. */
export function quickConfig(marker: string): string {
  return `resource "terraform_data" "marker" {\n  input = "${marker}"\n}\n`;
}
