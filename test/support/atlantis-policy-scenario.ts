// The policy-check and OpenTofu scenario of the Atlantis differential
// (test/atlantis-differential-policy.test.ts): a server-side repos.yaml with two policy sets
// (real conftest, Rego v1), a PR that fails one of them, approve_policies refused to a
// non-owner and accepted from an owner (a user, then a member of an owner team), the apply
// waiting for policies_passed, a passing PR, a cleared approval, and a project that runs
// OpenTofu (terraform_distribution: opentofu, terraform_version 1.12.6) with its own policy
// check. Both servers get the same files, flags and PATH (conftest, tofu1.12.6).
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { goTool } from './go-tools.js';
import { createTestRepo, terraformConfig } from './git-repos.js';
import type { GitHubStandin } from './github-standin.js';
import { type ScenarioRepos, type Step, removeScenarioRepos } from './atlantis-scenario.js';
import { FIXTURE_DIR, type PreparedScenario, type ScenarioSpec } from './atlantis-differential.js';

export const POLICY_REPO = 'acme/policy';
export const TOFU_REPO = 'acme/tofu';
/** Owner of the no-forbidden policy set, by name. */
export const POLICY_OWNER = 'policy-owner';
/** Member of the acme/policy-admins team, the owners of every policy set. */
export const POLICY_ADMIN = 'policy-admin';
export const TOFU_VERSION = '1.12.6';

/** Denies a terraform_data whose input is "forbidden". */
export const NO_FORBIDDEN_REGO = `package main

deny contains msg if {
	some rc in input.resource_changes
	rc.type == "terraform_data"
	rc.change.after.input == "forbidden"
	msg := sprintf("%s: the value \\"forbidden\\" is not allowed", [rc.address])
}
`;

/** Denies deleting anything: passes on every plan of the scenario. */
export const NO_DESTROY_REGO = `package main

deny contains msg if {
	some rc in input.resource_changes
	"delete" in rc.change.actions
	msg := sprintf("%s would be destroyed", [rc.address])
}
`;

/** The server-side repos.yaml; `configDir` holds it and the policies. */
export function policyRepoConfig(configDir: string): string {
  return `repos:
  - id: /.*/
policies:
  owners:
    teams:
      - policy-admins
  policy_sets:
    - name: no-forbidden
      path: ${configDir}/policies/no-forbidden
      source: local
      owners:
        users:
          - ${POLICY_OWNER}
    - name: no-destroy
      path: ${configDir}/policies/no-destroy
      source: local
`;
}

const TOFU_ATLANTIS_YAML = `version: 3
projects:
  - name: tofu
    dir: infra
    terraform_distribution: opentofu
    terraform_version: ${TOFU_VERSION}
`;

const c = (name: string, repo: string, pull: number, body: string, comments = 1, user?: string): Step => ({
  name,
  repo,
  pull,
  action: { kind: 'comment', body },
  comments,
  ...(user ? { user } : {}),
});
const open = (name: string, repo: string, pull: number, branch: string, files: Record<string, string>, comments: number): Step => ({
  name,
  repo,
  pull,
  action: { kind: 'open', branch, files },
  comments,
});
const close = (name: string, repo: string, pull: number, comments = 1): Step => ({
  name,
  repo,
  pull,
  action: { kind: 'close' },
  comments,
});

/** The steps, in order; autoplan and plan post two comments (the plan, then the policy check). */
export const POLICY_STEPS: Step[] = [
  open('failing autoplan', POLICY_REPO, 1, 'forbidden', { 'dir1/main.tf': terraformConfig({ marker: 'forbidden' }) }, 2),
  c('apply before approval', POLICY_REPO, 1, 'atlantis apply'),
  c('approve_policies by a non-owner', POLICY_REPO, 1, 'atlantis approve_policies'),
  c('approve_policies by an owner', POLICY_REPO, 1, 'atlantis approve_policies', 1, POLICY_OWNER),
  c('apply after approval', POLICY_REPO, 1, 'atlantis apply'),
  close('close the applied PR', POLICY_REPO, 1),
  open('passing autoplan', POLICY_REPO, 2, 'fine', { 'dir2/main.tf': terraformConfig({ marker: 'fine' }) }, 2),
  c('plan by comment', POLICY_REPO, 2, 'atlantis plan', 2),
  c('approve_policies with nothing to approve', POLICY_REPO, 2, 'atlantis approve_policies', 1, POLICY_OWNER),
  close('close the passing PR', POLICY_REPO, 2),
  open('second failing autoplan', POLICY_REPO, 3, 'forbidden-again', { 'dir1/main.tf': terraformConfig({ marker: 'forbidden' }) }, 2),
  c('approve_policies by a team owner', POLICY_REPO, 3, 'atlantis approve_policies --policy-set no-forbidden', 1, POLICY_ADMIN),
  c('clear the approval', POLICY_REPO, 3, 'atlantis approve_policies --clear-policy-approval', 1, POLICY_OWNER),
  c('apply after the approval was cleared', POLICY_REPO, 3, 'atlantis apply'),
  close('close the cleared PR', POLICY_REPO, 3),
  open('OpenTofu autoplan', TOFU_REPO, 1, 'tofu-change', { 'infra/main.tf': terraformConfig({ marker: 'tofu-v2' }) }, 2),
  c('OpenTofu apply', TOFU_REPO, 1, 'atlantis apply'),
  close('OpenTofu close', TOFU_REPO, 1),
];

/** Writes repos.yaml and the policies into a temp dir and links the tools into a bin dir on PATH. */
async function prepare(gh: GitHubStandin): Promise<PreparedScenario> {
  const root = mkdtempSync(path.join(tmpdir(), 'ato-policy-scenario-'));
  const configDir = path.join(root, 'config');
  const binDir = path.join(root, 'bin');
  for (const [name, rego] of [
    ['no-forbidden', NO_FORBIDDEN_REGO],
    ['no-destroy', NO_DESTROY_REGO],
  ] as const) {
    mkdirSync(path.join(configDir, 'policies', name), { recursive: true });
    writeFileSync(path.join(configDir, 'policies', name, 'policy.rego'), rego);
  }
  writeFileSync(path.join(configDir, 'repos.yaml'), policyRepoConfig(configDir));
  mkdirSync(binDir);
  symlinkSync(await goTool('conftest'), path.join(binDir, 'conftest'));
  symlinkSync(await goTool('tofu'), path.join(binDir, `tofu${TOFU_VERSION}`));
  gh.addTeam('acme', 'policy-admins', [POLICY_ADMIN]);
  const base = {
    'README.md': '# infra\n',
    'dir1/main.tf': terraformConfig({ marker: 'dir1-v1' }),
    'dir2/main.tf': terraformConfig({ marker: 'dir2-v1' }),
  };
  const repos = new Map([
    [POLICY_REPO, await createTestRepo({ fullName: POLICY_REPO, files: base })],
    [
      TOFU_REPO,
      await createTestRepo({
        fullName: TOFU_REPO,
        files: { 'README.md': '# tofu\n', 'atlantis.yaml': TOFU_ATLANTIS_YAML, 'infra/main.tf': terraformConfig({ marker: 'tofu-v1' }) },
      }),
    ],
  ]);
  for (const [name, repo] of repos) gh.addRepo(name, { cloneUrl: gh.gitUrl(name), bareDir: repo.bareDir });
  const scenario: ScenarioRepos = { repos };
  return {
    scenario,
    flags: ['--enable-policy-checks', '--repo-config', path.join(configDir, 'repos.yaml')],
    pathDirs: [binDir],
    replace: [[configDir, '<config-dir>']],
    cleanup: () => {
      removeScenarioRepos(scenario);
      rmSync(root, { recursive: true, force: true });
    },
  };
}

export const POLICY_SCENARIO: ScenarioSpec = {
  fixture: path.join(FIXTURE_DIR, 'policy-scenario.json'),
  deliberate: path.join(FIXTURE_DIR, 'policy-deliberate-differences.json'),
  steps: POLICY_STEPS,
  prepare,
};
