// What Atlantis does to terraform's plan output before it shows it on the PR, and what it
// reads out of it (the summary line, change counts). Pure functions; behaviour taken from
// Atlantis v0.47 (plan step runner and the PlanSuccess model), code our own.

const REFRESHING = 'Refreshing state...';

/**
 * Drops the "Refreshing state..." preamble: everything up to and including the last line
 * that mentions it (terraform >= 0.14 output). As Atlantis, a refresh line that is the very
 * first line is not a preamble and nothing is dropped.
 */
export function stripRefreshing(output: string): string {
  const lines = output.split('\n');
  let last = 0;
  lines.forEach((l, i) => {
    if (l.includes(REFRESHING)) last = i;
  });
  return last === 0 ? output : lines.slice(last + 1).join('\n');
}

/**
 * The plan output as Atlantis shows it: preamble dropped and the `+`, `~` and `-` markers
 * that terraform indents by two spaces moved to column 0, so GitHub's ```diff block colours
 * the lines.
 */
export function formatPlanOutput(output: string): string {
  return stripRefreshing(output.replace(/\r\n/g, '\n'))
    .replace(/^ {2}\+/gm, '+')
    .replace(/^ {2}~/gm, '~')
    .replace(/^ {2}-/gm, '-');
}

export interface PlanStats {
  /** Some `Plan: ...` line is present. */
  changes: boolean;
  changesOutside: boolean;
  import: number;
  add: number;
  change: number;
  destroy: number;
  forget: number;
}

// Same patterns as Atlantis, unescaped dots of "No changes." included.
const PLAN_CHANGES = /Plan: (?:(\d+) to import, )?(\d+) to add, (\d+) to change, (\d+) to destroy(?:, (\d+) to forget)?\./g;
const NO_CHANGES = /No changes. (Infrastructure is up-to-date|Your infrastructure matches the configuration)./;
const CHANGES_OUTSIDE = /Note: Objects have changed outside of Terraform/;

/** Change counts, summed over every `Plan:` line (terragrunt prints one per unit). */
export function planStats(output: string): PlanStats {
  const s: PlanStats = {
    changes: false,
    changesOutside: CHANGES_OUTSIDE.test(output),
    import: 0,
    add: 0,
    change: 0,
    destroy: 0,
    forget: 0,
  };
  const n = (x: string | undefined): number => (x ? Number(x) : 0);
  for (const m of output.matchAll(PLAN_CHANGES)) {
    s.changes = true;
    s.import += n(m[1]);
    s.add += n(m[2]);
    s.change += n(m[3]);
    s.destroy += n(m[4]);
    s.forget += n(m[5]);
  }
  return s;
}

/** The one-line summary: `Plan: ...` rebuilt from the counts, or the "No changes." sentence, or ''. */
export function planDiffSummary(output: string): string {
  const s = planStats(output);
  if (!s.changes) return NO_CHANGES.exec(output)?.[0] ?? '';
  const imp = s.import > 0 ? `${s.import} to import, ` : '';
  const forget = s.forget > 0 ? `, ${s.forget} to forget` : '';
  return `Plan: ${imp}${s.add} to add, ${s.change} to change, ${s.destroy} to destroy${forget}.`;
}

/** What Atlantis prints under a folded plan: the summary, after a bold note when objects changed outside terraform. */
export function planSummary(output: string): string {
  const note = CHANGES_OUTSIDE.exec(output);
  return (note ? `\n**${note[0]}**\n` : '') + planDiffSummary(output);
}

/** A plan without changes: no `Plan:` line and terraform's "No changes." sentence. */
export function planHasNoChanges(output: string): boolean {
  return !planStats(output).changes && NO_CHANGES.test(output);
}

// ---- --enable-diff-markdown-format ------------------------------------------------------
// Atlantis's reformatting of plan output so that GitHub's diff colouring catches every
// changed line: the `+`/`-`/`~` marker moves in front of the indentation, `~` becomes `!`
// (diff's "changed"), and heredoc content is left alone except the diff markers terraform
// puts inside a changed heredoc. Same patterns as Atlantis; `\s` spelled as Go's RE2 has it.

const S = '[\\t\\n\\f\\r ]';
const LINE_RULES: Array<[RegExp, string]> = [
  [new RegExp(`^( +)([-+~]${S})([a-zA-Z_]\\w*${S}*)(${S}=${S}|${S}->${S}|\\(known after apply\\)|\\{)(.*)`), '$2$1$3$4$5'],
  [new RegExp(`^( +)([-+~]${S})((?:resource|data|module)${S}+.+\\{.*)`), '$2$1$3'],
  [new RegExp(`^( +)([-+~]${S})(<<)(.*)`), '$2$1$3$4'],
  [new RegExp(`^( +)([-+~]${S})( {4,}[a-zA-Z_][\\w-]*:.*)`), '$2$1$3'],
  [new RegExp(`^( +)([-+~]${S})(".*",)`), '$2$1$3'],
  [/^~/, '!'],
];
const HEREDOC_ATTRIBUTE = new RegExp(`^( *)([-+~]${S})?[a-zA-Z_]\\w*${S}*=${S}<<-?([a-zA-Z_]\\w*)${S}*$`);
const HEREDOC_ELEMENT = new RegExp(`^( *)([-+~]${S})<<-?([a-zA-Z_]\\w*)${S}*$`);
const HEREDOC_CONTENT = new RegExp(`^( +)([-+~]${S})(.*)`);

interface Heredoc {
  delimiter: string;
  /** Indentation of the closing delimiter. */
  terminatorIndent: number;
  /** Where terraform puts diff markers inside a changed (`~`) heredoc; -1: content stays as is. */
  markerIndent: number;
}

function heredocStart(line: string): Heredoc | undefined {
  const attr = HEREDOC_ATTRIBUTE.exec(line);
  const elem = attr ? undefined : HEREDOC_ELEMENT.exec(line);
  const m = attr ?? elem;
  if (!m) return undefined;
  const indent = m[1] ?? '';
  const marker = m[2] ?? '';
  // Terraform puts a changed heredoc's markers two spaces deeper than its terminator.
  const markerIndent = attr ? indent.length + 4 : indent.length + marker.length + 2;
  return {
    delimiter: m[3] ?? '',
    terminatorIndent: indent.length + marker.length,
    markerIndent: marker.startsWith('~') ? markerIndent : -1,
  };
}

function heredocEnds(line: string, h: Heredoc): boolean {
  const t = ' '.repeat(h.terminatorIndent) + h.delimiter;
  return line === t || line === `${t},` || line.startsWith(`${t} -> `) || line.startsWith(`${t}, -> `);
}

/** Atlantis's DiffMarkdownFormattedTerraformOutput. */
export function diffMarkdownFormat(output: string): string {
  let heredoc: Heredoc | undefined;
  const lines = output.split('\n').map((line) => {
    if (heredoc) {
      if (heredocEnds(line, heredoc)) {
        heredoc = undefined;
        return line;
      }
      if (heredoc.markerIndent < 0) return line;
      const m = HEREDOC_CONTENT.exec(line);
      if (!m || (m[1] ?? '').length !== heredoc.markerIndent) return line;
      return `${m[2]}${m[1]}${m[3]}`.replace(/^~/, '!');
    }
    heredoc = heredocStart(line);
    return LINE_RULES.reduce((l, [re, to]) => l.replace(re, to), line);
  });
  return lines.join('\n').trim();
}
