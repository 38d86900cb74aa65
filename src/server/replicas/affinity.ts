// Which replica handles a pull request's webhooks, and what a replica does with a webhook that
// landed on it. Pure: the registry (registry.ts) supplies the live replicas, forward.ts moves
// the bytes. Rendezvous (highest-random-weight) hashing: every replica scores every key, the
// highest score owns it, so adding or removing one replica moves only the keys it gains or
// owned, and every replica computes the same owner from the same list without talking.

import { createHash } from 'node:crypto';

export interface ReplicaInfo {
  /** --replica-id (the pod's name): unique among the replicas sharing a store. */
  id: string;
  /** Where the other replicas reach its POST /events and GET /status, e.g. http://10.0.0.7:4141. */
  url: string;
  /** It has started its drain: it takes no new PR, and its PRs move to the others. */
  draining: boolean;
  /** Its last heartbeat, ms since the epoch, on its own clock (liveness in Redis does not depend on it). */
  heartbeatAt: number;
}

/** The replicas whose last heartbeat is younger than ttlMs at nowMs; one entry per id (the newest heartbeat). */
export function liveReplicas(all: readonly ReplicaInfo[], nowMs: number, ttlMs: number): ReplicaInfo[] {
  const byId = new Map<string, ReplicaInfo>();
  for (const r of all) {
    if (r.heartbeatAt + ttlMs <= nowMs) continue;
    const seen = byId.get(r.id);
    if (!seen || r.heartbeatAt > seen.heartbeatAt) byId.set(r.id, r);
  }
  return [...byId.values()].sort((a, b) => byteCmp(a.id, b.id));
}

const byteCmp = (a: string, b: string): number => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));

/**
 * A replica's score for a key: sha256 of the id and the key. A newline separates them, which
 * neither a replica id nor a pull key holds, so no two (id, key) pairs hash the same input.
 * Equal-length digests compare as big-endian numbers when compared byte by byte.
 */
export function score(replicaId: string, pullKey: string): Buffer {
  return createHash('sha256').update(`${replicaId}\n${pullKey}`, 'utf8').digest();
}

/** The owner of a pull key among the non-draining replicas given (the caller passes the live ones); undefined when none serves. */
export function ownerOf(pullKey: string, replicas: readonly ReplicaInfo[]): ReplicaInfo | undefined {
  let best: ReplicaInfo | undefined;
  let bestScore: Buffer | undefined;
  for (const r of replicas) {
    if (r.draining) continue;
    const s = score(r.id, pullKey);
    // Highest score wins; a tie (a sha256 collision between two ids, in practice never) goes to the smaller id.
    const c = bestScore === undefined ? 1 : Buffer.compare(s, bestScore);
    if (c > 0 || (c === 0 && best !== undefined && byteCmp(r.id, best.id) < 0)) {
      best = r;
      bestScore = s;
    }
  }
  return best;
}

export type LocalReason =
  /** This replica owns the PR. */
  | 'owner'
  /** Another replica forwarded it here: handled here whatever the list says (the loop guard). */
  | 'forwarded'
  /** No replica serves (all draining): handled here, where the drain rules refuse or queue it. */
  | 'none-serving';

export type RouteDecision = { kind: 'local'; reason: LocalReason } | { kind: 'forward'; to: ReplicaInfo };

export interface RouteOptions {
  /** The X-Atlantis-Forwarded-By of the webhook, when another replica forwarded it. */
  forwardedBy?: string;
}

/**
 * What replica `self` does with a webhook of `pullKey` that landed on it, from the live
 * replicas (`live`, with or without self; self's own entry is always `self`, its freshest
 * view of itself, so a list that missed its heartbeat still counts it):
 *
 * | webhook               | self     | owner among live non-draining (self included) | decision            |
 * |-----------------------|----------|-----------------------------------------------|---------------------|
 * | forwarded by another  | any      | any                                           | local (forwarded)   |
 * | direct                | serving  | self                                          | local (owner)       |
 * | direct                | any      | another replica                               | forward to it       |
 * | direct                | draining | none (every replica drains)                   | local (none-serving)|
 *
 * A serving self that is the only serving replica owns every key (row 2); a draining self
 * forwards to the owner among the serving others (row 3), or keeps it when none serves, so
 * that its drain rules refuse or queue it (row 4).
 */
export function route(pullKey: string, self: ReplicaInfo, live: readonly ReplicaInfo[], opts: RouteOptions = {}): RouteDecision {
  if (opts.forwardedBy !== undefined) return { kind: 'local', reason: 'forwarded' };
  const candidates = [self, ...live.filter((r) => r.id !== self.id)];
  const owner = ownerOf(pullKey, candidates);
  if (owner === undefined) return { kind: 'local', reason: 'none-serving' };
  if (owner.id === self.id) return { kind: 'local', reason: 'owner' };
  return { kind: 'forward', to: owner };
}

/** How a forward ended (forward.ts): the owner's answer, or why there was none. */
export type ForwardOutcome =
  | { ok: true; status: number; body: string /** X-Atlantis-Forward-Answer: the owner's proof (forward-auth.ts). */; proof?: string }
  | { ok: false; failure: 'refused' | 'timeout' | 'reset' | 'error'; message: string };

export type AfterForward = { kind: 'relay'; status: number; body: string } | { kind: 'local'; reason: 'unreachable' | 'owner-failed' };

/**
 * After a forward: the owner's answer goes back to GitHub as it is, unless there was none
 * (refused, timed out, cut off) or it was a 5xx (the owner failed or began its drain since
 * its last heartbeat); then the webhook is handled here, as if no other replica existed. A
 * 4xx is the owner's verdict on the webhook itself (a bad signature, a bad body): relayed.
 * A timeout may mean the owner did accept it; handling it here too is the lesser harm (a
 * lost command is silent, a duplicate one meets the PR's locks).
 */
export function afterForwardFailure(outcome: ForwardOutcome): AfterForward {
  if (!outcome.ok) return { kind: 'local', reason: 'unreachable' };
  if (outcome.status >= 500 || outcome.status < 100) return { kind: 'local', reason: 'owner-failed' };
  return { kind: 'relay', status: outcome.status, body: outcome.body };
}
