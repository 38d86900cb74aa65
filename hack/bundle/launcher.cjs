#!/usr/bin/env node
// dist/atlantis-operator.cjs, the CLI's entry (hack/bundle.mjs writes it from this template):
// runs the bundle dist/cli.cjs with V8's code cache for it when there is one. Why: compiling
// the bundle's ~1 MB and the functions a server start runs is about a third of a start's
// time; the cache, made by hack/bundle/code-cache.mjs from a real server start, holds them
// compiled. The cache's name carries the bundle's hash, so a cache made for another build is
// never used (V8 itself only compares the source's length); V8 rejects a cache made by
// another Node.js or with other V8 flags (src/node-args.ts), and then compiles as usual.
'use strict';
const fs = require('node:fs');
const Module = require('node:module');
const path = require('node:path');
const vm = require('node:vm');

const CLI_HASH = '@CLI_HASH@';
const file = path.join(__dirname, 'cli.cjs');
// The bundle is ASCII (hack/bundle.mjs): latin1 reads it as it is, without UTF-8 decoding.
const script = new vm.Script(Module.wrap(fs.readFileSync(file, 'latin1')), {
  filename: file,
  cachedData: readCache(path.join(__dirname, `cli-${CLI_HASH}.code-cache`)),
});
// Set by hack/bundle/code-cache.mjs only: where to write the cache when this process exits.
const cacheOut = process.env.ATLANTIS_OPERATOR_CODE_CACHE_OUT;
if (cacheOut) {
  delete process.env.ATLANTIS_OPERATOR_CODE_CACHE_OUT;
  process.once('exit', () => fs.writeFileSync(cacheOut, script.createCachedData()));
}
const cli = new Module(file, module);
cli.filename = file;
script.runInThisContext()(cli.exports, Module.createRequire(file), cli, file, __dirname);

function readCache(f) {
  try {
    return fs.readFileSync(f);
  } catch {
    return undefined; // no cache: V8 compiles the bundle
  }
}
