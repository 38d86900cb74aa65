// Helpers of the many-PR replica test (replicas-many-e2e.test.ts): a bounded pool for
// concurrent webhooks, the server-side workflow that records each terraform run's start and
// end, the parse of those records, and the classification of the server's answer comments.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** Runs `fn` over `items`, at most `limit` at a time; the results in the items' order. */
export async function pooled<T, R>(items: readonly T[], limit: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < items.length; i = next++) out[i] = await fn(items[i] as T, i);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/**
 * A server-side repos.yaml whose default workflow's plan records, per run, a line
 * `start <ns> <run id> <pull> <project dir>` before init and `end ...` after the plan and a
 * sleep of `sleepSeconds` (so an overlap would be wide). The project dir is the working
 * copy's, under the replica's data dir: it names the replica.
 */
export function stampedReposYaml(events: string, sleepSeconds: number): string {
  const stamp = (what: string) => `printf '${what} %s %s %s %s\\n' "$(date +%s%N)" "$RUN_ID" "$PULL_NUM" "$DIR" >> '${events}'`;
  return `repos:
- id: /.*/
  workflow: stamped
workflows:
  stamped:
    plan:
      steps:
      - env:
          name: RUN_ID
          command: cat /proc/sys/kernel/random/uuid
      - run: ${JSON.stringify(stamp('start'))}
      - init
      - plan
      - run: ${JSON.stringify(`sleep ${sleepSeconds}; ${stamp('end')}`)}
`;
}

export interface Run {
  id: string;
  pull: number;
  /** The project's dir in the repo (the working copy dir's last part). */
  project: string;
  /** The working copy's absolute dir. */
  dir: string;
  start: bigint;
  end?: bigint;
}

/** The recorded runs, in the order they started. */
export function readRuns(events: string): Run[] {
  const byId = new Map<string, Run>();
  if (!existsSync(events)) return [];
  for (const line of readFileSync(events, 'utf8').split('\n')) {
    if (line === '') continue;
    const [what, ns, id, pull, dir] = line.split(' ') as [string, string, string, string, string];
    if (what === 'start') {
      if (byId.has(id)) throw new Error(`run ${id} started twice`);
      byId.set(id, { id, pull: Number(pull), project: path.basename(dir), dir, start: BigInt(ns) });
    } else {
      const r = byId.get(id);
      if (!r || r.end !== undefined) throw new Error(`run ${id}: an end without its start, or a second end: ${line}`);
      r.end = BigInt(ns);
    }
  }
  return [...byId.values()].sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
}

/** Pairs of runs of one project whose [start, end] intervals overlap. */
export function overlaps(runs: readonly Run[]): string[] {
  const out: string[] = [];
  const byProject = new Map<string, Run[]>();
  for (const r of runs) byProject.set(r.project, [...(byProject.get(r.project) ?? []), r]);
  for (const [project, rs] of byProject) {
    for (let i = 0; i < rs.length; i++)
      for (let j = i + 1; j < rs.length; j++) {
        const a = rs[i] as Run;
        const b = rs[j] as Run;
        if (a.start < (b.end ?? b.start) && b.start < (a.end ?? a.start))
          out.push(`${project}: pull #${a.pull} ${a.start}..${a.end} (${a.dir}) and pull #${b.pull} ${b.start}..${b.end} (${b.dir})`);
      }
  }
  return out;
}

/** One project's result in a plan comment: planned, or refused by the lock of another PR. */
export type ProjectResult = { ok: true } | { lockedBy: number } | { other: string };

export type Answer =
  | { kind: 'plan'; results: Map<string, ProjectResult> }
  | { kind: 'unlock' }
  | { kind: 'closed'; dirs: string[] }
  | { kind: 'other'; body: string };

const LOCKED = /^\*\*Plan Failed\*\*: This project is currently locked by an unapplied plan from pull #(\d+)\. /;
const PLANNED = /Plan: 1 to add, 0 to change, 0 to destroy\./;
/** terraform's output, folded (more than 12 lines) or not. */
const PLAN_OUTPUT = /^(<details><summary>Show Output<\/summary>\n\n)?```diff\n/;
export const UNLOCKED = 'All Atlantis locks for this PR have been unlocked and plans discarded';
const CLOSED = 'Locks and plans deleted for the projects and workspaces modified in this pull request:\n';

function projectResult(text: string): ProjectResult {
  const locked = LOCKED.exec(text);
  if (locked) return { lockedBy: Number(locked[1]) };
  if (PLAN_OUTPUT.test(text) && PLANNED.test(text)) return { ok: true };
  return { other: text.slice(0, 600) };
}

/** What an answer comment of the server says, in the terms of the test's model. */
export function classify(body: string): Answer {
  if (body === UNLOCKED) return { kind: 'unlock' };
  if (body.startsWith(CLOSED)) {
    const dirs = body
      .slice(CLOSED.length)
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => /^- dir: `([^`]+)` workspace: `default`$/.exec(l)?.[1] ?? `?${l}`);
    return { kind: 'closed', dirs };
  }
  const one = /^Ran Plan for dir: `([^`]+)` workspace: `default`\n\n([\s\S]*)$/.exec(body);
  if (one) return { kind: 'plan', results: new Map([[one[1] as string, projectResult(one[2] as string)]]) };
  const many = /^Ran Plan for (\d+) projects:\n/.exec(body);
  if (many) {
    const results = new Map<string, ProjectResult>();
    const sections = body.split(/^### \d+\. dir: `([^`]+)` workspace: `default`\n/m).slice(1);
    for (let i = 0; i + 1 < sections.length; i += 2) results.set(sections[i] as string, projectResult(sections[i + 1] as string));
    if (results.size === Number(many[1])) return { kind: 'plan', results };
  }
  return { kind: 'other', body: body.slice(0, 800) };
}

/** An answer as a short text, for assertion messages and comparisons. */
export function describeAnswer(a: Answer): string {
  switch (a.kind) {
    case 'plan':
      return `plan ${[...a.results]
        .sort(([x], [y]) => x.localeCompare(y))
        .map(([dir, r]) => `${dir}:${'ok' in r ? 'ok' : 'lockedBy' in r ? `locked-by-#${r.lockedBy}` : `OTHER(${r.other})`}`)
        .join(',')}`;
    case 'unlock':
      return 'unlock';
    case 'closed':
      return `closed ${a.dirs.join(',')}`;
    default:
      return `OTHER(${a.body})`;
  }
}
