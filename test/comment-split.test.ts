// Splitting over GitHub's comment limit exactly as Atlantis v0.47 splits (its common
// SplitComment), checked against the parts Atlantis's own function returned.
//
// test/fixtures/atlantis-v0.47/split-comment.json: per case the comment, the size limit, the
// comment cap and the command name, and `expected`, what common.SplitComment returned for
// them. Recorded like markdown-renderer.json (see test/comment-layout.test.ts): a Go test in
// a separate module on the public Atlantis snapshot (078d0a8) calling
// common.SplitComment(logging.NewNoopLogger(t), comment, maxSize, maxComments, command).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { MAX_COMMENT_LENGTH, separators, splitComment } from '../src/server/vcs/comment-split.js';

interface Case {
  name: string;
  comment: string;
  maxSize: number;
  maxComments: number;
  command: string;
  expected: string[];
}

const cases = JSON.parse(readFileSync(new URL('./fixtures/atlantis-v0.47/split-comment.json', import.meta.url), 'utf8')) as Case[];

for (const c of cases) {
  test(`as Atlantis: ${c.name}`, () => {
    const parts = splitComment(c.comment, { maxSize: c.maxSize, maxComments: c.maxComments, command: c.command });
    assert.deepEqual(parts, c.expected);
  });
}

test('the fixture splits in every markdown context, with and without a cap', () => {
  assert.ok(cases.length >= 10);
  assert.ok(cases.some((c) => c.expected.length > 1 && c.expected.length === c.maxComments));
  for (const closure of Object.values(separators('plan'))) {
    assert.ok(
      cases.some((c) => c.command === 'plan' && c.expected.some((p) => p.endsWith(closure.sepEnd))),
      JSON.stringify(closure.sepEnd),
    );
  }
});

test('GitHub-size comments: within the limit in bytes, never a broken character, content kept', () => {
  assert.equal(splitComment('a'.repeat(MAX_COMMENT_LENGTH)).length, 1);
  assert.equal(splitComment('a'.repeat(MAX_COMMENT_LENGTH + 1)).length, 2);
  // Multi-byte characters without whitespace: Atlantis would cut inside one.
  const text = `\`\`\`diff\n${'é😀'.repeat(40_000)}\n\`\`\``;
  const parts = splitComment(text, { command: 'plan' });
  assert.ok(parts.length > 1);
  for (const p of parts) {
    assert.ok(Buffer.byteLength(p) <= MAX_COMMENT_LENGTH, String(Buffer.byteLength(p)));
    assert.doesNotMatch(p, /\uFFFD/, 'no replacement character from a cut inside a character');
  }
  const { sepStart, sepEnd } = separators('plan').code;
  const joined = parts
    .map((p, i) => (i > 0 ? p.slice(sepStart.length) : p))
    .map((p, i, a) => (i < a.length - 1 ? p.slice(0, -sepEnd.length) : p))
    .join('');
  assert.equal(joined, text);
});

// How long it takes is bench/comment-split.ts's to measure (make bench), not a test's.
test('a 6 MB output splits into parts within the limit that join back to it', () => {
  const text = `${'+ resource "x" `y` {}\n'.repeat(300_000)}`;
  const body = `<details><summary>Show Output</summary>\n\n\`\`\`diff\n${text}\`\`\`\n</details>`;
  const parts = splitComment(body, { command: 'plan', maxComments: 0 });
  assert.ok(parts.length > 90, String(parts.length));
  for (const p of parts) assert.ok(Buffer.byteLength(p) <= MAX_COMMENT_LENGTH, String(Buffer.byteLength(p)));
  assert.ok(parts.join('').includes(text.slice(0, 1000)));
  assert.equal(parts.join('').split('+ resource "x" `y` {}').length - 1, 300_000, 'every line kept');
});
