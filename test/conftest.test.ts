// conftest built from its Go module (hack/conftest) judges real terraform plans: a Rego v1
// policy over `terraform show -json` fails a denied plan with exit code 1 and passes a
// compliant one with 0, as Atlantis's policy_check step relies on.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { execa } from 'execa';
import { goTool } from './support/go-tools.js';
import { TERRAFORM, assertTerraform } from './support/terraform.js';
import { runTfOk } from './support/tf-cli.js';

const POLICY = `package main

import rego.v1

# No terraform_data may hold a value marked forbidden.
deny contains msg if {
  some rc in input.resource_changes
  rc.type == "terraform_data"
  contains(rc.change.after.input, "forbidden")
  msg := sprintf("%s holds a forbidden value", [rc.address])
}

# Nothing may be destroyed.
deny contains msg if {
  some rc in input.resource_changes
  "delete" in rc.change.actions
  msg := sprintf("%s would be destroyed", [rc.address])
}
`;

const POLICY_TEST = `package main

import rego.v1

test_forbidden_denied if {
  count(deny) == 1 with input as {"resource_changes": [{"address": "a", "type": "terraform_data", "change": {"actions": ["create"], "after": {"input": "forbidden"}}}]}
}

test_fine_allowed if {
  count(deny) == 0 with input as {"resource_changes": [{"address": "a", "type": "terraform_data", "change": {"actions": ["create"], "after": {"input": "fine"}}}]}
}
`;

const config = (inputs: string[]): string =>
  inputs.map((v, i) => `resource "terraform_data" "r${i}" {\n  input = ${JSON.stringify(v)}\n}\n`).join('\n');

describe('conftest over terraform plans', { timeout: 900_000 }, () => {
  let conftest: string;
  let root: string;
  let policyDir: string;

  before(async () => {
    assertTerraform();
    conftest = await goTool('conftest');
    root = mkdtempSync(path.join(tmpdir(), 'ato-conftest-'));
    policyDir = path.join(root, 'policy');
    mkdirSync(policyDir);
    writeFileSync(path.join(policyDir, 'terraform.rego'), POLICY);
    writeFileSync(path.join(policyDir, 'terraform_test.rego'), POLICY_TEST);
  });
  after(() => {
    if (root) rmSync(root, { recursive: true, force: true });
  });

  /** terraform plan + show -json of `inputs` as terraform_data resources; returns the JSON file. */
  const planJson = async (name: string, inputs: string[]): Promise<string> => {
    const dir = path.join(root, name);
    mkdirSync(dir);
    writeFileSync(path.join(dir, 'main.tf'), config(inputs));
    await runTfOk(TERRAFORM, ['init', '-input=false', '-no-color'], dir);
    await runTfOk(TERRAFORM, ['plan', '-input=false', '-no-color', '-out=tfplan'], dir);
    const show = await runTfOk(TERRAFORM, ['show', '-json', 'tfplan'], dir);
    const file = path.join(dir, 'plan.json');
    writeFileSync(file, show.stdout);
    return file;
  };

  const test = (file: string, extra: string[] = []) =>
    execa(conftest, ['test', '--no-color', '-p', policyDir, ...extra, file], { reject: false, timeout: 60_000 });

  it('reports its pinned version', async () => {
    const r = await execa(conftest, ['--version'], { timeout: 30_000 });
    assert.match(r.stdout, /^Conftest: 0\.71\.1$/m);
  });

  it('fails a denied plan with exit code 1 and names each failure', async () => {
    const file = await planJson('denied', ['fine', 'forbidden-value']);
    const r = await test(file);
    assert.equal(r.exitCode, 1, r.stdout);
    assert.match(r.stdout, /FAIL - .*plan\.json - main - terraform_data\.r1 holds a forbidden value/);
    assert.match(r.stdout, /1 failure/);

    const j = await test(file, ['-o', 'json']);
    assert.equal(j.exitCode, 1);
    const results = JSON.parse(j.stdout) as Array<{ failures?: Array<{ msg: string }>; successes: number }>;
    assert.deepEqual(
      results.flatMap((x) => x.failures ?? []).map((f) => f.msg),
      ['terraform_data.r1 holds a forbidden value'],
    );
  });

  it('passes a compliant plan with exit code 0', async () => {
    const file = await planJson('compliant', ['fine', 'also-fine']);
    const r = await test(file);
    assert.equal(r.exitCode, 0, r.stdout);
    assert.match(r.stdout, /2 tests, 2 passed, 0 warnings, 0 failures/);
  });

  it('fails a plan that destroys what was applied', async () => {
    const dir = path.join(root, 'destroy');
    mkdirSync(dir);
    writeFileSync(path.join(dir, 'main.tf'), config(['keep', 'drop']));
    await runTfOk(TERRAFORM, ['init', '-input=false', '-no-color'], dir);
    await runTfOk(TERRAFORM, ['apply', '-input=false', '-no-color', '-auto-approve'], dir);
    writeFileSync(path.join(dir, 'main.tf'), config(['keep']));
    await runTfOk(TERRAFORM, ['plan', '-input=false', '-no-color', '-out=tfplan'], dir);
    const file = path.join(dir, 'plan.json');
    writeFileSync(file, (await runTfOk(TERRAFORM, ['show', '-json', 'tfplan'], dir)).stdout);
    const r = await test(file);
    assert.equal(r.exitCode, 1, r.stdout);
    assert.match(r.stdout, /terraform_data\.r1 would be destroyed/);
  });

  it("runs the policy's own Rego unit tests (conftest verify)", async () => {
    const r = await execa(conftest, ['verify', '--no-color', '-p', policyDir], { reject: false, timeout: 60_000 });
    assert.equal(r.exitCode, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /2 tests, 2 passed/);
  });

  it('refuses a policy in pre-v1 Rego syntax with a parse error', async () => {
    const old = path.join(root, 'old-policy');
    mkdirSync(old);
    writeFileSync(path.join(old, 'old.rego'), 'package main\n\ndeny[msg] {\n  msg := "v0 syntax"\n}\n');
    const file = await planJson('any', ['fine']);
    const r = await execa(conftest, ['test', '--no-color', '-p', old, file], { reject: false, timeout: 60_000 });
    assert.notEqual(r.exitCode, 0);
    assert.match(r.stderr + r.stdout, /rego_parse_error/);
  });
});
