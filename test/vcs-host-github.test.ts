// The code host contract (test/support/vcs-host-contract.ts) against GitHub: the server's
// GitHub host (src/server/vcs/github/host.ts) over its REST and GraphQL client, and the GitHub
// stand-in with a real git repository as GitHub's side.
import crypto from 'node:crypto';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { nullLogger } from '../src/log.js';
import { githubHost } from '../src/server/vcs/github/host.js';
import { signBody } from '../src/server/vcs/github/webhook.js';
import { createTestRepo } from './support/git-repos.js';
import { GitHubStandin, githubDelivery, issueCommentPayload, pullRequestPayload } from './support/github-standin.js';
import { type HostSite, type SiteEvent, type SitePull, vcsHostContract } from './support/vcs-host-contract.js';

const SECRET = 'contract-webhook-secret';
const FORK_OWNER = 'mallory';

vcsHostContract('GitHub (stand-in)', async () => {
  const gh = await GitHubStandin.start({ botLogin: 'atlantis-bot' });
  const repo = await createTestRepo({ fullName: 'acme/infra' });
  // The bare repository backs the contents API too.
  gh.addRepo(repo.fullName, { cloneUrl: repo.cloneUrl, bareDir: repo.bareDir });
  // The organisation exists with a team the other user is not in.
  gh.addTeam('acme', 'dev', ['someone-else']);
  const host = githubHost(
    {
      user: 'atlantis-bot',
      token: () => gh.token,
      app: undefined,
      webhookSecret: SECRET,
      hostname: 'github.com',
      apiUrl: gh.url,
      allowMergeableBypassApply: false,
    },
    { logger: nullLogger() },
  );
  const cloneUrl = (fullName: string): string => (fullName === repo.fullName ? repo.cloneUrl : `https://github.com/${fullName}.git`);
  let next = 1;
  const site: HostSite = {
    otherUser: 'dev',
    repo: repo.fullName,
    missingRepo: 'acme/nothing-here',
    commentLimit: 65_536,
    async openPull(o) {
      const number = next++;
      const branch = `feature-${number}`;
      const headSha = await repo.createBranch(branch, o.files);
      await repo.publishPull(number, branch);
      const headRepo = o.fork ? `${FORK_OWNER}/infra` : repo.fullName;
      gh.addPull(repo.fullName, {
        number,
        headSha,
        headRef: branch,
        baseRef: repo.baseBranch,
        user: o.fork ? FORK_OWNER : 'dev',
        draft: o.draft === true,
        files: (await repo.changedFiles(branch)).map((filename) => ({ filename })),
        ...(o.fork ? { headRepo, headCloneUrl: cloneUrl(headRepo) } : {}),
      });
      return {
        repo: repo.fullName,
        number,
        headSha,
        headRef: branch,
        baseRef: repo.baseBranch,
        author: o.fork ? FORK_OWNER : 'dev',
        headRepo,
      };
    },
    async close(p) {
      gh.updatePull(p.repo, p.number, { state: 'closed' });
    },
    async state(p) {
      const pull = gh.getPull(p.repo, p.number)!;
      return pull.merged ? 'merged' : pull.state;
    },
    async comment(p, user, body) {
      return gh.addComment(p.repo, p.number, body, user).id;
    },
    async comments(p) {
      return gh.comments(p.repo, p.number).map((c) => ({ author: c.user, body: c.body, hidden: c.minimized !== undefined }));
    },
    async statuses(p, sha) {
      const latest = new Map<
        string,
        { context: string; state: 'pending' | 'success' | 'failure' | 'error'; description?: string; targetUrl?: string }
      >();
      for (const s of gh.statusesFor(p.repo, sha))
        latest.set(s.context, {
          context: s.context,
          state: s.state as 'pending',
          ...(s.description !== undefined ? { description: s.description } : {}),
          ...(s.target_url !== undefined ? { targetUrl: s.target_url } : {}),
        });
      return [...latest.values()];
    },
    async approve(p) {
      gh.getPull(p.repo, p.number)!.reviews.push({ user: 'dev', state: 'APPROVED' });
    },
    async makeUnmergeable(p) {
      gh.updatePull(p.repo, p.number, { mergeable: false, mergeableState: 'dirty' });
    },
    async addLabel(p, label) {
      const pull = gh.getPull(p.repo, p.number)!;
      pull.labels = [...(pull.labels ?? []), label];
    },
    pullPage: (p) => `https://github.com/${p.repo}/pull/${p.number}`,
    cloneUrl,
    delivery: async (e, auth) => delivery(e, auth, cloneUrl),
    async reactions(p, commentId) {
      return gh.reactions.filter((r) => r.repo === p.repo && r.commentId === commentId).map((r) => r.content);
    },
    async addToTeam(team) {
      gh.addTeam('acme', team, ['dev']);
    },
  };
  return {
    host,
    site,
    cleanup: async () => {
      await gh.close();
      rmSync(path.dirname(path.dirname(path.dirname(repo.bareDir))), { recursive: true, force: true });
    },
  };
});

/** The webhook GitHub sends for an event, signed with the server's secret, another one, or not at all. */
function delivery(e: SiteEvent, auth: 'right' | 'wrong' | 'none', cloneUrl: (repo: string) => string) {
  const p: SitePull = e.pull;
  const payload =
    e.kind === 'comment'
      ? issueCommentPayload({
          repo: p.repo,
          cloneUrl: cloneUrl(p.repo),
          number: p.number,
          body: e.body,
          user: e.user,
          commentId: e.commentId,
        })
      : pullRequestPayload({
          repo: p.repo,
          cloneUrl: cloneUrl(p.repo),
          action: e.kind === 'closed' ? 'closed' : 'opened',
          number: p.number,
          headSha: p.headSha,
          headRef: p.headRef,
          baseRef: p.baseRef,
          user: p.author,
          draft: e.kind === 'opened' && e.draft === true,
          ...(p.headRepo !== p.repo ? { headRepo: p.headRepo, headCloneUrl: cloneUrl(p.headRepo) } : {}),
        });
  const rawBody = Buffer.from(JSON.stringify(payload));
  const signature = auth === 'none' ? undefined : signBody(auth === 'right' ? SECRET : 'not-the-secret', rawBody);
  return githubDelivery({
    event: e.kind === 'comment' ? 'issue_comment' : 'pull_request',
    signature,
    deliveryId: crypto.randomUUID(),
    rawBody,
  });
}
