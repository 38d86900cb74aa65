// What the command runner does around a result comment, kept out of it: the server
// settings that shape the comment, and --hide-prev-plan-comments before it is posted.
import type { Logger } from '../../../log.js';
import type { ServerConfig } from '../../config.js';
import type { VcsHost } from '../../vcs/host.js';
import { hidePreviousComments } from './hide-comments.js';
import { type LayoutOptions, type ResultCommand, commandTitle } from './messages.js';

type LayoutConfig = Pick<
  ServerConfig,
  | 'executableName'
  | 'disableApplyAll'
  | 'allowCommands'
  | 'disableMarkdownFolding'
  | 'hideUnchangedPlanComments'
  | 'enableDiffMarkdownFormat'
>;

/** The server settings that shape result comments, as Atlantis's renderer takes them. */
export function layoutOptions(cfg: LayoutConfig): LayoutOptions {
  return {
    executableName: cfg.executableName,
    disableApplyAll: cfg.disableApplyAll,
    // As Atlantis: apply left out of the allowed commands (--disable-apply too) drops the apply hints.
    disableApply: !cfg.allowCommands.includes('apply'),
    disableMarkdownFolding: cfg.disableMarkdownFolding,
    hideUnchangedPlanComments: cfg.hideUnchangedPlanComments,
    enableDiffMarkdownFormat: cfg.enableDiffMarkdownFormat,
  };
}

/** --hide-prev-plan-comments: minimise the bot's earlier comments of this command before the new one. */
export async function hideBeforeResult(
  d: { config: Pick<ServerConfig, 'hidePrevPlanComments'>; host: VcsHost; logger: Logger },
  ctx: { repo: string; pull: number },
  cmd: ResultCommand,
  dir: string | undefined,
): Promise<void> {
  if (!d.config.hidePrevPlanComments) return;
  const req = { repo: ctx.repo, pull: ctx.pull, botLogin: d.host.user, commandTitle: commandTitle(cmd), dir: dir ?? '' };
  await hidePreviousComments(d.host, req, d.logger);
}
