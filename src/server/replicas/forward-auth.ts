// Proof that a forwarded webhook comes from a replica holding the shared state key, and that
// the answer comes from one too. Pure.
//
// Why: the replicas' URLs come from Redis, and a forward makes the receiver handle a webhook
// where it lands. A forward carries `X-Atlantis-Forward-Auth: v1 <ms> <nonce> <code>`, the code
// over who sends it, to whom, when, the code host's webhook headers (in the host's order:
// GitHub's event, delivery and signature) and the body's sha256; the receiver
// checks it (a forward that fails is handled as a direct delivery: routed again). The answer
// carries `X-Atlantis-Forward-Answer: <code>` over the nonce and the status; a sender that
// gets no such proof treats the owner as unreachable and handles the webhook itself, so a
// listener that only pretends to be a replica never swallows a command.
import { createHash, randomBytes } from 'node:crypto';
import type { SharedStateKey } from '../locks/shared-state-key.js';

export const FORWARD_AUTH_HEADER = 'x-atlantis-forward-auth';
export const FORWARD_ANSWER_HEADER = 'x-atlantis-forward-answer';
/** A forward older (or newer, by the clocks' skew) than this is refused. */
export const FORWARD_MAX_SKEW_MS = 5 * 60_000;

export interface ForwardFacts {
  /** The sending replica's id (X-Atlantis-Forwarded-By). */
  from: string;
  /** The receiving replica's id. */
  to: string;
  /** The values of the host's webhook headers, in VcsWebhooks.headerNames' order (undefined: absent). */
  headers: ReadonlyArray<string | undefined>;
  body: Buffer;
}

const parts = (f: ForwardFacts, at: number, nonce: string) => [
  f.from,
  f.to,
  at,
  nonce,
  ...f.headers.map((v) => v ?? null),
  createHash('sha256').update(f.body).digest('hex'),
];

/** The header of a forward sent now; its nonce is what the answer's proof is over. */
export function forwardAuth(key: SharedStateKey, f: ForwardFacts, nowMs: number): { header: string; nonce: string } {
  const nonce = randomBytes(16).toString('hex');
  return { header: `v1 ${nowMs} ${nonce} ${key.mac('forward/v1', parts(f, nowMs, nonce))}`, nonce };
}

export type ForwardCheck = { ok: true; nonce: string } | { ok: false; problem: string };

export function checkForwardAuth(key: SharedStateKey, header: string | undefined, f: ForwardFacts, nowMs: number): ForwardCheck {
  if (header === undefined) return { ok: false, problem: `no ${FORWARD_AUTH_HEADER} header` };
  const m = /^v1 (\d{1,15}) ([0-9a-f]{32}) ([0-9a-f]{64})$/.exec(header);
  if (!m) return { ok: false, problem: `a malformed ${FORWARD_AUTH_HEADER} header` };
  const at = Number(m[1]);
  const nonce = m[2] as string;
  if (Math.abs(nowMs - at) > FORWARD_MAX_SKEW_MS) {
    const s = Math.round(Math.abs(nowMs - at) / 1000);
    return { ok: false, problem: nowMs > at ? `sent ${s} s ago` : `dated ${s} s ahead of this replica's clock` };
  }
  if (!key.verify('forward/v1', parts(f, at, nonce), m[3])) return { ok: false, problem: 'its authentication code does not match' };
  return { ok: true, nonce };
}

export const answerAuth = (key: SharedStateKey, nonce: string, status: number): string => key.mac('forward-answer/v1', [nonce, status]);

export const answerIsAuthentic = (key: SharedStateKey, header: string | undefined, nonce: string, status: number): boolean =>
  key.verify('forward-answer/v1', [nonce, status], header);
