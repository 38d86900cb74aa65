// --write-git-creds: git credentials for the modules terraform fetches over HTTPS (a
// `git::https://github.com/org/private-module.git` source), as Atlantis v0.47 gives them
// (server/events/vcs/common/git_cred_writer.go): a git-credentials line
// `https://<gh-user>:<token>@<gh-hostname>`, git's `store` helper reading it, and ssh URLs of
// that host rewritten to https.
//
// Atlantis writes ~/.git-credentials and the global git config for good; PR code (providers,
// external data sources, local-exec) could read them at any time. Here the file exists only
// while a `terraform init` runs (the only step that fetches modules, and one that runs no PR
// code), in a private dir of the data dir outside every working copy (extra args cannot name
// it: -var-file and friends must stay inside the checkout), and git is pointed at it through
// GIT_CONFIG_* variables of that init only. The server's own git never reads it.
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** Pure: the credentials line, URL-encoded as git's store helper reads it. */
export function credentialLine(user: string, token: string, hostname: string): string {
  return `https://${encodeURIComponent(user)}:${encodeURIComponent(token)}@${hostname}\n`;
}

/** Pure: the variables that make one git process (and terraform's git children) use the file. */
export function gitCredsEnv(file: string, user: string, hostname: string): Record<string, string> {
  return {
    GIT_CONFIG_COUNT: '2',
    GIT_CONFIG_KEY_0: 'credential.helper',
    GIT_CONFIG_VALUE_0: `store --file=${file}`,
    // As Atlantis: ssh sources of the host go over https with these credentials.
    GIT_CONFIG_KEY_1: `url.https://${encodeURIComponent(user)}@${hostname}.insteadOf`,
    GIT_CONFIG_VALUE_1: `ssh://git@${hostname}`,
  };
}

export interface GitCredsOptions {
  /** A private dir of its own (0700), e.g. <data-dir>/git-creds. */
  dir: string;
  user: string;
  hostname: string;
  /** Read at each use: a rotated --gh-token-file is used by the next init. */
  token: () => string;
}

export class GitCredsForInit {
  private users = 0;
  private readonly file: string;

  constructor(private readonly o: GitCredsOptions) {
    this.file = path.join(o.dir, 'credentials');
    // Left over by a crash during an init: nothing may find it later.
    rmSync(this.file, { force: true });
  }

  /** Runs `fn` with the credentials file in place and the env that points git at it. */
  async during<T>(fn: (env: Record<string, string>) => Promise<T>): Promise<T> {
    mkdirSync(this.o.dir, { recursive: true, mode: 0o700 });
    // Written aside and renamed: a concurrent init never reads half a file.
    const tmp = `${this.file}.${process.pid}.${this.users}`;
    writeFileSync(tmp, credentialLine(this.o.user, this.o.token(), this.o.hostname), { mode: 0o600 });
    renameSync(tmp, this.file);
    this.users++;
    try {
      return await fn(gitCredsEnv(this.file, this.o.user, this.o.hostname));
    } finally {
      // The last init to finish removes it; parallel inits share one file.
      if (--this.users === 0) rmSync(this.file, { force: true });
    }
  }
}
