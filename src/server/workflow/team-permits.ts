// The --gh-team-allowlist check of one command, moved out of command-runner.ts (which grew
// past its size limit): the I/O around the pure rules of team-allowlist.ts.
import type { Logger } from '../../log.js';
import type { CommandRequest, CommandRunnerDeps } from './command-runner.js';
import { noPermissionComment, teamAllows } from './team-allowlist.js';

/**
 * --gh-team-allowlist, as Atlantis: the user's teams in the repo's organisation come from
 * GitHub; a refused comment gets Atlantis's comment (through `reply`), a refused autoplan
 * only a log line, and when GitHub cannot tell, nothing runs.
 */
export async function teamPermits(
  d: Pick<CommandRunnerDeps, 'config' | 'github' | 'metrics'>,
  req: CommandRequest,
  name: string,
  log: Logger,
  reply: (body: string) => Promise<unknown>,
): Promise<boolean> {
  const rules = d.config.ghTeamAllowlist;
  if (rules.length === 0) return true;
  const { repo, user } = req.ctx;
  let teams: string[];
  try {
    teams = await d.github.listUserTeams(repo.split('/')[0]!, user);
  } catch (e) {
    d.metrics.commandsTotal.inc({ command: name, result: 'error' });
    log.error('Unable to fetch user teams, command not run', { user, error: (e as Error).message });
    return false;
  }
  if (teamAllows(rules, teams, name)) return true;
  d.metrics.commandsTotal.inc({ command: name, result: 'refused' });
  log.warn('User is not in a team allowed to run the command', { user, teams });
  if (req.kind === 'comment') await reply(noPermissionComment(user, name));
  return false;
}
