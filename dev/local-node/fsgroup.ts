// fsGroup on a pod's volumes, as a kubelet applies it before a container of the pod starts
// (pkg/volume/volume_linux.go's SetVolumeOwnership): every file and directory gets the group
// fsGroup; files gain read and write for the group (read only on a read-only volume), and
// directories also the group's search bit and setgid, so what the pod's user creates later
// keeps the group. With fsGroupChangePolicy OnRootMismatch the walk is skipped when the
// volume's root already has the group and those bits. Symlinks keep their mode.
import fs from 'node:fs';
import path from 'node:path';

const RW = 0o660;
const RO = 0o440;
const EXEC = 0o110;
const SETGID = 0o2000;

/** Pure: the mode a file or directory gets. */
export function fsGroupMode(mode: number, isDir: boolean, readOnly: boolean): number {
  let mask = readOnly ? RO : RW;
  if (isDir) mask |= SETGID | EXEC;
  return (mode & 0o7777) | mask;
}

/** Pure: whether OnRootMismatch may skip a volume whose root has this gid and mode. */
export function rootMatches(gid: number, mode: number, fsGroup: number, readOnly: boolean): boolean {
  if (gid !== fsGroup) return false;
  const want = fsGroupMode(0, true, readOnly);
  return (mode & want) === want;
}

/** Applies fsGroup to a volume's directory tree; returns how many entries it changed. */
export function applyFsGroup(root: string, fsGroup: number, opts: { readOnly?: boolean; policy?: string } = {}): number {
  const readOnly = opts.readOnly ?? false;
  const top = fs.lstatSync(root, { throwIfNoEntry: false });
  if (!top) return 0;
  if (opts.policy === 'OnRootMismatch' && top.isDirectory() && rootMatches(top.gid, top.mode, fsGroup, readOnly)) return 0;
  let changed = 0;
  const visit = (p: string, st: fs.Stats): void => {
    if (st.gid !== fsGroup) fs.lchownSync(p, st.uid, fsGroup);
    if (!st.isSymbolicLink()) {
      const mode = fsGroupMode(st.mode, st.isDirectory(), readOnly);
      if (mode !== (st.mode & 0o7777) || st.gid !== fsGroup) changed++;
      if (mode !== (st.mode & 0o7777)) fs.chmodSync(p, mode);
    }
    if (st.isDirectory()) {
      for (const name of fs.readdirSync(p)) {
        const child = path.join(p, name);
        const cst = fs.lstatSync(child, { throwIfNoEntry: false });
        if (cst) visit(child, cst);
      }
    }
  };
  visit(root, top);
  return changed;
}
