// Webhook signature check and payload parsing, against payloads shaped like GitHub's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { verifySignature, parseWebhook, signBody } from '../src/server/vcs/github/webhook.js';
import { sendWebhook, pullRequestPayload, issueCommentPayload } from './support/github-standin.js';

const SECRET = 'hook-secret';
const body = Buffer.from('{"hello":"world"}');

test('verifySignature accepts the right signature only', () => {
  const sig = signBody(SECRET, body);
  assert.match(sig, /^sha256=[0-9a-f]{64}$/);
  assert.equal(verifySignature(SECRET, body, sig), true);
  assert.equal(verifySignature(SECRET, body, sig.toUpperCase().replace('SHA256=', 'sha256=')), true);
  assert.equal(verifySignature('other', body, sig), false);
  assert.equal(verifySignature(SECRET, Buffer.from('{"hello":"world!"}'), sig), false);
  assert.equal(verifySignature(SECRET, body, undefined), false);
  assert.equal(verifySignature(SECRET, body, ''), false);
  assert.equal(verifySignature(SECRET, body, 'sha256='), false);
  assert.equal(verifySignature(SECRET, body, sig.slice(0, -2)), false);
  assert.equal(verifySignature(SECRET, body, sig + '00'), false);
  assert.equal(verifySignature(SECRET, body, 'sha1=' + sig.slice(7)), false);
  assert.equal(verifySignature(SECRET, body, 'sha256=' + 'z'.repeat(64)), false);
  assert.equal(verifySignature('', body, signBody('', body)), false);
});

test('property: verifySignature never throws and only accepts the real signature', () => {
  // biome-ignore lint/nursery/noFloatingPromises: fc.assert of a synchronous property returns void
  fc.assert(
    fc.property(
      fc.string({ maxLength: 100 }),
      fc.uint8Array({ maxLength: 200 }),
      fc.option(fc.string({ maxLength: 80 })),
      (secret, bytes, header) => {
        const b = Buffer.from(bytes);
        const h = header ?? undefined;
        const ok = verifySignature(secret, b, h);
        if (ok) assert.equal(h?.trim().toLowerCase(), signBody(secret, b));
      },
    ),
    { numRuns: 500 },
  );
});

test('sendWebhook sends GitHub headers and a signature the verifier accepts', async () => {
  let seen: { headers: http.IncomingHttpHeaders; raw: Buffer } | undefined;
  const srv = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen = { headers: req.headers, raw: Buffer.concat(chunks) };
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  try {
    const url = `http://127.0.0.1:${(srv.address() as AddressInfo).port}/events`;
    const payload = pullRequestPayload({ repo: 'acme/infra', action: 'opened', number: 3, headSha: 'a'.repeat(40) });
    const r = await sendWebhook(url, 'pull_request', payload, { secret: SECRET });
    assert.equal(r.status, 200);
    assert.ok(seen);
    assert.equal(seen.headers['x-github-event'], 'pull_request');
    assert.equal(seen.headers['x-github-delivery'], r.deliveryId);
    assert.match(String(seen.headers['user-agent']), /^GitHub-Hookshot\//);
    assert.equal(seen.headers['content-type'], 'application/json');
    assert.equal(verifySignature(SECRET, seen.raw, seen.headers['x-hub-signature-256'] as string), true);
    const parsed = parseWebhook('pull_request', seen.raw);
    assert.equal(parsed.kind, 'pull_request');
    // forged and missing signatures
    await sendWebhook(url, 'pull_request', payload, { signature: 'sha256=' + '0'.repeat(64) });
    assert.equal(verifySignature(SECRET, seen.raw, seen.headers['x-hub-signature-256'] as string), false);
    await sendWebhook(url, 'pull_request', payload, { signature: null });
    assert.equal(seen.headers['x-hub-signature-256'], undefined);
  } finally {
    srv.close();
  }
});

const enc = (o: unknown): Buffer => Buffer.from(JSON.stringify(o));

test('pull_request events: opened, synchronize, ready_for_review, closed', () => {
  for (const action of ['opened', 'synchronize', 'ready_for_review', 'closed'] as const) {
    const p = pullRequestPayload({
      repo: 'acme/infra',
      action,
      number: 7,
      headSha: 'b'.repeat(40),
      headRef: 'feat',
      baseRef: 'main',
      user: 'alice',
      merged: action === 'closed',
      installationId: 42,
      cloneUrl: 'file:///tmp/x.git',
    });
    const r = parseWebhook('pull_request', enc(p), 'dlv-1');
    assert.equal(r.kind, 'pull_request');
    if (r.kind !== 'pull_request') continue;
    assert.equal(r.action, action);
    assert.equal(r.number, 7);
    assert.equal(r.pull_request.head.sha, 'b'.repeat(40));
    assert.equal(r.pull_request.head.ref, 'feat');
    assert.equal(r.pull_request.base.ref, 'main');
    assert.equal(r.pull_request.user.login, 'alice');
    assert.equal(r.pull_request.merged, action === 'closed');
    assert.equal(r.repository.full_name, 'acme/infra');
    assert.equal(r.repository.owner.login, 'acme');
    assert.equal(r.repository.name, 'infra');
    assert.equal(r.repository.clone_url, 'file:///tmp/x.git');
    assert.equal(r.pull_request.head.repo?.clone_url, 'file:///tmp/x.git');
    assert.equal(r.sender.login, 'alice');
    assert.deepEqual(r.installation, { id: 42 });
    assert.equal(r.deliveryId, 'dlv-1');
    assert.equal(r.autoplan, action !== 'closed');
  }
});

test('draft PRs are not autoplanned, but their close still parses', () => {
  const opened = parseWebhook(
    'pull_request',
    enc(pullRequestPayload({ repo: 'a/b', action: 'opened', number: 1, headSha: 'c'.repeat(40), draft: true })),
  );
  assert.equal(opened.kind === 'pull_request' && opened.autoplan, false);
  const closed = parseWebhook(
    'pull_request',
    enc(pullRequestPayload({ repo: 'a/b', action: 'closed', number: 1, headSha: 'c'.repeat(40), draft: true })),
  );
  assert.equal(closed.kind, 'pull_request');
  const ready = parseWebhook(
    'pull_request',
    enc(pullRequestPayload({ repo: 'a/b', action: 'ready_for_review', number: 1, headSha: 'c'.repeat(40), draft: false })),
  );
  assert.equal(ready.kind === 'pull_request' && ready.autoplan, true);
});

test('issue_comment created on a PR', () => {
  const p = issueCommentPayload({
    repo: 'acme/infra',
    number: 12,
    body: 'atlantis plan -d x',
    commentId: 99,
    user: 'bob',
    installationId: 5,
  });
  const r = parseWebhook('issue_comment', enc(p));
  assert.equal(r.kind, 'issue_comment');
  if (r.kind !== 'issue_comment') return;
  assert.equal(r.pull, 12);
  assert.equal(r.comment.id, 99);
  assert.equal(r.comment.body, 'atlantis plan -d x');
  assert.equal(r.comment.user.login, 'bob');
  assert.equal(r.sender.login, 'bob');
  assert.equal(r.repository.full_name, 'acme/infra');
  assert.ok(r.issue.pull_request);
  assert.deepEqual(r.installation, { id: 5 });
});

test('ignored events carry a reason', () => {
  const cases: [string, unknown, RegExp][] = [
    ['issue_comment', issueCommentPayload({ repo: 'a/b', number: 1, body: 'atlantis plan', action: 'edited' }), /action edited/],
    ['issue_comment', issueCommentPayload({ repo: 'a/b', number: 1, body: 'atlantis plan', action: 'deleted' }), /action deleted/],
    ['issue_comment', issueCommentPayload({ repo: 'a/b', number: 1, body: 'atlantis plan', onPullRequest: false }), /not a pull request/],
    ['pull_request', pullRequestPayload({ repo: 'a/b', action: 'labeled', number: 1, headSha: 'd'.repeat(40) }), /action labeled/],
    ['pull_request', pullRequestPayload({ repo: 'a/b', action: 'reopened', number: 1, headSha: 'd'.repeat(40) }), /action reopened/],
    ['ping', { zen: 'Keep it logically awesome.', hook_id: 1 }, /ping/],
    ['push', { ref: 'refs/heads/main' }, /unsupported event "push"/],
    ['check_run', {}, /unsupported event/],
  ];
  for (const [ev, payload, reason] of cases) {
    const r = parseWebhook(ev, enc(payload));
    assert.equal(r.kind, 'ignored', `${ev} ${JSON.stringify(r)}`);
    if (r.kind === 'ignored') {
      assert.match(r.reason, reason);
      assert.equal(r.event, ev);
    }
  }
});

test('malformed bodies give a readable error', () => {
  const good = pullRequestPayload({ repo: 'a/b', action: 'opened', number: 1, headSha: 'e'.repeat(40) });
  const raw = JSON.stringify(good);
  const cases: [string, Buffer, RegExp][] = [
    ['pull_request', Buffer.from(raw.slice(0, raw.length / 2)), /not valid JSON/],
    ['pull_request', Buffer.from(''), /not valid JSON/],
    ['pull_request', Buffer.from('[]'), /body must be an object/],
    ['pull_request', Buffer.from('null'), /body must be an object/],
    ['pull_request', enc({ ...good, pull_request: undefined }), /pull_request must be an object/],
    [
      'pull_request',
      enc({ ...good, repository: { ...(good.repository as object), full_name: 'nope' } }),
      /full_name must look like owner\/name/,
    ],
    ['pull_request', enc({ ...good, action: 5 }), /body\.action must be a string/],
    [
      'pull_request',
      enc({ ...good, pull_request: { ...(good.pull_request as object), head: { ref: 'x' } } }),
      /pull_request\.head\.sha must be a string/,
    ],
    ['issue_comment', enc({ action: 'created', issue: { number: 'x' } }), /issue\.number must be an integer/],
    [
      'issue_comment',
      enc({ ...issueCommentPayload({ repo: 'a/b', number: 1, body: 'x' }), comment: { id: 1, user: { login: 'u' } } }),
      /comment\.body must be a string/,
    ],
    [
      'issue_comment',
      enc({ ...issueCommentPayload({ repo: 'a/b', number: 1, body: 'x' }), sender: undefined }),
      /sender must be an object/,
    ],
  ];
  for (const [ev, b, msg] of cases) {
    const r = parseWebhook(ev, b);
    assert.equal(r.kind, 'malformed', `${JSON.stringify(r)}`);
    if (r.kind === 'malformed') assert.match(r.error, msg);
  }
});

test('property: parseWebhook never throws on arbitrary bytes or JSON', () => {
  // biome-ignore lint/nursery/noFloatingPromises: fc.assert of a synchronous property returns void
  fc.assert(
    fc.property(
      fc.constantFrom('pull_request', 'issue_comment', 'push', 'ping', ''),
      fc.oneof(
        fc.uint8Array({ maxLength: 200 }).map((a) => Buffer.from(a)),
        fc.jsonValue().map((v) => enc(v)),
      ),
      (ev, b) => {
        const r = parseWebhook(ev, b);
        assert.ok(['ignored', 'malformed', 'pull_request', 'issue_comment'].includes(r.kind));
      },
    ),
    { numRuns: 1000 },
  );
});
