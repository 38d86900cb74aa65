// The web UI's pages as pure functions (src/server/web/pages.ts, html.ts): what each
// shows, that every value from a PR or the store is escaped and scrubbed of secrets, the
// structure assistive technology and phones rely on, and where the streams start (job-stream.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { processRedactor } from '../src/server/secrets/redact.js';
import type { JobView } from '../src/server/workflow/jobs/jobs.js';
import { esc, layout, timeTag, utcText } from '../src/server/web/html.js';
import { streamStart } from '../src/server/web/job-stream.js';
import {
  CONFIRM_APPLY_LOCK,
  CONFIRM_APPLY_UNLOCK,
  CONFIRM_DISCARD,
  type ServerView,
  indexPage,
  jobPage,
  lockPage,
  messagePage,
} from '../src/server/web/pages.js';

const SECRET = 'web-pages-secret-9f27c1d4';
processRedactor.addSource(() => [SECRET]);

const SERVING: ServerView = { phase: 'serving', drainingSince: null, drainReason: null, inProgress: 0, version: '0.1.0' };
const LOCK = {
  repo: 'acme/infra',
  dir: 'net',
  workspace: 'default',
  pull: 7,
  user: 'dev',
  project: 'network',
  time: '2026-12-01T10:00:00.000Z',
};
const job = (o: Partial<JobView>): JobView => ({
  id: '0b7e3c1e-2f4a-4c55-9d2e-0c1f2a3b4c5d',
  command: 'apply',
  repo: 'acme/infra',
  pull: 5,
  project: null,
  dir: 'net',
  workspace: 'default',
  startedAt: new Date('2026-12-01T10:01:02.000Z'),
  finishedAt: null,
  status: 'running',
  ...o,
});
const empty = { server: SERVING, locks: [], running: [], recent: [] };

describe('html helpers', () => {
  it('esc: markup characters become entities, secrets are scrubbed first', () => {
    assert.equal(esc(`<a href="x">'&'</a>`), '&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
    assert.equal(esc(`token ${SECRET}`), 'token [REDACTED]');
  });
  it('times: <time datetime> with UTC text the script replaces', () => {
    assert.equal(utcText('2026-12-01T10:00:00.000Z'), '2026-12-01 10:00:00 UTC');
    assert.equal(utcText('not a time'), 'not a time');
    assert.equal(timeTag('2026-12-01T10:00:00.000Z'), '<time datetime="2026-12-01T10:00:00.000Z">2026-12-01 10:00:00 UTC</time>');
    assert.equal(timeTag(new Date('2026-12-01T10:00:00Z')), '<time datetime="2026-12-01T10:00:00.000Z">2026-12-01 10:00:00 UTC</time>');
  });
  it('the document: language, viewport, own styles and script only, a skip link, one main, the dialog', () => {
    const doc = layout({ title: 't<', main: '<p>m</p>', footer: 'f' });
    assert.match(doc, /^<!doctype html>\n<html lang="en">/);
    assert.match(doc, /<meta name="viewport" content="width=device-width, initial-scale=1">/);
    assert.match(doc, /<title>t&lt;<\/title>/);
    assert.match(doc, /<link rel="stylesheet" href="\/static\/atlantis.css">/);
    assert.match(doc, /<script src="\/static\/atlantis.js" defer><\/script>/);
    assert.doesNotMatch(doc, /<script>|style=|<style/, 'nothing inline: the policy would block it');
    assert.match(doc, /<a class="skip" href="#main">Skip to content<\/a>/);
    assert.equal(doc.match(/<main/g)?.length, 1);
    assert.match(doc, /<dialog id="confirm" aria-labelledby="confirm-text">[\s\S]*<button value="yes" class="danger">Yes<\/button>/);
  });
});

describe('the index', () => {
  it('serving, no locks, no jobs: "none" rows; no apply lock section when the feature is off', () => {
    const page = indexPage(empty);
    assert.match(page, /<span class="badge serving">serving<\/span>, 0 operations in progress/);
    assert.match(page, /<h2>Locks<\/h2><table>[\s\S]*<td colspan="6">none<\/td>/);
    assert.match(page, /<h2>Running jobs<\/h2><table>[\s\S]*<td colspan="7">none<\/td>/);
    assert.doesNotMatch(page, /Apply commands/);
  });

  it('draining: since when, who started it, how many operations; the replica when shared', () => {
    const page = indexPage({
      ...empty,
      server: {
        ...SERVING,
        phase: 'draining',
        drainingSince: new Date('2026-12-01T11:00:00Z'),
        drainReason: 'signal',
        inProgress: 1,
        replicaId: 'r2',
      },
    });
    assert.match(
      page,
      /<span class="badge draining">draining<\/span> since <time datetime="2026-12-01T11:00:00.000Z">[^<]+<\/time>, started by a signal, 1 operation in progress <span class="replica">replica r2<\/span>/,
    );
  });

  it('apply lock off: "enabled" and a form that asks before it posts /apply/lock', () => {
    const page = indexPage({ ...empty, applyLock: { lock: undefined } });
    assert.match(page, /<strong>Apply commands are enabled<\/strong>/);
    assert.ok(
      page.includes(
        `<form method="post" action="/apply/lock" data-confirm="${esc(CONFIRM_APPLY_LOCK)}"><button type="submit">Disable Apply Commands</button></form>`,
      ),
    );
  });

  it("apply lock on: Atlantis's texts, since when and who, and the form to /apply/unlock", () => {
    const page = indexPage({ ...empty, applyLock: { lock: { time: '2026-12-01T09:00:00.000Z', by: 'ops<' } } });
    assert.match(page, /<strong>Apply commands are disabled globally<\/strong>/);
    assert.match(
      page,
      /<dt>Lock Status<\/dt><dd><strong>Active<\/strong><\/dd><dt>Active Since<\/dt><dd><time datetime="2026-12-01T09:00:00.000Z">/,
    );
    assert.match(page, /<dt>Set by<\/dt><dd>ops&lt;<\/dd>/);
    assert.ok(
      page.includes(
        `action="/apply/unlock" data-confirm="${esc(CONFIRM_APPLY_UNLOCK)}"><button type="submit">Enable Apply Commands</button>`,
      ),
    );
  });

  it('a lock row says who holds it since when and links its page (the id encoded twice, as in plan comments)', () => {
    const page = indexPage({ ...empty, locks: [LOCK] });
    assert.ok(
      page.includes(
        '<tr><td>acme/infra</td><td>net</td><td>default</td><td>#7 by dev</td><td><time datetime="2026-12-01T10:00:00.000Z">2026-12-01 10:00:00 UTC</time></td><td><a href="/lock?id=acme%252Finfra%252Fnet%252Fdefault%252Fnetwork">Locked<span class="vh">: the lock of acme/infra net default</span></a></td></tr>',
      ),
      page,
    );
    assert.equal(page.match(/<th scope="col">/g)?.length, 6 + 7 + 7, 'column headers for screen readers');
  });

  it('job rows: the page link, the PR, where, since when, the status', () => {
    const done = job({ id: '1b7e3c1e-2f4a-4c55-9d2e-0c1f2a3b4c5d', command: 'plan', status: 'success', project: 'network' });
    const page = indexPage({ ...empty, running: [job({})], recent: [done] });
    assert.ok(
      page.includes(
        '<tr><td><a href="/jobs/0b7e3c1e-2f4a-4c55-9d2e-0c1f2a3b4c5d">apply</a></td><td>acme/infra#5</td><td></td><td>net</td><td>default</td><td><time datetime="2026-12-01T10:01:02.000Z">2026-12-01 10:01:02 UTC</time></td><td><span class="status s-running">running</span></td></tr>',
      ),
    );
    assert.match(page, /<h2>Recent jobs<\/h2>[\s\S]*>plan<\/a><\/td><td>acme\/infra#5<\/td><td>network<\/td>[\s\S]*s-success">success</);
  });

  it('notices: only the known ones, as a status message', () => {
    assert.match(indexPage({ ...empty, notice: 'discarded' }), /<p class="notice" role="status">Plan discarded and unlocked!<\/p>/);
    assert.match(indexPage({ ...empty, notice: 'apply-locked' }), /role="status">Apply commands are disabled globally.</);
    for (const n of ['<script>', 'toString', '__proto__', ''])
      assert.doesNotMatch(indexPage({ ...empty, notice: n }), /class="notice"/, `notice ${JSON.stringify(n)}`);
  });

  it('values from a PR are escaped and scrubbed: user, dir, workspace, project', () => {
    const hostile = {
      ...LOCK,
      user: '<img src=x onerror=alert(1)>',
      project: `"><script>${SECRET}</script>`,
      dir: "a'b",
      workspace: 'w&w',
    };
    const page = indexPage({
      ...empty,
      locks: [hostile],
      running: [job({ project: `"><script>${SECRET}</script>`, dir: '<i>' })],
      recent: [job({ id: 'x', project: '<b>p</b>', status: 'failure' })],
    });
    assert.doesNotMatch(page, /<img|<script>|<b>p|<i>/);
    assert.match(page, /<td>&quot;&gt;&lt;script&gt;\[REDACTED\]&lt;\/script&gt;<\/td>/);
    assert.ok(!page.includes(SECRET));
    assert.match(page, /&lt;img src=x onerror=alert\(1\)&gt;/);
    assert.match(page, /<td>a&#39;b<\/td><td>w&amp;w<\/td>/);
  });
});

describe('the lock page', () => {
  const base = {
    server: SERVING,
    lock: LOCK,
    id: 'acme%2Finfra%2Fnet%2Fdefault%2Fnetwork',
    pullUrl: 'https://github.com/acme/infra/pull/7',
  };
  it("Atlantis's facts, the plan, and the discard form (the id posted back as the page had it)", () => {
    const page = lockPage({
      ...base,
      plan: { ...LOCK, planPath: '/p', headSha: 'abcdef0123456789', createdAt: '2026-12-01T10:00:05.000Z' },
    });
    assert.match(page, /<h1><span class="key">acme\/infra\/net\/default\/network<\/span> <code>Locked<\/code><\/h1>/);
    assert.match(page, /<dt>Repo Owner<\/dt><dd>acme<\/dd>\n<dt>Repo Name<\/dt><dd>infra<\/dd>/);
    assert.match(page, /<dt>Pull Request Link<\/dt><dd><a href="https:\/\/github.com\/acme\/infra\/pull\/7">/);
    assert.match(page, /<dt>Locked By<\/dt><dd>#7 by dev<\/dd>/);
    assert.match(page, /<dt>Project<\/dt><dd>network<\/dd>/);
    assert.match(
      page,
      /<dt>Plan<\/dt><dd>saved <time datetime="2026-12-01T10:00:05.000Z">[^<]+<\/time> from commit <code>abcdef012345<\/code><\/dd>/,
    );
    assert.ok(
      page.includes(
        `<form method="post" action="/locks/discard?id=acme%252Finfra%252Fnet%252Fdefault%252Fnetwork" data-confirm="${esc(CONFIRM_DISCARD)}"><button type="submit" class="danger">Discard Plan &amp; Unlock</button></form>`,
      ),
    );
    assert.match(page, /<nav aria-label="Back"><a href="\/">All locks and jobs<\/a><\/nav>/);
  });
  it('no plan: says so; no project: no project line', () => {
    const { project: _p, ...noProject } = LOCK;
    const page = lockPage({ ...base, lock: noProject });
    assert.match(page, /<dt>Plan<\/dt><dd>none<\/dd>/);
    assert.doesNotMatch(page, /<dt>Project<\/dt>/);
  });
});

describe('the job page', () => {
  it('a running job: its status, its output as given, the stream to follow, the follow switch', () => {
    const page = jobPage({
      server: SERVING,
      title: 'apply acme/infra#5 net default',
      job: job({}),
      outputHtml: '<span class="xf2">+</span>',
      streamUrl: '/jobs/x/stream?from=12&format=html',
    });
    assert.match(
      page,
      /<div class="job-state" data-status="running" aria-live="polite"><span>Status<\/span> <p id="status">running<\/p><\/div>/,
    );
    assert.match(page, /<dt>Pull request<\/dt><dd>acme\/infra#5<\/dd><dt>Started<\/dt><dd><time datetime="2026-12-01T10:01:02.000Z">/);
    assert.match(
      page,
      /<div id="term" class="term" tabindex="0" role="region" aria-labelledby="out-h" data-stream="\/jobs\/x\/stream\?from=12&amp;format=html"><pre id="out"><span class="xf2">\+<\/span><\/pre><\/div>/,
    );
    assert.match(page, /<input type="checkbox" id="follow" checked> Keep the newest output in view/);
  });
  it('a finished job: when it ended, no stream, no switch; a job known only by its log', () => {
    const page = jobPage({
      server: SERVING,
      title: 't',
      job: job({ status: 'failure', finishedAt: new Date('2026-12-01T10:02:00Z') }),
      outputHtml: '',
    });
    assert.match(page, /<p id="status">failure<\/p>/);
    assert.match(page, /<dt>Finished<\/dt><dd><time datetime="2026-12-01T10:02:00.000Z">/);
    assert.doesNotMatch(page, /data-stream|id="follow"/);
    assert.match(
      jobPage({ server: SERVING, title: 'job x', outputHtml: 'out' }),
      /data-status="finished"[^>]*><span>Status<\/span> <p id="status">finished<\/p>/,
    );
  });
});

it('an action error page says what happened, escaped', () => {
  const page = messagePage(SERVING, 'Not found', "No lock found at id 'a<b'");
  assert.match(page, /<h1>Not found<\/h1>\n<p>No lock found at id &#39;a&lt;b&#39;<\/p>/);
});

describe('where a job stream starts', () => {
  const rows: Array<[string | undefined, unknown, number | undefined]> = [
    [undefined, undefined, undefined],
    [undefined, '0', 0],
    [undefined, '1234', 1234],
    ['99', '1234', 99],
    ['junk', '12', 12],
    [undefined, '-1', undefined],
    [undefined, '01', undefined],
    [undefined, '1e3', undefined],
    [undefined, ['1', '2'], undefined],
    [undefined, '1'.repeat(16), undefined],
  ];
  for (const [lastEventId, from, start] of rows)
    it(`Last-Event-ID ${JSON.stringify(lastEventId)}, from ${JSON.stringify(from)}: ${start}`, () =>
      assert.equal(streamStart(lastEventId, from), start));
});
