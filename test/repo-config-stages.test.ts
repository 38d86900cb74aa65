// Custom import / state_rm stages of a workflow, run by the real ProjectRunner with real
// terraform (terraform_data, built in: nothing is downloaded) through the process host: the
// stage's import step takes its extra_args, then the comment's args, as Atlantis; without a
// custom stage the default (init, then the command) runs as before.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { nullLogger } from '../src/log.js';
import { ProcessHost } from '../src/server/terraform/process-host.js';
import { ProcessRunner } from '../src/server/terraform/runner.js';
import { type ProjectRunContext, ProjectRunner } from '../src/server/workflow/jobs/project-runner.js';
import { parseRepoConfig } from '../src/server/workflow/repo-config/atlantis-yaml.js';
import { projectRunContext } from './support/project-run-context.js';
import { TERRAFORM, assertTerraform } from './support/terraform.js';

const host = new ProcessHost({ logger: nullLogger() });
after(() => host.close());
const runner = new ProjectRunner(new ProcessRunner({ host, binary: TERRAFORM, interruptGraceMs: 10_000, logger: nullLogger() }));

function project(): ProjectRunContext {
  const dir = mkdtempSync(path.join(tmpdir(), 'ato-stages-'));
  writeFileSync(path.join(dir, 'main.tf'), 'variable "marker" {}\n\nresource "terraform_data" "marker" {\n  input = var.marker\n}\n');
  return projectRunContext(dir, 'stages');
}

const config = parseRepoConfig(`version: 3
workflows:
  w:
    import:
      steps:
        - init
        - run: echo custom-import-stage
        - import:
            extra_args: ["-var=marker=from-stage"]
    state_rm:
      steps:
        - init
        - state_rm
`);

test('a custom import stage runs its steps; its import step gets the extra_args', { timeout: 120_000 }, async () => {
  assertTerraform();
  const wf = config.workflows.w!;
  const c = project();
  const r = await runner.runSteps(wf.import!, c, { importArgs: ['terraform_data.marker', 'some-id'], customStage: true });
  assert.equal(r.ok, true, r.log);
  assert.match(r.log, /custom-import-stage/);
  assert.match(r.output, /Import successful!/);
  const rm = await runner.runSteps(wf.stateRm!, c, { stateRmArgs: ['terraform_data.marker'], customStage: true });
  assert.equal(rm.ok, true, rm.log);
  assert.match(rm.output, /Removed terraform_data\.marker/);
});

test('without a custom stage, init then the default import (no -var: terraform asks for the variable and fails)', {
  timeout: 120_000,
}, async () => {
  assertTerraform();
  const c = project();
  const r = await runner.runSteps([{ kind: 'init', extraArgs: [] }], c, { importArgs: ['terraform_data.marker', 'some-id'] });
  assert.equal(r.ok, false);
  assert.equal(r.failedStep, 'import');
  assert.match(r.output, /marker/);
});

test('env steps run their command through their shell and shellArgs, as Atlantis', { timeout: 60_000 }, async () => {
  const wf = parseRepoConfig(`version: 3
workflows:
  w:
    plan:
      steps:
        - env: {name: VIA, command: 'echo "$0"', shell: bash, shellArgs: -c}
        - env: {name: VIA_DEFAULT, command: 'echo "$0"'}
        - run: echo "via=$VIA default=$VIA_DEFAULT"
`).workflows.w!;
  const r = await runner.runSteps(wf.plan, project());
  assert.equal(r.ok, true, r.log);
  assert.equal(r.output.trim(), 'via=bash default=sh');
});
