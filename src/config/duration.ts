// Durations in flags and env, written the way Atlantis and Kubernetes users write them:
// Go-style ("90s", "1h30m", "250ms") or a bare number of seconds ("3600").

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * The longest duration a flag may ask for when its timer can wait that long (setLongTimeout):
 * ten years, far from where Date arithmetic breaks (8.64e15 ms). Other duration flags stop at
 * Node's timer limit, MAX_TIMER_DELAY_MS in src/async.ts.
 */
export const MAX_DURATION_MS = 87_600 * 3_600_000;

/** Parses a duration into milliseconds; returns undefined when the text is not one. */
export function parseDuration(text: string): number | undefined {
  const t = text.trim();
  if (/^\d+(\.\d+)?$/.test(t)) return Math.round(Number(t) * 1000);
  if (!/^(\d+(\.\d+)?(ms|s|m|h))+$/.test(t)) return undefined;
  let total = 0;
  for (const m of t.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)) {
    total += Number(m[1]) * (UNIT_MS[m[2]!] ?? 0);
  }
  return Math.round(total);
}

/** Formats milliseconds as a Go-style duration, e.g. 5400000 -> "1h30m". */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  if (ms % 1000 !== 0) return `${ms}ms`;
  let s = ms / 1000;
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  return `${h ? `${h}h` : ''}${m ? `${m}m` : ''}${s ? `${s}s` : ''}`;
}
