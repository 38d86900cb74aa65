// The contract between the server and the controller (src/contract/drain-protocol.ts): its
// rules as tables, and both roles reading the same annotation and /status the same way.
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import {
  ANNOTATION_DRAIN,
  MAX_WAIT_DRAINED_SECONDS,
  drainRequested,
  parseStatusBody,
  parseWaitDrained,
  reportsDrained,
  statusRequestPath,
} from '../src/contract/drain-protocol.js';
import { observePod } from '../src/controller/rollout/observe.js';
import { isDrained, isDraining } from '../src/controller/rollout/planner.js';
import { LABEL_ORDINAL } from '../src/controller/types.js';
import { initialDrainState } from '../src/server/drain/drain-state.js';
import { OperationTracker } from '../src/server/drain/operation-tracker.js';
import { podRequestsDrain } from '../src/server/drain/own-pod-watch.js';
import { serializeStatus } from '../src/server/http/app.js';
import { VERSION } from '../src/version.js';

describe('the drain annotation', () => {
  const values: Array<[string, string | undefined, boolean]> = [
    ['absent', undefined, false],
    ['empty', '', false],
    ['blank', '  ', false],
    ['tab and newline', '\t\n', false],
    ['an RFC 3339 time (the controller)', '2026-11-29T19:00:00Z', true],
    ['"now" (kubectl annotate)', 'now', true],
    ['padded', ' x ', true],
  ];
  for (const [name, value, want] of values) {
    it(`${name}: ${want ? 'drain' : 'no drain'}, for the server and the controller alike`, () => {
      assert.equal(drainRequested(value), want);
      const pod: V1Pod = {
        metadata: {
          name: 'atlantis-0',
          uid: 'u0',
          labels: { [LABEL_ORDINAL]: '0' },
          annotations: value === undefined ? {} : { [ANNOTATION_DRAIN]: value },
        },
      };
      assert.equal(podRequestsDrain(pod, 'atlantis-0'), want, 'server');
      // A blank value used to count as draining for the controller only: it then waited for
      // a drain the server never started.
      assert.equal(isDraining(observePod(pod)!), want, 'controller');
    });
  }
});

describe('wait_drained', () => {
  const rows: Array<[unknown, number | RegExp]> = [
    [undefined, 0],
    ['0', 0],
    ['5', 5],
    [' 0.2 ', 0.2],
    [String(MAX_WAIT_DRAINED_SECONDS), MAX_WAIT_DRAINED_SECONDS],
    ['61', /^wait_drained must be a number of seconds from 0 to 60, given once \(got "61"\)$/],
    ['-1', /from 0 to 60/],
    ['1e3', /from 0 to 60/],
    ['', /from 0 to 60/],
    [['1', '2'], /given once/],
  ];
  for (const [value, want] of rows) {
    it(`server reads ${JSON.stringify(value)}`, () => {
      const got = parseWaitDrained(value);
      if (want instanceof RegExp) assert.match(String(got), want);
      else assert.equal(got, want);
    });
  }
  it('the client asks only for what the server accepts', () => {
    assert.equal(statusRequestPath(), '/status');
    assert.equal(statusRequestPath(0), '/status');
    assert.equal(statusRequestPath(5), '/status?wait_drained=5');
    assert.equal(statusRequestPath(600), `/status?wait_drained=${MAX_WAIT_DRAINED_SECONDS}`);
    assert.equal(statusRequestPath(-3), '/status');
    for (const w of [0.5, 5, 60, 600]) {
      const q = new URL(statusRequestPath(w), 'http://x').searchParams.get('wait_drained');
      assert.equal(typeof parseWaitDrained(q ?? undefined), 'number', `${w} is accepted by the server`);
    }
  });
});

describe('the /status answer, read by the controller', () => {
  const rows: Array<[string, string, ReturnType<typeof parseStatusBody>]> = [
    [
      "Atlantis's three fields",
      '{"shutting_down":false,"in_progress_operations":2,"version":"0.47.0"}',
      { ok: true, body: { shutting_down: false, in_progress_operations: 2, version: '0.47.0' } },
    ],
    [
      'without a version',
      '{"shutting_down":true,"in_progress_operations":0}',
      { ok: true, body: { shutting_down: true, in_progress_operations: 0 } },
    ],
    [
      'unchecked fields are dropped',
      '{"shutting_down":true,"in_progress_operations":0,"version":7,"operations":"x"}',
      { ok: true, body: { shutting_down: true, in_progress_operations: 0 } },
    ],
    ['not JSON', '<html>', { ok: false, error: 'not JSON' }],
    ['null', 'null', { ok: false, error: 'not an Atlantis /status answer' }],
    ['an array', '[]', { ok: false, error: 'not an Atlantis /status answer' }],
    ['another JSON answer', '{"status":"ok"}', { ok: false, error: 'not an Atlantis /status answer' }],
    [
      'shutting_down as a string',
      '{"shutting_down":"true","in_progress_operations":0}',
      { ok: false, error: 'not an Atlantis /status answer' },
    ],
    ['a negative count', '{"shutting_down":true,"in_progress_operations":-1}', { ok: false, error: 'not an Atlantis /status answer' }],
    ['a fractional count', '{"shutting_down":true,"in_progress_operations":0.5}', { ok: false, error: 'not an Atlantis /status answer' }],
  ];
  for (const [name, text, want] of rows) it(name, () => assert.deepEqual(parseStatusBody(text), want));

  it('drained means shutting down with no operation left', () => {
    assert.equal(reportsDrained({ shutting_down: true, in_progress_operations: 0 }), true);
    assert.equal(reportsDrained({ shutting_down: true, in_progress_operations: 1 }), false);
    assert.equal(reportsDrained({ shutting_down: false, in_progress_operations: 0 }), false);
  });

  it('what the server writes is what the controller reads, drained exactly when the server is', () => {
    const tracker = new OperationTracker();
    const op = tracker.tryStart({ command: 'apply', repo: 'acme/infra', pull: 7, project: null })!;
    const read = () => {
      const r = parseStatusBody(serializeStatus(tracker, initialDrainState, new Map()).json);
      assert.ok(r.ok, JSON.stringify(r));
      return { ok: true as const, body: r.body, at: new Date() };
    };
    assert.deepEqual(read().body, { shutting_down: false, in_progress_operations: 1, version: VERSION });
    tracker.shutDown();
    assert.equal(isDrained(read()), false, 'one operation left');
    tracker.finish(op.id);
    assert.equal(tracker.isDrained, true);
    assert.equal(isDrained(read()), true);
  });
});

describe('what may import what', () => {
  const src = path.resolve(import.meta.dirname, '../src');
  const importsOf = (dir: string): Array<{ file: string; target: string }> =>
    readdirSync(path.join(src, dir), { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts'))
      .flatMap((f) => {
        const file = path.join(src, dir, f);
        return [...readFileSync(file, 'utf8').matchAll(/^(?:import|export)[^;]*? from '(\.[^']+)'/gms)].map((m) => ({
          file: path.relative(src, file),
          target: path.relative(src, path.resolve(path.dirname(file), m[1]!)),
        }));
      });
  const into = (edges: Array<{ file: string; target: string }>, dir: string) =>
    edges.filter((e) => e.target.startsWith(`${dir}/`)).map((e) => `${e.file} -> ${e.target}`);

  it('the roles meet only in src/contract, which imports neither', () => {
    const server = importsOf('server');
    const controller = importsOf('controller');
    assert.ok(server.length > 50 && controller.length > 50, 'imports were found');
    assert.ok(into(server, 'contract').length > 0 && into(controller, 'contract').length > 0, 'both roles use the contract');
    assert.deepEqual(into(server, 'controller'), []);
    assert.deepEqual(into(controller, 'server'), []);
    assert.deepEqual(
      importsOf('contract').filter((e) => !e.target.startsWith('contract/')),
      [],
    );
  });
});
