// The image built from the repository's Dockerfile (`make image`), run in real containers
// (podman, runc) the way a pod runs it: UID 1000, a read-only root with the data dir and /tmp
// as volumes, no capabilities, no privilege escalation, the PR's repository cloned over HTTPS.
// Signals go to the container's PID 1 (tini) as a kubelet's runtime sends them. Order and
// outcome are judged from the server's log, terraform's own output and the exit code.
import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, chownSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { StatusBody } from '../src/contract/drain-protocol.js';
import { NODE_ARGS } from '../src/node-args.js';
import { claimLoopbackAddress, releaseLoopbackAddress } from '../dev/local-node/index.js';
import { type Container, ensureImage, runContainer } from './support/container.js';
import { terraformConfig } from './support/git-repos.js';
import { type GitHttpsServer, startGitHttps } from './support/git-https.js';
import { waitFor } from './support/server.js';
import { lockFileExists } from './support/terraform.js';
import { type WorkflowEnv, WEBHOOK_SECRET, createWorkflowEnv } from './support/workflow-env.js';

const claimed: string[] = [];
const tmp = mkdtempSync(path.join(tmpdir(), 'ato-image-'));
let env: WorkflowEnv;
let git: GitHttpsServer;
let caBundle: string;
const containers: Container[] = [];
let hostSeq = 2;
let pullSeq = 300;

interface LogLine {
  msg: string;
  [k: string]: unknown;
}
const logLines = (c: Container): LogLine[] =>
  c
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine);

/** A host dir owned by the image's user, as fsGroup makes a volume writable for it. */
function volumeDir(name: string): string {
  const d = mkdtempSync(path.join(tmp, `${name}-`));
  chownSync(d, 1000, 1000);
  return d;
}

/** A loopback address of this file's own (127.0.131.N), claimed machine-wide. */
function nextHost(): string {
  for (; hostSeq < 255; ) {
    const h = `127.0.131.${hostSeq++}`;
    if (claimLoopbackAddress(h)) {
      claimed.push(h);
      return h;
    }
  }
  throw new Error('no free address in 127.0.131.0/24');
}

/** The server in a container as a pod runs it; resolves once /status answers 200. */
async function startServer(
  extra: string[] = [],
  opts: { nice?: number } = {},
): Promise<{ c: Container; url: string; dataDir: string; startupMs: number }> {
  const host = nextHost();
  const url = `http://${host}:4141`;
  const dataDir = volumeDir('data');
  const started = Date.now();
  const c = runContainer({
    readOnly: true,
    ...opts,
    flags: ['--cap-drop', 'all', '--security-opt', 'no-new-privileges'],
    mounts: [
      [dataDir, '/atlantis'],
      [volumeDir('tmp'), '/tmp'],
      // The git server's CA, as a private CA is given to a pod: a bundle mounted over the system's.
      [caBundle, '/etc/ssl/certs/ca-certificates.crt:ro'],
    ],
    // Secrets as the controller passes them: env from a Secret.
    env: { ATLANTIS_GH_TOKEN: env.gh.token, ATLANTIS_GH_WEBHOOK_SECRET: WEBHOOK_SECRET },
    args: [
      'server',
      '--bind-address',
      host,
      '--port',
      '4141',
      '--atlantis-url',
      url,
      '--repo-allowlist',
      'github.com/acme/*',
      '--gh-user',
      'atlantis-bot',
      '--gh-api-url',
      env.gh.url,
      ...extra,
    ],
  });
  containers.push(c);
  let startupMs = 0;
  await waitFor(
    `${url}/status`,
    async () => {
      if (c.child.exitCode !== null) throw new Error(`the container exited:\n${c.output()}`);
      const ok = await fetch(`${url}/status`, { signal: AbortSignal.timeout(1000) }).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) startupMs = Date.now() - started;
      return ok;
    },
    120_000,
  ).catch((e: Error) => {
    throw new Error(`${e.message}\n${c.output()}`);
  });
  return { c, url, dataDir, startupMs };
}

async function status(url: string): Promise<StatusBody> {
  return (await (await fetch(`${url}/status`)).json()) as StatusBody;
}

function jobLogs(dataDir: string): string {
  const jobs = path.join(dataDir, 'jobs');
  return existsSync(jobs)
    ? readdirSync(jobs)
        .map((f) => readFileSync(path.join(jobs, f), 'utf8'))
        .join('\n')
    : '';
}

/** Opens a PR whose apply sleeps `sleepSeconds`, plans it, comments apply, waits until terraform is applying. */
async function startLongApply(url: string, dataDir: string, sleepSeconds: number): Promise<number> {
  const pull = pullSeq++;
  const dir = `app${pull}`;
  await env.openPull(url, pull, `long-${pull}`, { [`${dir}/main.tf`]: terraformConfig({ marker: `m${pull}`, sleepSeconds }) });
  await env.waitForComment(pull, new RegExp(`^Ran Plan for dir: \`${dir}\``), { timeoutMs: 120_000 });
  assert.equal((await env.comment(url, pull, 'atlantis apply')).status, 200);
  await waitFor('the apply to be provisioning', () => jobLogs(dataDir).includes(`Provisioning with 'local-exec'`), 120_000);
  return pull;
}

before(async () => {
  await ensureImage();
  env = await createWorkflowEnv();
  // The PR's repository over HTTPS with Basic auth (the bot's token, as GitHub takes it).
  git = await startGitHttps({
    host: nextHost(),
    projectRoot: path.dirname(path.dirname(env.repo.bareDir)),
    certDir: tmp,
    accept: (userPassword) => userPassword === `x-access-token:${env.gh.token}`,
  });
  env.repo.cloneUrl = `${git.url}/${env.repo.fullName}.git`;
  env.gh.addRepo(env.repo.fullName, { cloneUrl: env.repo.cloneUrl });
  caBundle = path.join(tmp, 'ca-bundle.crt');
  writeFileSync(caBundle, readFileSync(git.caFile));
});

let sshd: ChildProcess | undefined;
after(async () => {
  sshd?.kill('SIGTERM');
  await Promise.all(containers.map((c) => c.remove()));
  for (const h of claimed) releaseLoopbackAddress(h);
  git?.close();
  await env?.close();
});

describe('the image in a container', () => {
  it('answers /status as UID 1000 with a read-only root, no capabilities, and PID 1 keeps its environment private', async () => {
    const { c, url } = await startServer();
    const st = await status(url);
    assert.equal(st.shutting_down, false);
    assert.match(st.version, /^\d+\.\d+\.\d+/);

    // Every process of the container: UID 1000, no effective capabilities.
    const top = await c.exec([
      'sh',
      '-c',
      'for s in /proc/[0-9]*/status; do grep -E "^(Name|Uid|CapEff):" "$s" | tr -s "\\t\\n" "  "; echo; done',
    ]);
    assert.equal(top.code, 0, top.stderr);
    const procs = top.stdout.trim().split('\n');
    assert.ok(procs.some((p) => /Name: tini /.test(p)) && procs.some((p) => /Name: node /.test(p)), top.stdout);
    for (const p of procs) {
      assert.match(p, /Uid: 1000 1000 1000 1000 /, p);
      assert.match(p, /CapEff: 0000000000000000/, p);
    }
    // Node's flags are the ones src/node-args.ts gives (the benches start ours with them).
    const cmdlines = await c.exec(['sh', '-c', 'for f in /proc/[0-9]*/cmdline; do tr "\\0" " " < "$f"; echo; done']);
    const wanted = ['/usr/bin/node', ...NODE_ARGS, '/app/dist/atlantis-operator.cjs', 'server'].join(' ');
    assert.ok(
      cmdlines.stdout.split('\n').some((l) => l.startsWith(wanted)),
      `${wanted}\n${cmdlines.stdout}`,
    );
    const root = await c.exec(['touch', '/probe']);
    assert.notEqual(root.code, 0);
    assert.match(root.stderr, /Read-only file system/);
    const volumes = await c.exec(['sh', '-c', 'touch /atlantis/probe /tmp/probe && id -u && id -g']);
    assert.equal(volumes.code, 0, volumes.stderr);
    assert.equal(volumes.stdout, '1000\n1000\n');
    // The server's children run as the same user: tini (PID 1) holds the pod's env, secrets
    // included, and must not let them read it; nor may the server (non-dumpable at start).
    const environ = await c.exec(['cat', '/proc/1/environ']);
    assert.notEqual(environ.code, 0);
    assert.match(environ.stderr, /Permission denied/);
    assert.doesNotMatch(environ.stdout, new RegExp(env.gh.token));
    const server = await c.exec([
      'sh',
      '-c',
      'for p in /proc/[0-9]*; do grep -q "^Name:\tnode" $p/status 2>/dev/null && cat $p/environ; done; true',
    ]);
    assert.match(server.stderr, /Permission denied/, 'the server node process keeps its environment private');
    assert.doesNotMatch(server.stdout, new RegExp(env.gh.token));
    // What the image carries, on PATH.
    const tools = await c.exec([
      'sh',
      '-c',
      'atlantis-operator version && terraform version && tofu version && conftest --version && git --version && ssh -V 2>&1',
    ]);
    assert.equal(tools.code, 0, tools.stderr);
    assert.match(tools.stdout, /^atlantis-operator \d/m);
    assert.match(tools.stdout, /^Terraform v\d/m);
    // The Dockerfile's pinned OpenTofu and conftest (policy checks).
    assert.match(tools.stdout, /^OpenTofu v1\.12\.6$/m);
    assert.match(tools.stdout, /^Conftest: 0\.71\.1$/m);
    assert.match(tools.stdout, /^git version /m);
    assert.match(tools.stdout, /^OpenSSH_/m);
    await c.kill('TERM');
    assert.equal(await c.exited, 0, c.output());
  });

  it('SIGTERM during an apply: the apply finishes, terraform never gets a signal, the server exits 0 after its drain', async () => {
    // Started by a niced runtime (19, the most): the server's process host cannot take its
    // usual nice 10 and must run terraform anyway.
    const { c, url, dataDir } = await startServer([], { nice: 19 });
    const pull = await startLongApply(url, dataDir, 5);
    await c.kill('TERM');
    await waitFor('shutting_down', async () => (await status(url)).shutting_down);
    assert.equal((await status(url)).in_progress_operations, 1, 'the apply still runs while draining');
    assert.equal(await c.exited, 0, c.output());
    const applied = await env.waitForComment(pull, /^Ran Apply/);
    assert.match(applied.body, new RegExp(`applied m${pull}`));
    assert.match(applied.body, /Apply complete! Resources: 1 added/);
    // terraform's own output: it prints this on SIGINT and on SIGTERM alike.
    assert.doesNotMatch(applied.body, /Interrupt received/);
    assert.doesNotMatch(jobLogs(dataDir), /Interrupt received/);
    const log = logLines(c);
    const drain = log.findIndex((l) => l.msg === 'Drain started');
    assert.ok(drain >= 0, c.output());
    assert.equal(log[drain]?.reason, 'signal');
    assert.equal(log[drain]?.inProgressOperations, 1);
    assert.ok(log.some((l) => l.msg === 'Drain finished' && l.exitCode === 0 && l.interrupted === false));
    assert.ok(!log.some((l) => /^(Interrupting terraform|Killing terraform)/.test(l.msg)), c.output());
  });

  it('a second SIGTERM interrupts terraform with SIGINT first: lock released, PR told, exit 3', async () => {
    const { c, url, dataDir } = await startServer(['--terraform-interrupt-grace', '30s']);
    const pull = await startLongApply(url, dataDir, 120);
    await c.kill('TERM');
    await waitFor('shutting_down', async () => (await status(url)).shutting_down);
    await c.kill('TERM');
    assert.equal(await c.exited, 3, c.output());
    const interrupted = await env.waitForComment(pull, /Apply Interrupted/);
    assert.match(interrupted.body, /drain deadline passed/);
    assert.equal(lockFileExists(path.join(dataDir, 'repos/acme/infra', String(pull), 'default', `app${pull}`)), false);
    const log = logLines(c);
    const sent = log.filter((l) => /^(Interrupting terraform|Killing terraform)/.test(l.msg)).map((l) => l.signal);
    assert.deepEqual(sent, ['SIGINT'], c.output());
    assert.match(jobLogs(dataDir), /Interrupt received/, "terraform's own account of the interrupt");
  });

  it('the drain deadline interrupts terraform with SIGINT, and `atlantis-operator drain` (the preStop hook) starts the drain', async () => {
    const { c, url, dataDir } = await startServer(['--drain-timeout', '3s', '--terraform-interrupt-grace', '30s']);
    const pull = await startLongApply(url, dataDir, 120);
    // As a preStop hook runs it: in the container, as its user, with the image's env.
    const hook = c.exec(['atlantis-operator', 'drain']);
    await waitFor('shutting_down', async () => (await status(url)).shutting_down);
    assert.equal(await c.exited, 3, c.output());
    const h = await hook;
    assert.match(h.stdout, /^drain started: server pid \d+/m, h.stderr);
    await env.waitForComment(pull, /Apply Interrupted/);
    const log = logLines(c);
    assert.equal(log.find((l) => l.msg === 'Drain started')?.reason, 'cli');
    const sent = log.filter((l) => /^(Interrupting terraform|Killing terraform)/.test(l.msg)).map((l) => l.signal);
    assert.deepEqual(sent, ['SIGINT'], c.output());
    assert.match(jobLogs(dataDir), /Interrupt received/);
  });
});

describe('git over SSH in the image', () => {
  it("clones a repository with the image's git and ssh, as a module source `git::ssh://` is fetched", async () => {
    // An sshd of the test's own on a loopback address: key login only, this host key only.
    const dir = mkdtempSync(path.join(tmp, 'ssh-'));
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', path.join(dir, 'host_key')]);
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', path.join(dir, 'client_key')]);
    copyFileSync(path.join(dir, 'client_key.pub'), path.join(dir, 'authorized_keys'));
    mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
    const SSH_HOST = nextHost();
    const port = 2222;
    const config = path.join(dir, 'sshd_config');
    writeFileSync(
      config,
      [
        `ListenAddress ${SSH_HOST}:${port}`,
        `HostKey ${dir}/host_key`,
        `AuthorizedKeysFile ${dir}/authorized_keys`,
        `PidFile ${dir}/sshd.pid`,
        'PasswordAuthentication no',
        'KbdInteractiveAuthentication no',
        'UsePAM no',
        'StrictModes no',
        'PermitRootLogin prohibit-password',
        '',
      ].join('\n'),
    );
    sshd = spawn('/usr/sbin/sshd', ['-D', '-e', '-f', config], { stdio: ['ignore', 'ignore', 'pipe'] });
    let sshdLog = '';
    sshd.stderr?.on('data', (d: Buffer) => {
      sshdLog += d.toString();
    });
    await waitFor('sshd listening', () => sshdLog.includes('Server listening'), 30_000);

    // The key and known_hosts as a Secret volume gives them: readable by the pod's user only.
    const secret = mkdtempSync(path.join(tmp, 'ssh-secret-'));
    chmodSync(secret, 0o755);
    copyFileSync(path.join(dir, 'client_key'), path.join(secret, 'id_ed25519'));
    const hostKey = readFileSync(path.join(dir, 'host_key.pub'), 'utf8').split(' ').slice(0, 2).join(' ');
    writeFileSync(path.join(secret, 'known_hosts'), `[${SSH_HOST}]:${port} ${hostKey}\n`);
    for (const f of ['id_ed25519', 'known_hosts']) {
      chownSync(path.join(secret, f), 1000, 1000);
      chmodSync(path.join(secret, f), 0o600);
    }
    const c = runContainer({
      readOnly: true,
      entrypoint: 'git',
      flags: ['--cap-drop', 'all', '--security-opt', 'no-new-privileges'],
      mounts: [
        [secret, '/ssh:ro'],
        [volumeDir('tmp'), '/tmp'],
      ],
      env: {
        GIT_SSH_COMMAND: 'ssh -i /ssh/id_ed25519 -o UserKnownHostsFile=/ssh/known_hosts -o StrictHostKeyChecking=yes -o BatchMode=yes',
      },
      args: ['clone', '--quiet', `ssh://root@${SSH_HOST}:${port}${env.repo.bareDir}`, '/tmp/infra'],
    });
    containers.push(c);
    assert.equal(await c.exited, 0, `${c.output()}\nsshd:\n${sshdLog}`);
    assert.match(sshdLog, /Accepted publickey for root/);
  });
});
