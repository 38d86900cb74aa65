// The code host contract's site (vcs-host-contract.ts HostSite) on a real Gitea
// (test/support/gitea.ts): people act through Gitea's API and git as they would, and the
// webhooks are Gitea's own deliveries, caught by a receiver: one hook signed with the server's
// secret, one with another secret and one with none, so that every kind of delivery the
// contract asks for is one Gitea really sent.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { HostSite, SiteEvent, SitePull } from './vcs-host-contract.js';
import type { Gitea, GiteaRepo, GiteaUser } from './gitea.js';
import type { WebhookDelivery } from '../../src/server/vcs/host.js';

export interface CaughtDelivery {
  /** The hook it came through: signed with the right secret, a wrong one, or none. */
  hook: 'right' | 'wrong' | 'none';
  headers: http.IncomingHttpHeaders;
  raw: Buffer;
  json: Record<string, unknown>;
}

/** A webhook receiver on a loopback address: every delivery kept, `next(pred)` waits for one. */
export interface DeliveryCatcher {
  url(hook: CaughtDelivery['hook']): string;
  deliveries: CaughtDelivery[];
  next(pred: (d: CaughtDelivery) => boolean, ms?: number): Promise<CaughtDelivery>;
  close(): Promise<void>;
}

export async function startDeliveryCatcher(host: string): Promise<DeliveryCatcher> {
  const deliveries: CaughtDelivery[] = [];
  const waiters = new Set<{ pred: (d: CaughtDelivery) => boolean; resolve: (d: CaughtDelivery) => void }>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const hook = (req.url ?? '').replace(/^\//, '') as CaughtDelivery['hook'];
      let json: Record<string, unknown> = {};
      try {
        json = JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
      } catch {
        // kept as it came
      }
      const d: CaughtDelivery = { hook, headers: req.headers, raw, json };
      deliveries.push(d);
      res.writeHead(200).end('ok');
      for (const w of [...waiters])
        if (w.pred(d)) {
          waiters.delete(w);
          w.resolve(d);
        }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: (hook) => `http://${host}:${port}/${hook}`,
    deliveries,
    next(pred, ms = 60_000) {
      const seen = deliveries.find(pred);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const w = {
          pred,
          resolve: (d: CaughtDelivery) => {
            clearTimeout(t);
            resolve(d);
          },
        };
        const t = setTimeout(() => {
          waiters.delete(w);
          reject(new Error(`no matching Gitea delivery within ${ms} ms (${deliveries.length} caught)`));
        }, ms);
        waiters.add(w);
      });
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The people of a site: the repository's owner (who also reviews), a developer, someone with a fork, the server's bot. */
export interface GiteaPeople {
  owner: GiteaUser;
  dev: GiteaUser;
  forker: GiteaUser;
  bot: GiteaUser;
}

export async function createPeople(
  gitea: Gitea,
  names = { owner: 'acme', dev: 'dev', forker: 'forker', bot: 'atlantis-bot' },
): Promise<GiteaPeople> {
  return {
    owner: await gitea.createUser(names.owner),
    dev: await gitea.createUser(names.dev),
    forker: await gitea.createUser(names.forker),
    bot: await gitea.createUser(names.bot),
  };
}

/** Gitea's mergeability is worked out after a push, in the background: wait until the API shows `want`. */
export async function waitMergeable(gitea: Gitea, repo: string, number: number, want: boolean, as?: GiteaUser): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const r = await gitea.api<{ mergeable: boolean }>('GET', `/repos/${repo}/pulls/${number}`, undefined, as);
    if (r.status === 200 && r.body.mergeable === want) return;
    if (Date.now() > deadline) throw new Error(`gitea: ${repo}#${number} not mergeable=${want} after 60 s`);
    await new Promise((res) => setTimeout(res, 200));
  }
}

const SUPERSEDED = /^<!--- \+-Superseded Command-\+ ---><details><summary>Superseded /;

/**
 * A HostSite on `repo` (made by the caller, with the three hooks to `catcher`). `headerNames`:
 * what the server keeps of a delivery (its host's VcsWebhooks.headerNames); `secret`: the right one.
 */
export function giteaSite(o: {
  gitea: Gitea;
  people: GiteaPeople;
  repo: GiteaRepo;
  catcher: DeliveryCatcher;
  headerNames: readonly string[];
}): HostSite {
  const { gitea, people, repo, catcher } = o;
  const users = new Map(Object.values(people).map((u) => [u.name, u]));
  const files = new Map<number, Record<string, string>>();
  let branches = 0;
  let fork: GiteaRepo | undefined;
  const pulls = (p: SitePull) => `/repos/${p.repo}/pulls/${p.number}`;
  const kept = (d: CaughtDelivery): WebhookDelivery => ({
    headers: Object.fromEntries(o.headerNames.filter((h) => d.headers[h] !== undefined).map((h) => [h, String(d.headers[h])])),
    rawBody: d.raw,
  });
  const pullOf = (d: CaughtDelivery): number | undefined => (d.json.pull_request as { number?: number } | undefined)?.number;
  return {
    otherUser: people.dev.name,
    repo: repo.fullName,
    missingRepo: `${repo.owner}/nothing-here`,
    async openPull(x) {
      const branch = `change-${++branches}`;
      const author = x.fork ? people.forker : people.dev;
      let head = branch;
      let headRepo = repo.fullName;
      if (x.fork) {
        fork ??= await gitea.fork(repo, people.forker);
        await gitea.push(fork, author, { branch, base: 'main', files: x.files });
        head = `${people.forker.name}:${branch}`;
        headRepo = fork.fullName;
      } else await gitea.push(repo, author, { branch, base: 'main', files: x.files });
      // Gitea marks a draft by the title's WIP: prefix.
      const pr = await gitea.openPullRequest(repo, author, { head, title: `${x.draft ? 'WIP: ' : ''}Change ${branch}` });
      files.set(pr.number, x.files);
      // As a person sees it: Gitea has checked the pull request (mergeable) before anyone acts on it.
      if (!x.draft) await waitMergeable(gitea, repo.fullName, pr.number, true);
      return {
        repo: repo.fullName,
        number: pr.number,
        headSha: pr.headSha,
        headRef: branch,
        baseRef: 'main',
        author: author.name,
        headRepo,
      };
    },
    async close(p) {
      const r = await gitea.api('PATCH', pulls(p), { state: 'closed' }, people.owner);
      if (r.status !== 201) throw new Error(`gitea: closing ${p.repo}#${p.number}: ${r.status} ${r.text}`);
    },
    async state(p) {
      const r = await gitea.api<{ state: string; merged: boolean }>('GET', pulls(p));
      return r.body.merged ? 'merged' : r.body.state === 'open' ? 'open' : 'closed';
    },
    async comment(p, user, body) {
      const u = users.get(user);
      if (!u) throw new Error(`no Gitea user ${user}`);
      return gitea.comment(repo, u, p.number, body);
    },
    async comments(p) {
      const r = await gitea.api<Array<{ user: { login: string } | null; body: string }>>(
        'GET',
        `/repos/${p.repo}/issues/${p.number}/comments`,
      );
      return r.body.map((c) => ({ author: c.user?.login ?? null, body: c.body, hidden: SUPERSEDED.test(c.body) }));
    },
    async statuses(p, sha) {
      const r = await gitea.api<{ statuses: Array<{ context: string; status: string; description: string; target_url: string }> }>(
        'GET',
        `/repos/${p.repo}/commits/${sha}/status`,
      );
      return r.body.statuses.map((s) => ({
        context: s.context,
        state: s.status as 'pending',
        description: s.description,
        targetUrl: s.target_url,
      }));
    },
    async approve(p) {
      // The repository's owner reviews (Gitea does not let an author approve their own).
      const r = await gitea.api('POST', `${pulls(p)}/reviews`, { event: 'APPROVED', body: 'LGTM' }, people.owner);
      if (r.status !== 200) throw new Error(`gitea: approving ${p.repo}#${p.number}: ${r.status} ${r.text}`);
    },
    async makeUnmergeable(p) {
      // The base gets other contents for every file the pull request changes: a conflict.
      const mine = files.get(p.number) ?? {};
      const theirs = Object.fromEntries(Object.keys(mine).map((f) => [f, `# changed on ${p.baseRef} meanwhile\n`]));
      await gitea.push(repo, people.owner, { branch: p.baseRef, files: theirs, message: 'a conflicting change' });
      await waitMergeable(gitea, p.repo, p.number, false);
    },
    async addLabel(p, label) {
      const existing = await gitea.api<Array<{ id: number; name: string }>>('GET', `/repos/${p.repo}/labels`);
      let id = existing.body.find((l) => l.name === label)?.id;
      if (id === undefined) {
        const made = await gitea.api<{ id: number }>('POST', `/repos/${p.repo}/labels`, { name: label, color: '#00aabb' }, people.owner);
        id = made.body.id;
      }
      const r = await gitea.api('POST', `/repos/${p.repo}/issues/${p.number}/labels`, { labels: [id] }, people.owner);
      if (r.status !== 200) throw new Error(`gitea: labelling ${p.repo}#${p.number}: ${r.status} ${r.text}`);
    },
    pullPage: (p) => `${gitea.url}/${p.repo}/pulls/${p.number}`,
    cloneUrl: (name) => `${gitea.url}/${name}.git`,
    async delivery(e: SiteEvent, auth) {
      const hook = auth;
      const d = await catcher.next((x) => {
        if (x.hook !== hook || x.json.repository === undefined) return false;
        const repoName = (x.json.repository as { full_name?: string }).full_name;
        if (repoName !== e.pull.repo) return false;
        if (e.kind === 'comment') return (x.json.comment as { id?: number } | undefined)?.id === e.commentId;
        const type = x.headers['x-gitea-event-type'];
        return type === 'pull_request' && x.json.action === e.kind && pullOf(x) === e.pull.number;
      });
      return kept(d);
    },
    async reactions(p, commentId) {
      const r = await gitea.api<Array<{ content: string }> | null>('GET', `/repos/${p.repo}/issues/comments/${commentId}/reactions`);
      return (r.body ?? []).map((x) => x.content);
    },
  };
}

/** The three hooks of a site's repository: the server's secret, another, none. Pull request events (comments included). */
export async function addSiteHooks(gitea: Gitea, repo: GiteaRepo, catcher: DeliveryCatcher, secret: string): Promise<void> {
  await gitea.addWebhook(repo, { url: catcher.url('right'), secret, events: ['pull_request'] });
  await gitea.addWebhook(repo, { url: catcher.url('wrong'), secret: `not-${secret}`, events: ['pull_request'] });
  await gitea.addWebhook(repo, { url: catcher.url('none'), secret: '', events: ['pull_request'] });
}
