// The server's provider plugin cache (--use-tf-plugin-cache, on by default) under parallel
// inits: a PR changing eight projects, four run by terraform and four by OpenTofu, all using the
// test provider from a provider network mirror on loopback (docs/test-tools.md), planned with
// --parallel-plan. Each project commits its lock file, as terraform recommends. What must hold:
// every plan succeeds (no corrupted cache); the mirror sends the provider once per registry
// host (the first init fills the cache, the other seven use it); no terraform init overlaps the
// one that filled the cache (the server's own log of its processes says when each started and
// ended), tofu's may, since OpenTofu locks the cache itself; and planning the PR again
// downloads nothing, its terraform inits not waiting for each other (they only read the cache).
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sleep } from '../src/async.js';
import { githubServerArgs } from './support/workflow-env.js';
import { type CliProcess, startCli, waitForHttp } from './support/cli.js';
import { type TestRepo, createTestRepo } from './support/git-repos.js';
import { GitHubStandin, issueCommentPayload, pullRequestPayload, sendWebhook } from './support/github-standin.js';
import { goTool } from './support/go-tools.js';
import { type ProviderMirror, fixtureConfig, startProviderMirror } from './support/provider-mirror.js';
import { TERRAFORM } from './support/terraform.js';
import { runTfOk } from './support/tf-cli.js';

const NET = '127.0.61';
const SECRET = 'plugin-cache-secret';
const REPO = 'acme/providers';
const TF = ['tf1', 'tf2', 'tf3', 'tf4'];
const TOFU = ['tofu1', 'tofu2', 'tofu3', 'tofu4'];

/** The lock file an init against the mirror writes, to commit beside each project. */
async function lockFile(bin: string, mirror: ProviderMirror, cliConfig: string, root: string): Promise<string> {
  const dir = mkdtempSync(path.join(root, 'lock-'));
  writeFileSync(path.join(dir, 'main.tf'), fixtureConfig());
  await runTfOk(bin, ['init', '-input=false', '-no-color'], dir, mirror.env(cliConfig));
  return readFileSync(path.join(dir, '.terraform.lock.hcl'), 'utf8');
}

interface ProcLine {
  time: string;
  msg: string;
  pid?: number;
  command?: string;
  args?: string[];
}

describe('one plugin cache, eight parallel inits of terraform and OpenTofu', { timeout: 600_000 }, () => {
  let gh: GitHubStandin;
  let mirror: ProviderMirror;
  let repo: TestRepo;
  let server: CliProcess;
  let url = '';
  const root = mkdtempSync(path.join(tmpdir(), 'ato-plugin-cache-e2e-'));
  const dataDir = path.join(root, 'data');

  before(async () => {
    mirror = await startProviderMirror({ host: `${NET}.5`, archiveDelayMs: 400 });
    const cliConfig = mirror.writeCliConfig(path.join(root, 'cli.tfrc'));
    const tofu = await goTool('tofu');
    const bin = path.join(root, 'bin');
    mkdirSync(bin);
    symlinkSync(tofu, path.join(bin, 'tofu'));
    const tfLock = await lockFile(TERRAFORM, mirror, cliConfig, root);
    const tofuLock = await lockFile(tofu, mirror, cliConfig, root);
    const files: Record<string, string> = { 'README.md': '# providers\n' };
    const projects: string[] = [];
    for (const p of [...TF, ...TOFU]) {
      files[`${p}/main.tf`] = fixtureConfig({ value: `${p}-v1` });
      files[`${p}/.terraform.lock.hcl`] = TF.includes(p) ? tfLock : tofuLock;
      projects.push(`- name: ${p}\n  dir: ${p}${TOFU.includes(p) ? '\n  terraform_distribution: opentofu' : ''}`);
    }
    files['atlantis.yaml'] = `version: 3\nparallel_plan: true\nprojects:\n${projects.join('\n')}\n`;
    repo = await createTestRepo({ fullName: REPO, files });
    gh = await GitHubStandin.start({ botLogin: 'atlantis-bot', host: `${NET}.1` });
    gh.addRepo(REPO, { cloneUrl: repo.cloneUrl });
    const host = `${NET}.2`;
    url = `http://${host}:4141`;
    server = startCli(
      githubServerArgs(gh, { dataDir, host, secret: SECRET, extra: ['--parallel-pool-size', '8', '--log-level', 'debug'] }),
      { ...mirror.env(cliConfig), PATH: `${bin}:${process.env.PATH ?? ''}` },
    );
    await waitForHttp(`${url}/healthz`).catch((e: Error) => {
      throw new Error(`${e.message}\n${server.output()}`);
    });
  });

  after(async () => {
    server?.child.kill('SIGTERM');
    if (server) await server.exited;
    await gh?.close();
    await mirror?.close();
    rmSync(root, { recursive: true, force: true });
  });

  const commandsDone = async (want: number) => {
    const end = Date.now() + 300_000;
    const n = () => server.output().match(/"msg":"Command (finished|failed)"/g)?.length ?? 0;
    while (Date.now() < end && n() < want) await sleep(200);
    assert.equal(n(), want, server.output().slice(-3000));
  };

  const procs = (): ProcLine[] =>
    server
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as ProcLine)
      .filter((l) => l.msg === 'Process started' || l.msg === 'Process finished');

  const waits = (): number => server.output().match(/"msg":"Init waits for the plugin cache"/g)?.length ?? 0;

  it('a PR changing all eight: every plan succeeds, the provider comes once per registry, no terraform init beside the one filling the cache', async () => {
    const changes: Record<string, string> = {};
    for (const p of [...TF, ...TOFU]) changes[`${p}/main.tf`] = fixtureConfig({ value: `${p}-v2` });
    const headSha = await repo.createBranch('all', changes);
    await repo.publishPull(1, 'all');
    gh.addPull(REPO, {
      number: 1,
      headSha,
      headRef: 'all',
      baseRef: repo.baseBranch,
      files: Object.keys(changes).map((filename) => ({ filename })),
    });
    const from = mirror.requests.length;
    const r = await sendWebhook(
      `${url}/events`,
      'pull_request',
      pullRequestPayload({ repo: REPO, cloneUrl: repo.cloneUrl, action: 'opened', number: 1, headSha, headRef: 'all' }),
      {
        secret: SECRET,
      },
    );
    assert.equal(r.status, 200, r.body);
    await commandsDone(1);
    const comment = gh.comments(REPO, 1).at(-1)?.body ?? '';
    assert.match(comment, /8 projects, 8 with changes, 0 with no changes, 0 failed/, comment);
    const downloads = mirror.requests.slice(from).filter((q) => q.kind === 'archive' && q.method === 'GET' && q.status === 200);
    assert.deepEqual(
      downloads.map((q) => q.registryHost).sort(),
      ['registry.opentofu.org', 'registry.terraform.io'],
      'one download per registry host',
    );
    // The cache holds one package per registry host, and it is the mirror's (no partial copy).
    const cacheDir = path.join(dataDir, 'plugin-cache');
    assert.deepEqual(readdirSync(cacheDir).sort(), ['registry.opentofu.org', 'registry.terraform.io']);
    // Terraform's inits: [start, end] of each from the server's own log. The first found the
    // cache empty and filled it; each other one began after it ended (it waited, and then
    // found the provider cached), and may overlap the others.
    const lines = procs();
    const spans: Array<[number, number]> = [];
    for (const s of lines.filter((l) => l.msg === 'Process started' && l.command === TERRAFORM && l.args?.[0] === 'init')) {
      const end = lines.find((l) => l.msg === 'Process finished' && l.pid === s.pid);
      assert.ok(end, `no end logged for init pid ${s.pid}`);
      spans.push([Date.parse(s.time), Date.parse(end.time)]);
    }
    assert.equal(spans.length, 4, 'one terraform init per terraform project');
    spans.sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < spans.length; i++)
      assert.ok(spans[i]![0] >= spans[0]![1], `a terraform init overlapped the one filling the cache: ${JSON.stringify(spans)}`);
    assert.ok(waits() >= 1, 'the first init waited its turn');
  });

  it('planning the PR again downloads nothing, and no terraform init waits for another', async () => {
    const from = mirror.requests.length;
    const waited = waits();
    const r = await sendWebhook(
      `${url}/events`,
      'issue_comment',
      issueCommentPayload({ repo: REPO, cloneUrl: repo.cloneUrl, number: 1, body: 'atlantis plan', user: 'dev' }),
      {
        secret: SECRET,
      },
    );
    assert.equal(r.status, 200, r.body);
    await commandsDone(2);
    assert.match(gh.comments(REPO, 1).at(-1)?.body ?? '', /8 projects, 8 with changes, 0 with no changes, 0 failed/);
    assert.equal(mirror.counts(from).archives, 0);
    assert.equal(waits(), waited, 'every init found its lock file providers cached');
  });
});
