// Hostile input: property tests of the pure webhook decision and of the real HTTP handler
// (in-process server with the workflow and the GitHub stand-in). Arbitrary bodies, event
// names, signatures and comment texts (shell metacharacters, path traversal in -d/-w)
// never crash the server, never yield work without a valid signature, and never produce a
// command whose dir leaves the repo or whose workspace has `/` or `..`.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { parseRepoAllowlist } from '../src/server/vcs/repo-allowlist.js';
import { githubWebhooks } from '../src/server/vcs/github/webhooks.js';
import { type DecisionOptions, type WebhookDecision, decideWebhook } from '../src/server/workflow/intake/webhook-decision.js';
import { RUNNABLE_COMMANDS } from '../src/server/workflow/comment-parser/commands.js';
import { githubDelivery, issueCommentPayload, pullRequestPayload, sendWebhook } from './support/github-standin.js';
import { type TestServer, startTestServer, waitFor } from './support/server.js';
import { WEBHOOK_SECRET, type WorkflowEnv, createWorkflowEnv } from './support/workflow-env.js';

const ALL_COMMANDS: readonly string[] = RUNNABLE_COMMANDS;
const OPTIONS: DecisionOptions = {
  webhooks: githubWebhooks({ secret: WEBHOOK_SECRET }),
  allowlist: parseRepoAllowlist('github.com/acme/*'),
  hostname: 'github.com',
  user: 'atlantis-bot',
  executableName: 'atlantis',
  allowCommands: ALL_COMMANDS,
  blockedExtraArgs: ['-chdir', '--chdir', '-plugin-dir', '--plugin-dir'],
  disableAutoplan: false,
  allowForkPrs: false,
  silenceForkPrErrors: false,
};

const sign = (body: Buffer, secret = WEBHOOK_SECRET): string => 'sha256=' + crypto.createHmac('sha256', secret).update(body).digest('hex');

// ---- arbitraries ---------------------------------------------------------------------

const hostileToken = fc.constantFrom(
  'atlantis',
  'run',
  '@atlantis-bot',
  'plan',
  'apply',
  'unlock',
  'version',
  'import',
  'state',
  'rm',
  'help',
  '-d',
  '-w',
  '-p',
  '--dir',
  '--workspace',
  '--project',
  '--verbose',
  '--',
  '-d=..',
  '-w=..',
  '--dir=../..',
  '..',
  '../..',
  '../../../etc',
  '/etc/passwd',
  'a/../../x',
  './../x',
  'app1/../..',
  '..\\..',
  '%2e%2e%2f',
  '~',
  '~root',
  'default/../x',
  'x/y',
  '.',
  '...',
  'a..b',
  '$(id)',
  '`id`',
  ';',
  '|',
  '||',
  '&',
  '&&',
  '$HOME',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: '${IFS}' is a hostile shell token on purpose, not a template
  '${IFS}',
  '>',
  '<',
  "'",
  '"',
  '\\',
  'x;rm -rf /',
  'a|b',
  'a&b',
  '$(touch /tmp/pwned)',
  '-chdir=/',
  '--chdir=/tmp',
  '-plugin-dir=/x',
  '-var=x=$(id)',
  '-out=/etc/x',
  '\n',
  '\t',
  '\u0000',
  'é',
  '-dapp1',
  '-wdefault',
  '-w$x',
  '-w&',
  '-d/abs/path',
);
const hostileComment = fc.oneof(
  { weight: 4, arbitrary: fc.array(hostileToken, { minLength: 1, maxLength: 10 }).map((a) => `atlantis ${a.join(' ')}`) },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.constantFrom('plan', 'apply', 'version', 'import', 'state rm'), fc.array(hostileToken, { maxLength: 8 }))
      .map(([c, a]) => `atlantis ${c} ${a.join(' ')}`),
  },
  {
    weight: 1,
    arbitrary: fc.string({ unit: fc.constantFrom(...';|&$()`\'"\\ ./-~dwp=\n'.split('')), maxLength: 40 }).map((s) => `atlantis plan ${s}`),
  },
  { weight: 1, arbitrary: fc.string({ maxLength: 120 }) },
);
const eventArb = fc.oneof(fc.constantFrom('issue_comment', 'pull_request', 'push', 'ping', 'check_run', ''), fc.string({ maxLength: 20 }));
const actionArb = fc.constantFrom('opened', 'ready_for_review', 'synchronize', 'closed', 'reopened', 'edited');

/** Payloads shaped like GitHub's (repo in or out of the allowlist, hostile comment texts). */
const structuredBody = (cloneUrl: string, pulls: fc.Arbitrary<number>) =>
  fc.oneof(
    fc
      .record({
        repo: fc.constantFrom('acme/infra', 'evil/infra', 'acme/x'),
        number: pulls,
        body: hostileComment,
        user: fc.constantFrom('dev', 'atlantis-bot', 'mallory'),
      })
      .map((o) => ({ event: 'issue_comment', body: Buffer.from(JSON.stringify(issueCommentPayload({ ...o, cloneUrl }))) })),
    fc
      .record({
        repo: fc.constantFrom('acme/infra', 'evil/infra'),
        number: pulls,
        action: actionArb,
        headRef: fc.constantFrom('main', 'feature', '../x', '$(id)'),
      })
      .map((o) => ({
        event: 'pull_request',
        body: Buffer.from(
          JSON.stringify(
            pullRequestPayload({
              repo: o.repo,
              cloneUrl,
              action: o.action as 'opened',
              number: o.number,
              headSha: 'f'.repeat(40),
              headRef: o.headRef,
            }),
          ),
        ),
      })),
  );
/** Anything: raw bytes, random JSON, or GitHub-shaped payloads, under any event name. */
const anyRequest = (cloneUrl: string, pulls: fc.Arbitrary<number>) =>
  fc.oneof(
    fc.record({ event: eventArb, body: fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a)) }),
    fc.record({ event: eventArb, body: fc.jsonValue({ maxDepth: 4 }).map((v) => Buffer.from(JSON.stringify(v) ?? 'null')) }),
    structuredBody(cloneUrl, pulls),
  );
/** A signature that is not the right one for `body`. */
const badSignature = (body: Buffer) =>
  fc.oneof(
    fc.constant(undefined),
    fc.string({ maxLength: 80 }),
    fc.uint8Array({ minLength: 32, maxLength: 32 }).map((a) => `sha256=${Buffer.from(a).toString('hex')}`),
    fc.constant(sign(body, 'not-the-secret')),
    fc.constant(sign(Buffer.concat([body, Buffer.from(' ')]))), // right secret, other body
    fc.constant(sign(body).toUpperCase()),
    fc.constant('sha1=' + crypto.createHmac('sha1', WEBHOOK_SECRET).update(body).digest('hex')),
  );

// ---- invariants ----------------------------------------------------------------------

const REPO_ROOT = '/repo-root';

/** The command of a `work` decision stays inside the repo and has a safe workspace. */
function checkWork(d: WebhookDecision): void {
  if (d.kind !== 'work' || d.item.kind !== 'comment') return;
  const c = d.item.command;
  assert.ok(ALL_COMMANDS.includes(c.name), `command ${c.name}`);
  if (c.dir !== undefined) {
    const resolved = path.posix.resolve(REPO_ROOT, c.dir);
    assert.ok(resolved === REPO_ROOT || resolved.startsWith(REPO_ROOT + '/'), `dir ${JSON.stringify(c.dir)} escapes the repo`);
    assert.ok(!path.posix.isAbsolute(c.dir), `dir ${JSON.stringify(c.dir)} is absolute`);
    assert.ok(!c.dir.split('/').includes('..'), `dir ${JSON.stringify(c.dir)} has a .. segment`);
    assert.ok(!c.dir.includes('\0'), 'dir has a NUL byte');
  }
  if (c.workspace !== undefined) {
    assert.ok(
      c.workspace !== '' &&
        !c.workspace.includes('/') &&
        !c.workspace.includes('..') &&
        c.workspace !== '.' &&
        !c.workspace.includes('\\') &&
        !c.workspace.includes('\0'),
      `workspace ${JSON.stringify(c.workspace)}`,
    );
  }
  for (const a of [...c.extraArgs, ...c.args]) {
    assert.ok(
      !OPTIONS.blockedExtraArgs.some((b) => a === b || a.startsWith(`${b}=`)),
      `blocked extra arg ${JSON.stringify(a)} got through`,
    );
  }
}

function decide(event: string | undefined, body: Buffer, signature: string | undefined): WebhookDecision {
  return decideWebhook(githubDelivery({ event, signature, deliveryId: crypto.randomUUID(), rawBody: body }), OPTIONS);
}

describe('decideWebhook (pure) under arbitrary input', () => {
  it('without a valid signature: always 401, never work', () => {
    // biome-ignore lint/nursery/noFloatingPromises: fc.assert of a synchronous property returns void
    fc.assert(
      fc.property(
        anyRequest('file:///nonexistent.git', fc.integer({ min: 1, max: 5 })).chain((r) =>
          fc.record({ r: fc.constant(r), sig: badSignature(r.body) }),
        ),
        ({ r, sig }) => {
          const d = decide(r.event, r.body, sig);
          assert.deepEqual([d.kind, d.kind === 'respond' ? d.status : 0], ['respond', 401]);
        },
      ),
      { numRuns: 600 },
    );
  });

  it('with a valid signature: never throws, statuses in {200, 400, 403}, commands stay in the repo', () => {
    let work = 0;
    // biome-ignore lint/nursery/noFloatingPromises: fc.assert of a synchronous property returns void
    fc.assert(
      fc.property(anyRequest('file:///nonexistent.git', fc.integer({ min: 1, max: 5 })), fc.integer({ min: 0, max: 9 }), (r, n) => {
        const event = n === 0 ? undefined : r.event; // sometimes no X-GitHub-Event header
        const d = decide(event, r.body, sign(r.body));
        if (d.kind === 'respond') assert.ok([200, 400, 403].includes(d.status), `status ${d.status}: ${d.body}`);
        if (d.kind === 'reply') assert.equal(d.status, 200);
        if (d.kind === 'work') work++;
        checkWork(d);
      }),
      { numRuns: 1500 },
    );
    assert.ok(work > 0, 'some generated requests were valid work (the property is not vacuous)');
  });

  it('hostile comment texts: dir never escapes, workspace never has / or .., blocked args never pass', () => {
    let commands = 0;
    let traversalRefused = 0;
    // biome-ignore lint/nursery/noFloatingPromises: fc.assert of a synchronous property returns void
    fc.assert(
      fc.property(hostileComment, (text) => {
        const body = Buffer.from(JSON.stringify(issueCommentPayload({ repo: 'acme/infra', number: 5, body: text })));
        const d = decide('issue_comment', body, sign(body));
        assert.ok(d.kind !== 'respond' || d.status === 200, d.kind === 'respond' ? d.body : '');
        if (d.kind === 'work') commands++;
        if (d.kind === 'reply' && /relative path .* with -d\/--dir is not allowed|invalid workspace/.test(d.body)) traversalRefused++;
        checkWork(d);
      }),
      { numRuns: 3000 },
    );
    // Not vacuous, with bounds far below what random inputs give in any run (counts in the commit).
    assert.ok(commands > 50, `enough texts parsed as commands (${commands})`);
    assert.ok(traversalRefused > 0, `traversal attempts were refused with a reply (${traversalRefused})`);
  });

  it('explicit traversal and metacharacter cases', () => {
    const cases: Array<[string, RegExp | 'work']> = [
      ['atlantis plan -d ../x', /relative path "..\/x"/],
      ['atlantis plan -d app1/../../x', /relative path/],
      ['atlantis plan --dir=../../etc', /relative path/],
      ['atlantis plan -d /etc', 'work'], // absolute means repo-relative, as in Atlantis
      ['atlantis plan -w ../x', /invalid workspace/],
      ['atlantis plan -w a/b', /invalid workspace/],
      ['atlantis plan -w ..', /invalid workspace/],
      ['atlantis plan -w $(id)', /invalid workspace/],
      // Atlantis v0.47.1 accepts shell metacharacters in a workspace (terraform runs with an
      // argument vector, here too); the backticks around the comment are trimmed first.
      ['atlantis plan -w `id`', 'work'],
      ['atlantis plan -w a;b', 'work'],
      ['atlantis plan -w a|b', 'work'],
      ['atlantis plan -w .', /invalid workspace "\.": cannot be '\.'/],
      ['atlantis plan -- -chdir=/', /is not allowed/],
      ['atlantis plan -- "-var=x=$(touch /tmp/p)"', 'work'],
    ];
    for (const [text, want] of cases) {
      const body = Buffer.from(JSON.stringify(issueCommentPayload({ repo: 'acme/infra', number: 5, body: text })));
      const d = decide('issue_comment', body, sign(body));
      if (want === 'work') assert.equal(d.kind, 'work', text);
      else assert.ok(d.kind === 'reply' && want.test(d.body), `${text}: ${JSON.stringify(d).slice(0, 300)}`);
      checkWork(d);
      if (d.kind === 'work' && d.item.kind === 'comment' && text.includes('-d /etc')) assert.equal(d.item.command.dir, 'etc');
    }
  });
});

describe('the real webhook handler under arbitrary input', () => {
  let env: WorkflowEnv;
  let ts: TestServer;
  const canaryDir = mkdtempSync(path.join(tmpdir(), 'ato-canary-'));
  const canary = path.join(canaryDir, 'pwned');

  before(async () => {
    env = await createWorkflowEnv();
    ts = await startTestServer(
      [
        '--gh-webhook-secret',
        WEBHOOK_SECRET,
        '--gh-api-url',
        env.gh.url,
        '--gh-token',
        env.gh.token,
        '--allow-commands',
        ALL_COMMANDS.join(','),
      ],
      { workflow: true },
    );
    // PR 5 exists (head = base: app1 and app2); every other PR number is unknown to GitHub.
    env.gh.addPull(env.repo.fullName, {
      number: 5,
      headSha: env.repo.baseSha,
      headRef: env.repo.baseBranch,
      files: [{ filename: 'app1/main.tf' }],
    });
  });
  after(async () => {
    await ts.server.close();
    await env.close();
  });

  const healthy = async (): Promise<void> => {
    const r = await fetch(`${ts.url}/healthz`, { signal: AbortSignal.timeout(10_000) });
    assert.equal(r.status, 200);
  };
  const post = (event: string, body: Buffer, signature: string | undefined) =>
    sendWebhook(`${ts.url}/events`, event, null, { rawBody: body, signature: signature ?? null, timeoutMs: 20_000 });

  it('bad signatures: 401, no operation, no GitHub call; the server keeps answering /healthz', { timeout: 60_000 }, async () => {
    const callsBefore = env.gh.calls.length;
    await fc.assert(
      fc.asyncProperty(
        anyRequest(env.repo.cloneUrl, fc.constantFrom(5, 901)).chain((r) => fc.record({ r: fc.constant(r), sig: badSignature(r.body) })),
        async ({ r, sig }) => {
          const res = await post(r.event, r.body, sig);
          assert.equal(res.status, 401, res.body);
          assert.equal(ts.server.tracker.inProgress, 0);
        },
      ),
      { numRuns: 120 },
    );
    await healthy();
    assert.equal(env.gh.calls.length, callsBefore, 'nothing reached GitHub');
    assert.equal(ts.server.runner.running().length, 0);
  });

  it('valid signatures over random input: status in {200, 400, 403}; the server stays healthy', { timeout: 60_000 }, async () => {
    // Structured payloads target PRs GitHub does not know (and a clone URL that does not
    // exist), so an accepted command ends at once instead of running terraform.
    await fc.assert(
      fc.asyncProperty(anyRequest('file:///nonexistent/acme/infra.git', fc.integer({ min: 900, max: 999 })), async (r) => {
        const res = await post(r.event, r.body, sign(r.body));
        assert.ok([200, 400, 403].includes(res.status), `status ${res.status}: ${res.body}`);
        // HTTP drops a header value's leading and trailing spaces and tabs (RFC 9110 5.5): decide on what arrives.
        const d = decide(r.event.replace(/^[ \t]+|[ \t]+$/g, ''), r.body, sign(r.body));
        if (d.kind === 'respond') assert.equal(res.status, d.status, 'the handler answers as decided');
      }),
      { numRuns: 150 },
    );
    await healthy();
    await waitFor('accepted commands to end', () => ts.server.tracker.inProgress === 0, 30_000);
    await healthy();
    assert.equal(ts.server.runner.running().length, 0, 'no terraform is running');
  });

  it('hostile workspaces and extra args on a real PR reach terraform as plain arguments, never a shell', { timeout: 60_000 }, async () => {
    const q = (s: string) => `'${s}'`;
    const extras = [
      `$(touch ${canary})`,
      `\`touch ${canary}\``,
      `x;touch ${canary}`,
      `x|touch ${canary}`,
      `x&&touch ${canary}`,
      `-var=x=$(touch ${canary})`,
    ];
    let answered = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('version', 'plan'),
        // Shell metacharacters Atlantis v0.47.1 accepts in a workspace (`$` it refuses).
        fc.constantFrom(undefined, 'a&b', 'a;b', 'x=y'),
        fc.constantFrom(...extras),
        async (cmd, ws, extra) => {
          const before = env.commentsOn(5).length;
          const text = `atlantis ${cmd} -d app1${ws ? ` -w ${ws}` : ''} -- ${q(extra)}`;
          const body = Buffer.from(
            JSON.stringify(issueCommentPayload({ repo: env.repo.fullName, cloneUrl: env.repo.cloneUrl, number: 5, body: text })),
          );
          const res = await post('issue_comment', body, sign(body));
          assert.equal(res.status, 200, res.body);
          await waitFor(`an answer to ${text}`, () => env.commentsOn(5).length > before && ts.server.tracker.inProgress === 0, 45_000);
          answered++;
          const answer = env
            .commentsOn(5)
            .slice(before)
            .map((c) => c.body)
            .join('\n');
          assert.match(
            answer,
            /^Ran (Plan|Version) for dir: `app1`/,
            `the command ran terraform (and was not refused): ${answer.slice(0, 400)}`,
          );
          assert.equal(existsSync(canary), false, `a shell ran ${JSON.stringify(extra)}`);
        },
      ),
      { numRuns: 3 },
    );
    assert.equal(answered, 3);
    await healthy();
  });
});
