// --write-git-creds: `terraform init` fetches private modules from a git server over HTTPS
// that wants the GitHub user and token (TLS, Basic auth, git http-backend), by an https
// source and by an ssh source of the same host (rewritten to https, as Atlantis does). Real
// terraform, real git. The credentials exist only during init: a run step after it finds
// neither the file nor the git variables, and the token is in no output, log or file.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { nullLogger } from '../src/log.js';
import { processRedactor } from '../src/server/secrets/redact.js';
import { GitCredsForInit, credentialLine, gitCredsEnv } from '../src/server/terraform/git-creds.js';
import { ProcessHost } from '../src/server/terraform/process-host.js';
import { ProcessRunner } from '../src/server/terraform/runner.js';
import { TerraformBinaries } from '../src/server/terraform/tf-install.js';
import { type ProjectRunContext, ProjectRunner } from '../src/server/workflow/jobs/project-runner.js';
import type { Step } from '../src/server/workflow/repo-config/types.js';
import { createTestRepo } from './support/git-repos.js';
import { type GitHttpsServer, startGitHttps } from './support/git-https.js';
import { TERRAFORM } from './support/terraform.js';
import { type CliProcess, startCli, waitForHttp } from './support/cli.js';
import { type WorkflowEnv, createWorkflowEnv, tempDataDir } from './support/workflow-env.js';

const HOST = '127.0.162.14';
const USER = 'atlantis-bot';
const TOKEN = 'ghp_privateModuleToken0123456789abcd';
const SERVER_HOST = '127.0.162.16';
/** The GitHub stand-in's token, which the server's --write-git-creds hands to init. */
let serverToken = '';
const tmp = mkdtempSync(path.join(tmpdir(), 'git-creds-'));
let git: GitHttpsServer;
let host: ProcessHost;

before(async () => {
  const repo = await createTestRepo({
    fullName: 'acme/modules',
    files: { 'main.tf': 'output "greeting" {\n  value = "hello from a private module"\n}\n' },
  });
  git = await startGitHttps({
    host: HOST,
    projectRoot: path.dirname(path.dirname(repo.bareDir)),
    certDir: tmp,
    accept: (userPassword) => userPassword === `${USER}:${TOKEN}` || (serverToken !== '' && userPassword === `${USER}:${serverToken}`),
  });
  // Children (terraform, its git) trust the test's certificate, as a server's would trust GitHub's.
  process.env.GIT_SSL_CAINFO = git.caFile;
  process.env.GIT_TERMINAL_PROMPT = '0';
  processRedactor.addSource(() => [TOKEN]); // as the server registers its token
  host = new ProcessHost({ logger: nullLogger() });
});
after(() => {
  host?.close();
  git?.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe('git credentials for terraform (pure)', () => {
  it("writes Atlantis's line and points git at it", () => {
    assert.equal(credentialLine('atlantis-bot', 'ghp_x', 'github.com'), 'https://atlantis-bot:ghp_x@github.com\n');
    assert.equal(credentialLine('a b', 'p@ss:w/rd', 'ghe.example:8443'), 'https://a%20b:p%40ss%3Aw%2Frd@ghe.example:8443\n');
    assert.deepEqual(gitCredsEnv('/d/git-creds/credentials', 'atlantis-bot', 'github.com'), {
      GIT_CONFIG_COUNT: '2',
      GIT_CONFIG_KEY_0: 'credential.helper',
      GIT_CONFIG_VALUE_0: 'store --file=/d/git-creds/credentials',
      GIT_CONFIG_KEY_1: 'url.https://atlantis-bot@github.com.insteadOf',
      GIT_CONFIG_VALUE_1: 'ssh://git@github.com',
    });
  });
});

function projectDir(name: string): string {
  const dir = path.join(tmp, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    path.join(dir, 'main.tf'),
    `module "over_https" {\n  source = "git::${git.url}/acme/modules.git"\n}\n\n` +
      `module "over_ssh" {\n  source = "git::ssh://git@${git.hostPort}/acme/modules.git"\n}\n\n` +
      'output "greetings" {\n  value = [module.over_https.greeting, module.over_ssh.greeting]\n}\n',
  );
  return dir;
}

function context(dir: string, output: string[]): ProjectRunContext {
  return {
    jobId: path.basename(dir),
    projectDir: dir,
    dir: '.',
    workspace: 'default',
    planFile: path.join(tmp, 'plans', `${path.basename(dir)}.tfplan`),
    repo: 'acme/infra',
    pull: 1,
    user: 'dev',
    headSha: 'a'.repeat(40),
    headRef: 'feature',
    baseRef: 'main',
    commentArgs: [],
    logFile: path.join(tmp, 'logs', `${path.basename(dir)}.log`),
    onOutput: (chunk) => output.push(chunk),
  };
}

function projectRunner(gitCreds?: GitCredsForInit): ProjectRunner {
  const runner = new ProcessRunner({ host, binary: TERRAFORM, interruptGraceMs: 5_000, logger: nullLogger() });
  const binaries = new TerraformBinaries({
    tfBinary: TERRAFORM,
    download: false,
    downloadUrl: 'http://127.0.0.1:9',
    binDir: path.join(tmp, 'data', 'bin'),
    host,
    logger: nullLogger(),
  });
  return new ProjectRunner(runner, { binaries, gitCreds });
}

function filesUnder(root: string): string[] {
  return readdirSync(root, { recursive: true, encoding: 'utf8' })
    .map((f) => path.join(root, f))
    .filter((f) => statSync(f, { throwIfNoEntry: false })?.isFile());
}

describe('--write-git-creds with real terraform and git over HTTPS', { timeout: 120_000 }, () => {
  it('without it, terraform init cannot fetch the private modules', async () => {
    const out: string[] = [];
    const r = await projectRunner().runSteps([{ kind: 'init', extraArgs: [] }], context(projectDir('no-creds'), out));
    assert.equal(r.ok, false);
    assert.match(r.output, /could not read Username|Authentication failed|terminal prompts disabled/, r.output);
  });

  it('with it, init fetches them with the token; only init ever sees the credentials', async () => {
    const credsDir = path.join(tmp, 'data', 'git-creds');
    const creds = new GitCredsForInit({ dir: credsDir, user: USER, hostname: git.hostPort, token: () => TOKEN });
    const credsFile = path.join(credsDir, 'credentials');
    const steps: Step[] = [
      { kind: 'init', extraArgs: [] },
      {
        kind: 'run',
        command: `test -e '${credsFile}' && echo creds-present || echo creds-absent; env | grep '^GIT_CONFIG' || echo no-git-config; echo "tf-version=$ATLANTIS_TERRAFORM_VERSION path=$PATH"`,
      },
      { kind: 'plan', extraArgs: [] },
    ];
    const seenBefore = git.authSeen.length;
    const out: string[] = [];
    const dir = projectDir('with-creds');
    const ctx = context(dir, out);
    const r = await projectRunner(creds).runSteps(steps, ctx);
    assert.equal(r.ok, true, r.log);
    assert.match(r.output, /hello from a private module/);
    assert.match(r.log, /creds-absent/, 'a run step after init finds no credentials file');
    assert.match(r.log, /no-git-config/, 'nor the git variables');
    // As Atlantis, run steps are told the terraform version and find downloaded versions on PATH.
    assert.match(r.log, /tf-version=\d+\.\d+\.\d+ /);
    assert.ok(r.log.includes(`:${path.join(tmp, 'data', 'bin')}\n`), "the data dir's bin/ ends PATH");
    assert.ok(!existsSync(credsFile), 'removed after init');
    assert.ok(
      git.authSeen.slice(seenBefore).filter((a) => a === `${USER}:${TOKEN}`).length >= 2,
      'both modules fetched with the user and token',
    );
    for (const text of [r.log, out.join(''), readFileSync(ctx.logFile, 'utf8')])
      assert.ok(!text.includes(TOKEN), 'no token in output or job log');
    for (const f of [...filesUnder(dir), ...filesUnder(path.join(tmp, 'data'))])
      assert.ok(!readFileSync(f, 'latin1').includes(TOKEN), `no token in ${f}`);
  });
});

describe('--write-git-creds on the real server process', { timeout: 180_000 }, () => {
  let env: WorkflowEnv;
  let server: { p: CliProcess; url: string } | undefined;
  const dataDir = tempDataDir();
  after(async () => {
    server?.p.child.kill('SIGKILL');
    await env?.close();
  });

  it('plans a PR whose module is private; the token is in no comment, log or job output', async () => {
    env = await createWorkflowEnv();
    serverToken = env.gh.token;
    // The credentials are for --gh-hostname, here the git server's host:port (GitHub's host in real life).
    // The server trusts the git server's certificate as it would trust GitHub's (its env, passed to terraform).
    const args = env.serverArgs(dataDir, SERVER_HOST, [
      '--gh-hostname',
      git.hostPort,
      '--repo-allowlist',
      `${git.hostPort}/acme/*`,
      '--write-git-creds',
    ]);
    const p = startCli(args, { GIT_SSL_CAINFO: git.caFile, GIT_TERMINAL_PROMPT: '0' });
    server = { p, url: `http://${SERVER_HOST}:4141` };
    await waitForHttp(`${server.url}/healthz`);
    await env.openPull(server.url, 1, 'private-module', {
      'app1/main.tf': `module "private" {\n  source = "git::${git.url}/acme/modules.git"\n}\n\noutput "from_module" {\n  value = module.private.greeting\n}\n`,
    });
    const c = await env.waitForComment(1, /^Ran Plan for dir: `app1` workspace: `default`/);
    assert.match(c.body, /hello from a private module/, c.body);
    assert.ok(git.authSeen.includes(`${USER}:${serverToken}`), "init sent --gh-user and the server's token");
    const texts = [
      ...env.commentsOn(1).map((x) => x.body),
      server.p.output(),
      ...filesUnder(path.join(dataDir, 'jobs')).map((f) => readFileSync(f, 'utf8')),
    ];
    for (const t of texts) assert.ok(!t.includes(serverToken), 'no token in comments, the server log or job logs');
    assert.ok(!existsSync(path.join(dataDir, 'git-creds', 'credentials')), 'no credentials file once init is done');
  });
});
