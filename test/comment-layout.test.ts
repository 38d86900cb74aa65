// Result comments laid out exactly as Atlantis v0.47 lays them out, checked against texts
// Atlantis's own renderer produced.
//
// test/fixtures/atlantis-v0.47/markdown-renderer.json holds, per case, the input (command,
// server settings, per-project results as Atlantis models them) and `expected`: what
// Atlantis's MarkdownRenderer.Render returned for it, plus `log`, the verbose log text it was
// given. They are facts about Atlantis. How they were recorded (nothing of it is in this
// repo): the public runatlantis/atlantis snapshot (v0.47.0 + 7 commits, 078d0a8) checked out
// in /tmp/atlantis-ref/src; a separate Go module with `replace github.com/runatlantis/atlantis
// => /tmp/atlantis-ref/src` and one Go test that reads the case inputs, builds
// events.NewMarkdownRenderer(false, disableApplyAll, disableApply, disableMarkdownFolding,
// disableRepoLocking, enableDiffMarkdownFormat, "", executableName, hideUnchangedPlanComments, false) per case, a
// command.Context with a GitHub base repo and a history logger fed `logLines` with Info, and
// writes Render's result into `expected` (`go test -run TestGenerate`).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import {
  type ProjectResultView,
  type ResultCommand,
  renderCommandError,
  renderCommandFailure,
  renderResults,
} from '../src/server/workflow/pr/messages.js';
import type { CommandName } from '../src/server/workflow/comment-parser/commands.js';
import { layoutOptions } from '../src/server/workflow/pr/result-comment.js';

interface Output {
  output: string;
  rePlanCmd: string;
}

interface Case {
  name: string;
  command: ResultCommand;
  subCommand?: string;
  verbose?: boolean;
  settings: {
    disableApplyAll?: boolean;
    disableApply?: boolean;
    disableRepoLocking?: boolean;
    disableMarkdownFolding?: boolean;
    hideUnchangedPlanComments?: boolean;
    enableDiffMarkdownFormat?: boolean;
    executableName?: string;
  };
  plansDeleted?: boolean;
  commandError?: string;
  commandFailure?: string;
  results: Array<{
    dir: string;
    workspace: string;
    projectName?: string;
    planSuccess?: { terraformOutput: string; lockUrl: string; rePlanCmd: string; applyCmd: string; mergedAgain?: boolean };
    applySuccess?: string;
    versionSuccess?: string;
    importSuccess?: Output;
    stateRmSuccess?: Output;
    error?: string;
    failure?: string;
  }>;
  log: string;
  expected: string;
}

const cases = JSON.parse(readFileSync(new URL('./fixtures/atlantis-v0.47/markdown-renderer.json', import.meta.url), 'utf8')) as Case[];

function view(r: Case['results'][number]): ProjectResultView {
  const base = { dir: r.dir, workspace: r.workspace, ...(r.projectName ? { projectName: r.projectName } : {}) };
  if (r.error !== undefined) return { ...base, outcome: { type: 'error', error: r.error } };
  if (r.failure !== undefined) return { ...base, outcome: { type: 'failure', reason: r.failure } };
  const p = r.planSuccess;
  if (p) {
    return {
      ...base,
      outcome: {
        type: 'success',
        output: p.terraformOutput,
        applyCmd: p.applyCmd,
        replanCmd: p.rePlanCmd,
        lockUrl: p.lockUrl,
        ...(p.mergedAgain ? { mergedAgain: true } : {}),
      },
    };
  }
  const o = r.importSuccess ?? r.stateRmSuccess;
  if (o) return { ...base, outcome: { type: 'success', output: o.output, replanCmd: o.rePlanCmd } };
  return { ...base, outcome: { type: 'success', output: r.applySuccess ?? r.versionSuccess ?? '' } };
}

function render(c: Case): string {
  const logOpts = { verbose: c.verbose === true, log: c.log };
  if (c.commandError !== undefined) return renderCommandError(c.command, c.commandError, logOpts);
  if (c.commandFailure !== undefined) return renderCommandFailure(c.command, c.commandFailure, logOpts);
  return renderResults({
    command: c.command,
    ...(c.subCommand ? { subName: c.subCommand } : {}),
    results: c.results.map(view),
    ...c.settings,
    // The recorder wrote Go's zero value for an unset name; Atlantis's default applies.
    executableName: c.settings.executableName || 'atlantis',
    plansDeleted: c.plansDeleted === true,
    ...logOpts,
  });
}

test('the fixture covers every command and layout', () => {
  assert.ok(cases.length >= 50, String(cases.length));
  for (const cmd of ['plan', 'apply', 'version', 'import', 'state'])
    assert.ok(
      cases.some((c) => c.command === cmd),
      cmd,
    );
  for (const c of cases) assert.ok(c.expected.length > 0, c.name);
});

for (const c of cases) {
  test(`as Atlantis: ${c.name}`, () => {
    assert.equal(render(c), c.expected);
  });
}

test('the server settings reach the layout as Atlantis passes them to its renderer', () => {
  const base = {
    executableName: 'infra',
    disableApplyAll: true,
    allowCommands: ['version', 'plan', 'unlock'] as CommandName[],
    disableMarkdownFolding: true,
    hideUnchangedPlanComments: true,
    enableDiffMarkdownFormat: true,
  };
  assert.deepEqual(layoutOptions(base), {
    executableName: 'infra',
    disableApplyAll: true,
    // apply not allowed (or --disable-apply): no apply hints, as Atlantis.
    disableApply: true,
    disableMarkdownFolding: true,
    hideUnchangedPlanComments: true,
    enableDiffMarkdownFormat: true,
  });
  assert.equal(layoutOptions({ ...base, allowCommands: ['plan', 'apply'] }).disableApply, false);
});
