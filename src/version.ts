// The version reported by `atlantis-operator version` and in /status. Read from
// package.json at runtime so that a release only has to bump one place.
import { readFileSync } from 'node:fs';

function readVersion(): string {
  for (const rel of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'atlantis-operator' && pkg.version) return pkg.version;
    } catch {
      // try the next candidate: src/ when run through tsx, dist/src/ when built
    }
  }
  return '0.0.0-unknown';
}

export const VERSION: string = process.env.ATLANTIS_OPERATOR_VERSION_OVERRIDE ?? readVersion();
