// Every key Atlantis v0.47 accepts in atlantis.yaml and repos.yaml parses here, and each one
// not implemented is named (a PR comment or a refused command for atlantis.yaml, a start-up
// error for repos.yaml), never dropped silently.
//
// The key lists below are facts about Atlantis v0.47.1, read from the yaml tags of its raw
// config structs:
//   git -C <atlantis> show v0.47.1:server/core/config/raw/<repo_cfg|project|workflow|global_cfg>.go | grep 'yaml:"'
// The doc example configs in fixtures/atlantis-v0.47-doc-configs/ are the ```yaml blocks of
// runatlantis.io/docs/{repo-level-atlantis-yaml,server-side-repo-config,custom-workflows,
// pre-workflow-hooks,post-workflow-hooks,command-requirements,policy-checking,
// custom-policy-checks,terraform-versions,automerging}.md at v0.47.1, one file per block,
// named <doc>-<block index>.yaml.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import YAML from 'yaml';
import { readRepoConfig, repoConfigViolation } from '../src/server/workflow/checkout/projects.js';
import { parseRepoConfig } from '../src/server/workflow/repo-config/atlantis-yaml.js';
import {
  REPO_PROJECT_KEYS,
  REPO_TOP_KEYS,
  SERVER_REPO_KEYS,
  SERVER_TOP_KEYS,
  SaidOnce,
  WORKFLOW_KEYS,
  unsupportedKeysComment,
} from '../src/server/workflow/repo-config/keys.js';
import { parseServerSideRepoConfig, serverSettingsFor } from '../src/server/workflow/repo-config/server-side.js';
import { RepoConfigError } from '../src/server/workflow/repo-config/types.js';

const ATLANTIS_KEYS = {
  repoCfg: [
    'version',
    'projects',
    'workflows',
    'policies',
    'autodiscover',
    'automerge',
    'parallel_apply',
    'parallel_plan',
    'delete_source_branch_on_merge',
    'emoji_reaction',
    'allowed_regexp_prefixes',
    'abort_on_execution_order_fail',
    'repo_locks',
    'silence_pr_comments',
  ],
  project: [
    'name',
    'branch',
    'dir',
    'workspace',
    'workflow',
    'terraform_distribution',
    'terraform_version',
    'autoplan',
    'plan_requirements',
    'apply_requirements',
    'import_requirements',
    'depends_on',
    'delete_source_branch_on_merge',
    'repo_locking',
    'repo_locks',
    'execution_order_group',
    'policy_check',
    'custom_policy_check',
    'silence_pr_comments',
  ],
  workflow: ['apply', 'plan', 'policy_check', 'import', 'state_rm'],
  globalCfg: ['repos', 'workflows', 'policies', 'metrics', 'team_authz', 'external_stores'],
  repo: [
    'id',
    'branch',
    'repo_config_file',
    'plan_requirements',
    'apply_requirements',
    'import_requirements',
    'pre_workflow_hooks',
    'workflow',
    'post_workflow_hooks',
    'allowed_workflows',
    'allowed_overrides',
    'allow_custom_workflows',
    'delete_source_branch_on_merge',
    'repo_locking',
    'repo_locks',
    'policy_check',
    'custom_policy_check',
    'autodiscover',
    'silence_pr_comments',
  ],
};

test("the key tables hold exactly Atlantis's keys", () => {
  const sorted = (a: Iterable<string>) => [...a].sort();
  assert.deepEqual(sorted(Object.keys(REPO_TOP_KEYS)), sorted(ATLANTIS_KEYS.repoCfg));
  assert.deepEqual(sorted(Object.keys(REPO_PROJECT_KEYS)), sorted(ATLANTIS_KEYS.project));
  assert.deepEqual(sorted(Object.keys(WORKFLOW_KEYS)), sorted(ATLANTIS_KEYS.workflow));
  assert.deepEqual(sorted(Object.keys(SERVER_TOP_KEYS)), sorted(ATLANTIS_KEYS.globalCfg));
  assert.deepEqual(sorted(Object.keys(SERVER_REPO_KEYS)), sorted(ATLANTIS_KEYS.repo));
});

/** What atlantis.yaml with the key gives: parsed, notice (command runs, one comment) or refused (command fails). */
type RepoOutcome = 'ok' | 'notice' | 'refused';

function repoOutcome(text: string): RepoOutcome {
  const c = parseRepoConfig(text);
  if (c.unsupported.some((u) => u.kind === 'refused')) return 'refused';
  return c.unsupported.length > 0 ? 'notice' : 'ok';
}

const REPO_TOP_ROWS: Array<[key: string, value: string, want: RepoOutcome]> = [
  ['version', '3', 'ok'],
  ['projects', '[{dir: a}]', 'ok'],
  ['workflows', '{w: {plan: {steps: [init, plan]}}}', 'ok'],
  ['policies', '{policy_sets: [{name: p, path: x, source: local}]}', 'ok'],
  ['autodiscover', '{mode: auto}', 'ok'],
  ['autodiscover', '{mode: enabled}', 'refused'],
  ['autodiscover', '{mode: auto, ignore_paths: [a/*]}', 'refused'],
  ['automerge', 'true', 'ok'],
  ['parallel_apply', 'true', 'ok'],
  ['parallel_plan', 'true', 'ok'],
  ['delete_source_branch_on_merge', 'true', 'ok'],
  ['emoji_reaction', 'eyes', 'ok'],
  ['allowed_regexp_prefixes', '[]', 'ok'],
  ['allowed_regexp_prefixes', '[dev/]', 'ok'],
  ['abort_on_execution_order_fail', 'true', 'ok'],
  ['repo_locks', '{mode: on_apply}', 'ok'],
  ['silence_pr_comments', '[apply]', 'notice'],
];

test('atlantis.yaml top-level keys: each parses; what is not implemented is named', () => {
  for (const [key, value, want] of REPO_TOP_ROWS) {
    const text = key === 'version' ? `version: ${value}\n` : `version: 3\n${key}: ${value}\n`;
    assert.equal(repoOutcome(text), want, `${key}: ${value}`);
  }
  assert.deepEqual(new Set(REPO_TOP_ROWS.map((r) => r[0])), new Set(ATLANTIS_KEYS.repoCfg));
});

const PROJECT_ROWS: Array<[key: string, value: string, want: RepoOutcome]> = [
  ['name', 'a', 'ok'],
  ['branch', '/^main$/', 'ok'],
  ['dir', 'x', 'ok'],
  ['dir', 'modules/*', 'refused'],
  ['workspace', 'staging', 'ok'],
  ['workflow', 'w', 'ok'],
  ['terraform_distribution', 'terraform', 'ok'],
  ['terraform_distribution', 'opentofu', 'ok'],
  ['terraform_version', 'v1.5.7', 'ok'],
  ['autoplan', '{enabled: false}', 'ok'],
  ['plan_requirements', '[approved]', 'ok'],
  ['apply_requirements', '[mergeable]', 'ok'],
  ['import_requirements', '[undiverged]', 'ok'],
  ['depends_on', '[other]', 'ok'],
  ['delete_source_branch_on_merge', 'true', 'ok'],
  ['repo_locking', 'false', 'ok'],
  ['repo_locks', '{mode: disabled}', 'ok'],
  ['execution_order_group', '2', 'ok'],
  ['policy_check', 'false', 'ok'],
  ['policy_check', 'true', 'ok'],
  ['custom_policy_check', 'false', 'ok'],
  ['custom_policy_check', 'true', 'ok'],
  ['silence_pr_comments', '[plan]', 'notice'],
];

test('atlantis.yaml project keys: each parses; what is not implemented is named', () => {
  for (const [key, value, want] of PROJECT_ROWS) {
    const project = key === 'dir' ? `{dir: "${value}"}` : `{dir: x, ${key}: ${JSON.stringify(value).startsWith('"[') ? value : value}}`;
    const text = `version: 3\nprojects:\n- ${project}\n`;
    assert.equal(repoOutcome(text), want, `${key}: ${value}`);
  }
  assert.deepEqual(new Set(PROJECT_ROWS.map((r) => r[0])), new Set(ATLANTIS_KEYS.project));
});

test('workflow stages and steps: each parses; what is not implemented is named', () => {
  const rows: Array<[stages: string, want: RepoOutcome]> = [
    ['plan: {steps: [init, plan, show]}', 'ok'],
    ['apply: {steps: [apply]}', 'ok'],
    ['policy_check: {steps: [show, policy_check]}', 'ok'],
    ['import: {steps: [init, import]}', 'ok'],
    ['state_rm: {steps: [init, state_rm]}', 'ok'],
    ['plan: {steps: [{run: {command: x, shell: bash, shellArgs: [-e, -c], output: strip_refreshing}}]}', 'ok'],
    ['plan: {steps: [{run: {command: x, output: [hide]}}]}', 'ok'],
    ['plan: {steps: [{run: {command: x, output: [strip_refreshing, {filter_regex: secret}]}}]}', 'refused'],
    ['plan: {steps: [{env: {name: A, command: echo a, shell: bash, shellArgs: -c}}]}', 'ok'],
    ['plan: {steps: [{multienv: x}]}', 'refused'],
    ['plan: {steps: [{multienv: {command: x, shell: bash, shellArgs: -c, output: show}}]}', 'refused'],
    ['plan: {steps: [init, policy_check, plan]}', 'ok'],
  ];
  for (const [stages, want] of rows) assert.equal(repoOutcome(`version: 3\nworkflows:\n  w: {${stages}}\n`), want, stages);
  const stages = parseRepoConfig(
    'version: 3\nworkflows:\n  w:\n    import: {steps: [init, {import: {extra_args: [-var=a=b]}}]}\n    state_rm:\n',
  );
  assert.deepEqual(stages.workflows.w?.import, [
    { kind: 'init', extraArgs: [] },
    { kind: 'import', extraArgs: ['-var=a=b'] },
  ]);
  // An empty stage keeps Atlantis's default, as there.
  assert.equal(stages.workflows.w?.stateRm, undefined);
  const env = parseRepoConfig(
    'version: 3\nworkflows:\n  w: {plan: {steps: [{env: {name: A, command: echo a, shell: bash, shellArgs: -eu -c}}]}}\n',
  );
  assert.deepEqual(env.workflows.w?.plan, [{ kind: 'env', name: 'A', command: 'echo a', shell: 'bash', shellArgs: ['-eu', '-c'] }]);
});

const SERVER_REPO_ROWS: Array<[key: string, value: string, ok: boolean]> = [
  ['id', '/.*/', true],
  ['branch', '/^main$/', true],
  ['repo_config_file', 'cfg/atlantis.yaml', true],
  ['plan_requirements', '[approved]', true],
  ['apply_requirements', '[approved]', true],
  ['import_requirements', '[approved]', true],
  ['pre_workflow_hooks', '[{run: echo}]', true],
  ['workflow', 'w', true],
  ['post_workflow_hooks', '[{run: echo, description: d}]', true],
  ['allowed_workflows', '[w]', true],
  ['allowed_overrides', '[workflow, repo_locks]', true],
  ['allow_custom_workflows', 'true', true],
  ['delete_source_branch_on_merge', 'true', true],
  ['repo_locking', 'true', true],
  ['repo_locks', '{mode: on_plan}', true],
  ['policy_check', 'false', true],
  ['policy_check', 'true', true],
  ['custom_policy_check', 'true', true],
  ['autodiscover', '{mode: auto}', true],
  ['autodiscover', '{mode: disabled}', false],
  ['silence_pr_comments', '[plan]', false],
];

test('repos.yaml keys: each parses; what is not implemented stops the start, naming the key', () => {
  for (const [key, value, ok] of SERVER_REPO_ROWS) {
    const text = `workflows:\n  w: {}\nrepos:\n- id: /.*/\n  ${key === 'id' ? '' : `${key}: ${value}`}\n`;
    if (ok) assert.doesNotThrow(() => parseServerSideRepoConfig(text), `${key}: ${value}`);
    else
      assert.throws(
        () => parseServerSideRepoConfig(text),
        (e: unknown) => e instanceof RepoConfigError && e.message.includes(`repos[0].${key}: is not supported by this server: `),
        `${key}: ${value}`,
      );
  }
  assert.deepEqual(new Set(SERVER_REPO_ROWS.map((r) => r[0])), new Set(ATLANTIS_KEYS.repo));
  const top: Array<[string, boolean]> = [
    ['repos: []', true],
    ['workflows: {}', true],
    ['policies: {policy_sets: [{name: p, path: p}]}', true],
    ['metrics: {prometheus: {endpoint: /metrics}}', true],
    ['metrics: {statsd: {host: localhost, port: "8125"}}', false],
    ['team_authz: {command: ./authz.sh}', false],
    ['external_stores: {plan_store: {type: ""}}', true],
    ['external_stores: {plan_store: {type: s3, s3: {bucket: b, region: r}}}', false],
  ];
  for (const [text, ok] of top) {
    const key = text.split(':')[0] as string;
    if (ok) assert.doesNotThrow(() => parseServerSideRepoConfig(text), text);
    else assert.throws(() => parseServerSideRepoConfig(text), new RegExp(`${key}: is not supported by this server`), text);
  }
});

test("repos.yaml values checked with Atlantis's texts", () => {
  const rows: Array<[string, RegExp]> = [
    [
      'repos:\n- id: /.*/\n  allowed_overrides: [workflow, bogus]',
      /"bogus" is not a valid override, only "plan_requirements", "apply_requirements", "import_requirements", "workflow", "delete_source_branch_on_merge", "repo_locking", "repo_locks", "policy_check", "custom_policy_check", and "silence_pr_comments" are supported/,
    ],
    ['repos:\n- id: /.*/\n  allowed_workflows: [nope]', /repos\[0\]\.allowed_workflows: workflow "nope" is not defined/],
    ['repos:\n- id: /.*/\n  repo_config_file: /etc/x.yaml', /repo_config_file: must not starts with a slash '\/'/],
    ['repos:\n- id: /.*/\n  repo_config_file: a/../../x.yaml', /repo_config_file: must not contains parent directory path like '\.\.\/'/],
    [
      'repos:\n- id: /.*/\n  plan_requirements: [signed]',
      /"signed" is not a valid plan_requirement, only "approved", "mergeable" and "undiverged" are supported/,
    ],
    ['repos:\n- id: /.*/\n  repo_locks: {mode: sometimes}', /repos\[0\]\.repo_locks\.mode: must be a valid value/],
    ['repos:\n- id: /.*/\n  frobnicate: true', /repos\[0\]: unknown key "frobnicate"/],
  ];
  for (const [text, re] of rows) assert.throws(() => parseServerSideRepoConfig(text), re, text);
});

test('allowed_overrides: every key of a project is checked, in Atlantis order and words', () => {
  const keys: Array<[string, string]> = [
    ['workflow', 'w'],
    ['apply_requirements', '[approved]'],
    ['plan_requirements', '[approved]'],
    ['import_requirements', '[approved]'],
    ['delete_source_branch_on_merge', 'true'],
    ['repo_locking', 'true'],
    ['repo_locks', '{mode: on_apply}'],
    ['custom_policy_check', 'false'],
    ['silence_pr_comments', '[plan]'],
  ];
  for (const [key, value] of keys) {
    const c = parseRepoConfig(`version: 3\nworkflows: {w: {}}\nprojects:\n- {dir: x, ${key}: ${value}}\n`);
    const deny = { allowedOverrides: [], allowCustomWorkflows: true };
    assert.equal(
      repoConfigViolation(c, deny),
      `repo config not allowed to set '${key}' key: server-side config needs 'allowed_overrides: [${key}]'`,
    );
    assert.equal(repoConfigViolation(c, { ...deny, allowedOverrides: [key] }), undefined, key);
  }
  // Atlantis has no override check for policy_check.
  const pc = parseRepoConfig('version: 3\nprojects:\n- {dir: x, policy_check: false}\n');
  assert.equal(repoConfigViolation(pc, { allowedOverrides: [], allowCustomWorkflows: false }), undefined);
  const w = parseRepoConfig('version: 3\nworkflows: {mine: {}}\nprojects:\n- {dir: x, workflow: srv}\n- {dir: y, workflow: mine}\n');
  const allow = { allowedOverrides: ['workflow'], allowCustomWorkflows: false, allowedWorkflows: ['other'] };
  assert.equal(
    repoConfigViolation(w, { ...allow, allowCustomWorkflows: true }, ['srv', 'other']),
    "workflow 'srv' is not allowed for this repo",
  );
  assert.equal(repoConfigViolation(w, { ...allow, allowedWorkflows: ['srv', 'mine'], allowCustomWorkflows: true }, ['srv']), undefined);
});

test('readRepoConfig: refused keys fail the command naming them; notices come back for one comment', () => {
  const d = mkdtempSync(path.join(tmpdir(), 'rc-keys-'));
  const server = parseServerSideRepoConfig('repos:\n- id: /.*/\n  allowed_overrides: [silence_pr_comments]\n');
  writeFileSync(path.join(d, 'atlantis.yaml'), 'version: 3\nemoji_reaction: eyes\nprojects:\n- {dir: x, silence_pr_comments: [apply]}\n');
  const c = readRepoConfig(d, server, 'github.com/acme/infra');
  assert.deepEqual(
    c?.unsupported.map((u) => [u.kind, u.key]),
    [['notice', 'projects[0].silence_pr_comments']],
  );
  assert.equal(
    unsupportedKeysComment('atlantis.yaml', c?.unsupported ?? []),
    '**Warning**: `atlantis.yaml` sets keys this server does not implement; the command ran without them:\n\n' +
      '- `projects[0].silence_pr_comments`: silencing plan/apply comments is not implemented; they are posted',
  );
  writeFileSync(path.join(d, 'atlantis.yaml'), 'version: 3\nautodiscover: {mode: enabled}\nprojects:\n- {dir: x}\n');
  assert.throws(() => readRepoConfig(d, server, 'github.com/acme/infra'), {
    message:
      'atlantis.yaml: autodiscover: not supported by this server: autodiscover modes other than auto (and ignore_paths) are not implemented',
  });
  const once = new SaidOnce(2);
  assert.deepEqual(
    ['a', 'a', 'b', 'c', 'a'].map((k) => once.first(k)),
    [true, false, true, true, true],
  );
});

test('repo_config_file and branch: the file is read from the repo_config_file; projects of other branches are left out', () => {
  const d = mkdtempSync(path.join(tmpdir(), 'rc-file-'));
  mkdirSync(path.join(d, 'cfg'));
  writeFileSync(
    path.join(d, 'cfg/prod.yaml'),
    'version: 3\nprojects:\n- {name: p, dir: prod, branch: /^production$/}\n- {name: s, dir: staging, branch: /^staging$/}\n- {dir: all}\n',
  );
  const server = parseServerSideRepoConfig(
    'repos:\n- id: /.*/\n  repo_config_file: cfg/other.yaml\n- id: github.com/acme/infra\n  repo_config_file: cfg/prod.yaml\n',
  );
  assert.equal(serverSettingsFor(server, 'github.com/acme/infra').repoConfigFile, 'cfg/prod.yaml');
  const names = (branch?: string) => readRepoConfig(d, server, 'github.com/acme/infra', branch)?.projects.map((p) => p.name ?? p.dir);
  assert.deepEqual(names('production'), ['p', 'all']);
  assert.deepEqual(names('staging'), ['s', 'all']);
  assert.deepEqual(names(), ['p', 's', 'all']);
  // The other repos' file does not exist: no config.
  assert.equal(readRepoConfig(d, server, 'github.com/acme/other'), undefined);
});

test('version 2: run commands re-joined from their shell words, as Atlantis', () => {
  const c = parseRepoConfig(`version: 2\nworkflows:\n  w:\n    plan:\n      steps:\n      - run: echo "a  b" 'c'\n`);
  assert.equal(c.version, 2);
  assert.deepEqual(c.workflows.w?.plan, [{ kind: 'run', command: 'echo a  b c' }]);
  const v3 = parseRepoConfig(`version: 3\nworkflows:\n  w:\n    plan:\n      steps:\n      - run: echo "a  b" 'c'\n`);
  assert.deepEqual(v3.workflows.w?.plan, [{ kind: 'run', command: `echo "a  b" 'c'` }]);
});

// ---- Atlantis's own doc examples --------------------------------------------------------

const FIXTURES = path.join(import.meta.dirname, 'fixtures/atlantis-v0.47-doc-configs');

/** Doc blocks that are pieces of a config: how each is placed in a whole one. */
const FRAGMENTS: Record<string, (v: unknown) => { repo?: unknown; server?: unknown }> = {
  'repo-level-atlantis-yaml-01.yaml': (v) => ({ repo: { version: 3, ...(v as object) } }),
  'repo-level-atlantis-yaml-11.yaml': (v) => ({ repo: { version: 3, ...(v as object) } }),
  'repo-level-atlantis-yaml-12.yaml': (v) => ({ repo: { version: 3, ...(v as object) } }),
  'repo-level-atlantis-yaml-13.yaml': (v) => ({ repo: { version: 3, ...(v as object) } }),
  'repo-level-atlantis-yaml-14.yaml': (v) => ({ repo: { version: 3, ...(v as object) } }),
  'repo-level-atlantis-yaml-16.yaml': (v) => ({ repo: { version: 3, projects: [v] } }),
  'repo-level-atlantis-yaml-17.yaml': (v) => ({ repo: { version: 3, projects: [{ dir: '.', autoplan: v }] } }),
  'repo-level-atlantis-yaml-18.yaml': (v) => ({ repo: { version: 3, repo_locks: v } }),
  'server-side-repo-config-21.yaml': (v) => ({ server: { repos: [{ id: '/.*/', ...(v as object) }] } }),
  'server-side-repo-config-22.yaml': (v) => ({ server: { repos: [{ id: '/.*/', repo_locks: v }] } }),
  'custom-workflows-13.yaml': (v) => ({ repo: { version: 3, workflows: { w: v } } }),
  'custom-workflows-14.yaml': (v) => ({ repo: { version: 3, workflows: { w: { plan: v } } } }),
  'policy-checking-07.yaml': (v) => ({ server: { policies: { ...(v as object), policy_sets: [{ name: 'p', path: 'p' }] } } }),
  'pre-workflow-hooks-03.yaml': (v) => ({ server: { repos: [{ id: '/.*/', pre_workflow_hooks: v }] } }),
  'post-workflow-hooks-03.yaml': (v) => ({ server: { repos: [{ id: '/.*/', post_workflow_hooks: v }] } }),
  ...Object.fromEntries(
    [15, 16, 17, 18, 19, 20, 21, 22].map((n) => [
      `custom-workflows-${n}.yaml`,
      (v: unknown) => ({ repo: { version: 3, workflows: { w: { plan: { steps: v } } } } }),
    ]),
  ),
};

/** Not a repo config at all: the server's own flags file. */
const NOT_CONFIGS = new Set(['custom-workflows-05.yaml']);

/**
 * Examples that ask for what is not implemented: what each gives here. Everything else must
 * parse with nothing unsupported.
 */
const EXPECTED: Record<string, string> = {
  'custom-workflows-19.yaml': 'repo: refused workflows.w.plan.steps[0].run.output.filter_regex',
  'custom-workflows-21.yaml': 'repo: refused workflows.w.plan.steps[0].multienv',
  'custom-workflows-22.yaml': 'repo: refused workflows.w.plan.steps[0].multienv',
  'repo-level-atlantis-yaml-00.yaml': 'repo: refused autodiscover, notice projects[0].silence_pr_comments',
  'repo-level-atlantis-yaml-12.yaml': 'repo: refused autodiscover',
  'repo-level-atlantis-yaml-13.yaml': 'repo: refused autodiscover',
  'repo-level-atlantis-yaml-14.yaml': 'repo: refused autodiscover',
  'repo-level-atlantis-yaml-16.yaml': 'repo: notice projects[0].silence_pr_comments',
  'server-side-repo-config-00.yaml': 'server: repos[0].autodiscover',
};

function outcome(file: string, doc: unknown): string {
  const wrap = FRAGMENTS[file];
  let kinds: { repo?: unknown; server?: unknown };
  if (wrap) kinds = wrap(doc);
  else {
    const keys = Object.keys(doc as object);
    if (keys.includes('version')) kinds = { repo: doc };
    // "repos.yaml or atlantis.yaml": a workflows-only block is tried as both.
    else if (keys.every((k) => k === 'workflows')) kinds = { server: doc, repo: { version: 3, ...(doc as object) } };
    else kinds = { server: doc };
  }
  const out: string[] = [];
  if (kinds.server !== undefined) {
    try {
      // The docs' repos.yaml sits beside its policies (/home/atlantis/...): any config dir holding them does.
      parseServerSideRepoConfig(YAML.stringify(kinds.server), 'repos.yaml', '/');
    } catch (e) {
      const problems = (e as RepoConfigError).problems;
      assert.ok(
        problems.every((p) => p.includes(': is not supported by this server: ')),
        `${file}: only unimplemented keys may stop it:\n${problems.join('\n')}`,
      );
      out.push(`server: ${problems.map((p) => p.split(': is not supported')[0]).join(', ')}`);
    }
  }
  if (kinds.repo !== undefined) {
    const c = parseRepoConfig(YAML.stringify(kinds.repo));
    if (c.unsupported.length > 0) out.push(`repo: ${c.unsupported.map((u) => `${u.kind} ${u.key}`).join(', ')}`);
  }
  return out.join(' | ');
}

test("every config example of Atlantis's docs parses; what is not implemented is named", () => {
  const files = readdirSync(FIXTURES).filter((f) => f.endsWith('.yaml'));
  assert.ok(files.length >= 98, `${files.length} doc examples`);
  let checked = 0;
  for (const file of files.sort()) {
    if (NOT_CONFIGS.has(file)) continue;
    // Some blocks hold several files as YAML documents.
    const docs = YAML.parseAllDocuments(readFileSync(path.join(FIXTURES, file), 'utf8'), { merge: true });
    for (const doc of docs) {
      assert.deepEqual(doc.errors, [], file);
      assert.equal(outcome(file, doc.toJS()), EXPECTED[file] ?? '', file);
      checked++;
    }
  }
  assert.ok(checked >= 98, `${checked} configs checked`);
});

test('YAML merge keys (<<: *anchor), as in the docs example, are read as Atlantis reads them', () => {
  const text = readFileSync(path.join(FIXTURES, 'repo-level-atlantis-yaml-01.yaml'), 'utf8');
  const c = parseRepoConfig(`version: 3\n${text}`);
  assert.deepEqual(
    c.projects.map((p) => [p.name, p.dir, p.workspace, p.workflow]),
    [
      ['template', 'template', 'default', 'custom'],
      ['ue1-prod-titan', 'terraform/titan', 'ue1-prod', 'custom'],
      ['ue1-stage-titan', 'terraform/titan', 'ue1-stage', 'custom'],
      ['ue1-dev-titan', 'terraform/titan', 'ue1-dev', 'custom'],
    ],
  );
});
