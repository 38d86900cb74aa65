// The one-time import of Atlantis's atlantis.db (src/server/locks/bolt-import.ts) into both
// stores, the embedded SQLite one and a real redis-server, from files written by a real
// Atlantis v0.47 (test/fixtures/atlantis-db/): what is carried over, all or nothing, once
// (a second import, or a second replica on the same Redis, writes nothing).
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { AtlantisDbError, IMPORTED_APPLY_LOCK_BY, atlantisState } from '../src/server/locks/bolt-atlantis.js';
import { type BoltDatabase, BoltFormatError, readBoltFile } from '../src/server/locks/bolt-file.js';
import { importAtlantisDb, noticesFor, planAgainComment } from '../src/server/locks/bolt-import.js';
import { genericApplyProblem } from '../src/server/locks/pull-status.js';
import { RedisStore } from '../src/server/locks/redis-store.js';
import { SqliteStore } from '../src/server/locks/sqlite-store.js';
import type { StateStore } from '../src/server/locks/state-store.js';
import { type RedisServer, startRedisServer, testSharedStateKey } from './support/redis-server.js';

const FIXTURES = fileURLToPath(new URL('./fixtures/atlantis-db/', import.meta.url));
const SMALL = path.join(FIXTURES, 'atlantis-locks.db');
const MANY = path.join(FIXTURES, 'atlantis-many-locks.db');
const tmp = mkdtempSync(path.join(tmpdir(), 'bolt-import-'));

/** What the small fixture holds (its README tells how it was made). */
const SMALL_LOCKS = [
  { repo: 'acme/infra', dir: 'dir1', workspace: 'default', pull: 1, user: 'dev' },
  { repo: 'acme/infra', dir: 'dir2', workspace: 'default', pull: 1, user: 'dev' },
  { repo: 'acme/infra', dir: 'dir2', workspace: 'staging', pull: 1, user: 'dev' },
  { repo: 'acme/named', dir: 'dir1', workspace: 'default', pull: 4, user: 'bob', project: 'alpha' },
  { repo: 'acme/named', dir: 'dir2', workspace: 'default', pull: 4, user: 'bob', project: 'beta' },
];

const withoutTime = <T extends { time: string }>(l: T): Omit<T, 'time'> => {
  const { time: _t, ...rest } = l;
  return rest;
};

/** The fields of Atlantis's ProjectLock JSON the tests change. */
interface LockJson {
  Project: { ProjectName: string; RepoFullName: string; Path: string };
  Pull: { Num: number };
  Workspace: string;
  Time: string;
}
const goodLock = (): LockJson => JSON.parse(readFileSync(path.join(FIXTURES, 'lock-record.json'), 'utf8')) as LockJson;

/** A database as the reader returns it, with a runLocks bucket of `entries`. */
function dbWith(entries: Array<[string, string]>): BoltDatabase {
  const pages = { branch: 0, leaf: 1, overflow: 0, inline: true };
  const runLocks = {
    sequence: 0n,
    entries: entries.map(([k, v]) => ({ key: Buffer.from(k), value: Buffer.from(v) })),
    buckets: [],
    pages,
  };
  return {
    pageSize: 4096,
    meta: 0,
    txid: 1n,
    highWaterMark: 4,
    freePages: 0,
    root: { sequence: 0n, entries: [], buckets: [{ name: Buffer.from('runLocks'), bucket: runLocks }], pages },
  };
}

let redis: RedisServer;
const stores: StateStore[] = [];
before(async () => {
  redis = await startRedisServer();
});
after(async () => {
  for (const s of stores) await s.close().catch(() => undefined);
  await redis.cleanup();
  rmSync(tmp, { recursive: true, force: true });
});

let db = 0;
const kinds: Array<[string, () => Promise<StateStore>]> = [
  [
    'sqlite',
    async () => {
      const s = SqliteStore.open(mkdtempSync(path.join(tmp, 'data-')));
      stores.push(s);
      return s;
    },
  ],
  [
    'redis',
    async () => {
      // A database of its own for each test.
      const s = await RedisStore.connect({
        host: redis.host,
        port: redis.port,
        db: ++db,
        dataDir: mkdtempSync(path.join(tmp, 'r-')),
        replicaId: 'a',
        sharedStateKey: testSharedStateKey(),
      });
      stores.push(s);
      return s;
    },
  ],
];

describe("Atlantis's records in atlantis.db", () => {
  it('the small file: its locks, with the project name, the pull statuses as this server names them, no apply lock', async () => {
    const state = atlantisState(await readBoltFile(SMALL));
    assert.deepEqual(state.locks.map(withoutTime), SMALL_LOCKS);
    for (const l of state.locks) assert.match(l.time, /^2026-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    const status = (repo: string, pull: number) => state.pulls.find((p) => p.repo === repo && p.pull === pull)?.status.projects;
    assert.deepEqual(status('acme/infra', 1), [
      { dir: 'dir1', workspace: 'default', project: '', status: 'planned' },
      { dir: 'dir2', workspace: 'default', project: '', status: 'planned' },
      { dir: 'dir2', workspace: 'staging', project: '', status: 'planned' },
    ]);
    assert.deepEqual(status('acme/infra', 2), [{ dir: 'dir1', workspace: 'default', project: '', status: 'plan_errored' }]);
    assert.deepEqual(status('acme/named', 4), [
      { dir: 'dir1', workspace: 'default', project: 'alpha', status: 'applied' },
      { dir: 'dir2', workspace: 'default', project: 'beta', status: 'planned' },
    ]);
    assert.match(state.pulls[0]?.status.headSha ?? '', /^[0-9a-f]{40}$/);
    assert.equal(state.applyLock, undefined);
    assert.deepEqual(state.notes, []);
    // Told to plan again: the PRs with locks (#1, #4); #2 and #3 errored and hold none.
    assert.deepEqual(
      noticesFor(state).map((n) => `${n.repo}#${n.pull}:${n.locks.length}`),
      ['acme/infra#1:3', 'acme/named#4:2'],
    );
  });

  it('the many-locks file: 320 locks of 8 pull requests, their statuses, and the apply lock', async () => {
    const state = atlantisState(await readBoltFile(MANY));
    assert.equal(state.locks.length, 320);
    for (let p = 100; p < 108; p++) assert.equal(state.locks.filter((l) => l.pull === p).length, 40, `pull #${p}'s locks`);
    assert.equal(state.pulls.length, 8);
    // Their plan step is `echo`: Atlantis records "planned, no changes".
    for (const p of state.pulls) assert.deepEqual(new Set(p.status.projects.map((s) => s.status)), new Set(['planned_no_changes']));
    for (const p of state.pulls) assert.equal(p.status.projects.length, 40);
    assert.equal(state.applyLock?.by, IMPORTED_APPLY_LOCK_BY);
  });

  it('a record that makes no sense refuses the whole file, naming its key but never its contents', async () => {
    const bad = (change: (r: LockJson) => void): string => {
      const r = goodLock();
      change(r);
      return JSON.stringify(r);
    };
    const cases: Array<[string, RegExp]> = [
      ['{not json', /the record is not JSON/],
      [bad((r) => (r.Project.Path = '../../etc')), /project dir is refused \(outside-repo\)/],
      [bad((r) => (r.Workspace = 'a/b')), /workspace name cannot contain '\/'/],
      [bad((r) => (r.Pull.Num = -3)), /Pull.Num is not a pull number/],
      [bad((r) => (r.Project.RepoFullName = 'noslash')), /repo name is not owner\/name/],
      [bad((r) => (r.Time = 'yesterday')), /Time is not an RFC 3339 time/],
    ];
    for (const [value, re] of cases) {
      assert.throws(
        () => atlantisState(dbWith([['acme/infra/dir1/default/', value]])),
        (e: unknown) =>
          e instanceof AtlantisDbError &&
          re.test(e.message) &&
          e.message.includes('"acme/infra/dir1/default/"') &&
          !e.message.includes('fixture-token'),
      );
    }
    const empty = dbWith([]);
    empty.root.buckets = [];
    assert.throws(() => atlantisState(empty), /not an Atlantis database/);
  });

  it('two Atlantis locks on one dir and workspace (two project names): merged into the earlier, and said so', async () => {
    const a = goodLock();
    a.Project.ProjectName = 'a';
    a.Time = '2026-01-01T00:00:00Z';
    const b = goodLock();
    b.Project.ProjectName = 'b';
    b.Pull.Num = 9;
    b.Time = '2026-01-02T00:00:00Z';
    const state = atlantisState(
      dbWith([
        ['k/a', JSON.stringify(a)],
        ['k/b', JSON.stringify(b)],
      ]),
    );
    assert.equal(state.locks.length, 1);
    assert.equal(state.locks[0]?.project, 'a');
    assert.match(state.notes[0] ?? '', /pull #9's lock \(project "b"\) left to pull #1's earlier one/);
  });

  it('the plan-again comment names the locks kept and the commands, with the executable name', () => {
    const c = planAgainComment(
      {
        repo: 'acme/infra',
        pull: 1,
        locks: [
          { dir: 'dir1', workspace: 'default' },
          { dir: 'd', workspace: 'w', project: 'p' },
        ],
      },
      'atl',
    );
    assert.equal(
      c,
      '**Plans Not Carried Over**: this Atlantis server was replaced by atlantis-operator. This pull request keeps its locks:\n\n' +
        '- dir: `dir1` workspace: `default`\n- dir: `d` workspace: `w` project: `p`\n\n' +
        'Its plans were not carried over: comment `atl plan` to plan again before `atl apply`.',
    );
  });
});

for (const [kind, open] of kinds) {
  describe(`import into the ${kind} store`, () => {
    it('carries the locks and pull statuses over, with a marker; a second import writes nothing', async () => {
      const store = await open();
      const r = await importAtlantisDb(store, SMALL, 'test');
      assert.equal(r.result, 'imported');
      assert.deepEqual((await store.list()).map(withoutTime), SMALL_LOCKS);
      const st = await store.getPullStatus('acme/infra', 1);
      assert.deepEqual(
        st?.projects.map((p) => p.status),
        ['planned', 'planned', 'planned'],
      );
      assert.equal((await store.getPullStatus('acme/named', 4))?.projects[0]?.status, 'applied');
      const marker = await store.atlantisImportMarker();
      assert.equal(marker?.locks, 5);
      assert.equal(marker?.sha256.length, 64);
      assert.equal(await store.getApplyLock(), undefined);
      // Imported locks behave as the store's own: the same PR re-plans, another is refused, unlock by PR works.
      assert.equal(
        (await store.tryLock({ repo: 'acme/infra', dir: 'dir1', workspace: 'default' }, { pull: 1, user: 'dev' })).acquired,
        true,
      );
      const other = await store.tryLock({ repo: 'acme/infra', dir: 'dir1', workspace: 'default' }, { pull: 7, user: 'x' });
      assert.equal(other.acquired, false);
      const again = await importAtlantisDb(store, MANY, 'test');
      assert.equal(again.result, 'already');
      assert.equal((await store.list()).length, 5, 'nothing of the second file was written');
      const notices = await store.takeImportNotices();
      assert.deepEqual(
        notices.map((n) => `${n.repo}#${n.pull}`),
        ['acme/infra#1', 'acme/named#4'],
      );
      assert.deepEqual(await store.takeImportNotices(), [], 'taken once');
      // Atlantis's own words when the plans are gone and the head is the one planned: plan again.
      const status = (await store.getPullStatus('acme/infra', 1))!;
      assert.equal(
        genericApplyProblem(status, [], status.headSha),
        'plan file is missing for dir "dir1" workspace "default" project "" with status "planned"; run `atlantis plan`',
      );
      const released = await store.unlockAllForPull('acme/infra', 1);
      assert.equal(released.locks.length, 3);
    });

    it('the many-locks file: 320 locks, the apply lock on, a lock held here already kept', async () => {
      const store = await open();
      await store.tryLock({ repo: 'acme/mono', dir: 'stacks/s005', workspace: 'default' }, { pull: 55, user: 'here' });
      const r = await importAtlantisDb(store, MANY, 'test');
      assert.equal(r.result, 'imported');
      assert.deepEqual(r.result === 'imported' && r.kept.map((l) => `${l.dir}#${l.pull}`), ['stacks/s005#55']);
      const locks = await store.list('acme/mono');
      assert.equal(locks.length, 320);
      assert.equal(locks.find((l) => l.dir === 'stacks/s005')?.pull, 55);
      assert.equal((await store.getApplyLock())?.by, IMPORTED_APPLY_LOCK_BY);
      assert.equal((await store.unlockAllForPull('acme/mono', 101)).locks.length, 40);
    });

    it('a damaged or truncated file: an error, nothing written, and a good file imports after', async () => {
      const store = await open();
      const cut = path.join(tmp, `cut-${kind}.db`);
      writeFileSync(cut, readFileSync(MANY).subarray(0, 40_000));
      await assert.rejects(importAtlantisDb(store, cut, 'test'), BoltFormatError);
      const junk = path.join(tmp, `junk-${kind}.db`);
      writeFileSync(junk, Buffer.alloc(20_000, 7));
      await assert.rejects(importAtlantisDb(store, junk, 'test'), /not a bbolt database/);
      assert.deepEqual(await store.list(), []);
      assert.equal(await store.atlantisImportMarker(), undefined);
      assert.equal((await importAtlantisDb(store, SMALL, 'test')).result, 'imported');
    });
  });
}

describe('import on Redis, two replicas starting at once', () => {
  it('exactly one imports; the other finds the marker', async () => {
    const n = ++db;
    const mk = async (id: string) => {
      const s = await RedisStore.connect({
        host: redis.host,
        port: redis.port,
        db: n,
        dataDir: mkdtempSync(path.join(tmp, 'rr-')),
        replicaId: id,
        sharedStateKey: testSharedStateKey(),
      });
      stores.push(s);
      return s;
    };
    const [a, b] = [await mk('a'), await mk('b')];
    const file = path.join(tmp, 'race.db');
    copyFileSync(MANY, file);
    const results = await Promise.all([importAtlantisDb(a, file, 'server a'), importAtlantisDb(b, file, 'server b')]);
    assert.deepEqual(results.map((r) => r.result).sort(), ['already', 'imported']);
    assert.equal((await a.list()).length, 320);
    const winner = results.find((r) => r.result === 'imported')!;
    assert.equal((await b.atlantisImportMarker())?.by, winner.marker.by);
  });
});
