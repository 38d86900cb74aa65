// The workflow's rooms (docs/architecture.md) and the code host seam, checked on the sources:
// each import between two rooms goes down the room table, never up (so a newcomer can read a
// room knowing only the rooms below it), and no file of the workflow, of http/, of replicas/ or
// of the web page imports a host's own files: they talk to src/server/vcs/host.ts. Import
// cycles themselves are Biome's noImportCycles (biome.json).
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const server = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../src/server');

/** Each room's place: a room may import only rooms with a lower rank (and itself). */
const RANK: Record<string, number> = {
  index: 7, // index.ts and api-routes.ts: composition
  intake: 6,
  commands: 5,
  automerge: 4,
  jobs: 4,
  checkout: 4,
  pr: 3,
  'repo-config': 2,
  'comment-parser': 2,
  'go-compat': 1,
};

function importsOf(dir: string): Array<{ file: string; target: string }> {
  return readdirSync(path.join(server, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .flatMap((f) => {
      const file = path.join(server, dir, f);
      return [...readFileSync(file, 'utf8').matchAll(/^(?:import|export)[^;]*? from '(\.[^']+)'/gms)].map((m) => ({
        file: path.relative(server, file),
        target: path.relative(server, path.resolve(path.dirname(file), m[1]!)),
      }));
    });
}

/** The room of a file under src/server/workflow/, or undefined outside it. */
function roomOf(rel: string): string | undefined {
  const m = /^workflow\/(?:([^/]+)\/)?[^/]+$/.exec(rel);
  if (!m) return undefined;
  return m[1] ?? 'index';
}

describe('the workflow in rooms', () => {
  const edges = importsOf('workflow');

  it('every room of the table exists, and every file is in one', () => {
    assert.ok(edges.length > 100, 'imports were found');
    const rooms = new Set(edges.map((e) => roomOf(e.file)));
    assert.deepEqual([...rooms].sort(), Object.keys(RANK).sort());
  });

  it('imports between rooms go down the table', () => {
    const up = edges
      .map((e) => ({ ...e, from: roomOf(e.file)!, to: roomOf(e.target) }))
      .filter((e) => e.to !== undefined && e.to !== e.from && RANK[e.to]! >= RANK[e.from]!)
      .map((e) => `${e.file} -> ${e.target}`);
    assert.deepEqual(up, []);
  });

  it('nothing outside the workflow imports its entry point but the CLI, nor its intake', () => {
    const outside = ['http', 'replicas', 'web', 'locks', 'vcs', 'drain', 'terraform', 'secrets'].flatMap(importsOf);
    const into = outside.filter((e) => e.target === 'workflow/index.js' || e.target.startsWith('workflow/intake/'));
    assert.deepEqual(
      into.map((e) => `${e.file} -> ${e.target}`),
      [],
    );
  });
});

describe('the code host seam', () => {
  it("no file of the workflow, http/, replicas/ or the web page imports a host's own files", () => {
    const offending = ['workflow', 'http', 'replicas', 'web']
      .flatMap(importsOf)
      .filter((e) => e.target.startsWith('vcs/') && !['vcs/host.js', 'vcs/open-host.js', 'vcs/repo-allowlist.js'].includes(e.target));
    assert.deepEqual(
      offending.map((e) => `${e.file} -> ${e.target}`),
      [],
    );
  });

  it('only the composition opens a host; the rest takes the interface', () => {
    const opens = ['workflow', 'http', 'replicas', 'web'].flatMap(importsOf).filter((e) => e.target === 'vcs/open-host.js');
    assert.deepEqual(
      opens.map((e) => e.file),
      ['workflow/index.ts'],
    );
  });
});
