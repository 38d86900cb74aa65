// Bundles the CLI into one ES module, dist/atlantis-operator.mjs: what the image, the local
// node and the tests run. Why: loading ~1,500 separate module files (most of them
// @kubernetes/client-node's generated API) costs a Node.js process about 2-3 s of CPU at
// start; the bundle starts in about a third of that, which matters when 100 server pods
// start at once. better-sqlite3 stays outside (a native addon found through node_modules).
// A second, small entry point, dist/process-host-worker.mjs, is the server's process host
// thread (src/server/terraform/process-host-worker.ts); the CLI loads it from beside itself.
// Code reached only through a dynamic import() goes into dist/chunks/ and is loaded when first
// needed: @kubernetes/client-node, which only an unusual kubeconfig needs (src/k8s/kubeconfig.ts).
import { build } from 'esbuild';

await build({
  entryPoints: {
    'atlantis-operator': 'src/cli.ts',
    'process-host-worker': 'src/server/terraform/process-host-worker.ts',
  },
  outdir: 'dist',
  outExtension: { '.js': '.mjs' },
  bundle: true,
  platform: 'node',
  format: 'esm',
  splitting: true,
  chunkNames: 'chunks/[name]-[hash]',
  target: 'node20',
  external: ['better-sqlite3'],
  // CommonJS dependencies (express, winston, ...) call require(); give the ESM bundle one.
  banner: { js: "import { createRequire as __atoCreateRequire } from 'node:module'; const require = __atoCreateRequire(import.meta.url);" },
  sourcemap: 'linked',
  logLevel: 'warning',
});
