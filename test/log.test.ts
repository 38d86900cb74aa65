// The JSON log lines (SPEC section 8): their keys and order, the level filter, a child's fields,
// and secrets scrubbed inside the fields.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import { type LogLevel, createLogger, logLine } from '../src/log.js';
import { processRedactor } from '../src/server/secrets/redact.js';

const AT = new Date('2026-12-04T10:11:12.345Z');

describe('log lines', () => {
  const cases: Array<[string, LogLevel, string, Record<string, unknown>, string]> = [
    ['no fields', 'info', 'Server started', {}, '{"level":"info","time":"2026-12-04T10:11:12.345Z","msg":"Server started"}'],
    [
      'fields after level, time and msg, in their order',
      'warn',
      'Job failed',
      { pull: 7, project: 'infra/dev' },
      '{"level":"warn","time":"2026-12-04T10:11:12.345Z","msg":"Job failed","pull":7,"project":"infra/dev"}',
    ],
    [
      'a message field is appended to the message',
      'warn',
      'Watch sent an error',
      { code: 410, message: 'too old resource version' },
      '{"level":"warn","time":"2026-12-04T10:11:12.345Z","msg":"Watch sent an error too old resource version","code":410}',
    ],
    [
      'a level or timestamp field does not replace the line own',
      'error',
      'Oops',
      { level: 'debug', timestamp: 'x' },
      '{"level":"error","time":"2026-12-04T10:11:12.345Z","msg":"Oops"}',
    ],
    [
      'an error becomes its name and message',
      'error',
      'Plan failed',
      { err: new TypeError('bad') },
      '{"level":"error","time":"2026-12-04T10:11:12.345Z","msg":"Plan failed","err":{"message":"bad","name":"TypeError"}}',
    ],
  ];
  for (const [name, level, msg, fields, want] of cases) {
    it(name, () => assert.equal(logLine(level, msg, fields, AT), `${want}\n`));
  }

  it('scrubs the process secrets inside the fields', () => {
    const secret = 'log-test-secret-0123456789';
    processRedactor.addSource(() => [secret]);
    const line = logLine('info', 'Cloned', { url: `https://x:${secret}@git.example/r.git` }, AT);
    assert.equal(JSON.parse(line).url, 'https://x:[REDACTED]@git.example/r.git');
  });

  it('writes the levels at or above its own, and a child adds its fields (the call fields win)', () => {
    const out = new PassThrough();
    let text = '';
    out.on('data', (c: Buffer) => (text += c.toString()));
    const log = createLogger({ level: 'info', stream: out });
    log.debug('Hidden');
    log.info('Shown', { a: 1 });
    const child = log.child({ reconcileID: 'r1', a: 0 });
    child.warn('Child', { a: 2 });
    child.debug('Hidden too');
    const lines = text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.deepEqual(
      lines.map(({ time: _t, ...rest }) => rest),
      [
        { level: 'info', msg: 'Shown', a: 1 },
        { level: 'warn', msg: 'Child', reconcileID: 'r1', a: 2 },
      ],
    );
    assert.ok(lines.every((l) => typeof l.time === 'string' && !Number.isNaN(Date.parse(l.time))));
    createLogger({ silent: true, stream: out }).error('Never');
    assert.equal(text.split('\n').length, 3);
  });
});
