// Table-driven tests of the Atlantis comment grammar, plus property tests.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { type ParseOptions, type ParsedCommand, parseComment } from '../src/server/workflow/comment-parser/index.js';
import { RUNNABLE_COMMANDS } from '../src/server/workflow/comment-parser/commands.js';
import { dirTargets, globMatch, isValidGlob } from '../src/server/workflow/go-compat/dir-glob.js';
import { shellSplit } from '../src/server/workflow/go-compat/shell-split.js';
import {
  DID_YOU_MEAN_COMMENT,
  UNLOCK_USAGE,
  buildApplyComment,
  buildPlanComment,
  flagUsages,
  helpComment,
} from '../src/server/workflow/comment-parser/usage.js';
import { cleanedRepoDir } from '../src/server/workflow/go-compat/repo-dir.js';

const OPTS: ParseOptions = {
  executableName: 'atlantis',
  vcsUser: 'atlantis-bot',
  allowCommands: ['version', 'plan', 'apply', 'unlock'],
  blockedExtraArgs: ['-chdir', '--chdir', '-plugin-dir', '--plugin-dir'],
};
const ALL: ParseOptions = { ...OPTS, allowCommands: [...RUNNABLE_COMMANDS] };

// Exactly Atlantis's texts (comment_parser_test.go), with "a repo config file".
const PLAN_USAGE = `  -d, --dir string         Which directory to run plan in relative to root of repo,
                           ex. 'child/dir'.
  -p, --project string     Which project to run plan for. Refers to the name of the
                           project configured in a repo config file. Cannot be used
                           at same time as workspace or dir flags.
      --verbose            Append Atlantis log to comment.
  -w, --workspace string   Switch to this Terraform workspace before planning.
`;
const APPLY_USAGE = `      --auto-merge-disabled        Disable automerge after apply.
      --auto-merge-method string   Specifies the merge method for the VCS if
                                   automerge is enabled. (Currently only implemented
                                   for GitHub)
  -d, --dir string                 Apply the plan for this directory, relative to
                                   root of repo, ex. 'child/dir'.
  -p, --project string             Apply the plan for this project. Refers to the
                                   name of the project configured in a repo config
                                   file. Cannot be used at same time as workspace or
                                   dir flags.
      --verbose                    Append Atlantis log to comment.
  -w, --workspace string           Apply the plan for this Terraform workspace.
`;

const err = (msg: string, cmd: string, usage: string): string => '```\nError: ' + msg + '.\nUsage of ' + cmd + ':\n' + usage + '```';

test('usage tables match pflag output byte for byte', () => {
  assert.equal(flagUsages('plan'), PLAN_USAGE);
  assert.equal(flagUsages('apply'), APPLY_USAGE);
  assert.equal(flagUsages('unlock'), '');
});

type Expect = { ignore: true } | { reply: string | RegExp } | { cmd: Partial<ParsedCommand> };

interface Case {
  c: string;
  e: Expect;
  o?: ParseOptions;
}

const unknownCmd = (cmd: string, list = 'version, plan, apply, unlock'): string =>
  '```\nError: unknown command ' +
  JSON.stringify(cmd) +
  ".\nRun 'atlantis --help' for usage.\nAvailable commands(--allow-commands): " +
  list +
  '\n```';

const cases: Case[] = [
  // ignored
  { c: '', e: { ignore: true } },
  { c: '   ', e: { ignore: true } },
  { c: 'lgtm', e: { ignore: true } },
  { c: 'please atlantis plan', e: { ignore: true } },
  { c: 'atlantis plan\nmore text', e: { ignore: true } },
  { c: 'atlantis plan\r\nsecond', e: { ignore: true } },
  { c: 'hello\natlantis plan', e: { ignore: true } },
  { c: '@someone-else plan', e: { ignore: true } },
  { c: 'Atlantis plan', e: { cmd: { name: 'plan' } } },
  { c: 'atlas plan', e: { ignore: true } },
  // trailing newlines (copy/paste from GitHub) still parse
  { c: 'atlantis plan\n\n', e: { cmd: { name: 'plan' } } },
  { c: '  atlantis plan  ', e: { cmd: { name: 'plan' } } },
  // executable names
  { c: 'run plan', e: { cmd: { name: 'plan' } } },
  { c: '@atlantis-bot plan', e: { cmd: { name: 'plan' } } },
  { c: 'atlantis apply', e: { cmd: { name: 'apply' } } },
  { c: 'tf plan', o: { ...OPTS, executableName: 'tf' }, e: { cmd: { name: 'plan' } } },
  { c: 'atlantis plan', o: { ...OPTS, executableName: 'infra' }, e: { ignore: true } },
  // did you mean
  { c: 'terraform plan', e: { reply: DID_YOU_MEAN_COMMENT('atlantis', 'terraform') } },
  { c: 'terraform', e: { reply: 'Did you mean to use `atlantis` instead of `terraform`?' } },
  { c: 'atlantas plan', e: { reply: 'Did you mean to use `atlantis` instead of `atlantas`?' } },
  { c: 'atlants apply', e: { reply: 'Did you mean to use `atlantis` instead of `atlants`?' } },
  // help
  { c: 'atlantis', e: { reply: helpComment('atlantis', ['version', 'plan', 'apply', 'unlock']) } },
  { c: 'atlantis help', e: { reply: helpComment('atlantis', ['version', 'plan', 'apply', 'unlock']) } },
  { c: 'atlantis -h', e: { reply: /^```cmake\natlantis\nTerraform Pull Request Automation/ } },
  { c: 'atlantis --help', e: { reply: /help for atlantis/ } },
  { c: 'run help', e: { reply: /Commands:/ } },
  { c: 'atlantis plan --help', e: { reply: '```\nUsage of plan:\n' + PLAN_USAGE + '\n```' } },
  { c: 'atlantis apply -h', e: { reply: '```\nUsage of apply:\n' + APPLY_USAGE + '\n```' } },
  { c: 'atlantis import -h', o: ALL, e: { reply: /^```\nUsage of import ADDRESS ID:\n/ } },
  // unknown command / not allowed
  { c: 'atlantis foo', e: { reply: unknownCmd('foo') } },
  { c: 'atlantis Plan', e: { cmd: { name: 'plan' } } },
  { c: 'atlantis import a b', e: { reply: unknownCmd('import') } },
  { c: 'atlantis state rm a', e: { reply: unknownCmd('state') } },
  { c: 'atlantis apply', o: { ...OPTS, allowCommands: ['plan'] }, e: { reply: unknownCmd('apply', 'plan') } },
  { c: 'atlantis approve_policies', e: { reply: unknownCmd('approve_policies') } },
  // shell parsing
  { c: 'atlantis plan -d "unterminated', e: { reply: '```\nError parsing command: EOF found when expecting closing quote\n```' } },
  { c: "atlantis plan -d 'a b'", e: { cmd: { dir: 'a b' } } },
  { c: 'atlantis plan -d "x y" -- -var "a=b c"', e: { cmd: { dir: 'x y', extraArgs: ['-var', 'a=b c'] } } },
  { c: "atlantis plan -- -var 'foo=$(rm -rf /)'", e: { cmd: { extraArgs: ['-var', 'foo=$(rm -rf /)'] } } },
  // flags
  { c: 'atlantis plan -d dir', e: { cmd: { name: 'plan', dir: 'dir', workspace: undefined, project: undefined, verbose: false } } },
  { c: 'atlantis plan --dir dir/sub', e: { cmd: { dir: 'dir/sub' } } },
  { c: 'atlantis plan --dir=dir', e: { cmd: { dir: 'dir' } } },
  { c: 'atlantis plan -ddir', e: { cmd: { dir: 'dir' } } },
  { c: 'atlantis plan -d=dir', e: { cmd: { dir: 'dir' } } },
  { c: 'atlantis plan -d .', e: { cmd: { dir: '.' } } },
  { c: 'atlantis plan -d ./a//b/', e: { cmd: { dir: 'a/b' } } },
  { c: 'atlantis plan -d a/../b', e: { cmd: { dir: 'b' } } },
  { c: 'atlantis plan -d /', e: { cmd: { dir: '.' } } },
  { c: 'atlantis plan -d /a/b', e: { cmd: { dir: 'a/b' } } },
  { c: 'atlantis plan -d /../../etc', e: { cmd: { dir: 'etc' } } },
  { c: 'atlantis plan -w staging', e: { cmd: { workspace: 'staging', dir: undefined } } },
  { c: 'atlantis plan --workspace=staging -d x', e: { cmd: { workspace: 'staging', dir: 'x' } } },
  { c: 'atlantis plan -w a-b_c.d~e', e: { cmd: { workspace: 'a-b_c.d~e' } } },
  { c: 'atlantis plan -p myproj', e: { cmd: { project: 'myproj' } } },
  { c: 'atlantis plan --project=myproj --verbose', e: { cmd: { project: 'myproj', verbose: true } } },
  { c: 'atlantis plan --verbose -- -target=x', e: { cmd: { verbose: true, extraArgs: ['-target=x'] } } },
  { c: 'atlantis plan -- -var a=b -target x', e: { cmd: { extraArgs: ['-var', 'a=b', '-target', 'x'] } } },
  { c: 'atlantis plan --', e: { cmd: { extraArgs: [] } } },
  { c: 'atlantis plan -d dir -- -d other', e: { cmd: { dir: 'dir', extraArgs: ['-d', 'other'] } } },
  { c: 'atlantis apply --auto-merge-disabled', e: { cmd: { name: 'apply', autoMergeDisabled: true } } },
  { c: 'atlantis apply -d x -w y --verbose', e: { cmd: { name: 'apply', dir: 'x', workspace: 'y', verbose: true } } },
  { c: 'atlantis apply --verbose=false', e: { cmd: { verbose: false } } },
  { c: 'atlantis version', e: { cmd: { name: 'version', extraArgs: [], args: [] } } },
  { c: 'atlantis version -p x', e: { cmd: { name: 'version', project: 'x' } } },
  { c: 'atlantis unlock', e: { cmd: { name: 'unlock' } } },
  // import / state with allow-commands
  { c: 'atlantis import ADDR ID', o: ALL, e: { cmd: { name: 'import', args: ['ADDR', 'ID'], extraArgs: [] } } },
  {
    c: 'atlantis import -d x ADDR ID -- -var a=b',
    o: ALL,
    e: { cmd: { name: 'import', dir: 'x', args: ['ADDR', 'ID'], extraArgs: ['-var', 'a=b'] } },
  },
  { c: 'atlantis import ADDR', o: ALL, e: { reply: /^```\nError: unknown argument\(s\) – ADDR\.\nUsage of import ADDRESS ID:\n/ } },
  { c: 'atlantis state rm a.b c.d', o: ALL, e: { cmd: { name: 'state', subName: 'rm', args: ['a.b', 'c.d'] } } },
  { c: 'atlantis state', o: ALL, e: { reply: /^```\nError: subcommand required\.\nUsage of state:\n/ } },
  { c: 'atlantis state mv a b', o: ALL, e: { reply: /^```\nError: invalid subcommand mv \(not rm\)\.\n/ } },
  { c: 'atlantis state rm', o: ALL, e: { reply: /^```\nError: unknown argument\(s\) – \.\n/ } },
  // errors with usage
  { c: 'atlantis plan --foo', e: { reply: err('unknown flag: --foo', 'plan', PLAN_USAGE) } },
  { c: 'atlantis plan -x', e: { reply: err("unknown shorthand flag: 'x' in -x", 'plan', PLAN_USAGE) } },
  { c: 'atlantis apply --auto-merge-disabledd', e: { reply: err('unknown flag: --auto-merge-disabledd', 'apply', APPLY_USAGE) } },
  { c: 'atlantis plan --auto-merge-disabled', e: { reply: err('unknown flag: --auto-merge-disabled', 'plan', PLAN_USAGE) } },
  { c: 'atlantis plan -d', e: { reply: err("flag needs an argument: 'd' in -d", 'plan', PLAN_USAGE) } },
  { c: 'atlantis plan --dir', e: { reply: err('flag needs an argument: --dir', 'plan', PLAN_USAGE) } },
  { c: 'atlantis plan ---dir x', e: { reply: err('bad flag syntax: ---dir', 'plan', PLAN_USAGE) } },
  { c: 'atlantis plan --verbose=maybe', e: { reply: /^```\nError: invalid argument "maybe" for "--verbose" flag/ } },
  { c: 'atlantis plan extra', e: { reply: err('unknown argument(s) – extra', 'plan', PLAN_USAGE) } },
  { c: 'atlantis plan a b -- c', e: { reply: err('unknown argument(s) – a b', 'plan', PLAN_USAGE) } },
  { c: 'atlantis apply -d ..', e: { reply: err('using a relative path ".." with -d/--dir is not allowed', 'apply', APPLY_USAGE) } },
  {
    c: 'atlantis plan -d ../other',
    e: { reply: err('using a relative path "../other" with -d/--dir is not allowed', 'plan', PLAN_USAGE) },
  },
  {
    c: 'atlantis plan -d a/../../b',
    e: { reply: err('using a relative path "a/../../b" with -d/--dir is not allowed', 'plan', PLAN_USAGE) },
  },
  { c: 'atlantis plan -d ./..', e: { reply: /relative path "\.\/\.\." with -d\/--dir is not allowed/ } },
  { c: 'atlantis plan -w ../../etc', e: { reply: err(`invalid workspace "../../etc": cannot contain '/' or '\\'`, 'plan', PLAN_USAGE) } },
  { c: 'atlantis plan -w a/b', e: { reply: err(`invalid workspace "a/b": cannot contain '/' or '\\'`, 'plan', PLAN_USAGE) } },
  { c: 'atlantis plan -w ..', e: { reply: err(`invalid workspace "..": cannot contain '..'`, 'plan', PLAN_USAGE) } },
  { c: 'atlantis plan -w .', e: { reply: err(`invalid workspace ".": cannot be '.'`, 'plan', PLAN_USAGE) } },
  {
    c: 'atlantis plan -w "a b"',
    e: { reply: err('invalid workspace "a b": cannot contain whitespace or control characters', 'plan', PLAN_USAGE) },
  },
  { c: 'atlantis plan -w a%2Fb', e: { cmd: { workspace: 'a%2Fb' } } },
  { c: 'atlantis plan -w a,b', e: { cmd: { workspace: 'a,b' } } },
  {
    c: 'atlantis plan -p proj -d dir',
    e: { reply: err('cannot use -p/--project at same time as -d/--dir or -w/--workspace', 'plan', PLAN_USAGE) },
  },
  {
    c: 'atlantis apply -p proj -w ws',
    e: { reply: err('cannot use -p/--project at same time as -d/--dir or -w/--workspace', 'apply', APPLY_USAGE) },
  },
  { c: 'atlantis plan -p proj -d .', e: { reply: /cannot use -p\/--project/ } },
  // --blocked-extra-args: Atlantis's rule (the flag, or the flag followed by `=`) and text.
  { c: 'atlantis plan -- -chdir=/tmp', e: { reply: err('flag "-chdir=/tmp" is not allowed in extra args', 'plan', PLAN_USAGE) } },
  { c: 'atlantis plan -- -chdir /tmp', e: { reply: /Error: flag "-chdir" is not allowed in extra args\./ } },
  { c: 'atlantis plan -- --chdir=x', e: { reply: /flag "--chdir=x" is not allowed in extra args/ } },
  {
    c: 'atlantis apply -- -plugin-dir=/x',
    e: { reply: /^```\nError: flag "-plugin-dir=\/x" is not allowed in extra args\.\nUsage of apply:\n/ },
  },
  { c: 'atlantis plan -- --plugin-dir /x', e: { reply: /flag "--plugin-dir" is not allowed in extra args/ } },
  { c: 'atlantis plan -- -chdirx', e: { cmd: { extraArgs: ['-chdirx'] } } },
  {
    c: 'atlantis plan -- -lock=false',
    o: { ...OPTS, blockedExtraArgs: ['-lock'] },
    e: { reply: /flag "-lock=false" is not allowed in extra args/ },
  },
  { c: 'atlantis plan -- -lock=false', o: { ...OPTS, blockedExtraArgs: [] }, e: { cmd: { extraArgs: ['-lock=false'] } } },
  { c: 'atlantis plan -- -plugin-dir=x', o: { ...OPTS, blockedExtraArgs: [] }, e: { cmd: { extraArgs: ['-plugin-dir=x'] } } },
  { c: 'atlantis import -chdir=x ID', o: ALL, e: { reply: /unknown shorthand flag: 'c' in -chdir=x/ } },
  { c: 'atlantis import -- -chdir=x ADDR ID', o: ALL, e: { reply: /unknown argument\(s\)/ } },
  { c: 'atlantis import ADDR ID -- -chdir=x', o: ALL, e: { reply: /flag "-chdir=x" is not allowed in extra args/ } },
  // Flags the server sets itself are refused in every spelling, whatever --blocked-extra-args says.
  ...[OPTS, { ...OPTS, blockedExtraArgs: [] }].flatMap((o): Case[] => [
    {
      c: 'atlantis plan -d app2 -- -out=/data/plans/acme/infra/1/app1.tfplan',
      o,
      e: { reply: /flag "-out=\/data\/plans\/acme\/infra\/1\/app1.tfplan" is not allowed in extra args/ },
    },
    { c: 'atlantis plan -- --out=../../x', o, e: { reply: /flag "--out=..\/..\/x" is not allowed in extra args/ } },
    { c: 'atlantis plan -- -out x', o, e: { reply: /flag "-out" is not allowed in extra args/ } },
    { c: 'atlantis plan -- --out x', o, e: { reply: /flag "--out" is not allowed in extra args/ } },
    { c: 'atlantis plan -- -input=true', o, e: { reply: /flag "-input=true" is not allowed in extra args/ } },
    { c: 'atlantis plan -- --input', o, e: { reply: /flag "--input" is not allowed in extra args/ } },
    { c: 'atlantis plan -- -state=other.tfstate', o, e: { reply: /flag "-state=other.tfstate" is not allowed/ } },
    { c: 'atlantis plan -- -state-out x', o, e: { reply: /flag "-state-out" is not allowed/ } },
    { c: 'atlantis apply -- --backup=/tmp/b', o, e: { reply: /flag "--backup=\/tmp\/b" is not allowed/ } },
    { c: 'atlantis plan -- -chdir=..', o, e: { reply: /flag "-chdir=.." is not allowed/ } },
  ]),
  { c: 'atlantis plan -- -target=terraform_data.out -outx', e: { cmd: { extraArgs: ['-target=terraform_data.out', '-outx'] } } },
  // File arguments: absolute paths can only be outside the checkout (relative ones are resolved at run time).
  {
    c: 'atlantis plan -d network -- -var-file=/proc/self/environ',
    e: {
      reply: err(
        'flag "-var-file=/proc/self/environ" is not allowed in extra args: var-file must name a file inside this pull request\'s checkout',
        'plan',
        PLAN_USAGE,
      ),
    },
  },
  { c: 'atlantis plan -- --var-file /etc/passwd', e: { reply: /flag "--var-file \/etc\/passwd" is not allowed in extra args/ } },
  { c: 'atlantis plan -- -generate-config-out=/tmp/g.tf', e: { reply: /flag "-generate-config-out=\/tmp\/g.tf" is not allowed/ } },
  {
    c: 'atlantis plan -- -var-file=env/staging.tfvars -var-file ../common.tfvars',
    e: { cmd: { extraArgs: ['-var-file=env/staging.tfvars', '-var-file', '../common.tfvars'] } },
  },
  { c: 'atlantis plan -- -var=path=/etc/passwd', e: { cmd: { extraArgs: ['-var=path=/etc/passwd'] } } },
  // shlex (google/shlex) rules, not POSIX: `#` starts a comment at a word's start only, a
  // backslash in double quotes escapes any character, only space/tab/CR/LF separate.
  { c: 'atlantis plan # just checking', e: { cmd: { name: 'plan', extraArgs: [] } } },
  { c: 'atlantis # plan', e: { reply: helpComment('atlantis', ['version', 'plan', 'apply', 'unlock']) } },
  { c: 'atlantis plan -d a#b', e: { cmd: { dir: 'a#b' } } },
  { c: 'atlantis plan -- -var "a=\\x"', e: { cmd: { extraArgs: ['-var', 'a=x'] } } },
  { c: 'atlantis plan -- -var "a=\\\\"', e: { cmd: { extraArgs: ['-var', 'a=\\'] } } },
  { c: "atlantis plan -- -var 'a=\\x'", e: { cmd: { extraArgs: ['-var', 'a=\\x'] } } },
  { c: 'atlantis plan -- -var ""', e: { cmd: { extraArgs: ['-var', ''] } } },
  { c: 'atlantis plan -d "a\\', e: { reply: '```\nError parsing command: EOF found after escape character\n```' } },
  { c: 'atlantis\u000bplan', e: { reply: helpComment('atlantis', ['version', 'plan', 'apply', 'unlock']) } },
  // pflag quirks: a shorthand group starting `test.` is skipped; unknown shorthands by byte.
  { c: 'atlantis plan -test.v', e: { cmd: { name: 'plan' } } },
  { c: 'atlantis plan -é', e: { reply: err("unknown shorthand flag: 'Ã' in -é", 'plan', PLAN_USAGE) } },
  {
    c: 'atlantis plan --verbose=ja',
    e: { reply: /^```\nError: invalid argument "ja" for "--verbose" flag: strconv.ParseBool: parsing "ja": invalid syntax\./ },
  },
  // Go's %q, not JSON: a control character is \x01, a non-breaking space \u00a0.
  { c: 'atlantis pl\u0001an', e: { reply: unknownCmd('pl\\x01an').replace('"pl\\\\x01an"', '"pl\\x01an"') } },
  { c: 'atlantis plan -w a\u00a0b', e: { reply: /invalid workspace "a\\u00a0b": cannot contain whitespace or control characters/ } },
  // -w rules of Atlantis v0.47.1 (its security fix): `.` would be the pull's own directory.
  { c: 'atlantis plan -w -x', e: { reply: /invalid workspace "-x": cannot start with '-'/ } },
  { c: 'atlantis plan -w a\\\\b', e: { reply: /invalid workspace "a\\\\b": cannot contain '\/' or '\\'/ } },
  { c: 'atlantis apply -w .', e: { reply: err(`invalid workspace ".": cannot be '.'`, 'apply', APPLY_USAGE) } },
  { c: 'atlantis plan -d ..x', e: { reply: /using a relative path "\.\.x" with -d\/--dir is not allowed/ } },
  // --auto-merge-method, cancel, approve_policies
  { c: 'atlantis apply --auto-merge-method squash', e: { cmd: { name: 'apply', autoMergeMethod: 'squash' } } },
  {
    c: 'atlantis apply --auto-merge-method squash --auto-merge-disabled',
    e: { reply: err('cannot use --auto-merge-method at the same time as --auto-merge-disabled', 'apply', APPLY_USAGE) },
  },
  { c: 'atlantis plan --auto-merge-method squash', e: { reply: /unknown flag: --auto-merge-method/ } },
  { c: 'atlantis cancel', o: ALL, e: { cmd: { name: 'cancel', extraArgs: [] } } },
  { c: 'ATLANTIS CANCEL', o: ALL, e: { cmd: { name: 'cancel' } } },
  { c: 'atlantis cancel -d .', o: ALL, e: { reply: "```\nError: unknown shorthand flag: 'd' in -d.\nUsage of cancel:\n```" } },
  { c: 'atlantis cancel now', o: ALL, e: { reply: '```\nError: unknown argument(s) – now.\nUsage of cancel:\n```' } },
  { c: 'atlantis cancel -h', o: ALL, e: { reply: '```\nUsage of cancel:\n\n```' } },
  { c: 'atlantis unlock -h', e: { reply: '```\nUsage of unlock:\n\n```' } },
  {
    c: 'atlantis approve_policies --policy-set ps --clear-policy-approval -d x',
    o: ALL,
    e: { cmd: { name: 'approve_policies', policySet: 'ps', clearPolicyApproval: true, dir: 'x' } },
  },
  // an executable name of our own: `atlantis` is ignored, no "did you mean" near it
  { c: 'infra plan', o: { ...OPTS, executableName: 'infra' }, e: { cmd: { name: 'plan' } } },
  { c: 'INFRA plan', o: { ...OPTS, executableName: 'infra' }, e: { cmd: { name: 'plan' } } },
  { c: 'infr plan', o: { ...OPTS, executableName: 'infra' }, e: { ignore: true } },
  { c: 'terraform plan', o: { ...OPTS, executableName: 'infra' }, e: { reply: DID_YOU_MEAN_COMMENT('infra', 'terraform') } },
  { c: 'ATLANTAS plan', e: { reply: DID_YOU_MEAN_COMMENT('atlantis', 'ATLANTAS') } },
  { c: '`atlantis plan -d dir`', e: { cmd: { name: 'plan', dir: 'dir' } } },
  // unlock: a flag gives the unlock usage, an argument the common error (as Atlantis)
  { c: 'atlantis unlock -d x', e: { reply: UNLOCK_USAGE('atlantis') } },
  { c: 'atlantis unlock now', e: { reply: '```\nError: unknown argument(s) – now.\nUsage of unlock:\n```' } },
  { c: 'atlantis unlock --verbose', e: { reply: /^`Usage of unlock:`\n\n ```cmake\natlantis unlock\n/ } },
];

test(`comment table (${cases.length} cases)`, async (t) => {
  assert.ok(cases.length >= 60);
  for (const tc of cases) {
    await t.test(JSON.stringify(tc.c), () => {
      const r = parseComment(tc.c, tc.o ?? OPTS);
      if ('ignore' in tc.e) {
        assert.deepEqual(r, { kind: 'ignore' });
      } else if ('reply' in tc.e) {
        assert.equal(r.kind, 'reply', JSON.stringify(r));
        if (r.kind !== 'reply') return;
        if (typeof tc.e.reply === 'string') assert.equal(r.body, tc.e.reply);
        else assert.match(r.body, tc.e.reply);
      } else {
        assert.equal(r.kind, 'command', JSON.stringify(r));
        if (r.kind !== 'command') return;
        for (const [k, v] of Object.entries(tc.e.cmd)) {
          assert.deepEqual((r.command as unknown as Record<string, unknown>)[k], v, `field ${k}`);
        }
      }
    });
  }
});

test('help reply is marked non-error, parse errors are errors', () => {
  const h = parseComment('atlantis help', OPTS);
  assert.equal(h.kind === 'reply' && h.error, false);
  const e = parseComment('atlantis plan --nope', OPTS);
  assert.equal(e.kind === 'reply' && e.error, true);
});

test('help lists only allowed commands and uses the executable name', () => {
  const h = helpComment('infra', ['plan']);
  assert.match(h, /infra plan -d \. -- -target=resource/);
  assert.doesNotMatch(h, /apply {4}Runs/);
  assert.doesNotMatch(h, /unlock {3}Removes/);
  assert.match(h, /Use "infra \[command\] --help"/);
  const all = helpComment('atlantis', ['version', 'plan', 'apply', 'unlock', 'import', 'state']);
  assert.match(all, /import ADDRESS ID\n/);
  assert.match(all, /state rm ADDRESS\.\.\.\n/);
  assert.ok(all.endsWith('\n```'));
});

test('buildPlanComment / buildApplyComment as Atlantis prints them', () => {
  assert.equal(buildApplyComment('atlantis', '.', 'default', undefined), 'atlantis apply -d .');
  assert.equal(buildApplyComment('atlantis', 'a/b', 'default', undefined), 'atlantis apply -d a/b');
  assert.equal(buildApplyComment('atlantis', '.', 'staging', undefined), 'atlantis apply -w staging');
  assert.equal(buildApplyComment('atlantis', 'x', 'staging', undefined), 'atlantis apply -d x -w staging');
  assert.equal(buildApplyComment('atlantis', 'x', 'staging', 'proj'), 'atlantis apply -p proj');
  assert.equal(buildApplyComment('atlantis', 'a b', 'default', undefined, true), 'atlantis apply -d "a b" --auto-merge-disabled');
  assert.equal(buildPlanComment('atlantis', 'x', 'default', undefined, ['-target=a']), 'atlantis plan -d x -- -target=a');
});

test('shellSplit and the -d rule (cleanedRepoDir from the root)', () => {
  assert.deepEqual(shellSplit(`a 'b c' "d \\" e" f\\ g`), ['a', 'b c', 'd " e', 'f g']);
  assert.throws(() => shellSplit('a\\'));
  assert.equal(cleanedRepoDir('a/./b/../c', 'from-root'), 'a/c');
  assert.equal(cleanedRepoDir('..', 'from-root'), undefined);
  assert.equal(cleanedRepoDir('/..', 'from-root'), '.');
});

// ---- properties --------------------------------------------------------------------

const tokens = fc.constantFrom(
  'atlantis',
  'run',
  '@atlantis-bot',
  'plan',
  'apply',
  'unlock',
  'version',
  'import',
  'state',
  'rm',
  'help',
  '-d',
  '--dir',
  '-w',
  '--workspace',
  '-p',
  '--project',
  '--verbose',
  '--auto-merge-disabled',
  '--',
  '-h',
  '..',
  '../..',
  '/',
  '/etc',
  'a/b',
  '.',
  'x',
  '-chdir=/',
  '"',
  "'",
  '\\',
  '-d=..',
  '-w=a/b',
  '-dx',
  '\n',
  'terraform',
  '-out=/x',
  '--out',
  '-input=true',
  '-state-out',
  '--backup=b',
  '-var-file=/proc/self/environ',
  'cancel',
  'approve_policies',
  '--auto-merge-method',
  'modules/*',
  '**/x',
  '[a-',
  '{a,b}',
  '#',
  '`',
  '-w=.',
  'PLAN',
  'Atlantis',
);
const commentArb = fc.oneof(
  fc.string({ maxLength: 200 }),
  fc.array(fc.oneof(tokens, fc.string({ maxLength: 12 })), { maxLength: 12 }).map((a) => a.join(' ')),
  fc.array(tokens, { maxLength: 10 }).map((a) => 'atlantis ' + a.join(' ')),
);

test('property: never throws, and a command never carries an unsafe dir, workspace or blocked arg', () => {
  // biome-ignore lint/nursery/noFloatingPromises: fc.assert of a synchronous property returns void
  fc.assert(
    fc.property(commentArb, (c) => {
      for (const o of [OPTS, ALL]) {
        const r = parseComment(c, o);
        assert.ok(['ignore', 'reply', 'command'].includes(r.kind));
        if (r.kind !== 'command') continue;
        const { dir, workspace, extraArgs, args } = r.command;
        if (dir !== undefined) {
          assert.ok(!dir.startsWith('/'), dir);
          assert.ok(dir !== '..' && !dir.startsWith('../') && !dir.includes('/../'), dir);
        }
        if (workspace !== undefined) {
          assert.ok(!workspace.includes('/') && !workspace.includes('..') && workspace !== '' && workspace !== '.', workspace);
        }
        for (const a of [...extraArgs, ...args]) {
          assert.ok(!/^--?(chdir|plugin-dir|out|input|state|state-out|backup)(=|$)/.test(a), a);
          assert.ok(!/^--?var-file=\//.test(a), a);
        }
      }
    }),
    { numRuns: 3000 },
  );
});

test('property: random unicode never throws', () => {
  // biome-ignore lint/nursery/noFloatingPromises: fc.assert of a synchronous property returns void
  fc.assert(
    fc.property(fc.string({ unit: 'binary', maxLength: 300 }), (s) => {
      parseComment(s, ALL);
      parseComment('atlantis plan ' + s, ALL);
    }),
    { numRuns: 2000 },
  );
});

// Found by the fast-check property in test/webhook-properties.test.ts: a NUL (or any control
// character) in -d must be refused, never become a project dir.
test('a control character in -d is refused with an error comment', () => {
  for (const dir of ['\u0000', 'app\u0000/x', 'a\nb', 'x\u007f']) {
    const r = parseComment(`atlantis plan -d ${dir}`, { vcsUser: 'atlantis-bot' });
    assert.notEqual(r.kind, 'command', `dir ${JSON.stringify(dir)}`);
  }
  assert.equal(cleanedRepoDir('\u0000', 'from-root'), undefined);
  assert.equal(cleanedRepoDir('ok/dir', 'from-root'), 'ok/dir');
});

// doublestar's Match as Atlantis runs a glob -d over atlantis.yaml's project dirs.
test('glob -d matching (doublestar rules)', () => {
  const table: Array<[string, string, boolean]> = [
    ['modules/*', 'modules/a', true],
    ['modules/*', 'modules/a/b', false],
    ['modules/*', 'modules', false],
    ['modules/**', 'modules/a/b', true],
    ['modules/**', 'modules', true],
    ['**/prod', 'prod', true],
    ['**/prod', 'env/x/prod', true],
    ['env/**/apps', 'env/apps', true],
    ['env/**/apps', 'env/a/b/apps', true],
    ['env/**/apps', 'env/a/b/apps2', false],
    ['environments/*/apps', 'environments/staging/apps', true],
    ['env[0-9]/*', 'env3/x', true],
    ['env[0-9]/*', 'envx/x', false],
    ['env[!0-9]/*', 'envx/x', true],
    ['stacks/prod-?-*', 'stacks/prod-1-eu', true],
    ['stacks/prod-?-*', 'stacks/prod-12-eu', false],
    ['{app,db}/*', 'db/main', true],
    ['{app,db}/*', 'web/main', false],
    ['a\\*', 'a*', true],
    ['a\\*', 'ab', false],
    ['modules/[invalid', 'modules/[invalid', false],
  ];
  for (const [pattern, dir, want] of table) assert.equal(globMatch(pattern, dir), want, `${pattern} ~ ${dir}`);
  assert.equal(isValidGlob('a/{b,c'), false);
  assert.equal(isValidGlob('a/b}'), false);
  assert.equal(isValidGlob('a[]'), false);
  assert.equal(isValidGlob('a\\'), false);
  assert.equal(dirTargets('app', 'app'), true);
  assert.equal(dirTargets('ap?', 'app'), true);
  // Linear in the input: many stars against a long non-matching name stay fast.
  const t0 = performance.now();
  assert.equal(globMatch(`${'*a'.repeat(200)}b`, 'a'.repeat(5000)), false);
  assert.equal(globMatch(`${'**/'.repeat(200)}x`, 'a/'.repeat(500) + 'y'), false);
  assert.ok(performance.now() - t0 < 2000);
});
