// --hide-prev-plan-comments, as Atlantis v0.47 does it: before a command's result comment
// is posted, the bot's earlier comments whose first line names that command (and the `-d`
// dir, when the command gave one) are hidden as the host hides them (GitHub minimises them as
// OUTDATED through GraphQL's minimizeComment; GitLab folds the note into a "Superseded Atlantis
// <command>" block). They stay readable ("Show comment"), so the
// trail is kept. A host that cannot hide comments leaves them. Despite the
// flag's name this applies to every command whose result is commented (an apply hides the
// earlier "Ran Apply" comments), as in Atlantis.
import type { Logger } from '../../../log.js';
import type { HostComment, VcsHost } from '../../vcs/host.js';

export interface HideRequest {
  repo: string;
  pull: number;
  /** The bot's login: only its comments are hidden. */
  botLogin: string;
  /** Atlantis's title of the command (`Plan`, `Apply`, `Version`, `Import`, `State`). */
  commandTitle: string;
  /** The comment's `-d`, or '' (autoplan, `-p`, no flag). */
  dir: string;
}

/** Pure: the comments to hide, in the PR's order. */
export function commentsToHide(comments: HostComment[], r: Pick<HideRequest, 'botLogin' | 'commandTitle' | 'dir'>): HostComment[] {
  const bot = r.botLogin.toLowerCase();
  const title = r.commandTitle.toLowerCase();
  const dir = r.dir.toLowerCase();
  return comments.filter((c) => {
    // As Atlantis: a comment without an author (a deleted account) is not skipped.
    if (c.author !== null && c.author.toLowerCase() !== bot) return false;
    // Crude, as Atlantis's: the templates name the command (and dir) in the first line.
    const first = (c.body.split('\n')[0] ?? '').toLowerCase();
    return first.includes(title) && (dir === '' || first.includes(dir));
  });
}

/**
 * Minimises the earlier comments; returns how many. As Atlantis, a failure stops the
 * hiding and is only logged: the new result is still posted.
 */
export async function hidePreviousComments(host: VcsHost, r: HideRequest, log: Logger): Promise<number> {
  // A host that cannot hide comments leaves them all.
  const hide = host.hideComment?.bind(host);
  if (!hide) return 0;
  let hidden = 0;
  try {
    for (const c of commentsToHide(await host.listComments(r.repo, r.pull), r)) {
      await hide(r.repo, r.pull, c, { commandTitle: r.commandTitle });
      hidden++;
    }
  } catch (e) {
    log.error('Unable to hide old comments', { repo: r.repo, pull: r.pull, command: r.commandTitle, error: (e as Error).message });
  }
  return hidden;
}
