// The API's answers as JSON text (src/server/http/api-result.ts) against what Atlantis v0.47
// sent for the same results (test/fixtures/atlantis-v0.47/api-answers.json, recorded from the
// real Atlantis): Go's field order, its zero values (null, "", false), an error as its
// exported fields, command numbers, HTML characters escaped, the final newline.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import {
  type ApiProjectRun,
  apiError,
  commandResult,
  goJson,
  goTime,
  listLocksResult,
  resultHasErrors,
} from '../src/server/http/api-result.js';
import type { LockRecord } from '../src/server/locks/state-store.js';
import { githubPullUrl } from '../src/server/vcs/github/host.js';

interface Recorded {
  status: number;
  body: string;
}
const FIXTURE = JSON.parse(readFileSync(path.join(import.meta.dirname, 'fixtures/atlantis-v0.47/api-answers.json'), 'utf8')) as Record<
  string,
  Recorded
>;
const recorded = (name: string): Recorded => FIXTURE[name]!;
const projectOf = (r: Recorded) => (JSON.parse(r.body) as { ProjectResults: Array<Record<string, never>> }).ProjectResults[0]!;

describe('commandResult as Atlantis writes command.Result', () => {
  it('a plan that went through: PlanSuccess, every other field its zero value, Command 1, HTML escaped', () => {
    const atlantis = recorded('plan_b');
    const ps = projectOf(atlantis).PlanSuccess as unknown as { TerraformOutput: string };
    assert.match(ps.TerraformOutput, /b<&>1/, 'the recorded output holds the characters Go escapes');
    const run: ApiProjectRun = {
      view: {
        dir: 'b',
        workspace: 'default',
        outcome: {
          type: 'success',
          output: ps.TerraformOutput,
          lockUrl: 'http://127.0.0.1:4141/lock?id=acme%252Finfra%252Fb%252Fdefault%252F',
          replanCmd: 'atlantis plan -d b',
          applyCmd: 'atlantis apply -d b',
          mergedAgain: false,
        },
      },
    };
    const result = commandResult('plan', [run]);
    assert.equal(goJson(result), atlantis.body);
    assert.equal(resultHasErrors(result), false);
    assert.equal(atlantis.status, 200);
  });

  it('a missing dir: the error is Atlantis\'s DirNotExistErr, {"RepoRelDir": ...}; the answer is 500', () => {
    const atlantis = recorded('plan_missing_dir');
    const run: ApiProjectRun = {
      view: { dir: 'nope', workspace: 'default', outcome: { type: 'error', error: 'dir "nope" does not exist' } },
      dirMissing: true,
    };
    const result = commandResult('plan', [run]);
    assert.equal(goJson(result), atlantis.body);
    assert.equal(resultHasErrors(result), true);
    assert.equal(atlantis.status, 500);
  });

  it('an apply that went through: ApplySuccess, Command 0', () => {
    const atlantis = recorded('apply_a');
    const out = (projectOf(atlantis) as unknown as { ApplySuccess: string }).ApplySuccess;
    const run: ApiProjectRun = { view: { dir: 'a', workspace: 'default', outcome: { type: 'success', output: out } } };
    assert.equal(goJson(commandResult('apply', [run])), atlantis.body);
  });

  const results: Array<[string, ApiProjectRun['view']['outcome'], Record<string, unknown>]> = [
    ['terraform failed: an error without exported fields', { type: 'error', error: 'exit status 1' }, { Error: {}, Failure: '' }],
    ['interrupted by the drain deadline: an error too', { type: 'interrupted', cause: 'drain-deadline' }, { Error: {}, Failure: '' }],
    [
      'could not run (lock held): Failure is the reason',
      { type: 'failure', reason: 'This project is currently locked by an unapplied plan from pull #3.' },
      { Error: null, Failure: 'This project is currently locked by an unapplied plan from pull #3.' },
    ],
  ];
  for (const [name, outcome, want] of results) {
    it(name, () => {
      const r = commandResult('plan', [{ view: { dir: 'x', workspace: 'w', projectName: 'p', outcome } }]);
      const p = r.ProjectResults[0]!;
      assert.deepEqual({ Error: p.Error, Failure: p.Failure }, want);
      assert.deepEqual([p.PlanSuccess, p.ApplySuccess, p.RepoRelDir, p.Workspace, p.ProjectName], [null, '', 'x', 'w', 'p']);
      assert.equal(resultHasErrors(r), true);
    });
  }

  it('no project: an empty list, not null, and no error', () => {
    const r = commandResult('plan', []);
    assert.equal(goJson(r), '{"Error":null,"Failure":"","ProjectResults":[],"PlansDeleted":false}\n');
    assert.equal(resultHasErrors(r), false);
  });

  it('an apply whose terraform printed nothing counts as failed, as Atlantis judges an empty ApplySuccess', () => {
    assert.equal(
      resultHasErrors(commandResult('apply', [{ view: { dir: '.', workspace: 'default', outcome: { type: 'success', output: '' } } }])),
      true,
    );
  });
});

describe('listLocksResult as Atlantis writes ListLocksResult', () => {
  it('the recorded locks: names, PullID as a string, the PR link, RFC 3339 times', () => {
    const atlantis = JSON.parse(recorded('locks').body) as { Locks: Array<Record<string, string>> };
    const locks: LockRecord[] = atlantis.Locks.map((l) => ({
      repo: l.ProjectRepo!,
      dir: l.ProjectRepoPath!,
      workspace: l.Workspace!,
      pull: Number(l.PullID),
      user: l.User!,
      time: '2026-12-02T03:04:25.385Z',
    }));
    const ours = listLocksResult(locks, githubPullUrl('github.com'));
    assert.deepEqual(
      ours.Locks?.map((l) => ({ ...l, Time: '' })),
      atlantis.Locks.map((l) => ({ ...l, Time: '' })),
    );
    assert.equal(ours.Locks?.[0]?.Time, '2026-12-02T03:04:25.385Z');
  });

  it('no locks: null, as a nil slice; a lock without a pull request has no link; a project name is kept', () => {
    assert.equal(goJson(listLocksResult([], githubPullUrl('github.com'))), '{"Locks":null}\n');
    const l = listLocksResult(
      [{ repo: 'acme/infra', dir: 'x/y', workspace: 'w', pull: -42, user: '', project: 'net', time: '2026-01-01T00:00:00.000Z' }],
      githubPullUrl('ghe.example.com'),
    ).Locks![0]!;
    assert.deepEqual(l, {
      Name: 'acme/infra/x/y/w/net',
      ProjectName: 'net',
      ProjectRepo: 'acme/infra',
      ProjectRepoPath: 'x/y',
      PullID: '-42',
      PullURL: '',
      User: '',
      Workspace: 'w',
      Time: '2026-01-01T00:00:00Z',
    });
  });
});

describe('goTime and goJson', () => {
  const times: Array<[string, string]> = [
    ['2026-01-02T03:04:05.120Z', '2026-01-02T03:04:05.12Z'],
    ['2026-01-02T03:04:05.100Z', '2026-01-02T03:04:05.1Z'],
    ['2026-01-02T03:04:00.000Z', '2026-01-02T03:04:00Z'],
    ['2026-01-02T03:04:05.123+02:00', '2026-01-02T01:04:05.123Z'],
    ['not a time', 'not a time'],
  ];
  for (const [iso, want] of times) it(`goTime(${iso})`, () => assert.equal(goTime(iso), want));

  it("escapes what Go's encoder escapes by default, only those, and ends with a newline", () => {
    assert.equal(
      goJson(apiError('<a href="x">&</a>\u2028\u2029 é\u0001\n')),
      '{"error":"\\u003ca href=\\"x\\"\\u003e\\u0026\\u003c/a\\u003e\\u2028\\u2029 é\\u0001\\n"}\n',
    );
  });
});
