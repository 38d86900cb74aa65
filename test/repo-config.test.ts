// atlantis.yaml v3 parsing, server-side config, when_modified, project selection.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadRepoConfig, parseRepoConfig } from '../src/server/workflow/repo-config/atlantis-yaml.js';
import { repoConfigViolation } from '../src/server/workflow/checkout/projects.js';
import { projectsForChangedFiles, resolveCommentTarget } from '../src/server/workflow/repo-config/project-selection.js';
import { parseServerSideRepoConfig, serverSettingsFor } from '../src/server/workflow/repo-config/server-side.js';
import { DEFAULT_WORKFLOW, type RepoConfig, RepoConfigError } from '../src/server/workflow/repo-config/types.js';

const FULL = `
version: 3
automerge: true
parallel_plan: true
projects:
  - name: prod
    dir: envs/prod
    workspace: default
    autoplan:
      when_modified: ["*.tf", "../../modules/**/*.tf"]
      enabled: true
    apply_requirements: [approved, mergeable]
    workflow: custom
  - dir: envs/staging
    workspace: staging
  - name: manual
    dir: manual
    autoplan:
      enabled: false
workflows:
  custom:
    plan:
      steps:
        - run: echo hi
        - init:
            extra_args: ["-upgrade"]
        - plan
        - run:
            command: ./check.sh
            output: hide
        - env:
            name: FOO
            value: bar
    apply:
      steps: [apply]
`;

function cfg(text = FULL): RepoConfig {
  return parseRepoConfig(text);
}

test('parses a full v3 config', () => {
  const c = cfg();
  assert.equal(c.version, 3);
  assert.equal(c.automerge, true);
  assert.equal(c.parallelPlan, true);
  assert.equal(c.parallelApply, undefined, 'unset: --parallel-apply decides');
  assert.equal(c.abortOnExecutionOrderFail, false);
  assert.equal(c.projects.length, 3);
  const [prod, staging, manual] = c.projects;
  assert.deepEqual(prod, {
    name: 'prod',
    dir: 'envs/prod',
    workspace: 'default',
    autoplan: { enabled: true, whenModified: ['*.tf', '../../modules/**/*.tf'] },
    applyRequirements: ['approved', 'mergeable'],
    workflow: 'custom',
    keys: ['name', 'dir', 'workspace', 'autoplan', 'apply_requirements', 'workflow'],
  });
  assert.deepEqual(staging, {
    dir: 'envs/staging',
    workspace: 'staging',
    autoplan: { enabled: true, whenModified: ['**/*.tf*', '**/*.tofu', '**/*.tofu.json', '**/terragrunt.hcl', '**/.terraform.lock.hcl'] },
    keys: ['dir', 'workspace'],
  });
  assert.equal(manual?.autoplan.enabled, false);
  const wf = c.workflows.custom!;
  assert.deepEqual(wf.plan, [
    { kind: 'run', command: 'echo hi' },
    { kind: 'init', extraArgs: ['-upgrade'] },
    { kind: 'plan', extraArgs: [] },
    { kind: 'run', command: './check.sh', output: 'hide' },
    { kind: 'env', name: 'FOO', value: 'bar' },
  ]);
  assert.deepEqual(wf.apply, [{ kind: 'apply', extraArgs: [] }]);
});

test('minimal config and defaults', () => {
  const c = cfg('version: 3\n');
  assert.deepEqual(c.projects, []);
  assert.deepEqual(c.workflows, {});
  const c2 = cfg('version: 3\nprojects:\n- dir: .\nworkflows:\n  w:\n    plan:\n      steps: [init, plan]\n');
  assert.equal(c2.projects[0]?.dir, '.');
  assert.deepEqual(c2.workflows.w?.apply, DEFAULT_WORKFLOW.apply);
});

test('execution order, dependencies and plan/import requirements are read', () => {
  const c = cfg(`version: 3
parallel_plan: false
parallel_apply: true
abort_on_execution_order_fail: true
projects:
- name: net
  dir: net
  execution_order_group: 1
  plan_requirements: [undiverged]
  import_requirements: [approved]
- name: app
  dir: app
  execution_order_group: 2
  depends_on: [net]
`);
  assert.equal(c.parallelPlan, false);
  assert.equal(c.parallelApply, true);
  assert.equal(c.abortOnExecutionOrderFail, true);
  assert.deepEqual(c.unsupported, []);
  const [net, app] = projectsForChangedFiles(c, ['net/main.tf', 'app/main.tf'], {});
  assert.deepEqual(
    [net?.executionOrderGroup, net?.planRequirements, net?.importRequirements, net?.dependsOn],
    [1, ['undiverged'], ['approved'], []],
  );
  assert.deepEqual([app?.executionOrderGroup, app?.dependsOn, app?.planRequirements], [2, ['net'], []]);
});

test('keys implemented elsewhere parse; unimplemented ones are listed by kind (keys.ts; table in repo-config-keys.test.ts)', () => {
  const c = cfg(
    'version: 3\ndelete_source_branch_on_merge: true\nsilence_pr_comments: [plan]\nprojects:\n- dir: x\n  execution_order_group: 1\n  branch: /main/\n',
  );
  assert.deepEqual(c.unsupported, [
    { key: 'silence_pr_comments', kind: 'notice', why: 'silencing plan/apply comments is not implemented; they are posted' },
  ]);
});

const bad: [string, RegExp][] = [
  ['projects: []', /version: is required/],
  ['version: 4', /version: only versions 2 and 3 are supported/],
  ['version: 3\nprojects:\n- workspace: x', /projects\[0\]\.dir: is required/],
  ['version: 3\nprojects:\n- dir: ../x', /projects\[0\]\.dir: "\.\.\/x" must be a relative path inside the repo/],
  ['version: 3\nprojects:\n- dir: /abs', /projects\[0\]\.dir: "\/abs" must be a relative path/],
  ['version: 3\nprojects:\n- dir: x\n  workspace: a/b', /projects\[0\]\.workspace: "a\/b" is not a valid workspace name/],
  ['version: 3\nprojects:\n- dir: x\n  workspace: ".."', /is not a valid workspace name/],
  [
    'version: 3\nprojects:\n- dir: x\n  apply_requirements: [approved, signed]',
    /"signed" is not a valid apply_requirement, only "approved", "mergeable" and "undiverged" are supported/,
  ],
  [
    'version: 3\nprojects:\n- dir: x\n  plan_requirements: [policies_passed]',
    /"policies_passed" is not a valid plan_requirement, only "approved", "mergeable" and "undiverged" are supported/,
  ],
  ['version: 3\nprojects:\n- dir: x\n  execution_order_group: first', /projects\[0\]\.execution_order_group: must be an integer/],
  ['version: 3\nprojects:\n- dir: x\n  depends_on: a', /projects\[0\]\.depends_on: must be a list/],
  ['version: 3\nabort_on_execution_order_fail: yes-please', /abort_on_execution_order_fail: must be true or false/],
  [
    'version: 3\nprojects:\n- dir: x\n  name: a\n- dir: y\n  name: a',
    /found two or more projects with name "a"; project names must be unique/,
  ],
  ['version: 3\nprojects:\n- dir: x\n- dir: x', /two or more projects with dir: "x" workspace: "default" that are not all named/],
  ['version: 3\nprojects:\n- dir: x\n  bogus: 1', /projects\[0\]: unknown key "bogus"/],
  ['version: 3\nwhat: 1', /unknown key "what"/],
  ['version: 3\nprojects:\n- dir: x\n  autoplan:\n    enabled: maybe', /autoplan\.enabled: must be true or false/],
  ['version: 3\nprojects:\n- dir: x\n  autoplan:\n    when_modified: "*.tf"', /when_modified: must be a list of strings/],
  [
    'version: 3\nworkflows:\n  w:\n    plan:\n      steps: [init, terraform]',
    /workflows\.w\.plan\.steps\[1\]: "terraform" is not a valid step type, maybe you omitted the 'run' key/,
  ],
  ['version: 3\nworkflows:\n  w:\n    plan:\n      steps:\n      - run: ""', /steps\[0\]\.run: cannot be empty/],
  ['version: 3\nworkflows:\n  w:\n    plan:\n      steps:\n      - env: {name: A}', /env steps need a "value" or a "command" key/],
  ['version: 3\nworkflows:\n  w:\n    plan:\n      steps:\n      - init: {args: [x]}', /init: unknown key "args"/],
  ['version: 3\nworkflows:\n  w:\n    plan:\n      steps:\n      - {init: null, plan: null}', /exactly one key/],
  ['version: 3\nprojects: {dir: x}', /projects: must be a list/],
  ['- just a list', /must be a YAML map/],
  ['version: 3\nversion: 3', /YAML: /],
  ['version: [3', /YAML: /],
  ['version: 3\nprojects:\n- dir: x\n  branch: /(/', /projects\[0\]\.branch: parsing: \/\(\/: /],
  [
    'version: 3\nprojects:\n- dir: x\n  branch: /(a)\\1/',
    /projects\[0\]\.branch: parsing: .*backreferences and lookaround are not supported/,
  ],
];

for (const [text, msg] of bad) {
  test(`invalid config → ${msg.source}`, () => {
    assert.throws(
      () => parseRepoConfig(text),
      (e: unknown) => {
        assert.ok(e instanceof RepoConfigError);
        assert.match(e.message, /^atlantis\.yaml: /);
        assert.match(e.message, msg);
        return true;
      },
    );
  });
}

test('every problem is reported at once', () => {
  try {
    parseRepoConfig('version: 3\nprojects:\n- {}\n- dir: ../a\n');
    assert.fail('should throw');
  } catch (e) {
    assert.ok(e instanceof RepoConfigError);
    assert.equal(e.problems.length, 2);
  }
});

test('a workflow defined server-side may be named by a project', () => {
  const c = parseRepoConfig('version: 3\nprojects:\n- dir: x\n  workflow: srv\n');
  const allowed = { allowedOverrides: ['workflow'], allowCustomWorkflows: false };
  assert.equal(repoConfigViolation(c, allowed), 'workflow "srv" is not defined anywhere');
  assert.equal(repoConfigViolation(c, allowed, ['srv']), undefined);
  const srv = { name: 'srv', plan: [{ kind: 'plan' as const, extraArgs: ['-lock-timeout=5m'] }], apply: DEFAULT_WORKFLOW.apply };
  const r = resolveCommentTarget(c, { dir: 'x' }, { workflows: { srv } });
  assert.equal(r.kind === 'projects' && r.projects[0]?.workflow.name, 'srv');
});

test('loadRepoConfig reads atlantis.yaml (or the repo_config_file), refuses atlantis.yml as Atlantis, undefined without', () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'rc-'));
  assert.equal(loadRepoConfig(d), undefined);
  fs.writeFileSync(path.join(d, 'atlantis.yaml'), 'version: 3\nprojects:\n- dir: a\n');
  assert.equal(loadRepoConfig(d)?.projects[0]?.dir, 'a');
  fs.mkdirSync(path.join(d, 'cfg'));
  fs.writeFileSync(path.join(d, 'cfg/other.yaml'), 'version: 3\nprojects:\n- dir: b\n');
  assert.equal(loadRepoConfig(d, { file: 'cfg/other.yaml' })?.projects[0]?.dir, 'b');
  fs.writeFileSync(path.join(d, 'atlantis.yaml'), 'version: 4\n');
  assert.throws(() => loadRepoConfig(d), RepoConfigError);
  fs.writeFileSync(path.join(d, 'atlantis.yml'), 'version: 3\n');
  assert.throws(() => loadRepoConfig(d), { message: 'found "atlantis.yml" as config file; rename using the .yaml extension' });
});

// The matching itself is table-tested in when-modified.test.ts; here, how the config uses it.
test('when_modified: patterns are checked and bounded when atlantis.yaml is read, naming the key', () => {
  const yaml = (wm: string[]) => `version: 3\nprojects:\n- dir: app\n  autoplan:\n    when_modified: ${JSON.stringify(wm)}\n`;
  const refused = (wm: string[], re: RegExp) =>
    assert.throws(
      () => parseRepoConfig(yaml(wm)),
      (e: unknown) => e instanceof RepoConfigError && re.test(e.message),
      `${JSON.stringify(wm).slice(0, 80)} → ${re.source}`,
    );
  refused(
    Array.from({ length: 101 }, (_, i) => `f${i}.tf`),
    /projects\[0\]\.autoplan\.when_modified: at most 100 patterns are allowed, got 101/,
  );
  refused(
    ['*.tf', 'x'.repeat(1025)],
    /projects\[0\]\.autoplan\.when_modified\[1\]: a pattern may be at most 1024 characters long, got 1025/,
  );
  refused(['*.tf', '[a'], /projects\[0\]\.autoplan\.when_modified\[1\]: "\[a" is not a valid pattern: unclosed \[/);
  refused(['[[:digit:]].tf'], /when_modified\[0\]: .*\[: inside \[\.\.\.\] is not supported/);
  // At the bounds, and the pathological shape itself, are fine.
  const ok = parseRepoConfig(yaml([...Array.from({ length: 99 }, (_, i) => `f${i}.tf`), '*a'.repeat(511) + '*c']));
  assert.equal(ok.projects[0]?.autoplan.whenModified.length, 100);
});

test('projectsForChangedFiles with a config: when_modified relative to the project dir', () => {
  const c = cfg();
  const names = (files: string[]) => projectsForChangedFiles(c, files).map((p) => p.name ?? `${p.dir}/${p.workspace}`);
  assert.deepEqual(names(['envs/prod/main.tf']), ['prod']);
  assert.deepEqual(names(['envs/prod/sub/main.tf']), []); // "*.tf" does not cross dirs
  assert.deepEqual(names(['modules/vpc/main.tf']), ['prod']);
  assert.deepEqual(names(['envs/staging/x/y.tfvars']), ['envs/staging/staging']);
  assert.deepEqual(names(['manual/main.tf']), []); // autoplan disabled
  assert.deepEqual(names(['README.md']), []);
  const [prod] = projectsForChangedFiles(c, ['envs/prod/main.tf']);
  assert.equal(prod?.workflow.name, 'custom');
  assert.deepEqual(prod?.applyRequirements, ['approved', 'mergeable']);
  assert.equal(prod?.configured, true);
});

test('projectsForChangedFiles without config: dirs of changed terraform files', () => {
  const got = projectsForChangedFiles(undefined, [
    'b/main.tf',
    'a/vars.tfvars',
    'a/other.tf',
    'docs/x.md',
    'main.tf',
    'c/env/dev.tfvars',
    'd/x.tfvars.json',
    'e/.terraform.lock.hcl',
    'f/x.tofu',
    'g/x.tf.json',
  ]);
  assert.deepEqual(
    got.map((p) => p.dir),
    ['.', 'a', 'b', 'c', 'd', 'e', 'f', 'g'],
  );
  assert.ok(got.every((p) => p.workspace === 'default' && p.workflow === DEFAULT_WORKFLOW && !p.configured));
  assert.deepEqual(projectsForChangedFiles(undefined, ['x/README.md']), []);
  assert.deepEqual(
    projectsForChangedFiles(undefined, ['stack/modules/vpc/main.tf']).map((p) => p.dir),
    ['stack'],
  );
});

test('projectsForChangedFiles without config and with the checkout: deleted dirs and module-only changes skipped', () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'rc-'));
  fs.mkdirSync(path.join(d, 'live'), { recursive: true });
  fs.writeFileSync(path.join(d, 'live/main.tf'), '');
  fs.mkdirSync(path.join(d, 'lib/modules/m'), { recursive: true });
  fs.writeFileSync(path.join(d, 'lib/modules/m/main.tf'), '');
  const got = projectsForChangedFiles(undefined, ['live/main.tf', 'gone/main.tf', 'lib/modules/m/main.tf'], { repoDir: d });
  assert.deepEqual(
    got.map((p) => p.dir),
    ['live'],
  );
});

test('server-side defaults apply to projects that do not set their own', () => {
  const wf = { name: 'srv', plan: [{ kind: 'plan' as const, extraArgs: [] }], apply: [{ kind: 'apply' as const, extraArgs: [] }] };
  const got = projectsForChangedFiles(undefined, ['a/main.tf'], { defaults: { applyRequirements: ['approved'], workflow: wf } });
  assert.deepEqual(got[0]?.applyRequirements, ['approved']);
  assert.equal(got[0]?.workflow.name, 'srv');
  const c = cfg();
  const staging = projectsForChangedFiles(c, ['envs/staging/main.tf'], { defaults: { applyRequirements: ['mergeable'] } });
  assert.deepEqual(staging[0]?.applyRequirements, ['mergeable']);
  const prod = projectsForChangedFiles(c, ['envs/prod/main.tf'], { defaults: { applyRequirements: ['mergeable'] } });
  assert.deepEqual(prod[0]?.applyRequirements, ['approved', 'mergeable']);
});

test('resolveCommentTarget', () => {
  const c = cfg();
  assert.deepEqual(resolveCommentTarget(c, {}), { kind: 'all' });
  assert.deepEqual(resolveCommentTarget(undefined, {}), { kind: 'all' });
  const p = resolveCommentTarget(c, { project: 'prod' });
  assert.equal(p.kind === 'projects' && p.projects[0]?.dir, 'envs/prod');
  assert.deepEqual(resolveCommentTarget(c, { project: 'nope' }), {
    kind: 'error',
    message: "no project with name 'nope' is defined in 'atlantis.yaml'",
  });
  assert.deepEqual(resolveCommentTarget(undefined, { project: 'x' }), {
    kind: 'error',
    message: 'cannot specify a project name unless an atlantis.yaml file exists to configure projects',
  });
  const d = resolveCommentTarget(c, { dir: 'envs/staging', workspace: 'staging' });
  assert.equal(d.kind === 'projects' && d.projects[0]?.configured, true);
  // configured dir, other workspace → default project there
  const other = resolveCommentTarget(c, { dir: 'envs/staging' });
  assert.ok(other.kind === 'projects' && other.projects[0]?.configured === false && other.projects[0]?.workspace === 'default');
  // -w alone means dir "."
  const w = resolveCommentTarget(undefined, { workspace: 'qa' });
  assert.ok(w.kind === 'projects' && w.projects[0]?.dir === '.' && w.projects[0]?.workspace === 'qa');
  const two = parseRepoConfig('version: 3\nprojects:\n- {name: a, dir: x}\n- {name: b, dir: x}\n');
  assert.deepEqual(resolveCommentTarget(two, { dir: 'x' }), {
    kind: 'error',
    message: 'must specify project name: more than one project defined in atlantis.yaml matched dir: "x" workspace: "default"',
  });
  assert.equal(resolveCommentTarget(undefined, { dir: '../x' }).kind, 'error');
});

test('server-side repo config', () => {
  const s = parseServerSideRepoConfig(`
repos:
- id: /.*/
  apply_requirements: [approved]
- id: github.com/acme/infra
  apply_requirements: [approved, mergeable]
  workflow: strict
  allowed_overrides: [workflow]
  allow_custom_workflows: true
workflows:
  strict:
    plan:
      steps: [init, plan]
`);
  assert.deepEqual(serverSettingsFor(s, 'github.com/acme/other'), {
    applyRequirements: ['approved'],
    planRequirements: [],
    importRequirements: [],
    allowedOverrides: [],
    allowCustomWorkflows: false,
  });
  assert.deepEqual(serverSettingsFor(s, 'github.com/acme/infra'), {
    applyRequirements: ['approved', 'mergeable'],
    planRequirements: [],
    importRequirements: [],
    workflow: 'strict',
    allowedOverrides: ['workflow'],
    allowCustomWorkflows: true,
  });
  assert.deepEqual(serverSettingsFor(undefined, 'x'), {
    applyRequirements: [],
    planRequirements: [],
    importRequirements: [],
    allowedOverrides: [],
    allowCustomWorkflows: false,
  });
  assert.throws(() => parseServerSideRepoConfig('repos:\n- id: /[/\n'), /repos\[0\]\.id: parsing: \/\[\/: /);
  assert.throws(() => parseServerSideRepoConfig('repos:\n- apply_requirements: []\n'), /repos\[0\]\.id: is required/);
  assert.throws(() => parseServerSideRepoConfig('repos:\n- id: x\n  workflow: nope\n'), /workflow "nope" is not defined/);
});

test('default projects from a real git checkout (support repos), and their terraform plans', async () => {
  const { createTestRepo, terraformConfig, git } = await import('./support/git-repos.js');
  const { execa } = await import('execa');
  const repo = await createTestRepo();
  const head = await repo.createBranch('pr-1', {
    'app1/main.tf': terraformConfig({ marker: 'app1-v2' }),
    'docs/notes.md': 'x\n',
    'app2/main.tf': null,
  });
  assert.match(head, /^[0-9a-f]{40}$/);
  assert.equal(await repo.publishPull(1, 'pr-1'), head);
  assert.deepEqual((await repo.changedFiles('pr-1')).sort(), ['app1/main.tf', 'app2/main.tf', 'docs/notes.md']);
  const clone = fs.mkdtempSync(path.join(os.tmpdir(), 'clone-'));
  await git(clone, ['clone', '-q', repo.cloneUrl, 'w']);
  const wd = path.join(clone, 'w');
  await git(wd, ['fetch', '-q', 'origin', '+refs/pull/1/head:pr']);
  await git(wd, ['checkout', '-q', 'pr']);
  assert.equal(await git(wd, ['rev-parse', 'HEAD']), head);
  // app2 was deleted by the PR: not a project; docs are not terraform.
  const projects = projectsForChangedFiles(undefined, await repo.changedFiles('pr-1'), { repoDir: wd });
  assert.deepEqual(
    projects.map((p) => p.dir),
    ['app1'],
  );
  // The generated config is valid terraform that plans one resource, offline.
  const dir = path.join(wd, 'app1');
  const env = { TF_IN_AUTOMATION: '1', TF_INPUT: '0', CHECKPOINT_DISABLE: '1' };
  await execa('terraform', ['init', '-input=false', '-no-color'], { cwd: dir, env });
  const plan = await execa('terraform', ['plan', '-input=false', '-no-color'], { cwd: dir, env });
  assert.match(plan.stdout, /Plan: 1 to add, 0 to change, 0 to destroy\./);
  assert.match(plan.stdout, /app1-v2/);
  // A second commit moves the head.
  const head2 = await repo.commit('pr-1', { 'app1/extra.tf': '' });
  assert.notEqual(head2, head);
  assert.equal(await repo.headSha('pr-1'), head2);
});

test("a project's branch regex runs in linear time: both it and the base branch come from the PR's side", () => {
  // A backtracking engine spends minutes on this (2^60 paths); Go's RE2, as Atlantis runs it, does not.
  const text = 'version: 3\nprojects:\n- dir: x\n  branch: /^(a|a)*b$/\n- dir: y\n  branch: /^a+$/\n';
  const cfg = parseRepoConfig(text, 'atlantis.yaml', { baseBranch: 'a'.repeat(60) });
  assert.deepEqual(
    cfg.projects.map((p) => p.dir),
    ['y'],
  );
});
