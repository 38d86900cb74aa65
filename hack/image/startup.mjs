// Start-up of the server to its first `/status` 200, in a container of the image and as a
// process of the same bundle, measured alternately N times each (docs/reliability.md, "Image and containers"):
//   node hack/image/startup.mjs [runs=5] [image=localhost/atlantis-operator:<version>]
// A container start counts from `podman run` (this machine kind's flags, read-only root,
// host network) to the answer; a process from its spawn. Prints the median and the range.
import { execFileSync, spawn } from 'node:child_process';
import { chownSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const version = JSON.parse(readFileSync(path.join(repo, 'package.json'), 'utf8')).version;
const runs = Number(process.argv[2] ?? 5);
const image = process.argv[3] ?? `localhost/atlantis-operator:${version}`;
const host = '127.0.133.9';
const flags = ['--runtime', 'runc', '--ulimit', 'nofile=16384:16384', '--ulimit', 'nproc=8192:8192'];
const args = (dataDir) => [
  'server',
  '--bind-address',
  host,
  '--port',
  '4141',
  '--data-dir',
  dataDir,
  '--repo-allowlist',
  'github.com/acme/*',
  '--gh-user',
  'bot',
  '--gh-token',
  'tok',
  '--insecure-no-webhook-secret',
];

async function untilStatus(t0, limitMs = 60_000) {
  for (;;) {
    if (performance.now() - t0 > limitMs) throw new Error('no /status 200');
    const ok = await fetch(`http://${host}:4141/status`, { signal: AbortSignal.timeout(500) }).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) return performance.now() - t0;
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function container() {
  const data = mkdtempSync(path.join(tmpdir(), 'ato-startup-'));
  chownSync(data, 1000, 1000);
  const name = `ato-startup-${process.pid}`;
  const t0 = performance.now();
  const p = spawn(
    'podman',
    ['run', ...flags, '--rm', '--name', name, '--network', 'host', '--read-only', '-v', `${data}:/atlantis`, image, ...args('/atlantis')],
    {
      stdio: 'ignore',
    },
  );
  const ms = await untilStatus(t0);
  execFileSync('podman', ['kill', '--signal', 'TERM', name]);
  await new Promise((r) => p.once('exit', r));
  rmSync(data, { recursive: true, force: true });
  return ms;
}

async function processStart() {
  const data = mkdtempSync(path.join(tmpdir(), 'ato-startup-'));
  const t0 = performance.now();
  const p = spawn(process.execPath, [path.join(repo, 'dist/atlantis-operator.cjs'), ...args(data)], { stdio: 'ignore' });
  const ms = await untilStatus(t0);
  p.kill('SIGTERM');
  await new Promise((r) => p.once('exit', r));
  rmSync(data, { recursive: true, force: true });
  return ms;
}

const got = { container: [], process: [] };
for (let i = 0; i < runs; i++) {
  got.container.push(await container());
  got.process.push(await processStart());
}
for (const [k, v] of Object.entries(got)) {
  const s = [...v].sort((a, b) => a - b);
  const median = s[Math.floor(s.length / 2)];
  console.log(`${k}: median ${median.toFixed(0)} ms, range ${s[0].toFixed(0)}-${s.at(-1).toFixed(0)} ms (${runs} runs)`);
}
