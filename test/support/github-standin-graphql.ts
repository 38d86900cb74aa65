// The GitHub stand-in's GraphQL endpoint (POST /graphql, GitHub Enterprise's /api/graphql),
// for what Atlantis's features need: the --gh-team-allowlist query, an organisation's teams
// filtered by member logins, `organization(login:) { teams(first:, after:, userLogins:) }`,
// and the --hide-prev-plan-comments mutation, `minimizeComment(input: $input)` with
// `{ subjectId, classifier }`. Answered in GitHub's shapes: only the fields asked for,
// cursors, the 100-record limit, an unknown organisation or node as null data plus a
// NOT_FOUND error (HTTP 200, as GitHub), an invalid classifier as a variable error.
// Also the pull request mergeability query of --gh-allow-mergeable-bypass-apply
// (answerPullGraphql): review decision, branch protection and ruleset rules, the head
// commit's check runs and commit statuses, answered in the shape of that one query.
// Not a GraphQL parser: any other query gets GitHub's kind of error.

export interface StandinTeam {
  slug: string;
  name: string;
  members: Set<string>;
}

/** Organisation login (lower case) -> its teams, in creation order. */
export type StandinOrgs = Map<string, StandinTeam[]>;

type Vars = Record<string, unknown>;

function argValue(text: string, vars: Vars): unknown {
  const t = text.trim();
  if (t.startsWith('$')) return vars[t.slice(1)];
  if (/^".*"$/.test(t)) return t.slice(1, -1);
  if (/^\d+$/.test(t)) return Number(t);
  if (t === 'null') return null;
  const list = /^\[(.*)\]$/.exec(t);
  if (list) return list[1]!.split(',').map((x) => argValue(x, vars));
  return undefined;
}

function args(text: string, vars: Vars): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const m of text.matchAll(/(\w+)\s*:\s*(\[[^\]]*\]|"[^"]*"|\$\w+|\w+)/g)) out[m[1]!] = argValue(m[2]!, vars);
  return out;
}

function cursor(i: number): string {
  return Buffer.from(`cursor:v2:${i}`).toString('base64');
}

function gqlError(message: string, extra: Record<string, unknown> = {}): [number, unknown] {
  return [200, { errors: [{ message, locations: [{ line: 1, column: 1 }], ...extra }] }];
}

/** What minimizeComment needs of the stand-in's comments. */
export interface StandinCommentNodes {
  /** Marks the comment with this node id minimised, recording why; false when there is none. */
  minimize(nodeId: string, reason: string): boolean;
}

const CLASSIFIERS = ['SPAM', 'ABUSE', 'OFF_TOPIC', 'OUTDATED', 'DUPLICATE', 'RESOLVED'];

function answerMinimize(query: string, vars: Vars, comments: StandinCommentNodes | undefined): [number, unknown] {
  const call = /minimizeComment\s*\(\s*input\s*:\s*\$(\w+)\s*\)/.exec(query);
  if (!call || !comments) return gqlError('stand-in: only minimizeComment(input: $variable) is supported');
  const input = vars[call[1]!] as { subjectId?: unknown; classifier?: unknown } | undefined;
  const type = 'MinimizeCommentInput!';
  if (typeof input !== 'object' || input === null) return gqlError(`Variable $${call[1]} of type ${type} was provided invalid value`);
  if (typeof input.classifier !== 'string' || !CLASSIFIERS.includes(input.classifier)) {
    return gqlError(
      `Variable $${call[1]} of type ${type} was provided invalid value for classifier (Expected "${String(input.classifier)}" to be one of: ${CLASSIFIERS.join(', ')})`,
    );
  }
  if (typeof input.subjectId !== 'string')
    return gqlError(`Variable $${call[1]} of type ${type} was provided invalid value for subjectId (Expected value to not be null)`);
  // GitHub reports the reason in lower case, with dashes.
  const reason = input.classifier.toLowerCase().replace(/_/g, '-');
  if (!comments.minimize(input.subjectId, reason)) {
    return [
      200,
      {
        data: { minimizeComment: null },
        errors: [
          {
            type: 'NOT_FOUND',
            path: ['minimizeComment'],
            locations: [{ line: 1, column: 1 }],
            message: `Could not resolve to a node with the global id of '${input.subjectId}'`,
          },
        ],
      },
    ];
  }
  const minimized: Record<string, unknown> = {};
  if (/\bisMinimized\b/.test(query)) minimized.isMinimized = true;
  if (/\bminimizedReason\b/.test(query)) minimized.minimizedReason = reason;
  if (/\bviewerCanMinimize\b/.test(query)) minimized.viewerCanMinimize = true;
  return [200, { data: { minimizeComment: /\bminimizedComment\b/.test(query) ? { minimizedComment: minimized } : {} } }];
}

/** Answers one GraphQL request body. */
export function answerGraphql(body: unknown, orgs: StandinOrgs, comments?: StandinCommentNodes): [number, unknown] {
  const b = (typeof body === 'object' && body !== null ? body : {}) as { query?: unknown; variables?: unknown };
  if (typeof b.query !== 'string') return [400, { message: 'Problems parsing JSON', documentation_url: 'https://docs.github.com/graphql' }];
  const vars = (typeof b.variables === 'object' && b.variables !== null ? b.variables : {}) as Vars;
  if (/^\s*mutation\b/.test(b.query)) return answerMinimize(b.query, vars, comments);
  const org = /organization\s*\(([^)]*)\)/.exec(b.query);
  const teams = /teams\s*\(([^)]*)\)/.exec(b.query);
  if (!org || !teams) return gqlError('stand-in: only organization { teams(userLogins:) } queries are supported');
  const login = args(org[1]!, vars).login;
  if (typeof login !== 'string') return gqlError('Variable $org of type String! was provided invalid value');
  const all = orgs.get(login.toLowerCase());
  if (!all) {
    return [
      200,
      {
        data: { organization: null },
        errors: [
          {
            type: 'NOT_FOUND',
            path: ['organization'],
            locations: [{ line: 1, column: 1 }],
            message: `Could not resolve to an Organization with the login of '${login}'.`,
          },
        ],
      },
    ];
  }
  const a = args(teams[1]!, vars);
  const first = typeof a.first === 'number' ? a.first : undefined;
  if (first === undefined) return gqlError('You must provide a `first` or `last` value to properly paginate the `teams` connection.');
  if (first > 100) return gqlError(`Requesting ${first} records on the \`teams\` connection exceeds the \`first\` limit of 100 records.`);
  const logins = Array.isArray(a.userLogins)
    ? a.userLogins.filter((x): x is string => typeof x === 'string').map((x) => x.toLowerCase())
    : undefined;
  const matching = all.filter((t) => !logins || logins.some((l) => t.members.has(l)));
  let start = 0;
  if (typeof a.after === 'string') {
    const m = /^cursor:v2:(\d+)$/.exec(Buffer.from(a.after, 'base64').toString());
    if (!m) return gqlError(`\`${a.after}\` does not appear to be a valid cursor.`);
    start = Number(m[1]) + 1;
  }
  const page = matching.slice(start, start + first);
  const q = b.query;
  const node = (t: StandinTeam): Record<string, string> => ({
    ...(/\bslug\b/.test(q) ? { slug: t.slug } : {}),
    ...(/\bname\b/.test(q) ? { name: t.name } : {}),
  });
  const conn: Record<string, unknown> = {};
  if (/\bnodes\b/.test(q)) conn.nodes = page.map(node);
  // Only the fields asked for: Atlantis's client (githubv4) refuses an answer with others.
  if (/\bedges\b/.test(q))
    conn.edges = page.map((t, i) => ({ ...(/\bcursor\b/.test(q) ? { cursor: cursor(start + i) } : {}), node: node(t) }));
  if (/\bpageInfo\b/.test(q)) {
    conn.pageInfo = {
      hasNextPage: start + page.length < matching.length,
      endCursor: page.length ? cursor(start + page.length - 1) : null,
    };
  }
  return [200, { data: { organization: { teams: conn } } }];
}

/** What blocks a stand-in PR, as GitHub's GraphQL reports it. */
export interface StandinProtection {
  /** APPROVED, CHANGES_REQUESTED, REVIEW_REQUIRED or null (no review rule). */
  reviewDecision?: string | null;
  /** Branch protection's required status checks. */
  requiredChecks?: string[];
  rulesets?: Array<{
    enforcement: 'ACTIVE' | 'EVALUATE' | 'DISABLED';
    type: 'REQUIRED_STATUS_CHECKS' | 'WORKFLOWS' | 'PULL_REQUEST';
    checks?: string[];
    workflows?: string[];
    requiredApprovingReviewCount?: number;
  }>;
  latestReviews?: string[];
  checkRuns?: Array<{ name: string; conclusion: string | null; runNumber?: number }>;
}

/** Answers `repository(owner:, name:) { pullRequest(number:) { ... } }`. */
export function answerPullGraphql(
  body: unknown,
  lookup: (
    owner: string,
    name: string,
    number: number,
  ) => { protection: StandinProtection; statuses: Array<{ context: string; state: string }> } | undefined,
): [number, unknown] {
  const vars = ((body as { variables?: unknown }).variables ?? {}) as Vars;
  const { owner, name, number } = vars;
  if (typeof owner !== 'string' || typeof name !== 'string' || typeof number !== 'number')
    return gqlError('Variable $number of type Int! was provided invalid value');
  const found = lookup(owner, name, number);
  if (!found) {
    return [
      200,
      {
        data: { repository: { pullRequest: null } },
        errors: [
          {
            type: 'NOT_FOUND',
            path: ['repository', 'pullRequest'],
            message: `Could not resolve to a PullRequest with the number of ${number}.`,
          },
        ],
      },
    ];
  }
  const p = found.protection;
  const rules = (p.rulesets ?? []).map((r) => ({
    type: r.type,
    repositoryRuleset: { enforcement: r.enforcement },
    parameters:
      r.type === 'REQUIRED_STATUS_CHECKS'
        ? { requiredStatusChecks: (r.checks ?? []).map((context) => ({ context })) }
        : r.type === 'WORKFLOWS'
          ? { workflows: (r.workflows ?? []).map((path) => ({ path })) }
          : { requiredApprovingReviewCount: r.requiredApprovingReviewCount ?? 0 },
  }));
  const contexts = [
    ...(p.checkRuns ?? []).map((c) => ({
      __typename: 'CheckRun',
      name: c.name,
      conclusion: c.conclusion,
      checkSuite: { workflowRun: c.runNumber === undefined ? null : { runNumber: c.runNumber } },
    })),
    ...found.statuses.map((s) => ({ __typename: 'StatusContext', context: s.context, state: s.state })),
  ];
  return [
    200,
    {
      data: {
        repository: {
          pullRequest: {
            reviewDecision: p.reviewDecision ?? null,
            latestOpinionatedReviews: { nodes: (p.latestReviews ?? []).map((state) => ({ state })) },
            baseRef: {
              branchProtectionRule: p.requiredChecks ? { requiredStatusChecks: p.requiredChecks.map((context) => ({ context })) } : null,
              rules: { pageInfo: { hasNextPage: false }, nodes: rules },
            },
            commits: { nodes: [{ commit: { statusCheckRollup: { contexts: { pageInfo: { hasNextPage: false }, nodes: contexts } } } }] },
          },
        },
      },
    },
  ];
}
