// when_modified matching: Atlantis v0.47's semantics (moby/patternmatcher v0.6.1 behind
// filepath.Join with the project dir), and linear time on hostile patterns and paths.
// The expected values in the table were checked against that library's own code.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  MAX_WHEN_MODIFIED_PATTERN_LENGTH,
  MatchBudget,
  MatchBudgetExceeded,
  compilePattern,
  compilePatternList,
  listMatches,
  matchesWhenModified,
} from '../src/server/workflow/repo-config/when-modified.js';
import { goClean, goDir, goJoin, goTrimSpace } from '../src/server/workflow/go-compat/go-paths.js';
import { parseRepoConfig } from '../src/server/workflow/repo-config/atlantis-yaml.js';
import { projectsForChangedFiles } from '../src/server/workflow/repo-config/project-selection.js';

// [project dir, when_modified, changed file (repo-relative), Atlantis's answer, why]
const TABLE: Array<[string, string[], string, boolean, string]> = [
  [
    '.',
    ['**/*.tf*', '**/*.tofu', '**/*.tofu.json', '**/terragrunt.hcl', '**/.terraform.lock.hcl'],
    'main.tf',
    true,
    'default: a .tf file at the root',
  ],
  ['.', ['**/*.tf*'], 'sub/dir/vars.tfvars', true, 'default: .tfvars deep down'],
  ['.', ['**/*.tf*'], 'README.md', false, 'default: not terraform'],
  ['.', ['**/*.tf*'], 'main.tf/README.md', true, 'a dir named like a match matches all below it'],
  ['.', ['**/*.tofu'], 'x/a.tofu', true, 'tofu'],
  ['app', ['**/*.tf*'], 'app/main.tf', true, 'relative to the project dir'],
  ['app', ['**/*.tf*'], 'other/main.tf', false, 'another dir'],
  ['app', ['**/*.tf*'], 'app2/main.tf', false, 'a sibling dir with the same prefix'],
  ['app', ['*.tf'], 'app/main.tf', true, '* at the project root'],
  ['app', ['*.tf'], 'app/sub/main.tf', false, '* stays in one dir'],
  ['envs/prod', ['../../modules/**/*.tf'], 'modules/vpc/main.tf', true, '../ climbs out of the project dir'],
  ['envs/prod', ['../../modules/**/*.tf'], 'envs/modules/vpc/main.tf', false, '../ is joined, not searched'],
  ['infra', ['../modules/**'], 'modules/vpc/main.tf', true, '../modules/** from infra'],
  ['infra', ['../modules/**'], 'modules', false, 'modules/** does not match the dir itself'],
  ['.', ['../x/*.tf'], 'x/a.tf', false, '../ above the repo root matches nothing'],
  ['.', ['**/*.tf', '!test/**'], 'test/x.tf', false, 'exclusion'],
  ['.', ['**/*.tf', '!test/**'], 'src/x.tf', true, 'exclusion elsewhere'],
  ['.', ['!test/**', '**/*.tf'], 'test/x.tf', true, 'a later include wins'],
  ['.', ['**/*.tf', '!test/**', 'test/keep.tf'], 'test/keep.tf', true, 're-included after an exclusion'],
  ['.', ['**/*.tf', '!test/**', 'test/keep.tf'], 'test/drop.tf', false, 'still excluded'],
  ['.', ['!**/*.tf'], 'a.tf', false, 'an exclusion alone matches nothing'],
  ['app', ['**/*.tf', '!'], 'app/a.tf', false, 'a bare ! excludes the whole project dir'],
  ['.', ['**/*.tf', '!'], 'a.tf', true, 'a bare ! at the root excludes nothing'],
  ['app', [''], 'app/x/y.md', true, 'an empty pattern is the project dir itself'],
  ['.', [''], 'x/y.md', false, 'an empty pattern at the root matches nothing'],
  ['.', ['config'], 'config/a/b.yaml', true, 'a dir pattern matches everything below'],
  ['.', ['config'], 'configs/a.yaml', false, 'but not a longer name'],
  ['.', ['a?.tf'], 'ab.tf', true, '? is one char'],
  ['.', ['a?.tf'], 'a/.tf', false, '? is not a slash'],
  ['.', ['a?.tf'], 'abc.tf', false, '? is exactly one char'],
  ['.', ['a.tf'], 'aXtf', false, '. is literal'],
  ['.', ['a+b(c)|{d}$.tf'], 'a+b(c)|{d}$.tf', true, 'regexp chars are literal'],
  ['.', ['[a-c]*.tf'], 'b1.tf', true, 'a range'],
  ['.', ['[a-c]*.tf'], 'd1.tf', false, 'outside the range'],
  ['.', ['[^a]x'], 'bx', true, '^ negates'],
  ['.', ['[^a]x'], 'ax', false, '^ negates (excluded char)'],
  ['.', ['a[^x]b'], 'a/b', true, 'a negated class matches a slash'],
  ['.', ['[!a]x'], 'bx', false, '! in a class is a literal, not a negation'],
  ['.', ['[!a]x'], '!x', true, '! in a class is a literal'],
  ['.', ['[!a]x'], 'ax', true, '! in a class: a is in it'],
  ['.', ['a[/]b'], 'a/b', true, 'a class holding a slash'],
  ['.', ['[\\]]x'], ']x', true, 'an escaped ] in a class'],
  ['.', ['\\*.tf'], '*.tf', true, 'an escaped * is literal'],
  ['.', ['\\*.tf'], 'a.tf', false, 'an escaped * is not a wildcard'],
  ['.', ['\\[a\\].tf'], '[a].tf', true, 'escaped brackets'],
  ['.', ['**'], 'any/thing/at/all.md', true, '** alone matches everything'],
  ['.', ['**/main.tf'], 'main.tf', true, '**/x matches x at the root'],
  ['.', ['**/main.tf'], 'a/b/main.tf', true, '**/x matches x deep down'],
  ['.', ['**/main.tf'], 'a/bmain.tf', false, '**/x needs the slash'],
  ['.', ['**main.tf'], 'a/bmain.tf', true, '**x without slash is a plain suffix'],
  ['.', ['**.tf'], 'x/y/z.tf', true, '**.tf is any path ending in .tf'],
  ['.', ['a/**'], 'a/b/c', true, 'a/** prefix'],
  ['.', ['a/**'], 'ab/c', false, 'a/** needs the slash'],
  ['.', ['a**'], 'ab/c', true, 'a** is a plain prefix'],
  ['.', ['a/**/b'], 'a/b', true, 'a/**/b with nothing between'],
  ['.', ['a/**/b'], 'a/x/y/b', true, 'a/**/b deep'],
  ['.', ['a**b'], 'axb', false, 'a**b needs a slash before b'],
  ['.', ['a**b'], 'ax/b', true, 'a**b across dirs'],
  ['.', ['a**b'], 'ab', true, 'a**b with nothing between'],
  ['.', ['*/**'], 'x/y', true, '*/** after a wildcard'],
  ['.', ['*/**'], 'x', false, '*/** needs a dir'],
  ['.', ['*.tf'], 'a\nb.tf', true, '* matches a newline'],
  ['.', ['**/*.tf'], 'a\nb/c.tf', false, '** as (.*/)? does not cross a newline'],
  ['.', ['**main.tf'], 'a\nb/main.tf', true, 'a plain suffix does'],
  ['.', ['^a'], '^a', true, '^ in an exact pattern is literal'],
  ['.', ['^a*'], 'abc', true, '^ in a regexp pattern anchors'],
  ['.', ['^a*'], '^abc', false, '^ in a regexp pattern is not a literal'],
  ['.', ['x^a*'], 'x^abc', false, '^ in the middle never matches'],
  ['.', ['a]'], 'a]', true, 'a lone ] is literal'],
  ['.', ['  *.tf  '], 'a.tf', true, 'spaces around are trimmed'],
  ['.', [' !*.tf', '*.md'], 'a.md', true, 'trim before the ! test'],
  ['.', ['*.tf', './!a.tf'], 'a.tf', false, './!a becomes !a: an exclusion'],
  ['.', ['*.tf', '!!a.tf'], 'a.tf', true, '!!x excludes the file named !x'],
  ['.', ['*.tf', '!!a.tf'], '!a.tf', false, '!!x excludes the file named !x (2)'],
  ['app', ['/abs/*.tf'], 'app/abs/x.tf', true, 'a leading / is joined under the project dir'],
  ['app', ['sub/'], 'app/sub/x', true, 'a trailing slash is cleaned away'],
  ['app', ['./sub/../x.tf'], 'app/x.tf', true, 'the pattern is cleaned'],
  ['.', ['é?.tf'], 'éü.tf', true, '? is one code point'],
  ['.', ['[à-ÿ].tf'], 'é.tf', true, 'non-ASCII ranges'],
  ['.', ['a/*/c'], 'a/b/c/d.tf', true, 'a parent dir matching'],
  ['.', ['a/*/c'], 'a/b/cd/e.tf', false, 'parent dirs match whole names'],
  ['.', ['*'], 'x/y/z', true, '* matches the first dir'],
  ['.', ['?'], 'ab/c', false, '? matches no dir of two chars'],
];

test('when_modified: the table of Atlantis v0.47 answers', () => {
  for (const [dir, patterns, file, want, why] of TABLE) {
    assert.equal(
      matchesWhenModified(dir, patterns, file),
      want,
      `${why}: dir ${dir} ${JSON.stringify(patterns)} on ${JSON.stringify(file)}`,
    );
  }
});

test('when_modified: patternmatcher shapes (string compares where it uses them)', () => {
  const shape = (p: string) => {
    const c = compilePattern(p);
    return 'problem' in c ? c.problem : c.shape;
  };
  assert.equal(shape('a/main.tf'), 'exact');
  assert.equal(shape('a/^b.tf'), 'exact');
  assert.equal(shape('modules/**'), 'prefix');
  assert.equal(shape('**/main.tf'), 'suffix');
  assert.equal(shape('**'), 'suffix');
  assert.equal(shape('**/*.tf'), 'regexp');
  assert.equal(shape('a]'), 'regexp');
});

// Patterns Atlantis refuses (patternmatcher.New fails) and ones this server refuses on
// purpose (RE2 would read them as something else or fail on them later).
const REFUSED: Array<[string, RegExp, string]> = [
  ['[a', /unclosed \[/, 'Atlantis: syntax error in pattern'],
  ['a\\', /trailing \\ escapes nothing/, 'Atlantis: syntax error in pattern'],
  ['[]a]', /empty \[\] or a range without its end/, 'Atlantis: syntax error in pattern'],
  ['[a-]', /empty \[\] or a range without its end/, 'Atlantis: syntax error in pattern'],
  ['[-a]', /"-" in \[...\]/, 'Atlantis: syntax error in pattern'],
  ['[z-a]', /range z-a is out of order/, 'Atlantis: RE2 compile error at match time'],
  ['[*]', /\* inside \[...\] is not supported/, 'Atlantis: rewritten into a broken RE2 class'],
  ['[?]', /\? inside \[...\] is not supported/, 'Atlantis: rewritten into a broken RE2 class'],
  ['[[:alpha:]]', /\[: inside/, 'Atlantis: an RE2 POSIX class'],
  ['\\d.tf', /\\d is not supported/, 'Atlantis: RE2 digit class'],
  ['\\é', /\\é is not supported/, 'Atlantis: RE2 compile error'],
  ['[a]*\\', /trailing \\ escapes nothing/, 'Atlantis: accepted by New, RE2 compile error later'],
];

test('when_modified: refused patterns say why, with their index', () => {
  for (const [p, re, why] of REFUSED) {
    const r = compilePatternList('.', ['**/*.tf', p]);
    assert.ok('problems' in r, `${p} should be refused (${why})`);
    assert.equal(r.problems[0]?.index, 1);
    assert.match(r.problems[0]?.message ?? '', re, why);
  }
  // `./!` cleans to a bare "!", which patternmatcher.New refuses.
  const bang = compilePatternList('.', ['./!']);
  assert.ok('problems' in bang);
  assert.match(bang.problems[0]?.message ?? '', /illegal exclusion pattern "!"/);
});

test('when_modified: Go path helpers behave as Go', () => {
  assert.equal(goClean(''), '.');
  assert.equal(goClean('a//b/./c/..'), 'a/b');
  assert.equal(goClean('../../x'), '../../x');
  assert.equal(goClean('a/../../x'), '../x');
  assert.equal(goClean('/../x/'), '/x');
  assert.equal(goJoin('.', ''), '.');
  assert.equal(goJoin('app', '/abs'), 'app/abs');
  assert.equal(goJoin('infra', '../modules/**'), 'modules/**');
  assert.equal(goDir('a/b/c.tf'), 'a/b');
  assert.equal(goDir('c.tf'), '.');
  assert.equal(goDir('/c.tf'), '/');
  // Go trims U+0085 and keeps U+FEFF; JavaScript's trim() does the opposite.
  assert.equal(goTrimSpace('\u0085 a \t'), 'a');
  assert.equal(goTrimSpace('\ufeffa'), '\ufeffa');
});

// ---- adversarial: linear time, bounded work -----------------------------------------------

/** The pattern of the report: `*a*a…*c` (each `*` once backtracked against every other). */
const PATHOLOGICAL = '*a'.repeat(30) + '*c';

test('when_modified: the pathological pattern on a 10k-char path takes linear work', () => {
  const list = compilePatternList('app', [PATHOLOGICAL]);
  assert.ok(!('problems' in list));
  // The old RegExp translation backtracked on this for minutes: a's then a c then one more char.
  const file = 'app/' + 'a'.repeat(10_000) + 'cx';
  const budget = new MatchBudget(Number.MAX_SAFE_INTEGER);
  const t0 = process.cpuUsage();
  assert.equal(listMatches(list, file, budget), false);
  const cpuMs = (process.cpuUsage(t0).user + process.cpuUsage(t0).system) / 1000;
  // Each char visits each of the ~95 instructions at most twice (closure, then step).
  assert.ok(budget.spent <= 10_010 * 2 * 95, `spent ${budget.spent} steps`);
  assert.ok(budget.spent > 10_000, 'the NFA did run over the whole path');
  assert.ok(cpuMs < 5_000, `took ${cpuMs} ms of CPU`);
  // The same path ending in c matches.
  assert.equal(listMatches(list, 'app/' + 'a'.repeat(10_000) + 'c', new MatchBudget()), true);
});

test('when_modified: work grows linearly with the path (property over seeded random patterns)', () => {
  let seed = 7;
  const rnd = (n: number) => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed % n;
  };
  const atoms = ['*', '**/', '?', 'a', '[a-c]', '[^/]', '/', '*a', 'b'];
  for (let k = 0; k < 200; k++) {
    let p = '';
    for (let j = 0, n = 1 + rnd(40); j < n; j++) p += atoms[rnd(atoms.length)];
    const list = compilePatternList('.', [p]);
    assert.ok(!('problems' in list), p);
    const item = list.items[0];
    if (item === undefined) continue; // the pattern cleaned to nothing
    const insts = item.pattern.shape === 'regexp' ? item.pattern.prog.insts.length : p.length;
    for (const len of [1_000, 4_000]) {
      let file = '';
      while (file.length < len) file += ['a', 'b', 'c', '/', 'ab/'][rnd(5)];
      const budget = new MatchBudget(Number.MAX_SAFE_INTEGER);
      listMatches(list, file, budget);
      // Steps per char are bounded by the instruction count: no path makes it worse.
      assert.ok(
        budget.spent <= (file.length + 2) * 3 * (insts + 2),
        `${p}: ${budget.spent} steps for ${file.length} chars, ${insts} insts`,
      );
    }
  }
});

test('when_modified: a budget stops matching that would take too long, with a clear error', () => {
  const patterns = Array.from(
    { length: 100 },
    (_, i) => ('*a'.repeat(500) + '*c').slice(0, MAX_WHEN_MODIFIED_PATTERN_LENGTH - 2) + `${i % 10}c`,
  );
  const list = compilePatternList('.', patterns);
  assert.ok(!('problems' in list));
  const file = 'a'.repeat(10_000) + 'c0cx';
  const budget = new MatchBudget(5_000_000);
  const t0 = process.cpuUsage();
  assert.throws(
    () => listMatches(list, file, budget),
    (e: unknown) => e instanceof MatchBudgetExceeded && /more than 5000000 steps/.test(e.message) && /-d\/-p/.test(e.message),
  );
  // It stops within one character's work of one pattern (~1000 instructions) past the limit.
  assert.ok(budget.spent <= 5_000_000 + 3 * 1_024, `spent ${budget.spent}`);
  const cpuMs = (process.cpuUsage(t0).user + process.cpuUsage(t0).system) / 1000;
  assert.ok(cpuMs < 10_000, `took ${cpuMs} ms of CPU`);
});

test('when_modified: many files x many projects: every pattern tried is charged, the result stays right', () => {
  const yaml =
    'version: 3\nprojects:\n' +
    Array.from(
      { length: 200 },
      (_, i) =>
        `- dir: stacks/s${i}\n  autoplan:\n    when_modified: ["**/*.tf*", "../../modules/net/**/*.tf", "!test/**", "config/*.yaml"]\n`,
    ).join('');
  const cfg = parseRepoConfig(yaml);
  // Mostly files no project cares about, then one file of s199.
  const files = [...Array.from({ length: 1_000 }, (_, i) => `docs/area${i}/README.md`), 'stacks/s199/main.tf'];
  const budget = new MatchBudget(Number.MAX_SAFE_INTEGER);
  assert.deepEqual(
    projectsForChangedFiles(cfg, files, { budget }).map((p) => p.dir),
    ['stacks/s199'],
  );
  // 200 projects x 1001 files x 3 includes tried; string compares and prefilters are cheap.
  assert.ok(budget.spent >= 200 * 1_000 * 3, `spent ${budget.spent}`);
  assert.ok(budget.spent <= 200 * 1_001 * 3 * 4, `spent ${budget.spent}`);
  // The same decision under a budget too small for it fails with the budget's error.
  assert.throws(() => projectsForChangedFiles(cfg, files, { budget: new MatchBudget(100_000) }), MatchBudgetExceeded);
});
