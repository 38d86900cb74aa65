// --skip-clone-no-changes' pure decision (src/server/workflow/checkout/skip-clone.ts), as
// Atlantis v0.47's project command builder makes it: the clone is skipped only when the repo
// config read through the API lists projects and no changed file matches any project's
// when_modified (autoplan enabled or not); every other case clones.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type RemoteRepoConfig, cloneDecision } from '../src/server/workflow/checkout/skip-clone.js';
import { parseRepoConfig } from '../src/server/workflow/repo-config/atlantis-yaml.js';

const cfg = (text: string): RemoteRepoConfig => ({ kind: 'config', config: parseRepoConfig(text) });
const PROJECTS = cfg(
  'version: 3\nprojects:\n- dir: app1\n- dir: app2\n  autoplan:\n    when_modified: ["*.tf", "../modules/**/*.tf"]\n- dir: app3\n  autoplan:\n    enabled: false\n',
);

const cases: Array<{ name: string; remote: RemoteRepoConfig; changed: string[]; skip: boolean; why?: RegExp }> = [
  { name: 'only a README changed', remote: PROJECTS, changed: ['README.md'], skip: true },
  { name: 'no file changed', remote: PROJECTS, changed: [], skip: true },
  {
    name: 'a project file changed',
    remote: PROJECTS,
    changed: ['README.md', 'app1/main.tf'],
    skip: false,
    why: /^1 project\(s\) modified$/,
  },
  { name: 'a when_modified outside the project dir', remote: PROJECTS, changed: ['modules/x/a.tf'], skip: false, why: /modified/ },
  { name: 'a file the default when_modified leaves out', remote: PROJECTS, changed: ['app1/notes.txt'], skip: true },
  { name: 'a project with autoplan disabled still counts', remote: PROJECTS, changed: ['app3/main.tf'], skip: false, why: /modified/ },
  { name: 'a changed path leaving the repo', remote: PROJECTS, changed: ['../app1/main.tf'], skip: true },
  {
    name: 'no repo config at the head',
    remote: { kind: 'none' },
    changed: ['README.md'],
    skip: false,
    why: /^no atlantis\.yaml at the head commit$/,
  },
  {
    name: 'a repo config over the bound',
    remote: { kind: 'too-large' },
    changed: ['README.md'],
    skip: false,
    why: /larger than 1048576 bytes/,
  },
  { name: 'a repo config without projects', remote: cfg('version: 3\n'), changed: ['README.md'], skip: false, why: /defines no projects/ },
  {
    name: 'projects all left out by their branch regex',
    remote: {
      kind: 'config',
      config: parseRepoConfig('version: 3\nprojects:\n- {dir: app1, branch: /^release$/}\n', 'atlantis.yaml', { baseBranch: 'main' }),
    },
    changed: ['README.md'],
    skip: false,
    why: /defines no projects/,
  },
];

describe('cloneDecision (--skip-clone-no-changes)', () => {
  for (const c of cases) {
    it(`${c.name}: ${c.skip ? 'skip' : 'clone'}`, () => {
      const d = cloneDecision(c.remote, c.changed, 'atlantis.yaml');
      assert.equal(!d.clone, c.skip);
      if (d.clone && c.why) assert.match(d.why, c.why);
    });
  }
});
