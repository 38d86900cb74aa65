// The result of a plan of 50 projects, too long for one GitHub comment, posted as Atlantis v0.47
// posts it: one comment per part, in order, each part's continuation header and footer
// Atlantis's (the split function is checked part by part against Atlantis's own in
// comment-split.test.ts), and with --max-comments-per-command the start dropped behind
// Atlantis's truncation header. Through the real server process, git and terraform: autoplan of
// a PR adding 50 projects (parallel_plan), then `atlantis plan` on a server capped at 2 comments.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { MAX_COMMENT_LENGTH, separators, splitComment } from '../src/server/vcs/comment-split.js';
import { childList } from './support/children.js';
import { type WorkflowEnv, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';

const HOST = '127.0.57.1';
const PROJECTS = 50;
const procs = childList();
let env: WorkflowEnv;

before(async () => {
  env = await createWorkflowEnv({ ghHost: '127.0.57.100' });
});
after(async () => {
  procs.killAll();
  await env?.close();
});

const name = (i: number): string => `p${String(i).padStart(2, '0')}`;

/** 50 projects, each planning one long value (3,000 characters): about 170 KB of plan output in all. */
function files(): Record<string, string> {
  const out: Record<string, string> = {};
  const projects: string[] = [];
  for (let i = 0; i < PROJECTS; i++) {
    out[`${name(i)}/main.tf`] = `resource "terraform_data" "long" {\n  input = "${name(i)}-${'x'.repeat(3000)}"\n}\n`;
    projects.push(`- name: ${name(i)}\n  dir: ${name(i)}`);
  }
  out['atlantis.yaml'] = `version: 3\nparallel_plan: true\nprojects:\n${projects.join('\n')}\n`;
  return out;
}

/** The comment the parts were cut from: each part without the continuation texts the split added. */
function joined(parts: string[]): string {
  const seps = Object.values(separators('plan'));
  const longest = (xs: string[]): string => xs.sort((a, b) => b.length - a.length)[0] ?? '';
  return parts
    .map((p, i) => {
      let s = p;
      if (i > 0) s = s.slice(longest(seps.map((x) => x.sepStart).filter((x) => s.startsWith(x))).length);
      if (i < parts.length - 1) s = s.slice(0, s.length - longest(seps.map((x) => x.sepEnd).filter((x) => s.endsWith(x))).length);
      return s;
    })
    .join('');
}

/** The bot's comments on PR 1 from index `from` on, once the last one is a final part (no "Continued in next comment."). */
async function partsFrom(from: number): Promise<string[]> {
  await env.waitForComment(1, /Ran Plan for|Continued plan output/, { after: from, timeoutMs: 480_000, pollMs: 200 });
  for (;;) {
    const bodies = env
      .commentsOn(1)
      .slice(from)
      .filter((c) => c.user === 'atlantis-bot')
      .map((c) => c.body);
    if (bodies.length > 0 && !bodies.at(-1)!.endsWith('Continued in next comment.')) return bodies;
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('a plan of 50 projects split over comments as Atlantis splits it', { timeout: 600_000 }, () => {
  let full = '';
  let allParts: string[] = [];

  it('posts every part in order, each with Atlantis continuation texts, the projects in order across parts', async () => {
    const { p, url } = await startWorkflowServer(env, tempDataDir(), HOST, ['--parallel-pool-size', '4']);
    procs.push(p);
    const opened = await env.openPull(url, 1, 'fifty', files());
    assert.equal(opened.status, 200);
    allParts = await partsFrom(0);
    p.child.kill('SIGTERM');
    await p.exited;
    assert.ok(allParts.length >= 3, `${allParts.length} parts`);
    for (const part of allParts) assert.ok(Buffer.byteLength(part) <= MAX_COMMENT_LENGTH);
    assert.match(allParts[0]!, new RegExp(`^Ran Plan for ${PROJECTS} projects:\n`));
    for (const part of allParts.slice(1)) assert.ok(part.startsWith('Continued plan output from previous comment.\n'), part.slice(0, 80));
    for (const part of allParts.slice(0, -1)) assert.ok(part.endsWith('Continued in next comment.'), part.slice(-80));
    full = joined(allParts);
    // The parts are exactly what the split (held to Atlantis's) makes of the whole comment.
    assert.deepEqual(splitComment(full, { command: 'plan' }), allParts);
    // Every project once, in the order of the list at the top (configuration order, docs/server.md).
    const listed = [...full.matchAll(/^\d+\. (?:project|dir): `(p\d\d)`/gm)].map((m) => m[1]);
    const sections = [...full.matchAll(/^### \d+\. (?:project|dir): `(p\d\d)`/gm)].map((m) => m[1]);
    const want = Array.from({ length: PROJECTS }, (_, i) => name(i));
    assert.deepEqual(sections, want);
    assert.deepEqual(listed, want);
    assert.match(full, /Plan: 1 to add, 0 to change, 0 to destroy\./);
  });

  it('--max-comments-per-command 2: the last two parts, the first behind the truncation header', async () => {
    assert.ok(full, 'the first test ran');
    const { p, url } = await startWorkflowServer(env, tempDataDir(), HOST, [
      '--parallel-pool-size',
      '4',
      '--max-comments-per-command',
      '2',
    ]);
    procs.push(p);
    const from = env.commentsOn(1).length;
    assert.equal((await env.comment(url, 1, 'atlantis plan')).status, 200);
    const capped = await partsFrom(from);
    p.child.kill('SIGTERM');
    await p.exited;
    assert.equal(capped.length, 2);
    assert.ok(capped[0]!.startsWith(separators('plan').none.truncationHeader), capped[0]!.slice(0, 200));
    assert.deepEqual(capped, splitComment(full, { command: 'plan', maxComments: 2 }));
    assert.equal(capped[1], allParts.at(-1));
  });
});
