// The one retry-delay formula (src/backoff.ts) the work queue, the informer and the GitHub
// client share, and its two jitters.
import assert from 'node:assert/strict';
import test from 'node:test';
import { backoffDelay, equalJitter, spreadJitter } from '../src/backoff.js';

test('backoffDelay doubles from the base and stops at the cap', () => {
  const table: Array<[n: number, base: number, max: number, want: number]> = [
    [-1, 200, 30_000, 200],
    [0, 200, 30_000, 200],
    [1, 200, 30_000, 400],
    [7, 200, 30_000, 25_600],
    [8, 200, 30_000, 30_000],
    [5000, 5, 300_000, 300_000],
  ];
  for (const [n, base, max, want] of table) assert.equal(backoffDelay(n, base, max), want, `n=${n}`);
});

test('spreadJitter stays within the spread around the delay', () => {
  assert.equal(
    spreadJitter(1000, 0.2, () => 0),
    800,
  );
  assert.equal(
    spreadJitter(1000, 0.2, () => 0.5),
    1000,
  );
  assert.equal(
    spreadJitter(1000, 0.2, () => 0.999999),
    1200,
  );
});

test('equalJitter keeps half the delay fixed', () => {
  assert.equal(
    equalJitter(400, () => 0),
    200,
  );
  assert.equal(
    equalJitter(400, () => 0.5),
    300,
  );
  assert.equal(
    equalJitter(400, () => 0.999999),
    400,
  );
});
