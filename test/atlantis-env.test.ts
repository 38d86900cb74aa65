// Atlantis settings given only as env to the real server process: ATLANTIS_DISABLE_APPLY and
// ATLANTIS_GH_TEAM_ALLOWLIST are honoured (teams read from the GitHub stand-in's GraphQL), an
// Atlantis flag the server does not implement stops the start with one line naming it (exit 2),
// a cosmetic one is a warning line, and env names that are not Atlantis flags stay ignored.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runCli, startCli, waitForHttp } from './support/cli.js';
import { childList } from './support/children.js';
import { terraformConfig } from './support/git-repos.js';
import { pullRequestPayload, sendWebhook } from './support/github-standin.js';
import { waitFor } from './support/server.js';
import { TERRAFORM } from './support/terraform.js';
import { WEBHOOK_SECRET, type WorkflowEnv, createWorkflowEnv, tempDataDir } from './support/workflow-env.js';

let env: WorkflowEnv;
const procs = childList();
before(async () => {
  env = await createWorkflowEnv({ ghHost: '127.0.163.200' });
});
after(async () => {
  procs.killAll();
  await env.close();
});

/** Every setting as ATLANTIS_* env, none on the command line. */
function envOnly(host: string, dataDir: string, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return {
    ATLANTIS_BIND_ADDRESS: host,
    ATLANTIS_PORT: '4141',
    ATLANTIS_DATA_DIR: dataDir,
    ATLANTIS_ATLANTIS_URL: `http://${host}:4141`,
    ATLANTIS_REPO_ALLOWLIST: 'github.com/acme/*',
    ATLANTIS_GH_USER: 'atlantis-bot',
    ATLANTIS_GH_TOKEN: env.gh.token,
    ATLANTIS_GH_WEBHOOK_SECRET: WEBHOOK_SECRET,
    ATLANTIS_GH_API_URL: env.gh.url,
    ATLANTIS_TF_BINARY: TERRAFORM,
    ...extra,
  };
}

/** Opens PR `number` authored by `user` and sends GitHub's pull_request webhook. */
async function openPullAs(url: string, number: number, user: string, files: Record<string, string>): Promise<void> {
  const branch = `pr-${number}`;
  const headSha = await env.repo.createBranch(branch, files);
  await env.repo.publishPull(number, branch);
  env.gh.addPull(env.repo.fullName, {
    number,
    headSha,
    headRef: branch,
    baseRef: env.repo.baseBranch,
    user,
    files: (await env.repo.changedFiles(branch)).map((filename) => ({ filename })),
  });
  const r = await sendWebhook(
    `${url}/events`,
    'pull_request',
    pullRequestPayload({ repo: env.repo.fullName, cloneUrl: env.repo.cloneUrl, action: 'opened', number, headSha, headRef: branch, user }),
    { secret: WEBHOOK_SECRET },
  );
  assert.equal(r.status, 200);
}

describe('Atlantis settings as env only, on the real server', () => {
  it('honours ATLANTIS_DISABLE_APPLY and ATLANTIS_GH_TEAM_ALLOWLIST; ignores Service-link env; warns for a cosmetic flag', async () => {
    env.gh.addTeam('acme', 'dev', ['bob']);
    env.gh.addTeam('acme', 'ops', ['alice']);
    env.gh.addTeam('acme', 'readers', ['carol']);
    const host = '127.0.163.1';
    const dataDir = tempDataDir();
    const p = startCli(
      ['server'],
      envOnly(host, dataDir, {
        ATLANTIS_DISABLE_APPLY: 'true',
        ATLANTIS_GH_TEAM_ALLOWLIST: 'dev:plan,ops:*',
        ATLANTIS_EMOJI_REACTION: 'rocket',
        ATLANTIS_ENABLE_PROFILING_API: 'true',
        // What Kubernetes puts in a pod for a Service named "atlantis": not Atlantis flags.
        ATLANTIS_SERVICE_HOST: '10.96.0.10',
        ATLANTIS_SERVICE_PORT: '4141',
        ATLANTIS_PORT_4141_TCP: 'tcp://10.96.0.10:4141',
      }),
    );
    procs.push(p);
    const url = `http://${host}:4141`;
    await waitForHttp(`${url}/healthz`).catch((e: Error) => {
      throw new Error(`${e.message}\n${p.output()}`);
    });
    const touched = path.join(dataDir, 'applied-marker');

    // bob is in dev (dev:plan): his PR is autoplanned.
    await openPullAs(url, 1, 'bob', { 'app1/main.tf': terraformConfig({ marker: 'm1', touchFile: touched }) });
    await env.waitForComment(1, /^Ran Plan for dir: `app1`/);

    // carol is only in readers: her PR's autoplan is refused with a log line and no comment, as Atlantis.
    await openPullAs(url, 2, 'carol', { 'app2/main.tf': terraformConfig({ marker: 'm2' }) });
    await waitFor(
      'the refused autoplan log line',
      () =>
        /"msg":"User is not in a team allowed to run the command".*"pull":2|"pull":2.*"msg":"User is not in a team allowed to run the command"/.test(
          p.output(),
        ),
      60_000,
    );
    assert.deepEqual(env.commentsOn(2), []);

    // carol's plan comment on PR 1: Atlantis's refusal text, nothing runs.
    let before = env.commentsOn(1).length;
    assert.equal((await env.comment(url, 1, 'atlantis plan', 'carol')).status, 200);
    const refused = await env.waitForComment(1, /does not have permissions/, { after: before });
    assert.equal(refused.body, "```\nError: User @carol does not have permissions to execute 'plan' command.\n```");

    // alice (ops:*) may run anything the server allows; apply is disabled by env.
    before = env.commentsOn(1).length;
    assert.equal((await env.comment(url, 1, 'atlantis apply', 'alice')).status, 200);
    const unknown = await env.waitForComment(1, /unknown command/, { after: before });
    assert.equal(
      unknown.body,
      '```\nError: unknown command "apply".\nRun \'atlantis --help\' for usage.\nAvailable commands(--allow-commands): version, plan, cancel, unlock, approve_policies\n```',
    );
    before = env.commentsOn(1).length;
    assert.equal((await env.comment(url, 1, 'atlantis plan', 'alice')).status, 200);
    await env.waitForComment(1, /^Ran Plan for dir: `app1`/, { after: before });
    assert.ok(!env.commentsOn(1).some((c) => /^Ran Apply/.test(c.body)), 'no apply ran');
    assert.equal(existsSync(touched), false, 'terraform apply never ran');

    // The teams came from GitHub's GraphQL, asked as Atlantis asks: the org's teams filtered by the user.
    const asked = env.gh.callsTo('POST', /^\/graphql$/).map((c) => (c.body as { variables: { org: string; logins: string[] } }).variables);
    assert.ok(asked.some((v) => v.org === 'acme' && v.logins[0] === 'carol'));
    const out = p.output();
    assert.match(out, /"msg":"--enable-profiling-api \(ATLANTIS_ENABLE_PROFILING_API\) is set, but this server ignores it/);
    // ATLANTIS_EMOJI_REACTION is honoured: the command comments got that reaction, and only it.
    assert.ok(env.gh.reactions.length > 0 && env.gh.reactions.every((x) => x.content === 'rocket'), JSON.stringify(env.gh.reactions));
    // Ignored as settings: no warning or error names them (the child-env line lists them as withheld, like every ATLANTIS_* name).
    const complaints = out.split('\n').filter((l) => /"level":"(warn|error)"/.test(l));
    assert.ok(complaints.length > 0, 'the cosmetic flag warned');
    for (const l of complaints) assert.doesNotMatch(l, /SERVICE_HOST|PORT_4141_TCP/);
  });

  const refusals: Array<[string, NodeJS.ProcessEnv, RegExp]> = [
    [
      'ATLANTIS_DISCARD_APPROVAL_ON_PLAN',
      { ATLANTIS_DISCARD_APPROVAL_ON_PLAN: 'true' },
      /^atlantis-operator: --discard-approval-on-plan \(ATLANTIS_DISCARD_APPROVAL_ON_PLAN\) is set, but this server does not support it on GitHub/,
    ],
    [
      'ATLANTIS_DISABLE_UNLOCK_LABEL',
      { ATLANTIS_DISABLE_UNLOCK_LABEL: 'no-unlock' },
      /--disable-unlock-label \(ATLANTIS_DISABLE_UNLOCK_LABEL\)/,
    ],
    ['ATLANTIS_TFE_TOKEN (a secret)', { ATLANTIS_TFE_TOKEN: 'tfe-secret-value-123' }, /--tfe-token \(ATLANTIS_TFE_TOKEN\)/],
    [
      'ATLANTIS_ENABLE_POLICY_CHECKS',
      { ATLANTIS_ENABLE_POLICY_CHECKS: 'true', ATLANTIS_SERVICE_HOST: '10.96.0.10' },
      /--enable-policy-checks/,
    ],
  ];
  let seq = 10;
  for (const [name, extra, re] of refusals) {
    it(`refuses to start with ${name}: exit 2, one line naming it, the value not repeated`, () => {
      const r = runCli(['server'], envOnly(`127.0.163.${seq++}`, tempDataDir(), extra));
      assert.equal(r.code, 2, r.stderr + r.stdout);
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
      assert.match(r.stderr, re);
      for (const v of Object.values(extra)) if (v !== 'true') assert.ok(!r.stderr.includes(v!), r.stderr);
      assert.equal(r.stdout, '');
    });
  }
});
