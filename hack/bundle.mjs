// Bundles the CLI into one ES module, dist/atlantis-operator.mjs: what the image, the local
// node and the tests run. Why: loading ~1,500 separate module files (most of them
// @kubernetes/client-node's generated API) costs a Node.js process about 2-3 s of CPU at
// start; the bundle starts in about a third of that, which matters when 100 server pods
// start at once. better-sqlite3 stays outside (a native addon found through node_modules).
// The server's native parts are built here too (below), so the image's build stage makes them
// with the bundle: its one addon, dist/native/non-dumpable.node, and its process host worker,
// dist/native/process-host (src/server/terraform/native/*.c), a small program the
// CLI starts from beside itself.
// Code reached only through a dynamic import() goes into dist/chunks/ and is loaded when first
// needed: @kubernetes/client-node, which only an unusual kubeconfig needs (src/k8s/kubeconfig.ts).
// So are the controller's and `migrate`'s code (src/cli.ts): a server start does not load them.
// So is ioredis, with the Redis store's parts (src/server/locks/open-store.ts): only a server
// with `--locking-db-type redis` loads them.
// So are Express, the API and the web UI (src/server/http/app.ts): the first request that needs them loads them.
// iconv-lite's character tables (~540 KB of the bundle, the largest part) stay in node_modules:
// the server only reads raw webhook bodies, so they are loaded, if ever, on first use. Every
// server start would otherwise decode and parse them (see lazyIconvTables below).
// `charset: 'ascii'` escapes the few non-ASCII characters in dependencies: one of them turns
// the whole bundle's source text into a two-byte string, twice the memory in every process.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { build } from 'esbuild';

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

rmSync('dist/chunks', { recursive: true, force: true }); // no chunk of an older build left beside the new ones
await build({
  entryPoints: { 'atlantis-operator': 'src/cli.ts' },
  outdir: 'dist',
  outExtension: { '.js': '.mjs' },
  bundle: true,
  platform: 'node',
  format: 'esm',
  splitting: true,
  chunkNames: 'chunks/[name]-[hash]',
  target: 'node20',
  external: ['better-sqlite3'],
  // CommonJS dependencies (express, yaml, ...) call require(); give the ESM bundle one.
  banner: { js: "import { createRequire as __atoCreateRequire } from 'node:module'; const require = __atoCreateRequire(import.meta.url);" },
  sourcemap: 'linked',
  logLevel: 'warning',
  charset: 'ascii',
  plugins: [lazyIconvTables, promClientCore],
});

// esbuild keeps some comments as they are; a non-ASCII character left in one would still make
// the source two-byte. Replacing it by one ASCII character keeps every column (and so the
// source map) right; string and regexp literals are already escaped by charset: 'ascii'.
for (const file of [...readdirSync('dist'), ...readdirSync('dist/chunks').map((f) => `chunks/${f}`)]
  .filter((f) => f.endsWith('.mjs'))
  .map((f) => `dist/${f}`)) {
  const text = readFileSync(file, 'utf8');
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the class is every non-ASCII character, so its range starts at \x00
  const ascii = text.replace(/[^\x00-\x7f]/g, '?');
  if (ascii !== text) writeFileSync(file, ascii);
}

// The external tables must resolve from dist/ as they will at run time (in the image too,
// which ships node_modules for better-sqlite3).
createRequire(new URL('../dist/atlantis-operator.mjs', import.meta.url)).resolve(ICONV_TABLES);

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
