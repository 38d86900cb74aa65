// The attacker of the security table, shared by every host's test (secrets-attack.test.ts on
// GitHub, gitlab-security.test.ts, gitea-security.test.ts): the PR's files that try to get the
// server's secrets out, the server-side repo config that lets them run custom steps, and the
// searches made afterwards: the children's environment dumps, and every place the server wrote.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { leak } from './leaks.js';

/** A secret the server holds, named as the leak report names it. */
export type NamedSecret = readonly [what: string, value: string];

export interface Attack {
  /** Outside the data dir: the attacker's dumps and the server-side repos.yaml. */
  readonly outside: string;
  /** The environment of terraform's local-exec and of a run step, as the attacker dumped them. */
  readonly dumps: readonly string[];
  /** The PR's files: `attack/main.tf` and an `atlantis.yaml` with a custom workflow. */
  readonly files: Record<string, string>;
  /** A server-side repos.yaml that allows the PR's custom workflow (`--repo-config`). */
  readonly repoConfig: string;
  cleanup(): void;
}

/**
 * - a .tf reading file("/proc/self/environ") into outputs, plain and base64;
 * - a local-exec printing `env` (plain and base64) and the environ of its three nearest
 *   ancestors (terraform, the process host's worker, the server);
 * - run steps doing the same, and an env step reading /proc/self/environ.
 * `echoEnvironB64: false` leaves out the local-exec's echo of the whole environ in base64.
 */
export function prepareAttack(prefix: string, o: { echoEnvironB64?: boolean } = {}): Attack {
  const outside = mkdtempSync(path.join(tmpdir(), prefix));
  const tfDump = path.join(outside, 'terraform-env.txt');
  const runDump = path.join(outside, 'run-step-env.txt');
  const repoConfig = path.join(outside, 'repos.yaml');
  writeFileSync(repoConfig, 'repos:\n  - id: /.*/\n    allowed_overrides: [workflow]\n    allow_custom_workflows: true\n');
  const echoB64 = o.echoEnvironB64 === false ? '' : `\n      echo ${'$'}{base64encode(local.environ)}`;
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
      env | base64 -w0; echo${echoB64}
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
  return {
    outside,
    dumps: [tfDump, runDump],
    files: { 'attack/main.tf': attackTf, 'atlantis.yaml': atlantisYaml },
    repoConfig,
    cleanup: () => rmSync(outside, { recursive: true, force: true }),
  };
}

/**
 * The children's environment, as the attacker dumped it: what the server was started with for
 * terraform (AWS_REGION) is there, no ATLANTIS_* variable but Atlantis's own run-step one, and
 * no secret in any form.
 */
export function assertCleanChildEnv(attack: Attack, secrets: readonly NamedSecret[]): void {
  for (const dump of attack.dumps) {
    const text = readFileSync(dump, 'utf8');
    const names = text.split('\n').map((l) => l.split('=')[0] as string);
    assert.ok(text.includes('AWS_REGION=eu-attack-1'), `${dump}: AWS_REGION reaches the children`);
    // ATLANTIS_TERRAFORM_VERSION is Atlantis's run-step variable (the version run), no server setting.
    assert.deepEqual(
      names.filter((n) => n.startsWith('ATLANTIS_') && n !== 'ATLANTIS_TERRAFORM_VERSION'),
      [],
      `${dump}: no ATLANTIS_* variable in a child's environment`,
    );
    for (const [what, value] of secrets) assert.equal(leak(text, value), undefined, `${dump}: ${what} is in a child's environment`);
  }
}

/** The files under `dir` (below 8 MiB), the data dir's working copies and job logs among them. */
export function filesUnder(dir: string): string[] {
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

/** What the running server shows: its job pages (at least `minJobs`), the web page and /status. */
export async function serverPages(url: string, dataDir: string, minJobs = 2): Promise<Array<[string, string]>> {
  const jobIds = readdirSync(path.join(dataDir, 'jobs'))
    .filter((f) => f.endsWith('.log'))
    .map((f) => f.slice(0, -4));
  assert.ok(jobIds.length >= minJobs, `job logs: ${jobIds.join(', ')}`);
  const get = async (p: string): Promise<string> => (await fetch(`${url}${p}`)).text();
  return [
    ...(await Promise.all(jobIds.map(async (id): Promise<[string, string]> => [`job page ${id}`, await get(`/jobs/${id}`)]))),
    ['web page', await get('/')],
    ['/status', await get('/status')],
  ];
}

/** The data dir's files as places to search, checked to include the working copies. */
export function dataDirPlaces(dataDir: string): Array<[string, string]> {
  const places = filesUnder(dataDir).map((f): [string, string] => [f, readFileSync(f, 'latin1')]);
  assert.ok(
    places.some(([p]) => p.includes(`${path.sep}repos${path.sep}`)),
    'working copies are searched',
  );
  return places;
}

/** Every secret found in any place, in any form, as `<what> appears <how> in <where>`. */
export function findLeaks(places: ReadonlyArray<readonly [string, string]>, secrets: readonly NamedSecret[]): string[] {
  const leaks: string[] = [];
  for (const [where, text] of places)
    for (const [what, value] of secrets) {
      const how = leak(text, value);
      if (how) leaks.push(`${what} appears ${how} in ${where}`);
    }
  return leaks;
}
