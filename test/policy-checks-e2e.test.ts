// Policy checks end to end beyond the differential (test/atlantis-differential-policy.test.ts):
// - bad input stops the start with one clear line and nothing listening: a policy set outside
//   the server's config dir (by its path, or through a symlink), a Rego file that does not
//   compile (found with the conftest on PATH), github policy sets, policy checks without policies;
// - a running server whose policies name a conftest_version that is nowhere on the machine
//   downloads it from --conftest-download-url (a local mirror of the conftest built from its Go
//   module, checked against checksums.txt); --quiet-policy-checks posts no policy comment for a
//   passing PR but does for a failing one; a policy broken after start fails its set with
//   conftest's own error and the apply is refused; a repo with custom_policy_check reads its
//   policy_check stage's run steps per set; the --config webhooks hear of every apply.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sleep } from '../src/async.js';
import { conftestPlatform, conftestRelease } from '../src/server/policy/conftest-install.js';
import { githubServerArgs } from './support/workflow-env.js';
import { NO_FORBIDDEN_REGO } from './support/atlantis-policy-scenario.js';
import { type CliProcess, runCli, startCli, waitForHttp } from './support/cli.js';
import { type TestRepo, createTestRepo, terraformConfig } from './support/git-repos.js';
import { GitHubStandin, issueCommentPayload, pullRequestPayload, sendWebhook } from './support/github-standin.js';
import { goTool } from './support/go-tools.js';
import { requiredFlags } from './support/server-config.js';

const NET = '127.0.38';
const SECRET = 'policy-e2e-secret';
const root = mkdtempSync(path.join(tmpdir(), 'ato-policy-e2e-'));
after(() => rmSync(root, { recursive: true, force: true }));

const BROKEN_REGO = 'package main\n\ndeny[msg] {\n  input.x == 1\n  msg := "x"\n}\n';

/** A config dir with repos.yaml and the given policy sets (name -> Rego, or a path for `path:`). */
function configDir(name: string, sets: Record<string, string>, extra = ''): { dir: string; reposYaml: string } {
  const dir = path.join(root, name);
  mkdirSync(path.join(dir, 'policies'), { recursive: true });
  const lines: string[] = [];
  for (const [set, rego] of Object.entries(sets)) {
    if (rego.startsWith('path:')) lines.push(`    - name: ${set}\n      path: ${rego.slice(5)}`);
    else {
      mkdirSync(path.join(dir, 'policies', set), { recursive: true });
      writeFileSync(path.join(dir, 'policies', set, 'policy.rego'), rego);
      lines.push(`    - name: ${set}\n      path: policies/${set}`);
    }
  }
  const reposYaml = path.join(dir, 'repos.yaml');
  writeFileSync(reposYaml, `repos:\n  - id: /.*/\n${extra}policies:\n  policy_sets:\n${lines.join('\n')}\n`);
  return { dir, reposYaml };
}

describe('bad policy input stops the start: one line, exit 2, nothing run', () => {
  let conftestDir: string;
  before(async () => {
    conftestDir = path.join(root, 'conftest-bin');
    mkdirSync(conftestDir);
    symlinkSync(await goTool('conftest'), path.join(conftestDir, 'conftest'));
  });
  const start = (reposYaml: string, extra: string[] = []) => {
    const { flags, dataDir } = requiredFlags('ato-policy-start-');
    const r = runCli(['server', ...flags, '--port', '0', '--enable-policy-checks', '--repo-config', reposYaml, ...extra], {
      PATH: `${conftestDir}:${process.env.PATH ?? ''}`,
    });
    rmSync(dataDir, { recursive: true, force: true });
    assert.equal(r.code, 2, r.stderr);
    // Besides start-up warnings (the weak test secrets), one line: the refusal.
    const lines = r.stderr
      .trim()
      .split('\n')
      .filter((l) => !l.startsWith('{"level":"warn"'));
    assert.equal(lines.length, 1, r.stderr);
    assert.doesNotMatch(r.stderr + r.stdout, /Listening|"level":"info"/);
    return lines[0]!;
  };

  it('a policy set path outside the config dir', () => {
    const c = configDir('outside', { escape: 'path:../elsewhere', abs: 'path:/etc' });
    assert.match(start(c.reposYaml), /policies\.policy_sets\[0\]\.path: "\.\.\/elsewhere" is outside the server's config dir .*outside/);
  });

  it('a policy set path that leaves the config dir through a symlink', () => {
    const c = configDir('symlink', { linked: 'path:policies/linked' });
    const elsewhere = path.join(root, 'elsewhere-policies');
    mkdirSync(elsewhere, { recursive: true });
    writeFileSync(path.join(elsewhere, 'policy.rego'), NO_FORBIDDEN_REGO);
    symlinkSync(elsewhere, path.join(c.dir, 'policies', 'linked'));
    assert.match(
      start(c.reposYaml),
      /policy set "linked": its path .*policies\/linked leads outside the server's config dir .* \(through a symlink\)/,
    );
  });

  it('a Rego file that does not compile', () => {
    const c = configDir('broken', { good: NO_FORBIDDEN_REGO, broken: BROKEN_REGO });
    assert.match(
      start(c.reposYaml),
      /policy set "broken": its policies do not load: .*rego_parse_error: `if` keyword is required before rule body/,
    );
  });

  it('a missing policy dir', () => {
    const c = configDir('missing', { gone: 'path:policies/gone' });
    assert.match(start(c.reposYaml), /policy set "gone": its path .*policies\/gone cannot be read: ENOENT/);
  });

  it('github policy sets, which Atlantis accepts and never runs', () => {
    const dir = path.join(root, 'github');
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, 'repos.yaml'), 'policies:\n  policy_sets:\n    - {name: gh, path: owner/repo, source: github}\n');
    assert.match(start(path.join(dir, 'repos.yaml')), /policy_sets\[0\]\.source: github policy sets are not supported/);
  });

  it('policy checks without policies', () => {
    const dir = path.join(root, 'none');
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, 'repos.yaml'), 'repos:\n  - id: /.*/\n');
    assert.match(start(path.join(dir, 'repos.yaml')), /--enable-policy-checks is set, but --repo-config has no policies: block/);
  });
});

describe('a server checking policies with a downloaded conftest, quiet, custom checks and webhooks', { timeout: 600_000 }, () => {
  const CONFTEST_VERSION = '0.71.20';
  let gh: GitHubStandin;
  let repo: TestRepo;
  let custom: TestRepo;
  let server: CliProcess;
  let url = '';
  let mirror: http.Server;
  let receiver: http.Server;
  const received: Array<{ headers: http.IncomingHttpHeaders; body: Record<string, unknown> }> = [];
  const mirrorRequests: string[] = [];
  let cfg: { dir: string; reposYaml: string };
  const dataDir = path.join(root, 'data');

  before(async () => {
    // The conftest mirror: the release tarball of the conftest built here, as a made-up version.
    const files = new Map<string, Buffer>();
    mirror = http.createServer((req, res) => {
      mirrorRequests.push(req.url ?? '');
      const body = files.get(req.url ?? '');
      if (!body) return void res.writeHead(404).end();
      res.writeHead(200).end(body);
    });
    await new Promise<void>((r) => mirror.listen(0, `${NET}.5`, r));
    const mirrorUrl = `http://${NET}.5:${(mirror.address() as AddressInfo).port}`;
    const src = path.join(root, 'conftest-tar');
    mkdirSync(src);
    copyFileSync(await goTool('conftest'), path.join(src, 'conftest'));
    execFileSync('tar', ['-czf', path.join(root, 'conftest.tar.gz'), 'conftest'], { cwd: src });
    const archive = readFileSync(path.join(root, 'conftest.tar.gz'));
    const rel = conftestRelease(mirrorUrl, CONFTEST_VERSION, conftestPlatform(process.platform, process.arch)!);
    files.set(new URL(rel.archiveUrl).pathname, archive);
    files.set(new URL(rel.sumsUrl).pathname, Buffer.from(`${createHash('sha256').update(archive).digest('hex')}  ${rel.archiveName}\n`));
    // The webhooks' receiver.
    receiver = http.createServer((req, res) => {
      let b = '';
      req.on('data', (d: Buffer) => (b += d.toString()));
      req.on('end', () => {
        received.push({ headers: req.headers, body: JSON.parse(b) as Record<string, unknown> });
        res.end('ok');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, `${NET}.6`, r));
    const hookUrl = `http://${NET}.6:${(receiver.address() as AddressInfo).port}/atlantis`;
    cfg = configDir(
      'running',
      { 'no-forbidden': NO_FORBIDDEN_REGO },
      "  - id: github.com/acme/custom\n    workflow: custom-policy\n    custom_policy_check: true\nworkflows:\n  custom-policy:\n    policy_check:\n      steps:\n        - show\n        - run: \"if grep -q forbidden $SHOWFILE; then echo 'FAIL - plan - forbidden value'; echo '1 test, 0 passed, 0 warnings, 1 failure, 0 exceptions'; else echo '1 test, 1 passed, 0 warnings, 0 failures, 0 exceptions'; fi\"\n",
    );
    writeFileSync(
      cfg.reposYaml,
      readFileSync(cfg.reposYaml, 'utf8').replace('policies:\n', `policies:\n  conftest_version: ${CONFTEST_VERSION}\n`),
    );
    const configFile = path.join(root, 'atlantis-config.yaml');
    writeFileSync(configFile, `webhooks:\n  - event: apply\n    kind: http\n    url: ${hookUrl}\n    workspace-regex: .*\n`);
    gh = await GitHubStandin.start({ botLogin: 'atlantis-bot', host: `${NET}.1` });
    repo = await createTestRepo({
      fullName: 'acme/infra',
      files: Object.fromEntries(['app1', 'app2', 'app3'].map((d) => [`${d}/main.tf`, terraformConfig({ marker: `${d}-v1` })])),
    });
    custom = await createTestRepo({ fullName: 'acme/custom' });
    for (const r of [repo, custom]) gh.addRepo(r.fullName, { cloneUrl: r.cloneUrl });
    const host = `${NET}.2`;
    url = `http://${host}:4141`;
    server = startCli(
      githubServerArgs(gh, {
        dataDir,
        host,
        secret: SECRET,
        extra: [
          '--config',
          configFile,
          '--enable-policy-checks',
          '--quiet-policy-checks',
          '--repo-config',
          cfg.reposYaml,
          '--conftest-download-url',
          mirrorUrl,
        ],
      }),
      { ATLANTIS_WEBHOOK_HTTP_HEADERS: '{"Authorization":"Bearer hook-secret-9f2c"}' },
    );
    await waitForHttp(`${url}/healthz`).catch((e: Error) => {
      throw new Error(`${e.message}\n${server.output()}`);
    });
  });

  after(async () => {
    server?.child.kill('SIGTERM');
    if (server) await server.exited;
    await gh?.close();
    mirror?.close();
    receiver?.close();
  });

  let done = 0;
  const commandsDone = async () => {
    done++;
    const end = Date.now() + 180_000;
    const n = () => server.output().match(/"msg":"Command (finished|failed)"/g)?.length ?? 0;
    while (Date.now() < end && n() < done) await sleep(100);
    assert.equal(n(), done, server.output().slice(-3000));
  };
  /** Opens PR `number` changing `dir` (each PR its own dir: an earlier PR keeps its lock). */
  const open = async (r: TestRepo, number: number, branch: string, marker: string, dir = 'app1') => {
    const headSha = await r.createBranch(branch, { [`${dir}/main.tf`]: terraformConfig({ marker }) });
    await r.publishPull(number, branch);
    gh.addPull(r.fullName, { number, headSha, headRef: branch, baseRef: r.baseBranch, files: [{ filename: `${dir}/main.tf` }] });
    const res = await sendWebhook(
      `${url}/events`,
      'pull_request',
      pullRequestPayload({ repo: r.fullName, cloneUrl: r.cloneUrl, action: 'opened', number, headSha, headRef: branch }),
      { secret: SECRET },
    );
    assert.equal(res.status, 200, res.body);
    await commandsDone();
    return headSha;
  };
  const comment = async (r: TestRepo, number: number, body: string, user = 'dev') => {
    const res = await sendWebhook(
      `${url}/events`,
      'issue_comment',
      issueCommentPayload({ repo: r.fullName, cloneUrl: r.cloneUrl, number, body, user }),
      {
        secret: SECRET,
      },
    );
    assert.equal(res.status, 200, res.body);
    await commandsDone();
  };
  const lastStatus = (r: TestRepo, sha: string, context: string) =>
    gh
      .statusesFor(r.fullName, sha)
      .filter((s) => s.context === context)
      .at(-1);

  it('a passing PR: conftest downloaded once, no policy comment (quiet), policy_check success; its apply runs and is told to the webhook', async () => {
    const sha = await open(repo, 1, 'fine', 'fine');
    assert.deepEqual(
      mirrorRequests.map((u) => u.split('/').pop()),
      ['checksums.txt', `conftest_${CONFTEST_VERSION}_${conftestPlatform(process.platform, process.arch)}.tar.gz`],
    );
    assert.deepEqual(
      gh.comments(repo.fullName, 1).map((c) => c.body.split('\n')[0]),
      ['Ran Plan for dir: `app1` workspace: `default`'],
    );
    assert.equal(lastStatus(repo, sha, 'atlantis/policy_check')?.description, '1/1 projects had policies checked successfully.');
    await comment(repo, 1, 'atlantis apply');
    assert.match(gh.comments(repo.fullName, 1).at(-1)?.body ?? '', /^Ran Apply for dir: `app1` workspace: `default`/);
    assert.equal(received.length, 1);
    assert.equal(received[0]!.headers.authorization, 'Bearer hook-secret-9f2c');
    assert.deepEqual(
      [
        received[0]!.body.Directory,
        received[0]!.body.Workspace,
        received[0]!.body.Success,
        (received[0]!.body.Pull as { Num: number }).Num,
      ],
      ['app1', 'default', true, 1],
    );
    assert.doesNotMatch(JSON.stringify(received[0]!.body), new RegExp(gh.token));
  });

  it('a failing PR: the policy comment is posted even when quiet', async () => {
    await open(repo, 2, 'forbidden', 'forbidden', 'app2');
    const bodies = gh.comments(repo.fullName, 2).map((c) => c.body);
    assert.equal(bodies.length, 2);
    assert.match(bodies[1]!, /\*\*Policy Check Failed\*\*: Some policy sets did not pass\./);
    assert.equal(mirrorRequests.length, 2, 'conftest is not downloaded again');
  });

  it("a policy broken after the start: its set fails with conftest's error and the apply is refused", async () => {
    writeFileSync(path.join(cfg.dir, 'policies', 'no-forbidden', 'policy.rego'), BROKEN_REGO);
    try {
      const sha = await open(repo, 3, 'after-break', 'fine-again', 'app3');
      const bodies = gh.comments(repo.fullName, 3).map((c) => c.body);
      assert.equal(bodies.length, 2, bodies.join('\n----\n'));
      assert.match(bodies[1]!, /\*\*Policy Check Failed\*\*: Some policy sets did not pass\./);
      assert.match(bodies[1]!, /rego_parse_error: `if` keyword is required before rule body/);
      assert.equal(lastStatus(repo, sha, 'atlantis/policy_check')?.state, 'failure');
      await comment(repo, 3, 'atlantis apply');
      assert.match(
        gh.comments(repo.fullName, 3).at(-1)?.body ?? '',
        /\*\*Apply Failed\*\*: All policies must pass for project before running apply\./,
      );
      assert.equal(received.length, 1, 'a refused apply is not an apply: no webhook');
    } finally {
      writeFileSync(path.join(cfg.dir, 'policies', 'no-forbidden', 'policy.rego'), NO_FORBIDDEN_REGO);
    }
  });

  it("custom_policy_check: the policy_check stage's run step output is the set's result", async () => {
    const sha = await open(custom, 1, 'custom-forbidden', 'forbidden');
    const bodies = gh.comments(custom.fullName, 1).map((c) => c.body);
    assert.equal(bodies.length, 2, bodies.join('\n----\n'));
    assert.match(
      bodies[1]!,
      /#### Policy Set: `no-forbidden`\n```diff\nFAIL - plan - forbidden value\n1 test, 0 passed, 0 warnings, 1 failure, 0 exceptions\n```/,
    );
    assert.match(bodies[1]!, /policy set: no-forbidden: requires: 1 approval\(s\), have: 0\./);
    assert.equal(lastStatus(custom, sha, 'atlantis/policy_check')?.description, '1/1 projects failed policy checks.');
  });
});
