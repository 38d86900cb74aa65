// Tiny terraform configurations for tests: `terraform_data` resources whose `local-exec`
// sleeps, so a run can be held open for as long as a test needs. No provider is downloaded
// (terraform_data is built in). Fails loudly when terraform is missing.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export const TERRAFORM = process.env.TF_BINARY ?? '/usr/local/bin/terraform';

export function assertTerraform(): void {
  if (!existsSync(TERRAFORM)) throw new Error(`terraform is required for this test and was not found at ${TERRAFORM}`);
}

/** A config with `count` resources, each sleeping `sleepSeconds` when created. */
export function sleepyConfig(sleepSeconds: number, count = 1): string {
  return `
variable "sleep_seconds" {
  type    = number
  default = ${sleepSeconds}
}

resource "terraform_data" "step" {
  count = ${count}
  input = "step-\${count.index}"
  provisioner "local-exec" {
    command = "sleep \${var.sleep_seconds}"
  }
}

output "steps" {
  value = terraform_data.step[*].output
}
`;
}

/** Creates an initialised terraform working dir and returns its path. */
export function makeTerraformDir(sleepSeconds: number, count = 1, parent?: string): string {
  assertTerraform();
  const base = parent ?? mkdtempSync(path.join(tmpdir(), 'ato-tf-'));
  const dir = parent ? mkdtempSync(path.join(base, 'tf-')) : base;
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'main.tf'), sleepyConfig(sleepSeconds, count));
  execFileSync(TERRAFORM, ['init', '-input=false', '-no-color'], {
    cwd: dir,
    stdio: 'pipe',
    env: { ...process.env, TF_IN_AUTOMATION: '1' },
  });
  return dir;
}

export interface TfState {
  resources?: Array<{ type: string; name: string; instances: Array<{ status?: string; attributes?: Record<string, unknown> }> }>;
}

export function readState(dir: string): TfState {
  return JSON.parse(readFileSync(path.join(dir, 'terraform.tfstate'), 'utf8')) as TfState;
}

/** The local backend's state lock file; present only while terraform holds the lock. */
export function lockFileExists(dir: string): boolean {
  return existsSync(path.join(dir, '.terraform.tfstate.lock.info'));
}
