// The saved plans of the Redis store (redis-store.ts has the key layout): each record sealed
// with the shared state key (redis-records.ts), the plan file's bytes beside it.
//
// Why sealed: the bytes and the sha256 an apply checks them against both come from Redis; a
// writer without the key could otherwise replace both and have any plan applied. A record
// that fails its check is returned marked `unverified` (never applied, only discarded).
// Restoring a file follows three rules: the bytes must hash to the sealed sha256; the file of
// the replica that made the plan is never replaced (that replica trusts its own file, and a
// difference there is refused by the apply's own check); every restore is logged.
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from '../../log.js';
import { localSha256, readPlanBytes, writeFileAtomic } from './plan-bytes.js';
import { planPathIn } from './plan-file.js';
import { type PlanPlace, type StoredPlan, openPlan, sealPlan } from './redis-records.js';
import type { SharedStateKey } from './shared-state-key.js';
import type { LockKey, PlanRecord } from './state-store.js';

export interface RedisPlansOptions {
  redis: Redis;
  /** Key prefix, e.g. `atlantis:`. */
  prefix: string;
  key: SharedStateKey;
  dataDir: string;
  replicaId: string;
  now: () => Date;
  logger?: Logger;
}

type Reply = string | null;

const byteCmp = (a: string, b: string): number => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
export const byDirWs = (a: LockKey, b: LockKey): number => byteCmp(a.dir, b.dir) || byteCmp(a.workspace, b.workspace);

export const planField = (dir: string, workspace: string): string => JSON.stringify([dir, workspace]);
export const pullName = (repo: string, pull: number): string => `${repo}#${pull}`;

/** The dir and workspace a field names; a field that is not one of ours keeps its text as the dir. */
function fieldPlace(repo: string, pull: number, field: string): PlanPlace {
  try {
    const v: unknown = JSON.parse(field);
    if (Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && typeof v[1] === 'string')
      return { repo, pull, dir: v[0], workspace: v[1] };
  } catch {
    /* below */
  }
  return { repo, pull, dir: field, workspace: '' };
}

const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

export class RedisPlans {
  constructor(private readonly o: RedisPlansOptions) {}

  private keys(repo: string, pull: number): { plans: string; files: string } {
    const rn = pullName(repo, pull);
    return { plans: `${this.o.prefix}plans:${rn}`, files: `${this.o.prefix}planfiles:${rn}` };
  }

  planPath(key: LockKey, pull: number, project?: string): string {
    return planPathIn(this.o.dataDir, key, pull, project);
  }

  /**
   * The plan kept in field `field` of pull `pull`'s hash, as a PlanRecord with this replica's
   * path; `unverified` says why it failed its check. Its place is the key's and the field's.
   */
  toPlan(repo: string, pull: number, field: string, raw: string): PlanRecord {
    const at = fieldPlace(repo, pull, field);
    const opened = openPlan(this.o.key, at, raw);
    if (!opened.ok) {
      // Nothing of an unverified record is used but where it is kept: its path is computed
      // from that place alone (no project name), inside this replica's data dir.
      const rec: PlanRecord = { ...at, planPath: this.planPath(at, pull), headSha: '', createdAt: '', unverified: opened.problem };
      return rec;
    }
    const { fileSha256: _sha, fileSize: _size, madeBy: _by, ...rest } = opened.value;
    return { ...rest, planPath: this.planPath(rest, pull, rest.project) };
  }

  /** Records the plan and the bytes of `rec.planPath` (when there is a file) in one MULTI. */
  async save(rec: Omit<PlanRecord, 'createdAt'> & { createdAt?: string }): Promise<PlanRecord> {
    const createdAt = rec.createdAt ?? this.o.now().toISOString();
    const bytes = await readPlanBytes(rec.planPath);
    const { planPath: _local, unverified: _u, ...rest } = rec;
    const stored: StoredPlan = { ...rest, createdAt, madeBy: this.o.replicaId };
    if (bytes) {
      stored.fileSha256 = sha256(bytes);
      stored.fileSize = bytes.length;
    }
    const k = this.keys(rec.repo, rec.pull);
    const g = planField(rec.dir, rec.workspace);
    const tx = this.o.redis.multi().hset(k.plans, g, sealPlan(this.o.key, stored));
    if (bytes) tx.hset(k.files, g, bytes);
    else tx.hdel(k.files, g);
    execOk(await tx.exec());
    const { unverified: _u2, ...saved } = rec;
    return { ...saved, createdAt };
  }

  async get(repo: string, pull: number, dir: string, workspace: string): Promise<PlanRecord | undefined> {
    const g = planField(dir, workspace);
    const s = await this.o.redis.hget(this.keys(repo, pull).plans, g);
    return s === null ? undefined : this.toPlan(repo, pull, g, s);
  }

  async list(repo: string, pull: number): Promise<PlanRecord[]> {
    const all = await this.o.redis.hgetall(this.keys(repo, pull).plans);
    return Object.entries(all)
      .map(([g, s]) => this.toPlan(repo, pull, g, s))
      .sort(byDirWs);
  }

  async delete(repo: string, pull: number, dir: string, workspace: string): Promise<PlanRecord | undefined> {
    const k = this.keys(repo, pull);
    const g = planField(dir, workspace);
    const res = execOk(await this.o.redis.multi().hget(k.plans, g).hdel(k.plans, g).hdel(k.files, g).exec());
    const s = res[0] as Reply;
    return s === null ? undefined : this.toPlan(repo, pull, g, s);
  }

  /** See StateStore.restorePlanFile. */
  async restore(plan: PlanRecord): Promise<string | undefined> {
    if (plan.unverified !== undefined) return `the saved plan failed its check against the shared state key: ${plan.unverified}`;
    if (plan.planSha256 === undefined) return undefined;
    const local = await localSha256(plan.planPath);
    if (local === plan.planSha256) return undefined;
    const k = this.keys(plan.repo, plan.pull);
    const g = planField(plan.dir, plan.workspace);
    // The record and the bytes of one moment; the record checked again and compared with the
    // one the apply holds, so the bytes written are that plan's.
    const res = execOk(await this.o.redis.multi().hget(k.plans, g).hgetBuffer(k.files, g).exec());
    const raw = res[0] as Reply;
    const bytes = res[1] as Buffer | null;
    const where = { repo: plan.repo, pull: plan.pull, dir: plan.dir, workspace: plan.workspace };
    if (raw === null || bytes === null) return undefined;
    const now = openPlan(this.o.key, where, raw);
    if (!now.ok) return `the saved plan failed its check against the shared state key: ${now.problem}`;
    if (now.value.headSha !== plan.headSha || now.value.planSha256 !== plan.planSha256 || now.value.createdAt !== plan.createdAt)
      return undefined; // replaced or discarded since: the hash check refuses what is here
    if (local !== undefined && now.value.madeBy === this.o.replicaId) {
      this.o.logger?.warn('Plan file not restored: this replica made the plan and its own file differs from the record', where);
      return undefined;
    }
    if (sha256(bytes) !== plan.planSha256) {
      this.o.logger?.warn('Plan file not restored: the bytes kept in Redis do not match the recorded sha256', where);
      return 'the plan file kept in the shared store does not match the sha256 recorded when it was planned; nothing was applied';
    }
    await writeFileAtomic(plan.planPath, bytes);
    this.o.logger?.info('Restored a plan file from the shared store', {
      ...where,
      madeBy: now.value.madeBy,
      bytes: bytes.length,
      replaced: local !== undefined,
    });
    return undefined;
  }
}

/** The replies of a MULTI, or the first error in it. */
export function execOk(res: [Error | null, unknown][] | null): unknown[] {
  if (res === null) throw new Error('Redis transaction aborted');
  for (const [err] of res) if (err) throw err;
  return res.map(([, v]) => v);
}
