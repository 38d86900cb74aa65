// `atlantis-operator migrate <what>`: one-shot moves from an Atlantis install.
//   migrate helm-values <values.yaml> [...]   prints the AtlantisDeployment (and ConfigMaps) that
//                                replace an install of the official chart (cli/helm-values/).
//   migrate atlantis-db <file>   imports Atlantis's locks, pull statuses and apply lock from its
//                                atlantis.db into the store the server is configured with (the
//                                server's own --data-dir / --locking-db-type / --redis-* flags
//                                and ATLANTIS_* env), once (server/locks/bolt-import.ts).
// Output is for a person: what was imported, on stdout; a file that cannot be imported is one
// line on stderr and exit code 1, with nothing imported.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { type FlagSpec, parseFlags, renderHelp, UsageError } from '../config/flags.js';
import { createLogger } from '../log.js';
import { PRIVATE_UMASK } from '../server/data-dir.js';
import { type ImportReport, importAtlantisDb } from '../server/locks/bolt-import.js';
import { loadStoreParts } from '../server/locks/open-store.js';
import { replicaIdFromFlags, storeConfigFromFlags } from '../server/locks/store-config.js';
import { processRedactor } from '../server/secrets/redact.js';
import { migrateHelmValues } from './helm-values/command.js';
import { SERVER_FLAGS } from '../server/server-flags.js';

/** The server's flags that say where its store is: the same names, defaults and env. */
const STORE_FLAG_NAMES = new Set([
  'data-dir',
  'locking-db-type',
  'redis-host',
  'redis-port',
  'redis-password',
  'redis-username',
  'redis-db',
  'redis-tls-enabled',
  'redis-insecure-skip-verify',
  'redis-sentinel-addresses',
  'redis-sentinel-master-name',
  'redis-sentinel-username',
  'redis-sentinel-password',
  'replica-id',
  'shared-state-key-file',
]);

export const MIGRATE_DB_FLAGS: FlagSpec[] = SERVER_FLAGS.filter((f) => STORE_FLAG_NAMES.has(f.name));

const MIGRATE_HELP = `Usage:
  atlantis-operator migrate helm-values <values.yaml> [...] [flags]   print the AtlantisDeployment for an install of the official chart
  atlantis-operator migrate atlantis-db <file> [flags]              import Atlantis's locks from its atlantis.db, once

Run 'atlantis-operator migrate <what> --help' for the flags.
`;

export async function migrateMain(argv: string[], out: (line: string) => void = (l) => process.stdout.write(`${l}\n`)): Promise<number> {
  const [what, ...rest] = argv;
  switch (what) {
    case 'atlantis-db':
      return migrateAtlantisDb(rest, out);
    case 'helm-values':
      return migrateHelmValues(rest);
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(MIGRATE_HELP);
      return 0;
    default:
      throw new UsageError(`unknown migrate command "${what}" (see atlantis-operator migrate --help)`);
  }
}

async function migrateAtlantisDb(argv: string[], out: (line: string) => void): Promise<number> {
  const parsed = parseFlags(argv, MIGRATE_DB_FLAGS);
  if (parsed.help) {
    process.stdout.write(
      renderHelp(
        'atlantis-operator migrate atlantis-db <file> [flags]',
        "Imports Atlantis's locks, pull request plan statuses and apply lock from its atlantis.db into the store the server uses (the server's flags and ATLANTIS_* env say which), once. Plans are not carried over: the server, at its next start, asks each pull request to plan again. The file is only read.",
        MIGRATE_DB_FLAGS,
      ),
    );
    return 0;
  }
  if (parsed.positionals.length !== 1) throw new UsageError('migrate atlantis-db takes one argument: the atlantis.db file');
  const file = path.resolve(parsed.positionals[0] as string);
  if (!existsSync(file)) throw new UsageError(`${file}: no such file`);
  const store = storeConfigFromFlags(parsed.values);
  const r = store.type === 'redis' ? store.redis : undefined;
  processRedactor.addSource(() => [r?.password, r?.sentinel?.password]);
  process.umask(PRIVATE_UMASK);
  const cfg = { dataDir: path.resolve(parsed.values['data-dir'] as string), store, replicaId: replicaIdFromFlags(parsed.values) };
  const logger = createLogger({ level: 'warn' });
  const s = (await loadStoreParts(cfg)).openStateStore(logger);
  try {
    try {
      await s.connect();
    } catch (e) {
      process.stderr.write(`atlantis-operator: ${file} was not imported: ${(e as Error).message}\n`);
      return 1;
    }
    let report: ImportReport;
    try {
      report = await importAtlantisDb(s, file, 'migrate command');
    } catch (e) {
      process.stderr.write(`atlantis-operator: ${file} was not imported (nothing was): ${(e as Error).message}\n`);
      return 1;
    }
    for (const line of reportLines(report, store.type === 'redis' ? 'Redis' : `the embedded store in ${cfg.dataDir}`)) out(line);
    return 0;
  } finally {
    await s.close();
  }
}

/** What the command prints for a report. */
export function reportLines(r: ImportReport, where: string): string[] {
  if (r.result === 'already')
    return [
      `Not imported: Atlantis's atlantis.db was imported into ${where} before (${r.marker.at}, by ${r.marker.by}, from ${r.marker.file}).`,
    ];
  const m = r.marker;
  const lines = [
    `Imported into ${where} from ${m.file} (sha256 ${m.sha256}):`,
    `  ${m.locks} locks, ${m.pulls} pull request plan statuses, global apply lock: ${m.applyLock ? 'on' : 'off'}`,
    `  ${r.notices} pull requests will be asked to plan again when the server starts (plans are not carried over)`,
  ];
  for (const note of r.notes) lines.push(`  merged: ${note}`);
  for (const l of r.kept) lines.push(`  not imported: ${l.repo} ${l.dir}/${l.workspace} is locked here already by pull #${l.pull}`);
  return lines;
}
