// Webhooks sent as GitHub does plus an operator who clicks "Redeliver" on failed deliveries:
// a delivery answered 503, or that could not reach the server (refused, reset, timed out), is
// sent again (the same bytes, the same X-GitHub-Delivery id) after a short backoff, bounded in
// count and time; any other answer is final, and a 200 is never sent again. Every attempt is
// recorded with the test process's clock (ms) so a test can measure windows from them.
import { randomUUID } from 'node:crypto';
import { sleep } from '../../src/async.js';
import { sendWebhook } from './github-standin.js';

export interface Attempt {
  /** When the answer (or the failure) came, Date.now(). */
  at: number;
  status?: number;
  body?: string;
  /** The failure to connect or to get an answer. */
  error?: string;
}

export interface Delivery {
  url: string;
  event: string;
  deliveryId: string;
  attempts: Attempt[];
  /** The last attempt's status; undefined when none got an answer. */
  status: number | undefined;
  body: string;
}

export interface RedeliverPolicy {
  secret: string;
  /** Default 40. */
  maxAttempts?: number;
  /** Give up once this long has passed since the first attempt (default 120 s). */
  maxMs?: number;
  /** Backoff before attempt n+1 (n from 1): default 250 ms doubling to at most 2 s. */
  backoffMs?: (n: number) => number;
  /** Per attempt (default 30 s, as sendWebhook). */
  timeoutMs?: number;
}

/** Whether an answer asks for a redelivery: 503, or no answer at all. */
export const redeliverable = (a: Attempt): boolean => a.status === undefined || a.status === 503;

export async function deliver(url: string, event: string, payload: unknown, policy: RedeliverPolicy): Promise<Delivery> {
  const deliveryId = randomUUID();
  const rawBody = JSON.stringify(payload);
  const maxAttempts = policy.maxAttempts ?? 40;
  const end = Date.now() + (policy.maxMs ?? 120_000);
  const backoff = policy.backoffMs ?? ((n: number) => Math.min(250 * 2 ** (n - 1), 2000));
  const attempts: Attempt[] = [];
  for (let n = 1; ; n++) {
    let a: Attempt;
    try {
      const r = await sendWebhook(url, event, payload, {
        secret: policy.secret,
        deliveryId,
        rawBody,
        ...(policy.timeoutMs !== undefined ? { timeoutMs: policy.timeoutMs } : {}),
      });
      a = { at: Date.now(), status: r.status, body: r.body };
    } catch (e) {
      const cause = (e as { cause?: { code?: string } }).cause?.code;
      a = { at: Date.now(), error: cause ?? (e as Error).message };
    }
    attempts.push(a);
    if (!redeliverable(a) || n >= maxAttempts || Date.now() + backoff(n) > end)
      return { url, event, deliveryId, attempts, status: a.status, body: a.body ?? a.error ?? '' };
    await sleep(backoff(n));
  }
}
