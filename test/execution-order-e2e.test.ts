// Execution order, cancel, depends_on and plan/apply requirements through the real server
// process, real git and real terraform, as Atlantis v0.47 runs them. The order of events is
// read from the timestamps the workflow's own `run` step writes (date +%s%N), never from
// polling: each project's plan writes `start <name> <ns>`, sleeps, then `end <name> <ns>`.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { childList } from './support/children.js';
import { terraformConfig } from './support/git-repos.js';
import { type WorkflowEnv, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';
import { waitFor } from './support/server.js';

let env: WorkflowEnv;
const procs = childList();
const eventsDir = mkdtempSync(path.join(tmpdir(), 'ato-order-'));
let repoConfig: string;

/** The trusted server-side workflow: a timestamped, slow plan that fails when the project has a `fail` file. */
function reposYaml(sleepSeconds: number): string {
  const stamp = (what: string) => `printf '${what} %s %s\\n' "$PROJECT_NAME" "$(date +%s%N)" >> '${eventsDir}/events-'"$PULL_NUM"`;
  // A project with a `slow` file sleeps longer: the window in which a test comments `cancel`.
  const run = `${stamp('start')}; if [ -e slow ]; then sleep ${3 * sleepSeconds}; else sleep ${sleepSeconds}; fi; ${stamp('end')}; if [ -e fail ]; then echo planned to fail; exit 1; fi`;
  return `repos:
- id: /.*/
  allowed_overrides: [workflow, apply_requirements, plan_requirements, import_requirements]
workflows:
  stamped:
    plan:
      steps:
      - init
      - run: ${JSON.stringify(run)}
      - plan
`;
}

before(async () => {
  env = await createWorkflowEnv();
  repoConfig = path.join(eventsDir, 'repos.yaml');
  writeFileSync(repoConfig, reposYaml(3));
});
after(async () => {
  procs.killAll();
  await env.close();
});

async function startServer(host: string, extra: string[] = []): Promise<string> {
  const { p, url } = await startWorkflowServer(env, tempDataDir(), host, [
    '--repo-config',
    repoConfig,
    '--allow-commands',
    'version,plan,apply,unlock,cancel',
    ...extra,
  ]);
  procs.push(p);
  return url;
}

interface Span {
  start: bigint;
  end?: bigint;
}
/** Start and end (ns) of each project's plan step on PR `pull`, from the step's own file. */
function spans(pull: number): Map<string, Span> {
  const out = new Map<string, Span>();
  const f = path.join(eventsDir, `events-${pull}`);
  if (!existsSync(f)) return out;
  for (const line of readFileSync(f, 'utf8').trim().split('\n')) {
    const [what, name, ns] = line.split(' ') as [string, string, string];
    if (what === 'start') out.set(name, { start: BigInt(ns) });
    else (out.get(name) as Span).end = BigInt(ns);
  }
  return out;
}
const span = (m: Map<string, Span>, name: string): Required<Span> => {
  const s = m.get(name);
  assert.ok(s?.end !== undefined, `${name} ran to its end`);
  return s as Required<Span>;
};

/** atlantis.yaml with the given projects (each a dir of the same name), on the `stamped` workflow. */
function atlantisYaml(top: string, projects: Array<{ name: string; extra?: string }>): string {
  const list = projects.map((p) => `- name: ${p.name}\n  dir: ${p.name}\n  workflow: stamped\n${p.extra ?? ''}`).join('');
  return `version: 3\n${top}projects:\n${list}`;
}
function tf(names: string[], extra: Record<string, string> = {}): Record<string, string> {
  const files: Record<string, string> = { ...extra };
  for (const n of names) files[`${n}/main.tf`] = terraformConfig({ marker: `${n}-v1` });
  return files;
}

async function commentAndWait(url: string, pull: number, body: string, re: RegExp): Promise<string> {
  const before = env.commentsOn(pull).length;
  await env.comment(url, pull, body);
  return (await env.waitForComment(pull, re, { after: before, timeoutMs: 90_000 })).body;
}

describe('execution order (server without --parallel-plan)', () => {
  let url: string;
  before(async () => {
    url = await startServer('127.0.87.1');
  });

  it('plans one project after another by default (Atlantis: parallel_plan false)', async () => {
    await env.openPull(
      url,
      1,
      'seq',
      tf(['a', 'b', 'c'], { 'atlantis.yaml': atlantisYaml('', [{ name: 'a' }, { name: 'b' }, { name: 'c' }]) }),
    );
    const c = await env.waitForComment(1, /^Ran Plan for 3 projects/, { timeoutMs: 90_000 });
    assert.doesNotMatch(c.body, /Error/);
    const s = spans(1);
    const [a, b, cc] = [span(s, 'a'), span(s, 'b'), span(s, 'c')];
    assert.ok(
      a.end <= b.start && b.end <= cc.start,
      `one after another: ${JSON.stringify([...s], (_k, v) => (typeof v === 'bigint' ? String(v) : v))}`,
    );
  });

  it('parallel_plan: true in atlantis.yaml runs a group together; execution_order_group orders the groups', async () => {
    const yaml = atlantisYaml('parallel_plan: true\n', [
      { name: 'late1', extra: '  execution_order_group: 2\n' },
      { name: 'first', extra: '  execution_order_group: 1\n' },
      { name: 'late2', extra: '  execution_order_group: 2\n' },
    ]);
    await env.openPull(url, 2, 'groups', tf(['late1', 'first', 'late2'], { 'atlantis.yaml': yaml }));
    await env.waitForComment(2, /^Ran Plan for 3 projects/, { timeoutMs: 90_000 });
    const s = spans(2);
    const [first, l1, l2] = [span(s, 'first'), span(s, 'late1'), span(s, 'late2')];
    assert.ok(first.end <= l1.start && first.end <= l2.start, 'group 1 ends before group 2 starts');
    assert.ok(l1.start < l2.end && l2.start < l1.end, 'the two projects of group 2 overlap');
  });

  it('abort_on_execution_order_fail: a failed group stops the later groups (parallel mode)', async () => {
    const yaml = atlantisYaml('parallel_plan: true\nabort_on_execution_order_fail: true\n', [
      { name: 'base', extra: '  execution_order_group: 1\n' },
      { name: 'top', extra: '  execution_order_group: 2\n' },
    ]);
    await env.openPull(url, 3, 'abort', tf(['base', 'top'], { 'atlantis.yaml': yaml, 'base/fail': 'x\n' }));
    const c = await env.waitForComment(3, /^Ran Plan for /, { timeoutMs: 90_000 });
    // As Atlantis, an unsuccessful single plan's header leaves out the project name.
    assert.match(c.body, /^Ran Plan for dir: `base` workspace: `default`/);
    assert.match(c.body, /planned to fail/);
    assert.doesNotMatch(c.body, /`top`/);
    assert.deepEqual([...spans(3).keys()], ['base'], 'top never started');
  });

  it('cancel: projects not yet started are cancelled, the running one finishes', async () => {
    // The autoplan runs p1, p2, p3 one after another; the cancel comes while p1 runs.
    await env.openPull(
      url,
      4,
      'cancel',
      tf(['p1', 'p2', 'p3'], { 'atlantis.yaml': atlantisYaml('', [{ name: 'p1' }, { name: 'p2' }, { name: 'p3' }]), 'p1/slow': 'x\n' }),
    );
    await waitFor('p1 started', () => spans(4).has('p1'), 60_000);
    await env.comment(url, 4, 'atlantis cancel');
    const done = await env.waitForComment(4, /^Ran Plan for 3 projects/, { timeoutMs: 90_000 });
    const cancelReply = env.commentsOn(4).find((c) => c.body.startsWith('Cancelled all queued operations'));
    assert.equal(
      cancelReply?.body,
      'Cancelled all queued operations and released working directory locks for this pull request.\n' +
        'New operations can now be started. Currently running operations will continue to completion.',
    );
    const s = spans(4);
    span(s, 'p1');
    assert.deepEqual([...s.keys()], ['p1'], 'p2 and p3 never started');
    assert.equal(done.body.split('operation cancelled via `atlantis cancel` command').length - 1, 2, done.body);
    assert.match(done.body, /project: `p2` dir: `p2` workspace: `default`/);
    // The cancel ends with the run: the next plan runs every project.
    const again = await commentAndWait(url, 4, 'atlantis plan', /^Ran Plan for 3 projects/);
    assert.doesNotMatch(again, /cancelled/);
  });
});

describe('requirements and depends_on (server without --parallel-apply)', () => {
  let url: string;
  before(async () => {
    url = await startServer('127.0.87.3');
  });

  it('plan_requirements [approved]: the plan is refused until a review approves', async () => {
    const yaml = atlantisYaml('', [{ name: 'gated', extra: '  plan_requirements: [approved]\n' }]);
    await env.openPull(url, 21, 'gated', tf(['gated'], { 'atlantis.yaml': yaml }));
    const c = await env.waitForComment(21, /^Ran Plan for dir: `gated`/, { timeoutMs: 90_000 });
    assert.match(
      c.body,
      /\*\*Plan Failed\*\*: Pull request must be approved according to the project's approval rules before running plan\./,
    );
    assert.equal(spans(21).size, 0, 'no step ran');
    assert.doesNotMatch(await (await fetch(`${url}/`)).text(), /#21 by/, 'no lock is left behind');
    env.gh.updatePull(env.repo.fullName, 21, { reviews: [{ user: 'boss', state: 'APPROVED' }] });
    const ok = await commentAndWait(url, 21, 'atlantis plan', /^Ran Plan for project: `gated`/);
    assert.doesNotMatch(ok, /Failed|Error/);
  });

  it('apply_requirements [mergeable]: refused with the reason while blocked or a draft, applied once clean', async () => {
    const yaml = atlantisYaml('', [{ name: 'merged', extra: '  apply_requirements: [mergeable]\n' }]);
    await env.openPull(url, 22, 'merged', tf(['merged'], { 'atlantis.yaml': yaml }));
    await env.waitForComment(22, /^Ran Plan for project: `merged`/, { timeoutMs: 90_000 });
    env.gh.updatePull(env.repo.fullName, 22, { mergeable: false, mergeableState: 'blocked' });
    assert.match(
      await commentAndWait(url, 22, 'atlantis apply', /^Ran Apply for project: `merged`/),
      /\*\*Apply Failed\*\*: Pull request must be mergeable before running apply \(PR is in state blocked\)\./,
    );
    env.gh.updatePull(env.repo.fullName, 22, { mergeable: true, mergeableState: 'clean', draft: true });
    assert.match(
      await commentAndWait(url, 22, 'atlantis apply', /^Ran Apply for project: `merged`/),
      /\*\*Apply Failed\*\*: Pull request must be mergeable before running apply \(PR is a draft\)\./,
    );
    env.gh.updatePull(env.repo.fullName, 22, { draft: false });
    assert.match(await commentAndWait(url, 22, 'atlantis apply', /^Ran Apply for project: `merged`/), /applied merged-v1/);
  });

  it("depends_on: a project is not applied before its dependency; `apply` applies the dependency's group first", async () => {
    const yaml = atlantisYaml('', [
      { name: 'net', extra: '  execution_order_group: 1\n' },
      { name: 'app', extra: '  execution_order_group: 2\n  depends_on: [net]\n' },
    ]);
    await env.openPull(url, 23, 'deps', tf(['net', 'app'], { 'atlantis.yaml': yaml }));
    await env.waitForComment(23, /^Ran Plan for 2 projects/, { timeoutMs: 90_000 });
    assert.match(
      await commentAndWait(url, 23, 'atlantis apply -p app', /^Ran Apply for project: `app`/),
      /\*\*Apply Failed\*\*: Can't apply your project unless you apply its dependencies: \[net\]/,
    );
    const all = await commentAndWait(url, 23, 'atlantis apply', /^Ran Apply for 2 projects/);
    assert.match(all, /applied net-v1/);
    assert.match(all, /applied app-v1/);
    assert.ok(all.indexOf('`net`') < all.indexOf('`app`'), 'net is reported (and ran) first');
  });
});

describe('--gh-allow-mergeable-bypass-apply', () => {
  let url: string;
  before(async () => {
    url = await startServer('127.0.87.4', ['--gh-allow-mergeable-bypass-apply']);
  });

  it('a PR blocked only by the atlantis/apply status is mergeable; another failing required check still blocks', async () => {
    const yaml = atlantisYaml('', [{ name: 'bypass', extra: '  apply_requirements: [mergeable]\n' }]);
    const { headSha } = await env.openPull(url, 31, 'bypass', tf(['bypass'], { 'atlantis.yaml': yaml }));
    await env.waitForComment(31, /^Ran Plan for project: `bypass`/, { timeoutMs: 90_000 });
    // Branch protection requires ci/build and atlantis/apply; GitHub says blocked while apply is pending.
    env.gh.setStatus(env.repo.fullName, headSha, { context: 'ci/build', state: 'failure' });
    env.gh.updatePull(env.repo.fullName, 31, {
      mergeable: true,
      mergeableState: 'blocked',
      protection: { requiredChecks: ['ci/build', 'atlantis/apply'], reviewDecision: null },
    });
    assert.match(
      await commentAndWait(url, 31, 'atlantis apply', /^Ran Apply for project: `bypass`/),
      /\*\*Apply Failed\*\*: Pull request must be mergeable before running apply \(PR is in state blocked, and cannot bypass mergeable requirements\)\./,
    );
    env.gh.setStatus(env.repo.fullName, headSha, { context: 'ci/build', state: 'success' });
    assert.match(await commentAndWait(url, 31, 'atlantis apply', /^Ran Apply for project: `bypass`/), /applied bypass-v1/);
  });
});

describe('execution order with --parallel-plan', () => {
  let url: string;
  before(async () => {
    url = await startServer('127.0.87.2', ['--parallel-plan']);
  });

  it('--parallel-plan runs the projects together; parallel_plan: false in atlantis.yaml wins over it', async () => {
    await env.openPull(url, 11, 'flag-par', tf(['x', 'y'], { 'atlantis.yaml': atlantisYaml('', [{ name: 'x' }, { name: 'y' }]) }));
    await env.waitForComment(11, /^Ran Plan for 2 projects/, { timeoutMs: 90_000 });
    let s = spans(11);
    const [x, y] = [span(s, 'x'), span(s, 'y')];
    assert.ok(x.start < y.end && y.start < x.end, 'x and y overlap');

    await env.openPull(
      url,
      12,
      'flag-seq',
      tf(['u', 'v'], { 'atlantis.yaml': atlantisYaml('parallel_plan: false\n', [{ name: 'u' }, { name: 'v' }]) }),
    );
    await env.waitForComment(12, /^Ran Plan for 2 projects/, { timeoutMs: 90_000 });
    s = spans(12);
    const [u, v] = [span(s, 'u'), span(s, 'v')];
    assert.ok(u.end <= v.start, 'u ends before v starts');
  });
});
