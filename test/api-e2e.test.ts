// Atlantis's API (POST /api/plan, /api/apply, GET /api/locks) on the real server process,
// with the GitHub stand-in, real git and real terraform: the JSON Atlantis v0.47 answers
// (test/fixtures/atlantis-v0.47/api-answers.json, recorded from the real Atlantis with the same
// projects), no PR comment, the statuses the same workflow sets, the locks a PR's request took
// kept with its plans (as a comment's plan keeps them), the ref without a pull request planned in a
// working copy of its own that goes afterwards; the refusals (401, 400 naming the field, 403,
// 503 without --api-secret) with nothing run; the secret never in the log; and a drain that
// waits for a running API apply and refuses new API work meanwhile; the team rule and a closed
// PR refused; a crash during a run without a PR cleaned up by the next server.
import { APPLY_DISABLED_COMMENT } from '../src/server/workflow/commands/apply-lock.js';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { StatusBody } from '../src/contract/drain-protocol.js';
import type { CliProcess } from './support/cli.js';
import { childList } from './support/children.js';
import { gatedConfig, terraformConfig } from './support/git-repos.js';
import { waitFor } from './support/server.js';
import { type WorkflowEnv, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';

const SECRET = 'api-secret-for-tests-3f9c';
const FIXTURE = JSON.parse(readFileSync(path.join(import.meta.dirname, 'fixtures/atlantis-v0.47/api-answers.json'), 'utf8')) as Record<
  string,
  { request: unknown; status: number; body: string }
>;

let env: WorkflowEnv;
const procs = childList();

before(async () => {
  env = await createWorkflowEnv();
});
after(async () => {
  procs.killAll();
  await env.close();
});

async function startServer(host: string, extra: string[]): Promise<{ p: CliProcess; url: string; dataDir: string }> {
  const dataDir = tempDataDir();
  const started = await startWorkflowServer(env, dataDir, host, extra);
  procs.push(started.p);
  return { ...started, dataDir };
}

interface Answer {
  status: number;
  type: string | null;
  text: string;
  json: unknown;
}

/** `token` null: no X-Atlantis-Token header. */
async function api(url: string, method: 'GET' | 'POST', p: string, body?: unknown, token: string | null = SECRET): Promise<Answer> {
  const r = await fetch(`${url}${p}`, {
    method,
    headers: token === null ? {} : { 'X-Atlantis-Token': token },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: r.status, type: r.headers.get('content-type'), text, json };
}

interface ProjectResult {
  Error: unknown;
  Failure: string;
  PlanSuccess: { TerraformOutput: string; LockURL: string } | null;
  ApplySuccess: string;
  Command: number;
  RepoRelDir: string;
  Workspace: string;
}
const results = (a: Answer): ProjectResult[] => (a.json as { ProjectResults: ProjectResult[] }).ProjectResults;

type Lock = { ProjectRepoPath: string; PullID: string; User: string; Workspace: string; Name: string };
const lockDirs = async (url: string): Promise<string[]> =>
  (((await api(url, 'GET', '/api/locks')).json as { Locks: Lock[] | null }).Locks ?? []).map((l) => `${l.ProjectRepoPath}#${l.PullID}`);

const statuses = (sha: string, context: string) =>
  env.gh
    .statusesFor(env.repo.fullName, sha)
    .filter((s) => s.context === context)
    .map((s) => `${s.state}: ${s.description}`);

const request = (extra: Record<string, unknown>) => ({ Repository: 'acme/infra', Type: 'Github', ...extra });

describe('the API on a server with --api-secret', () => {
  let url: string;
  let server: CliProcess;
  let dataDir: string;
  let head1 = '';
  let commentsAfterAutoplan = 0;

  it('opens PR #1 (dirs a and b, as in the recording): its autoplan locks both', async () => {
    ({ p: server, url, dataDir } = await startServer('127.24.61.1', ['--api-secret', SECRET]));
    head1 = (
      await env.openPull(url, 1, 'feat', {
        'a/main.tf': terraformConfig({ marker: 'a1' }),
        'b/main.tf': terraformConfig({ marker: 'b<&>1' }),
      })
    ).headSha;
    await env.waitForComment(1, /^Ran Plan for 2 projects/);
    await waitFor('the autoplan to end', () => statuses(head1, 'atlantis/plan').length === 2);
    commentsAfterAutoplan = env.commentsOn(1).length;
    assert.deepEqual(await lockDirs(url), ['a#1', 'b#1']);
  });

  it('GET /api/locks: the token is needed (a deliberate difference); the locks as Atlantis lists them', async () => {
    for (const token of [null, 'wrong', `${SECRET}x`, '']) {
      const a = await api(url, 'GET', '/api/locks', undefined, token);
      assert.equal(a.status, 401, String(token));
      assert.equal(a.text, '{"error":"header X-Atlantis-Token did not match expected secret"}\n');
    }
    const a = await api(url, 'GET', '/api/locks');
    assert.equal(a.status, 200);
    assert.equal(a.type, 'application/json');
    const locks = (a.json as { Locks: Array<Record<string, string>> }).Locks;
    assert.deepEqual(
      locks.map((l) => ({ ...l, Time: '' })),
      [
        {
          Name: 'acme/infra/a/default/',
          ProjectName: '',
          ProjectRepo: 'acme/infra',
          ProjectRepoPath: 'a',
          PullID: '1',
          PullURL: 'https://github.com/acme/infra/pull/1',
          User: 'dev',
          Workspace: 'default',
          Time: '',
        },
        {
          Name: 'acme/infra/b/default/',
          ProjectName: '',
          ProjectRepo: 'acme/infra',
          ProjectRepoPath: 'b',
          PullID: '1',
          PullURL: 'https://github.com/acme/infra/pull/1',
          User: 'dev',
          Workspace: 'default',
          Time: '',
        },
      ],
    );
    for (const l of locks) assert.match(l.Time ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
  });

  it("POST /api/plan of PR #1's dir b: Atlantis's JSON byte for byte, no comment, the statuses, the PR's locks kept", async () => {
    const atlantis = FIXTURE.plan_b!;
    const a = await api(url, 'POST', '/api/plan', atlantis.request);
    assert.equal(a.status, atlantis.status, a.text);
    assert.equal(a.type, 'application/json');
    assert.equal(a.text.replaceAll(url, 'http://127.0.0.1:4141'), atlantis.body);
    assert.equal(env.commentsOn(1).length, commentsAfterAutoplan, 'no PR comment for an API run');
    assert.deepEqual(statuses(head1, 'atlantis/plan: b/default').slice(2), [
      'pending: Plan in progress...',
      'success: Plan: 1 to add, 0 to change, 0 to destroy.',
    ]);
    // Deliberate: the PR-wide status is set again from the PR's plan status (Atlantis leaves it pending).
    assert.deepEqual(statuses(head1, 'atlantis/plan').slice(2), [
      'pending: Plan in progress...',
      'success: 2/2 projects planned successfully.',
    ]);
    assert.deepEqual(statuses(head1, 'atlantis/policy_check'), [], 'as Atlantis, the API sets no policy_check status');
    // Deliberate: Atlantis releases every lock of the PR (UnlockByPull); the request took none here.
    assert.deepEqual(await lockDirs(url), ['a#1', 'b#1']);
  });

  it('POST /api/plan of a dir the PR did not touch: planned, and the lock it took stays with the plan (as a comment plan)', async () => {
    const a = await api(url, 'POST', '/api/plan', request({ Ref: 'feat', PR: 1, Paths: [{ Directory: 'app1' }] }));
    assert.equal(a.status, 200, a.text);
    const [r] = results(a);
    assert.equal(r?.Command, 1);
    assert.match(r?.PlanSuccess?.TerraformOutput ?? '', /input {2}= "app1-v1"/);
    assert.equal(r?.PlanSuccess?.LockURL, `${url}/lock?id=acme%252Finfra%252Fapp1%252Fdefault%252F`);
    assert.deepEqual(statuses(head1, 'atlantis/plan: app1/default'), [
      'pending: Plan in progress...',
      'success: Plan: 1 to add, 0 to change, 0 to destroy.',
    ]);
    assert.equal(statuses(head1, 'atlantis/plan').at(-1), 'success: 3/3 projects planned successfully.');
    // Deliberate: Atlantis releases every lock of the PR here, leaving the plan without its lock.
    assert.deepEqual(await lockDirs(url), ['a#1', 'app1#1', 'b#1'], 'the PR keeps the lock of its plan');
    assert.match(server.output(), /"msg":"API command finished".*"command":"api plan"/);
  });

  it("POST /api/apply of app1: plans, then applies; the apply's result, its statuses; the lock stays until the PR closes", async () => {
    const a = await api(url, 'POST', '/api/apply', request({ Ref: 'feat', PR: 1, Paths: [{ Directory: 'app1', Workspace: 'default' }] }));
    assert.equal(a.status, 200, a.text);
    const [r] = results(a);
    assert.deepEqual([r?.Command, r?.Error, r?.PlanSuccess, r?.RepoRelDir, r?.Workspace], [0, null, null, 'app1', 'default']);
    assert.match(r?.ApplySuccess ?? '', /applied app1-v1/);
    assert.match(r?.ApplySuccess ?? '', /Apply complete! Resources: 1 added/);
    assert.deepEqual(statuses(head1, 'atlantis/apply: app1/default'), ['pending: Apply in progress...', 'success: Apply succeeded.']);
    assert.deepEqual(statuses(head1, 'atlantis/apply'), ['pending: Apply in progress...', 'pending: 1/3 projects applied.']);
    assert.equal(env.commentsOn(1).length, commentsAfterAutoplan);
    assert.deepEqual(await lockDirs(url), ['a#1', 'app1#1', 'b#1']);
  });

  it("the global apply lock on (from the page): /api/apply is refused with Atlantis's text before anything runs; off again, it runs", async () => {
    assert.equal((await fetch(`${url}/apply/lock`, { method: 'POST', signal: AbortSignal.timeout(10_000) })).status, 200);
    const jobsBefore = readdirSync(path.join(dataDir, 'jobs')).length;
    const refused = await api(
      url,
      'POST',
      '/api/apply',
      request({ Ref: 'feat', PR: 1, Paths: [{ Directory: 'app1', Workspace: 'default' }] }),
    );
    assert.equal(refused.status, 403, refused.text);
    assert.deepEqual(refused.json, { error: APPLY_DISABLED_COMMENT });
    assert.equal(readdirSync(path.join(dataDir, 'jobs')).length, jobsBefore, 'nothing ran');
    assert.equal((await fetch(`${url}/apply/unlock`, { method: 'DELETE', signal: AbortSignal.timeout(10_000) })).status, 200);
    const plan = await api(url, 'POST', '/api/plan', request({ Ref: 'feat', PR: 1, Paths: [{ Directory: 'app1', Workspace: 'default' }] }));
    assert.equal(plan.status, 200, 'the lock only ever refused applies');
  });

  it('a missing dir: 500 with the project error as Atlantis marshals it; an unknown project: 500 before anything runs', async () => {
    const missing = await api(url, 'POST', '/api/plan', FIXTURE.plan_missing_dir!.request);
    assert.equal(missing.status, 500);
    assert.equal(missing.text, FIXTURE.plan_missing_dir!.body);
    const jobsBefore = readdirSync(path.join(dataDir, 'jobs')).length;
    const unknown = await api(url, 'POST', '/api/plan', request({ Ref: 'feat', PR: 1, Paths: [{ Directory: 'b' }], Projects: ['nope'] }));
    assert.equal(unknown.status, 500);
    assert.match((unknown.json as { error: string }).error, /^failed to build command: /);
    assert.equal(readdirSync(path.join(dataDir, 'jobs')).length, jobsBefore, 'b did not run: every target is checked first');
  });

  it('PR-less: a branch is planned in a working copy of its own; its statuses on the commit; nothing of it is left', async () => {
    const sha = await env.repo.createBranch('release-1', { 'app2/extra.tf': 'locals {\n  x = 1\n}\n' });
    const a = await api(url, 'POST', '/api/plan', request({ ref: 'refs/heads/release-1', paths: [{ directory: 'app2' }] }));
    assert.equal(a.status, 200, a.text);
    const [r] = results(a);
    assert.match(r?.PlanSuccess?.TerraformOutput ?? '', /input {2}= "app2-v1"/);
    assert.deepEqual(statuses(sha, 'atlantis/plan: app2/default'), [
      'pending: Plan in progress...',
      'success: Plan: 1 to add, 0 to change, 0 to destroy.',
    ]);
    assert.deepEqual(statuses(sha, 'atlantis/plan'), ['pending: Plan in progress...', 'success: 1/1 projects planned successfully.']);
    assert.deepEqual(await lockDirs(url), ['a#1', 'app1#1', 'b#1'], 'no lock of the run left');
    assert.deepEqual(readdirSync(path.join(dataDir, 'repos', 'acme', 'infra')), ['1'], 'its working copy is gone');
    const status = (await (await fetch(`${url}/status`)).json()) as StatusBody;
    assert.equal(status.in_progress_operations, 0);
    const unknownRef = await api(url, 'POST', '/api/plan', request({ Ref: 'no-such-branch', Paths: [{ Directory: 'app2' }] }));
    assert.equal(unknownRef.status, 400);
    assert.equal(unknownRef.text, '{"error":"Ref: acme/infra has no branch \\"no-such-branch\\""}\n');
  });

  it('refusals: 401 without the right token, 400 naming the field, 403 outside the allowlist; nothing runs', async () => {
    const jobsBefore = readdirSync(path.join(dataDir, 'jobs')).length;
    const statusesBefore = env.gh.statusesFor(env.repo.fullName).length;
    const good = request({ Ref: 'feat', PR: 1, Paths: [{ Directory: 'a' }] });
    for (const [p, token] of [
      ['/api/plan', null],
      ['/api/plan', 'nope'],
      ['/api/apply', null],
    ] as const) {
      const a = await api(url, 'POST', p, good, token);
      assert.equal(a.status, 401);
      assert.equal(a.text, '{"error":"header X-Atlantis-Token did not match expected secret"}\n');
    }
    const bad: Array<[unknown, string | RegExp]> = [
      [{}, 'request is missing fields: Repository, Ref, Type'],
      [request({ PR: 1 }), 'request is missing fields: Ref'],
      [request({ Ref: 'feat', PR: 'one' }), 'failed to parse request: PR: must be an integer'],
      [
        request({ Ref: 'feat', Paths: [{ Directory: 'a', Workspace: '../x' }] }),
        `Paths[0].Workspace: invalid workspace "../x": cannot contain '/' or '\\'`,
      ],
      [request({ Ref: 'feat', Paths: [{ Directory: '../etc' }] }), 'Paths[0].Directory: using a relative path "../etc" is not allowed'],
      [request({ Ref: 'feat', Type: 'Gitlab' }), 'Type: "Gitlab" is not a valid type'],
      ['{"Repository": "acme/infra", ', /^failed to parse request: /],
      [request({ Ref: 'feat', PR: 99, Paths: [{ Directory: 'a' }] }), 'PR: acme/infra has no pull request #99'],
      [
        request({ Ref: 'other', PR: 1, Paths: [{ Directory: 'a' }] }),
        'Ref: "other" is not the head of pull request #1 (its head branch is "feat")',
      ],
    ];
    for (const [body, want] of bad) {
      const a = await api(url, 'POST', '/api/plan', body);
      assert.equal(a.status, 400, JSON.stringify(body));
      const error = (a.json as { error: string }).error;
      if (typeof want === 'string') assert.equal(error, want);
      else assert.match(error, want);
    }
    const outside = await api(url, 'POST', '/api/plan', request({ Repository: 'other/infra', Ref: 'feat', Paths: [{ Directory: 'a' }] }));
    assert.equal(outside.status, 403);
    assert.equal(outside.text, '{"error":"repo not allowlisted"}\n');
    assert.equal((await fetch(`${url}/api/plan`)).status, 405);
    assert.equal(readdirSync(path.join(dataDir, 'jobs')).length, jobsBefore, 'no job ran');
    assert.equal(env.gh.statusesFor(env.repo.fullName).length, statusesBefore, 'no status was set');
    assert.deepEqual(await lockDirs(url), ['a#1', 'app1#1', 'b#1']);
  });

  it('the secret is never in the log, and a token sent is not echoed', () => {
    const log = server.output();
    assert.ok(log.includes('"msg":"API request refused: wrong or missing X-Atlantis-Token"'), 'the refusals are logged');
    assert.equal(log.includes(SECRET), false, 'the API secret appears in the server log');
    assert.equal(log.includes('"nope"'), false);
  });
});

describe('the API without --api-secret', () => {
  it("answers Atlantis's 503 to every endpoint, with or without a token, and runs nothing", async () => {
    const { url, p } = await startServer('127.24.61.2', []);
    for (const [method, ep] of [
      ['POST', '/api/plan'],
      ['POST', '/api/apply'],
      ['GET', '/api/locks'],
    ] as const) {
      for (const token of [null, SECRET]) {
        const a = await api(url, method, ep, method === 'POST' ? request({ Ref: 'feat', PR: 1 }) : undefined, token);
        assert.equal(a.status, 503, `${method} ${ep}`);
        assert.equal(a.text, '{"error":"ignoring request since API is disabled"}\n');
      }
    }
    assert.doesNotMatch(p.output(), /"msg":"Cloning pull request"/);
  });
});

describe('the API, the team allowlist and the pull request gate', () => {
  it('a request has no user: only rules for every team let it run; a closed PR is refused; nothing runs', async () => {
    const { url, p } = await startServer('127.24.61.4', ['--api-secret', SECRET, '--gh-team-allowlist', '*:plan,ops:apply']);
    env.gh.addPull(env.repo.fullName, { number: 3, headSha: 'c'.repeat(40), headRef: 'closed-3', baseRef: 'main', state: 'closed' });
    const apply = await api(url, 'POST', '/api/apply', request({ Ref: 'closed-3', PR: 3, Paths: [{ Directory: 'app1' }] }));
    assert.equal(apply.status, 403);
    assert.equal(
      (apply.json as { error: string }).error,
      'team allowlist denied command: apply is not authorized for API requests, which have no user (--gh-team-allowlist needs *:apply)',
    );
    const plan = await api(url, 'POST', '/api/plan', request({ Ref: 'closed-3', PR: 3, Paths: [{ Directory: 'app1' }] }));
    assert.equal(plan.status, 403, 'plan passes the team rule, then the closed PR is refused');
    assert.equal(plan.text, '{"error":"PR: pull request #3 is not open"}\n');
    assert.doesNotMatch(p.output(), /"msg":"Cloning pull request"/);
  });
});

describe('the API and the drain', () => {
  it('a drain waits for a running API apply, refuses new API work with 503, and exits after its answer', async () => {
    const gate = path.join(mkdtempSync(path.join(tmpdir(), 'ato-api-gate-')), 'go');
    await env.repo.createBranch('gated', { 'slow/main.tf': gatedConfig('slow', gate) });
    const { p, url, dataDir } = await startServer('127.24.61.3', ['--api-secret', SECRET]);
    const running = api(url, 'POST', '/api/apply', request({ Ref: 'gated', Paths: [{ Directory: 'slow' }] }));
    await waitFor(
      'the API apply to be applying',
      () => {
        const jobs = path.join(dataDir, 'jobs');
        return (
          existsSync(jobs) &&
          readdirSync(jobs).some((f) => readFileSync(path.join(jobs, f), 'utf8').includes(`Provisioning with 'local-exec'`))
        );
      },
      60_000,
    );
    const st = (await (await fetch(`${url}/status`)).json()) as StatusBody;
    assert.deepEqual(
      st.operations.map((o) => [o.command, o.repo, o.pull, o.project]),
      [['api_apply', 'acme/infra', null, 'slow']],
    );
    p.child.kill('SIGTERM');
    await waitFor('shutting_down', async () => ((await (await fetch(`${url}/status`)).json()) as StatusBody).shutting_down);
    const refused = await api(url, 'POST', '/api/plan', request({ Ref: 'gated', Paths: [{ Directory: 'slow' }] }));
    assert.equal(refused.status, 503);
    assert.equal(refused.text, '{"error":"Atlantis server is shutting down, please try again later."}\n');
    assert.equal(((await (await fetch(`${url}/status`)).json()) as StatusBody).in_progress_operations, 1, 'the apply still counts');
    writeFileSync(gate, '');
    const answer = await running;
    assert.equal(answer.status, 200, answer.text);
    assert.match(results(answer)[0]?.ApplySuccess ?? '', /applied slow/);
    assert.equal((await p.exited).code, 0, p.output());
    // Order from the server's own log: the API command ended before the drain did.
    const at = (msg: string): number => {
      const line = p
        .output()
        .split('\n')
        .find((l) => l.includes(`"msg":"${msg}"`));
      assert.ok(line, `no "${msg}" line`);
      return Date.parse((JSON.parse(line) as { time: string }).time);
    };
    assert.ok(at('API command finished') <= at('Drained'), 'the drain ended after the API command');
    assert.match(p.output(), /"msg":"API request refused during drain"/);
  });

  it('a crash during an API run without a PR: the next server on the data dir releases its locks, plans and working copy, and comments nothing', async () => {
    const gate = path.join(mkdtempSync(path.join(tmpdir(), 'ato-api-gate-')), 'go');
    await env.repo.createBranch('gated-crash', { 'crash/main.tf': gatedConfig('crash', gate) });
    const first = await startServer('127.24.61.5', ['--api-secret', SECRET]);
    const running = api(first.url, 'POST', '/api/apply', request({ Ref: 'gated-crash', Paths: [{ Directory: 'crash' }] })).catch(
      (e: Error) => e,
    );
    await waitFor(
      'the API apply to be applying',
      () => {
        const jobs = path.join(first.dataDir, 'jobs');
        return (
          existsSync(jobs) &&
          readdirSync(jobs).some((f) => readFileSync(path.join(jobs, f), 'utf8').includes(`Provisioning with 'local-exec'`))
        );
      },
      60_000,
    );
    const locked = (((await api(first.url, 'GET', '/api/locks')).json as { Locks: Lock[] }).Locks ?? []).map((l) => Number(l.PullID));
    assert.equal(locked.length, 1);
    assert.ok((locked[0] ?? 0) < 0, 'locked under a pull number of its own');
    const copies = path.join(first.dataDir, 'repos', 'acme', 'infra');
    assert.deepEqual(readdirSync(copies), [String(locked[0])]);
    first.p.child.kill('SIGKILL');
    assert.equal((await first.p.exited).signal, 'SIGKILL');
    assert.ok((await running) instanceof Error, 'the killed server never answered');
    // terraform runs in its own process group and outlives the server: let it end before the next start.
    writeFileSync(gate, '');
    await waitFor('terraform under the data dir to end', () => !processesIn(first.dataDir), 60_000);
    const comments = env.gh.callsTo('POST', /\/issues\/.*\/comments$/).length;
    const second = await startWorkflowServer(env, first.dataDir, '127.24.61.6', ['--api-secret', SECRET]);
    procs.push(second.p);
    await waitFor('the interrupted job to be handled', () => /"msg":"Found a job interrupted by a server crash"/.test(second.p.output()));
    assert.equal((await api(second.url, 'GET', '/api/locks')).text, '{"Locks":null}\n');
    assert.deepEqual(readdirSync(copies), [], 'its working copy is gone');
    assert.equal(env.gh.callsTo('POST', /\/issues\/.*\/comments$/).length, comments, 'no comment: there is no pull request to tell');
  });
});

/** Whether a live process has its working directory under `dir` (terraform in a working copy). */
function processesIn(dir: string): boolean {
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (readlinkSync(`/proc/${pid}/cwd`).startsWith(dir)) return true;
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return false;
}
