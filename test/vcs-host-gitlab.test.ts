// The code host contract (test/support/vcs-host-contract.ts) against GitLab: the server's
// GitLab host (src/server/vcs/gitlab/host.ts) over its REST client, and the GitLab stand-in
// (held to a real Atlantis v0.47's recordings by atlantis-gitlab-differential.test.ts) with real
// git repositories as GitLab's side. Loopback address: 127.0.43.1.
import crypto from 'node:crypto';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { nullLogger } from '../src/log.js';
import { gitlabHost } from '../src/server/vcs/gitlab/host.js';
import { parseGitlabHostname } from '../src/server/vcs/gitlab/settings.js';
import type { CommitState } from '../src/server/vcs/host.js';
import { type TestRepo, createTestRepo } from './support/git-repos.js';
import { GitLabStandin } from './support/gitlab-standin.js';
import { mergeRequestHook, noteHook } from './support/gitlab-standin-webhooks.js';
import { type HostSite, vcsHostContract } from './support/vcs-host-contract.js';

const SECRET = 'contract-gitlab-secret';
const BASE_FILES = { 'README.md': 'infra\n' };
const COMMIT_DATE = '2026-01-01T00:00:00Z';
/** What the server's hidden notes start with (Atlantis's folded block). */
const SUPERSEDED = '<!--- +-Superseded Command-+ --->';

const STATE: Record<string, CommitState> = {
  running: 'pending',
  pending: 'pending',
  success: 'success',
  failed: 'failure',
  canceled: 'error',
};

vcsHostContract('GitLab (stand-in)', async () => {
  const gl = await GitLabStandin.start({ host: '127.0.43.1', botUsername: 'atlantis-bot' });
  const repos: TestRepo[] = [];
  const newRepo = async (fullName: string): Promise<TestRepo> => {
    const r = await createTestRepo({ fullName, files: BASE_FILES, commitDate: COMMIT_DATE });
    repos.push(r);
    return r;
  };
  const repo = await newRepo('acme/infra');
  gl.addProject('acme/infra', { bareDir: repo.bareDir });
  // The fork has the same history (same files, same date: the same SHAs).
  const forkRepo = await newRepo('dev/infra');
  gl.addProject('dev/infra', { bareDir: forkRepo.bareDir, forkedFrom: 'acme/infra' });
  gl.addUser('dev');
  const where = parseGitlabHostname(gl.url);
  const host = gitlabHost(
    {
      user: 'atlantis-bot',
      token: () => gl.token,
      webhookSecret: SECRET,
      ...where,
      apiUrl: `${where.webUrl}/api/v4`,
      groups: ['ops'],
      statusRetryEnabled: false,
    },
    // No waits between looks for a commit's pipeline: the stand-in answers at once.
    { logger: nullLogger(), sleep: async () => {} },
  );
  let next = 1;
  const site: HostSite = {
    otherUser: 'dev',
    repo: 'acme/infra',
    missingRepo: 'acme/nothing-here',
    commentLimit: 1_000_000,
    async openPull(o) {
      const n = next++;
      const branch = `feature-${n}`;
      const from = o.fork ? forkRepo : repo;
      const headSha = await from.createBranch(branch, o.files);
      const mr = gl.openMergeRequest('acme/infra', {
        sourceBranch: branch,
        author: 'dev',
        draft: o.draft === true,
        ...(o.fork ? { sourceProject: 'dev/infra' } : {}),
      });
      return {
        repo: 'acme/infra',
        number: mr.iid,
        headSha,
        headRef: branch,
        baseRef: 'main',
        author: 'dev',
        headRepo: o.fork ? 'dev/infra' : 'acme/infra',
      };
    },
    async close(p) {
      gl.mergeRequest(p.repo, p.number).state = 'closed';
    },
    async state(p) {
      const s = gl.mergeRequest(p.repo, p.number).state;
      return s === 'merged' ? 'merged' : s === 'opened' ? 'open' : 'closed';
    },
    async comment(p, user, body) {
      return gl.addNote(gl.mergeRequest(p.repo, p.number), body, user).id;
    },
    async comments(p) {
      const mr = gl.mergeRequest(p.repo, p.number);
      return gl
        .notesOf(mr.projectId, mr.iid)
        .filter((n) => !n.system)
        .map((n) => ({ author: gl.user(n.authorId).username, body: n.body, hidden: n.body.startsWith(SUPERSEDED) }));
    },
    async statuses(_p, sha) {
      const latest = new Map<string, { context: string; state: CommitState; description?: string; targetUrl?: string }>();
      for (const j of gl.jobs.filter((x) => x.sha === sha && !x.retried))
        latest.set(j.name, {
          context: j.name,
          state: STATE[j.status] ?? 'error',
          ...(j.description !== null ? { description: j.description } : {}),
          ...(j.targetUrl !== null ? { targetUrl: j.targetUrl } : {}),
        });
      return [...latest.values()];
    },
    async approve(p) {
      const mr = gl.mergeRequest(p.repo, p.number);
      gl.approve(mr, 'dev');
    },
    async requireApproval(p) {
      // An approval rule asks for one; without one GitLab (and Atlantis) count a merge request approved.
      gl.mergeRequest(p.repo, p.number).approvalsRequired = 1;
    },
    async makeUnmergeable(p) {
      gl.mergeRequest(p.repo, p.number).hasConflicts = true;
    },
    async addLabel(p, label) {
      gl.mergeRequest(p.repo, p.number).labels.push(label);
    },
    pullPage: (p) => `${gl.url}/${p.repo}/-/merge_requests/${p.number}`,
    cloneUrl: (fullName) => gl.gitUrl(fullName),
    async delivery(e, auth) {
      const mr = gl.mergeRequest(e.pull.repo, e.pull.number);
      const payload =
        e.kind === 'comment'
          ? noteHook(gl, [...gl.notes.values()].find((n) => n.id === e.commentId) ?? gl.addNote(mr, e.body, e.user))
          : mergeRequestHook(gl, mr, { action: e.kind === 'closed' ? 'close' : 'open' });
      const headers: Record<string, string> = {
        'x-gitlab-event': e.kind === 'comment' ? 'Note Hook' : 'Merge Request Hook',
        'idempotency-key': crypto.randomUUID(),
        'x-gitlab-event-uuid': crypto.randomUUID(),
      };
      if (auth !== 'none') headers['x-gitlab-token'] = auth === 'right' ? SECRET : 'not-the-secret';
      return { headers, rawBody: Buffer.from(JSON.stringify(payload)) };
    },
    async reactions(p, commentId) {
      void p;
      return gl.awards.filter((a) => a.noteId === commentId).map((a) => a.name);
    },
    async addToTeam(team) {
      gl.addGroup(team, [{ username: 'dev' }]);
    },
  };
  return {
    host,
    site,
    cleanup: async () => {
      await gl.close();
      for (const r of repos) rmSync(path.resolve(r.bareDir, '..', '..', '..'), { recursive: true, force: true });
    },
  };
});
