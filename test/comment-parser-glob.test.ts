// A glob -d is run, as in Atlantis, over the projects of the repo's atlantis.yaml: every
// project whose dir the pattern matches (in the workspace given, `default` otherwise); when
// none matches, the pattern is taken as a dir, as Atlantis takes it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseComment } from '../src/server/workflow/comment-parser/index.js';
import { parseRepoConfig } from '../src/server/workflow/repo-config/atlantis-yaml.js';
import { resolveCommentTarget } from '../src/server/workflow/repo-config/project-selection.js';

const config = parseRepoConfig(`version: 3
projects:
- {name: net, dir: modules/net}
- {name: db, dir: modules/db}
- {name: db-staging, dir: modules/db, workspace: staging}
- {name: deep, dir: modules/x/y}
- {name: app, dir: apps/web}
`);

/** What `atlantis plan -d <pattern> [-w ws]` selects: project names, or default-project dirs. */
function selected(comment: string, withConfig = true): string[] {
  const r = parseComment(comment, { vcsUser: 'bot' });
  assert.equal(r.kind, 'command', JSON.stringify(r));
  if (r.kind !== 'command') return [];
  const t = resolveCommentTarget(withConfig ? config : undefined, { dir: r.command.dir, workspace: r.command.workspace });
  assert.equal(t.kind, 'projects', JSON.stringify(t));
  return t.kind === 'projects' ? t.projects.map((p) => p.name ?? `dir:${p.dir}@${p.workspace}`) : [];
}

test('glob -d selects the matching projects of atlantis.yaml', () => {
  const table: Array<[string, string[]]> = [
    ['atlantis plan -d modules/*', ['net', 'db']],
    ['atlantis plan -d ./modules/*', ['net', 'db']],
    ['atlantis plan -d /modules/*', ['net', 'db']],
    ['atlantis plan -d modules/**', ['net', 'db', 'deep']],
    ['atlantis plan -d modules/* -w staging', ['db-staging']],
    ['atlantis plan -d modules/d?', ['db']],
    ["atlantis plan -d '{apps,modules}/[dn]*'", ['net', 'db']],
    ['atlantis plan -d **/web', ['app']],
    // No project matches: Atlantis takes the pattern as a dir.
    ['atlantis plan -d nothing/*', ['dir:nothing/*@default']],
    ['atlantis apply -d modules/* -w prod', ['dir:modules/*@prod']],
  ];
  for (const [comment, want] of table) assert.deepEqual(selected(comment), want, comment);
  // Without atlantis.yaml there are no projects to match.
  assert.deepEqual(selected('atlantis plan -d modules/*', false), ['dir:modules/*@default']);
  // A plain dir is unchanged: the one project there.
  assert.deepEqual(selected('atlantis plan -d modules/net'), ['net']);
});
