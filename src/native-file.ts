// Where the native parts hack/bundle.mjs builds into dist/native/ (the process host worker, the
// non-dumpable addon) are, relative to this module: beside the bundle (dist/cli.cjs), from
// tsc's output (dist/src/), and from the TypeScript source (src/).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const DIRS = ['./native/', '../native/', '../dist/native/'];

/** The path of dist/native/<name>, or undefined when it was not built. */
export function nativeFile(name: string): string | undefined {
  return DIRS.map((d) => fileURLToPath(new URL(`${d}${name}`, import.meta.url))).find((f) => existsSync(f));
}
