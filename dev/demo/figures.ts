// The demo's and the bench's figures, from what was recorded (pure, table-tested in
// test/demo.test.ts): failed deliveries, lost commands, the longest answer and command wait,
// and whether any terraform run was killed.
import { UNLOCKED_COMMENT } from '../../src/server/workflow/pr/messages.js';

export type DeliveryKind = 'unlock' | 'autoplan';

/** One webhook sent through the Service. Times are ms since the epoch. */
export interface DeliveryRecord {
  kind: DeliveryKind;
  pull: number;
  sentAt: number;
  /** when the HTTP answer came (a status or an error) */
  answeredAt?: number;
  status?: number;
  /** the connection failed (reset, refused, timed out) */
  error?: string;
}

export interface AnswerComment {
  pull: number;
  body: string;
  /** ms since the epoch */
  at: number;
}

/** The comment that answers a command of this kind (a queued command's "queued" comment is not its answer). */
export function isAnswer(kind: DeliveryKind, body: string): boolean {
  return kind === 'unlock' ? body.startsWith(UNLOCKED_COMMENT) : body.startsWith('Ran Plan for');
}

export const accepted = (d: DeliveryRecord): boolean => d.status !== undefined && d.status >= 200 && d.status < 300;

export interface DeliveryFigures {
  deliveries: number;
  /** not answered 2xx: connection failed, 5xx or 4xx */
  failed: number;
  accepted: number;
  /** accepted commands without their answer comment */
  lost: number;
  /** of the deliveries answered with a status */
  longestAnswerMs: number;
  /** from sending an accepted command to its answer comment */
  longestCommandWaitMs: number;
  /** first and last failed delivery (ms since the epoch), when any failed */
  failedFrom?: number;
  failedUntil?: number;
}

/**
 * Pairs each PR's accepted commands of one kind, oldest first, with that PR's answer
 * comments of the kind posted after the first of them: a PR's commands run one at a time, in
 * order, so the k-th answer is the k-th command's.
 */
export function deliveryFigures(deliveries: readonly DeliveryRecord[], comments: readonly AnswerComment[]): DeliveryFigures {
  const failedOnes = deliveries.filter((d) => !accepted(d));
  const groups = new Map<string, DeliveryRecord[]>();
  for (const d of deliveries.filter(accepted)) {
    const key = `${d.kind} ${d.pull}`;
    groups.set(key, [...(groups.get(key) ?? []), d]);
  }
  let lost = 0;
  let longestWait = 0;
  for (const group of groups.values()) {
    const sorted = [...group].sort((a, b) => a.sentAt - b.sentAt);
    const first = sorted[0]!;
    const answers = comments
      .filter((c) => c.pull === first.pull && c.at >= first.sentAt && isAnswer(first.kind, c.body))
      .sort((a, b) => a.at - b.at);
    lost += Math.max(0, sorted.length - answers.length);
    sorted.forEach((d, i) => {
      const a = answers[i];
      if (a) longestWait = Math.max(longestWait, a.at - d.sentAt);
    });
  }
  const answerMs = deliveries.flatMap((d) => (d.status !== undefined && d.answeredAt !== undefined ? [d.answeredAt - d.sentAt] : []));
  return {
    deliveries: deliveries.length,
    failed: failedOnes.length,
    accepted: deliveries.length - failedOnes.length,
    lost,
    longestAnswerMs: answerMs.length ? Math.max(...answerMs) : 0,
    longestCommandWaitMs: longestWait,
    failedFrom: failedOnes.length ? Math.min(...failedOnes.map((d) => d.sentAt)) : undefined,
    failedUntil: failedOnes.length ? Math.max(...failedOnes.map((d) => d.sentAt)) : undefined,
  };
}

/** A server log line (JSON), with its time as ms in `at`. */
export interface LogLine {
  msg: string;
  at: number;
  [field: string]: unknown;
}

export interface KillEvidence {
  /** SIGKILLs the local node sent to pods of the namespace */
  sigkills: number;
  /** each server pod's log */
  serverLogs: ReadonlyArray<{ pod: string; lines: readonly LogLine[] }>;
  /** the long apply's answer comment, once posted */
  applyComment?: string;
}

/**
 * A terraform run was killed if the node SIGKILLed a pod, a server interrupted or killed
 * terraform, a terraform process ended by a signal or an apply process exited non-zero, a
 * server's drain ended with another exit code than 0, or the long apply's comment is missing
 * or says it was interrupted. Returns the reasons; none means no run was killed.
 */
export function killReasons(e: KillEvidence): string[] {
  const out: string[] = [];
  if (e.sigkills > 0) out.push(`${e.sigkills} SIGKILL sent by the node`);
  for (const { pod, lines } of e.serverLogs)
    for (const l of lines) {
      if (l.msg === 'Interrupting terraform' || l.msg === 'Killing terraform after interrupt grace') out.push(`${pod}: ${l.msg}`);
      if (l.msg === 'Process finished' && (l.signal != null || (l.exitCode !== 0 && isApply(lines, l.jobId))))
        out.push(`${pod}: terraform exited ${l.signal ?? l.exitCode} (job ${String(l.jobId)})`);
      if (l.msg === 'Drain finished' && l.exitCode !== 0) out.push(`${pod}: drain ended with exit code ${String(l.exitCode)}`);
    }
  if (e.applyComment === undefined) out.push('the long apply never answered');
  else if (/Interrupted|interrupted/.test(e.applyComment)) out.push('the long apply says it was interrupted');
  return out;
}

/** The job ran `terraform apply` (by its "Process started" line). */
function isApply(lines: readonly LogLine[], jobId: unknown): boolean {
  return lines.some((l) => l.msg === 'Process started' && l.jobId === jobId && isApplyArgs(l.args));
}

export function isApplyArgs(args: unknown): boolean {
  return Array.isArray(args) && args[0] === 'apply';
}

/** "1.2 s" / "180 ms" */
export function fmtMs(ms: number): string {
  return ms >= 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
}
