// The server and controller processes a test file starts, kept in one list and killed together
// at its end (SIGKILL, those still running), so that a failing test leaves no process behind.
import type { CliProcess } from './cli.js';

export type ChildList = CliProcess[] & {
  /** SIGKILLs every process of the list that has not exited. */
  killAll(): void;
};

/** An empty list; push each process the file starts, call killAll() in its after(). */
export function childList(): ChildList {
  const list = [] as unknown as ChildList;
  list.killAll = () => {
    for (const p of list) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
  };
  return list;
}
