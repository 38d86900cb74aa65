// Real git repositories on disk for tests: a bare "remote" (what GitHub would host) with a
// base branch and PR branches holding tiny terraform configs (terraform_data + local-exec,
// no providers, so `terraform init` works offline), cloned over file:// URLs. PR heads are
// also published as refs/pull/<n>/head, as GitHub does.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';

const GIT_ENV = {
  GIT_AUTHOR_NAME: 'Test Author',
  GIT_AUTHOR_EMAIL: 'author@example.com',
  GIT_COMMITTER_NAME: 'Test Author',
  GIT_COMMITTER_EMAIL: 'author@example.com',
  GIT_CONFIG_NOSYSTEM: '1',
  // Ignore the developer's ~/.gitconfig (signing, hooks, default branch...).
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_TERMINAL_PROMPT: '0',
};

export async function git(cwd: string, args: string[], env: Record<string, string> = {}): Promise<string> {
  const r = await execa('git', args, { cwd, env: { ...GIT_ENV, ...env }, extendEnv: true });
  return r.stdout.trim();
}

/** File contents by repo-relative path; null deletes the file; `{ symlink }` commits a symbolic link. */
export type FileChanges = Record<string, string | null | { symlink: string }>;

export interface TerraformConfigOptions {
  /** Goes into the resource input, so that changing it makes a plan with changes. */
  marker?: string;
  /** The apply's local-exec sleeps this long (for drain tests). */
  sleepSeconds?: number;
  /** The apply's local-exec writes the marker to this absolute path (to observe the apply). */
  touchFile?: string;
}

/** A tiny root module: one terraform_data resource whose apply runs a local-exec. */
export function terraformConfig(opts: TerraformConfigOptions = {}): string {
  const marker = opts.marker ?? 'v1';
  const sleep = opts.sleepSeconds ?? 0;
  const touch = opts.touchFile ? `; printf '%s' '${marker}' > '${opts.touchFile}'` : '';
  return `terraform {
  required_version = ">= 1.4"
}

resource "terraform_data" "marker" {
  input = "${marker}"

  provisioner "local-exec" {
    command = "sleep ${sleep}${touch}; echo applied ${marker}"
  }
}

output "marker" {
  value = terraform_data.marker.output
}
`;
}

export interface TestRepo {
  /** `owner/name` */
  fullName: string;
  bareDir: string;
  /** file:// URL of the bare repo. */
  cloneUrl: string;
  baseBranch: string;
  baseSha: string;
  /** Creates `branch` from the base branch with `files` changed; returns its head SHA. */
  createBranch(branch: string, files: FileChanges, message?: string): Promise<string>;
  /** Adds a commit on an existing branch; returns the new head SHA. */
  commit(branch: string, files: FileChanges, message?: string): Promise<string>;
  headSha(branch: string): Promise<string>;
  /** Files that differ between the base branch and `branch` (from their merge base). */
  changedFiles(branch: string): Promise<string[]>;
  /** Points refs/pull/<n>/head at the branch head, as GitHub does for a PR. */
  publishPull(number: number, branch: string): Promise<string>;
  /** Merges `branch` into the base branch (fast-forward not required). */
  merge(branch: string): Promise<string>;
}

export interface CreateRepoOptions {
  fullName?: string;
  baseBranch?: string;
  /** Base-branch content; defaults to two projects `app1` and `app2` plus a README. */
  files?: Record<string, string>;
  /** Where to create it; defaults to a fresh temp dir. */
  root?: string;
  /** Author and committer date of every commit (ISO 8601): the same changes then give the same SHAs in every run. */
  commitDate?: string;
}

function writeFiles(dir: string, files: FileChanges): void {
  for (const [rel, content] of Object.entries(files)) {
    const f = path.join(dir, rel);
    if (content === null) {
      fs.rmSync(f, { force: true });
      continue;
    }
    fs.mkdirSync(path.dirname(f), { recursive: true });
    if (typeof content === 'string') fs.writeFileSync(f, content);
    else {
      fs.rmSync(f, { force: true });
      fs.symlinkSync(content.symlink, f);
    }
  }
}

/** Creates a bare remote with a base branch, and returns helpers to add PR branches. */
export async function createTestRepo(opts: CreateRepoOptions = {}): Promise<TestRepo> {
  const fullName = opts.fullName ?? 'acme/infra';
  const baseBranch = opts.baseBranch ?? 'main';
  const root = opts.root ?? fs.mkdtempSync(path.join(os.tmpdir(), 'gitrepo-'));
  const bareDir = path.join(root, 'remote', `${fullName}.git`);
  const work = path.join(root, 'author-work');
  const dates: Record<string, string> = opts.commitDate ? { GIT_AUTHOR_DATE: opts.commitDate, GIT_COMMITTER_DATE: opts.commitDate } : {};
  fs.mkdirSync(bareDir, { recursive: true });
  await git(bareDir, ['init', '--bare', '-q', '-b', baseBranch]);
  fs.mkdirSync(work, { recursive: true });
  await git(work, ['init', '-q', '-b', baseBranch]);
  await git(work, ['remote', 'add', 'origin', bareDir]);
  writeFiles(
    work,
    opts.files ?? {
      'README.md': '# infra\n',
      'app1/main.tf': terraformConfig({ marker: 'app1-v1' }),
      'app2/main.tf': terraformConfig({ marker: 'app2-v1' }),
    },
  );
  await git(work, ['add', '-A']);
  await git(work, ['commit', '-q', '-m', 'Initial commit'], dates);
  await git(work, ['push', '-q', 'origin', baseBranch]);
  const baseSha = await git(work, ['rev-parse', 'HEAD']);

  const commitOn = async (branch: string, files: FileChanges, message: string): Promise<string> => {
    await git(work, ['checkout', '-q', branch]);
    writeFiles(work, files);
    await git(work, ['add', '-A']);
    await git(work, ['commit', '-q', '--allow-empty', '-m', message], dates);
    await git(work, ['push', '-q', '-f', 'origin', branch]);
    return git(work, ['rev-parse', 'HEAD']);
  };

  const repo: TestRepo = {
    fullName,
    bareDir,
    cloneUrl: 'file://' + bareDir,
    baseBranch,
    baseSha,
    async createBranch(branch, files, message = `Change on ${branch}`) {
      await git(work, ['checkout', '-q', baseBranch]);
      await git(work, ['checkout', '-q', '-B', branch]);
      return commitOn(branch, files, message);
    },
    async commit(branch, files, message = `Another change on ${branch}`) {
      return commitOn(branch, files, message);
    },
    async headSha(branch) {
      return git(bareDir, ['rev-parse', `refs/heads/${branch}`]);
    },
    async changedFiles(branch) {
      const out = await git(bareDir, ['diff', '--name-only', `${baseBranch}...${branch}`]);
      return out === '' ? [] : out.split('\n');
    },
    async publishPull(number, branch) {
      const sha = await repo.headSha(branch);
      await git(bareDir, ['update-ref', `refs/pull/${number}/head`, sha]);
      return sha;
    },
    async merge(branch) {
      await git(work, ['checkout', '-q', baseBranch]);
      await git(work, ['pull', '-q', 'origin', baseBranch]);
      await git(work, ['merge', '-q', '--no-ff', '-m', `Merge ${branch}`, branch], dates);
      await git(work, ['push', '-q', 'origin', baseBranch]);
      return git(work, ['rev-parse', 'HEAD']);
    },
  };
  return repo;
}

/** A terraform project whose apply runs until `gate` exists (plan does not run provisioners). */
export function gatedConfig(marker: string, gate: string): string {
  return `terraform {
  required_version = ">= 1.4"
}

resource "terraform_data" "marker" {
  input = "${marker}"

  provisioner "local-exec" {
    command = "i=0; while [ ! -e '${gate}' ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i+1)); done; echo applied ${marker}"
  }
}

output "marker" {
  value = terraform_data.marker.output
}
`;
}
