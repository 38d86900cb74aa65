// The image's /app: what the bundled CLI needs at run time and nothing else, then a smoke test
// of that tree on its own. Run in the Dockerfile's build stage after hack/bundle.mjs:
//   node hack/image/runtime-tree.mjs /out/app
// What runs is dist/atlantis-operator.cjs, the bundle dist/cli.cjs with its code cache, the
// packages bundled apart in dist/vendor/ (without source maps), package.json (the version),
// dist/native/non-dumpable.node (the server's own addon) and dist/native/process-host (the
// worker that starts git and terraform). Outside the bundle stay better-sqlite3's compiled
// addon and iconv-lite's character tables (hack/bundle.mjs), so node_modules holds only those:
// not better-sqlite3's 9 MB of SQLite source, object files or install-time dependencies.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { cacheFiles, nodeArgs, startAndStop } from '../bundle/code-cache.mjs';

const out = process.argv[2];
if (!out) throw new Error('usage: runtime-tree.mjs <out dir>');

/** package -> the paths inside it that run (all of it when undefined). */
const PACKAGES = {
  'better-sqlite3': ['package.json', 'build/Release/better_sqlite3.node', 'LICENSE'],
  'iconv-lite': undefined,
  'safer-buffer': undefined,
};

rmSync(out, { recursive: true, force: true });
mkdirSync(path.join(out, 'dist', 'vendor'), { recursive: true });
cpSync('package.json', path.join(out, 'package.json'));
const caches = cacheFiles('dist/atlantis-operator.cjs').map((f) => path.basename(f));
for (const f of ['atlantis-operator.cjs', 'cli.cjs', ...caches, 'native/non-dumpable.node', 'native/process-host']) {
  mkdirSync(path.dirname(path.join(out, 'dist', f)), { recursive: true });
  cpSync(path.join('dist', f), path.join(out, 'dist', f));
}
for (const f of readdirSync('dist/vendor').filter((x) => x.endsWith('.cjs'))) {
  cpSync(path.join('dist/vendor', f), path.join(out, 'dist/vendor', f));
}
for (const [pkg, parts] of Object.entries(PACKAGES)) {
  const from = path.join('node_modules', pkg);
  if (!existsSync(from)) throw new Error(`${from} is missing (npm ci first)`);
  for (const part of parts ?? ['.']) {
    const src = path.join(from, part);
    if (!existsSync(src)) throw new Error(`${src} is missing`);
    cpSync(src, path.join(out, 'node_modules', pkg, part), { recursive: true });
  }
}

// The tree alone must work, from a cwd outside it: the CLI runs, V8 takes the code cache, the
// addons load, and a server starts (its SQLite data dir lock and store) and stops.
const run = (args, env = {}) =>
  execFileSync(process.execPath, args, { cwd: '/', encoding: 'utf8', env: { ...process.env, ...env } }).trim();
const launcher = path.resolve(out, 'dist/atlantis-operator.cjs');
process.stdout.write(`${run([launcher, 'version'])}\n`);
const taken = run([...nodeArgs(process.cwd()), launcher], { ATLANTIS_OPERATOR_CODE_CACHE: 'check' });
if (taken !== 'taken') throw new Error(`V8 did not take the code cache: ${taken}`);
process.stdout.write('code cache: taken\n');
const probe = `const dist = ${JSON.stringify(path.resolve(out, 'dist'))};
require(require.resolve('iconv-lite/encodings', { paths: [dist] }));
const nd = require(dist + '/native/non-dumpable.node');
nd.setNonDumpable();
if (nd.isDumpable()) throw new Error('the non-dumpable addon left the process dumpable');
console.log('non-dumpable addon: ok');`;
process.stdout.write(`${run(['-e', probe])}\n`);
await startAndStop({ repo: process.cwd(), launcher, write: false });
process.stdout.write('server start and stop: ok\n');
// The process host worker runs here, and exits 0 when its server goes (EOF on its requests).
execFileSync(path.resolve(out, 'dist/native/process-host'), { cwd: '/', input: '' });
process.stdout.write('process host worker: ok\n');
