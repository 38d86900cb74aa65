// --disable-apply-all (ATLANTIS_DISABLE_APPLY_ALL), on a server with real terraform: `atlantis
// apply` without -p/-d/-w gets Atlantis's refusal and applies nothing; a targeted apply runs.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { APPLY_ALL_DISABLED_COMMENT } from '../src/server/workflow/commands/apply-command.js';
import { terraformConfig } from './support/git-repos.js';
import { type TestServer, startTestServer } from './support/server.js';
import { WEBHOOK_SECRET, type WorkflowEnv, createWorkflowEnv } from './support/workflow-env.js';

let env: WorkflowEnv;
let ts: TestServer;
before(async () => {
  env = await createWorkflowEnv({ ghHost: '127.0.163.160' });
  ts = await startTestServer(
    ['--gh-webhook-secret', WEBHOOK_SECRET, '--gh-api-url', env.gh.url, '--gh-token', env.gh.token, '--disable-apply-all'],
    { workflow: true },
  );
});
after(async () => {
  await ts.server.close();
  await env.close();
});

describe('--disable-apply-all', () => {
  it("refuses apply without flags with Atlantis's text, applies with -d", async () => {
    const marker = path.join(mkdtempSync(path.join(tmpdir(), 'ato-applyall-')), 'applied');
    await env.openPull(ts.url, 1, 'apply-all', { 'app1/main.tf': terraformConfig({ marker: 'm1', touchFile: marker }) });
    await env.waitForComment(1, /^Ran Plan for dir: `app1`/);
    let before = env.commentsOn(1).length;
    assert.equal((await env.comment(ts.url, 1, 'atlantis apply')).status, 200);
    const refused = await env.waitForComment(1, /without flags is disabled/, { after: before });
    assert.equal(refused.body, APPLY_ALL_DISABLED_COMMENT);
    assert.equal(existsSync(marker), false, 'nothing was applied');
    before = env.commentsOn(1).length;
    assert.equal((await env.comment(ts.url, 1, 'atlantis apply -d app1')).status, 200);
    assert.match((await env.waitForComment(1, /^Ran Apply/, { after: before })).body, /applied m1/);
    assert.equal(existsSync(marker), true);
  });
});
