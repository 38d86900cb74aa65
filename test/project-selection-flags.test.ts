// How -d and -p select projects under --silence-no-projects and --enable-regexp-cmd
// (src/server/workflow/repo-config/project-selection.ts), as Atlantis v0.47's project command
// builder does: with atlantis.yaml listing projects, a -d or -p that names none of them
// selects nothing (no error, no default project: another server's); a -p regex matches whole
// project names, several only when allowed_regexp_prefixes allow it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseRepoConfig } from '../src/server/workflow/repo-config/atlantis-yaml.js';
import { resolveCommentTarget } from '../src/server/workflow/repo-config/project-selection.js';

const config = parseRepoConfig(
  'version: 3\nallowed_regexp_prefixes: [dev-]\nprojects:\n- {name: dev-a, dir: dev/a}\n- {name: dev-b, dir: dev/b}\n- {name: prod-a, dir: prod/a}\n- {name: prod-b, dir: prod/b}\n',
);
const names = (r: ReturnType<typeof resolveCommentTarget>): string[] | string =>
  r.kind === 'error' ? `error: ${r.message}` : r.kind === 'all' ? 'all' : r.projects.map((p) => p.name ?? `(default ${p.dir})`);

describe('-d/-p with --silence-no-projects', () => {
  it("a dir that is none of atlantis.yaml's projects: a default project without the flag, nothing with it", () => {
    assert.deepEqual(names(resolveCommentTarget(config, { dir: 'other' })), ['(default other)']);
    assert.deepEqual(names(resolveCommentTarget(config, { dir: 'other' }, { silenceNoProjects: true })), []);
    assert.deepEqual(names(resolveCommentTarget(config, { dir: 'other/*' }, { silenceNoProjects: true })), []);
    assert.deepEqual(names(resolveCommentTarget(config, { dir: 'dev/a' }, { silenceNoProjects: true })), ['dev-a']);
  });
  it('an unknown project name: an error without the flag, nothing with it', () => {
    assert.equal(
      names(resolveCommentTarget(config, { project: 'nope' })),
      "error: no project with name 'nope' is defined in 'atlantis.yaml'",
    );
    assert.deepEqual(names(resolveCommentTarget(config, { project: 'nope' }, { silenceNoProjects: true })), []);
  });
  it('without projects in atlantis.yaml the flag changes nothing', () => {
    const empty = parseRepoConfig('version: 3\n');
    assert.deepEqual(names(resolveCommentTarget(empty, { dir: 'x' }, { silenceNoProjects: true })), ['(default x)']);
  });
});

describe('-p with --enable-regexp-cmd', () => {
  const on = { enableRegexpCmd: true };
  it('a regex over whole names; several only with an allowed prefix', () => {
    assert.deepEqual(names(resolveCommentTarget(config, { project: 'dev-.*' }, on)), ['dev-a', 'dev-b']);
    assert.deepEqual(names(resolveCommentTarget(config, { project: 'prod-a' }, on)), ['prod-a']);
    assert.equal(
      names(resolveCommentTarget(config, { project: 'prod-.*' }, on)),
      "error: no project with name 'prod-.*' is defined in 'atlantis.yaml'",
    );
    assert.equal(
      names(resolveCommentTarget(config, { project: 'dev' }, on)),
      "error: no project with name 'dev' is defined in 'atlantis.yaml'",
      'whole names only',
    );
    assert.equal(
      names(resolveCommentTarget(config, { project: '(' }, on)),
      "error: no project with name '(' is defined in 'atlantis.yaml'",
    );
  });
  it('off: the name as it is', () => {
    assert.equal(
      names(resolveCommentTarget(config, { project: 'dev-.*' })),
      "error: no project with name 'dev-.*' is defined in 'atlantis.yaml'",
    );
  });
  it("as Go reads ^<regex>$: an alternation's sides are anchored apart", () => {
    // `^dev-a|prod-.$` is `^dev-a` or `prod-.$` (Go and JavaScript agree), not a whole-name match of either.
    const open = parseRepoConfig('version: 3\nprojects:\n- {name: dev-ab, dir: a}\n- {name: prod-b, dir: b}\n- {name: x-prod-c, dir: c}\n');
    assert.deepEqual(names(resolveCommentTarget(open, { project: 'dev-a|prod-.' }, on)), ['dev-ab', 'prod-b', 'x-prod-c']);
  });
  it('a hostile regex runs in linear time; what needs backtracking matches nothing', () => {
    // Both from the PR: a backtracking engine spends minutes on this name (2^60 paths).
    const hostile = parseRepoConfig(`version: 3\nprojects:\n- {name: ${'a'.repeat(60)}, dir: a}\n- {name: c, dir: c}\n`);
    assert.equal(
      names(resolveCommentTarget(hostile, { project: '(a|a)*b' }, on)),
      "error: no project with name '(a|a)*b' is defined in 'atlantis.yaml'",
    );
    assert.deepEqual(names(resolveCommentTarget(hostile, { project: '(a|a)*' }, on)), ['a'.repeat(60)]);
    assert.equal(
      names(resolveCommentTarget(hostile, { project: '(a)\\1*' }, on)),
      "error: no project with name '(a)\\1*' is defined in 'atlantis.yaml'",
      'a backreference (not in RE2) compiles to nothing',
    );
  });
  it('without allowed_regexp_prefixes any regex may match several', () => {
    const open = parseRepoConfig('version: 3\nprojects:\n- {name: a1, dir: a1}\n- {name: a2, dir: a2}\n');
    assert.deepEqual(names(resolveCommentTarget(open, { project: 'a.' }, on)), ['a1', 'a2']);
  });
});
