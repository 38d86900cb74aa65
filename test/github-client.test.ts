// GitHub client against the local stand-in: endpoints, auth, splitting, pagination,
// retries and rate limits, and that the token never reaches a log line.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import net from 'node:net';
import { GitHubStandin } from './support/github-standin.js';
import {
  GitHubClient,
  GitHubApiError,
  splitComment,
  MAX_COMMENT_LENGTH,
  hostForBaseUrl,
  pullIsMergeable,
} from '../src/server/vcs/github/client.js';
import { createLogger } from '../src/log.js';
import { separators } from '../src/server/vcs/comment-split.js';

const REPO = 'acme/infra';

async function setup(opts: { maxAttempts?: number; maxRateLimitWaitMs?: number } = {}) {
  const gh = await GitHubStandin.start();
  gh.addRepo(REPO);
  gh.addPull(REPO, { number: 1, headSha: 'a'.repeat(40), headRef: 'feat', files: [{ filename: 'main.tf' }] });
  const sleeps: number[] = [];
  const client = new GitHubClient({
    baseUrl: gh.url,
    token: gh.token,
    retry: {
      maxAttempts: opts.maxAttempts ?? 4,
      baseDelayMs: 100,
      maxDelayMs: 1000,
      maxRateLimitWaitMs: opts.maxRateLimitWaitMs ?? 120_000,
    },
    sleep: async (ms) => {
      sleeps.push(ms);
    },
    random: () => 0.5,
  });
  return { gh, client, sleeps };
}

test('createComment posts with GitHub headers and returns the id', async () => {
  const { gh, client } = await setup();
  try {
    const r = await client.createComment(REPO, 1, 'hello');
    assert.equal(r.length, 1);
    assert.ok(r[0]!.id > 0);
    assert.match(r[0]!.htmlUrl ?? '', /#issuecomment-/);
    assert.deepEqual(
      gh.comments(REPO, 1).map((c) => c.body),
      ['hello'],
    );
    const call = gh.callsTo('POST', /\/issues\/1\/comments$/)[0]!;
    assert.equal(call.headers.authorization, `token ${gh.token}`);
    assert.equal(call.headers.accept, 'application/vnd.github+json');
    assert.equal(call.headers['user-agent'], 'atlantis-operator');
    assert.equal(call.headers['content-type'], 'application/json');
    assert.equal(call.status, 201);
  } finally {
    await gh.close();
  }
});

test('Bearer scheme and token function', async () => {
  const gh = await GitHubStandin.start();
  gh.addRepo(REPO);
  gh.addPull(REPO, { number: 1 });
  try {
    const c = new GitHubClient({ baseUrl: gh.url, token: async () => gh.token, authScheme: 'Bearer', userAgent: 'x/1' });
    await c.createComment(REPO, 1, 'x');
    assert.equal(gh.calls[0]!.headers.authorization, `Bearer ${gh.token}`);
    assert.equal(gh.calls[0]!.headers['user-agent'], 'x/1');
  } finally {
    await gh.close();
  }
});

test('GitHub Enterprise base URL with /api/v3', async () => {
  const gh = await GitHubStandin.start();
  gh.addRepo(REPO);
  gh.addPull(REPO, { number: 1, files: Array.from({ length: 150 }, (_, i) => ({ filename: `f${i}.tf` })) });
  try {
    const c = new GitHubClient({ baseUrl: gh.url + '/api/v3/', token: gh.token });
    assert.equal(c.baseUrl, gh.url + '/api/v3');
    assert.equal((await c.listChangedFiles(REPO, 1)).length, 150);
    assert.equal(hostForBaseUrl('https://ghe.example.com/api/v3'), 'ghe.example.com');
    assert.equal(hostForBaseUrl('https://api.github.com'), 'github.com');
  } finally {
    await gh.close();
  }
});

test('bad token: 401 GitHubApiError, not retried', async () => {
  const { gh } = await setup();
  try {
    const c = new GitHubClient({ baseUrl: gh.url, token: 'wrong-token-value', sleep: async () => {} });
    await assert.rejects(c.createComment(REPO, 1, 'x'), (e: unknown) => {
      assert.ok(e instanceof GitHubApiError);
      assert.equal(e.status, 401);
      assert.equal(e.githubMessage, 'Bad credentials');
      assert.doesNotMatch(e.message, /wrong-token-value/);
      return true;
    });
    assert.equal(gh.calls.length, 1);
  } finally {
    await gh.close();
  }
});

test('404 and 422 are not retried and carry GitHub message', async () => {
  const { gh, client } = await setup();
  try {
    await assert.rejects(
      client.getPull(REPO, 99),
      (e: unknown) =>
        e instanceof GitHubApiError && e.status === 404 && e.githubMessage === 'Not Found' && e.documentationUrl !== undefined,
    );
    await assert.rejects(client.getPull('acme/nope', 1), (e: unknown) => e instanceof GitHubApiError && e.status === 404);
    await assert.rejects(client.updateComment(REPO, 424242, 'x'), (e: unknown) => e instanceof GitHubApiError && e.status === 404);
    await assert.rejects(
      client.setCommitStatus(REPO, 'a'.repeat(40), { state: 'bogus' as 'success', context: 'atlantis/plan' }),
      (e: unknown) => e instanceof GitHubApiError && e.status === 422 && e.githubMessage === 'Validation Failed',
    );
    assert.equal(gh.calls.length, 4);
  } finally {
    await gh.close();
  }
});

test('long comments are posted split like Atlantis, in order, every part within the limit', async () => {
  const { gh, client } = await setup();
  try {
    const body = 'Ran Plan\n<details><summary>Show Output</summary>\n\n```diff\n' + 'x'.repeat(150_000) + '\n```\n</details>';
    const created = await client.createComment(REPO, 1, body, { command: 'plan' });
    const posted = gh.comments(REPO, 1).map((c) => c.body);
    assert.deepEqual(posted, splitComment(body, { command: 'plan' }));
    assert.equal(created.length, 3);
    for (const p of posted) assert.ok(Buffer.byteLength(p) <= MAX_COMMENT_LENGTH, String(p.length));
    const { sepStart, sepEnd } = separators('plan')['code-in-details'];
    assert.ok(posted[0]!.endsWith(sepEnd));
    assert.ok(posted[1]!.startsWith('Continued plan output from previous comment.\n<details><summary>Show Output</summary>\n\n```diff\n'));
    assert.ok(posted[1]!.startsWith(sepStart) && posted[1]!.endsWith(sepEnd));
    assert.ok(posted[2]!.startsWith(sepStart) && !posted[2]!.endsWith(sepEnd));
    // Content reassembles exactly.
    const joined = posted
      .map((p, i) => (i > 0 ? p.slice(sepStart.length) : p))
      .map((p, i, a) => (i < a.length - 1 ? p.slice(0, -sepEnd.length) : p))
      .join('');
    assert.equal(joined, body);
  } finally {
    await gh.close();
  }
});

test('--max-comments-per-command caps the parts posted', async () => {
  const gh = await GitHubStandin.start();
  gh.addRepo(REPO);
  gh.addPull(REPO, { number: 1 });
  const client = new GitHubClient({ baseUrl: gh.url, token: gh.token, maxCommentsPerCommand: 2, retry: { maxAttempts: 1 } });
  try {
    await client.createComment(REPO, 1, 'y\n'.repeat(100_000), { command: 'plan' });
    const posted = gh.comments(REPO, 1).map((c) => c.body);
    assert.equal(posted.length, 2);
    assert.ok(posted[0]!.startsWith(separators('plan').none.truncationHeader));
  } finally {
    await gh.close();
  }
});

test('updateComment, addReaction, setCommitStatus', async () => {
  const { gh, client } = await setup();
  try {
    const [c] = await client.createComment(REPO, 1, 'first');
    await client.updateComment(REPO, c!.id, 'second');
    assert.equal(gh.commentsById.get(c!.id)?.body, 'second');
    await client.updateComment(REPO, c!.id, 'z'.repeat(70_000));
    const b = gh.commentsById.get(c!.id)!.body;
    assert.ok(b.length <= MAX_COMMENT_LENGTH && b.endsWith('z'));
    await client.addReaction(REPO, 777, 'eyes');
    await client.addReaction(REPO, 777);
    assert.deepEqual(gh.reactions, [{ repo: REPO, commentId: 777, content: 'eyes' }]);
    await client.setCommitStatus(REPO, 'a'.repeat(40), {
      state: 'pending',
      context: 'atlantis/plan',
      description: 'Plan in progress...',
      targetUrl: 'http://atlantis.example/jobs/1',
    });
    await client.setCommitStatus(REPO, 'a'.repeat(40), { state: 'success', context: 'atlantis/apply', description: 'd'.repeat(200) });
    const st = gh.statusesFor(REPO, 'a'.repeat(40));
    assert.deepEqual(st[0], {
      repo: REPO,
      sha: 'a'.repeat(40),
      state: 'pending',
      context: 'atlantis/plan',
      description: 'Plan in progress...',
      target_url: 'http://atlantis.example/jobs/1',
    });
    assert.equal(st[1]!.description!.length, 140);
  } finally {
    await gh.close();
  }
});

test('getPull, isMergeable (retries unknown state), approvals', async () => {
  const { gh, client, sleeps } = await setup();
  try {
    const p = await client.getPull(REPO, 1);
    assert.equal(p.headSha, 'a'.repeat(40));
    assert.equal(p.headRef, 'feat');
    assert.equal(p.baseRef, 'main');
    assert.equal(p.mergeable, true);
    assert.equal(p.mergeableState, 'clean');
    assert.equal(p.draft, false);
    assert.equal(p.headCloneUrl, `https://github.com/${REPO}.git`);
    assert.equal(await client.isMergeable(REPO, 1), true);
    gh.updatePull(REPO, 1, { mergeable: false, mergeableState: 'dirty' });
    assert.equal(await client.isMergeable(REPO, 1), false);
    gh.updatePull(REPO, 1, { mergeable: null, mergeableState: 'unknown' });
    const before = gh.callsTo('GET', /\/pulls\/1$/).length;
    assert.equal(await client.isMergeable(REPO, 1, { attempts: 3, delayMs: 5 }), false);
    assert.equal(gh.callsTo('GET', /\/pulls\/1$/).length - before, 3);
    assert.ok(sleeps.includes(5));
    for (const s of ['clean', 'unstable', 'has_hooks']) assert.equal(pullIsMergeable({ mergeableState: s }), true);
    for (const s of ['dirty', 'blocked', 'behind', 'draft', 'unknown']) assert.equal(pullIsMergeable({ mergeableState: s }), false);

    assert.equal(await client.isApproved(REPO, 1), false);
    gh.updatePull(REPO, 1, { reviews: [{ user: 'alice', state: 'COMMENTED' }] });
    assert.equal(await client.isApproved(REPO, 1), false);
    gh.updatePull(REPO, 1, {
      reviews: [
        { user: 'alice', state: 'APPROVED' },
        { user: 'alice', state: 'COMMENTED' },
      ],
    });
    assert.deepEqual(await client.getApproval(REPO, 1), { approved: true, approvedBy: ['alice'] });
    gh.updatePull(REPO, 1, {
      reviews: [
        { user: 'alice', state: 'APPROVED' },
        { user: 'alice', state: 'DISMISSED' },
      ],
    });
    assert.equal(await client.isApproved(REPO, 1), false);
    gh.updatePull(REPO, 1, {
      reviews: [
        { user: 'bob', state: 'CHANGES_REQUESTED' },
        { user: 'carol', state: 'APPROVED' },
      ],
    });
    assert.deepEqual(await client.getApproval(REPO, 1), { approved: true, approvedBy: ['carol'] });
    // many reviews: paginated
    gh.updatePull(REPO, 1, {
      reviews: [...Array.from({ length: 120 }, () => ({ user: 'x', state: 'COMMENTED' as const })), { user: 'late', state: 'APPROVED' }],
    });
    assert.deepEqual((await client.getApproval(REPO, 1)).approvedBy, ['late']);
  } finally {
    await gh.close();
  }
});

test('listChangedFiles follows Link pagination and includes renamed-from paths', async () => {
  const { gh, client } = await setup();
  try {
    const files = Array.from({ length: 250 }, (_, i) => ({ filename: `d${i}/main.tf` }));
    files.push({ filename: 'new/x.tf', status: 'renamed', previous_filename: 'old/x.tf' } as (typeof files)[number]);
    gh.updatePull(REPO, 1, { files });
    const got = await client.listChangedFiles(REPO, 1);
    assert.equal(got.length, 252);
    assert.deepEqual(got.slice(-2), ['new/x.tf', 'old/x.tf']);
    const calls = gh.callsTo('GET', /\/pulls\/1\/files$/);
    assert.equal(calls.length, 3);
    assert.deepEqual(
      calls.map((c) => c.query.page ?? '1'),
      ['1', '2', '3'],
    );
  } finally {
    await gh.close();
  }
});

test('retries 5xx with capped exponential backoff and jitter', async () => {
  const { gh, client, sleeps } = await setup({ maxAttempts: 5 });
  try {
    gh.failNext(3, { kind: 'status', status: 502 });
    const p = await client.getPull(REPO, 1);
    assert.equal(p.number, 1);
    assert.equal(gh.calls.length, 4);
    // base 100, random 0.5 → 3/4 of 100, 200, 400
    assert.deepEqual(sleeps, [75, 150, 300]);
  } finally {
    await gh.close();
  }
});

test('gives up after maxAttempts', async () => {
  const { gh, client } = await setup({ maxAttempts: 3 });
  try {
    gh.failNext(10, { kind: 'status', status: 503 });
    await assert.rejects(client.getPull(REPO, 1), (e: unknown) => e instanceof GitHubApiError && e.status === 503);
    assert.equal(gh.calls.length, 3);
  } finally {
    await gh.close();
  }
});

test('rate limits: Retry-After and x-ratelimit-reset are honoured; too long a wait fails', async () => {
  const { gh, client, sleeps } = await setup();
  try {
    gh.failNext(1, { kind: 'secondary-rate-limit', retryAfterSeconds: 7 });
    gh.failNext(1, { kind: 'secondary-rate-limit', retryAfterSeconds: 2, status: 429 });
    await client.getPull(REPO, 1);
    assert.deepEqual(sleeps, [7000, 2000]);
    sleeps.length = 0;
    gh.failNext(1, { kind: 'rate-limit', resetInSeconds: 30 });
    await client.getPull(REPO, 1);
    assert.equal(sleeps.length, 1);
    assert.ok(sleeps[0]! > 28_000 && sleeps[0]! <= 32_000, String(sleeps[0]));
  } finally {
    await gh.close();
  }
  const s2 = await setup({ maxRateLimitWaitMs: 10_000 });
  try {
    s2.gh.failNext(1, { kind: 'rate-limit', resetInSeconds: 3600 });
    await assert.rejects(s2.client.getPull(REPO, 1), (e: unknown) => e instanceof GitHubApiError && e.status === 403);
    assert.equal(s2.gh.calls.length, 1);
  } finally {
    await s2.gh.close();
  }
});

test('plain 403 (no rate limit) is not retried', async () => {
  const { gh, client } = await setup();
  try {
    gh.failNext(1, { kind: 'status', status: 403 });
    await assert.rejects(client.getPull(REPO, 1), (e: unknown) => e instanceof GitHubApiError && e.status === 403);
    assert.equal(gh.calls.length, 1);
  } finally {
    await gh.close();
  }
});

test('createComment: retried on 500/503/rate limit; after a lost answer or a 504 read back, never lost, never doubled', async () => {
  const { gh, client } = await setup();
  try {
    gh.failNext(1, { kind: 'status', status: 500 });
    gh.failNext(1, { kind: 'rate-limit', resetInSeconds: 0, status: 429 });
    await client.createComment(REPO, 1, 'one');
    assert.deepEqual(
      gh.comments(REPO, 1).map((c) => c.body),
      ['one'],
    );
    const posts = (body: string) => gh.callsTo('POST', /comments$/).filter((c) => (c.body as { body: string }).body === body).length;

    // Comment created, then the connection dies before the answer: found by reading back, not posted again.
    gh.failNext(1, { kind: 'drop-after-processing' });
    const [two] = await client.createComment(REPO, 1, 'two');
    assert.deepEqual(
      gh.comments(REPO, 1).map((c) => c.body),
      ['one', 'two'],
    );
    assert.equal(two?.id, gh.comments(REPO, 1)[1]?.id, 'the id of the comment that landed');
    assert.equal(posts('two'), 1);
    const readBack = gh.callsTo('GET', /\/issues\/1\/comments$/).at(-1);
    assert.ok(readBack && !Number.isNaN(Date.parse(readBack.query.since ?? '')), 'read back with since');

    // The connection dies before the request is handled: not there, so posted again, once.
    gh.failNext(1, { kind: 'drop' });
    await client.createComment(REPO, 1, 'three');
    assert.equal(posts('three'), 2);
    assert.deepEqual(
      gh.comments(REPO, 1).map((c) => c.body),
      ['one', 'two', 'three'],
    );

    // A 504 (the stand-in's did not create it): read back, posted again, one comment.
    gh.failNext(1, { kind: 'status', status: 504 });
    await client.createComment(REPO, 1, 'four');
    assert.equal(posts('four'), 2);
    assert.deepEqual(
      gh.comments(REPO, 1).map((c) => c.body),
      ['one', 'two', 'three', 'four'],
    );

    // A comment whose answer is lost on every attempt fails after maxAttempts, posted once per attempt at most.
    gh.failNext(100, { kind: 'drop' }, { method: 'POST' });
    await assert.rejects(client.createComment(REPO, 1, 'five'), (e: unknown) => e instanceof GitHubApiError && e.status === 0);
    gh.clearFaults();
    assert.equal(gh.comments(REPO, 1).length, 4);

    // Idempotent calls are retried after a dropped connection.
    gh.failNext(1, { kind: 'drop' });
    assert.equal((await client.getPull(REPO, 1)).number, 1);
    gh.failNext(1, { kind: 'drop-after-processing' });
    await client.setCommitStatus(REPO, 'b'.repeat(40), { state: 'success', context: 'atlantis/plan' });
    assert.equal(gh.statusesFor(REPO, 'b'.repeat(40)).length, 2);
  } finally {
    await gh.close();
  }
});

test('connection refused is retried even for createComment, then fails cleanly', async () => {
  // A port that was just free: nothing listens there.
  const port = await new Promise<number>((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
  const sleeps: number[] = [];
  const c = new GitHubClient({
    baseUrl: `http://127.0.0.1:${port}`,
    token: 'tok-refused-1234',
    retry: { maxAttempts: 3, baseDelayMs: 10 },
    sleep: async (ms) => void sleeps.push(ms),
  });
  await assert.rejects(
    c.createComment(REPO, 1, 'x'),
    (e: unknown) => e instanceof GitHubApiError && e.status === 0 && /ECONNREFUSED/.test(e.message),
  );
  assert.equal(sleeps.length, 2);
});

test('a server that never answers: each attempt ends at timeoutMs (ETIMEDOUT), GETs are retried, then fail cleanly', async () => {
  // Accepts the connection and reads the request, never answers (a hung proxy).
  const held: net.Socket[] = [];
  const s = net.createServer((sock) => {
    held.push(sock);
    sock.resume();
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  try {
    const sleeps: number[] = [];
    const c = new GitHubClient({
      baseUrl: `http://127.0.0.1:${(s.address() as net.AddressInfo).port}`,
      token: 'tok-hung-1234',
      timeoutMs: 200,
      retry: { maxAttempts: 3, baseDelayMs: 10 },
      sleep: async (ms) => void sleeps.push(ms),
    });
    const t0 = performance.now();
    await assert.rejects(c.getPull(REPO, 1), (e: unknown) => e instanceof GitHubApiError && e.status === 0 && /ETIMEDOUT/.test(e.message));
    assert.ok(performance.now() - t0 >= 3 * 200, 'three attempts of 200 ms each');
    assert.equal(held.length, 3, 'one connection per attempt: a timed-out socket is not reused');
    assert.equal(sleeps.length, 2);
  } finally {
    for (const sock of held) sock.destroy();
    await new Promise((r) => s.close(r));
  }
});

test('the token never appears in log lines, even at debug level', async () => {
  const gh = await GitHubStandin.start({ token: 'ghp_supersecrettokenvalue123' });
  gh.addRepo(REPO);
  gh.addPull(REPO, { number: 1 });
  const out = new PassThrough();
  let logged = '';
  out.on('data', (d: Buffer) => (logged += d.toString()));
  try {
    const c = new GitHubClient({
      baseUrl: gh.url,
      token: gh.token,
      logger: createLogger({ level: 'debug', stream: out }),
      sleep: async () => {},
    });
    gh.failNext(1, { kind: 'status', status: 502 });
    await c.getPull(REPO, 1);
    gh.failNext(1, { kind: 'status', status: 401 });
    await c.createComment(REPO, 1, 'x').catch(() => undefined);
    await new Promise((r) => setImmediate(r));
    assert.match(logged, /GitHub request/);
    assert.doesNotMatch(logged, /supersecret/);
  } finally {
    await gh.close();
  }
});

test('stand-in speaks GitHub shapes and status codes directly', async () => {
  const gh = await GitHubStandin.start();
  gh.addRepo(REPO);
  gh.addPull(REPO, { number: 5, headSha: 'c'.repeat(40) });
  const h = { authorization: `token ${gh.token}`, accept: 'application/vnd.github+json', 'content-type': 'application/json' };
  try {
    let r = await fetch(`${gh.url}/repos/${REPO}/issues/5/comments`, { method: 'POST', headers: h, body: JSON.stringify({ body: 'hi' }) });
    assert.equal(r.status, 201);
    const created = (await r.json()) as { id: number; body: string; user: { login: string } };
    assert.equal(created.body, 'hi');
    assert.equal(created.user.login, 'atlantis-bot');
    r = await fetch(`${gh.url}/repos/${REPO}/issues/6/comments`, { method: 'POST', headers: h, body: JSON.stringify({ body: 'hi' }) });
    assert.equal(r.status, 404);
    assert.deepEqual(await r.json(), { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' });
    r = await fetch(`${gh.url}/repos/${REPO}/issues/5/comments`, {
      method: 'POST',
      headers: { ...h, authorization: 'token nope' },
      body: JSON.stringify({ body: 'x' }),
    });
    assert.equal(r.status, 401);
    assert.equal(((await r.json()) as { message: string }).message, 'Bad credentials');
    r = await fetch(`${gh.url}/repos/${REPO}/issues/5/comments`, {
      method: 'POST',
      headers: h,
      body: JSON.stringify({ body: 'x'.repeat(65537) }),
    });
    assert.equal(r.status, 422);
    assert.match(JSON.stringify(await r.json()), /body is too long \(maximum is 65536 characters\)/);
    r = await fetch(`${gh.url}/repos/${REPO}/issues/5/comments`, { headers: h });
    assert.equal(((await r.json()) as unknown[]).length, 1);
    r = await fetch(`${gh.url}/repos/${REPO}/pulls/5`, { headers: h });
    const pull = (await r.json()) as { head: { sha: string }; mergeable_state: string; draft: boolean };
    assert.equal(pull.head.sha, 'c'.repeat(40));
    assert.equal(pull.mergeable_state, 'clean');
    assert.equal(pull.draft, false);
    gh.failNext(1, { kind: 'rate-limit', resetInSeconds: 60 }, { method: 'GET', path: /\/pulls\/5$/ });
    r = await fetch(`${gh.url}/repos/${REPO}/issues/5/comments`, { headers: h });
    assert.equal(r.status, 200); // fault only matches the pull endpoint
    r = await fetch(`${gh.url}/repos/${REPO}/pulls/5`, { headers: h });
    assert.equal(r.status, 403);
    assert.equal(r.headers.get('x-ratelimit-remaining'), '0');
    assert.ok(Number(r.headers.get('x-ratelimit-reset')) > Date.now() / 1000);
    assert.equal(gh.calls.at(-1)?.fault, 'rate-limit');
    assert.equal(gh.calls.length, 8);
  } finally {
    await gh.close();
  }
});
