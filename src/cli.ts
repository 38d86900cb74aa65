#!/usr/bin/env node
// atlantis-operator: one binary, two roles. Parses the subcommand and its flags, then hands
// over to the role. Usage errors are one line on stderr and exit code 2.
import { writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { runDrainCommand, LAST_EXIT_FILE } from './cli/drain-command.js';
import { MAX_DURATION_MS } from './config/duration.js';
import { type FlagSpec, parseFlags, renderHelp, UsageError } from './config/flags.js';
import { parseFlagsWithConfigFile } from './config/config-file.js';
import { createLogger } from './log.js';
import { buildServerConfig, SERVER_FLAGS } from './server/config.js';
import { loadStoreParts } from './server/locks/open-store.js';
import { AtlantisServer } from './server/server.js';
import { PRIVATE_UMASK } from './server/data-dir.js';
import { makeNonDumpable } from './server/secrets/non-dumpable.js';
import { VERSION } from './version.js';
import { ownPodWatchPlugin } from './server/drain/own-pod-watch.js';
import { workflowPlugin } from './server/workflow/index.js';

const TOP_HELP = `atlantis-operator ${VERSION}: an Atlantis-compatible server that drains safely, and its Kubernetes operator

Usage:
  atlantis-operator server      [flags]   the Atlantis-compatible PR automation server
  atlantis-operator controller  [flags]   the AtlantisDeployment operator
  atlantis-operator drain       [flags]   drain the local server and wait (preStop hook)
  atlantis-operator migrate     <what>    one-shot moves from Atlantis (migrate helm-values <values.yaml>, migrate atlantis-db <file>)
  atlantis-operator version               print the version

Run 'atlantis-operator <command> --help' for the flags of a command.
`;

const DRAIN_FLAGS: FlagSpec[] = [
  {
    name: 'timeout',
    type: 'duration',
    default: 0,
    maxMs: MAX_DURATION_MS,
    envPrefix: null,
    description: 'Give up waiting after this long and exit 1 (0 = wait forever); the server keeps draining',
  },
  { name: 'url', type: 'string', envPrefix: null, description: 'Base URL of the server (default: the URL recorded in the pid file)' },
  {
    name: 'data-dir',
    type: 'string',
    default: path.join(homedir(), '.atlantis'),
    description: 'Data dir of the server, where its pid file is',
  },
  { name: 'poll-interval', type: 'duration', default: 500, envPrefix: null, hidden: true, description: 'How often to poll /status' },
];

async function serverMain(argv: string[]): Promise<number> {
  const parsed = parseFlagsWithConfigFile(argv, SERVER_FLAGS);
  if (parsed.help) {
    process.stdout.write(
      renderHelp('atlantis-operator server [flags]', 'Runs the Atlantis-compatible PR automation server.', SERVER_FLAGS),
    );
    return 0;
  }
  if (parsed.positionals.length) throw new UsageError(`unexpected argument: ${parsed.positionals[0]}`);
  // Before the data dir is created: everything the server and its children write is private.
  process.umask(PRIVATE_UMASK);
  // Before any PR's code can run: its environment and memory hold the secrets.
  const nonDumpable = makeNonDumpable();
  const config = buildServerConfig(parsed.values, parsed.webhooks);
  const logger = createLogger({ level: config.logLevel });
  for (const w of config.flagWarnings) logger.warn(w);
  const storeParts = await loadStoreParts(config);
  let exiting = false;
  const server = new AtlantisServer({
    config,
    logger,
    plugins: [(s) => workflowPlugin(s, storeParts), ownPodWatchPlugin],
    onExit: (code) => {
      exiting = true;
      try {
        writeFileSync(path.join(config.dataDir, LAST_EXIT_FILE), JSON.stringify({ pid: process.pid, code, at: new Date().toISOString() }));
      } catch {
        /* best effort */
      }
      // Give stderr a tick to take the last lines.
      setTimeout(() => process.exit(code), 50);
    },
  });
  // Signals are drain triggers; SIGUSR2 is how `atlantis-operator drain` asks.
  process.on('SIGTERM', () => !exiting && server.requestDrain('signal'));
  process.on('SIGINT', () => !exiting && server.requestDrain('signal'));
  process.on('SIGUSR2', () => !exiting && server.requestDrain('cli'));
  try {
    await server.start();
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'EADDRINUSE' || err.code === 'EADDRNOTAVAIL' || err.code === 'EACCES') {
      throw new UsageError(`cannot listen on ${config.bindAddress}:${config.port} (--bind-address/--port): ${err.code}`);
    }
    throw e;
  }
  // Said once the server runs: a refused start prints its one line and nothing else.
  if (nonDumpable.ok) logger.info("The server's environment and memory are unreadable to other processes of its user (not dumpable)");
  else
    logger.warn(
      'Children of the server can read its environment (/proc/<pid>/environ), secrets included: it could not be made non-dumpable',
      {
        reason: nonDumpable.reason,
      },
    );
  return server.waitForExit();
}

async function drainMain(argv: string[]): Promise<number> {
  const parsed = parseFlags(argv, DRAIN_FLAGS);
  if (parsed.help) {
    process.stdout.write(
      renderHelp(
        'atlantis-operator drain [--timeout D] [--url URL]',
        'Drains the server on this host and waits until no operation runs.',
        DRAIN_FLAGS,
      ),
    );
    return 0;
  }
  if (parsed.positionals.length) throw new UsageError(`unexpected argument: ${parsed.positionals[0]}`);
  return runDrainCommand({
    dataDir: path.resolve(parsed.values['data-dir'] as string),
    url: parsed.values.url as string | undefined,
    timeoutMs: parsed.values.timeout as number,
    pollIntervalMs: parsed.values['poll-interval'] as number,
    out: (line) => process.stdout.write(`${line}\n`),
  });
}

// The controller's and migrate's code is loaded only by their commands: the server, started
// far more often, would otherwise parse and run it at every start (see hack/bundle.mjs).
async function controllerMain(argv: string[]): Promise<number> {
  const { CONTROLLER_FLAGS, runController } = await import('./controller/main.js');
  const parsed = parseFlags(argv, CONTROLLER_FLAGS);
  if (parsed.help) {
    process.stdout.write(renderHelp('atlantis-operator controller [flags]', 'Runs the AtlantisDeployment operator.', CONTROLLER_FLAGS));
    return 0;
  }
  if (parsed.positionals.length) throw new UsageError(`unexpected argument: ${parsed.positionals[0]}`);
  return runController(parsed.values);
}

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  switch (cmd) {
    case 'server':
      return serverMain(rest);
    case 'controller':
      return controllerMain(rest);
    case 'drain':
      return drainMain(rest);
    case 'migrate':
      return (await import('./cli/migrate-command.js')).migrateMain(rest);
    case 'version':
    case '--version':
      process.stdout.write(`atlantis-operator ${VERSION}\n`);
      return 0;
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(TOP_HELP);
      return 0;
    default:
      throw new UsageError(`unknown command "${cmd}" (see atlantis-operator --help)`);
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
    if (code !== 0) setTimeout(() => process.exit(code), 50);
  },
  (e: unknown) => {
    if (e instanceof UsageError) {
      process.stderr.write(`atlantis-operator: ${e.message}\n`);
      process.exit(2);
    }
    process.stderr.write(`atlantis-operator: ${(e as Error).stack ?? String(e)}\n`);
    process.exit(1);
  },
);
