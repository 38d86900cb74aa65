// The I/O side of the team allowlist (--gh-team-allowlist) for one command: the user's teams
// from the host, the decision from team-allowlist.ts, and the refusal (comment, log line, metric).
import type { Logger } from '../../../log.js';
import type { ServerConfig } from '../../config.js';
import type { ServerMetrics } from '../../metrics.js';
import type { VcsHost } from '../../vcs/host.js';
import { noPermissionComment, teamAllows } from './team-allowlist.js';

/**
 * As Atlantis: the user's teams (on GitHub, in the repo's organisation) come from the host; a
 * refused comment gets Atlantis's comment, a refused autoplan only a log line, and when the
 * host cannot tell, nothing runs.
 */
export async function teamPermits(
  d: { config: ServerConfig; host: VcsHost; metrics: ServerMetrics },
  req: { kind: 'autoplan' | 'comment'; ctx: { repo: string; user: string } },
  name: string,
  log: Logger,
  comment: (body: string) => Promise<void>,
): Promise<boolean> {
  const rules = d.config.teamAllowlist;
  if (rules.length === 0) return true;
  const { repo, user } = req.ctx;
  let teams: string[];
  try {
    // A host without teams: the user is in none (only a rule for every team, `*`, lets it run).
    teams = d.host.userTeams ? await d.host.userTeams(repo, user) : [];
  } catch (e) {
    d.metrics.commandsTotal.inc({ command: name, result: 'error' });
    log.error('Unable to fetch user teams, command not run', { user, error: (e as Error).message });
    return false;
  }
  if (teamAllows(rules, teams, name)) return true;
  d.metrics.commandsTotal.inc({ command: name, result: 'refused' });
  log.warn('User is not in a team allowed to run the command', { user, teams });
  if (req.kind === 'comment') await comment(noPermissionComment(user, name)).catch(() => undefined);
  return false;
}
