// The pages of the web UI as pure functions of what they show: the index (this server's
// state, the global apply lock, locks, running and recent jobs), a lock's page and a job's
// page, and a short page for an action's error. Every value is escaped (html.ts); actions are
// forms posting to this server (actions.ts), confirmed in a dialog by the page's script.
import type { DrainPhase } from '../drain/drain-state.js';
import { lockId, lockPath as lockPathOf } from '../locks/lock-id.js';
import type { ApplyLock, LockKey, LockRecord, PlanRecord } from '../locks/state-store.js';
import type { JobView } from '../workflow/jobs/jobs.js';
import { esc, layout, timeTag } from './html.js';

/** A lock's page: `/lock?id=<lock id>`, the id encoded twice, as Atlantis links it. */
export const lockPath = (l: LockKey & { project?: string }): string => lockPathOf(lockId(l.repo, l.dir, l.workspace, l.project));

export interface ServerView {
  phase: DrainPhase;
  drainingSince: Date | null;
  drainReason: string | null;
  inProgress: number;
  /** This replica's id, shown when replicas share the store. */
  replicaId?: string;
  version: string;
}

/** What an action's redirect asks the index to say (`/?notice=`); anything else says nothing. */
export const NOTICES: Readonly<Record<string, string>> = {
  discarded: 'Plan discarded and unlocked!',
  'apply-locked': 'Apply commands are disabled globally.',
  'apply-unlocked': 'Apply commands are enabled.',
};

/** Atlantis's questions before an action. */
export const CONFIRM_DISCARD = 'Are you sure you want to discard the plan and unlock?';
export const CONFIRM_APPLY_LOCK = 'Are you sure you want to create a global apply lock? It will disable applies globally';
export const CONFIRM_APPLY_UNLOCK = 'Are you sure you want to release global apply lock?';

const REASONS: Readonly<Record<string, string>> = { signal: 'a signal', annotation: 'the pod annotation', cli: 'atlantis-operator drain' };

const footer = (s: ServerView) => `atlantis-operator ${esc(s.version)}`;
const back = '<nav aria-label="Back"><a href="/">All locks and jobs</a></nav>';
const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;

function serverState(s: ServerView): string {
  const draining = s.phase !== 'serving';
  const since = draining && s.drainingSince ? ` since ${timeTag(s.drainingSince)}` : '';
  const why = draining && s.drainReason ? `, started by ${esc(REASONS[s.drainReason] ?? s.drainReason)}` : '';
  const replica = s.replicaId ? ` <span class="replica">replica ${esc(s.replicaId)}</span>` : '';
  return `<p class="server"><span class="badge ${draining ? 'draining' : 'serving'}">${draining ? 'draining' : 'serving'}</span>${since}${why}, ${plural(s.inProgress, 'operation')} in progress${replica}</p>`;
}

/** A form whose button does one action, after the dialog asked `question` (without a script: at once). */
function actionForm(action: string, question: string, label: string, cls = ''): string {
  return `<form method="post" action="${esc(action)}" data-confirm="${esc(question)}"><button type="submit"${cls ? ` class="${cls}"` : ''}>${esc(label)}</button></form>`;
}

function applyLockSection(lock: ApplyLock | undefined): string {
  if (!lock)
    return `<section class="apply-lock" aria-labelledby="apply-lock-h"><h2 id="apply-lock-h">Apply commands</h2>
<p><strong>Apply commands are enabled</strong></p>
${actionForm('/apply/lock', CONFIRM_APPLY_LOCK, 'Disable Apply Commands')}</section>`;
  return `<section class="apply-lock locked" aria-labelledby="apply-lock-h"><h2 id="apply-lock-h">Apply commands</h2>
<p><strong>Apply commands are disabled globally</strong></p>
<dl class="facts"><dt>Lock Status</dt><dd><strong>Active</strong></dd><dt>Active Since</dt><dd>${timeTag(lock.time)}</dd><dt>Set by</dt><dd>${esc(lock.by)}</dd></dl>
${actionForm('/apply/unlock', CONFIRM_APPLY_UNLOCK, 'Enable Apply Commands')}</section>`;
}

function lockRows(locks: readonly LockRecord[]): string {
  if (locks.length === 0) return '<tr><td colspan="6">none</td></tr>';
  return locks
    .map(
      (l) =>
        `<tr><td>${esc(l.repo)}</td><td>${esc(l.dir)}</td><td>${esc(l.workspace)}</td><td>#${esc(l.pull)} by ${esc(l.user)}</td><td>${timeTag(l.time)}</td><td><a href="${esc(lockPath(l))}">Locked<span class="vh">: the lock of ${esc(l.repo)} ${esc(l.dir)} ${esc(l.workspace)}</span></a></td></tr>`,
    )
    .join('');
}

const JOB_HEAD =
  '<tr><th scope="col">Command</th><th scope="col">Pull request</th><th scope="col">Project</th><th scope="col">Dir</th><th scope="col">Workspace</th><th scope="col">Started</th><th scope="col">Status</th></tr>';

const statusBadge = (s: string) => `<span class="status s-${esc(s)}">${esc(s)}</span>`;

function jobRows(jobs: readonly JobView[]): string {
  if (jobs.length === 0) return '<tr><td colspan="7">none</td></tr>';
  return jobs
    .map(
      (j) =>
        `<tr><td><a href="/jobs/${esc(j.id)}">${esc(j.command)}</a></td><td>${esc(j.repo)}#${esc(j.pull)}</td><td>${esc(j.project ?? '')}</td><td>${esc(j.dir)}</td><td>${esc(j.workspace)}</td><td>${timeTag(j.startedAt)}</td><td>${statusBadge(j.status)}</td></tr>`,
    )
    .join('');
}

export interface IndexData {
  server: ServerView;
  /** The global apply lock's state; absent with --disable-global-apply-lock (nothing shown). */
  applyLock?: { lock: ApplyLock | undefined };
  locks: readonly LockRecord[];
  running: readonly JobView[];
  recent: readonly JobView[];
  /** A key of NOTICES. */
  notice?: string;
}

export function indexPage(d: IndexData): string {
  const notice = d.notice !== undefined && Object.hasOwn(NOTICES, d.notice) ? NOTICES[d.notice] : undefined;
  return layout({
    title: 'atlantis',
    header: serverState(d.server),
    footer: footer(d.server),
    main: `${notice ? `<p class="notice" role="status">${esc(notice)}</p>\n` : ''}${d.applyLock ? `${applyLockSection(d.applyLock.lock)}\n` : ''}<section aria-label="Locks"><h2>Locks</h2><table><thead><tr><th scope="col">Repository</th><th scope="col">Dir</th><th scope="col">Workspace</th><th scope="col">Locked by</th><th scope="col">Since</th><th scope="col">Status</th></tr></thead><tbody class="locks">${lockRows(d.locks)}</tbody></table></section>
<section aria-label="Running jobs"><h2>Running jobs</h2><table><thead>${JOB_HEAD}</thead><tbody class="jobs">${jobRows(d.running)}</tbody></table></section>
<section aria-label="Recent jobs"><h2>Recent jobs</h2><table><thead>${JOB_HEAD}</thead><tbody class="jobs">${jobRows(d.recent)}</tbody></table></section>`,
  });
}

export interface LockPageData {
  server: ServerView;
  lock: LockRecord;
  /** The id as the page's query had it (encoded once): the discard form posts it back. */
  id: string;
  /** The locking PR's plan of this project, if it has one. */
  plan?: PlanRecord;
  /** The PR on GitHub. */
  pullUrl: string;
}

export function lockPage(d: LockPageData): string {
  const l = d.lock;
  const key = lockId(l.repo, l.dir, l.workspace, l.project);
  const [owner, name] = l.repo.split('/');
  const plan = d.plan ? `saved ${timeTag(d.plan.createdAt)} from commit <code>${esc(d.plan.headSha.slice(0, 12))}</code>` : 'none';
  return layout({
    title: `atlantis: lock ${key}`,
    header: back,
    footer: footer(d.server),
    main: `<h1><span class="key">${esc(key)}</span> <code>Locked</code></h1>
<dl class="facts">
<dt>Repo Owner</dt><dd>${esc(owner ?? '')}</dd>
<dt>Repo Name</dt><dd>${esc(name ?? '')}</dd>
<dt>Pull Request Link</dt><dd><a href="${esc(d.pullUrl)}">${esc(d.pullUrl)}</a></dd>
<dt>Locked By</dt><dd>#${esc(l.pull)} by ${esc(l.user)}</dd>
<dt>Dir</dt><dd>${esc(l.dir)}</dd>
<dt>Workspace</dt><dd>${esc(l.workspace)}</dd>
${l.project ? `<dt>Project</dt><dd>${esc(l.project)}</dd>\n` : ''}<dt>Since</dt><dd>${timeTag(l.time)}</dd>
<dt>Plan</dt><dd>${plan}</dd>
</dl>
${actionForm(`/locks/discard?id=${encodeURIComponent(d.id)}`, CONFIRM_DISCARD, 'Discard Plan & Unlock', 'danger')}`,
  });
}

export interface JobPageData {
  server: ServerView;
  title: string;
  job?: JobView;
  /** The output so far, as HTML (ansi.ts). */
  outputHtml: string;
  /** Where the page follows a running job's output (server-sent events); absent when it has ended. */
  streamUrl?: string;
}

export function jobPage(d: JobPageData): string {
  const j = d.job;
  const status = j?.status ?? 'finished';
  const facts = j
    ? `\n<dl class="facts"><dt>Pull request</dt><dd>${esc(j.repo)}#${esc(j.pull)}</dd><dt>Started</dt><dd>${timeTag(j.startedAt)}</dd>${j.finishedAt ? `<dt>Finished</dt><dd>${timeTag(j.finishedAt)}</dd>` : ''}</dl>`
    : '';
  const stream = d.streamUrl ? ` data-stream="${esc(d.streamUrl)}"` : '';
  return layout({
    title: `atlantis: ${d.title}`,
    header: back,
    footer: footer(d.server),
    main: `<h1>${esc(d.title)}</h1>
<div class="job-state" data-status="${esc(status)}" aria-live="polite"><span>Status</span> <p id="status">${esc(status)}</p></div>${facts}
<h2 id="out-h">Output</h2>
<div id="term" class="term" tabindex="0" role="region" aria-labelledby="out-h"${stream}><pre id="out">${d.outputHtml}</pre></div>${
      d.streamUrl ? '\n<p class="follow"><label><input type="checkbox" id="follow" checked> Keep the newest output in view</label></p>' : ''
    }`,
  });
}

/** An action's error, for a person who clicked a button (a script gets the text alone). */
export function messagePage(server: ServerView, title: string, text: string): string {
  return layout({ title: `atlantis: ${title}`, header: back, footer: footer(server), main: `<h1>${esc(title)}</h1>\n<p>${esc(text)}</p>` });
}
