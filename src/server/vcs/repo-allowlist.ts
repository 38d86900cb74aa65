// `--repo-allowlist` as Atlantis reads it: comma-separated rules matched against
// `<vcs-host>/<owner>/<name>`, case-insensitive, `*` matching any run of characters, and
// rules starting with `!` excluding what they match. A repo is allowed when it matches at
// least one include rule and no exclude rule.
//
// One deliberate difference: for a rule with `*` in the middle (`github.com/acme/*-infra`)
// Atlantis compares only the part after the `*`, so `github.com/evil/x-infra` passes; here
// the whole pattern must match (prefix too), which is what the rule says.

export interface RepoAllowlist {
  readonly include: readonly string[];
  readonly exclude: readonly string[];
  /** True when `<host>/<fullName>` is allowed. */
  isAllowed(fullName: string, host?: string): boolean;
}

export class AllowlistError extends Error {}

function globToRegExp(rule: string): RegExp {
  const parts = rule
    .toLowerCase()
    .split('*')
    .map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp('^' + parts.join('.*') + '$', 's');
}

/** Parses the flag value. Throws AllowlistError for a rule containing `://` (as Atlantis). */
export function parseRepoAllowlist(value: string): RepoAllowlist {
  const include: string[] = [];
  const exclude: string[] = [];
  for (const raw of value.split(',')) {
    const rule = raw.trim();
    if (rule.includes('://')) throw new AllowlistError(`allowlist ${JSON.stringify(rule)} contained ://`);
    if (rule === '') continue;
    if (rule.length > 1 && rule.startsWith('!')) exclude.push(rule.slice(1));
    else include.push(rule);
  }
  const inc = include.map(globToRegExp);
  const exc = exclude.map(globToRegExp);
  return {
    include,
    exclude,
    isAllowed(fullName: string, host = 'github.com'): boolean {
      const candidate = `${host}/${fullName}`.toLowerCase();
      return inc.some((r) => r.test(candidate)) && !exc.some((r) => r.test(candidate));
    },
  };
}
