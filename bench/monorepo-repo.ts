// The monorepo of the large-PR bench: PROJECTS projects declared in atlantis.yaml, each a root
// module using the test provider (hack/provider, installed through the provider network
// mirror) with a few resources and a committed .terraform.lock.hcl, as terraform recommends.
// Shared local modules are used by nested sets of projects: modules/used-by-<n> by projects
// 0..n-1, for each n of SHARED_SIZES; a project's when_modified names its own files and the
// modules it calls. A pull request that changes modules/used-by-<n> therefore touches exactly
// n projects, and every one of them plans a change.
import { FIXTURE_SOURCE } from '../test/support/provider-mirror.js';

export const PROJECTS = 200;
export const SHARED_SIZES = [10, 50, 100, 150] as const;
/** fixture_value resources of each project's own (the modules add one each). */
const VALUES_PER_PROJECT = 3;

export const projectName = (i: number): string => `p${String(i).padStart(3, '0')}`;
const moduleDir = (n: number): string => `modules/used-by-${n}`;

export interface LockedProvider {
  version: string;
  /** The package's h1: hash and the release zip's zh: hash, from the mirror. */
  h1: string;
  zh: string;
}

function lockFile(p: LockedProvider): string {
  return `# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/${FIXTURE_SOURCE}" {
  version     = "${p.version}"
  constraints = "${p.version}"
  hashes = [
    "${p.h1}",
    "${p.zh}",
  ]
}
`;
}

function moduleMain(n: number, revision: string): string {
  return `terraform {
  required_providers {
    fixture = {
      source = "${FIXTURE_SOURCE}"
    }
  }
}

variable "name" {
  type = string
}

resource "fixture_value" "shared" {
  value = "\${var.name}-used-by-${n}-${revision}"
}

output "value" {
  value = fixture_value.shared.output
}
`;
}

function projectMain(i: number, version: string): string {
  const name = projectName(i);
  const modules = SHARED_SIZES.filter((n) => i < n)
    .map((n) => `module "used_by_${n}" {\n  source = "../../${moduleDir(n)}"\n  name   = "${name}"\n}\n`)
    .join('\n');
  return `terraform {
  required_providers {
    fixture = {
      source  = "${FIXTURE_SOURCE}"
      version = "${version}"
    }
  }
}

provider "fixture" {
  label = "${name}"
}

resource "fixture_value" "v" {
  count = ${VALUES_PER_PROJECT}
  value = "${name}-\${count.index}"
}
${modules ? `\n${modules}` : ''}
output "values" {
  value = fixture_value.v[*].output
}
`;
}

function atlantisYaml(): string {
  const lines = ['version: 3', 'parallel_plan: true', 'parallel_apply: true', 'projects:'];
  for (let i = 0; i < PROJECTS; i++) {
    const patterns = ['*.tf', '.terraform.lock.hcl', ...SHARED_SIZES.filter((n) => i < n).map((n) => `../../${moduleDir(n)}/*.tf`)];
    lines.push(
      `- name: ${projectName(i)}`,
      `  dir: projects/${projectName(i)}`,
      '  autoplan:',
      `    when_modified: [${patterns.map((p) => JSON.stringify(p)).join(', ')}]`,
    );
  }
  return `${lines.join('\n')}\n`;
}

/** The base branch's files. */
export function monorepoFiles(p: LockedProvider): Record<string, string> {
  const files: Record<string, string> = { 'README.md': '# monorepo\n', 'atlantis.yaml': atlantisYaml() };
  for (const n of SHARED_SIZES) files[`${moduleDir(n)}/main.tf`] = moduleMain(n, 'v1');
  for (let i = 0; i < PROJECTS; i++) {
    files[`projects/${projectName(i)}/main.tf`] = projectMain(i, p.version);
    files[`projects/${projectName(i)}/.terraform.lock.hcl`] = lockFile(p);
  }
  return files;
}

/** The change of the pull request that touches `n` projects: a new revision of modules/used-by-<n>. */
export function sharedModuleChange(n: number): Record<string, string> {
  if (!SHARED_SIZES.includes(n as (typeof SHARED_SIZES)[number])) throw new Error(`no shared module used by ${n} projects`);
  return { [`${moduleDir(n)}/main.tf`]: moduleMain(n, 'v2') };
}
