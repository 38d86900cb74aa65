// --checkout-strategy branch|merge and --checkout-depth, as Atlantis v0.47 (server/events/
// working_dir.go): branch clones the head branch one commit deep; merge clones the base
// branch (--depth N when set), fetches the head from a `source` remote, merges it with
// --no-ff as atlantis, fetches the whole history when the depth misses the merge base, and
// merges again before a plan when the base branch moved on. Real git on file:// remotes.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { nullLogger } from '../src/log.js';
import { ProcessHost, type SpawnSpec } from '../src/server/terraform/process-host.js';
import {
  type CheckoutOptions,
  type CheckoutRequest,
  WorkingCopies,
  cloneArgs,
  hasDiverged,
  headFetchArgs,
  isAtTarget,
} from '../src/server/workflow/checkout/working-copy.js';
import { createTestRepo } from './support/git-repos.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';

const git = (cwd: string, ...args: string[]): string =>
  execFileSync('git', ['-C', cwd, ...args])
    .toString()
    .trim();
const dataRoot = mkdtempSync(path.join(tmpdir(), 'checkout-strategy-'));
after(() => rmSync(dataRoot, { recursive: true, force: true }));

const req = (over: Partial<CheckoutRequest> = {}): CheckoutRequest => ({
  repo: 'acme/infra',
  pull: 1,
  workspace: 'default',
  cloneUrl: 'https://x-access-token:secret@github.com/fork/infra.git',
  baseCloneUrl: 'https://github.com/acme/infra.git',
  headRef: 'feature',
  headSha: 'a'.repeat(40),
  baseRef: 'main',
  ...over,
});

describe('checkout decisions (pure)', () => {
  const branch: CheckoutOptions = { strategy: 'branch', depth: 0 };
  const merge: CheckoutOptions = { strategy: 'merge', depth: 0 };
  const merge5: CheckoutOptions = { strategy: 'merge', depth: 5 };
  it('clones as Atlantis: the head branch one deep, or the base branch (at --checkout-depth)', () => {
    const rows: Array<[CheckoutOptions, string[]]> = [
      [
        branch,
        ['clone', '--quiet', '--no-tags', '--depth=1', '--branch', 'feature', '--single-branch', 'https://github.com/fork/infra.git', '/d'],
      ],
      [merge, ['clone', '--quiet', '--no-tags', '--branch', 'main', '--single-branch', 'https://github.com/acme/infra.git', '/d']],
      [
        merge5,
        ['clone', '--quiet', '--no-tags', '--depth', '5', '--branch', 'main', '--single-branch', 'https://github.com/acme/infra.git', '/d'],
      ],
      // --checkout-depth only matters to the merge strategy, as in Atlantis
      [{ strategy: 'branch', depth: 5 }, cloneArgs(branch, req(), '/d')],
    ];
    for (const [o, want] of rows) assert.deepEqual(cloneArgs(o, req(), '/d'), want, `${o.strategy}/${o.depth}`);
    assert.throws(() => cloneArgs(merge, req({ baseRef: undefined }), '/d'), /base branch/);
  });
  it('fetches the head from the source remote at the depth', () => {
    assert.deepEqual(headFetchArgs(merge, '+refs/heads/feature:'), ['fetch', '--quiet', '--no-tags', 'source', '+refs/heads/feature:']);
    assert.deepEqual(headFetchArgs(merge5, 'abc'), ['fetch', '--quiet', '--no-tags', '--depth', '5', 'source', 'abc']);
  });
  it('decides whether a working copy can be reused', () => {
    const sha = 'a'.repeat(40);
    const other = 'b'.repeat(40);
    const rows: Array<[CheckoutOptions, Parameters<typeof isAtTarget>[2], boolean]> = [
      [branch, { head: sha }, true],
      [branch, { head: other }, false],
      [branch, {}, false],
      [merge, { secondParent: sha, hasBaseRemoteRef: true }, true],
      [merge, { secondParent: sha, hasBaseRemoteRef: false }, false], // retargeted to another base
      [merge, { secondParent: other, hasBaseRemoteRef: true }, false],
      [merge, { head: sha, hasBaseRemoteRef: true }, false], // a branch checkout (no merge commit)
    ];
    for (const [o, seen, want] of rows) assert.equal(isAtTarget(o, req(), seen), want, JSON.stringify([o.strategy, seen]));
  });
  it('sees divergence only when both sides have commits', () => {
    for (const [count, want] of [
      ['1\t0', false],
      ['0\t3', false],
      ['1\t2', true],
      ['0\t0', false],
      ['', false],
    ] as const)
      assert.equal(hasDiverged(count), want, count);
  });
});

function recordingHost(): { host: ProcessHost; specs: SpawnSpec[] } {
  const specs: SpawnSpec[] = [];
  const host = new ProcessHost({ logger: nullLogger() });
  const spawnReal = host.spawn.bind(host);
  host.spawn = (spec, listeners) => {
    specs.push(spec);
    return spawnReal(spec, listeners);
  };
  return { host, specs };
}

describe('checkout strategies with real git', { timeout: 120_000 }, () => {
  it('branch: a one-commit-deep clone of the head; reused while the head is unchanged', async () => {
    const repo = await createTestRepo({ fullName: 'acme/branch' });
    const headSha = await repo.createBranch('feature', { 'app1/extra.tf': '# pr\n' });
    await repo.commit('feature', { 'app1/extra.tf': '# pr 2\n' });
    await repo.commit('main', { 'base-only.txt': 'base\n' });
    const newest = await repo.headSha('feature');
    const { host, specs } = recordingHost();
    const copies = new WorkingCopies(path.join(dataRoot, 'b'), () => '', nullLogger(), host, { strategy: 'branch', depth: 0 });
    const r = req({ repo: repo.fullName, cloneUrl: repo.cloneUrl, baseCloneUrl: repo.cloneUrl, headSha: newest });
    const wc = await copies.checkout(r);
    assert.equal(git(wc, 'rev-parse', 'HEAD'), newest);
    assert.equal(git(wc, 'rev-parse', '--is-shallow-repository'), 'true');
    assert.equal(git(wc, 'rev-list', '--count', 'HEAD'), '1');
    assert.ok(!existsSync(path.join(wc, 'base-only.txt')), 'the base branch is not merged in');
    const clones = specs.filter((s) => s.args.includes('clone')).length;
    await copies.checkout(r);
    assert.equal(specs.filter((s) => s.args.includes('clone')).length, clones, 'reused, not cloned again');
    // An event about an older commit than the branch's: that exact commit.
    const older = await copies.checkout({ ...r, workspace: 'older', headSha });
    assert.equal(git(older, 'rev-parse', 'HEAD'), headSha);
    host.close();
  });

  it('merge: the head merged into the base branch as atlantis, HEAD^2 the head; reused', async () => {
    const repo = await createTestRepo({ fullName: 'acme/merge' });
    const headSha = await repo.createBranch('feature', { 'app1/extra.tf': '# pr\n' });
    const baseSha = await repo.commit('main', { 'base-only.txt': 'base\n' }, 'base moves on');
    const { host, specs } = recordingHost();
    const copies = new WorkingCopies(path.join(dataRoot, 'm'), () => '', nullLogger(), host, { strategy: 'merge', depth: 0 });
    const r = req({ repo: repo.fullName, cloneUrl: repo.cloneUrl, baseCloneUrl: repo.cloneUrl, headSha });
    const wc = await copies.checkout(r);
    assert.equal(git(wc, 'rev-parse', 'HEAD^1'), baseSha);
    assert.equal(git(wc, 'rev-parse', 'HEAD^2'), headSha);
    // Atlantis's names (the e-mail is git's configured one, else Atlantis's EMAIL)
    assert.equal(git(wc, 'log', '-1', '--format=%an|%cn|%s'), 'atlantis|atlantis|atlantis-merge');
    assert.equal(readFileSync(path.join(wc, 'base-only.txt'), 'utf8'), 'base\n');
    assert.equal(readFileSync(path.join(wc, 'app1/extra.tf'), 'utf8'), '# pr\n');
    assert.equal(git(wc, 'remote', 'get-url', 'source'), repo.cloneUrl);
    assert.equal(git(wc, 'rev-parse', '--is-shallow-repository'), 'false', 'depth 0: the whole history');
    const clones = specs.filter((s) => s.args.includes('clone')).length;
    await copies.checkout(r);
    assert.equal(specs.filter((s) => s.args.includes('clone')).length, clones, 'reused, not cloned again');
    // A new head commit: a new merge of it.
    const newHead = await repo.commit('feature', { 'app1/extra.tf': '# pr 2\n' });
    const wc2 = await copies.checkout({ ...r, headSha: newHead });
    assert.equal(git(wc2, 'rev-parse', 'HEAD^2'), newHead);
    assert.equal(readFileSync(path.join(wc2, 'app1/extra.tf'), 'utf8'), '# pr 2\n');
    host.close();
  });

  it('merge with --checkout-depth: shallow, and the whole history when the depth misses the merge base', async () => {
    const repo = await createTestRepo({ fullName: 'acme/deep' });
    for (let i = 0; i < 3; i++) await repo.commit('main', { [`old${i}.txt`]: `${i}\n` }, `old ${i}`);
    const headSha = await repo.createBranch('feature', { 'app1/extra.tf': '# pr\n' });
    for (let i = 0; i < 3; i++) await repo.commit('main', { [`base${i}.txt`]: `${i}\n` }, `base ${i}`);
    const { host, specs } = recordingHost();
    const shallow = new WorkingCopies(path.join(dataRoot, 'd1'), () => '', nullLogger(), host, { strategy: 'merge', depth: 5 });
    const r = req({ repo: repo.fullName, cloneUrl: repo.cloneUrl, baseCloneUrl: repo.cloneUrl, headSha });
    const wc = await shallow.checkout(r);
    assert.equal(git(wc, 'rev-parse', '--is-shallow-repository'), 'true', 'depth 5 reaches the merge base: still shallow');
    assert.equal(git(wc, 'rev-parse', 'HEAD^2'), headSha);
    assert.ok(specs.some((s) => s.args.includes('--depth') && s.args.includes('5') && s.args.includes('clone')));
    assert.ok(!specs.some((s) => s.args.includes('--unshallow')));

    const tooShallow = new WorkingCopies(path.join(dataRoot, 'd2'), () => '', nullLogger(), host, { strategy: 'merge', depth: 1 });
    const wc1 = await tooShallow.checkout(r);
    assert.ok(
      specs.some((s) => s.args.includes('--unshallow')),
      'depth 1 misses the merge base: unshallowed',
    );
    assert.equal(git(wc1, 'rev-parse', 'HEAD^2'), headSha);
    assert.equal(readFileSync(path.join(wc1, 'base2.txt'), 'utf8'), '2\n');
    host.close();
  });

  it('merge: merges again when the base branch moved on, and only then', async () => {
    const repo = await createTestRepo({ fullName: 'acme/again' });
    const headSha = await repo.createBranch('feature', { 'app1/extra.tf': '# pr\n' });
    const { host } = recordingHost();
    const copies = new WorkingCopies(path.join(dataRoot, 'a'), () => '', nullLogger(), host, { strategy: 'merge', depth: 0 });
    const r = req({ repo: repo.fullName, cloneUrl: repo.cloneUrl, baseCloneUrl: repo.cloneUrl, headSha });
    assert.equal(await copies.mergeAgain(r), false, 'not cloned yet: its checkout will merge the newest base');
    const wc = await copies.checkout(r);
    assert.equal(await copies.mergeAgain(r), false, 'base unchanged: nothing to do');
    const newBase = await repo.commit('main', { 'later.txt': 'later\n' }, 'base moves on later');
    assert.equal(await copies.mergeAgain(r), true);
    assert.equal(git(wc, 'rev-parse', 'HEAD^1'), newBase);
    assert.equal(git(wc, 'rev-parse', 'HEAD^2'), headSha);
    assert.equal(readFileSync(path.join(wc, 'later.txt'), 'utf8'), 'later\n');
    assert.equal(await copies.mergeAgain(r), false, 'merged: no divergence left');

    const branchCopies = new WorkingCopies(path.join(dataRoot, 'a2'), () => '', nullLogger(), host, { strategy: 'branch', depth: 0 });
    await branchCopies.checkout(r);
    await repo.commit('main', { 'later2.txt': 'x\n' });
    assert.equal(await branchCopies.mergeAgain(r), false, 'branch strategy never merges');
    host.close();
  });

  it("checks a working copy once per revision: again after a new head, a merge again, the PR's copies removed", async () => {
    const repo = await createTestRepo({ fullName: 'acme/verify' });
    const headSha = await repo.createBranch('feature', { 'app1/extra.tf': '# pr\n' });
    const { host } = recordingHost();
    const copies = new WorkingCopies(path.join(dataRoot, 'v'), () => '', nullLogger(), host, { strategy: 'merge', depth: 0 });
    const r = req({ repo: repo.fullName, cloneUrl: repo.cloneUrl, baseCloneUrl: repo.cloneUrl, headSha });
    const checked: string[] = [];
    const check = async (dir: string): Promise<void> => {
      checked.push(git(dir, 'rev-parse', 'HEAD'));
    };
    const wc = await copies.checkout(r);
    for (let i = 0; i < 3; i++) await copies.verifyOnce(await copies.checkout(r), check);
    assert.equal(checked.length, 1, 'an unchanged copy: checked once');
    // A check that fails is run again next time: a refused copy never counts as checked.
    const fresh = await copies.checkout({ ...r, workspace: 'other' });
    await assert.rejects(
      copies.verifyOnce(fresh, () => Promise.reject(new Error('escaping link'))),
      /escaping link/,
    );
    await assert.rejects(
      copies.verifyOnce(fresh, () => Promise.reject(new Error('escaping link'))),
      /escaping link/,
    );
    const newHead = await repo.commit('feature', { 'app1/extra.tf': '# pr 2\n' });
    await copies.verifyOnce(await copies.checkout({ ...r, headSha: newHead }), check);
    assert.equal(checked.length, 2, 'a new head: cloned again, checked again');
    await repo.commit('main', { 'later.txt': 'later\n' });
    assert.equal(await copies.mergeAgain({ ...r, headSha: newHead }), true);
    await copies.verifyOnce(wc, check);
    assert.equal(checked.length, 3, 'merged again: checked again');
    assert.equal(checked[2], git(wc, 'rev-parse', 'HEAD'));
    copies.remove(r.repo, r.pull);
    await copies.verifyOnce(await copies.checkout({ ...r, headSha: newHead }), check);
    await copies.verifyOnce(wc, check);
    assert.equal(checked.length, 4, 'removed and cloned again: checked again, once');
    host.close();
  });

  it("merge: a conflict fails the checkout with git's message", async () => {
    const repo = await createTestRepo({ fullName: 'acme/conflict' });
    const headSha = await repo.createBranch('feature', { 'README.md': 'pr\n' });
    await repo.commit('main', { 'README.md': 'base\n' });
    const { host } = recordingHost();
    const copies = new WorkingCopies(path.join(dataRoot, 'c'), () => '', nullLogger(), host, { strategy: 'merge', depth: 0 });
    await assert.rejects(
      copies.checkout(req({ repo: repo.fullName, cloneUrl: repo.cloneUrl, baseCloneUrl: repo.cloneUrl, headSha })),
      /git -c commit.gpgsign=false merge -q --no-ff -m atlantis-merge [0-9a-f]{40} .*failed: .*CONFLICT/s,
    );
    host.close();
  });
});
