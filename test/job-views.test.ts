// The web page's job lists (job-views.ts, pure, table-tested) and the mirror that copies a
// job's output into the store (job-output-mirror.ts, against a real SQLite store): batched, in
// order, everything written by the time the job is over; a store that fails is logged once.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import { createLogger } from '../src/log.js';
import type { JobRecord } from '../src/server/locks/state-store.js';
import { SqliteStore } from '../src/server/locks/sqlite-store.js';
import { JobOutputMirror } from '../src/server/workflow/jobs/job-output-mirror.js';
import { isJobId, mergeJobs, viewOfRecord } from '../src/server/workflow/jobs/job-views.js';
import { JobRegistry, type JobView } from '../src/server/workflow/jobs/jobs.js';

const rec = (id: string, startedAt: string, result?: JobRecord['result']): JobRecord => ({
  id,
  command: 'plan',
  repo: 'acme/infra',
  pull: 1,
  dir: 'net',
  workspace: 'default',
  startedAt,
  ...(result ? { result, finishedAt: startedAt } : {}),
});
const local = (id: string, startedAt: string, status: JobView['status']): JobView => ({
  ...viewOfRecord(rec(id, startedAt)),
  status,
});

describe('mergeJobs', () => {
  const cases: Array<[string, JobView[], JobRecord[], { running: string[]; recent: string[] }]> = [
    ['nothing', [], [], { running: [], recent: [] }],
    ['only this replica', [local('a', '2026-12-01T10:00:00Z', 'running')], [], { running: ['a'], recent: [] }],
    [
      'other replicas only, newest first, split by result',
      [],
      [rec('old', '2026-12-01T09:00:00Z', 'success'), rec('new', '2026-12-01T11:00:00Z'), rec('mid', '2026-12-01T10:00:00Z', 'failure')],
      { running: ['new'], recent: ['mid', 'old'] },
    ],
    [
      'a job in both is shown as this replica sees it (finished here, the journal not yet)',
      [local('a', '2026-12-01T10:00:00Z', 'success')],
      [rec('a', '2026-12-01T10:00:00Z'), rec('b', '2026-12-01T10:30:00Z')],
      { running: ['b'], recent: ['a'] },
    ],
    [
      'the same start time: ordered by id, so the page does not reshuffle',
      [],
      [rec('x', '2026-12-01T10:00:00Z'), rec('y', '2026-12-01T10:00:00Z')],
      { running: ['y', 'x'], recent: [] },
    ],
  ];
  for (const [what, l, shared, want] of cases)
    it(what, () => {
      const got = mergeJobs(l, shared);
      assert.deepEqual({ running: got.running.map((j) => j.id), recent: got.recent.map((j) => j.id) }, want);
    });

  it('a record becomes a view: no project is null, missing dir and workspace are empty, no result is running', () => {
    assert.deepEqual(viewOfRecord({ id: 'j', command: 'apply', repo: 'r/x', pull: 2, startedAt: '2026-12-01T10:00:00.000Z' }), {
      id: 'j',
      command: 'apply',
      repo: 'r/x',
      pull: 2,
      project: null,
      dir: '',
      workspace: '',
      startedAt: new Date('2026-12-01T10:00:00.000Z'),
      finishedAt: null,
      status: 'running',
    });
  });

  it('isJobId: only a lower-case UUID', () => {
    assert.equal(isJobId('0f8fad5b-d9cb-469f-a165-70867728950e'), true);
    for (const bad of [
      '',
      '../../etc/passwd',
      '0F8FAD5B-D9CB-469F-A165-70867728950E',
      '0f8fad5b-d9cb-469f-a165-70867728950e/x',
      '-'.repeat(36),
    ])
      assert.equal(isJobId(bad), false, bad);
  });
});

describe('JobOutputMirror', () => {
  const tempStore = () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ato-mirror-'));
    return { store: SqliteStore.open(dir), cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
  };

  it("copies a job's output in order, batched, all of it written once the registry says the job finished", async () => {
    const { store, cleanup } = tempStore();
    let writes = 0;
    const counting = {
      appendJobOutput: async (id: string, chunk: string) => {
        writes++;
        await store.appendJobOutput(id, chunk);
      },
    };
    try {
      const jobs = new JobRegistry({ mirror: new JobOutputMirror(counting, createLogger({ silent: true }), 50) });
      jobs.start({ id: 'j', command: 'plan', repo: 'acme/infra', pull: 1, project: null, dir: '.', workspace: 'default' });
      const lines = Array.from({ length: 200 }, (_, i) => `line ${i} ✓\n`);
      for (const l of lines) jobs.append('j', l);
      await jobs.finish('j', 'success');
      assert.equal((await store.readJobOutput('j')).text, lines.join(''));
      assert.ok(writes < 10, `200 chunks in few writes (${writes})`);
    } finally {
      await store.close();
      cleanup();
    }
  });

  it('a store that fails: logged once per job, the job goes on', async () => {
    const { store, cleanup } = tempStore();
    await store.close();
    const stream = new PassThrough();
    let logged = '';
    stream.on('data', (d: Buffer) => {
      logged += d.toString();
    });
    try {
      const mirror = new JobOutputMirror(store, createLogger({ stream }), 10);
      for (let i = 0; i < 3; i++) {
        mirror.append('j', `chunk ${i}\n`);
        await mirror.flush('j');
      }
      await mirror.finish('j');
      const lines = logged.split('\n').filter((l) => l.includes('Could not copy job output to the state store'));
      assert.equal(lines.length, 1, logged);
      assert.equal(JSON.parse(lines[0] as string).job, 'j');
    } finally {
      cleanup();
    }
  });
});
