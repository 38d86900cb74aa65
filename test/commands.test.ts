// The command registry (src/server/workflow/comment-parser/commands.ts) is the one list that the server's
// flags and the comment parser read: whatever --allow-commands accepts, a comment either runs
// or gets the "unknown command" answer, and the config says which beforehand.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  ACCEPTED_COMMAND_NAMES,
  ACCEPTED_NOT_RUN,
  DEFAULT_ALLOW_COMMANDS,
  RUNNABLE_COMMANDS,
  resolveAllowCommands,
} from '../src/server/workflow/comment-parser/commands.js';
import { parseComment } from '../src/server/workflow/comment-parser/index.js';
import { CANCEL_COMMENT, approvePoliciesComment } from '../src/server/workflow/commands/comment-replies.js';
import { configWithRequiredFlags, githubOf } from './support/server-config.js';

const config = configWithRequiredFlags('ato-commands-');

/** What a comment naming `name` gets from the parser under the server's settings. */
function commentOutcome(name: string, argv: string[]): 'runs' | 'unknown command' | string {
  const c = config(argv);
  const args = name === 'import' ? ' ADDR ID' : name === 'state' ? ' rm ADDR' : '';
  const r = parseComment(`atlantis ${name}${args}`, {
    executableName: c.executableName,
    vcsUser: githubOf(c).user,
    allowCommands: c.allowCommands,
    blockedExtraArgs: c.blockedExtraArgs,
  });
  if (r.kind === 'command') return r.command.name === name ? 'runs' : `runs ${r.command.name}`;
  if (r.kind === 'reply' && r.body.startsWith('```\nError: unknown command ')) return 'unknown command';
  return JSON.stringify(r);
}

describe('the command registry', () => {
  it('decides --allow-commands purely', () => {
    const cases: Array<[string[], ReturnType<typeof resolveAllowCommands>]> = [
      [['plan', 'version'], { allowed: ['version', 'plan'], ignored: [] }],
      [['all'], { allowed: [...RUNNABLE_COMMANDS], ignored: [] }],
      // Atlantis's default list, and its order for the "Available commands" answer.
      [
        ['version', 'plan', 'apply', 'unlock', 'approve_policies', 'cancel'],
        { allowed: ['version', 'plan', 'apply', 'cancel', 'unlock', 'approve_policies'], ignored: [] },
      ],
      [['plan', 'plan', 'plan'], { allowed: ['plan'], ignored: [] }],
      [['plan', '', 'apply'], { allowed: ['plan', 'apply'], ignored: [] }],
      [
        ['plan', 'policy_check', 'policy_check'],
        { allowed: ['plan'], ignored: [{ name: 'policy_check', why: 'it is not a comment command' }] },
      ],
      [['plan', 'destroy', 'cancel'], { allowed: ['plan', 'cancel'], ignored: [], unknown: 'destroy' }],
      [[], { allowed: [], ignored: [] }],
    ];
    for (const [list, want] of cases) assert.deepEqual(resolveAllowCommands(list), want, list.join(','));
  });

  it('runs, for each name --allow-commands accepts, exactly what the config allows', () => {
    for (const name of ACCEPTED_COMMAND_NAMES) {
      const c = config(['--allow-commands', name]);
      const allowed = (c.allowCommands as readonly string[]).includes(name);
      assert.equal(allowed, ACCEPTED_NOT_RUN[name] === undefined, name);
      assert.equal(commentOutcome(name, ['--allow-commands', name]), allowed ? 'runs' : 'unknown command', name);
    }
  });

  it('runs every runnable command with --allow-commands all, and only the default ones without it', () => {
    for (const name of RUNNABLE_COMMANDS) {
      assert.equal(commentOutcome(name, ['--allow-commands', 'all']), 'runs', name);
      assert.equal(commentOutcome(name, []), DEFAULT_ALLOW_COMMANDS.includes(name) ? 'runs' : 'unknown command', name);
    }
  });

  it("accepts Atlantis's default --allow-commands, and policy_check with a warning as a name no comment runs", () => {
    assert.deepEqual(DEFAULT_ALLOW_COMMANDS, ['version', 'plan', 'apply', 'unlock', 'approve_policies', 'cancel']);
    const c = config([], { ATLANTIS_ALLOW_COMMANDS: 'version,plan,apply,unlock,approve_policies,cancel' });
    assert.deepEqual(c.allowCommands, ['version', 'plan', 'apply', 'cancel', 'unlock', 'approve_policies']);
    assert.deepEqual(c.flagWarnings, []);
    assert.deepEqual(config([]).allowCommands, c.allowCommands, 'the default is the same list');
    const p = config([], { ATLANTIS_ALLOW_COMMANDS: 'plan,policy_check' });
    assert.deepEqual(p.allowCommands, ['plan']);
    assert.deepEqual(p.flagWarnings, [
      '--allow-commands (ATLANTIS_ALLOW_COMMANDS) names policy_check, but this server ignores it: it is not a comment command',
    ]);
    const r = parseComment('atlantis policy_check', { vcsUser: githubOf(p).user, allowCommands: p.allowCommands });
    assert.deepEqual(r, {
      kind: 'reply',
      error: true,
      body: '```\nError: unknown command "policy_check".\nRun \'atlantis --help\' for usage.\nAvailable commands(--allow-commands): plan\n```',
    });
    assert.deepEqual(config(['--allow-commands', 'all']).flagWarnings, [], '`all` names no command that runs nothing');
    assert.throws(() => config(['--allow-commands', 'plan,destroy']), {
      message: 'invalid --allow-commands: unknown command name: destroy',
    });
    // Team rules may name any of them, as in Atlantis's own settings.
    assert.deepEqual(config(['--gh-team-allowlist', 'ops:approve_policies,ops:cancel']).teamAllowlist, [
      { team: 'ops', command: 'approve_policies' },
      { team: 'ops', command: 'cancel' },
    ]);
  });
});

describe('the answers of cancel and approve_policies', () => {
  it("are Atlantis's texts (cancel_command_runner.go, approve_all_projects.tmpl)", () => {
    assert.equal(
      CANCEL_COMMENT,
      'Cancelled all queued operations and released working directory locks for this pull request.\nNew operations can now be started. Currently running operations will continue to completion.',
    );
    assert.equal(approvePoliciesComment([]), 'Approved Policies for 0 projects:');
    assert.equal(
      approvePoliciesComment([
        { dir: 'app1', workspace: 'default' },
        { dir: 'modules/db', workspace: 'staging', project: 'db' },
      ]),
      'Approved Policies for 2 projects:\n\n1. dir: `app1` workspace: `default`\n1. project: `db` dir: `modules/db` workspace: `staging`',
    );
  });
});
