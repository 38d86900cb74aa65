// atlantis_webhooks_total's `event` label comes from a header anyone can send before the
// signature is checked: only known event names become labels, so unsigned requests cannot
// grow the metrics without bound.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { WEBHOOK_EVENT_LABELS, webhookEventLabel } from '../src/server/vcs/github/webhooks.js';
import { sendWebhook } from './support/github-standin.js';
import { type TestServer, startTestServer } from './support/server.js';
import { WEBHOOK_SECRET, type WorkflowEnv, createWorkflowEnv } from './support/workflow-env.js';

describe('webhookEventLabel', () => {
  it('keeps known event names, `unknown` when absent, `other` for anything else', () => {
    const rows: Array<[string | undefined, string]> = [
      ['issue_comment', 'issue_comment'],
      ['pull_request', 'pull_request'],
      ['pull_request_review', 'pull_request_review'],
      ['push', 'push'],
      ['ping', 'ping'],
      [undefined, 'unknown'],
      ['', 'other'],
      ['check_run', 'other'],
      ['Issue_Comment', 'other'],
      ['issue_comment ', 'other'],
      ['x'.repeat(10_000), 'other'],
      ['unknown', 'other'],
    ];
    for (const [header, want] of rows) assert.equal(webhookEventLabel(header), want, JSON.stringify(header?.slice(0, 20)));
  });
});

describe('atlantis_webhooks_total under unsigned requests with made-up event names', () => {
  let env: WorkflowEnv;
  let ts: TestServer;
  before(async () => {
    env = await createWorkflowEnv({ ghHost: '127.0.163.2' });
    ts = await startTestServer(
      ['--gh-webhook-secret', WEBHOOK_SECRET, '--gh-api-url', env.gh.url, '--gh-token', env.gh.token, '--bind-address', '127.0.163.1'],
      { workflow: true },
    );
  });
  after(async () => {
    await ts.server.close();
    await env.close();
  });

  it('200 made-up names (signed wrongly or not at all) add one `other` series, not 200', async () => {
    for (let i = 0; i < 200; i++) {
      const r = await sendWebhook(
        `${ts.url}/events`,
        `made-up-${i}`,
        { zen: i },
        i % 2 === 0 ? { secret: 'not-the-secret' } : { signature: null },
      );
      assert.equal(r.status, 401);
    }
    // A signed ping still gets its own label.
    assert.equal((await sendWebhook(`${ts.url}/events`, 'ping', { zen: 'z', hook_id: 1 }, { secret: WEBHOOK_SECRET })).status, 200);
    const text = await (await fetch(`${ts.url}/metrics`)).text();
    const series = text.split('\n').filter((l) => l.startsWith('atlantis_webhooks_total{'));
    const events = new Set(series.map((l) => /event="([^"]*)"/.exec(l)?.[1]));
    assert.ok(events.size <= WEBHOOK_EVENT_LABELS.length + 2, `event labels: ${[...events].join(', ')}`);
    assert.deepEqual([...events].sort(), ['other', 'ping']);
    assert.match(text, /atlantis_webhooks_total\{event="other",code="401"\} 200/);
  });
});
