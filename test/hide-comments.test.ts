// --hide-prev-plan-comments: which earlier comments are minimised (Atlantis v0.47's rules,
// as a table), and the stand-in's minimizeComment, answered as GitHub answers it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { commentsToHide } from '../src/server/workflow/pr/hide-comments.js';
import type { HostComment } from '../src/server/vcs/host.js';
import { answerGraphql } from './support/github-standin-graphql.js';

// As the GitHub host lists them: a comment's handle is its GraphQL node id.
const c = (id: number, author: string | null, body: string): HostComment => ({ id: `IC_${id}`, author, body });

const COMMENTS: HostComment[] = [
  c(1, 'atlantis-bot', 'Ran Plan for dir: `dir1` workspace: `default`\n\n```diff\n+ x\n```'),
  c(2, 'dev', 'atlantis plan -d dir1'),
  c(3, 'Atlantis-Bot', 'Ran Plan for 2 projects:\n\n1. dir: `dir1` workspace: `default`'),
  c(4, 'atlantis-bot', 'Ran Apply for dir: `dir1` workspace: `default`'),
  c(5, 'atlantis-bot', 'Ran Plan for dir: `dir2` workspace: `default`'),
  c(6, null, 'Ran Plan for dir: `dir3` workspace: `default`'),
  c(7, 'atlantis-bot', 'Continued plan output from previous comment.\n<details>'),
  c(8, 'atlantis-bot', '**Plan Error**\n```\nboom\n```'),
  c(9, 'atlantis-bot', ''),
];

test("which comments are hidden: the bot's, naming the command (and the -d dir) in their first line", () => {
  const table: Array<[string, string, string, number[]]> = [
    // [bot login, command title, dir, hidden ids]
    ['atlantis-bot', 'Plan', '', [1, 3, 5, 6, 7, 8]],
    // A multi-project comment's first line names no dir, so it stays (as in Atlantis).
    ['atlantis-bot', 'Plan', 'dir1', [1]],
    ['ATLANTIS-BOT', 'Apply', '', [4]],
    ['atlantis-bot', 'Apply', 'dir2', []],
    ['other-bot', 'Plan', '', [6]],
    ['atlantis-bot', 'Version', '', []],
  ];
  for (const [botLogin, commandTitle, dir, ids] of table) {
    assert.deepEqual(
      commentsToHide(COMMENTS, { botLogin, commandTitle, dir }).map((x) => x.id),
      ids.map((i) => `IC_${i}`),
      `${botLogin} ${commandTitle} ${dir}`,
    );
  }
});

test('the stand-in minimises a comment as GitHub does and records the reason', () => {
  const minimized = new Map<string, string>();
  const nodes = {
    minimize: (id: string, reason: string) => {
      if (id !== 'IC_1') return false;
      minimized.set(id, reason);
      return true;
    },
  };
  const query =
    'mutation($input: MinimizeCommentInput!) { minimizeComment(input: $input) { minimizedComment { isMinimized minimizedReason viewerCanMinimize } } }';
  assert.deepEqual(answerGraphql({ query, variables: { input: { classifier: 'OUTDATED', subjectId: 'IC_1' } } }, new Map(), nodes), [
    200,
    { data: { minimizeComment: { minimizedComment: { isMinimized: true, minimizedReason: 'outdated', viewerCanMinimize: true } } } },
  ]);
  assert.equal(minimized.get('IC_1'), 'outdated');
  const [status, missing] = answerGraphql(
    { query, variables: { input: { classifier: 'OUTDATED', subjectId: 'IC_404' } } },
    new Map(),
    nodes,
  ) as [number, { data: unknown; errors: Array<{ type: string; message: string }> }];
  assert.equal(status, 200);
  assert.deepEqual(missing.data, { minimizeComment: null });
  assert.equal(missing.errors[0]?.type, 'NOT_FOUND');
  assert.equal(missing.errors[0]?.message, "Could not resolve to a node with the global id of 'IC_404'");
  const [, bad] = answerGraphql({ query, variables: { input: { classifier: 'STALE', subjectId: 'IC_1' } } }, new Map(), nodes) as [
    number,
    { errors: Array<{ message: string }> },
  ];
  assert.match(
    bad.errors[0]?.message ?? '',
    /invalid value for classifier \(Expected "STALE" to be one of: SPAM, ABUSE, OFF_TOPIC, OUTDATED/,
  );
});
