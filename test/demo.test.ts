// The README's main job (`make run`) must keep working: run the demo to its end (a shorter
// apply) and check its figures from its own JSON summary line; and the figures' rules (pure)
// on tables.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { type AnswerComment, type DeliveryRecord, deliveryFigures, killReasons, type LogLine } from '../dev/demo/figures.js';
import type { ScenarioResult } from '../dev/demo/scenario.js';
import { UNLOCKED_COMMENT } from '../src/server/workflow/pr/messages.js';
import { assertBuilt } from './support/cli.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

describe('make run (the local demo)', () => {
  it('rolls out 2 busy Redis replicas with a surge: every delivery through the Service answered, no command lost, no terraform killed', {
    timeout: 540_000,
  }, () => {
    assertBuilt();
    const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'dev/demo.ts'), '--exit'], {
      cwd: repoRoot,
      encoding: 'utf8',
      timeout: 520_000,
      env: { ...process.env, DEMO_APPLY_SECONDS: '20' },
    });
    const out = `${r.stdout}\n${r.stderr}`;
    assert.equal(r.status, 0, out);
    const line = r.stdout.split('\n').find((l) => l.startsWith('DEMO_SUMMARY '));
    assert.ok(line, `a DEMO_SUMMARY line:\n${out}`);
    const s = JSON.parse(line.slice('DEMO_SUMMARY '.length)) as Omit<ScenarioResult, 'timeline'>;
    assert.equal(s.mode, 'redis-surge');
    assert.equal(s.replicas, 2);
    // 200 ms apart for a rollout that waits for a 20 s apply: many deliveries, all answered 2xx.
    assert.ok(s.deliveries >= 50, `deliveries throughout the rollout: ${s.deliveries}\n${out}`);
    assert.equal(s.failed, 0, `failed deliveries\n${out}`);
    assert.equal(s.accepted, s.deliveries);
    assert.equal(s.lost, 0, `lost commands\n${out}`);
    assert.equal(s.terraformKilled, false, `killed: ${s.killReasons.join('; ')}`);
    assert.deepEqual(s.killReasons, []);
    // The surge: never more than replicas + 1 pods, and the long apply ran through the rollout to its end.
    assert.ok(s.maxPods >= 2 && s.maxPods <= 3, `pods at once: ${s.maxPods}`);
    assert.ok(s.applyStart !== undefined && s.applyEnd !== undefined, 'the apply start and end from the server log');
    assert.ok(s.applyStart < s.patchedAt && s.applyEnd > s.patchedAt, 'the image changed while the apply ran');
    assert.ok(s.completedAt >= s.applyEnd, 'the rollout completed only after the apply ended');
    assert.match(r.stdout, /^0 failed deliveries, 0 lost commands, longest answer \d+ ms, no terraform run killed$/m);
  });
});

const d = (kind: DeliveryRecord['kind'], pull: number, sentAt: number, status?: number, ms = 10): DeliveryRecord => ({
  kind,
  pull,
  sentAt,
  answeredAt: sentAt + ms,
  status,
  error: status === undefined ? 'socket hang up' : undefined,
});
const unlocked = (pull: number, at: number): AnswerComment => ({ pull, at, body: UNLOCKED_COMMENT });
const plan = (pull: number, at: number): AnswerComment => ({ pull, at, body: 'Ran Plan for dir: `app` workspace: `default`' });

describe('demo figures', () => {
  const cases: Array<{ name: string; ds: DeliveryRecord[]; cs: AnswerComment[]; want: Partial<ReturnType<typeof deliveryFigures>> }> = [
    {
      name: 'each accepted command answered: none lost, the longest wait is the latest answer',
      ds: [d('unlock', 2, 1000, 200), d('unlock', 2, 1200, 200), d('autoplan', 100, 1100, 200, 50)],
      cs: [unlocked(2, 1050), unlocked(2, 1900), plan(100, 4100)],
      want: { deliveries: 3, failed: 0, accepted: 3, lost: 0, longestAnswerMs: 50, longestCommandWaitMs: 3000 },
    },
    {
      name: 'a reset or a 503 is a failed delivery, not a lost command; its error time is no answer',
      ds: [d('unlock', 2, 1000, undefined, 9000), d('unlock', 2, 1200, 503), d('unlock', 2, 1400, 200)],
      cs: [unlocked(2, 1500)],
      want: { failed: 2, accepted: 1, lost: 0, longestAnswerMs: 10, failedFrom: 1000, failedUntil: 1200 },
    },
    {
      name: 'an accepted command without its answer is lost; a queued comment is no answer',
      ds: [d('unlock', 3, 1000, 202), d('autoplan', 101, 1000, 202)],
      cs: [{ pull: 3, at: 1100, body: 'Atlantis server is shutting down; `atlantis unlock` has been queued' }, plan(101, 5000)],
      want: { lost: 1, longestCommandWaitMs: 4000 },
    },
    {
      name: 'answers posted before the first command of the PR are not its answers',
      ds: [d('unlock', 4, 2000, 200)],
      cs: [unlocked(4, 1500)],
      want: { lost: 1 },
    },
  ];
  for (const c of cases)
    it(c.name, () => {
      const f = deliveryFigures(c.ds, c.cs);
      for (const [k, v] of Object.entries(c.want)) assert.equal(f[k as keyof typeof f], v, k);
    });

  const line = (msg: string, fields: Record<string, unknown> = {}): LogLine => ({ msg, at: 0, ...fields });
  const applyStarted = line('Process started', { jobId: 'j1', args: ['apply', '-input=false'] });
  const killCases: Array<{ name: string; lines: LogLine[]; sigkills?: number; comment?: string; want: string[] }> = [
    {
      name: 'a clean apply and drain',
      lines: [applyStarted, line('Process finished', { jobId: 'j1', exitCode: 0, signal: null }), line('Drain finished', { exitCode: 0 })],
      comment: 'Ran Apply for dir: `network`\napplied vpc-v2',
      want: [],
    },
    {
      name: 'a plan exiting 1 is no kill; an apply exiting 1 is',
      lines: [
        line('Process started', { jobId: 'p', args: ['plan'] }),
        line('Process finished', { jobId: 'p', exitCode: 1, signal: null }),
        applyStarted,
        line('Process finished', { jobId: 'j1', exitCode: 1, signal: null }),
      ],
      comment: 'Ran Apply',
      want: ['pod: terraform exited 1 (job j1)'],
    },
    {
      name: 'a signal, an interrupt, a drain exit 3, a node SIGKILL, an interrupted comment',
      lines: [
        line('Interrupting terraform'),
        line('Process finished', { jobId: 'x', exitCode: null, signal: 'SIGINT' }),
        line('Drain finished', { exitCode: 3 }),
      ],
      sigkills: 1,
      comment: 'Ran Apply: Interrupted',
      want: [
        '1 SIGKILL sent by the node',
        'pod: Interrupting terraform',
        'pod: terraform exited SIGINT (job x)',
        'pod: drain ended with exit code 3',
        'the long apply says it was interrupted',
      ],
    },
    { name: 'no apply answer', lines: [], want: ['the long apply never answered'] },
  ];
  for (const c of killCases)
    it(`kill reasons: ${c.name}`, () => {
      assert.deepEqual(
        killReasons({ sigkills: c.sigkills ?? 0, serverLogs: [{ pod: 'pod', lines: c.lines }], applyComment: c.comment }),
        c.want,
      );
    });
});
