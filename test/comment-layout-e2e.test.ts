// Result comments through the real server process (GitHub stand-in, real git, real
// terraform): Atlantis's layout of a plan over two projects, --hide-unchanged-plan-comments,
// and --hide-prev-plan-comments minimising earlier comments through GraphQL before the new
// one is posted (order from the stand-in's own record of the requests it received).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { CliProcess } from './support/cli.js';
import { childList } from './support/children.js';
import { terraformConfig } from './support/git-repos.js';
import type { RecordedCall, StandinComment } from './support/github-standin.js';
import { type WorkflowEnv, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';

let env: WorkflowEnv;
const procs = childList();

before(async () => {
  env = await createWorkflowEnv();
});
after(async () => {
  procs.killAll();
  await env.close();
});

/** A project without resources: terraform plans "No changes." */
const NO_RESOURCES = 'terraform {\n  required_version = ">= 1.4"\n}\n';

/** Index in the stand-in's request record of the minimizeComment call for a comment. */
function minimizeCallIndex(calls: RecordedCall[], c: StandinComment): number {
  return calls.findIndex((x) => {
    const vars = (x.body as { variables?: { input?: { subjectId?: unknown } } } | undefined)?.variables;
    return x.path === '/graphql' && vars?.input?.subjectId === `IC_${c.id}`;
  });
}

/** Index of the POST that created a comment: the last with its body (a re-plan posts the same text again). */
function postCallIndex(calls: RecordedCall[], c: StandinComment): number {
  for (let i = calls.length - 1; i >= 0; i--) {
    const x = calls[i] as RecordedCall;
    if (x.method === 'POST' && x.status === 201 && (x.body as { body?: unknown }).body === c.body) return i;
  }
  return -1;
}

describe('result comments end to end (real server process)', () => {
  const dataDir = tempDataDir();
  let url: string;
  let server: CliProcess;
  let first: StandinComment;

  it("lays out a plan over two projects as Atlantis does, leaving out the unchanged one's section", async () => {
    const started = await startWorkflowServer(env, dataDir, '127.0.47.1', ['--hide-prev-plan-comments', '--hide-unchanged-plan-comments']);
    procs.push(started.p);
    url = started.url;
    server = started.p;
    await env.openPull(url, 1, 'layout-both', { 'app1/main.tf': terraformConfig({ marker: 'app1-v2' }), 'app2/main.tf': NO_RESOURCES });
    first = await env.waitForComment(1, /^Ran Plan for 2 projects:/, { timeoutMs: 120_000 });
    const b = first.body;
    assert.ok(
      b.startsWith(
        'Ran Plan for 2 projects:\n\n1. dir: `app1` workspace: `default`\n1. dir: `app2` workspace: `default`\n---\n\n' +
          '### 1. dir: `app1` workspace: `default`\n',
      ),
      b,
    );
    // Folded or not depending on terraform's line count, then the diff block.
    assert.match(b, /### 1\. dir: `app1` workspace: `default`\n(<details><summary>Show Output<\/summary>\n\n)?```diff\n/);
    assert.doesNotMatch(b, /### 2\./, 'the no-change project has no section');
    assert.match(b, /\n\+ resource "terraform_data" "marker" \{\n/, 'the diff marker is at column 0');
    assert.doesNotMatch(b, /Refreshing state/);
    assert.ok(
      b.includes(
        `* :put_litter_in_its_place: To **delete** this plan and lock, click [here](${url}/lock?id=acme%252Finfra%252Fapp1%252Fdefault%252F)\n`,
      ),
      b,
    );
    assert.ok(b.includes('* :arrow_forward: To **apply** this plan, comment:\n  ```shell\n  atlantis apply -d app1\n  ```\n'), b);
    assert.ok(
      b.endsWith(
        '\n\n---\n### Plan Summary\n\n2 projects, 1 with changes, 1 with no changes, 0 failed\n\n' +
          '* :fast_forward: To **apply** all unapplied plans from this Pull Request, comment:\n  ```shell\n  atlantis apply\n  ```\n' +
          '* :put_litter_in_its_place: To **delete** all plans and locks from this Pull Request, comment:\n  ```shell\n  atlantis unlock\n  ```',
      ),
      b,
    );
    assert.equal(first.minimized, undefined);
  });

  it("--hide-prev-plan-comments: a plan minimises the bot's earlier plan comments as outdated before posting, and no one else's", async () => {
    const human = env.gh.addComment(env.repo.fullName, 1, 'Ran Plan by hand, looks fine', 'dev');
    const before = env.commentsOn(1).length;
    await env.comment(url, 1, 'atlantis plan');
    const second = await env.waitForComment(1, /^Ran Plan for 2 projects:/, { after: before, timeoutMs: 120_000 });
    assert.equal(env.gh.commentsById.get(first.id)?.minimized?.reason, 'outdated');
    assert.equal(env.gh.commentsById.get(human.id)?.minimized, undefined, "a person's comment stays");
    assert.equal(env.gh.commentsById.get(second.id)?.minimized, undefined, 'the new comment stays');
    const calls = env.gh.calls;
    const hid = minimizeCallIndex(calls, first);
    const posted = postCallIndex(calls, second);
    assert.ok(hid >= 0 && posted >= 0 && hid < posted, `minimised (request ${hid}) before the new comment (request ${posted})`);
    assert.deepEqual((calls[hid]?.body as { variables?: unknown } | undefined)?.variables, {
      input: { classifier: 'OUTDATED', subjectId: `IC_${first.id}` },
    });
  });

  it('with -d, only earlier comments naming that dir in their first line are hidden; apply hides apply comments', async () => {
    let before = env.commentsOn(1).length;
    await env.comment(url, 1, 'atlantis plan -d app1');
    const one = await env.waitForComment(1, /^Ran Plan for dir: `app1` workspace: `default`/, { after: before, timeoutMs: 120_000 });
    const multi = env.commentsOn(1).filter((c) => /^Ran Plan for 2 projects:/.test(c.body));
    assert.equal(multi.at(-1)?.minimized, undefined, 'a comment whose first line names no dir stays');
    before = env.commentsOn(1).length;
    await env.comment(url, 1, 'atlantis plan -d app1');
    const again = await env.waitForComment(1, /^Ran Plan for dir: `app1` workspace: `default`/, { after: before, timeoutMs: 120_000 });
    assert.equal(env.gh.commentsById.get(one.id)?.minimized?.reason, 'outdated');
    assert.equal(env.gh.commentsById.get(again.id)?.minimized, undefined);
    before = env.commentsOn(1).length;
    await env.comment(url, 1, 'atlantis apply -d app1');
    await env.waitForComment(1, /^Ran Apply for dir: `app1` workspace: `default`/, { after: before, timeoutMs: 120_000 });
    assert.equal(env.gh.commentsById.get(again.id)?.minimized, undefined, 'an apply does not hide plan comments');
  });

  it('a failed hide is logged and the result is posted anyway, as in Atlantis', async () => {
    const before = env.commentsOn(1).length;
    env.gh.failNext(1, { kind: 'status', status: 403 }, { path: /graphql$/ });
    await env.comment(url, 1, 'atlantis plan -d app1');
    await env.waitForComment(1, /^Ran Plan for dir: `app1` workspace: `default`/, { after: before, timeoutMs: 120_000 });
    assert.match(server.output(), /"msg":"Unable to hide old comments".*"error":"GitHub API POST \/graphql: 403/);
  });
});
