// The behaviour every code host must have behind src/server/vcs/host.ts, whatever the host
// (GitHub, GitLab, Gitea). A test file calls vcsHostContract with a way to open a fresh host
// and its site: the host under test (VcsHost) and the host's own side (a stand-in, or a real
// Gitea), driven and read as a person would see it, independent of the adapter. Only the
// interface of host.ts and HostSite are used here, so the same table runs against every host.
// A capability the host leaves out (react, hideComment, userTeams) is checked to be left out
// on both sides: never a stub that pretends.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { CommitState, VcsHost, WebhookDelivery } from '../../src/server/vcs/host.js';

/** A pull request the site opened. */
export interface SitePull {
  /** The base repository, as the host names it. */
  repo: string;
  number: number;
  headSha: string;
  headRef: string;
  baseRef: string;
  author: string;
  /** The head repository: the fork's for a fork, else `repo`. */
  headRepo: string;
}

/** What happened on the site that the host sends a webhook for. */
export type SiteEvent =
  | { kind: 'opened'; pull: SitePull; draft?: boolean }
  | { kind: 'closed'; pull: SitePull }
  | { kind: 'comment'; pull: SitePull; commentId: number; user: string; body: string };

/** The host's own side, as a person acts on it and sees it. */
export interface HostSite {
  /** A user of the host other than the server's, who comments, approves and belongs to teams. */
  readonly otherUser: string;
  /** A repository the server may work on, and one that does not exist. */
  readonly repo: string;
  readonly missingRepo: string;
  /** The most characters the host takes in one comment; absent: any length (Gitea), so a long one arrives in one. */
  readonly commentLimit?: number;
  /** A pull request from a branch of `repo`, or of a fork of it by otherUser, changing `files`. */
  openPull(o: { files: Record<string, string>; fork?: boolean; draft?: boolean }): Promise<SitePull>;
  close(p: SitePull): Promise<void>;
  /** open, closed, or merged. */
  state(p: SitePull): Promise<'open' | 'closed' | 'merged'>;
  /** `user` comments on the pull request; the comment's id as the host's webhooks name it. */
  comment(p: SitePull, user: string, body: string): Promise<number>;
  /** The pull request's comments, oldest first, as the host shows them (`hidden`: folded away as outdated). */
  comments(p: SitePull): Promise<Array<{ author: string | null; body: string; hidden: boolean }>>;
  /** The latest status of each context of a commit. */
  statuses(p: SitePull, sha: string): Promise<Array<{ context: string; state: CommitState; description?: string; targetUrl?: string }>>;
  /** otherUser approves the pull request, as the host's approval rules count it. */
  approve(p: SitePull): Promise<void>;
  /** Makes the pull request need one approval, on a host where none is needed without a rule (GitLab's approval rules). */
  requireApproval?(p: SitePull): Promise<void>;
  /** The pull request can no longer be merged (a conflict with its base). */
  makeUnmergeable(p: SitePull): Promise<void>;
  addLabel(p: SitePull, label: string): Promise<void>;
  /** The page of the pull request. */
  pullPage(p: SitePull): string;
  /** The clone URL of `repo`. */
  cloneUrl(repo: string): string;
  /**
   * A webhook delivery of `e` as the host sends it (a real host's as it arrived): authenticated
   * with the server's secret, a wrong one, or none.
   */
  delivery(e: SiteEvent, auth: 'right' | 'wrong' | 'none'): Promise<WebhookDelivery>;
  // What a host may lack: each present exactly when the host has the matching capability.
  /** The reactions on a comment (react). */
  reactions?(p: SitePull, commentId: number): Promise<string[]>;
  /** Puts otherUser in a team (or group) of the repository's owner (userTeams). */
  addToTeam?(team: string): Promise<void>;
}

export interface OpenedHost {
  host: VcsHost;
  site: HostSite;
  /** Closes what it opened. */
  cleanup(): Promise<void>;
}

type WithHost = (title: string, fn: (o: OpenedHost) => Promise<void>) => void;

const rejection = async (p: Promise<unknown>): Promise<unknown> =>
  p.then(
    () => assert.fail('expected a rejection'),
    (e: unknown) => e,
  );

export function vcsHostContract(name: string, open: () => Promise<OpenedHost>): void {
  const withHost: WithHost = (title, fn) =>
    test(`${name}: ${title}`, async () => {
      const o = await open();
      try {
        await fn(o);
      } finally {
        await o.cleanup();
      }
    });

  withHost('getPull: the pull request as opened; closed once closed; a missing one is not found', async ({ host, site }) => {
    const p = await site.openPull({ files: { 'main.tf': 'locals {}\n' } });
    const pr = await host.getPull(p.repo, p.number);
    assert.deepEqual(
      {
        repo: pr.repo,
        number: pr.number,
        state: pr.state,
        author: pr.author,
        headSha: pr.headSha,
        headRef: pr.headRef,
        baseRef: pr.baseRef,
      },
      { repo: p.repo, number: p.number, state: 'open', author: p.author, headSha: p.headSha, headRef: p.headRef, baseRef: p.baseRef },
    );
    assert.equal(pr.headRepo?.toLowerCase(), p.repo.toLowerCase(), 'the head is in the base repository');
    assert.equal(pr.baseRepo.toLowerCase(), p.repo.toLowerCase());
    await site.close(p);
    assert.equal((await host.getPull(p.repo, p.number)).state, 'closed');
    const e = await rejection(host.getPull(p.repo, p.number + 1000));
    assert.equal(host.isNotFound(e), true, `not found: ${String(e)}`);
    assert.equal(host.isNotFound(new Error('boom')), false);
  });

  withHost("a fork's pull request names the fork as its head", async ({ host, site }) => {
    const p = await site.openPull({ files: { 'main.tf': 'locals {}\n' }, fork: true });
    const pr = await host.getPull(p.repo, p.number);
    assert.equal(pr.headRepo?.toLowerCase(), p.headRepo.toLowerCase());
    assert.notEqual(pr.headRepo?.toLowerCase(), p.repo.toLowerCase());
  });

  withHost('changedFiles and cloneUrl; a missing repository is not found', async ({ host, site }) => {
    const p = await site.openPull({ files: { 'a/main.tf': 'locals {}\n', 'b/c/vars.tf': 'variable "x" {}\n' } });
    assert.deepEqual((await host.changedFiles(p.repo, p.number)).sort(), ['a/main.tf', 'b/c/vars.tf']);
    assert.equal(await host.cloneUrl(site.repo), site.cloneUrl(site.repo));
    assert.equal(host.isNotFound(await rejection(host.cloneUrl(site.missingRepo))), true);
  });

  withHost(
    'comment and listComments: the server posts as its user; a comment over the limit arrives whole, in parts (in one without a limit)',
    async ({ host, site }) => {
      const p = await site.openPull({ files: { 'main.tf': 'locals {}\n' } });
      await site.comment(p, site.otherUser, 'atlantis plan');
      await host.comment(p.repo, p.number, 'Ran Plan for dir: `.` workspace: `default`');
      const listed = await host.listComments(p.repo, p.number);
      assert.deepEqual(
        listed.map((c) => [c.author?.toLowerCase(), c.body]),
        [
          [site.otherUser.toLowerCase(), 'atlantis plan'],
          [host.user.toLowerCase(), 'Ran Plan for dir: `.` workspace: `default`'],
        ],
      );
      assert.ok(listed.every((c) => c.id !== ''));
      // Two million characters: more than any host takes in one comment (GitHub 65,536, GitLab 1,000,000).
      const line = `${'x'.repeat(99)}\n`;
      const long = `\`\`\`\n${line.repeat(20_000)}\`\`\``;
      await host.comment(p.repo, p.number, long, { command: 'plan' });
      const parts = (await site.comments(p)).slice(2);
      if (site.commentLimit === undefined) assert.equal(parts.length, 1, 'posted whole');
      else {
        assert.ok(parts.length >= 2, `split into ${parts.length} comments`);
        assert.ok(
          parts.every((c) => c.body.length <= (site.commentLimit as number)),
          'each part within the limit',
        );
      }
      const xs = parts.map((c) => (c.body.match(/x{99}/g) ?? []).length).reduce((a, b) => a + b, 0);
      assert.equal(xs, 20_000, 'every line of the output is in one of the parts');
    },
  );

  withHost('fileContent: a file at a commit; none for a missing path or a directory; too-large past the bound', async ({ host, site }) => {
    const read = host.fileContent?.bind(host);
    assert.ok(read, 'every host here reads a file through its API (--skip-clone-no-changes)');
    const big = '# padding\n'.repeat(2_000);
    const p = await site.openPull({ files: { 'atlantis.yaml': 'version: 3\n', 'dir/main.tf': 'locals {}\n', 'big.yaml': big } });
    assert.deepEqual(await read(p.headRepo, p.headSha, 'atlantis.yaml', 1024 * 1024), { kind: 'file', text: 'version: 3\n' });
    assert.deepEqual(await read(p.headRepo, p.headSha, 'dir/main.tf', 1024 * 1024), { kind: 'file', text: 'locals {}\n' });
    assert.deepEqual(await read(p.headRepo, p.headSha, 'big.yaml', 1024 * 1024), { kind: 'file', text: big });
    assert.deepEqual(await read(p.headRepo, p.headSha, 'missing.yaml', 1024 * 1024), { kind: 'none' });
    assert.deepEqual(await read(p.headRepo, p.headSha, 'dir', 1024 * 1024), { kind: 'none' });
    // 20,000 bytes against a bound of 1,000: the answer is cut off (or its size refused) unread.
    assert.deepEqual(await read(p.headRepo, p.headSha, 'big.yaml', 1_000), { kind: 'too-large' });
  });

  withHost('setStatus: the latest state of each context, with its description and link', async ({ host, site }) => {
    const p = await site.openPull({ files: { 'main.tf': 'locals {}\n' } });
    await host.setStatus(p.repo, p.headSha, {
      state: 'pending',
      context: 'atlantis/plan',
      description: 'Plan in progress...',
      targetUrl: '',
    });
    await host.setStatus(p.repo, p.headSha, {
      state: 'success',
      context: 'atlantis/plan: dir1/default',
      description: 'Plan succeeded.',
      targetUrl: 'http://atlantis.example/jobs/1',
    });
    await host.setStatus(p.repo, p.headSha, { state: 'failure', context: 'atlantis/plan', description: 'Plan failed.' });
    const byContext = new Map((await site.statuses(p, p.headSha)).map((s) => [s.context, s]));
    assert.equal(byContext.get('atlantis/plan')?.state, 'failure');
    assert.equal(byContext.get('atlantis/plan')?.description, 'Plan failed.');
    assert.equal(byContext.get('atlantis/plan: dir1/default')?.state, 'success');
    assert.equal(byContext.get('atlantis/plan: dir1/default')?.targetUrl, 'http://atlantis.example/jobs/1');
  });

  withHost('approved: not before an approval, then yes', async ({ host, site }) => {
    const p = await site.openPull({ files: { 'main.tf': 'locals {}\n' } });
    await site.requireApproval?.(p);
    assert.equal(await host.approved(p.repo, p.number), false);
    await site.approve(p);
    assert.equal(await host.approved(p.repo, p.number), true);
  });

  withHost('mergeability: a clean pull request is mergeable, a conflicting one is not', async ({ host, site }) => {
    const p = await site.openPull({ files: { 'main.tf': 'locals {}\n' } });
    assert.deepEqual(await host.mergeability(p.repo, p.number), { mergeable: true });
    await site.makeUnmergeable(p);
    const m = await host.mergeability(p.repo, p.number);
    assert.equal(m.mergeable, false);
    // A reason goes in the refusal text where the host's Atlantis client gives one (GitHub's does, Gitea's does not).
    assert.ok(m.reason === undefined || m.reason.length > 0, 'a reason, when given, says something');
  });

  withHost('labels, and merge: merged when it can be, else an error text and nothing merged', async ({ host, site }) => {
    const p = await site.openPull({ files: { 'main.tf': 'locals {}\n' } });
    await site.addLabel(p, 'infra');
    assert.deepEqual(await host.labels(p.repo, p.number), ['infra']);
    assert.equal(await host.merge(p.repo, p.number, { method: '', deleteSourceBranch: false }), undefined);
    assert.equal(await site.state(p), 'merged');
    const q = await site.openPull({ files: { 'other.tf': 'locals {}\n' } });
    await site.makeUnmergeable(q);
    const error = await host.merge(q.repo, q.number, { method: '', deleteSourceBranch: false });
    assert.equal(typeof error, 'string');
    assert.equal(await site.state(q), 'open');
  });

  withHost('pullUrl and the names: the page of the pull request, the host as the allowlist names it', async ({ host, site }) => {
    const p = await site.openPull({ files: { 'main.tf': 'locals {}\n' } });
    assert.equal(host.pullUrl(p.repo, p.number), site.pullPage(p));
    assert.ok(host.hostname !== '' && !host.hostname.includes('://'), host.hostname);
    assert.ok(host.typeName !== '');
    assert.ok(host.git.username !== '');
    const login = await host.botLogin();
    assert.ok(login === undefined || login !== '');
  });

  withHost("webhooks: a comment and its authentication, in the host's own words when refused", async ({ host, site }) => {
    const w = host.webhooks;
    const p = await site.openPull({ files: { 'main.tf': 'locals {}\n' } });
    const commentId = await site.comment(p, site.otherUser, 'atlantis plan -d .');
    const e: SiteEvent = { kind: 'comment', pull: p, commentId, user: site.otherUser, body: 'atlantis plan -d .' };
    const right = await site.delivery(e, 'right');
    assert.deepEqual(
      Object.keys(right.headers).filter((h) => !w.headerNames.includes(h)),
      [],
      'the headers it reads are named',
    );
    assert.equal(w.refuseBeforeBody?.(right.headers), undefined);
    assert.equal(w.authenticate(right), undefined);
    assert.ok(w.eventName(right.headers), 'an event name');
    assert.notEqual(w.eventLabel(right.headers), 'other');
    assert.deepEqual(w.parse(right), {
      kind: 'comment',
      repo: p.repo,
      pull: p.number,
      cloneUrl: site.cloneUrl(p.repo),
      commentId,
      body: 'atlantis plan -d .',
      author: site.otherUser,
    });
    const wrong = w.authenticate(await site.delivery(e, 'wrong'));
    assert.ok(wrong && wrong.status >= 400 && wrong.body !== '', 'a wrong secret is refused');
    const none = await site.delivery(e, 'none');
    const refused = w.refuseBeforeBody?.(none.headers) ?? w.authenticate(none);
    assert.ok(refused && refused.status >= 400, 'no authentication is refused');
  });

  withHost('webhooks: a pull request opened (a draft is not autoplanned), from a fork, closed', async ({ host, site }) => {
    const w = host.webhooks;
    const p = await site.openPull({ files: { 'main.tf': 'locals {}\n' } });
    const opened = w.parse(await site.delivery({ kind: 'opened', pull: p }, 'right'));
    assert.ok(opened.kind === 'pull', JSON.stringify(opened));
    assert.equal(opened.action, 'opened');
    assert.equal(opened.autoplan, true);
    const pr = opened.pull;
    assert.deepEqual(
      [pr.repo, pr.number, pr.headSha, pr.headRef, pr.baseRef, pr.author, pr.state],
      [p.repo, p.number, p.headSha, p.headRef, p.baseRef, p.author, 'open'],
    );
    assert.equal(pr.headRepo?.toLowerCase(), p.repo.toLowerCase());
    assert.equal(pr.baseCloneUrl, site.cloneUrl(p.repo));
    assert.equal(pr.headCloneUrl, site.cloneUrl(p.repo));
    const draft = await site.openPull({ files: { 'main.tf': 'locals {}\n' }, draft: true });
    const d = w.parse(await site.delivery({ kind: 'opened', pull: draft, draft: true }, 'right'));
    assert.ok(d.kind === 'answer' || (d.kind === 'pull' && !d.autoplan), `a draft is not autoplanned: ${JSON.stringify(d)}`);
    const fork = await site.openPull({ files: { 'main.tf': 'locals {}\n' }, fork: true });
    const f = w.parse(await site.delivery({ kind: 'opened', pull: fork }, 'right'));
    assert.ok(f.kind === 'pull' && f.pull.headRepo?.toLowerCase() === fork.headRepo.toLowerCase(), JSON.stringify(f));
    assert.equal(f.pull.headCloneUrl, site.cloneUrl(fork.headRepo));
    await site.close(p);
    const closed = w.parse(await site.delivery({ kind: 'closed', pull: p }, 'right'));
    assert.ok(closed.kind === 'pull' && closed.action === 'closed' && !closed.autoplan, JSON.stringify(closed));
  });

  withHost('react: a reaction on the comment, or no reactions on either side', async ({ host, site }) => {
    assert.equal(host.react === undefined, site.reactions === undefined, 'react and the site agree');
    if (!host.react || !site.reactions) return;
    const p = await site.openPull({ files: { 'main.tf': 'locals {}\n' } });
    const id = await site.comment(p, site.otherUser, 'atlantis plan');
    await host.react(p.repo, p.number, id, 'eyes');
    assert.deepEqual(await site.reactions(p, id), ['eyes']);
  });

  withHost("hideComment: the server's earlier comment folded away, the others left", async ({ host, site }) => {
    const p = await site.openPull({ files: { 'main.tf': 'locals {}\n' } });
    await site.comment(p, site.otherUser, 'atlantis plan');
    await host.comment(p.repo, p.number, 'Ran Plan for dir: `.` workspace: `default`');
    const [mine] = (await host.listComments(p.repo, p.number)).filter((c) => c.author?.toLowerCase() === host.user.toLowerCase());
    assert.ok(mine, "the server's comment is listed");
    if (!host.hideComment) {
      assert.deepEqual(
        (await site.comments(p)).map((c) => c.hidden),
        [false, false],
        'nothing hidden without the capability',
      );
      return;
    }
    await host.hideComment(p.repo, p.number, mine, { commandTitle: 'Plan' });
    assert.deepEqual(
      (await site.comments(p)).map((c) => c.hidden),
      [false, true],
    );
  });

  withHost("userTeams: the user's teams of the repository's owner, or none on either side", async ({ host, site }) => {
    assert.equal(host.userTeams === undefined, site.addToTeam === undefined, 'userTeams and the site agree');
    if (!host.userTeams || !site.addToTeam) return;
    assert.deepEqual(await host.userTeams(site.repo, site.otherUser), []);
    await site.addToTeam('ops');
    assert.deepEqual(await host.userTeams(site.repo, site.otherUser), ['ops']);
  });
}
