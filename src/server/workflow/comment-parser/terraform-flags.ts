// Every flag of the terraform subcommands a pull request can hand arguments to, and what a PR
// gets for it: a comment's args (after `--`, and `import`'s ADDRESS ID) reach `plan`, `apply`,
// `import` and `state rm`; `extra_args` of a workflow in the repo's own atlantis.yaml reach
// those and `init`, `show` and `version` too. Reviewed against terraform 1.11's `<command>
// -help` and its flag definitions (hidden and legacy flags included); the test checks that
// every flag `-help` lists is here and that docs/terraform-args.md says the same.
//
// Rules:
// - 'server-set': the server gives the value itself or owns the file (the plan file, the
//   state and its backup, prompting, the working dir): refused whatever --blocked-extra-args
//   says (extra-args.ts SERVER_SET_FLAGS).
// - 'refused': reads from anywhere on the server's disk with no path to check: refused
//   whatever --blocked-extra-args says.
// - 'blocked': in Atlantis's default --blocked-extra-args; an operator may allow it.
// - 'path': the value is a file or dir terraform reads or writes; it must resolve (symlinks
//   followed) inside the PR's checkout.
// - 'allowed': no path, and where state and config are read from stays the same.

export type FlagRule = 'server-set' | 'refused' | 'blocked' | 'path' | 'allowed';

/** The subcommands extra args reach, named as on terraform's command line. */
export type TerraformCommand = 'plan' | 'apply' | 'import' | 'state rm' | 'init' | 'show' | 'version';

export interface TerraformFlag {
  name: string;
  commands: readonly TerraformCommand[];
  rule: FlagRule;
  /** What the value is, for the docs table. */
  value: string;
}

const PLAN_APPLY: readonly TerraformCommand[] = ['plan', 'apply'];

export const TERRAFORM_FLAGS: readonly TerraformFlag[] = [
  // Flags the server sets, or files it owns.
  { name: 'out', commands: ['plan'], rule: 'server-set', value: 'path of the plan file to write' },
  { name: 'input', commands: ['plan', 'apply', 'import', 'init'], rule: 'server-set', value: 'whether terraform may prompt' },
  {
    name: 'state',
    commands: ['plan', 'apply', 'import', 'state rm'],
    rule: 'server-set',
    value: 'path of a local state file to read and write',
  },
  { name: 'state-out', commands: ['plan', 'apply', 'import'], rule: 'server-set', value: 'path to write the state to' },
  { name: 'backup', commands: ['plan', 'apply', 'import', 'state rm'], rule: 'server-set', value: 'path of the state backup to write' },
  {
    name: 'chdir',
    commands: [],
    rule: 'server-set',
    value: "terraform's working dir (a global flag: after a subcommand terraform refuses it)",
  },
  // No path to check.
  {
    name: 'from-module',
    commands: ['init'],
    rule: 'refused',
    value: 'a module source copied into the project: any local path on the server, or a URL',
  },
  // Atlantis's default --blocked-extra-args.
  { name: 'plugin-dir', commands: ['init'], rule: 'blocked', value: 'dir of provider binaries to run' },
  // Paths checked against the checkout.
  { name: 'var-file', commands: ['plan', 'apply', 'import'], rule: 'path', value: 'file of variable values, read' },
  { name: 'generate-config-out', commands: ['plan'], rule: 'path', value: 'file of generated configuration, written' },
  { name: 'config', commands: ['import'], rule: 'path', value: 'dir of the configuration to read' },
  { name: 'backend-config', commands: ['init'], rule: 'path', value: 'a file of backend settings, read (`key=value` is no path)' },
  { name: 'test-directory', commands: ['init'], rule: 'path', value: 'dir of test files, read' },
  // Allowed.
  { name: 'var', commands: ['plan', 'apply', 'import'], rule: 'allowed', value: '`name=value`, a literal (never read as a file)' },
  { name: 'target', commands: ['plan', 'apply', 'import', 'init'], rule: 'allowed', value: 'a resource address' },
  { name: 'replace', commands: PLAN_APPLY, rule: 'allowed', value: 'a resource address' },
  { name: 'destroy', commands: PLAN_APPLY, rule: 'allowed', value: 'boolean' },
  { name: 'refresh', commands: PLAN_APPLY, rule: 'allowed', value: 'boolean' },
  { name: 'refresh-only', commands: PLAN_APPLY, rule: 'allowed', value: 'boolean' },
  { name: 'allow-deferral', commands: PLAN_APPLY, rule: 'allowed', value: 'boolean (experimental builds only)' },
  { name: 'parallelism', commands: ['plan', 'apply', 'import'], rule: 'allowed', value: 'a number' },
  { name: 'detailed-exitcode', commands: ['plan'], rule: 'allowed', value: 'boolean' },
  { name: 'auto-approve', commands: ['apply'], rule: 'allowed', value: 'boolean (a saved plan is applied without asking anyway)' },
  { name: 'lock', commands: ['plan', 'apply', 'import', 'state rm', 'init'], rule: 'allowed', value: 'boolean: hold the state lock' },
  { name: 'lock-timeout', commands: ['plan', 'apply', 'import', 'state rm', 'init'], rule: 'allowed', value: 'a duration' },
  { name: 'compact-warnings', commands: ['plan', 'apply', 'import', 'init'], rule: 'allowed', value: 'boolean' },
  { name: 'no-color', commands: ['plan', 'apply', 'import', 'init', 'show'], rule: 'allowed', value: 'boolean' },
  { name: 'json', commands: ['plan', 'apply', 'init', 'show', 'version'], rule: 'allowed', value: 'boolean' },
  { name: 'ignore-remote-version', commands: ['import', 'state rm', 'init'], rule: 'allowed', value: 'boolean' },
  { name: 'dry-run', commands: ['state rm'], rule: 'allowed', value: 'boolean' },
  { name: 'backend', commands: ['init'], rule: 'allowed', value: 'boolean: skip the backend' },
  { name: 'cloud', commands: ['init'], rule: 'allowed', value: 'boolean: skip HCP Terraform' },
  { name: 'get', commands: ['init'], rule: 'allowed', value: 'boolean: skip module downloads' },
  { name: 'force-copy', commands: ['init'], rule: 'allowed', value: 'boolean' },
  {
    name: 'reconfigure',
    commands: ['init'],
    rule: 'allowed',
    value: "boolean: ignore the saved backend (the committed .tf's backend is used)",
  },
  { name: 'migrate-state', commands: ['init'], rule: 'allowed', value: "boolean: copy state to the committed .tf's backend" },
  { name: 'upgrade', commands: ['init'], rule: 'allowed', value: 'boolean' },
  { name: 'lockfile', commands: ['init'], rule: 'allowed', value: '`readonly`' },
  { name: 'v', commands: ['version'], rule: 'allowed', value: 'boolean' },
  { name: 'version', commands: ['version'], rule: 'allowed', value: 'boolean' },
];

/** The reviewed rule for a flag name (no dashes); undefined for a flag terraform does not have. */
export function flagRule(name: string): FlagRule | undefined {
  return TERRAFORM_FLAGS.find((f) => f.name === name)?.rule;
}

/** Names (no dashes) with one rule. */
export const flagsWithRule = (rule: FlagRule): string[] => TERRAFORM_FLAGS.filter((f) => f.rule === rule).map((f) => f.name);
