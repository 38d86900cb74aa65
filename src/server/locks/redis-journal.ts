// The command journal, the job journal, the drain queue and the webhook deliveries of the
// Redis store (redis-store.ts has the key layout). Commands, queued commands and jobs are
// sealed with the shared state key (redis-records.ts): they say what a restart, a takeover or
// the end of a drain runs, and on which PR.
//
// An entry that cannot be used (not JSON, not the shape of one, or failing its check) is moved
// aside to `<prefix>quarantine:<its key>:<its field>` for 7 days, logged with its key, and
// skipped: one bad entry never stops a replica's start (nor every start after it).
import type { Redis } from 'ioredis';
import type { Logger } from '../../log.js';
import { type Opened, openCommand, openJob, openJobEnd, openQueued, sealCommand, sealJob, sealQueued } from './redis-records.js';
import { execOk } from './redis-plans.js';
import type { Scripts } from './redis-scripts.js';
import type { SharedStateKey } from './shared-state-key.js';
import {
  type AcceptedCommand,
  DELIVERY_TTL_MS,
  type DeliveryAcceptance,
  type JobRecord,
  type JobResult,
  type JobStart,
  type QueuedCommand,
  isRecordableDelivery,
} from './state-store.js';

/** How long an entry moved aside is kept for a person to look at. */
export const QUARANTINE_TTL_MS = 7 * 24 * 3600 * 1000;

export interface RedisJournalOptions {
  redis: Redis;
  scripts: Scripts;
  prefix: string;
  key: SharedStateKey;
  replicaId: string;
  now: () => Date;
  logger?: Logger;
}

type Reply = string | null;
const byteCmp = (a: string, b: string): number => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));

export class RedisJournal {
  private readonly p: string;

  constructor(private readonly o: RedisJournalOptions) {
    this.p = o.prefix;
  }

  private ts(): string {
    return this.o.now().toISOString();
  }

  /** Moves entry `field` of hash `hash` aside if it still holds `raw`, and says so in the log. */
  private async quarantine(hash: string, field: string, raw: string, problem: string): Promise<void> {
    const aside = `${this.p}quarantine:${hash.slice(this.p.length)}:${field}`;
    const moved = Number(await this.o.scripts.atlQuarantine(hash, aside, field, raw, QUARANTINE_TTL_MS));
    if (moved === 1)
      this.o.logger?.warn('Quarantined a journal entry that cannot be used', { key: hash, field, quarantinedAs: aside, problem });
  }

  // ---- commands -------------------------------------------------------------------------

  private commandKeys(of = this.o.replicaId): [string, string] {
    return [`${this.p}commands:${of}`, `${this.p}commands-started:${of}`];
  }

  private sealedCommand(cmd: { id: string; repo: string; pull: number; payload: unknown }): AcceptedCommand & { json: string } {
    const rec: AcceptedCommand = { id: cmd.id, repo: cmd.repo, pull: cmd.pull, payload: cmd.payload ?? null, acceptedAt: this.ts() };
    return { ...rec, json: sealCommand(this.o.key, this.o.replicaId, rec) };
  }

  /** One script: the entry and its place in the order. Durable once Redis has it in its AOF. */
  async acceptCommand(cmd: { id: string; repo: string; pull: number; payload: unknown }): Promise<AcceptedCommand> {
    const { json, ...rec } = this.sealedCommand(cmd);
    await this.o.scripts.atlAcceptCommand(this.commandKeys()[0], `${this.p}commands-seq`, cmd.id, json);
    return rec;
  }

  async acceptDelivery(deliveryId: string, cmd: { id: string; repo: string; pull: number; payload: unknown }): Promise<DeliveryAcceptance> {
    if (!isRecordableDelivery(deliveryId)) return { accepted: await this.acceptCommand(cmd) };
    const { json, ...rec } = this.sealedCommand(cmd);
    const [seq, replay] = (await this.o.scripts.atlAcceptDelivery(
      this.commandKeys()[0],
      `${this.p}commands-seq`,
      `${this.p}delivery:${deliveryId}`,
      cmd.id,
      json,
      DELIVERY_TTL_MS,
      this.o.replicaId,
      this.p,
    )) as [number, string];
    if (Number(seq) > 0) return { accepted: rec };
    return { replay: replay === 'pending' ? 'pending' : 'handled' };
  }

  async dropRefusedCommand(id: string, deliveryId?: string): Promise<void> {
    const delivery = deliveryId !== undefined && isRecordableDelivery(deliveryId) ? deliveryId : '';
    await this.o.scripts.atlDropRefused(...this.commandKeys(), `${this.p}delivery:${delivery}`, id, this.o.replicaId);
  }

  async commandStarted(id: string): Promise<void> {
    await this.o.scripts.atlCommandStarted(...this.commandKeys(), id, this.ts());
  }

  async commandFinished(id: string, of?: string): Promise<void> {
    const [cmds, started] = this.commandKeys(of);
    execOk(await this.o.redis.multi().hdel(cmds, id).hdel(started, id).exec());
  }

  async acceptedCommands(of = this.o.replicaId): Promise<AcceptedCommand[]> {
    const [cmds, started] = this.commandKeys(of);
    const res = execOk(await this.o.redis.multi().hgetall(cmds).hgetall(started).exec());
    const at = res[1] as Record<string, string>;
    const out: Array<AcceptedCommand & { seq: number }> = [];
    for (const [id, raw] of Object.entries(res[0] as Record<string, string>)) {
      const c = openCommand(this.o.key, of, id, raw);
      if (c.ok) out.push(c.value);
      else {
        await this.quarantine(cmds, id, raw, c.problem);
        await this.o.redis.hdel(started, id);
      }
    }
    return out
      .sort((a, b) => a.seq - b.seq)
      .map(({ seq: _seq, ...c }) => (at[c.id] !== undefined ? { ...c, startedAt: at[c.id] as string } : c));
  }

  // ---- jobs -----------------------------------------------------------------------------

  async jobStarted(job: JobStart): Promise<JobRecord> {
    const startedAt = this.ts();
    const rec = sealJob(this.o.key, { ...job, startedAt, replicaId: this.o.replicaId });
    execOk(
      await this.o.redis
        .multi()
        .hset(`${this.p}jobs`, job.id, rec)
        .hdel(`${this.p}jobs-finished`, job.id)
        .zadd(`${this.p}jobs-by-start`, Date.parse(startedAt), job.id)
        .hset(`${this.p}jobs-unfinished`, job.id, this.o.replicaId)
        .exec(),
    );
    return { ...job, startedAt };
  }

  async jobFinished(id: string, result: JobResult, summary?: string): Promise<void> {
    const fin = JSON.stringify({ finishedAt: this.ts(), result, ...(summary !== undefined ? { summary } : {}) });
    await this.o.scripts.atlJobFinished(`${this.p}jobs`, `${this.p}jobs-finished`, `${this.p}jobs-unfinished`, id, fin);
  }

  /** A job's start as the page and recovery use it, or why it cannot be used. */
  private job(id: string, raw: string, end: Reply): Opened<JobRecord> {
    const j = openJob(this.o.key, id, raw);
    if (!j.ok) return j;
    const { replicaId: _r, ...rec } = j.value;
    const fin = openJobEnd(end);
    return { ok: true, value: fin ? { ...rec, ...fin } : rec };
  }

  async unfinishedJobs(of = this.o.replicaId): Promise<JobRecord[]> {
    const flat = (await this.o.scripts.atlUnfinished(`${this.p}jobs-unfinished`, `${this.p}jobs`, of)) as string[];
    const out: JobRecord[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const id = flat[i] as string;
      const raw = flat[i + 1] as string;
      const j = openJob(this.o.key, id, raw);
      if (j.ok && j.value.replicaId === of) {
        const { replicaId: _r, ...rec } = j.value;
        out.push(rec);
        continue;
      }
      // Listed as this replica's but not its job, or not usable: out of the unfinished list.
      await this.quarantine(`${this.p}jobs`, id, raw, j.ok ? `it is the job of replica ${j.value.replicaId}` : j.problem);
      execOk(
        await this.o.redis
          .multi()
          .hdel(`${this.p}jobs-unfinished`, id)
          .zrem(`${this.p}jobs-by-start`, id)
          .hdel(`${this.p}jobs-finished`, id)
          .exec(),
      );
    }
    return out.sort((a, b) => byteCmp(a.startedAt, b.startedAt) || byteCmp(a.id, b.id));
  }

  /** The newest jobs first; a record that cannot be used is left out (pages do not write). */
  async recentJobs(limit = 50): Promise<JobRecord[]> {
    if (limit === 0) return [];
    const [ids, recs, fins] = (await this.o.scripts.atlRecentJobs(
      `${this.p}jobs`,
      `${this.p}jobs-finished`,
      `${this.p}jobs-by-start`,
      limit < 0 ? -1 : limit - 1,
    )) as [string[], Reply[], Reply[]];
    const out: JobRecord[] = [];
    for (const [i, s] of recs.entries()) {
      if (s === null || s === undefined) continue;
      const j = this.job(ids[i] as string, s, fins[i] ?? null);
      if (j.ok) out.push(j.value);
    }
    return out;
  }

  async pruneJobs(keep = 1000): Promise<number> {
    if (keep < 0) return 0;
    return Number(
      await this.o.scripts.atlPruneJobs(`${this.p}jobs`, `${this.p}jobs-finished`, `${this.p}jobs-by-start`, keep, `${this.p}job-output:`),
    );
  }

  async getJob(id: string): Promise<JobRecord | undefined> {
    const [rec, fin] = execOk(await this.o.redis.multi().hget(`${this.p}jobs`, id).hget(`${this.p}jobs-finished`, id).exec()) as [
      Reply,
      Reply,
    ];
    if (rec === null) return undefined;
    const j = this.job(id, rec, fin);
    return j.ok ? j.value : undefined;
  }

  // ---- drain queue ----------------------------------------------------------------------

  async enqueue(repo: string, pull: number, payload: unknown, deliveryId?: string): Promise<number | undefined> {
    const body = sealQueued(this.o.key, { repo, pull, payload: payload ?? null, enqueuedAt: this.ts() });
    const delivery = deliveryId !== undefined && isRecordableDelivery(deliveryId) ? deliveryId : undefined;
    const id = Number(
      await this.o.scripts.atlEnqueue(
        `${this.p}queue`,
        `${this.p}queue-id`,
        `${this.p}delivery:${delivery ?? ''}`,
        body,
        delivery === undefined ? '' : DELIVERY_TTL_MS,
      ),
    );
    return id === 0 ? undefined : id;
  }

  /** Every queued command, oldest first; one that cannot be used is moved aside instead. */
  async takeAll(): Promise<QueuedCommand[]> {
    const res = execOk(await this.o.redis.multi().lrange(`${this.p}queue`, 0, -1).del(`${this.p}queue`).exec());
    const out: QueuedCommand[] = [];
    for (const [i, raw] of (res[0] as string[]).entries()) {
      const q = openQueued(this.o.key, raw);
      if (q.ok) {
        out.push(q.value);
        continue;
      }
      const aside = `${this.p}quarantine:queue:${Date.now()}-${i}`;
      await this.o.redis.set(aside, raw, 'PX', QUARANTINE_TTL_MS);
      this.o.logger?.warn('Quarantined a journal entry that cannot be used', {
        key: `${this.p}queue`,
        quarantinedAs: aside,
        problem: q.problem,
      });
    }
    return out;
  }

  queueLength(): Promise<number> {
    return this.o.redis.llen(`${this.p}queue`);
  }
}
