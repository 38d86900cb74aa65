// The GitLab client's note POST against the GitLab stand-in when its answer is lost: a note is
// never lost and never doubled. Loopback address: 127.0.43.2.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { nullLogger } from '../src/log.js';
import { GitLabClient } from '../src/server/vcs/gitlab/client.js';
import { createTestRepo } from './support/git-repos.js';
import { GitLabStandin } from './support/gitlab-standin.js';

test('createNote: after a lost answer read back, never lost, never doubled', async () => {
  const gl = await GitLabStandin.start({ host: '127.0.43.2', botUsername: 'atlantis-bot' });
  const repo = await createTestRepo({ fullName: 'acme/infra', files: { 'README.md': 'infra\n' } });
  try {
    gl.addProject('acme/infra', { bareDir: repo.bareDir });
    gl.addUser('dev');
    await repo.createBranch('feature', { 'main.tf': 'locals {}\n' });
    const mr = gl.openMergeRequest('acme/infra', { sourceBranch: 'feature', author: 'dev' });
    const client = new GitLabClient({ apiUrl: `${gl.url}/api/v4`, token: () => gl.token, logger: nullLogger(), sleep: async () => {} });
    const bodies = () => gl.notesOf(mr.projectId, mr.iid).map((n) => n.body);
    const posts = (body: string) =>
      gl.apiCalls().filter((c) => c.method === 'POST' && c.path.endsWith('/notes') && (c.body as { body?: string }).body === body).length;

    await client.createNote('acme/infra', mr.iid, 'one');
    assert.deepEqual(bodies(), ['one']);

    // Created, then the connection cut before the answer: found by reading back, not posted again.
    gl.failNext(1, { kind: 'drop-after-processing' }, { method: 'POST', path: /\/notes$/ });
    const two = await client.createNote('acme/infra', mr.iid, 'two');
    assert.deepEqual(bodies(), ['one', 'two']);
    assert.equal(two.id, gl.notesOf(mr.projectId, mr.iid)[1]?.id, 'the id of the note that landed');
    assert.equal(posts('two'), 1);

    // Cut before it was handled: not there, so posted again, once.
    gl.failNext(1, { kind: 'drop' }, { method: 'POST', path: /\/notes$/ });
    await client.createNote('acme/infra', mr.iid, 'three');
    assert.equal(posts('three'), 2);
    assert.deepEqual(bodies(), ['one', 'two', 'three']);

    // A 504 that did not create it: read back, posted again, one note.
    gl.failNext(1, { kind: 'status', status: 504 }, { method: 'POST', path: /\/notes$/ });
    await client.createNote('acme/infra', mr.iid, 'four');
    assert.equal(posts('four'), 2);
    assert.deepEqual(bodies(), ['one', 'two', 'three', 'four']);

    // The same text again later is a new note, not mistaken for one read back.
    gl.failNext(1, { kind: 'drop' }, { method: 'POST', path: /\/notes$/ });
    const t0 = Date.now();
    for (const n of gl.notesOf(mr.projectId, mr.iid)) n.createdAt = new Date(t0 - 60_000).toISOString();
    await client.createNote('acme/infra', mr.iid, 'one');
    assert.deepEqual(bodies(), ['one', 'two', 'three', 'four', 'one']);
  } finally {
    await gl.close();
    rmSync(path.resolve(repo.bareDir, '..', '..', '..'), { recursive: true, force: true });
  }
});
