// The GitLab stand-in over HTTP: GitLab's paths (projects by id or URL-encoded path), status
// codes and error bodies, pagination headers, merge request diffs from git, notes and their
// limits, commit statuses that make and join pipelines, group membership, merge, git clones
// with a token, a relative URL root, and webhooks sent with GitLab's headers.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { execa } from 'execa';
import { createTestRepo, terraformConfig, type TestRepo } from './support/git-repos.js';
import { GitLabStandin } from './support/gitlab-standin.js';
import { mergeRequestHook, noteHook, sendGitlabWebhook } from './support/gitlab-standin-webhooks.js';

let gl: GitLabStandin;
let repo: TestRepo;
const roots: string[] = [];

// biome-ignore lint/suspicious/noExplicitAny: JSON from the wire; the tests assert its shape
type Json = any;

async function api(
  method: string,
  p: string,
  body?: unknown,
  token: string | null = gl.token,
): Promise<{ status: number; json: Json; headers: Headers }> {
  const headers: Record<string, string> = token === null ? {} : { 'private-token': token };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${gl.url}/api/v4${p}`, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
  const text = await res.text();
  return { status: res.status, json: text === '' ? undefined : JSON.parse(text), headers: res.headers };
}

before(async () => {
  gl = await GitLabStandin.start({ host: '127.0.0.1' });
  repo = await createTestRepo({
    fullName: 'acme/infra',
    commitDate: '2026-01-01T00:00:00Z',
    files: { 'README.md': '# infra\n', 'dir1/main.tf': terraformConfig({ marker: 'v1' }), 'old/name.tf': 'locals {}\n' },
  });
  roots.push(path.resolve(repo.bareDir, '..', '..', '..'));
  gl.addProject('acme/infra', { bareDir: repo.bareDir });
  await repo.createBranch('feature', {
    'dir1/main.tf': terraformConfig({ marker: 'v2' }),
    'old/name.tf': null,
    'new/name.tf': 'locals {}\n',
  });
  gl.openMergeRequest('acme/infra', { sourceBranch: 'feature', author: 'dev' });
  gl.addUser('alice');
  gl.addGroup('acme', [{ username: 'carol' }]);
  gl.addGroup('acme/platform', [{ username: 'alice' }]);
});

after(async () => {
  await gl.close();
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

describe('authentication and errors', () => {
  it("no or a wrong token: 401 with GitLab's body", async () => {
    for (const token of [null, 'glpat-wrong']) {
      const r = await api('GET', '/version', undefined, token);
      assert.equal(r.status, 401);
      assert.deepEqual(r.json, { message: '401 Unauthorized' });
    }
  });
  it('a Bearer token works too', async () => {
    const res = await fetch(`${gl.url}/api/v4/user`, { headers: { authorization: `Bearer ${gl.token}` } });
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { username: string }).username, 'atlantis-bot');
  });
  it('an unknown project or route: 404s as GitLab words them', async () => {
    assert.deepEqual((await api('GET', '/projects/acme%2Fnope')).json, { message: '404 Project Not Found' });
    assert.deepEqual((await api('GET', '/nothing/here')).json, { error: '404 Not Found' });
    assert.deepEqual((await api('GET', '/projects/acme%2Finfra/merge_requests/99')).json, { message: '404 Not found' });
  });
});

describe('projects and merge requests', () => {
  it('a project by URL-encoded path or by id', async () => {
    const byPath = await api('GET', '/projects/acme%2Finfra');
    assert.equal(byPath.status, 200);
    assert.equal(byPath.json.path_with_namespace, 'acme/infra');
    assert.equal(byPath.json.http_url_to_repo, `${gl.url}/acme/infra.git`);
    assert.equal((await api('GET', `/projects/${byPath.json.id}`)).json.path_with_namespace, 'acme/infra');
  });
  it('the merge request: head, branches, changes_count from git, statuses', async () => {
    const { json } = await api('GET', '/projects/acme%2Finfra/merge_requests/1');
    assert.equal(json.sha, await repo.headSha('feature'));
    assert.equal(json.source_branch, 'feature');
    assert.equal(json.changes_count, '2');
    assert.equal(json.detailed_merge_status, 'mergeable');
    assert.equal(json.head_pipeline, null);
    assert.equal(json.web_url, `${gl.url}/acme/infra/-/merge_requests/1`);
  });
  it('diffs find the rename, paginated with GitLab headers', async () => {
    const all = await api('GET', '/projects/acme%2Finfra/merge_requests/1/diffs?per_page=100');
    assert.deepEqual(
      all.json.map((d: { old_path: string; new_path: string; renamed_file: boolean }) => [d.old_path, d.new_path, d.renamed_file]),
      [
        ['dir1/main.tf', 'dir1/main.tf', false],
        ['old/name.tf', 'new/name.tf', true],
      ],
    );
    const first = await api('GET', '/projects/acme%2Finfra/merge_requests/1/diffs?per_page=1');
    assert.equal(first.json.length, 1);
    assert.equal(first.headers.get('x-next-page'), '2');
    assert.equal(first.headers.get('x-total'), '2');
    const last = await api('GET', '/projects/acme%2Finfra/merge_requests/1/diffs?per_page=1&page=2');
    assert.equal(last.headers.get('x-next-page'), '');
  });
});

describe('notes', () => {
  it('created as the token user, listed oldest first with sort=asc, edited', async () => {
    const created = await api('POST', '/projects/acme%2Finfra/merge_requests/1/notes', { body: 'first' });
    assert.equal(created.status, 201);
    assert.equal(created.json.author.username, 'atlantis-bot');
    await api('POST', '/projects/acme%2Finfra/merge_requests/1/notes', { body: 'second' });
    const list = await api('GET', '/projects/acme%2Finfra/merge_requests/1/notes?sort=asc&order_by=created_at');
    assert.deepEqual(
      list.json.map((n: { body: string }) => n.body),
      ['first', 'second'],
    );
    const edited = await api('PUT', `/projects/acme%2Finfra/merge_requests/1/notes/${created.json.id}`, { body: 'edited' });
    assert.equal(edited.json.body, 'edited');
  });
  it('at most 1,000,000 characters; a body is required', async () => {
    assert.equal((await api('POST', '/projects/acme%2Finfra/merge_requests/1/notes', { body: 'x'.repeat(1_000_000) })).status, 201);
    const long = await api('POST', '/projects/acme%2Finfra/merge_requests/1/notes', { body: 'x'.repeat(1_000_001) });
    assert.equal(long.status, 400);
    assert.match(long.json.message, /is too long \(maximum is 1000000 characters\)/);
    assert.deepEqual((await api('POST', '/projects/acme%2Finfra/merge_requests/1/notes', {})).json, { error: 'body is missing' });
  });
  it("another user's note cannot be edited; award emoji on a note", async () => {
    const theirs = gl.addNote(gl.mergeRequest('acme/infra', 1), 'atlantis plan', 'dev');
    assert.equal((await api('PUT', `/projects/acme%2Finfra/merge_requests/1/notes/${theirs.id}`, { body: 'x' })).status, 403);
    const award = await api('POST', `/projects/acme%2Finfra/merge_requests/1/notes/${theirs.id}/award_emoji`, { name: 'eyes' });
    assert.equal(award.status, 201);
    assert.equal(award.json.awardable_type, 'Note');
    assert.equal(
      (await api('POST', `/projects/acme%2Finfra/merge_requests/1/notes/${theirs.id}/award_emoji`, { name: 'not-an-emoji' })).status,
      400,
    );
  });
});

describe('commit statuses and pipelines', () => {
  it('the first status makes an external pipeline, which the commit and the merge request then show', async () => {
    const sha = await repo.headSha('feature');
    assert.equal((await api('GET', `/projects/acme%2Finfra/repository/commits/${sha}`)).json.last_pipeline, null);
    const posted = await api('POST', `/projects/acme%2Finfra/statuses/${sha}`, {
      state: 'running',
      name: 'atlantis/plan',
      ref: 'feature',
      target_url: '',
    });
    assert.equal(posted.status, 201);
    assert.equal(posted.json.target_url, null, 'a blank target_url is not written');
    const commit = (await api('GET', `/projects/acme%2Finfra/repository/commits/${sha}`)).json;
    assert.equal(commit.last_pipeline.id, posted.json.pipeline_id);
    assert.equal(commit.last_pipeline.status, 'running');
    const mr = (await api('GET', '/projects/acme%2Finfra/merge_requests/1')).json;
    assert.equal(mr.head_pipeline.id, posted.json.pipeline_id);
  });
  it('running twice is refused as GitLab refuses it; then success; a new running makes a new job', async () => {
    const sha = await repo.headSha('feature');
    const again = await api('POST', `/projects/acme%2Finfra/statuses/${sha}`, { state: 'running', name: 'atlantis/plan', ref: 'feature' });
    assert.equal(again.status, 400);
    assert.deepEqual(again.json, {
      message: 'Cannot transition status via :run from :running (Reason(s): Status cannot transition via "run")',
    });
    const done = await api('POST', `/projects/acme%2Finfra/statuses/${sha}`, { state: 'success', name: 'atlantis/plan', ref: 'feature' });
    assert.equal(done.status, 201);
    const rerun = await api('POST', `/projects/acme%2Finfra/statuses/${sha}`, { state: 'running', name: 'atlantis/plan', ref: 'feature' });
    assert.notEqual(rerun.json.id, done.json.id);
    const latest = await api('GET', `/projects/acme%2Finfra/repository/commits/${sha}/statuses`);
    assert.deepEqual(
      latest.json.map((s: { name: string; status: string }) => [s.name, s.status]),
      [['atlantis/plan', 'running']],
    );
    assert.equal((await api('GET', `/projects/acme%2Finfra/repository/commits/${sha}/statuses?all=true`)).json.length, 2);
  });
  it('pipeline_id joins that pipeline; an unknown one, a bad state or an unknown commit: GitLab errors', async () => {
    const sha = await repo.headSha('feature');
    const p = gl.pipelines()[0]!;
    assert.equal(
      (await api('POST', `/projects/acme%2Finfra/statuses/${sha}`, { state: 'success', name: 'other', pipeline_id: p.id })).json
        .pipeline_id,
      p.id,
    );
    assert.deepEqual((await api('POST', `/projects/acme%2Finfra/statuses/${sha}`, { state: 'success', pipeline_id: 424242 })).json, {
      message: '404 Pipeline for pipeline_id, sha and ref Not Found',
    });
    assert.deepEqual((await api('POST', `/projects/acme%2Finfra/statuses/${sha}`, { state: 'done' })).json, {
      error: 'state does not have a valid value',
    });
    assert.deepEqual((await api('POST', `/projects/acme%2Finfra/statuses/${'0'.repeat(40)}`, { state: 'success' })).json, {
      message: '404 Commit Not Found',
    });
  });
});

describe('users and groups', () => {
  it('users by username; group members are direct members only, members/all counts the parent group', async () => {
    const alice = (await api('GET', '/users?username=alice')).json;
    assert.equal(alice.length, 1);
    assert.deepEqual((await api('GET', '/users?username=nobody')).json, []);
    const carol = (await api('GET', '/users?username=carol')).json[0];
    assert.equal((await api('GET', `/groups/acme%2Fplatform/members/${alice[0].id}`)).json.state, 'active');
    assert.deepEqual((await api('GET', `/groups/acme%2Fplatform/members/${carol.id}`)).json, { message: '404 Not found' });
    assert.equal((await api('GET', `/groups/acme%2Fplatform/members/all/${carol.id}`)).status, 200);
    assert.deepEqual((await api('GET', `/groups/acme%2Fghost/members/${alice[0].id}`)).json, { message: '404 Group Not Found' });
  });
});

describe('merge', () => {
  it('refused (405) while the project asks for a pipeline that failed; merged once it succeeds', async () => {
    await repo.createBranch('to-merge', { 'dir1/main.tf': terraformConfig({ marker: 'm' }) });
    const mr = gl.openMergeRequest('acme/infra', { sourceBranch: 'to-merge', author: 'dev' });
    gl.mustProject('acme/infra').settings.onlyAllowMergeIfPipelineSucceeds = true;
    const p = gl.addPipeline('acme/infra', { sha: mr.sha, ref: 'to-merge', jobs: [{ name: 'test', status: 'failed' }] });
    const refused = await api('PUT', `/projects/acme%2Finfra/merge_requests/${mr.iid}/merge`, {});
    assert.deepEqual([refused.status, refused.json], [405, { message: '405 Method Not Allowed' }]);
    gl.setJobStatus(p, 'test', 'success');
    const merged = await api('PUT', `/projects/acme%2Finfra/merge_requests/${mr.iid}/merge`, { should_remove_source_branch: true });
    assert.equal(merged.status, 200);
    assert.equal(merged.json.state, 'merged');
    assert.equal(mr.shouldRemoveSourceBranch, true);
    gl.mustProject('acme/infra').settings.onlyAllowMergeIfPipelineSucceeds = false;
  });
});

describe('git over HTTP', () => {
  it('clones with the token as the password; without it git is refused', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'gl-clone-'));
    roots.push(dir);
    // Asynchronous: the stand-in answers from this process.
    const env = { PATH: process.env.PATH, GIT_TERMINAL_PROMPT: '0', GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' };
    const authed = gl.url.replace('http://', `http://atlantis-bot:${gl.token}@`);
    await execa('git', ['clone', '-q', '--branch', 'feature', `${authed}/acme/infra.git`, path.join(dir, 'ok')], { env, extendEnv: false });
    assert.match(readFileSync(path.join(dir, 'ok', 'dir1', 'main.tf'), 'utf8'), /"v2"/);
    const refused = await execa('git', ['clone', '-q', `${gl.url}/acme/infra.git`, path.join(dir, 'no')], {
      env,
      extendEnv: false,
      reject: false,
    });
    assert.notEqual(refused.exitCode, 0);
    assert.match(refused.stderr, /Authentication failed|could not read Username/);
  });
});

describe('a relative URL root and the version', () => {
  it('answers under the root only', async () => {
    const sub = await GitLabStandin.start({ relativeRoot: '/gitlab', version: '15.4.6-ee' });
    try {
      assert.equal(sub.hostname, `${sub.hostPort}/gitlab`);
      const res = await fetch(`${sub.url}/api/v4/version`, { headers: { 'private-token': sub.token } });
      assert.equal(((await res.json()) as { version: string }).version, '15.4.6-ee');
      assert.equal((await fetch(`http://${sub.hostPort}/api/v4/version`, { headers: { 'private-token': sub.token } })).status, 404);
    } finally {
      await sub.close();
    }
  });
});

describe('webhooks', () => {
  it("are POSTed with GitLab's headers and shaped as its examples", async () => {
    const seen: Array<{ headers: http.IncomingHttpHeaders; body: Json }> = [];
    const server = http.createServer((req, res) => {
      let raw = '';
      req.on('data', (d: Buffer) => (raw += d.toString()));
      req.on('end', () => {
        seen.push({ headers: req.headers, body: JSON.parse(raw) });
        res.end('ok');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/events`;
    try {
      const mr = gl.mergeRequest('acme/infra', 1);
      await sendGitlabWebhook(url, 'Merge Request Hook', mergeRequestHook(gl, mr, { action: 'open' }), {
        token: 's3cret',
        instance: gl.url,
      });
      const note = gl.addNote(mr, 'atlantis plan', 'dev');
      await sendGitlabWebhook(url, 'Note Hook', noteHook(gl, note), { token: null, instance: gl.url });
      assert.equal(seen[0]!.headers['x-gitlab-event'], 'Merge Request Hook');
      assert.equal(seen[0]!.headers['x-gitlab-token'], 's3cret');
      assert.equal(seen[0]!.headers['x-gitlab-instance'], gl.url);
      assert.match(String(seen[0]!.headers['user-agent']), /^GitLab\/\d+\.\d+\.\d+$/);
      assert.equal(seen[0]!.body.object_attributes.last_commit.id, mr.sha);
      assert.equal(seen[0]!.body.object_attributes.source.git_http_url, `${gl.url}/acme/infra.git`);
      assert.equal(seen[1]!.headers['x-gitlab-token'], undefined);
      assert.equal(seen[1]!.body.object_attributes.id, note.id);
      assert.equal(seen[1]!.body.object_attributes.noteable_type, 'MergeRequest');
      assert.equal(seen[1]!.body.merge_request.iid, 1);
    } finally {
      server.close();
    }
  });
});
