// The reconciler's view of its own writes (client-go's MutationCache idea): the object a
// PATCH returned is used until the informer's copy is at least as new, then dropped.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WrittenObjects } from '../src/controller/reconcile/reconciler.js';

const obj = (uid: string, rv: string, note = '') => ({ metadata: { uid, resourceVersion: rv, annotations: { note } } });

test('the written copy wins while it is newer, and is dropped once the cache caught up', () => {
  const w = new WrittenObjects();
  w.record('ns/a', obj('u1', '105', 'written'));
  assert.equal(w.fresher(obj('u1', '100', 'cached')).metadata.annotations.note, 'written');
  assert.equal(w.size(), 1);
  // The watch delivered our write (same version) or something newer: the cache wins for good.
  assert.equal(w.fresher(obj('u1', '105', 'cached')).metadata.annotations.note, 'cached');
  assert.equal(w.size(), 0);
  assert.equal(w.fresher(obj('u1', '100', 'stale cache')).metadata.annotations.note, 'stale cache');
});

test('a change by someone else after our write is newer: the cache wins', () => {
  const w = new WrittenObjects();
  w.record('ns/a', obj('u1', '105', 'written'));
  assert.equal(w.fresher(obj('u1', '110', 'user edit')).metadata.annotations.note, 'user edit');
});

test('other objects, unparsable versions, objects without uid', () => {
  const w = new WrittenObjects();
  w.record('ns/a', obj('u1', '105', 'written'));
  w.record('ns/a', { metadata: { resourceVersion: '1' } });
  w.record('ns/a', undefined);
  assert.equal(w.size(), 1);
  assert.equal(w.fresher(obj('u2', '1', 'other')).metadata.annotations.note, 'other');
  assert.equal(w.fresher(obj('u1', 'abc', 'opaque')).metadata.annotations.note, 'opaque', 'not comparable: trust the cache');
});

test('forget drops the entries of objects that are gone, only for that key', () => {
  const w = new WrittenObjects();
  w.record('ns/a', obj('pod-old', '5'));
  w.record('ns/a', obj('pod-live', '6'));
  w.record('ns/b', obj('pod-b', '7'));
  w.forget('ns/a', new Set(['pod-live']));
  assert.equal(w.size(), 2);
  w.forget('ns/a', new Set());
  assert.equal(w.size(), 1, 'ns/b untouched');
});
