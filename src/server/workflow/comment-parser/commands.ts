// The comment commands as one table: --allow-commands, --gh-team-allowlist and the comment
// parser all read it, so the names a flag accepts and the names a comment may run cannot
// drift apart. Pure data.

export type CommandName = 'version' | 'plan' | 'apply' | 'cancel' | 'unlock' | 'approve_policies' | 'import' | 'state';

/** A flag of a comment command, declared as Atlantis declares it to pflag. */
export interface FlagDef {
  long: string;
  short?: string;
  kind: 'string' | 'bool';
  usage: string;
}

export interface CommandSpec {
  name: CommandName;
  /** In --allow-commands' default. */
  defaultAllowed: boolean;
  flags: readonly FlagDef[];
  /** The name shown in `Usage of <usage>:` under `--help`. */
  usage: string;
}

const WS = (u: string): FlagDef => ({ long: 'workspace', short: 'w', kind: 'string', usage: u });
const DIR = (u: string): FlagDef => ({ long: 'dir', short: 'd', kind: 'string', usage: u });
const PROJ = (u: string): FlagDef => ({ long: 'project', short: 'p', kind: 'string', usage: u });
const VERBOSE: FlagDef = { long: 'verbose', kind: 'bool', usage: 'Append Atlantis log to comment.' };
const AUTOMERGE: FlagDef = { long: 'auto-merge-disabled', kind: 'bool', usage: 'Disable automerge after apply.' };
const AUTOMERGE_METHOD: FlagDef = {
  long: 'auto-merge-method',
  kind: 'string',
  usage: 'Specifies the merge method for the VCS if automerge is enabled. (Currently only implemented for GitHub)',
};
const APPROVE_PROJECT =
  'Approve policies for this project. Refers to the name of the project configured in a repo config file. Cannot be used at same time as workspace or dir flags.';

/** The commands a comment may run, in the order Atlantis lists them ("Available commands"). */
export const COMMANDS: readonly CommandSpec[] = [
  {
    name: 'version',
    defaultAllowed: true,
    usage: 'version',
    flags: [
      WS('Switch to this Terraform workspace before running version.'),
      DIR("Which directory to run version in relative to root of repo, ex. 'child/dir'."),
      PROJ('Print the version for this project. Refers to the name of the project configured in a repo config file.'),
      VERBOSE,
    ],
  },
  {
    name: 'plan',
    defaultAllowed: true,
    usage: 'plan',
    flags: [
      WS('Switch to this Terraform workspace before planning.'),
      DIR("Which directory to run plan in relative to root of repo, ex. 'child/dir'."),
      PROJ(
        'Which project to run plan for. Refers to the name of the project configured in a repo config file. Cannot be used at same time as workspace or dir flags.',
      ),
      VERBOSE,
    ],
  },
  {
    name: 'apply',
    defaultAllowed: true,
    usage: 'apply',
    flags: [
      WS('Apply the plan for this Terraform workspace.'),
      DIR("Apply the plan for this directory, relative to root of repo, ex. 'child/dir'."),
      PROJ(
        'Apply the plan for this project. Refers to the name of the project configured in a repo config file. Cannot be used at same time as workspace or dir flags.',
      ),
      AUTOMERGE,
      AUTOMERGE_METHOD,
      VERBOSE,
    ],
  },
  // Cancel and unlock take no flags; any flag gets pflag's error (unlock: its own usage).
  { name: 'cancel', defaultAllowed: true, usage: 'cancel', flags: [] },
  { name: 'unlock', defaultAllowed: true, usage: 'unlock', flags: [] },
  {
    name: 'approve_policies',
    defaultAllowed: true,
    usage: 'approve_policies',
    flags: [
      WS('Approve policies for this Terraform workspace.'),
      DIR("Approve policies for this directory, relative to root of repo, ex. 'child/dir'."),
      PROJ(APPROVE_PROJECT),
      // Atlantis gives --policy-set the -p flag's usage text, word for word.
      { long: 'policy-set', kind: 'string', usage: APPROVE_PROJECT },
      { long: 'clear-policy-approval', kind: 'bool', usage: 'Clear any existing policy approvals.' },
      VERBOSE,
    ],
  },
  {
    name: 'import',
    defaultAllowed: false,
    usage: 'import ADDRESS ID',
    flags: [
      WS('Switch to this Terraform workspace before importing.'),
      DIR("Which directory to run import in relative to root of repo, ex. 'child/dir'."),
      PROJ(
        'Which project to run import for. Refers to the name of the project configured in a repo config file. Cannot be used at same time as workspace or dir flags.',
      ),
      VERBOSE,
    ],
  },
  {
    name: 'state',
    defaultAllowed: false,
    usage: 'state [rm ADDRESS...]',
    flags: [
      WS('Switch to this Terraform workspace before processing tfstate.'),
      DIR("Which directory to run state command in relative to root of repo, ex. 'child/dir'."),
      PROJ(
        'Which project to run state command for. Refers to the name of the project configured in a repo config file. Cannot be used at same time as workspace or dir flags.',
      ),
      VERBOSE,
    ],
  },
];

/**
 * Atlantis command names that --allow-commands and --gh-team-allowlist accept (Atlantis
 * parses them) but that no comment can run, with why. Naming one in --allow-commands logs a
 * warning and leaves it out of the allowed commands, as Atlantis leaves it out, so a comment
 * gets Atlantis's "unknown command" answer.
 */
export const ACCEPTED_NOT_RUN: Readonly<Record<string, string>> = {
  // Atlantis runs it after plan when policy checks are on, never from a comment.
  policy_check: 'it is not a comment command',
};

/** Every command a comment may run. */
export const RUNNABLE_COMMANDS: readonly CommandName[] = COMMANDS.map((c) => c.name);

/** --allow-commands' default, in the order Atlantis writes it (`version,plan,apply,unlock,approve_policies,cancel`). */
export const DEFAULT_ALLOW_COMMANDS: readonly CommandName[] = ['version', 'plan', 'apply', 'unlock', 'approve_policies', 'cancel'];

/** Every name --allow-commands and --gh-team-allowlist accept (besides `all` and `*`). */
export const ACCEPTED_COMMAND_NAMES: readonly string[] = [...RUNNABLE_COMMANDS, ...Object.keys(ACCEPTED_NOT_RUN)];

export function commandSpec(name: CommandName): CommandSpec {
  return COMMANDS.find((c) => c.name === name) as CommandSpec;
}

export function isRunnableCommand(name: string): name is CommandName {
  return (RUNNABLE_COMMANDS as readonly string[]).includes(name);
}

export interface AllowedCommands {
  /** What a comment may run, in the registry's order. */
  allowed: CommandName[];
  /** Accepted names that run nothing here, one line each. */
  ignored: Array<{ name: string; why: string }>;
  /** A name neither runnable nor accepted; the caller refuses to start. */
  unknown?: string;
}

/** Pure: --allow-commands' list (`all` = every runnable command) to what comments may run. */
export function resolveAllowCommands(list: readonly string[]): AllowedCommands {
  const out: AllowedCommands = { allowed: [], ignored: [] };
  const named = new Set<string>();
  for (const c of list) {
    // As Atlantis: empty entries (`plan,,apply`) are skipped.
    if (c === '') continue;
    if (c === 'all') for (const r of RUNNABLE_COMMANDS) named.add(r);
    else if (isRunnableCommand(c)) named.add(c);
    else if (ACCEPTED_NOT_RUN[c] !== undefined) {
      if (!out.ignored.some((i) => i.name === c)) out.ignored.push({ name: c, why: ACCEPTED_NOT_RUN[c] });
    } else if (out.unknown === undefined) out.unknown = c;
  }
  out.allowed = RUNNABLE_COMMANDS.filter((r) => named.has(r));
  return out;
}
