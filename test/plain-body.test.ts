// isPlainBody (src/server/http/app.ts): which webhook bodies the server reads on node:http
// directly, and which it leaves to Express (body-parser), by their headers.
import assert from 'node:assert/strict';
import type { IncomingHttpHeaders } from 'node:http';
import { test } from 'node:test';
import { MAX_WEBHOOK_BYTES, isPlainBody } from '../src/server/http/app.js';

test('isPlainBody: a Content-Length within the limit, no encoding; everything else to Express', () => {
  const rows: Array<[string, IncomingHttpHeaders, boolean]> = [
    ['as GitHub sends it', { 'content-length': '851' }, true],
    ['empty body', { 'content-length': '0' }, true],
    ['exactly the limit', { 'content-length': String(MAX_WEBHOOK_BYTES) }, true],
    ['identity encoding', { 'content-length': '10', 'content-encoding': 'identity' }, true],
    ['one byte over the limit (413 from body-parser)', { 'content-length': String(MAX_WEBHOOK_BYTES + 1) }, false],
    ['no Content-Length', {}, false],
    ['chunked', { 'transfer-encoding': 'chunked' }, false],
    ['chunked with a Content-Length too', { 'content-length': '10', 'transfer-encoding': 'chunked' }, false],
    ['gzip (body-parser inflates it)', { 'content-length': '10', 'content-encoding': 'gzip' }, false],
    ['not a number', { 'content-length': '1e3' }, false],
    ['negative', { 'content-length': '-1' }, false],
  ];
  for (const [what, headers, want] of rows) assert.equal(isPlainBody(headers), want, what);
});
