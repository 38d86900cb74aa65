// Moving from Atlantis with its locks, end to end through the real server process: a data dir
// that holds an atlantis.db written by a real Atlantis v0.47 (test/fixtures/atlantis-db/), on
// the embedded store and on a real redis-server shared by two replicas, and the one-shot
// `atlantis-operator migrate atlantis-db`. The locks are listed on the web page, another PR's
// plan is refused with Atlantis's lock text, each PR that held locks is told to plan again,
// an apply without a plan says to plan again, a restart (or a second replica) imports nothing,
// and a damaged file is an error in the log while the server starts without it.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { CLI, type CliProcess } from './support/cli.js';
import { childList } from './support/children.js';
import { terraformConfig } from './support/git-repos.js';
import { type RedisServer, replicaArgs, sharedStateKeyFile, startRedisServer } from './support/redis-server.js';
import { waitFor } from './support/server.js';
import { type WorkflowEnv, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';

const FIXTURES = fileURLToPath(new URL('./fixtures/atlantis-db/', import.meta.url));
const SMALL = path.join(FIXTURES, 'atlantis-locks.db');

let env: WorkflowEnv;
let redis: RedisServer;
const procs = childList();

before(async () => {
  env = await createWorkflowEnv();
  // The pull requests of the fixture: #1 as a real branch (its commands check it out), #4 for its comment.
  const headSha = await env.repo.createBranch('change-both', {
    'dir1/main.tf': terraformConfig({ marker: 'dir1-v2' }),
    'dir2/main.tf': terraformConfig({ marker: 'dir2-v2' }),
  });
  await env.repo.publishPull(1, 'change-both');
  env.gh.addPull('acme/infra', {
    number: 1,
    headSha,
    headRef: 'change-both',
    baseRef: env.repo.baseBranch,
    files: [{ filename: 'dir1/main.tf' }, { filename: 'dir2/main.tf' }],
  });
  env.gh.addRepo('acme/named');
  env.gh.addPull('acme/named', { number: 4, headRef: 'alpha-beta', user: 'bob' });
  redis = await startRedisServer();
});
after(async () => {
  procs.killAll();
  await redis?.cleanup();
  await env.close();
});

/** A data dir holding `db` as Atlantis's atlantis.db. */
function dataDirWith(db: Buffer | string): string {
  const dir = tempDataDir();
  if (typeof db === 'string') copyFileSync(db, path.join(dir, 'atlantis.db'));
  else writeFileSync(path.join(dir, 'atlantis.db'), db);
  return dir;
}

async function start(dataDir: string, host: string, extra: string[] = []): Promise<{ p: CliProcess; url: string }> {
  const s = await startWorkflowServer(env, dataDir, host, extra);
  procs.push(s.p);
  return s;
}

async function stop(p: CliProcess): Promise<void> {
  p.child.kill('SIGTERM');
  await p.exited;
}

const logLines = (p: CliProcess, msg: RegExp): string[] =>
  p
    .output()
    .split('\n')
    .filter((l) => msg.test(l));
const IMPORTED = /"msg":"Imported Atlantis's locks from atlantis.db/;
const ALREADY = /"msg":"Atlantis's atlantis.db was imported before: not imported again"/;
const page = async (url: string): Promise<string> => (await fetch(`${url}/`)).text();
const planAgain = (repo: string, pull: number) => env.gh.comments(repo, pull).filter((c) => /^\*\*Plans Not Carried Over\*\*/.test(c.body));

describe('a server started on a data dir that holds Atlantis’s atlantis.db (embedded store)', () => {
  let server: CliProcess;
  let url: string;
  const dataDir = dataDirWith(SMALL);

  it('imports the locks once, says so in its log, and lists them on the web page', async () => {
    ({ p: server, url } = await start(dataDir, '127.33.1.1'));
    const line = logLines(server, IMPORTED)[0] ?? '';
    assert.match(line, /"locks":5,"pullStatuses":4,"applyLock":false,"pullRequestsToTell":2/);
    const html = await page(url);
    for (const [dir, ws] of [
      ['dir1', 'default'],
      ['dir2', 'default'],
      ['dir2', 'staging'],
    ])
      assert.match(html, new RegExp(`<td>${dir}</td><td>${ws}</td><td>#1 by dev`));
    assert.match(html, /<td>dir1<\/td><td>default<\/td><td>#4 by bob/);
  });

  it('tells each pull request that held locks to plan again, once', async () => {
    await waitFor('the plan-again comments', () => planAgain('acme/infra', 1).length === 1 && planAgain('acme/named', 4).length === 1);
    assert.match(planAgain('acme/infra', 1)[0]?.body ?? '', /- dir: `dir2` workspace: `staging`\n/);
    assert.match(planAgain('acme/named', 4)[0]?.body ?? '', /- dir: `dir1` workspace: `default` project: `alpha`/);
  });

  it("refuses another pull request's plan on an imported lock with Atlantis's lock text", async () => {
    await env.openPull(url, 9, 'other-dirs', {
      'dir1/main.tf': terraformConfig({ marker: 'dir1-from-9' }),
      'dir2/main.tf': terraformConfig({ marker: 'dir2-from-9' }),
    });
    const c = await env.waitForComment(9, /^Ran Plan for 2 projects/);
    assert.match(
      c.body,
      /\*\*Plan Failed\*\*: This project is currently locked by an unapplied plan from pull #1\. To continue, delete the lock from #1 or apply that plan and merge the pull request\./,
    );
  });

  it('an apply on the pull request that holds the lock, without a plan, says to plan again', async () => {
    let n = env.commentsOn(1).length;
    await env.comment(url, 1, 'atlantis apply -d dir1');
    const c = await env.waitForComment(1, /^Ran Apply for dir: `dir1`/, { after: n });
    assert.match(c.body, /no plan found at path "dir1" and workspace "default"–did you run plan\?/);
    n = env.commentsOn(1).length;
    await env.comment(url, 1, 'atlantis apply');
    const generic = await env.waitForComment(1, /^\*\*Apply Error\*\*/, { after: n });
    // The apply -d above recorded dir1's failure for this head: Atlantis's words for a missing plan file.
    assert.match(
      generic.body,
      /plan file is missing for dir "dir1" workspace "default" project "" with status "apply_errored"; run `atlantis plan`/,
    );
  });

  it('a restart imports nothing again and tells no one again', async () => {
    await stop(server);
    ({ p: server, url } = await start(dataDir, '127.33.1.1'));
    assert.equal(logLines(server, ALREADY).length, 1);
    assert.equal(logLines(server, IMPORTED).length, 0);
    assert.match(await page(url), /<td>dir2<\/td><td>staging<\/td><td>#1 by dev/);
    await stop(server);
    assert.equal(planAgain('acme/infra', 1).length, 1);
    assert.equal(readFileSync(path.join(dataDir, 'atlantis.db')).equals(readFileSync(SMALL)), true, 'the file is only read');
  });
});

describe('two replicas on one Redis, each data dir holding the atlantis.db', () => {
  it('exactly one imports; both list the locks; another PR is refused on either', async () => {
    const [a, b] = await Promise.all([
      start(dataDirWith(SMALL), '127.33.2.1', replicaArgs(redis, 'replica-a')),
      start(dataDirWith(SMALL), '127.33.2.2', replicaArgs(redis, 'replica-b')),
    ]);
    const imported = [a, b].filter((s) => logLines(s.p, IMPORTED).length === 1);
    const already = [a, b].filter((s) => logLines(s.p, ALREADY).length === 1);
    assert.equal(imported.length, 1, 'one replica imported');
    assert.equal(already.length, 1, 'the other found the marker');
    for (const s of [a, b]) assert.match(await page(s.url), /<td>dir2<\/td><td>staging<\/td><td>#1 by dev/);
    const n = env.commentsOn(9).length;
    await env.comment(b.url, 9, 'atlantis plan -d dir2 -w staging');
    const c = await env.waitForComment(9, /^Ran Plan for dir: `dir2` workspace: `staging`/, { after: n });
    assert.match(c.body, /This project is currently locked by an unapplied plan from pull #1\./);
    await Promise.all([stop(a.p), stop(b.p)]);
  });
});

describe('a damaged or truncated atlantis.db', () => {
  it('is an error in the log, nothing is imported, and the server starts and works', async () => {
    const cut = readFileSync(SMALL).subarray(0, 3 * 4096 + 100);
    const { p, url } = await start(dataDirWith(cut), '127.33.3.1');
    const err = logLines(p, /"msg":"Atlantis's atlantis.db could not be imported: nothing was imported/);
    assert.equal(err.length, 1);
    assert.match(err[0] ?? '', /"level":"error".*truncated/);
    assert.doesNotMatch(await page(url), /#1 by dev/);
    assert.equal((await fetch(`${url}/healthz`)).status, 200);
    await stop(p);
  });
});

describe('atlantis-operator migrate atlantis-db', () => {
  const run = (...args: string[]) =>
    spawnSync(process.execPath, [CLI, 'migrate', 'atlantis-db', ...args], { encoding: 'utf8', env: { PATH: process.env.PATH } });

  it('imports into the store of --data-dir once, and refuses a damaged file with nothing imported', () => {
    const dataDir = tempDataDir();
    const bad = path.join(dataDir, 'bad.db');
    writeFileSync(bad, readFileSync(SMALL).subarray(0, 5000));
    const refused = run(bad, '--data-dir', dataDir);
    assert.equal(refused.status, 1);
    assert.match(refused.stderr, /bad\.db was not imported \(nothing was\): truncated/);
    const first = run(SMALL, '--data-dir', dataDir);
    assert.equal(first.status, 0, first.stderr);
    assert.match(first.stdout, /Imported into the embedded store in .* from .*atlantis-locks\.db/);
    assert.match(first.stdout, /5 locks, 4 pull request plan statuses, global apply lock: off/);
    assert.match(first.stdout, /2 pull requests will be asked to plan again when the server starts/);
    const second = run(SMALL, '--data-dir', dataDir);
    assert.equal(second.status, 0);
    assert.match(second.stdout, /^Not imported: Atlantis's atlantis.db was imported into .* before \(.*, by migrate command, from /);
  });

  it('on Redis (the server flags and ATLANTIS_* env say where)', () => {
    const args = [
      '--locking-db-type',
      'redis',
      '--redis-host',
      redis.host,
      '--redis-port',
      String(redis.port),
      '--redis-db',
      '5',
      '--shared-state-key-file',
      sharedStateKeyFile(),
    ];
    const r = run(SMALL, '--data-dir', tempDataDir(), ...args);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^Imported into Redis from /);
  });
});
