// Atlantis v0.47's metric names on our /metrics (src/server/atlantis-metrics.ts), held to what a
// real Atlantis served: test/fixtures/atlantis-v0.47/metrics.txt was scraped from it after the
// scenario of test/support/atlantis-db-scenario.ts; here our server runs the same scenario
// against the GitHub stand-in, and its Atlantis-named series must have Atlantis's names, types
// and labels, and count what Atlantis counted (webhooks, commands, each project's result).
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Registry } from 'prom-client';
import { AtlantisMetrics, countWebhook, instrumentGitHub, tallySafe } from '../src/server/atlantis-metrics.js';
import { serverEnv, sharedFlags } from './support/atlantis-differential.js';
import { REPOS_YAML, createLocksRepos, runLocksScenario } from './support/atlantis-db-scenario.js';
import { SCENARIO_BOT } from './support/atlantis-scenario.js';
import { type CliProcess, startCli, waitForHttp } from './support/cli.js';
import type { TestRepo } from './support/git-repos.js';
import { GitHubStandin } from './support/github-standin.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/atlantis-v0.47/metrics.txt', import.meta.url));

interface Family {
  type: string;
  /** Series key (labels without quantile, sorted) -> value; summaries by their _count. */
  series: Map<string, number>;
  labelNames: Set<string>;
}

/** The Prometheus text format, by family: enough to compare names, types, labels and values. */
function parse(text: string): Map<string, Family> {
  const out = new Map<string, Family>();
  const fam = (name: string): Family => {
    const f = out.get(name) ?? { type: '', series: new Map<string, number>(), labelNames: new Set<string>() };
    out.set(name, f);
    return f;
  };
  for (const line of text.split('\n')) {
    const t = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (t) {
      fam(t[1] as string).type = t[2] as string;
      continue;
    }
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    let name = m[1] as string;
    const labels = [...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1] as string, x[2] as string] as const);
    const summaryPart = /_(sum|count)$/.exec(name);
    if (summaryPart && out.get(name.slice(0, -summaryPart[0].length))?.type === 'summary') {
      if (summaryPart[1] === 'sum') continue;
      name = name.slice(0, -summaryPart[0].length);
    } else if (labels.some(([k]) => k === 'quantile')) continue;
    const f = fam(name);
    const kept = labels.filter(([k]) => k !== 'quantile').sort(([a], [b]) => a.localeCompare(b));
    for (const [k] of kept) f.labelNames.add(k);
    f.series.set(kept.map(([k, v]) => `${k}=${v}`).join(','), Number(m[3]));
  }
  return out;
}

/** The Atlantis families this server exports (docs/metrics.md says why the others are not). */
const EXPORTED = /^atlantis_(github_event_|cmd_|project_(plan|apply|import|state)_execution|github_[a-z_]+_execution|pullclosed_cleanup_)/;
/** Of those, the ones whose values must equal Atlantis's: the same scenario makes the same webhooks, commands and project results. */
const SAME_VALUES = /^atlantis_(github_event_|cmd_|project_(plan|apply)_execution_(success|error|failure|time))/;

describe('Atlantis v0.47 metric names beside ours, after the scenario Atlantis was scraped after', () => {
  const net = '127.33.4';
  let gh: GitHubStandin;
  let repos: Map<string, TestRepo>;
  let server: CliProcess;
  const dirs: string[] = [];
  let ours: Map<string, Family>;
  const theirs = parse(readFileSync(FIXTURE, 'utf8'));

  before(async () => {
    gh = await GitHubStandin.start({ botLogin: SCENARIO_BOT, tls: true, host: `${net}.1` });
    repos = await createLocksRepos(gh);
    const dataDir = mkdtempSync(path.join(tmpdir(), 'ato-metrics-data-'));
    const home = mkdtempSync(path.join(tmpdir(), 'ato-metrics-home-'));
    dirs.push(dataDir, home);
    const reposYaml = path.join(home, 'repos.yaml');
    writeFileSync(reposYaml, REPOS_YAML);
    const url = `http://${net}.2:4141`;
    server = startCli(
      [...sharedFlags(gh, dataDir, url, 4141), '--bind-address', `${net}.2`, '--repo-config', reposYaml],
      serverEnv(gh, home),
    );
    await waitForHttp(`${url}/healthz`).catch((e: Error) => {
      throw new Error(`${e.message}\n${server.output()}`);
    });
    await runLocksScenario({ gh, url, repos });
    ours = parse(await (await fetch(`${url}/metrics`)).text());
  });
  after(async () => {
    server?.child.kill('SIGKILL');
    await gh?.close();
    for (const r of repos?.values() ?? []) rmSync(path.resolve(r.bareDir, '..', '..', '..'), { recursive: true, force: true });
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('every family Atlantis served for webhooks, commands, projects and pull request cleanup is ours too, with its type and labels', () => {
    // GitHub calls are compared below: which ones a server makes differs.
    const wanted = [...theirs.keys()].filter(
      (n) => EXPORTED.test(n) && (!n.startsWith('atlantis_github_') || n.startsWith('atlantis_github_event_')),
    );
    assert.ok(wanted.length >= 15, `families to compare: ${wanted.length}`);
    for (const name of wanted) {
      const t = theirs.get(name)!;
      const o = ours.get(name);
      assert.ok(o, `${name} is missing from our /metrics`);
      assert.equal(o.type, t.type, `${name}'s type`);
      assert.deepEqual([...o.labelNames].sort(), [...t.labelNames].sort(), `${name}'s labels`);
    }
  });

  it('the webhooks, commands and project results counted are the ones Atlantis counted', () => {
    for (const [name, t] of theirs) {
      if (!SAME_VALUES.test(name)) continue;
      const o = ours.get(name)!;
      assert.deepEqual(Object.fromEntries(o.series), Object.fromEntries(t.series), `${name}'s series and values`);
    }
  });

  it('GitHub calls Atlantis also makes are timed under its names, with its labels', () => {
    const both = [...theirs.keys()].filter((n) => /^atlantis_github_(?!event_)/.test(n) && ours.has(n));
    for (const op of ['create_comment', 'update_status', 'get_modified_files'])
      assert.ok(both.includes(`atlantis_github_${op}_execution_success`), `${op} is counted`);
    for (const name of both) {
      assert.equal(ours.get(name)!.type, theirs.get(name)!.type, name);
      assert.deepEqual([...ours.get(name)!.labelNames].sort(), ['base_repo', 'pr_number'], name);
    }
    const comments = ours.get('atlantis_github_create_comment_execution_success')!;
    assert.equal(
      comments.series.get('base_repo=acme_infra,pr_number=1'),
      theirs.get('atlantis_github_create_comment_execution_success')!.series.get('base_repo=acme_infra,pr_number=1'),
    );
  });
});

describe('Atlantis metric names, unit', () => {
  it("tally's sanitizer: every character outside [A-Za-z0-9_] becomes _", () => {
    assert.equal(tallySafe('acme/infra-live.v2'), 'acme_infra_live_v2');
    assert.equal(tallySafe('dir/sub dir'), 'dir_sub_dir');
  });

  it('counts a webhook only when its signature checks out, with the action in the name', async () => {
    const reg = new Registry();
    const m = new AtlantisMetrics(reg);
    const body = Buffer.from(JSON.stringify({ action: 'created', repository: { full_name: 'a/b' }, issue: { number: 7 } }));
    const ok = (good: boolean) => () => good;
    countWebhook(m, { event: 'issue_comment', signature: 'x', rawBody: body }, 200, ok(false));
    countWebhook(m, { event: 'push', signature: 'x', rawBody: body }, 200, ok(true));
    countWebhook(m, { event: 'issue_comment', signature: 'x', rawBody: Buffer.from('{') }, 200, ok(true));
    countWebhook(m, { event: 'issue_comment', signature: 'x', rawBody: body }, 200, ok(true));
    countWebhook(m, { event: 'issue_comment', signature: 'x', rawBody: body }, 403, ok(true));
    const text = await reg.metrics();
    assert.match(text, /^atlantis_github_event_comment_created_success_200\{base_repo="a_b",pr_number="7"\} 1$/m);
    assert.match(text, /^atlantis_github_event_comment_created_error_403\{base_repo="a_b",pr_number="7"\} 1$/m);
    assert.doesNotMatch(text, /push/);
  });

  it('times a GitHub call once, not again for the calls it makes itself, and counts its error', async () => {
    const reg = new Registry();
    const m = new AtlantisMetrics(reg);
    const client = {
      async getPull(_repo: string, _pull: number) {
        return {};
      },
      async getPullForMergeable(repo: string, pull: number) {
        await this.getPull(repo, pull);
        return this.getPull(repo, pull);
      },
      async createComment(_repo: string, _pull: number) {
        throw new Error('down');
      },
    };
    instrumentGitHub(client, m);
    await client.getPullForMergeable('a/b', 3);
    await assert.rejects(client.createComment('a/b', 3), /down/);
    const text = await reg.metrics();
    assert.match(text, /^atlantis_github_pull_is_mergeable_execution_success\{base_repo="a_b",pr_number="3"\} 1$/m);
    assert.doesNotMatch(text, /atlantis_github_get_pull_request_execution_success\{/);
    assert.match(text, /^atlantis_github_create_comment_execution_error\{base_repo="a_b",pr_number="3"\} 1$/m);
    assert.match(text, /^atlantis_pullclosed_cleanup_execution_success 0$/m, 'initialised at 0, as Atlantis does');
  });
});
