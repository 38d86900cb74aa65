// Attacks through what a PR or a comment hands to terraform, against the real server process
// (GitHub stand-in, real git, real terraform): `-- -out=` at another PR's plan or the store,
// a plan file changed between plan and apply, `import -- -config=<dir outside>`, symlinks
// committed in the PR (-d, atlantis.yaml, -var-file) and a committed `.terraform/environment`.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { CliProcess } from './support/cli.js';
import { terraformConfig } from './support/git-repos.js';
import { STORE_FILENAME } from '../src/server/locks/sqlite-store.js';
import { type WorkflowEnv, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';

let env: WorkflowEnv;
let server: CliProcess | undefined;
let url: string;
const dataDir = tempDataDir();
// Outside every checkout and the data dir: what a symlink or a file argument must not reach.
const outside = mkdtempSync(path.join(tmpdir(), 'ato-outside-'));
const CANARY = 'CANARY-3f1c9e-not-for-prs';

const sha256 = (f: string): string => createHash('sha256').update(readFileSync(f)).digest('hex');
const planFilesOf = (pull: number): string[] => {
  const d = path.join(dataDir, 'plans', 'acme', 'infra', String(pull));
  return existsSync(d)
    ? readdirSync(d)
        .filter((f) => f.endsWith('.tfplan'))
        .map((f) => path.join(d, f))
    : [];
};
const checkout = (pull: number): string => path.join(dataDir, 'repos', 'acme/infra', String(pull), 'default');

/** A config whose plan shows the workspace terraform runs in. */
const workspaceConfig = `resource "terraform_data" "ws" {
  input = "ran-in-\${terraform.workspace}"
}
`;

before(async () => {
  env = await createWorkflowEnv({ ghHost: '127.0.163.1' });
  writeFileSync(path.join(outside, 'main.tf'), terraformConfig({ marker: 'outside-dir' }));
  writeFileSync(path.join(outside, 'secret.txt'), `${CANARY} = = not hcl\n`);
  writeFileSync(path.join(outside, 'atlantis.yaml'), 'version: 3\nprojects:\n- name: from-outside\n  dir: app1\n');
  // Lets a repo define workflows, so their extra_args are PR input too.
  const repoConfig = path.join(outside, 'repos.yaml');
  writeFileSync(repoConfig, 'repos:\n- id: /.*/\n  allowed_overrides: [workflow]\n  allow_custom_workflows: true\n');
  ({ p: server, url } = await startWorkflowServer(env, dataDir, '127.0.163.2', ['--repo-config', repoConfig]));
});
after(async () => {
  server?.child.kill('SIGKILL');
  await env.close();
});

async function commentAndWait(pull: number, body: string, re: RegExp): Promise<string> {
  const n = env.commentsOn(pull).length;
  assert.equal((await env.comment(url, pull, body)).status, 200);
  return (await env.waitForComment(pull, re, { after: n })).body;
}

describe('extra args cannot replace what the server sets', () => {
  it("`-- -out=` at another PR's plan or the store is refused; that PR applies its own plan", async () => {
    await env.openPull(url, 1, 'victim', { 'app1/main.tf': terraformConfig({ marker: 'victim-v2' }) });
    await env.waitForComment(1, /^Ran Plan for dir: `app1`/);
    const [victimPlan] = planFilesOf(1);
    assert.ok(victimPlan, 'PR 1 has a plan file');
    const victimSha = sha256(victimPlan);
    const storeSha = sha256(path.join(dataDir, STORE_FILENAME));

    await env.openPull(url, 2, 'attacker', { 'app2/main.tf': terraformConfig({ marker: 'attacker-v2' }) });
    await env.waitForComment(2, /^Ran Plan for dir: `app2`/);
    const rel = path.relative(path.join(checkout(2), 'app2'), victimPlan);
    for (const args of [`-out=${victimPlan}`, `-out ${rel}`, `--out=${path.join(dataDir, STORE_FILENAME)}`, `-state-out=${victimPlan}`]) {
      const reply = await commentAndWait(2, `atlantis plan -d app2 -- ${args}`, /Error: flag/);
      assert.match(reply, /^```\nError: flag ".*" is not allowed in extra args\.\nUsage of plan:\n/);
    }
    assert.equal(sha256(victimPlan), victimSha, "PR 1's plan file is untouched");
    const apply = await commentAndWait(1, 'atlantis apply', /^Ran Apply for dir: `app1`/);
    assert.match(apply, /applied victim-v2/);
    assert.doesNotMatch(apply, /attacker/);
    // The store was never rewritten by terraform: same schema, still opens (the server runs on).
    assert.ok(existsSync(path.join(dataDir, STORE_FILENAME)) && storeSha.length === 64);
    assert.equal((await fetch(`${url}/healthz`)).status, 200);
    // As Atlantis, the applied project stays locked until its PR closes (merged).
    await env.closePull(url, 1);
    await env.waitForComment(1, /^Locks and plans deleted/);
  });

  it('a plan file changed after the plan is refused at apply, and nothing is applied', async () => {
    const touch = path.join(outside, 'pr3-applied');
    await env.openPull(url, 3, 'tampered', { 'app1/main.tf': terraformConfig({ marker: 'pr3-v2', touchFile: touch }) });
    await env.waitForComment(3, /^Ran Plan for dir: `app1`/);
    const [plan3] = planFilesOf(3);
    const [plan2] = planFilesOf(2);
    assert.ok(plan3 && plan2);
    // What a process able to write the data dir could do: swap in another PR's valid plan.
    copyFileSync(plan2, plan3);
    const reply = await commentAndWait(3, 'atlantis apply -d app1', /^Ran Apply for dir: `app1`/);
    assert.match(reply, /the plan file of this project changed after it was planned .*nothing was applied/);
    assert.doesNotMatch(reply, /applied (pr3|attacker)/);
    assert.equal(existsSync(touch), false, 'no local-exec ran');
    assert.equal(existsSync(path.join(checkout(3), 'app1', 'terraform.tfstate')), false, 'no state written');
    assert.equal(existsSync(path.join(checkout(3), 'app2', 'terraform.tfstate')), false, 'no state written');
    // The plan is discarded; a new plan and apply work.
    await commentAndWait(3, 'atlantis plan -d app1', /^Ran Plan for dir: `app1`/);
    assert.match(await commentAndWait(3, 'atlantis apply -d app1', /^Ran Apply for dir: `app1`/), /applied pr3-v2/);
    await env.closePull(url, 3);
    await env.waitForComment(3, /^Locks and plans deleted/);
  });

  it('a relative -var-file that climbs out of the checkout is refused before terraform reads it', async () => {
    const rel = path.relative(path.join(checkout(2), 'app2'), path.join(outside, 'secret.txt'));
    const reply = await commentAndWait(2, `atlantis plan -d app2 -- -var-file=${rel}`, /^Ran Plan for dir: `app2`/);
    assert.match(reply, /var-file must name a file inside this pull request's checkout/);
    assert.doesNotMatch(reply, new RegExp(CANARY));
  });
});

describe('import -config cannot make terraform read configuration outside the checkout', () => {
  it('-config in both dash forms, absolute or climbing out, is refused before terraform runs; inside, import runs', async () => {
    // A config dir outside the checkout whose only file terraform would quote in its error.
    const config = mkdtempSync(path.join(tmpdir(), 'ato-outside-config-'));
    writeFileSync(path.join(config, 'main.tf'), `${CANARY} = = not hcl\n`);
    const importDataDir = tempDataDir();
    const importing = await startWorkflowServer(env, importDataDir, '127.0.163.3', [
      '--allow-commands',
      'version,plan,apply,unlock,approve_policies,import,state',
    ]);
    try {
      const ask = async (pull: number, body: string, re: RegExp): Promise<string> => {
        const n = env.commentsOn(pull).length;
        assert.equal((await env.comment(importing.url, pull, body)).status, 200);
        return (await env.waitForComment(pull, re, { after: n })).body;
      };
      await env.openPull(importing.url, 12, 'import-config', { 'app1/main.tf': terraformConfig({ marker: 'pr12' }) });
      await env.waitForComment(12, /^Ran Plan for dir: `app1`/);
      const rel = path.relative(path.join(importDataDir, 'repos', 'acme/infra', '12', 'default', 'app1'), config);
      for (const arg of [`-config=${config}`, `--config=${config}`, `-config ${config}`, `--config=${rel}`, `-config ${rel}`]) {
        const reply = await ask(12, `atlantis import -d app1 terraform_data.marker x -- ${arg}`, /config must name a dir inside/);
        assert.doesNotMatch(reply, new RegExp(CANARY), arg);
      }
      const inside = await ask(12, 'atlantis import -d app1 terraform_data.marker x -- -config=.', /^Ran Import for dir: `app1`/);
      assert.doesNotMatch(inside, /must name a dir inside/, 'a config dir inside the checkout is allowed');
      for (const c of env.commentsOn(12)) assert.doesNotMatch(c.body, new RegExp(CANARY));
    } finally {
      importing.p.child.kill('SIGKILL');
    }
  });
});

describe("extra_args of a workflow in the repo's atlantis.yaml are PR input", () => {
  it('a blocked flag or a file outside the checkout in extra_args is refused before terraform runs', async () => {
    const secret = path.relative(path.join(checkout(9), 'app9'), path.join(outside, 'secret.txt'));
    const yaml = `version: 3
projects:
- dir: app1
  workflow: outflag
- dir: app9
  workflow: outfile
workflows:
  outflag:
    plan:
      steps: [init, {plan: {extra_args: ["-out", "${path.join(dataDir, STORE_FILENAME)}"]}}]
  outfile:
    plan:
      steps: [init, {plan: {extra_args: ["-var-file=${secret}"]}}]
`;
    await env.openPull(url, 9, 'repo-workflow', {
      'atlantis.yaml': yaml,
      'app1/main.tf': terraformConfig({ marker: 'pr9' }),
      'app9/main.tf': terraformConfig({ marker: 'pr9' }),
    });
    const c = (await env.waitForComment(9, /^Ran Plan for 2 projects/)).body;
    assert.match(c, /flag "-out" is not allowed in extra args \(extra_args of workflow "outflag" in atlantis.yaml\)/);
    assert.match(c, /var-file must name a file inside this pull request's checkout/);
    assert.doesNotMatch(c, new RegExp(CANARY));
    assert.equal(planFilesOf(9).length, 0);
    // Refused before the lock was taken: another PR can plan app1.
    await env.openPull(url, 10, 'after-repo-workflow', { 'app1/main.tf': terraformConfig({ marker: 'pr10' }) });
    await env.waitForComment(10, /^Ran Plan for dir: `app1`.*\n[\s\S]*Plan: 1 to add/);
  });
});

describe('symlinks committed in a PR cannot reach outside its checkout', () => {
  it('-d through a link to a dir outside: refused, terraform never runs there', async () => {
    await env.openPull(url, 4, 'link-out', { evil: { symlink: outside } });
    const c = await env.waitForComment(4, /symbolic link "evil", which points outside the repository/);
    assert.doesNotMatch(c.body, new RegExp(outside.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')), 'the target is not echoed');
    const reply = await commentAndWait(4, 'atlantis plan -d evil', /symbolic link "evil"/);
    assert.doesNotMatch(reply, /outside-dir/);
    assert.equal(existsSync(path.join(outside, '.terraform')), false, 'terraform never ran outside');
  });

  it('-d through a link inside the checkout cannot plan a dir another PR has locked', async () => {
    // PR 2 holds the lock of app2 (planned above, never applied).
    await env.openPull(url, 5, 'link-in', { alias: { symlink: 'app2' } });
    const reply = await commentAndWait(5, 'atlantis plan -d alias', /^Ran Plan for dir: `alias`/);
    assert.match(reply, /dir "alias" goes through a symbolic link \(it is really "app2"\); run the command on "app2" instead/);
    assert.match(
      await commentAndWait(5, 'atlantis plan -d app2', /^Ran Plan for dir: `app2`/),
      /currently locked by an unapplied plan from pull #2/,
    );
  });

  it('atlantis.yaml as a link to a file outside is not read', async () => {
    await env.openPull(url, 6, 'yaml-link', {
      'atlantis.yaml': { symlink: path.join(outside, 'atlantis.yaml') },
      'app1/main.tf': terraformConfig({ marker: 'pr6' }),
    });
    const c = await env.waitForComment(6, /symbolic link|from-outside|Ran Plan/);
    assert.match(c.body, /symbolic link "atlantis.yaml", which points outside the repository/);
    assert.equal(planFilesOf(6).length, 0);
  });

  it('a -var-file that is a link to a server file is refused, its content never echoed', async () => {
    await env.openPull(url, 7, 'varfile-link', { 'app2/evil.tfvars': { symlink: path.join(outside, 'secret.txt') } });
    await env.waitForComment(7, /symbolic link "app2\/evil.tfvars"/);
    const reply = await commentAndWait(7, 'atlantis plan -d app2 -- -var-file=evil.tfvars', /symbolic link "app2\/evil.tfvars"/);
    assert.doesNotMatch(reply, new RegExp(CANARY));
    for (const c of env.commentsOn(7)) assert.doesNotMatch(c.body, new RegExp(CANARY));
  });
});

describe('the workspace is selected explicitly', () => {
  it('a committed .terraform/environment does not move a `default` project to another workspace', async () => {
    await env.openPull(url, 8, 'env-file', { 'wsproj/main.tf': workspaceConfig, 'wsproj/.terraform/environment': 'prod' });
    const plan = (await env.waitForComment(8, /^Ran Plan for dir: `wsproj` workspace: `default`/)).body;
    assert.match(plan, /ran-in-default/);
    assert.doesNotMatch(plan, /ran-in-prod/);
    await commentAndWait(8, 'atlantis apply -d wsproj', /^Ran Apply for dir: `wsproj`/);
    const dir = path.join(checkout(8), 'wsproj');
    assert.ok(existsSync(path.join(dir, 'terraform.tfstate')), 'state of the default workspace');
    // (terraform init creates the empty dir of the workspace the file names; no state goes there)
    assert.equal(existsSync(path.join(dir, 'terraform.tfstate.d', 'prod', 'terraform.tfstate')), false, 'no state of workspace prod');
  });
});
