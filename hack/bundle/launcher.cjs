#!/usr/bin/env node
// dist/atlantis-operator.cjs, the CLI's entry (hack/bundle.mjs writes it from this template):
// runs the bundle dist/cli.cjs from V8's code cache for it. Why: compiling the bundle's ~1.5 MB
// and the functions a server start runs is about a third of a start's time; the cache, made
// by hack/bundle/code-cache.mjs from a real server start, holds them compiled. Its name
// carries the bundle's hash, so a cache made for another build is never used (V8 itself only
// compares the source's length); V8 rejects a cache made by another Node.js or under other
// V8 flags, and then compiles as usual.
'use strict';
const fs = require('node:fs');
const Module = require('node:module');
const path = require('node:path');
const v8 = require('node:v8');
const vm = require('node:vm');

const CLI_HASH = '@CLI_HASH@';
const file = path.join(__dirname, 'cli.cjs');
const cacheFile = path.join(__dirname, `cli-${CLI_HASH}.code-cache`);
const builtinsFile = path.join(__dirname, `cli-${CLI_HASH}.builtins.json`);

// Node.js's built-in modules a start loads, loaded first: Node.js takes their code from its
// own code cache only while V8's flags are the defaults, and the flags below change them.
for (const name of readJson(builtinsFile) ?? []) require(name);

// V8's settings for the whole process, given here rather than on node's command line, where
// they would make Node.js compile its built-in modules at every start (about 15 ms):
// --semi-space-growth-factor=1: the young generation stays at its first size, 1 MiB per
// semi-space (by default it grows to 16 as allocation goes on). Webhooks, job output and API
// answers are short-lived objects; with the cap the server's peak RSS is lower and its
// scavenges shorter, for the same CPU (figures in docs/reliability.md).
// --ticks-before-optimization=44 --bytecode-size-allowance-per-tick=10
// --max-bytecode-size-for-early-opt=0: TurboFan optimizes a function after about 15 times the
// work it waits for by default (3 ticks plus one per 150 bytes of bytecode, small functions at
// the first). A server mostly waits on terraform: code a plan runs through a few times is no
// longer optimized, nor is TurboFan's compile memory kept by the process, while code that runs
// often (a burst of webhooks) still is. These are read at each tick, so they hold for the
// functions Node.js made before this line too (its own start); --interrupt-budget, which
// would do the same, is only read when a function is first set up.
// The code cache is made and taken under them (V8 checks).
v8.setFlagsFromString(
  '--semi-space-growth-factor=1 --ticks-before-optimization=44 --bytecode-size-allowance-per-tick=10 --max-bytecode-size-for-early-opt=0',
);

// The bundle is ASCII (hack/bundle.mjs): latin1 reads it as it is, without UTF-8 decoding.
const script = new vm.Script(Module.wrap(fs.readFileSync(file, 'latin1')), { filename: file, cachedData: readFile(cacheFile) });
// For the build and its tests only: `write` (hack/bundle/code-cache.mjs) writes the cache and
// the built-in modules loaded when this process exits; `check` says whether V8 took the cache.
const mode = process.env.ATLANTIS_OPERATOR_CODE_CACHE;
delete process.env.ATLANTIS_OPERATOR_CODE_CACHE;
if (mode === 'check') {
  process.stdout.write(`${script.cachedDataRejected === false ? 'taken' : script.cachedDataRejected ? 'rejected' : 'none'}\n`);
  process.exit(0);
}
if (mode === 'write') {
  process.once('exit', () => {
    fs.writeFileSync(cacheFile, script.createCachedData());
    const loaded = process.moduleLoadList.filter((m) => m.startsWith('NativeModule ')).map((m) => m.slice('NativeModule '.length));
    fs.writeFileSync(builtinsFile, `${JSON.stringify(loaded.filter((m) => Module.isBuiltin(m)))}\n`);
  });
}
const cli = new Module(file, module);
cli.filename = file;
script.runInThisContext()(cli.exports, Module.createRequire(file), cli, file, __dirname);

function readFile(f) {
  try {
    return fs.readFileSync(f);
  } catch {
    return undefined; // none (this build has no code cache yet): V8 compiles
  }
}

function readJson(f) {
  const text = readFile(f);
  return text === undefined ? undefined : JSON.parse(text.toString('utf8'));
}
