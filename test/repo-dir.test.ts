// The one rule for repo-relative dirs (src/server/workflow/go-compat/repo-dir.ts), as a table: a
// comment's -d reads a leading / as the repo root, atlantis.yaml refuses it; both refuse
// climbing out of the repo and control characters.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type AbsoluteDir, type CleanedRepoDir, cleanRepoDir } from '../src/server/workflow/go-compat/repo-dir.js';

const cases: Array<[string, AbsoluteDir, CleanedRepoDir]> = [
  ['.', 'refused', { dir: '.' }],
  ['', 'refused', { dir: '.' }],
  ['a/./b/../c', 'refused', { dir: 'a/c' }],
  ['./a//b/', 'refused', { dir: 'a/b' }],
  ['a/..', 'refused', { dir: '.' }],
  ['..', 'refused', { refused: 'outside-repo' }],
  ['a/../../b', 'from-root', { refused: 'outside-repo' }],
  ['./..', 'from-root', { refused: 'outside-repo' }],
  ['/abs', 'refused', { refused: 'absolute' }],
  ['/abs', 'from-root', { dir: 'abs' }],
  ['/..', 'from-root', { dir: '.' }],
  ['/../../etc', 'from-root', { dir: 'etc' }],
  ['/', 'from-root', { dir: '.' }],
  ['a\u0000b', 'from-root', { refused: 'control-characters' }],
  ['a\nb', 'refused', { refused: 'control-characters' }],
  ['x\u007f', 'refused', { refused: 'control-characters' }],
  ['dir with spaces/ü', 'refused', { dir: 'dir with spaces/ü' }],
];

test('cleanRepoDir', () => {
  for (const [dir, absolute, want] of cases) assert.deepEqual(cleanRepoDir(dir, absolute), want, `${JSON.stringify(dir)} ${absolute}`);
});
