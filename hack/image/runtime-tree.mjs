// The image's /app: what the bundled CLI needs at run time and nothing else, then a smoke test
// of that tree on its own. Run in the Dockerfile's build stage after hack/bundle.mjs:
//   node hack/image/runtime-tree.mjs /out/app
// What runs is dist/atlantis-operator.mjs (+ its chunks, without source maps) and
// package.json (the version), dist/native/non-dumpable.node (the server's own addon) and
// dist/native/process-host (the worker that starts git and terraform). Outside the bundle stay better-sqlite3 (a native addon, found
// through node_modules with `bindings`) and iconv-lite's character tables (hack/bundle.mjs),
// so node_modules holds only those packages and what they load: better-sqlite3's lib/ and its
// compiled addon, not its 9 MB of SQLite source, object files or install-time dependencies.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';

const out = process.argv[2];
if (!out) throw new Error('usage: runtime-tree.mjs <out dir>');

/** package -> the paths inside it that run (all of it when undefined). */
const PACKAGES = {
  'better-sqlite3': ['package.json', 'lib', 'build/Release/better_sqlite3.node', 'LICENSE'],
  bindings: undefined,
  'file-uri-to-path': undefined,
  'iconv-lite': undefined,
  'safer-buffer': undefined,
};

rmSync(out, { recursive: true, force: true });
mkdirSync(path.join(out, 'dist', 'chunks'), { recursive: true });
cpSync('package.json', path.join(out, 'package.json'));
for (const f of ['atlantis-operator.mjs', 'native/non-dumpable.node', 'native/process-host']) {
  mkdirSync(path.dirname(path.join(out, 'dist', f)), { recursive: true });
  cpSync(path.join('dist', f), path.join(out, 'dist', f));
}
for (const f of readdirSync('dist/chunks').filter((x) => x.endsWith('.mjs'))) {
  cpSync(path.join('dist/chunks', f), path.join(out, 'dist/chunks', f));
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

// The tree alone must work: the CLI starts and the addon opens a database, from a cwd outside it.
const run = (args) => execFileSync(process.execPath, args, { cwd: '/', encoding: 'utf8' }).trim();
const cli = path.resolve(out, 'dist/atlantis-operator.mjs');
process.stdout.write(`${run([cli, 'version'])}\n`);
const probe = `import { createRequire } from 'node:module';
const require = createRequire(${JSON.stringify(cli)});
const Database = require('better-sqlite3');
const db = new Database(':memory:');
console.log('sqlite', db.prepare('select sqlite_version() as v').get().v);
require('iconv-lite/encodings');
const nd = createRequire(${JSON.stringify(cli)})(${JSON.stringify(path.resolve(out, 'dist/native/non-dumpable.node'))});
nd.setNonDumpable();
if (nd.isDumpable()) throw new Error('the non-dumpable addon left the process dumpable');
console.log('non-dumpable addon: ok');`;
process.stdout.write(`${run(['--input-type=module', '-e', probe])}\n`);
// The process host worker runs here, and exits 0 when its server goes (EOF on its requests).
execFileSync(path.resolve(out, 'dist/native/process-host'), { cwd: '/', input: '' });
process.stdout.write('process host worker: ok\n');
