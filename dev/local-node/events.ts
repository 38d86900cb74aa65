// Node events (lifecycle and signal steps): kept in memory, appended as JSON lines to
// <root>/events.jsonl so that a test in another process can read them, and handed to listeners.
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../src/log.js';
import type { NodeEvent } from './types.js';

export class NodeEventLog {
  private readonly list: NodeEvent[] = [];
  private readonly listeners: Array<(e: NodeEvent) => void> = [];
  private readonly file: string;

  constructor(
    root: string,
    private readonly log: Logger,
  ) {
    this.file = path.join(root, 'events.jsonl');
  }

  record(e: Omit<NodeEvent, 'time'>): void {
    const ev: NodeEvent = { time: new Date().toISOString(), ...e };
    this.list.push(ev);
    if (this.list.length > 10_000) this.list.splice(0, 1_000);
    try {
      fs.appendFileSync(this.file, `${JSON.stringify(ev)}\n`);
    } catch {
      // the root dir may be gone at shutdown
    }
    for (const l of this.listeners) {
      try {
        l(ev);
      } catch {
        // a listener's problem is not the node's
      }
    }
    this.log.debug('Node event', { ...ev });
  }

  events(filter: { namespace?: string; pod?: string } = {}): NodeEvent[] {
    return this.list.filter((e) => (!filter.namespace || e.namespace === filter.namespace) && (!filter.pod || e.pod === filter.pod));
  }

  onEvent(listener: (e: NodeEvent) => void): void {
    this.listeners.push(listener);
  }
}

/** The directory of a pod under a node root (newest when several pods had the name). */
export function findPodDir(root: string, namespace: string, name: string, uid?: string): string | undefined {
  const dir = path.join(root, 'pods');
  if (uid) {
    const d = path.join(dir, `${namespace}_${name}_${uid}`);
    return fs.existsSync(d) ? d : undefined;
  }
  let entries: string[];
  try {
    entries = fs.readdirSync(dir).filter((e) => e.startsWith(`${namespace}_${name}_`) && e.length === `${namespace}_${name}_`.length + 36);
  } catch {
    return undefined;
  }
  const withTime = entries.map((e) => ({ e, t: fs.statSync(path.join(dir, e)).mtimeMs })).sort((a, b) => b.t - a.t);
  return withTime[0] ? path.join(dir, withTime[0].e) : undefined;
}

/** Reads the node's events.jsonl. */
export function readNodeEvents(root: string, filter: { namespace?: string; pod?: string } = {}): NodeEvent[] {
  let text = '';
  try {
    text = fs.readFileSync(path.join(root, 'events.jsonl'), 'utf8');
  } catch {
    return [];
  }
  const out: NodeEvent[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      const e = JSON.parse(line) as NodeEvent;
      if ((!filter.namespace || e.namespace === filter.namespace) && (!filter.pod || e.pod === filter.pod)) out.push(e);
    } catch {
      // a torn last line
    }
  }
  return out;
}
