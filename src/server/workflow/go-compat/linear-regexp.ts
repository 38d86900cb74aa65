// A regular expression written in a PR (`-p` with --enable-regexp-cmd) run in linear time, as
// Go's RE2 runs it for Atlantis. JavaScript's RegExp backtracks: `-p '(a|a)*b'` against a
// project name of a few dozen letters (both from the PR) would hold the event loop for minutes.
// V8's linear-time engine (the `l` flag, behind a V8 flag that is set once here) takes about
// RE2's subset; what it cannot run in linear time (backreferences, lookaround, which RE2 does
// not have either) does not compile, and neither does a flag set without the engine.
import { setFlagsFromString } from 'node:v8';

let engineOn = false;

/** `source` compiled for V8's linear-time engine; undefined when it does not compile there. */
export function linearRegExp(source: string): RegExp | undefined {
  if (!engineOn) {
    setFlagsFromString('--enable-experimental-regexp-engine');
    engineOn = true;
  }
  try {
    return new RegExp(source, 'l');
  } catch {
    return undefined;
  }
}
