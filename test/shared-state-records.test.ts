// The records the replicas seal with the shared state key, as tables (pure: no Redis): what a
// seal covers (every field that decides what runs, and where the record is kept), what fails
// (a change, a move, another key, no code, not JSON), the replica URL rule, and the proofs of
// a forward and of its answer.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { inspect } from 'node:util';
import { describe, it } from 'node:test';
import {
  BAD_CODE,
  MALFORMED,
  NOT_JSON,
  NO_CODE,
  type StoredPlan,
  openCommand,
  openJob,
  openPlan,
  openQueued,
  sealCommand,
  sealJob,
  sealPlan,
  sealQueued,
} from '../src/server/locks/redis-records.js';
import { SharedStateKey } from '../src/server/locks/shared-state-key.js';
import { answerAuth, answerIsAuthentic, checkForwardAuth, forwardAuth } from '../src/server/replicas/forward-auth.js';
import { openReplica, replicaUrlProblem, sealReplica } from '../src/server/replicas/replica-record.js';

const key = SharedStateKey.fromBytes(randomBytes(32));
const otherKey = SharedStateKey.fromBytes(randomBytes(32));
const problem = (o: { ok: boolean; problem?: string }) => (o.ok ? 'ok' : o.problem);

describe('SharedStateKey', () => {
  it('refuses a key shorter than 32 bytes, and reads a file without its trailing newline', () => {
    assert.throws(() => SharedStateKey.fromBytes(Buffer.alloc(31, 1)), /it holds 31 bytes, at least 32 are needed/);
    const dir = mkdtempSync(path.join(tmpdir(), 'ato-key-'));
    const hex = randomBytes(32).toString('hex');
    writeFileSync(path.join(dir, 'nl'), `${hex}\n`);
    writeFileSync(path.join(dir, 'bare'), hex);
    const a = SharedStateKey.readFile(path.join(dir, 'nl'));
    const b = SharedStateKey.readFile(path.join(dir, 'bare'));
    assert.equal(a.mac('k', ['x']), b.mac('k', ['x']), 'the same key either way');
    assert.equal(a.secretText(), hex);
    assert.ok(!JSON.stringify({ a }).includes(hex) && !inspect(a).includes(hex), 'never printed');
  });
  it('a code is bound to its kind and to every part; verify refuses anything else', () => {
    const code = key.mac('plan/v1', ['a', 1, null]);
    assert.equal(key.verify('plan/v1', ['a', 1, null], code), true);
    for (const [kind, parts] of [
      ['job/v1', ['a', 1, null]],
      ['plan/v1', ['a', 1, 'null']],
      ['plan/v1', ['a', '1', null]],
      ['plan/v1', ['a,1', null]],
    ] as const)
      assert.equal(key.verify(kind, parts, code), false, `${kind} ${JSON.stringify(parts)}`);
    assert.equal(otherKey.verify('plan/v1', ['a', 1, null], code), false);
    for (const bad of [undefined, 42, '', code.slice(1), `${code}0`, code.toUpperCase().replace(/[0-9]/g, 'g')])
      assert.equal(key.verify('plan/v1', ['a', 1, null], bad), false, String(bad));
  });
});

describe('plan records', () => {
  const at = { repo: 'acme/infra', pull: 4, dir: 'envs/prod', workspace: 'default' };
  const rec: StoredPlan = {
    ...at,
    project: 'prod',
    headSha: 'abc',
    planSha256: 'a'.repeat(64),
    fileSha256: 'a'.repeat(64),
    fileSize: 10,
    createdAt: '2024-01-01T00:00:00.000Z',
    madeBy: 'atlantis-0',
  };
  const sealed = sealPlan(key, rec);

  it('opens with its seal, at its place', () => {
    const o = openPlan(key, at, sealed);
    assert.ok(o.ok);
    assert.deepEqual(o.value, rec);
  });
  // [what, where it is read, the raw record, the problem]
  const rows: Array<[string, typeof at, string, string]> = [
    ['another key', at, sealPlan(otherKey, rec), BAD_CODE],
    ['a changed sha256', at, JSON.stringify({ ...JSON.parse(sealed), planSha256: 'b'.repeat(64) }), BAD_CODE],
    ['a changed file sha256', at, JSON.stringify({ ...JSON.parse(sealed), fileSha256: 'b'.repeat(64) }), BAD_CODE],
    ['a changed head', at, JSON.stringify({ ...JSON.parse(sealed), headSha: 'def' }), BAD_CODE],
    ['a changed project', at, JSON.stringify({ ...JSON.parse(sealed), project: 'dev' }), BAD_CODE],
    ['who made it changed', at, JSON.stringify({ ...JSON.parse(sealed), madeBy: 'atlantis-1' }), BAD_CODE],
    ['moved to another PR', { ...at, pull: 5 }, sealed, BAD_CODE],
    ['moved to another repo', { ...at, repo: 'acme/other' }, sealed, BAD_CODE],
    ['moved to another dir', { ...at, dir: 'envs/dev' }, sealed, BAD_CODE],
    ['moved to another workspace', { ...at, workspace: 'staging' }, sealed, BAD_CODE],
    ['no code', at, JSON.stringify({ ...rec }), NO_CODE],
    ['not JSON', at, '{"repo":', NOT_JSON],
    ['a number for a sha', at, JSON.stringify({ ...JSON.parse(sealed), planSha256: 7 }), MALFORMED],
    ['an array', at, '[]', MALFORMED],
  ];
  for (const [what, where, raw, want] of rows) it(`fails: ${what}`, () => assert.equal(problem(openPlan(key, where, raw)), want));
});

describe('accepted commands, queued commands, jobs', () => {
  const cmd = {
    id: 'c1',
    repo: 'acme/infra',
    pull: 3,
    payload: { kind: 'comment', line: 'atlantis apply', n: 1.5, list: [1] },
    acceptedAt: 't',
  };
  // The store's script prepends the order.
  const stored = (json: string, seq = 1) => `{"seq":${seq},${json.slice(1)}`;

  it('a command opens in its replica journal only, with its payload as sealed', () => {
    const raw = stored(sealCommand(key, 'r0', cmd));
    const o = openCommand(key, 'r0', 'c1', raw);
    assert.ok(o.ok);
    assert.deepEqual(o.value, { ...cmd, seq: 1 });
    assert.equal(problem(openCommand(key, 'r1', 'c1', raw)), BAD_CODE, "another replica's journal");
    assert.equal(problem(openCommand(key, 'r0', 'c2', raw)), MALFORMED, 'another id');
    const changed = JSON.parse(raw) as typeof cmd;
    changed.payload.line = 'atlantis apply -p prod';
    assert.equal(problem(openCommand(key, 'r0', 'c1', JSON.stringify(changed))), BAD_CODE, 'a changed payload');
    assert.equal(problem(openCommand(key, 'r0', 'c1', stored(JSON.stringify(cmd)))), NO_CODE);
    assert.equal(problem(openCommand(key, 'r0', 'c1', '{"seq":1,"id":"c1","repo":')), NOT_JSON);
  });
  it('a queued command', () => {
    const q = { repo: 'acme/infra', pull: 2, payload: { kind: 'autoplan' }, enqueuedAt: 't' };
    const raw = `{"id":7,${sealQueued(key, q).slice(1)}`;
    assert.deepEqual(openQueued(key, raw), { ok: true, value: { id: 7, ...q } });
    assert.equal(problem(openQueued(key, raw.replace('"pull":2', '"pull":3'))), BAD_CODE);
    assert.equal(problem(openQueued(otherKey, raw)), BAD_CODE);
  });
  it('a job, bound to its id and its replica', () => {
    const j = { id: 'j1', command: 'apply', repo: 'acme/infra', pull: 1, dir: 'a', workspace: 'default', startedAt: 't', replicaId: 'r0' };
    const raw = sealJob(key, j);
    assert.deepEqual(openJob(key, 'j1', raw), { ok: true, value: j });
    assert.equal(problem(openJob(key, 'j2', raw)), MALFORMED);
    assert.equal(problem(openJob(key, 'j1', raw.replace('"pull":1', '"pull":9'))), BAD_CODE);
    assert.equal(problem(openJob(key, 'j1', raw.replace('"replicaId":"r0"', '"replicaId":"r1"'))), BAD_CODE);
  });
});

describe('replica records and URLs', () => {
  // [url, accepted]
  const urls: Array<[string, boolean]> = [
    ['http://10.0.0.7:4141', true],
    ['https://atlantis-0.atlantis.svc:4141', true],
    ['http://[fd00::7]:4141', true],
    ['http://host_name:1', true],
    ['http://10.0.0.7:4141/', false],
    ['http://10.0.0.7:4141/stolen?x=', false],
    ['http://10.0.0.7:4141?x=1', false],
    ['http://10.0.0.7:4141#events', false],
    ['http://user:pw@10.0.0.7:4141', false],
    ['http://10.0.0.7', false],
    ['http://10.0.0.7:0', false],
    ['http://10.0.0.7:65536', false],
    ['ftp://10.0.0.7:21', false],
    ['http://a b:4141', false],
  ];
  for (const [url, ok] of urls) it(`${ok ? 'accepts' : 'refuses'} ${url}`, () => assert.equal(replicaUrlProblem(url) === undefined, ok));

  const rec = { id: 'r0', url: 'http://10.0.0.7:4141', draining: false, heartbeatAt: 5, instance: 'n1' };
  it('a heartbeat opens under its own id only, sealed with the key, with an accepted URL', () => {
    const raw = sealReplica(key, rec);
    assert.deepEqual(openReplica(key, 'r0', raw), { ok: true, record: rec });
    assert.match(problem(openReplica(key, 'r1', raw)) as string, /kept under replica id r1 but names r0/);
    assert.match(problem(openReplica(otherKey, 'r0', raw)) as string, /does not match/);
    assert.match(problem(openReplica(key, 'r0', raw.replace('10.0.0.7', '10.0.0.8'))) as string, /does not match/);
    assert.match(problem(openReplica(key, 'r0', raw.replace('"draining":false', '"draining":true'))) as string, /does not match/);
    const { instance: _i, ...old } = rec;
    assert.match(problem(openReplica(key, 'r0', JSON.stringify(old))) as string, /fields of a replica record/);
    assert.match(problem(openReplica(key, 'r0', JSON.stringify({ ...rec }))) as string, /no authentication code/);
    assert.match(
      problem(openReplica(key, 'r0', sealReplica(key, { ...rec, url: 'http://x:1/p' }))) as string,
      /its URL "http:\/\/x:1\/p" must be/,
    );
  });
});

describe('the proofs of a forward and of its answer', () => {
  // GitHub's headers in the host's order: event, delivery, signature.
  const f = { from: 'r0', to: 'r1', headers: ['issue_comment', 'd-1', 'sha256=ab'], body: Buffer.from('{"a":1}') };
  const now = 1_700_000_000_000;

  it('checks who sent it, to whom, when, and what', () => {
    const { header, nonce } = forwardAuth(key, f, now);
    assert.deepEqual(checkForwardAuth(key, header, f, now + 1000), { ok: true, nonce });
    // [what, facts, time, key, the problem]
    const rows: Array<[string, typeof f, number, SharedStateKey, RegExp]> = [
      ['another body', { ...f, body: Buffer.from('{"a":2}') }, now, key, /does not match/],
      ['another delivery', { ...f, headers: ['issue_comment', 'd-2', 'sha256=ab'] }, now, key, /does not match/],
      ['another signature', { ...f, headers: ['issue_comment', 'd-1', 'sha256=cd'] }, now, key, /does not match/],
      ['another sender', { ...f, from: 'r2' }, now, key, /does not match/],
      ['another receiver', { ...f, to: 'r2' }, now, key, /does not match/],
      ['another key', f, now, otherKey, /does not match/],
      ['six minutes later', f, now + 6 * 60_000, key, /sent 360 s ago/],
      ['six minutes before', f, now - 6 * 60_000, key, /dated 360 s ahead of this replica's clock/],
    ];
    for (const [what, facts, at, k, want] of rows) {
      const c = checkForwardAuth(k, header, facts, at);
      assert.ok(!c.ok && want.test(c.problem), `${what}: ${JSON.stringify(c)}`);
    }
    for (const bad of [undefined, '', 'v1', `v2 ${header.slice(3)}`, header.replace(/ [0-9a-f]{64}$/, ' xyz')]) {
      const c = checkForwardAuth(key, bad, f, now);
      assert.ok(!c.ok, String(bad));
    }
  });
  it('an answer proves the key and the status, for that forward only', () => {
    const proof = answerAuth(key, 'n1', 200);
    assert.equal(answerIsAuthentic(key, proof, 'n1', 200), true);
    assert.equal(answerIsAuthentic(key, proof, 'n2', 200), false);
    assert.equal(answerIsAuthentic(key, proof, 'n1', 401), false);
    assert.equal(answerIsAuthentic(otherKey, proof, 'n1', 200), false);
    assert.equal(answerIsAuthentic(key, undefined, 'n1', 200), false);
  });
});
