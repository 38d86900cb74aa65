// Retry delays: one exponential formula for every retry loop (work queue, informer, GitHub
// client), and the two ways of spreading concurrent retries they use.

/** Capped exponential delay: base * 2^n, at most max; base for n <= 0. */
export function backoffDelay(n: number, baseMs: number, maxMs: number): number {
  if (n <= 0) return baseMs;
  // 2^n overflows to Infinity for large n; Math.min caps it.
  return Math.min(maxMs, baseMs * 2 ** n);
}

/** `ms` times a uniform factor in [1 - spread, 1 + spread], rounded. */
export function spreadJitter(ms: number, spread: number, random: () => number = Math.random): number {
  return Math.round(ms * (1 - spread + random() * 2 * spread));
}

/** Equal jitter: half of `ms` fixed, half random, rounded. */
export function equalJitter(ms: number, random: () => number = Math.random): number {
  return Math.round(ms / 2 + (random() * ms) / 2);
}
