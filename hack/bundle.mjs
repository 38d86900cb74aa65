// Bundles the CLI into one CommonJS file, dist/cli.cjs, started by dist/atlantis-operator.cjs
// (hack/bundle/launcher.cjs) with V8's code cache for it (hack/bundle/code-cache.mjs): what the
// image, the local node and the tests run. Why one file: loading ~1,500 separate module files
// (most of them @kubernetes/client-node's generated API) costs a Node.js process about 2-3 s of
// CPU at start. Why CommonJS: Node.js 20 can start a script from a code cache, not an ES module.
// Our code is all in the bundle; what only some starts need (the controller, `migrate`, the
// Redis store, Express's app, the API and the web UI) is wrapped by esbuild and evaluated on
// first use, not at start. Large third-party packages that only those parts use are bundled
// apart, one file each in dist/vendor/, and loaded on first use: @kubernetes/client-node (an
// unusual kubeconfig, src/k8s/kubeconfig.ts), Express, ioredis and openpgp (checking a
// downloaded terraform's signature). better-sqlite3's compiled addon stays in node_modules
// (sqliteAddon below).
// The server's native parts are built here too (below), so the image's build stage makes them
// with the bundle: its one addon, dist/native/non-dumpable.node, and its process host worker,
// dist/native/process-host (src/server/terraform/native/*.c), a small program the
// CLI starts from beside itself.
// iconv-lite's character tables (~540 KB, the largest part of body-parser's dependencies) stay
// in node_modules: the server only reads raw webhook bodies, so they are loaded, if ever, on
// first use (see lazyIconvTables below).
// `charset: 'ascii'` escapes the few non-ASCII characters in dependencies: one of them turns
// the whole bundle's source text into a two-byte string, twice the memory in every process.
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { build } from 'esbuild';
import { startAndStop } from './bundle/code-cache.mjs';

/** iconv-lite's `require("../encodings")` (inside getCodec, called on first decode) goes to node_modules at run time. */
const ICONV_TABLES = 'iconv-lite/encodings/index.js';
const lazyIconvTables = {
  name: 'lazy-iconv-tables',
  setup(b) {
    b.onResolve({ filter: /^\.\.\/encodings$/ }, (args) =>
      /[\\/]iconv-lite[\\/]lib[\\/]/.test(args.importer) ? { path: ICONV_TABLES, external: true } : undefined,
    );
  },
};

/**
 * prom-client's parts the server uses, without its Pushgateway, cluster aggregator and
 * exemplars' tracing API (hack/bundle/prom-client-core.cjs, no-exemplars.cjs).
 */
const promClientCore = {
  name: 'prom-client-core',
  setup(b) {
    b.onResolve({ filter: /^prom-client$/ }, () => ({ path: path.resolve('hack/bundle/prom-client-core.cjs') }));
    b.onResolve({ filter: /^@opentelemetry\/api$/ }, (args) =>
      /[\\/]prom-client[\\/]/.test(args.importer) ? { path: path.resolve('hack/bundle/no-exemplars.cjs') } : undefined,
    );
  },
};

/** Package -> its file in dist/vendor/. */
const VENDOR = { '@kubernetes/client-node': 'client-node', express: 'express', ioredis: 'ioredis', openpgp: 'openpgp' };

/**
 * A module replaced by a small one whose `require` of `target` stays outside the bundle, to
 * be resolved at run time from dist/. `filter` picks the import (from importers matching
 * `importer`, when given); `exports` says what the replacement exports, given that require.
 */
function requireAtRunTime(name, filter, { importer, target, exports }) {
  return {
    name,
    setup(b) {
      b.onResolve({ filter }, (args) => (importer && !importer.test(args.importer) ? undefined : { path: args.path, namespace: name }));
      b.onLoad({ filter: /.*/, namespace: name }, (args) => ({
        contents: `module.exports = ${exports(`require(${JSON.stringify(target(args.path))})`)};`,
        loader: 'js',
      }));
      b.onResolve({ filter: /.*/, namespace: name }, (args) => ({ path: args.path, external: true }));
    },
  };
}

/**
 * Our code's imports of a vendored package become `require('./vendor/<name>.cjs')` inside a
 * module esbuild wraps, so that a dynamic import() of it is a require() at the time of the
 * import, as for our own lazy modules.
 */
const vendored = requireAtRunTime(
  'vendored',
  new RegExp(
    `^(${Object.keys(VENDOR)
      .map((p) => p.replace(/[/.]/g, '\\$&'))
      .join('|')})$`,
  ),
  {
    target: (pkg) => `./vendor/${VENDOR[pkg]}.cjs`,
    exports: (req) => req,
  },
);

/**
 * better-sqlite3's JavaScript goes into the bundle (and so into the code cache); its compiled
 * addon stays in node_modules, loaded by its path instead of through `bindings`, which
 * searches a dozen directories for it.
 */
const SQLITE_ADDON = 'better-sqlite3/build/Release/better_sqlite3.node';
const sqliteAddon = requireAtRunTime('sqlite-addon', /^bindings$/, {
  importer: /[\\/]better-sqlite3[\\/]lib[\\/]/,
  target: () => SQLITE_ADDON,
  // bindings is a function of the addon's name: better-sqlite3 calls it once.
  exports: (req) => `() => ${req}`,
});

/**
 * ES modules (ours, and the ESM builds of client-node and openpgp) as one CommonJS script:
 * import.meta.url is the output file's URL, and all of it is strict code, as ES modules are.
 */
const esModulesAsScript = {
  define: { 'import.meta.url': '__atoImportMetaUrl' },
  banner: { js: `"use strict";\nconst __atoImportMetaUrl = require('node:url').pathToFileURL(__filename).href;` },
};

const common = {
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  logLevel: 'warning',
  charset: 'ascii',
  outdir: 'dist',
  outExtension: { '.js': '.cjs' },
};

for (const old of ['dist/chunks', 'dist/vendor', 'dist/atlantis-operator.mjs', 'dist/atlantis-operator.mjs.map'])
  rmSync(old, { recursive: true, force: true });
mkdirSync('dist', { recursive: true });
for (const f of readdirSync('dist', { withFileTypes: true }).filter((d) => /^cli-[0-9a-f]+\.(code-cache|builtins\.json)$/.test(d.name)))
  rmSync(`dist/${f.name}`);

await build({
  ...common,
  entryPoints: Object.fromEntries(Object.entries(VENDOR).map(([pkg, name]) => [`vendor/${name}`, pkg])),
  ...esModulesAsScript,
  // body-parser's iconv-lite, in Express.
  plugins: [lazyIconvTables],
});
await build({
  ...common,
  entryPoints: { cli: 'src/cli.ts' },
  ...esModulesAsScript,
  sourcemap: 'linked',
  plugins: [promClientCore, vendored, sqliteAddon],
});

// esbuild keeps some comments as they are; a non-ASCII character left in one would still make
// the source two-byte. Replacing it by one ASCII character keeps every column (and so the
// source map) right; string and regexp literals are already escaped by charset: 'ascii'.
for (const file of ['dist/cli.cjs', ...readdirSync('dist/vendor').map((f) => `dist/vendor/${f}`)]) {
  const text = readFileSync(file, 'utf8');
  // src/cli.ts's #! line would be a syntax error inside the launcher's function wrapper: it becomes a comment.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the class is every non-ASCII character, so its range starts at \x00
  const ascii = text.replace(/[^\x00-\x7f]/g, '?').replace(/^#!/, '//');
  if (ascii !== text) writeFileSync(file, ascii);
}

// The launcher compiles the bundle as a script with no loader for ES modules: an import() left
// in it (of a package esbuild could not bundle) would fail when reached, so the build fails now.
if (/[^\w$.]import\(/.test(readFileSync('dist/cli.cjs', 'latin1')))
  throw new Error('hack/bundle.mjs: dist/cli.cjs has a dynamic import(); bundle the module or add it to VENDOR');

// The launcher knows the bundle's hash, and so which cache is the bundle's.
const cliHash = createHash('sha256').update(readFileSync('dist/cli.cjs')).digest('hex').slice(0, 16);
const LAUNCHER = 'dist/atlantis-operator.cjs';
writeFileSync(LAUNCHER, readFileSync('hack/bundle/launcher.cjs', 'utf8').replace('@CLI_HASH@', cliHash));
chmodSync(LAUNCHER, 0o755);

// The external tables and the SQLite addon must resolve from where they are required, as they
// will at run time (in the image too, which ships node_modules for them).
createRequire(new URL('../dist/vendor/express.cjs', import.meta.url)).resolve(ICONV_TABLES);
createRequire(new URL('../dist/cli.cjs', import.meta.url)).resolve(SQLITE_ADDON);

// The Node-API addon of src/server/secrets/non-dumpable.ts, from one C file with no
// dependency: a C compiler and Node.js's own headers (node_api.h) are all it needs, the
// toolchain better-sqlite3 builds with at npm ci; no node-gyp, no download. Linux only:
// elsewhere nothing is built and the server says so at start.
const SOURCE = 'src/server/secrets/native/non-dumpable.c';
const OUT = 'dist/native/non-dumpable.node';

/** Where node_api.h is: npm's nodedir, then the include dir beside this node binary's prefix. */
function nodeIncludeDir() {
  const candidates = [
    process.env.npm_config_nodedir && path.join(process.env.npm_config_nodedir, 'include', 'node'),
    path.resolve(path.dirname(process.execPath), '..', 'include', 'node'),
    '/usr/include/node',
    '/usr/local/include/node',
  ].filter(Boolean);
  const found = candidates.find((d) => existsSync(path.join(d, 'node_api.h')));
  if (!found) throw new Error(`hack/bundle.mjs: node_api.h not found in ${candidates.join(', ')} (install Node.js's headers)`);
  return found;
}

function buildNative() {
  if (process.platform !== 'linux') return;
  mkdirSync(path.dirname(OUT), { recursive: true });
  cc(['-shared', '-fPIC', '-O2', '-Wall', '-Werror', '-I', nodeIncludeDir(), '-o', OUT, SOURCE], OUT);
}

function cc(args, out) {
  const compiler = process.env.CC || 'cc';
  try {
    execFileSync(compiler, args, { stdio: 'inherit' });
  } catch (e) {
    throw new Error(
      `hack/bundle.mjs: building ${out} with ${compiler} failed (a C compiler is needed, e.g. apt-get install gcc): ${e.message}`,
    );
  }
}

buildNative();

// The process host worker (src/server/terraform/process-host.ts): a plain POSIX program with no
// dependency, on every platform the server runs on (without it no git or terraform runs).
const HOST_SOURCES = ['process-host.c', 'exec-child.c'].map((f) => `src/server/terraform/native/${f}`);
const HOST_OUT = 'dist/native/process-host';
mkdirSync(path.dirname(HOST_OUT), { recursive: true });
cc(['-O2', '-Wall', '-Werror', '-o', HOST_OUT, ...HOST_SOURCES], HOST_OUT);

// Last, as it starts a server from the launcher: the code cache and the built-in modules a
// start loads (hack/bundle/code-cache.mjs).
await startAndStop({ repo: process.cwd(), launcher: path.resolve(LAUNCHER), write: true });
