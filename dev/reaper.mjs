// Orphan guard for the local cluster and local node (see dev/procs.ts).
// Started detached with an IPC channel by the process that owns the child process
// groups. The owner sends {add: pgid} / {remove: pgid}. When the channel closes (the
// owner exited, was killed with SIGKILL, or crashed) every group still registered gets
// SIGTERM, then SIGKILL 3 s later, and the reaper exits.
const groups = new Set();

function killAll(signal) {
  for (const g of groups) {
    try {
      process.kill(-g, signal);
    } catch {
      groups.delete(g);
    }
  }
}

process.on('message', (m) => {
  if (m && typeof m.add === 'number') groups.add(m.add);
  if (m && typeof m.remove === 'number') groups.delete(m.remove);
});
process.on('disconnect', () => {
  if (groups.size === 0) process.exit(0);
  killAll('SIGTERM');
  setTimeout(() => {
    killAll('SIGKILL');
    process.exit(0);
  }, 3000);
});
// The reaper must outlive Ctrl-C in the owner's terminal.
process.on('SIGINT', () => {});
process.on('SIGHUP', () => {});
