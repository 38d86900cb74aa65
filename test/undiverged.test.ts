// The undiverged decision of a merge checkout, table-tested against Atlantis v0.47's rules
// (undiverged_project_impact.go, working_dir.go hasDivergedForPatterns).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseRepoConfig } from '../src/server/workflow/repo-config/atlantis-yaml.js';
import { divergedFilesArgs, divergedForProject } from '../src/server/workflow/checkout/undiverged.js';

const config = parseRepoConfig(`version: 3
projects:
- name: net
  dir: net
- name: app
  dir: app
  autoplan:
    when_modified: ["*.tf", "../modules/**/*.tf"]
`);

describe('divergedForProject', () => {
  const rows: Array<
    [string, Parameters<typeof divergedForProject>[0], { dir: string; workspace: string; name?: string }, string[], boolean]
  > = [
    ['nothing new on the base branch', config, { dir: 'net', workspace: 'default', name: 'net' }, [], false],
    ['a base change in the project', config, { dir: 'net', workspace: 'default', name: 'net' }, ['net/main.tf'], true],
    ['a base change elsewhere', config, { dir: 'net', workspace: 'default', name: 'net' }, ['app/main.tf', 'README.md'], false],
    ['when_modified reaches a module', config, { dir: 'app', workspace: 'default', name: 'app' }, ['modules/vpc/main.tf'], true],
    ['when_modified does not take a README', config, { dir: 'app', workspace: 'default', name: 'app' }, ['app/README.md'], false],
    ['a dir not in atlantis.yaml: default when_modified', config, { dir: 'other', workspace: 'default' }, ['other/x.tfvars'], true],
    ['no atlantis.yaml: default project dirs', undefined, { dir: 'app1', workspace: 'default' }, ['app1/main.tf'], true],
    ['no atlantis.yaml: another dir', undefined, { dir: 'app1', workspace: 'default' }, ['app2/main.tf'], false],
    ['no atlantis.yaml: env/ maps to its parent', undefined, { dir: 'app1', workspace: 'default' }, ['app1/env/prod.tfvars'], true],
  ];
  for (const [what, cfg, p, files, want] of rows) it(what, () => assert.equal(divergedForProject(cfg, p, files), want));
});

describe('divergedFilesArgs', () => {
  it("apply compares HEAD, plan the PR head (HEAD^2) with the base's remote branch", () => {
    assert.deepEqual(divergedFilesArgs('main', false), ['log', 'HEAD..refs/remotes/origin/main', '--name-only', '--format=']);
    assert.deepEqual(divergedFilesArgs('main', true), ['log', 'HEAD^2..refs/remotes/origin/main', '--name-only', '--format=']);
  });
});
