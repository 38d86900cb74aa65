// The command registry (src/server/workflow/commands.ts) is the one list that the server's
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
} from '../src/server/workflow/commands.js';
import { parseComment } from '../src/server/workflow/comment-parser.js';
import { configWithRequiredFlags } from './support/server-config.js';

const config = configWithRequiredFlags('ato-commands-');

/** What a comment naming `name` gets from the parser under the server's settings. */
function commentOutcome(name: string, argv: string[]): 'runs' | 'unknown command' | string {
  const c = config(argv);
  const args = name === 'import' ? ' ADDR ID' : name === 'state' ? ' rm ADDR' : '';
  const r = parseComment(`atlantis ${name}${args}`, {
    executableName: c.executableName,
    ghUser: c.ghUser,
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
      [
        ['plan', 'approve_policies', 'approve_policies'],
        { allowed: ['plan'], ignored: [{ name: 'approve_policies', why: 'policy checks are not implemented' }] },
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

  it('approve_policies: accepted with a warning (policy checks are refused at start), never runs, not listed as available', () => {
    const c = config([], { ATLANTIS_ALLOW_COMMANDS: 'version,plan,apply,unlock,approve_policies' });
    assert.deepEqual(c.allowCommands, ['version', 'plan', 'apply', 'unlock']);
    assert.deepEqual(c.flagWarnings, [
      '--allow-commands (ATLANTIS_ALLOW_COMMANDS) names approve_policies, but this server ignores it: policy checks are not implemented',
    ]);
    const r = parseComment('atlantis approve_policies', { ghUser: c.ghUser, allowCommands: c.allowCommands });
    assert.deepEqual(r, {
      kind: 'reply',
      error: true,
      body: '```\nError: unknown command "approve_policies".\nRun \'atlantis --help\' for usage.\nAvailable commands(--allow-commands): version, plan, apply, unlock\n```',
    });
    assert.deepEqual(config(['--allow-commands', 'all']).flagWarnings, [], '`all` names no command that runs nothing');
    // Team rules may still name it, as in Atlantis's own settings.
    assert.deepEqual(config(['--gh-team-allowlist', 'ops:approve_policies']).ghTeamAllowlist, [
      { team: 'ops', command: 'approve_policies' },
    ]);
  });
});
