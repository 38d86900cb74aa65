// Table tests of the pure decisions on PR-supplied terraform arguments and plan files:
// the blocked-flag rule (Atlantis's --blocked-extra-args semantics plus the flags the server
// sets), file arguments, every terraform flag a PR can pass (against terraform's own -help and
// docs/terraform-args.md), plan file names and the plan hash check.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it, test } from 'node:test';
import {
  ATLANTIS_BLOCKED_EXTRA_ARGS,
  DEFAULT_BLOCKED_EXTRA_ARGS,
  effectiveBlocked,
  firstBlockedArg,
  isInside,
  pathArgs,
  pathOutsideMessage,
} from '../src/server/workflow/comment-parser/extra-args.js';
import { TERRAFORM_FLAGS, type TerraformCommand } from '../src/server/workflow/comment-parser/terraform-flags.js';
import { TERRAFORM } from './support/terraform.js';
import { planFileName, planFileProblem } from '../src/server/locks/plan-file.js';

test("the default list is Atlantis's plus the server-set flags, each in both dash forms", () => {
  assert.deepEqual(ATLANTIS_BLOCKED_EXTRA_ARGS, ['-chdir', '--chdir', '-plugin-dir', '--plugin-dir']);
  for (const f of ['out', 'input', 'state', 'state-out', 'backup']) {
    assert.ok(DEFAULT_BLOCKED_EXTRA_ARGS.includes(`-${f}`) && DEFAULT_BLOCKED_EXTRA_ARGS.includes(`--${f}`), f);
  }
});

test('firstBlockedArg: exact flag or flag= (Atlantis), server-set flags whatever is configured', () => {
  const cases: { args: string[]; configured: string[]; want: string | undefined }[] = [
    { args: ['-out=/data/plans/x.tfplan'], configured: [], want: '-out=/data/plans/x.tfplan' },
    { args: ['--out=x'], configured: [], want: '--out=x' },
    { args: ['-out', 'x'], configured: [], want: '-out' },
    { args: ['--out', 'x'], configured: [...ATLANTIS_BLOCKED_EXTRA_ARGS], want: '--out' },
    { args: ['-input=true'], configured: [], want: '-input=true' },
    { args: ['-input'], configured: [], want: '-input' },
    { args: ['-state=/x'], configured: [], want: '-state=/x' },
    { args: ['-state-out', '/x'], configured: [], want: '-state-out' },
    { args: ['--backup=/x'], configured: [], want: '--backup=/x' },
    { args: ['-chdir=..'], configured: [], want: '-chdir=..' },
    { args: ['-target=a.out', '-outx', '-output=1', '-stateful'], configured: [], want: undefined },
    { args: ['-plugin-dir=/x'], configured: [], want: undefined },
    { args: ['-plugin-dir=/x'], configured: [...DEFAULT_BLOCKED_EXTRA_ARGS], want: '-plugin-dir=/x' },
    { args: ['-lock=false'], configured: ['-lock'], want: '-lock=false' },
    { args: ['-lock-timeout=5s'], configured: ['-lock'], want: undefined },
    { args: ['-refresh=false', '-OUT=x'], configured: [], want: undefined }, // Go flags are case-sensitive: terraform refuses -OUT itself
    { args: ['x', '--', '-out=y'], configured: [], want: '-out=y' },
    { args: [], configured: [''], want: undefined },
  ];
  for (const c of cases) assert.equal(firstBlockedArg(c.args, effectiveBlocked(c.configured)), c.want, JSON.stringify(c));
});

test('pathArgs: file-valued flags in every spelling; -var and backend key=value are not files', () => {
  const cases: { args: string[]; want: [string, string][] }[] = [
    { args: ['-var-file=a.tfvars'], want: [['var-file', 'a.tfvars']] },
    { args: ['--var-file=../x'], want: [['var-file', '../x']] },
    { args: ['-var-file', '/proc/self/environ'], want: [['var-file', '/proc/self/environ']] },
    {
      args: ['--var-file', 'x', '-var-file=y'],
      want: [
        ['var-file', 'x'],
        ['var-file', 'y'],
      ],
    },
    { args: ['-generate-config-out=g.tf'], want: [['generate-config-out', 'g.tf']] },
    { args: ['-backend-config=/etc/backend.hcl'], want: [['backend-config', '/etc/backend.hcl']] },
    { args: ['-backend-config=bucket=x'], want: [] },
    { args: ['-var=path=/etc/passwd', '-var', 'x=/y'], want: [] },
    { args: ['-var-file'], want: [] },
    { args: ['-var-files=x', 'var-file=x'], want: [] },
  ];
  for (const c of cases)
    assert.deepEqual(
      pathArgs(c.args).map((p) => [p.flag, p.value]),
      c.want,
      JSON.stringify(c),
    );
  assert.equal(pathArgs(['-var-file', '/x'])[0]?.arg, '-var-file /x');
});

test('isInside is by whole path segments', () => {
  const cases: [string, string, boolean][] = [
    ['/d/repos/1', '/d/repos/1', true],
    ['/d/repos/1', '/d/repos/1/app/x.tfvars', true],
    ['/d/repos/1/', '/d/repos/1/a', true],
    ['/d/repos/1', '/d/repos/10/a', false],
    ['/d/repos/1', '/d/repos', false],
    ['/d/repos/1', '/proc/self/environ', false],
  ];
  for (const [root, p, want] of cases) assert.equal(isInside(root, p), want, `${root} ${p}`);
});

test('planFileName is unique per (project, dir, workspace), one path segment, bounded', () => {
  const tuples: [string, string, string | undefined][] = [
    ['app1', 'default', undefined],
    ['app1', 'default', 'a'],
    ['app1', 'default', 'b'],
    ['a/b', 'default', undefined],
    ['a__b', 'default', undefined],
    ['a-b', 'default', undefined],
    ['x-y', 'z', undefined],
    ['x', 'y-z', undefined], // collided before: both `x-y-z.tfplan`
    ['a.b', 'c', undefined],
    ['a', 'b.c', undefined],
    ['.', 'default', undefined],
    ['_root', 'default', undefined],
    ['a%2Fb', 'default', undefined],
    ['a', 'b', 'c'],
    ['ü', 'default', undefined],
    ['..', 'x', undefined],
    ['d'.repeat(300), 'default', undefined],
    ['d'.repeat(301), 'default', undefined],
  ];
  const names = tuples.map(([d, w, p]) => planFileName(d, w, p));
  assert.equal(new Set(names).size, names.length, names.join('\n'));
  for (const n of names) {
    assert.ok(!n.includes('/') && n !== '..' && n.length <= 255 && n.endsWith('.tfplan'), n);
  }
  assert.equal(planFileName('envs/prod', 'default', 'prod'), 'envs%2Fprod.default.prod.tfplan');
  assert.equal(planFileName('.', 'default'), '%2E.default.tfplan');
  assert.equal(planFileName('app1', 'default'), 'app1.default.tfplan');
});

test('planFileProblem: only the file hashed at plan time is applied', () => {
  const base = { dir: 'app1', workspace: 'default', project: undefined as string | undefined };
  const cases: { recorded: string | undefined; actual: string | undefined; want: RegExp | undefined }[] = [
    { recorded: 'aa', actual: 'aa', want: undefined },
    {
      recorded: 'aa',
      actual: 'bb',
      want: /changed after it was planned .*nothing was applied: comment `atlantis plan -d app1 -w default` to plan again/,
    },
    { recorded: 'aa', actual: undefined, want: /plan file of this project is missing; nothing was applied/ },
    { recorded: undefined, actual: 'aa', want: /saved without a hash of its plan file, so it cannot be verified; nothing was applied/ },
    { recorded: undefined, actual: undefined, want: undefined },
  ];
  for (const c of cases) {
    const got = planFileProblem({ ...base, planSha256: c.recorded }, c.actual, 'atlantis');
    if (c.want === undefined) assert.equal(got, undefined, JSON.stringify(c));
    else assert.match(got ?? '', c.want, JSON.stringify(c));
  }
  assert.match(planFileProblem({ ...base, project: 'prod', planSha256: 'a' }, 'b', 'run') ?? '', /comment `run plan -p prod`/);
});

// The reviewed flag table (terraform-flags.ts): every rule, in every spelling Go's flag
// package takes, through the same two decisions the comment parser and the checkout use.
describe('every terraform flag a PR can pass gets its reviewed rule', () => {
  const decide = (args: string[], configured: readonly string[] = DEFAULT_BLOCKED_EXTRA_ARGS): string => {
    if (firstBlockedArg(args, effectiveBlocked(configured)) !== undefined) return 'refused';
    return pathArgs(args).length > 0 ? 'path' : 'allowed';
  };
  const spellings = (name: string): string[][] => [[`-${name}=x`], [`--${name}=x`], [`-${name}`, 'x'], [`--${name}`, 'x']];
  for (const f of TERRAFORM_FLAGS) {
    it(`-${f.name} (${f.rule})`, () => {
      for (const args of spellings(f.name)) {
        const got = decide(args);
        const gotUnblocked = decide(args, []);
        if (f.rule === 'server-set' || f.rule === 'refused') assert.deepEqual([got, gotUnblocked], ['refused', 'refused'], args.join(' '));
        else if (f.rule === 'blocked') assert.deepEqual([got, gotUnblocked], ['refused', 'allowed'], args.join(' '));
        else if (f.rule === 'path') assert.deepEqual([got, gotUnblocked], ['path', 'path'], args.join(' '));
        else assert.deepEqual([got, gotUnblocked], ['allowed', 'allowed'], args.join(' '));
      }
    });
  }

  it('import -config, in both dash forms, is a path (a dir) and an absolute one reads outside', () => {
    for (const args of [['-config=/etc'], ['--config=/etc'], ['-config', '/etc'], ['--config', '/etc']]) {
      const [p] = pathArgs(args);
      assert.deepEqual([p?.flag, p?.value], ['config', '/etc'], args.join(' '));
      assert.match(pathOutsideMessage(p!), /config must name a dir inside this pull request's checkout$/);
    }
    assert.match(pathOutsideMessage(pathArgs(['-var-file=/x'])[0]!), /var-file must name a file inside/);
  });

  // Terraform's own help, from the binary the tests run: a flag a new terraform adds fails
  // here until it is reviewed and put in the table.
  it("every flag terraform's <command> -help lists is in the table, for that command", () => {
    const commands: TerraformCommand[] = ['plan', 'apply', 'import', 'state rm', 'init', 'show', 'version'];
    for (const command of commands) {
      const r = spawnSync(TERRAFORM, [...command.split(' '), '-help'], {
        encoding: 'utf8',
        env: { ...process.env, TF_CLI_CONFIG_FILE: '/dev/null', CHECKPOINT_DISABLE: '1' },
      });
      const help = `${r.stdout}${r.stderr}`;
      const listed = [...help.matchAll(/^\s+-([a-z][a-z-]*)/gm)].map((m) => m[1] as string);
      assert.ok(listed.length > 0, `${command} -help listed no flag:\n${help}`);
      for (const name of listed) {
        const row = TERRAFORM_FLAGS.find((f) => f.name === name);
        assert.ok(row?.commands.includes(command), `terraform ${command} -${name} is not reviewed in terraform-flags.ts`);
      }
    }
  });

  it('docs/terraform-args.md has one row per flag, with its subcommands and rule', () => {
    const doc = readFileSync(path.join(import.meta.dirname, '..', 'docs', 'terraform-args.md'), 'utf8');
    const words: Record<string, string> = {
      'refused: the server sets it': 'server-set',
      refused: 'refused',
      'blocked by default': 'blocked',
      'path: must be inside the checkout': 'path',
      allowed: 'allowed',
    };
    const rows = [...doc.matchAll(/^\| `-([a-z-]+)` \| ([^|]+) \| [^\n]* \| ([^|]+) \|$/gm)].map((m) => ({
      name: m[1] as string,
      commands: (m[2] as string).trim() === '(global)' ? [] : (m[2] as string).split(',').map((c) => c.trim()),
      rule: words[(m[3] as string).trim()],
    }));
    assert.deepEqual(
      rows,
      TERRAFORM_FLAGS.map((f) => ({ name: f.name, commands: [...f.commands], rule: f.rule })),
    );
  });
});
