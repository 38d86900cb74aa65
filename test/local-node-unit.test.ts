// Pure parts of the local node: $(VAR) expansion and mount-path rewriting.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { expandVars, rewriteMounts } from '../dev/local-node/index.js';

test('$(VAR) expansion like kubelet', () => {
  const env = { A: 'x', POD_NAME: 'p-0' };
  assert.equal(expandVars('/data/$(POD_NAME)/$(A)', env), '/data/p-0/x');
  assert.equal(expandVars('$(UNKNOWN) stays', env), '$(UNKNOWN) stays');
  assert.equal(expandVars('$$(A) is escaped, $$ too', env), '$(A) is escaped, $ too');
  assert.equal(expandVars('no vars', env), 'no vars');
});

test('mount paths are rewritten where a path starts, and nowhere else', () => {
  const mounts: Array<[string, string]> = [
    ['/data/cache', '/host/cache'],
    ['/data', '/host/pv'],
  ];
  assert.equal(rewriteMounts('/data', mounts), '/host/pv');
  assert.equal(rewriteMounts('/data/x/y', mounts), '/host/pv/x/y');
  assert.equal(rewriteMounts('/data/cache/z', mounts), '/host/cache/z', 'longest mount wins');
  assert.equal(rewriteMounts('--data-dir=/data/atlantis', mounts), '--data-dir=/host/pv/atlantis');
  assert.equal(rewriteMounts('a:/data:/data/b', mounts), 'a:/host/pv:/host/pv/b');
  assert.equal(rewriteMounts('echo hi > /data/f; cat "/data/g"', mounts), 'echo hi > /host/pv/f; cat "/host/pv/g"');
  assert.equal(rewriteMounts('/database', mounts), '/database', 'a longer name is another path');
  assert.equal(rewriteMounts('/var/data/x', mounts), '/var/data/x', 'only at the start of a path');
  assert.equal(rewriteMounts('http://h/data', mounts), 'http://h/data', 'URL paths stay');
});
