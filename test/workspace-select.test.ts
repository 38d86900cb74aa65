// When the project runner selects a workspace before plan and apply: on `default` without
// doubt it starts no `terraform workspace select` (a whole terraform process per plan);
// everywhere else it selects. Real ProjectRunner, process host and terraform (terraform_data).
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { type LogFields, type Logger, nullLogger } from '../src/log.js';
import { ProcessHost } from '../src/server/terraform/process-host.js';
import { ProcessRunner } from '../src/server/terraform/runner.js';
import { type ProjectRunContext, ProjectRunner, onDefaultWorkspace } from '../src/server/workflow/jobs/project-runner.js';
import { projectRunContext } from './support/project-run-context.js';
import { TERRAFORM, assertTerraform } from './support/terraform.js';

const started: string[][] = [];
const recorder: Logger = {
  ...nullLogger(),
  debug(msg: string, fields?: LogFields) {
    if (msg === 'Process started') started.push((fields?.args as string[] | undefined) ?? []);
  },
  child: () => recorder,
};
const host = new ProcessHost({ logger: nullLogger() });
const dirs: string[] = [];
after(() => {
  host.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const runner = new ProjectRunner(new ProcessRunner({ host, binary: TERRAFORM, interruptGraceMs: 10_000, logger: recorder }));

function project(workspace: string, files: Record<string, string> = {}): ProjectRunContext {
  const dir = mkdtempSync(path.join(tmpdir(), 'ato-ws-'));
  dirs.push(dir);
  writeFileSync(path.join(dir, 'main.tf'), 'resource "terraform_data" "ws" {\n  input = terraform.workspace\n}\n');
  for (const [f, body] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
    writeFileSync(path.join(dir, f), body);
  }
  return projectRunContext(dir, `ws-${workspace}`, workspace);
}

const selects = (): string[][] => started.filter((a) => a[0] === 'workspace');
const planAndApply = async (c: ProjectRunContext): Promise<string> => {
  const plan = await runner.runSteps(
    [
      { kind: 'init', extraArgs: [] },
      { kind: 'plan', extraArgs: [] },
    ],
    c,
  );
  assert.equal(plan.ok, true, plan.log);
  const apply = await runner.runSteps([{ kind: 'apply', extraArgs: [] }], c);
  assert.equal(apply.ok, true, apply.log);
  return plan.output;
};

test('default, no .terraform/environment: plan and apply start no `workspace select`', { timeout: 120_000 }, async () => {
  assertTerraform();
  started.length = 0;
  const out = await planAndApply(project('default'));
  assert.match(out, /input\s*=\s*"default"/);
  assert.ok(
    started.some((a) => a[0] === 'plan'),
    `the plan ran: ${JSON.stringify(started)}`,
  );
  assert.deepEqual(selects(), []);
});

test('another workspace, or a committed .terraform/environment: selected before plan and apply', { timeout: 180_000 }, async () => {
  assertTerraform();
  started.length = 0;
  assert.match(await planAndApply(project('staging')), /input\s*=\s*"staging"/);
  assert.equal(selects().length, 2, JSON.stringify(selects()));
  started.length = 0;
  assert.match(await planAndApply(project('default', { '.terraform/environment': 'prod' })), /input\s*=\s*"default"/);
  assert.deepEqual(
    selects().map((a) => a.at(-1)),
    ['default', 'default'],
  );
});

test('onDefaultWorkspace: certain only with no environment file and neither TF_WORKSPACE nor TF_DATA_DIR', async () => {
  const plain = project('default').projectDir;
  const withFile = project('default', { '.terraform/environment': 'default' }).projectDir;
  const withDir = project('default').projectDir;
  mkdirSync(path.join(withDir, '.terraform', 'environment'), { recursive: true });
  const withLink = project('default').projectDir;
  mkdirSync(path.join(withLink, '.terraform'));
  symlinkSync('/nonexistent/environment', path.join(withLink, '.terraform', 'environment'));
  const rows: Array<[string, string, Record<string, string>, boolean]> = [
    ['no file', plain, {}, true],
    ['TF_WORKSPACE set', plain, { TF_WORKSPACE: 'prod' }, false],
    ['TF_WORKSPACE empty', plain, { TF_WORKSPACE: '' }, true],
    ['TF_DATA_DIR set', plain, { TF_DATA_DIR: '/elsewhere' }, false],
    ['a file, even naming default', withFile, {}, false],
    ['a directory', withDir, {}, false],
    ['a dangling symlink', withLink, {}, false],
  ];
  for (const [what, dir, env, want] of rows) assert.equal(await onDefaultWorkspace(dir, env), want, what);
});
