// Which job logs are deleted (jobLogsToPrune) and how often the pruner looks (pruneIntervalMs),
// as tables; the flags that set them.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { UsageError } from '../src/config/flags.js';
import { type JobLogEntry, type JobLogRetention, jobLogsToPrune, pruneIntervalMs } from '../src/server/workflow/jobs/job-logs.js';
import { configWithRequiredFlags } from './support/server-config.js';

const NOW = Date.parse('2026-06-01T12:00:00Z');
const MIN = 60_000;
const DAY = 24 * 60 * MIN;
/** Log `name`, last written `ago` ms before NOW. */
const log = (id: string, ago: number): JobLogEntry => ({ id, mtimeMs: NOW - ago });

describe('jobLogsToPrune', () => {
  const table: Array<{
    name: string;
    entries: JobLogEntry[];
    retention: JobLogRetention;
    running?: string[];
    want: Array<[string, 'age' | 'count']>;
  }> = [
    { name: 'no limits: nothing', entries: [log('a', 400 * DAY), log('b', 0)], retention: { maxAgeMs: 0, maxCount: 0 }, want: [] },
    {
      name: 'age: strictly older than the limit',
      entries: [log('a', 7 * DAY + 1), log('b', 7 * DAY), log('c', MIN)],
      retention: { maxAgeMs: 7 * DAY, maxCount: 0 },
      want: [['a', 'age']],
    },
    {
      name: 'count: the oldest go',
      entries: [log('old', 3 * MIN), log('new', MIN), log('mid', 2 * MIN)],
      retention: { maxAgeMs: 0, maxCount: 2 },
      want: [['old', 'count']],
    },
    {
      name: 'count: exactly at the limit keeps all',
      entries: [log('a', MIN), log('b', 2 * MIN)],
      retention: { maxAgeMs: 0, maxCount: 2 },
      want: [],
    },
    {
      name: 'age first, then count among the rest',
      entries: [log('a', 10 * DAY), log('b', 9 * DAY), log('c', 3 * MIN), log('d', 2 * MIN), log('e', MIN)],
      retention: { maxAgeMs: 7 * DAY, maxCount: 2 },
      want: [
        ['a', 'age'],
        ['b', 'age'],
        ['c', 'count'],
      ],
    },
    {
      name: 'a running job is never deleted, however old its last write',
      entries: [log('run', 30 * DAY), log('b', MIN)],
      retention: { maxAgeMs: DAY, maxCount: 0 },
      running: ['run'],
      want: [],
    },
    {
      name: 'a running job counts towards the limit',
      entries: [log('run', 5 * MIN), log('a', MIN), log('b', 2 * MIN)],
      retention: { maxAgeMs: 0, maxCount: 2 },
      running: ['run'],
      want: [['b', 'count']],
    },
    {
      name: 'more running jobs than the limit: every finished one goes',
      entries: [log('r1', MIN), log('r2', MIN), log('a', 0)],
      retention: { maxAgeMs: 0, maxCount: 1 },
      running: ['r1', 'r2'],
      want: [['a', 'count']],
    },
    {
      name: 'equal times: by id, whatever the order given',
      entries: [log('b', MIN), log('c', MIN), log('a', MIN)],
      retention: { maxAgeMs: 0, maxCount: 1 },
      want: [
        ['b', 'count'],
        ['c', 'count'],
      ],
    },
    {
      name: 'a log written in the future (clock step) is the newest',
      entries: [log('future', -DAY), log('a', MIN)],
      retention: { maxAgeMs: DAY, maxCount: 1 },
      want: [['a', 'count']],
    },
    { name: 'empty dir', entries: [], retention: { maxAgeMs: DAY, maxCount: 1 }, want: [] },
  ];
  for (const t of table) {
    it(t.name, () => {
      const got = jobLogsToPrune(t.entries, NOW, t.retention, new Set(t.running ?? []));
      const sorted = (xs: Array<[string, string]>) => [...xs].sort((a, b) => (a[0] < b[0] ? -1 : 1));
      assert.deepEqual(sorted(got.map((g) => [g.id, g.reason])), sorted(t.want));
    });
  }
  it('keeps exactly maxCount of many, the newest', () => {
    const entries = Array.from({ length: 2000 }, (_, i) => log(`j${String(i).padStart(4, '0')}`, ((i * 7919) % 2000) * 1000));
    const got = new Set(jobLogsToPrune(entries, NOW, { maxAgeMs: 0, maxCount: 1000 }, new Set()).map((g) => g.id));
    const kept = entries.filter((e) => !got.has(e.id));
    assert.equal(kept.length, 1000);
    const oldestKept = Math.min(...kept.map((e) => e.mtimeMs));
    assert.ok(entries.filter((e) => got.has(e.id)).every((e) => e.mtimeMs <= oldestKept));
  });
});

describe('pruneIntervalMs', () => {
  const table: Array<[JobLogRetention, number]> = [
    [{ maxAgeMs: 7 * DAY, maxCount: 1000 }, 3_600_000], // capped at 1 h
    [{ maxAgeMs: 2 * 60 * MIN, maxCount: 0 }, 30 * MIN], // a quarter of the age limit
    [{ maxAgeMs: 3_000, maxCount: 0 }, 1_000], // at least 1 s
    [{ maxAgeMs: 0, maxCount: 10 }, 10 * MIN], // count only
    [{ maxAgeMs: 10_000 * DAY, maxCount: 0 }, 3_600_000], // far beyond Node's timer range: still 1 h
  ];
  for (const [retention, want] of table) {
    it(`${JSON.stringify(retention)} -> ${want} ms`, () => assert.equal(pruneIntervalMs(retention), want));
  }
});

describe('job log flags', () => {
  const config = configWithRequiredFlags('ato-joblog-flags-');
  it('default: 7 days and 1000 logs', () => {
    const c = config([]);
    assert.deepEqual([c.jobLogRetentionMs, c.jobLogMaxCount], [7 * DAY, 1000]);
  });
  it('flags and env, 0 for no limit', () => {
    assert.deepEqual(
      (({ jobLogRetentionMs, jobLogMaxCount }) => [jobLogRetentionMs, jobLogMaxCount])(
        config(['--job-log-retention', '36h', '--job-log-max-count=0']),
      ),
      [36 * 60 * MIN, 0],
    );
    const c = config([], { ATLANTIS_JOB_LOG_RETENTION: '0', ATLANTIS_JOB_LOG_MAX_COUNT: '50' });
    assert.deepEqual([c.jobLogRetentionMs, c.jobLogMaxCount], [0, 50]);
  });
  it('a negative count is a usage error naming the flag', () => {
    assert.throws(
      () => config(['--job-log-max-count', '-1']),
      (e: unknown) => e instanceof UsageError && /--job-log-max-count/.test(e.message),
    );
  });
});
