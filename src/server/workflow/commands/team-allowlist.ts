// --gh-team-allowlist, with Atlantis's format and matching: `team:command,team:command`,
// where team is a GitHub team slug or `*` and command a command name or `*`. With rules set,
// a command runs only when some rule names one of the user's teams (or `*`) and the command
// (or `*`); names compare case-insensitively. Pure; the user's teams come from GitHub.

export interface TeamRule {
  team: string;
  command: string;
}

export class TeamAllowlistError extends Error {}

/** Parses the flag's value; an empty value means no rules (no team check). */
export function parseTeamAllowlist(text: string, knownCommands: readonly string[]): TeamRule[] {
  const rules: TeamRule[] = [];
  for (const raw of text.split(',')) {
    const entry = raw.trim();
    if (entry === '') continue;
    const parts = entry.split(':');
    // Atlantis would panic on a missing colon; a typo must not start an unprotected server.
    if (parts.length !== 2) throw new TeamAllowlistError(`entry "${entry}" is not team:command`);
    const team = parts[0]!.trim();
    const command = parts[1]!.trim().toLowerCase();
    if (team === '' || command === '') throw new TeamAllowlistError(`entry "${entry}" is not team:command`);
    if (command !== '*' && !knownCommands.includes(command)) {
      throw new TeamAllowlistError(`entry "${entry}": command must be * or one of ${knownCommands.join(', ')}`);
    }
    rules.push({ team, command });
  }
  return rules;
}

/** Whether a user in `teams` (GitHub team slugs) may run `command` under `rules`. */
export function teamAllows(rules: readonly TeamRule[], teams: readonly string[], command: string): boolean {
  const mine = new Set(teams.map((t) => t.toLowerCase()));
  const cmd = command.toLowerCase();
  return rules.some((r) => (r.team === '*' || mine.has(r.team.toLowerCase())) && (r.command === '*' || r.command === cmd));
}

/** Atlantis's comment for a refused user, word for word. */
export function noPermissionComment(user: string, command: string): string {
  return '```\nError: User @' + user + " does not have permissions to execute '" + command + "' command.\n```";
}
