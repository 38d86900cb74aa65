// /readyz's decision (src/server/http/readiness.ts), every input combination.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type Readiness, type ReadinessInput, readiness } from '../src/server/http/readiness.js';

const cases: Array<[ReadinessInput, Readiness]> = [
  [
    { shuttingDown: false, queueDuringDrain: false, storeHealthy: true },
    { status: 200, text: 'ok' },
  ],
  [
    { shuttingDown: false, queueDuringDrain: true, storeHealthy: true },
    { status: 200, text: 'ok' },
  ],
  [
    { shuttingDown: false, queueDuringDrain: false, storeHealthy: false },
    { status: 503, text: 'lock store unusable' },
  ],
  [
    { shuttingDown: false, queueDuringDrain: true, storeHealthy: false },
    { status: 503, text: 'lock store unusable' },
  ],
  // Draining: out of the Service, whatever the store says...
  [
    { shuttingDown: true, queueDuringDrain: false, storeHealthy: true },
    { status: 503, text: 'draining' },
  ],
  [
    { shuttingDown: true, queueDuringDrain: false, storeHealthy: false },
    { status: 503, text: 'draining' },
  ],
  // ...unless it queues commands for its successor, which needs the store.
  [
    { shuttingDown: true, queueDuringDrain: true, storeHealthy: true },
    { status: 200, text: 'draining, queueing commands' },
  ],
  [
    { shuttingDown: true, queueDuringDrain: true, storeHealthy: false },
    { status: 503, text: 'lock store unusable' },
  ],
];

for (const [input, want] of cases) test(`readiness ${JSON.stringify(input)}`, () => assert.deepEqual(readiness(input), want));
