// Orphan guard for the local cluster and local node (see dev/procs.ts).
// Started detached with an IPC channel by the process that owns the child process groups:
//   node reaper.mjs <registry file>
// The owner appends "+<pgid>" / "-<pgid>" lines to the registry file synchronously as it
// spawns and reaps groups (so nothing is lost when the owner dies a moment later). When the
// IPC channel closes (the owner exited, was killed with SIGKILL, or crashed) every group
// still registered gets SIGTERM, then SIGKILL 3 s later, and the reaper exits.
import fs from 'node:fs';

const registry = process.argv[2];
if (process.env.REAPER_DEBUG) fs.appendFileSync(process.env.REAPER_DEBUG, `start ${process.pid} connected=${process.connected}\n`);

function groups() {
  const set = new Set();
  let text = '';
  try {
    text = fs.readFileSync(registry, 'utf8');
  } catch {
    return set;
  }
  for (const line of text.split('\n')) {
    const n = Number(line.slice(1));
    if (!Number.isInteger(n) || n <= 1) continue;
    if (line[0] === '+') set.add(n);
    else if (line[0] === '-') set.delete(n);
  }
  return set;
}

function killAll(set, signal) {
  for (const g of set) {
    try {
      process.kill(-g, signal);
    } catch {
      set.delete(g);
    }
  }
}

function ownerGone() {
  if (process.env.REAPER_DEBUG) fs.appendFileSync(process.env.REAPER_DEBUG, `disconnect ${[...groups()]}\n`);
  const set = groups();
  if (set.size === 0) {
    fs.rmSync(registry, { force: true });
    process.exit(0);
  }
  killAll(set, 'SIGTERM');
  setTimeout(() => {
    killAll(set, 'SIGKILL');
    fs.rmSync(registry, { force: true });
    process.exit(0);
  }, 3000);
}

// The owner may be gone before this process even set its channel up: then no 'disconnect'
// comes, so check at start too.
if (!process.connected) ownerGone();
else process.once('disconnect', ownerGone);
// Keep the channel's listener: 'disconnect' needs it. Ctrl-C in the owner's terminal must not stop the reaper.
process.on('message', () => {});
process.on('SIGINT', () => {});
process.on('SIGHUP', () => {});
