// Atlantis v0.47.1's own comment-parser test cases (server/events/comment_parser_test.go,
// read in its source and written here as one table of our own), run against our parser. A
// case's group names the Go test it comes from; where the server deliberately answers
// otherwise, the case says so and why (docs/server.md, "Compatibility with Atlantis v0.47").
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type ParseOptions, type ParsedCommand, type ParseResult, parseComment } from '../src/server/workflow/comment-parser/index.js';
import { RUNNABLE_COMMANDS } from '../src/server/workflow/comment-parser/commands.js';
import { buildApplyComment, buildPlanComment, helpComment } from '../src/server/workflow/comment-parser/usage.js';

// Atlantis's test parser: GitHub user "github-user", every comment command allowed.
const AT: ParseOptions = {
  executableName: 'atlantis',
  vcsUser: 'github-user',
  allowCommands: [...RUNNABLE_COMMANDS],
  blockedExtraArgs: ['-chdir', '--chdir', '-plugin-dir', '--plugin-dir'],
};
const NONE: ParseOptions = { ...AT, allowCommands: [] };

// Atlantis's usage fixtures, byte for byte.
const PLAN_USAGE = `Usage of plan:
  -d, --dir string         Which directory to run plan in relative to root of repo,
                           ex. 'child/dir'.
  -p, --project string     Which project to run plan for. Refers to the name of the
                           project configured in a repo config file. Cannot be used
                           at same time as workspace or dir flags.
      --verbose            Append Atlantis log to comment.
  -w, --workspace string   Switch to this Terraform workspace before planning.
`;
const APPLY_USAGE = `Usage of apply:
      --auto-merge-disabled        Disable automerge after apply.
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
const APPROVE_USAGE = `Usage of approve_policies:
      --clear-policy-approval   Clear any existing policy approvals.
  -d, --dir string              Approve policies for this directory, relative to
                                root of repo, ex. 'child/dir'.
      --policy-set string       Approve policies for this project. Refers to the
                                name of the project configured in a repo config
                                file. Cannot be used at same time as workspace or
                                dir flags.
  -p, --project string          Approve policies for this project. Refers to the
                                name of the project configured in a repo config
                                file. Cannot be used at same time as workspace or
                                dir flags.
      --verbose                 Append Atlantis log to comment.
  -w, --workspace string        Approve policies for this Terraform workspace.
`;
const IMPORT_USAGE = `Usage of import ADDRESS ID:
  -d, --dir string         Which directory to run import in relative to root of
                           repo, ex. 'child/dir'.
  -p, --project string     Which project to run import for. Refers to the name of
                           the project configured in a repo config file. Cannot be
                           used at same time as workspace or dir flags.
      --verbose            Append Atlantis log to comment.
  -w, --workspace string   Switch to this Terraform workspace before importing.
`;
const UNLOCK_USAGE =
  '`Usage of unlock:`\n\n ```cmake\natlantis unlock\n\n  Unlocks the entire PR and discards all plans in this PR.\n' +
  '  Arguments or flags are not supported at the moment.\n  If you need to unlock a specific project please use the atlantis UI.\n```';

const HELP_ALL =
  '```cmake\natlantis\nTerraform Pull Request Automation\n\nUsage:\n  atlantis <command> [options] -- [terraform options]\n\n' +
  'Examples:\n  # show atlantis help\n  atlantis help\n\n' +
  '  # run plan in the root directory passing the -target flag to terraform\n  atlantis plan -d . -- -target=resource\n\n' +
  '  # apply all unapplied plans from this pull request\n  atlantis apply\n\n' +
  '  # apply the plan for the root directory and staging workspace\n  atlantis apply -d . -w staging\n\nCommands:\n' +
  "  plan     Runs 'terraform plan' for the changes in this pull request.\n           To plan a specific project, use the -d, -w and -p flags.\n" +
  "  apply    Runs 'terraform apply' on all unapplied plans from this pull request.\n           To only apply a specific plan, use the -d, -w and -p flags.\n" +
  '  cancel   Cancels all queued commands for this pull request.\n           Already running commands are not interrupted.\n' +
  '  unlock   Removes all atlantis locks and discards all plans for this PR.\n           To unlock a specific plan you can use the Atlantis UI.\n' +
  '  approve_policies\n           Approves all current policy checking failures for the PR.\n' +
  "  version  Print the output of 'terraform version'\n" +
  "  import ADDRESS ID\n           Runs 'terraform import' for the passed address resource.\n           To import a specific project, use the -d, -w and -p flags.\n" +
  "  state rm ADDRESS...\n           Runs 'terraform state rm' for the passed address resource.\n           To remove a specific project resource, use the -d, -w and -p flags.\n" +
  '  help     View help.\n\nFlags:\n  -h, --help   help for atlantis\n\nUse "atlantis [command] --help" for more information about a command.\n```';
const HELP_NONE =
  '```cmake\natlantis\nTerraform Pull Request Automation\n\nUsage:\n  atlantis <command> [options] -- [terraform options]\n\n' +
  'Examples:\n  # show atlantis help\n  atlantis help\n\nCommands:\n  help     View help.\n\nFlags:\n  -h, --help   help for atlantis\n\n' +
  'Use "atlantis [command] --help" for more information about a command.\n```';
const HELP_APPLY_UNLOCK =
  '```cmake\natlantis\nTerraform Pull Request Automation\n\nUsage:\n  atlantis <command> [options] -- [terraform options]\n\n' +
  'Examples:\n  # show atlantis help\n  atlantis help\n\n' +
  '  # apply all unapplied plans from this pull request\n  atlantis apply\n\n' +
  '  # apply the plan for the root directory and staging workspace\n  atlantis apply -d . -w staging\n\nCommands:\n' +
  "  apply    Runs 'terraform apply' on all unapplied plans from this pull request.\n           To only apply a specific plan, use the -d, -w and -p flags.\n" +
  '  unlock   Removes all atlantis locks and discards all plans for this PR.\n           To unlock a specific plan you can use the Atlantis UI.\n' +
  '  help     View help.\n\nFlags:\n  -h, --help   help for atlantis\n\nUse "atlantis [command] --help" for more information about a command.\n```';

/** What Atlantis's test checks of a result. */
type Want =
  | { ignore: true }
  | { reply: string }
  | { contains: string[]; lacks?: string[] }
  | { cmd: Partial<ParsedCommand>; flags?: string[] };

interface Row {
  from: string;
  c: string;
  o?: ParseOptions;
  w: Want;
}

const rows: Row[] = [];
const add = (from: string, comments: string[], w: Want, o?: ParseOptions) => {
  for (const c of comments) rows.push(o ? { from, c, w, o } : { from, c, w });
};

// TestNewCommentParser: duplicates and non-comment commands are dropped, Atlantis's order kept.
add(
  'NewCommentParser',
  ['atlantis paln'],
  {
    reply: '```\nError: unknown command "paln".\nRun \'atlantis --help\' for usage.\nAvailable commands(--allow-commands): plan\n```',
  },
  { ...AT, allowCommands: ['plan', 'plan', 'plan'] },
);
add(
  'NewCommentParser',
  ['atlantis paln'],
  {
    reply:
      '```\nError: unknown command "paln".\nRun \'atlantis --help\' for usage.\nAvailable commands(--allow-commands): version, plan, apply, unlock, approve_policies, import\n```',
  },
  { ...AT, allowCommands: ['plan', 'apply', 'unlock', 'policy_check', 'approve_policies', 'autoplan', 'version', 'import'] },
);

add(
  'Parse_Ignored',
  ['', 'a', 'abc', 'atlantis plan\nbut with newlines', 'terraform plan\nbut with newlines', "This shouldn't error, but it does."],
  { ignore: true },
);

const CUSTOM: ParseOptions = { vcsUser: 'github-user', executableName: 'custom-executable-name', allowCommands: [] };
const customHelp = helpComment('custom-executable-name', []);
add('Parse_ExecutableName', ['custom-executable-name help', 'run help', '@github-user help'], { reply: customHelp }, CUSTOM);
add('Parse_ExecutableName', ['github-user help', 'atlantis help'], { ignore: true }, CUSTOM);

const helpComments = [
  'run',
  'atlantis',
  '@github-user',
  'atlantis help',
  'atlantis --help',
  'atlantis -h',
  'atlantis help something else',
  'atlantis help plan',
];
add('Parse_HelpResponse', helpComments, { reply: HELP_ALL });
add('Parse_HelpResponse', helpComments, { reply: HELP_NONE }, NONE);
const trimmed = ['`atlantis help`', '`  atlantis help  `', '`atlantis help`  ', '  `atlantis help'];
add('Parse_TrimCommandString', trimmed, { reply: HELP_ALL });
add('Parse_TrimCommandString', trimmed, { reply: HELP_NONE }, NONE);

const unused = (cmd: string, args: string, unusedArgs: string, usage: string) =>
  add('Parse_UnusedArguments', [`atlantis ${cmd} ${args}`], {
    reply: '```\nError: unknown argument(s) – ' + unusedArgs + '.\n' + usage + '```',
  });
unused('plan', '-d . arg', 'arg', PLAN_USAGE);
unused('plan', 'arg -d .', 'arg', PLAN_USAGE);
unused('plan', 'arg', 'arg', PLAN_USAGE);
unused('plan', 'arg arg2', 'arg arg2', PLAN_USAGE);
unused('plan', '-d . arg -w kjj arg2', 'arg arg2', PLAN_USAGE);
unused('apply', '-d . arg', 'arg', APPLY_USAGE);
unused('apply', 'arg arg2', 'arg arg2', APPLY_USAGE);
unused('apply', 'arg arg2 -- useful', 'arg arg2', APPLY_USAGE);
unused('apply', 'arg arg2 --', 'arg arg2', APPLY_USAGE);
unused('approve_policies', 'arg arg2 arg3 --', 'arg arg2 arg3', APPROVE_USAGE);
unused('import', 'arg --', 'arg', IMPORT_USAGE);
unused('import', 'arg1 arg2 arg3 --', 'arg1 arg2 arg3', IMPORT_USAGE);

add('Parse_UnknownShorthandFlag', ['atlantis unlock -d .'], { reply: UNLOCK_USAGE });

add(
  'Parse_DidYouMeanAtlantis',
  [
    'terraform',
    'terraform help',
    'terraform --help',
    'terraform -h',
    'terraform plan',
    'terraform apply',
    'terraform plan -w workspace -d . -- test',
  ],
  { reply: 'Did you mean to use `atlantis` instead of `terraform`?' },
);
add(
  'Parse_NoMisspellWarningForCustomExecutableName',
  ['atlantis-dev unlock'],
  { ignore: true },
  { vcsUser: 'github-user', executableName: 'atlantis-sec' },
);

const INVALID_CMD: ParseOptions = { ...AT, allowCommands: ['version', 'unlock', 'apply', 'plan', 'apply'] };
for (const [c, w] of [
  ['atlantis paln', 'paln'],
  ['atlantis appely apply', 'appely'],
])
  add(
    'Parse_InvalidCommand',
    [c],
    {
      reply: `\`\`\`\nError: unknown command "${w}".\nRun 'atlantis --help' for usage.\nAvailable commands(--allow-commands): version, plan, apply, unlock\n\`\`\``,
    },
    INVALID_CMD,
  );

for (const [c, usage] of [
  ['atlantis plan -h', 'plan'],
  ['atlantis plan --help', 'plan'],
  ['atlantis apply -h', 'apply'],
  ['atlantis apply --help', 'apply'],
  ['atlantis approve_policies -h', 'approve_policies'],
  ['atlantis approve_policies --help', 'approve_policies'],
  ['atlantis import -h', 'import ADDRESS ID'],
  ['atlantis import --help', 'import ADDRESS ID'],
  ['atlantis state -h', 'state [rm ADDRESS...]'],
  ['atlantis state --help', 'state [rm ADDRESS...]'],
] as const)
  add('Parse_SubcommandUsage', [c], { contains: [`Usage of ${usage}`], lacks: ['Error:'] });

for (const [c, e] of [
  ['atlantis plan -e', "Error: unknown shorthand flag: 'e' in -e"],
  ['atlantis plan --abc', 'Error: unknown flag: --abc'],
  ['atlantis apply -e', "Error: unknown shorthand flag: 'e' in -e"],
  ['atlantis apply --abc', 'Error: unknown flag: --abc'],
  ['atlantis import --abc', 'Error: unknown flag: --abc'],
  ['atlantis state rm --abc', 'Error: unknown flag: --abc'],
] as const)
  add('Parse_InvalidFlags', [c], { contains: [e, 'Usage of '] });

add(
  'Parse_RelativeDirPath',
  [
    'atlantis plan -d ..',
    'atlantis apply -d ..',
    'atlantis import -d .. address id',
    'atlantis state -d .. rm address',
    'atlantis plan -d ./..',
    'atlantis apply -d ./..',
    'atlantis import -d ./.. address id',
    'atlantis state -d ./.. rm address',
    'atlantis plan -d a/b/../../..',
    'atlantis apply -d a/../..',
    'atlantis import -d a/../.. address id',
    'atlantis state -d a/../.. rm address id',
  ],
  { contains: ['Error: using a relative path'] },
);

for (const [c, dir] of [
  ['atlantis plan -d modules/*', 'modules/*'],
  ['atlantis plan -d modules/**', 'modules/**'],
  ['atlantis plan -d environments/*/apps', 'environments/*/apps'],
  ["atlantis plan -d 'env[0-9]/*'", 'env[0-9]/*'],
  ['atlantis plan -d stacks/prod-?-*', 'stacks/prod-?-*'],
  ['atlantis apply -d modules/**', 'modules/**'],
  ['atlantis import -d modules/* address id', 'modules/*'],
  ['atlantis state -d modules/* rm address', 'modules/*'],
] as const)
  add('Parse_GlobPatternDir', [c], { cmd: { dir } });
add(
  'Parse_GlobPatternDirWithRelativePath',
  [
    "atlantis plan -d '../*'",
    "atlantis plan -d 'modules/../*'",
    "atlantis plan -d '../**'",
    "atlantis apply -d '../apps/*'",
    "atlantis import -d '../*' address id",
    "atlantis state -d '../*' rm address",
  ],
  { contains: ["using '..' in glob pattern"] },
);
add('Parse_InvalidGlobPattern', ["atlantis plan -d 'modules/[invalid'", "atlantis apply -d 'apps/[unclosed'"], {
  contains: ['invalid glob pattern'],
});

add(
  'Parse_ValidCommand',
  [
    'atlantis plan\n',
    'atlantis plan\n\n',
    'atlantis plan\r\n',
    'atlantis plan\r\n\r\n',
    '\natlantis plan',
    '\r\natlantis plan',
    '\natlantis plan\n',
    '\r\natlantis plan\r\n',
    'atlantis plan',
    'Atlantis plan',
    'Atlantis Plan',
    'ATLANTIS PLAN',
  ],
  { cmd: { name: 'plan', dir: undefined, workspace: undefined, project: undefined, verbose: false, extraArgs: [], args: [] } },
);

add(
  'Parse_InvalidWorkspace',
  [
    'atlantis plan -w ..',
    'atlantis apply -w ..',
    'atlantis import -w .. address id',
    'atlantis import -w .. rm address',
    'atlantis plan -w /',
    'atlantis apply -w /',
    'atlantis import -w / address id',
    'atlantis state -w / rm address',
    'atlantis plan -w ..abc',
    'atlantis apply -w abc..',
    'atlantis import -w abc.. address id',
    'atlantis state -w abc.. rm address',
    'atlantis plan -w abc..abc',
    'atlantis apply -w ../../../etc/passwd',
    'atlantis import -w ../../../etc/passwd address id',
    'atlantis state -w ../../../etc/passwd rm address',
  ],
  { contains: ['Error: invalid workspace'] },
);
add(
  'Parse_WorkspaceTildeInvalid',
  [
    'atlantis plan -w ~',
    'atlantis apply -w ~',
    'atlantis plan -w ~user',
    'atlantis apply -w ~root',
    'atlantis import -w ~ address id',
    'atlantis state -w ~ rm address',
  ],
  { contains: ['Error: invalid workspace'] },
);
for (const c of [
  'atlantis plan -w a;id',
  'atlantis plan -w a&&id',
  'atlantis apply -w a&&id',
  'atlantis plan -w a|id',
  'atlantis plan -w a`id`b',
  'atlantis plan -w a>b',
  'atlantis plan -w a=b',
  'atlantis plan -w a:b',
  'atlantis plan -w a@b',
  'atlantis plan -w a+b',
  'atlantis plan -w _foo',
  'atlantis plan -w .hidden',
])
  add('Parse_WorkspaceShellMetacharactersAllowed', [c], { cmd: { workspace: c.split(' -w ')[1] } });
add('Parse_WorkspaceUnsafeForPathsInvalid', ['atlantis plan -w a$HOME', 'atlantis plan -w a$(id)b'], { contains: ['invalid workspace'] });

for (const [c, msg] of [
  ['atlantis plan -- -chdir=../other', 'flag "-chdir=../other" is not allowed in extra args'],
  ['atlantis plan -- --chdir=/tmp', 'flag "--chdir=/tmp" is not allowed in extra args'],
  ['atlantis plan -- -chdir', 'flag "-chdir" is not allowed in extra args'],
  ['atlantis plan -- --chdir', 'flag "--chdir" is not allowed in extra args'],
  ['atlantis plan -- -plugin-dir=/tmp/evil', 'flag "-plugin-dir=/tmp/evil" is not allowed in extra args'],
  ['atlantis plan -- --plugin-dir=/tmp/evil', 'flag "--plugin-dir=/tmp/evil" is not allowed in extra args'],
  ['atlantis apply -- -chdir=../sensitive', 'flag "-chdir=../sensitive" is not allowed in extra args'],
  ['atlantis import address id -- -chdir=..', 'flag "-chdir=.." is not allowed in extra args'],
] as const)
  add('Parse_BlockedExtraArgs', [c], { contains: [msg] });

const CUSTOM_BLOCKED: ParseOptions = {
  vcsUser: '',
  executableName: 'atlantis',
  allowCommands: [...RUNNABLE_COMMANDS],
  blockedExtraArgs: ['-no-color', '--no-color'],
};
add(
  'Parse_CustomBlockedExtraArgs',
  ['atlantis plan -- -no-color'],
  { contains: ['flag "-no-color" is not allowed in extra args'] },
  CUSTOM_BLOCKED,
);
add('Parse_CustomBlockedExtraArgs', ['atlantis plan -- -var=foo=bar'], { cmd: { extraArgs: ['-var=foo=bar'] } }, CUSTOM_BLOCKED);
// Deliberate difference: Atlantis lets a custom list unblock -chdir; here -chdir (and the
// flags the server sets itself) stay refused whatever the list says (SECURITY.md).
add(
  'Parse_CustomBlockedExtraArgs (differs)',
  ['atlantis plan -- -chdir=other'],
  { contains: ['flag "-chdir=other" is not allowed in extra args'] },
  CUSTOM_BLOCKED,
);

add(
  'Parse_UsingProjectAtSameTimeAsWorkspaceOrDir',
  ['atlantis plan -w workspace -p project', 'atlantis plan -d dir -p project', 'atlantis plan -d dir -w workspace -p project'],
  { contains: ['Error: cannot use -p/--project at same time as -d/--dir or -w/--workspace'] },
);

// TestParse_Parsing: flags x commands; Atlantis's Flags are the extra args then the command args.
const parsing: Array<[string, string, string, boolean, string, string]> = [
  ['', '', '', false, '', ''],
  ['-w workspace', 'workspace', '', false, '', ''],
  ['-d dir', '', 'dir', false, '', ''],
  ['-p project', '', '', false, '', 'project'],
  ['--verbose', '', '', true, '', ''],
  ['--workspace workspace', 'workspace', '', false, '', ''],
  ['--dir dir', '', 'dir', false, '', ''],
  ['--project project', '', '', false, '', 'project'],
  ['-w workspace -d dir --verbose', 'workspace', 'dir', true, '', ''],
  ['-d dir -w workspace --verbose', 'workspace', 'dir', true, '', ''],
  ['--verbose -w workspace -d dir', 'workspace', 'dir', true, '', ''],
  ['-p project --verbose', '', '', true, '', 'project'],
  ['--verbose -p project', '', '', true, '', 'project'],
  ['-w workspace -d dir -- --verbose', 'workspace', 'dir', false, '--verbose', ''],
  ['-w workspace -- -d dir --verbose', 'workspace', '', false, '-d dir --verbose', ''],
  ['--', '', '', false, '', ''],
  ['-w workspace -d dir --verbose -- arg one -two --three &&', 'workspace', 'dir', true, 'arg one -two --three &&', ''],
  ['\t-w\tworkspace\t-d\tdir\t--verbose\t--\targ\tone\t-two\t--three\t&&', 'workspace', 'dir', true, 'arg one -two --three &&', ''],
  [
    '   -w   workspace   -d   dir   --verbose   --   arg   one   -two   --three   &&',
    'workspace',
    'dir',
    true,
    'arg one -two --three &&',
    '',
  ],
  ['-d /', '', '.', false, '', ''],
  ['-d /adir', '', 'adir', false, '', ''],
  ['-d .', '', '.', false, '', ''],
  ['-d ./', '', '.', false, '', ''],
  ['-d ./adir', '', 'adir', false, '', ''],
  ['-d "dir with space"', '', 'dir with space', false, '', ''],
];
for (const [flags, ws, dir, verbose, extra, project] of parsing) {
  for (const [cmd, tail] of [
    ['plan', ''],
    ['apply', ''],
    ['import \'some["addr"]\' id', 'some["addr"] id'],
    ['state rm \'some["addr"]\'', 'some["addr"]'],
  ] as const) {
    const want: Partial<ParsedCommand> = { dir: dir || undefined, workspace: ws || undefined, project: project || undefined, verbose };
    const all = [extra, tail].filter((x) => x !== '').join(' ');
    add('Parse_Parsing', [`atlantis ${cmd} ${flags}`], { cmd: want, flags: all === '' ? [] : all.split(' ') });
  }
}

add(
  'Parse_VCSUsername',
  ['@gh help'],
  { reply: helpComment('atlantis', []) },
  { vcsUser: 'gh', executableName: 'atlantis', allowCommands: [] },
);

function check(r: ParseResult, w: Want): void {
  if ('ignore' in w) {
    assert.deepEqual(r, { kind: 'ignore' });
    return;
  }
  if ('reply' in w) {
    assert.deepEqual(r.kind === 'reply' ? r.body : r, w.reply);
    return;
  }
  if ('contains' in w) {
    assert.equal(r.kind, 'reply', JSON.stringify(r));
    if (r.kind !== 'reply') return;
    for (const s of w.contains) assert.ok(r.body.includes(s), `${JSON.stringify(r.body)} should contain ${JSON.stringify(s)}`);
    for (const s of w.lacks ?? []) assert.ok(!r.body.includes(s), `${JSON.stringify(r.body)} should not contain ${JSON.stringify(s)}`);
    return;
  }
  assert.equal(r.kind, 'command', JSON.stringify(r));
  if (r.kind !== 'command') return;
  for (const [k, v] of Object.entries(w.cmd)) assert.deepEqual((r.command as unknown as Record<string, unknown>)[k], v, `field ${k}`);
  if (w.flags) assert.deepEqual([...r.command.extraArgs, ...r.command.args], w.flags, 'Atlantis Flags');
}

test(`Atlantis's own parser cases (${rows.length})`, async (t) => {
  assert.ok(rows.length > 250, `${rows.length}`);
  for (const row of rows) {
    await t.test(`${row.from}: ${JSON.stringify(row.c)}`, () => check(parseComment(row.c, row.o ?? AT), row.w));
  }
});

test("Atlantis's help texts (TestCommentParser_HelpComment)", () => {
  assert.equal(helpComment('atlantis', [...RUNNABLE_COMMANDS]), HELP_ALL);
  assert.equal(helpComment('atlantis', []), HELP_NONE);
  assert.equal(helpComment('atlantis', ['apply', 'unlock']), HELP_APPLY_UNLOCK);
});

test("Atlantis's suggested comments (TestBuildPlanApplyVersionComment)", () => {
  const cases: Array<[string, string, string, boolean, string, string[], string, string]> = [
    ['.', 'default', '', false, '', [], '-d .', '-d .'],
    ['dir', 'default', '', false, '', [], '-d dir', '-d dir'],
    ['.', 'workspace', '', false, '', [], '-w workspace', '-w workspace'],
    ['dir', 'workspace', '', false, '', [], '-d dir -w workspace', '-d dir -w workspace'],
    ['.', 'default', 'project', false, '', [], '-p project', '-p project'],
    ['dir', 'workspace', 'project', false, '', [], '-p project', '-p project'],
    ['.', 'default', '', false, '', ['"arg1"', '"arg2"'], '-d . -- arg1 arg2', '-d .'],
    ['dir', 'workspace', '', false, '', ['"arg1"', '"arg2"', 'arg3'], '-d dir -w workspace -- arg1 arg2 arg3', '-d dir -w workspace'],
    ['dir with spaces', 'default', '', false, '', [], '-d "dir with spaces"', '-d "dir with spaces"'],
    [
      'dir',
      'workspace',
      '',
      true,
      '',
      ['"arg1"', '"arg2"', 'arg3'],
      '-d dir -w workspace -- arg1 arg2 arg3',
      '-d dir -w workspace --auto-merge-disabled',
    ],
    [
      'dir',
      'workspace',
      '',
      false,
      'squash',
      ['"arg1"', '"arg2"', 'arg3'],
      '-d dir -w workspace -- arg1 arg2 arg3',
      '-d dir -w workspace --auto-merge-method squash',
    ],
  ];
  for (const [dir, ws, project, disabled, method, args, plan, apply] of cases) {
    assert.equal(buildPlanComment('atlantis', dir, ws, project || undefined, args), `atlantis plan ${plan}`);
    assert.equal(buildApplyComment('atlantis', dir, ws, project || undefined, disabled, method), `atlantis apply ${apply}`);
  }
});
