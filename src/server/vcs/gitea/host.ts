// Gitea behind the host interface (vcs/host.ts), as Atlantis v0.47's Gitea client does it
// (server/events/vcs/gitea/client.go): comments posted whole (Gitea has no length limit),
// reactions, hidden comments folded into a <details> by editing them, approvals from reviews,
// mergeability as Gitea's own `mergeable`, and the merge with Atlantis's title and message.
// Gitea has teams, but Atlantis's client reads none: userTeams is left out (and
// --gh-team-allowlist refused at start, settings.ts).
import type { Logger } from '../../../log.js';
import type { HostComment, VcsHost } from '../host.js';
import { GiteaApiError, GiteaClient, type GiteaPull } from './client.js';
import type { GiteaSettings } from './settings.js';
import { giteaWebhooks } from './webhooks.js';

export interface GiteaHostOptions {
  logger: Logger;
  /** Instead of a client made from the settings (tests). */
  client?: GiteaClient;
}

/** What a hidden comment starts with (Atlantis's marker, so that both fold the same comments the same way). */
export const SUPERSEDED_MARKER = '<!--- +-Superseded Command-+ --->';

/** Pure: a comment's body folded away as superseded by a newer `commandTitle` (Atlantis's text). */
export function supersededBody(commandTitle: string, body: string): string {
  return `${SUPERSEDED_MARKER}<details><summary>Superseded Atlantis ${commandTitle}</summary>\n${body}\n</details>\n`;
}

/** Atlantis's `approved` on Gitea: a review in state APPROVED. A dismissed one does not count here (it does in Atlantis). */
export function approvedByGiteaReviews(reviews: ReadonlyArray<{ state: string; dismissed: boolean }>): boolean {
  return reviews.some((r) => r.state === 'APPROVED' && !r.dismissed);
}

/** The merge style Gitea's merge takes (`Do`): the one asked for, else `merge` as Atlantis always sends. */
export function giteaMergeStyle(method: string): string {
  return method === 'rebase' || method === 'squash' ? method : 'merge';
}

function pullRequestOf(repo: string, p: GiteaPull) {
  const out = {
    repo,
    number: p.number,
    state: p.state === 'open' ? ('open' as const) : ('closed' as const),
    author: p.author,
    headSha: p.headSha,
    headRef: p.headRef,
    baseRef: p.baseRef,
    headRepo: p.headRepo?.fullName ?? null,
    baseRepo: p.baseRepo?.fullName ?? repo,
  };
  return {
    ...out,
    ...(p.headRepo ? { headCloneUrl: p.headRepo.cloneUrl } : {}),
    ...(p.baseRepo ? { baseCloneUrl: p.baseRepo.cloneUrl } : {}),
  };
}

export function giteaHost(s: GiteaSettings, o: GiteaHostOptions): VcsHost {
  const log = o.logger;
  const client = o.client ?? new GiteaClient({ baseUrl: s.baseUrl, token: s.token, pageSize: s.pageSize, logger: log });
  const url = new URL(s.baseUrl);
  return {
    kind: 'gitea',
    typeName: 'Gitea',
    // As Atlantis names a Gitea repository's host in --repo-allowlist: its host name, without the port.
    hostname: url.hostname,
    user: s.user,
    webhooks: giteaWebhooks({ secret: s.webhookSecret }),
    git: { username: s.user, token: s.token },
    // The host with its port (Atlantis writes the base URL, scheme and all, which git cannot match).
    initCredentials: { user: s.user, hostname: url.host, token: s.token },
    botLogin: async () => undefined,
    pullUrl: (repo, pull) => `${s.baseUrl}/${repo}/pulls/${pull}`,
    getPull: async (repo, pull) => pullRequestOf(repo, await client.getPull(repo, pull)),
    cloneUrl: (repo) => client.getCloneUrl(repo),
    changedFiles: (repo, pull) => client.changedFiles(repo, pull),
    comment: async (repo, pull, body) => {
      await client.createComment(repo, pull, body);
    },
    setStatus: (repo, sha, st) =>
      client.setStatus(repo, sha, {
        state: st.state,
        context: st.context,
        description: st.description ?? '',
        targetUrl: st.targetUrl ?? '',
      }),
    listComments: async (repo, pull): Promise<HostComment[]> =>
      (await client.listComments(repo, pull)).map((c) => ({ id: String(c.id), author: c.author, body: c.body })),
    approved: async (repo, pull) => approvedByGiteaReviews(await client.listReviews(repo, pull)),
    // As Atlantis: Gitea's own judgement (conflicts, a check still running, WIP), with no reason given.
    mergeability: async (repo, pull) => ({ mergeable: (await client.getPull(repo, pull)).mergeable }),
    labels: (repo, pull) => client.listLabels(repo, pull),
    merge: async (repo, pull, m) => {
      try {
        const r = await client.merge(repo, pull, {
          style: giteaMergeStyle(m.method),
          headSha: m.headSha ?? '',
          deleteBranch: m.deleteSourceBranch,
        });
        return r.merged ? undefined : `merge failed: ${r.status}`;
      } catch (e) {
        return (e as Error).message;
      }
    },
    isNotFound: (e) => e instanceof GiteaApiError && e.status === 404,
    react: (repo, _pull, commentId, reaction) => client.addReaction(repo, commentId, reaction),
    // Gitea cannot hide a comment: as Atlantis, its body is folded into a <details> (once: a
    // comment folded before is left as it is, where Atlantis would fold it again).
    hideComment: async (repo, _pull, c, h) => {
      if (c.body.startsWith(SUPERSEDED_MARKER)) return;
      await client.editComment(repo, Number(c.id), supersededBody(h.commandTitle, c.body));
    },
    fileContent: (repo, ref, file, maxBytes) => client.fileContent(repo, ref, file, maxBytes),
  };
}
