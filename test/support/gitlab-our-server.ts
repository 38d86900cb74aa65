// The project's server as the GitLab differential starts it (compareGitlabWithAtlantis's
// `start`): the flags and env Atlantis had, plus --bind-address; with several replicas, each
// on its own address (`<net>.2`, `<net>.3`, ...) sharing one real redis-server, the steps'
// webhooks spread round-robin over them. A step is over when a server logs the end of a
// command (or, for steps that run none, when the notes and statuses came and the stand-in
// went quiet).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { StartServer } from './atlantis-gitlab-differential.js';
import type { GitLabStandin } from './gitlab-standin.js';
import { type CliProcess, startCli, waitForHttp } from './cli.js';
import { type RedisServer, replicaArgs, startRedisServer } from './redis-server.js';

function commandEnds(servers: CliProcess[]): number {
  return servers.reduce((n, s) => n + (s.output().match(/"msg":"Command (finished|failed)"/g)?.length ?? 0), 0);
}

/** The servers a session ran on, for a test's own checks of their logs. */
export interface OurServers {
  servers: CliProcess[];
}

/**
 * Starts the server on `<net>.2:4141`, the address compareGitlabWithAtlantis gives it, or
 * `replicas` of them on one Redis. `seen` gets the processes of each session.
 */
export function ourGitlabServer(net: string, o: { replicas?: number; seen?: (s: OurServers) => void } = {}): StartServer {
  const replicas = o.replicas ?? 1;
  return async (flags, env) => {
    const servers: CliProcess[] = [];
    const urls: string[] = [];
    const ownDirs: string[] = [];
    let redis: RedisServer | undefined;
    const stop = async (): Promise<void> => {
      for (const s of servers) s.child.kill('SIGTERM');
      await Promise.all(servers.map((s) => s.exited));
      await redis?.cleanup();
      if (process.env.GL_DIFF_LOG) for (const s of servers) console.log(s.output());
      for (const d of ownDirs) rmSync(d, { recursive: true, force: true });
    };
    try {
      if (replicas > 1) redis = await startRedisServer();
      for (let i = 0; i < replicas; i++) {
        const host = `${net}.${i + 2}`;
        // Each replica has a data dir of its own (the first the session's).
        let own = flags;
        if (i > 0) {
          const dir = mkdtempSync(path.join(tmpdir(), 'gl-diff-replica-'));
          ownDirs.push(dir);
          own = flags.map((f, j) => (flags[j - 1] === '--data-dir' ? dir : f));
        }
        const server = startCli([...own, '--bind-address', host, ...(redis ? replicaArgs(redis, `r${i + 1}`) : [])], env);
        servers.push(server);
        urls.push(`http://${host}:4141`);
        await waitForHttp(`http://${host}:4141/healthz`).catch((e: Error) => {
          throw new Error(`${e.message}\n${server.output()}`);
        });
      }
    } catch (e) {
      await stop();
      throw e;
    }
    o.seen?.({ servers });
    return {
      url: urls[0] as string,
      urls,
      stop,
      finishedSince: () => {
        const before = commandEnds(servers);
        return () => commandEnds(servers) > before;
      },
    };
  };
}

/**
 * A server on `host`:4141 against the GitLab stand-in `gl` as user `atlantis-bot`, any repo
 * allowed, terraform as found on PATH; `extra` appended.
 */
export function gitlabServerArgs(gl: GitLabStandin, o: { dataDir: string; host: string; extra?: readonly string[] }): string[] {
  return [
    'server',
    '--gitlab-user',
    'atlantis-bot',
    '--gitlab-hostname',
    gl.hostname,
    '--repo-allowlist',
    '*',
    '--data-dir',
    o.dataDir,
    '--bind-address',
    o.host,
    '--atlantis-url',
    `http://${o.host}:4141`,
    '--tf-download=false',
    ...(o.extra ?? []),
  ];
}

/** Its environment: the token and webhook secret as env, as the operator's pods get them, and the stand-in's CA. */
export function gitlabServerEnv(gl: GitLabStandin, webhookSecret: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    ATLANTIS_GITLAB_TOKEN: gl.token,
    ATLANTIS_GITLAB_WEBHOOK_SECRET: webhookSecret,
    CHECKPOINT_DISABLE: '1',
    ...(gl.caFile === undefined ? {} : { SSL_CERT_FILE: gl.caFile, GIT_SSL_CAINFO: gl.caFile, NODE_EXTRA_CA_CERTS: gl.caFile }),
    ...extra,
  };
}
