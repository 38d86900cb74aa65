// How the pod's grace period is split between the server's own drain deadline and
// terraform's interrupt grace (SPEC sections 4 and 6).
//
// When a pod is deleted, kubelet sends SIGTERM and SIGKILLs after terminationGracePeriodSeconds
// (G). The server then waits `--drain-timeout` (D) for running operations, SIGINTs terraform,
// waits `--terraform-interrupt-grace` (I) and SIGKILLs what is left. For terraform to be
// interrupted cleanly before kubelet's SIGKILL we need D + I < G, with a margin M for
// posting PR comments and exiting:
//
//   I = min(60, floor(G / 3))      terraform gets up to a minute to write state and unlock
//   D = G - I - M,  M = 10         everything left goes to letting operations finish
//
// G >= 30 (MIN_GRACE_SECONDS, enforced by a CEL rule in the CRD) keeps I >= 10 and D >= 10.
// A preStop `sleep` hook of S seconds runs before the SIGTERM: D = G - I - M - S (the CRD keeps
// that at 10 or more).
// The controller's own drain (the annotation) has no server-side deadline: this budget only
// matters once the pod is deleted (after a drain, on Interrupt, or by anyone else: node
// drain, eviction, kubectl delete).

export const MIN_GRACE_SECONDS = 30;
export const SHUTDOWN_MARGIN_SECONDS = 10;
export const MAX_INTERRUPT_GRACE_SECONDS = 60;

export interface DrainTiming {
  terminationGracePeriodSeconds: number;
  /** Value of ATLANTIS_DRAIN_TIMEOUT. */
  drainTimeoutSeconds: number;
  /** Value of ATLANTIS_TERRAFORM_INTERRUPT_GRACE. */
  interruptGraceSeconds: number;
  marginSeconds: number;
}

export function drainTiming(terminationGracePeriodSeconds: number, preStopSleepSeconds = 0): DrainTiming {
  const g = Math.max(Math.floor(terminationGracePeriodSeconds), MIN_GRACE_SECONDS);
  const interruptGraceSeconds = Math.min(MAX_INTERRUPT_GRACE_SECONDS, Math.floor(g / 3));
  // At least 10 s even if an object the CRD would refuse asks for more sleep.
  const drainTimeoutSeconds = Math.max(10, g - interruptGraceSeconds - SHUTDOWN_MARGIN_SECONDS - Math.floor(preStopSleepSeconds));
  return { terminationGracePeriodSeconds: g, drainTimeoutSeconds, interruptGraceSeconds, marginSeconds: SHUTDOWN_MARGIN_SECONDS };
}

/** Go-style duration ("50s") as the server's duration flags accept. */
export function goDuration(seconds: number): string {
  return `${Math.floor(seconds)}s`;
}
