// A PR's terraform cannot read the server's environment or memory, on the real server process
// with the GitHub stand-in, real git and real terraform. The secrets are given to the server
// as environment (as the operator's pods get them), and a local-exec walks up its parent chain
// (terraform, the process host's worker, the server, ...) and copies each /proc/<pid>/environ
// to files outside the data dir: the raw files, not what the redactor lets through, are
// searched. The server and its worker are non-dumpable (secrets/non-dumpable.ts), so their
// environ belongs to root: "Permission denied". (Before, the server's environ held
// ATLANTIS_GH_TOKEN and the webhook secret, and the attack read them.)
//
// Root reads any process's /proc files (CAP_SYS_PTRACE), so when the test runs as root the
// server runs as `nobody` (uid 65534, through util-linux's setpriv), as the image runs it as
// uid 1000: the attack then runs as the server's user, as it would in a pod. The test also
// checks that what reads the server's /proc as that same user still works: `atlantis-operator
// drain` (its pid file check reads /proc/<pid>/stat and cmdline) and /metrics.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CLI, type CliProcess, stageCli, startCli, waitForHttp } from './support/cli.js';
import { WEBHOOK_SECRET, type WorkflowEnv, createWorkflowEnv, tempDataDir } from './support/workflow-env.js';

const NOBODY = 65534;
const asRoot = process.getuid?.() === 0;
const prefix = asRoot ? ['setpriv', `--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups'] : [];
const host = '127.0.165.1';
const url = `http://${host}:4141`;
const dataDir = tempDataDir();
const dump = mkdtempSync(path.join(tmpdir(), 'ato-environ-'));
const home = mkdtempSync(path.join(tmpdir(), 'ato-home-'));
// The clone may sit under a directory only root enters (CI's does): `nobody` runs a copy.
const cli = asRoot ? stageCli(mkdtempSync(path.join(tmpdir(), 'ato-cli-'))) : CLI;

let env: WorkflowEnv;
let server: CliProcess;

const attackTf = `resource "terraform_data" "walk" {
  input = "x"

  provisioner "local-exec" {
    command = <<-EOT
      p=$$
      i=0
      while [ $i -lt 8 ]; do
        p=$(sed 's/.*) [A-Za-z] \\([0-9]*\\).*/\\1/' /proc/$p/stat)
        [ "$p" -gt 1 ] || break
        printf '%s %s\\n' "$p" "$(cat /proc/$p/comm)" >> '${dump}/chain'
        cat /proc/$p/environ > '${dump}/environ.'$p 2> '${dump}/error.'$p || true
        i=$((i+1))
      done
    EOT
  }
}
`;

/** Makes `dir` and everything under it the server's, or readable by it. */
function giveToServer(dir: string, own: boolean): void {
  if (!asRoot) return;
  if (own) chownSync(dir, NOBODY, NOBODY);
  else chmodSync(dir, 0o755);
}

function readableTree(root: string): void {
  if (!asRoot) return;
  for (const f of ['', ...readdirSync(root, { recursive: true, encoding: 'utf8' })]) {
    const p = path.join(root, f);
    const st = statSync(p);
    // Executables (the process host worker) stay executable.
    chmodSync(p, st.isDirectory() || st.mode & 0o100 ? 0o755 : 0o644);
  }
}

before(async () => {
  env = await createWorkflowEnv();
  for (const d of [dataDir, dump, home]) giveToServer(d, true);
  readableTree(path.dirname(path.dirname(cli)));
  // The repository the server clones from (file://), readable by the server's user; git
  // refuses a repository another user owns unless told it is safe.
  readableTree(path.resolve(env.repo.bareDir, '..', '..', '..'));
  writeFileSync(path.join(home, '.gitconfig'), '[safe]\n\tdirectory = *\n');
  giveToServer(path.join(home, '.gitconfig'), true);
  const args = env.serverArgs(dataDir, host);
  const withoutSecretFlags = args.filter(
    (a, i) => !['--gh-token', '--gh-webhook-secret'].includes(a) && !['--gh-token', '--gh-webhook-secret'].includes(args[i - 1] ?? ''),
  );
  server = startCli(
    withoutSecretFlags,
    { HOME: home, ATLANTIS_GH_TOKEN: env.gh.token, ATLANTIS_GH_WEBHOOK_SECRET: WEBHOOK_SECRET, CHECKPOINT_DISABLE: '1' },
    { prefix, cli },
  );
  await waitForHttp(`${url}/healthz`).catch((e: Error) => {
    throw new Error(`${e.message}\n${server.output()}`);
  });
});
after(async () => {
  server.child.kill('SIGKILL');
  await env.close();
});

describe("the server's environment is unreadable to a PR's terraform", () => {
  it('cat /proc/<each ancestor>/environ gets nothing of the server or its worker; drain and /metrics still work', {
    timeout: 180_000,
  }, async () => {
    await env.openPull(url, 1, 'walk', { 'walk/main.tf': attackTf });
    const plan = await env.waitForComment(1, /^Ran Plan for dir: `walk`/, { timeoutMs: 120_000 });
    assert.match(plan.body, /Plan: 1 to add/, plan.body);
    const before = env.commentsOn(1).length;
    await env.comment(url, 1, 'atlantis apply -d walk');
    const applied = await env.waitForComment(1, /^Ran Apply for dir: `walk`/, { after: before, timeoutMs: 120_000 });
    assert.match(applied.body, /Apply complete!/, applied.body);

    const chain = readFileSync(path.join(dump, 'chain'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => {
        const [pid, ...comm] = l.split(' ');
        return { pid: Number(pid), comm: comm.join(' ') };
      });
    const serverPid = server.child.pid!;
    const at = chain.findIndex((c) => c.pid === serverPid);
    assert.ok(at >= 2, `the walk reached the server (pid ${serverPid}): ${JSON.stringify(chain)}`);
    const worker = chain[at - 1]!;
    assert.ok(
      chain.slice(0, at - 1).some((c) => c.comm === 'terraform'),
      JSON.stringify(chain),
    );
    for (const p of [chain[at]!, worker]) {
      assert.equal(readFileSync(path.join(dump, `environ.${p.pid}`), 'utf8'), '', `pid ${p.pid} (${p.comm}): environ read`);
      assert.match(readFileSync(path.join(dump, `error.${p.pid}`), 'utf8'), /Permission denied/, `pid ${p.pid}`);
    }
    // Nothing the attack could read holds a secret: terraform's own environ is the clean one.
    for (const f of readdirSync(dump)) {
      const text = readFileSync(path.join(dump, f), 'latin1');
      assert.ok(!text.includes(env.gh.token) && !text.includes(WEBHOOK_SECRET), `${f} holds a secret`);
    }
    const tf = chain.find((c) => c.comm === 'terraform')!;
    assert.match(readFileSync(path.join(dump, `environ.${tf.pid}`), 'utf8'), /PATH=/, "terraform's own (clean) environ was read");

    assert.match(server.output(), /The server's environment and memory are unreadable to other processes of its user/);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    assert.match(metrics, /^process_open_fds \d+/m, 'the server still reads its own /proc');
    // `drain` as the server's user: the pid file check reads the server's /proc/<pid>/stat and cmdline.
    const [command, ...args] = [...prefix, process.execPath, cli, 'drain', '--data-dir', dataDir];
    const drain = spawnSync(command as string, args, {
      env: { PATH: process.env.PATH, HOME: home },
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.equal(drain.status, 0, `${drain.stdout}${drain.stderr}`);
    assert.equal((await server.exited).code, 0, server.output());
  });
});
