// A validated server config from flags and env, as the CLI builds it, for table tests of
// flags: the required flags are given, with a data dir of its own under the temp dir.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseFlags } from '../../src/config/flags.js';
import { buildServerConfig, SERVER_FLAGS, type ServerConfig } from '../../src/server/config.js';
import type { GitHubSettings } from '../../src/server/vcs/github/settings.js';

/** The flags the server cannot start without, and the data dir they name. */
export function requiredFlags(prefix = 'ato-flags-'): { flags: string[]; dataDir: string } {
  const dataDir = mkdtempSync(path.join(tmpdir(), prefix));
  const flags = [
    '--repo-allowlist',
    'github.com/acme/*',
    '--gh-user',
    'bot',
    '--gh-token',
    'tok',
    '--gh-webhook-secret',
    's3cret',
    '--data-dir',
    dataDir,
  ];
  return { flags, dataDir };
}

/** `config(argv, env)`: the required flags, then argv, parsed against SERVER_FLAGS and validated. */
export function configWithRequiredFlags(prefix?: string): (argv: string[], env?: NodeJS.ProcessEnv) => ServerConfig {
  const { flags } = requiredFlags(prefix);
  return (argv, env = {}) => buildServerConfig(parseFlags([...flags, ...argv], SERVER_FLAGS, env).values);
}

/** The config's GitHub settings (vcs/github/settings.ts); fails when the config names another host. */
export function githubOf(c: ServerConfig): GitHubSettings {
  assert.equal(c.vcs.kind, 'github');
  return c.vcs.github;
}
