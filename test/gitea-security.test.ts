// The security table through a real Gitea v1.27.3 (as test/secrets-attack.test.ts does it
// through the GitHub stand-in): a developer's pull request tries to get the server's Gitea
// token and webhook secret out, through terraform (file("/proc/self/environ") as outputs),
// a local-exec printing its and its ancestors' environ plain and base64, run steps, and extra
// args (`-- -var-file=/proc/self/environ`, refused). The secrets are given as environment
// (ATLANTIS_GITEA_TOKEN, ATLANTIS_GITEA_WEBHOOK_SECRET), as the operator's pods get them. Then
// everything the server wrote is searched for them, verbatim, URL-encoded and base64: what
// Gitea shows (comments, commit statuses), every request the server sent to Gitea (path, query,
// body), the server log, job logs and pages, the web page, /status, the data dir; and the
// children's environment, dumped by the attacker's code outside the data dir, holds neither
// secret nor any ATLANTIS_* variable.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sleep } from '../src/async.js';
import {
  GITEA_WEBHOOK_SECRET,
  type GiteaWorld,
  giteaFlags,
  giteaServerEnv,
  hookServer,
  startGiteaWorld,
} from './support/atlantis-gitea-scenario.js';
import { type CliProcess, startCli, waitForHttp } from './support/cli.js';
import { leak } from './support/leaks.js';

const NET = '127.0.244';
const serverUrl = `http://${NET}.3:4141`;
const outside = mkdtempSync(path.join(tmpdir(), 'ato-gitea-attack-'));
const dataDir = mkdtempSync(path.join(tmpdir(), 'ato-gitea-attack-data-'));
const home = mkdtempSync(path.join(tmpdir(), 'ato-gitea-attack-home-'));
const tfDump = path.join(outside, 'terraform-env.txt');
const runDump = path.join(outside, 'run-step-env.txt');

let w: GiteaWorld;
let server: CliProcess;

const attackTf = `terraform {
  required_version = ">= 1.4"
}

variable "probe" {
  type    = string
  default = "unset"
}

locals {
  environ = file("/proc/self/environ")
}

output "environ" {
  value = local.environ
}

output "environ_b64" {
  value = base64encode(local.environ)
}

output "probe" {
  value = var.probe
}

resource "terraform_data" "exfil" {
  input = "x"

  provisioner "local-exec" {
    command = <<-EOT
      env > '${tfDump}'
      env
      env | base64 -w0; echo
      p=$$
      for i in 1 2 3; do
        p=$(awk '{print $4}' /proc/$p/stat)
        tr '\\0' '\\n' < /proc/$p/environ
        base64 < /proc/$p/environ
      done
    EOT
  }
}
`;

const atlantisYaml = `version: 3
projects:
  - dir: attack
    workflow: evil
workflows:
  evil:
    plan:
      steps:
        - init
        - run: env > '${runDump}'; env; env | base64 -w0; echo
        - env:
            name: STOLEN
            command: base64 -w0 /proc/self/environ
        - run: echo "stolen=$STOLEN"
        - plan
`;

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .map((f) => path.join(dir, f))
    .filter((f) => {
      try {
        return statSync(f).isFile() && statSync(f).size < 8 * 1024 * 1024;
      } catch {
        return false;
      }
    });
}

async function comments(number: number): Promise<Array<{ user: string; body: string }>> {
  const r = await w.gitea.api<Array<{ user: { login: string }; body: string }>>('GET', `/repos/acme/infra/issues/${number}/comments`);
  return r.body.map((c) => ({ user: c.user.login, body: c.body }));
}

async function waitForBotComment(number: number, n: number): Promise<string> {
  const end = Date.now() + 150_000;
  for (;;) {
    const got = (await comments(number)).filter((c) => c.user === w.bot.name);
    if (got.length >= n) return got[n - 1]!.body;
    if (Date.now() > end) throw new Error(`comment ${n} on #${number} not within 150 s\n${server.output().slice(-3000)}`);
    await sleep(200);
  }
}

before(async () => {
  w = await startGiteaWorld(`${NET}.1`, `${NET}.2`);
  const serverConfig = path.join(outside, 'repos.yaml');
  writeFileSync(serverConfig, 'repos:\n  - id: /.*/\n    allowed_overrides: [workflow]\n    allow_custom_workflows: true\n');
  const flags = giteaFlags(w, dataDir, serverUrl, 4141);
  // The secrets come as environment, not flags.
  const secretFlags = ['--gitea-token', '--gitea-webhook-secret'];
  const withoutSecrets = flags.filter((a, i) => !secretFlags.includes(a) && !secretFlags.includes(flags[i - 1] ?? ''));
  server = startCli([...withoutSecrets, '--bind-address', `${NET}.3`, '--log-level', 'debug', '--repo-config', serverConfig], {
    ...giteaServerEnv(home),
    ATLANTIS_GITEA_TOKEN: w.bot.token,
    ATLANTIS_GITEA_WEBHOOK_SECRET: GITEA_WEBHOOK_SECRET,
    AWS_REGION: 'eu-attack-1',
    TF_VAR_probe: 'probe-from-server-env',
  });
  await waitForHttp(`${serverUrl}/healthz`).catch((e: Error) => {
    throw new Error(`${e.message}\n${server.output()}`);
  });
  await hookServer(w, `${serverUrl}/events`);
});
after(async () => {
  if (server?.child.exitCode === null) server.child.kill('SIGKILL');
  await w?.close();
  for (const d of [outside, dataDir, home]) rmSync(d, { recursive: true, force: true });
});

describe('an attacker on Gitea cannot get the secrets out', () => {
  it('through terraform, local-exec, run steps and extra args; children get a clean environment', { timeout: 300_000 }, async () => {
    const token = w.bot.token;
    const repo = w.repos.get('acme/infra')!;
    await w.gitea.push(repo, w.dev, {
      branch: 'attack',
      base: 'main',
      files: { 'attack/main.tf': attackTf, 'atlantis.yaml': atlantisYaml },
    });
    const pr = await w.gitea.openPullRequest(repo, w.dev, { head: 'attack' });
    assert.match(await waitForBotComment(pr.number, 1), /^Ran Plan/);
    await w.gitea.comment(repo, w.dev, pr.number, 'atlantis apply');
    assert.match(await waitForBotComment(pr.number, 2), /^Ran Apply/);
    await w.gitea.comment(repo, w.dev, pr.number, 'atlantis plan -d attack -- -var-file=/proc/self/environ');
    const refused = await waitForBotComment(pr.number, 3);
    assert.match(refused, /^```\nError: .*-var-file.*\/proc\/self\/environ/s, 'the extra arg is refused with a usage error');

    const all = await comments(pr.number);
    const allText = all.map((c) => c.body).join('\n');
    assert.match(allText, /probe-from-server-env/, 'TF_VAR_probe from the server env reached terraform');
    for (const dump of [tfDump, runDump]) {
      const text = readFileSync(dump, 'utf8');
      const names = text.split('\n').map((l) => l.split('=')[0]!);
      assert.ok(text.includes('AWS_REGION=eu-attack-1'), `${dump}: AWS_REGION reaches the children`);
      assert.deepEqual(
        names.filter((n) => n.startsWith('ATLANTIS_') && n !== 'ATLANTIS_TERRAFORM_VERSION'),
        [],
        `${dump}: no ATLANTIS_* variable in a child's environment`,
      );
      assert.equal(leak(text, token), undefined, `${dump}: the token is in a child's environment`);
      assert.equal(leak(text, GITEA_WEBHOOK_SECRET), undefined, `${dump}: the webhook secret is in a child's environment`);
    }
    // The server's own environ, printed by the local-exec, reached the PR scrubbed.
    assert.match(allText, /ATLANTIS_GITEA_TOKEN=\[REDACTED\]/);

    const statuses = await w.gitea.api('GET', `/repos/acme/infra/commits/${pr.headSha}/statuses?limit=50`);
    const jobIds = readdirSync(path.join(dataDir, 'jobs'))
      .filter((f) => f.endsWith('.log'))
      .map((f) => f.slice(0, -4));
    assert.ok(jobIds.length >= 2, `job logs: ${jobIds.join(', ')}`);
    const jobPages = await Promise.all(
      jobIds.map(async (id): Promise<[string, string]> => [`job page ${id}`, await (await fetch(`${serverUrl}/jobs/${id}`)).text()]),
    );
    const page = await (await fetch(`${serverUrl}/`)).text();
    const statusJson = await (await fetch(`${serverUrl}/status`)).text();
    server.child.kill('SIGTERM');
    assert.equal((await server.exited).code, 0);
    const log = server.output();
    assert.match(log, /Environment variables withheld from child processes.*ATLANTIS_GITEA_TOKEN/);

    const places: Array<[string, string]> = [
      ['server log', log],
      ['/status', statusJson],
      ['web page', page],
      ...jobPages,
      ...all.map((c, i): [string, string] => [`PR comment ${i}`, c.body]),
      ['commit statuses', statuses.text],
      ...w.recorder.calls.map((c, i): [string, string] => [
        `request ${i} to Gitea: ${c.method} ${c.path}`,
        JSON.stringify({ path: c.path, query: c.query, body: c.body }),
      ]),
      ...filesUnder(dataDir).map((f): [string, string] => [f, readFileSync(f, 'latin1')]),
    ];
    assert.ok(
      places.some(([p]) => p.includes(`${path.sep}repos${path.sep}`)),
      'working copies are searched',
    );
    const leaks: string[] = [];
    for (const [where, text] of places)
      for (const [what, secret] of [
        ['the Gitea token', token],
        ['the webhook secret', GITEA_WEBHOOK_SECRET],
      ] as const) {
        const how = leak(text, secret);
        if (how) leaks.push(`${what} appears ${how} in ${where}`);
      }
    assert.deepEqual(leaks, []);
  });
});
