// `--config <file>`: a YAML map of flag names to values, as Atlantis reads it (viper): a flag
// on the command line beats its ATLANTIS_* env, which beats the file, which beats the default.
// Values are converted as viper's weak decoding does (`port: "4141"`, `repo-config-json` as a
// string, a bool as true/false/1/0). Unlike Atlantis, a key that is no flag is refused, not
// ignored: a misspelt `repo-allowlist` would otherwise leave a setting silently unset. The
// file's `webhooks:` list (Atlantis's only way to configure notifications) is read here too.
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { type FlagSpec, type FlagValues, type ParsedFlags, UsageError, parseFlags } from './flags.js';

/** One entry of the config file's `webhooks:` list, with Atlantis's keys. */
export interface WebhookEntry {
  event: string;
  kind: string;
  workspaceRegex: string;
  branchRegex: string;
  channel: string;
  url: string;
}

export interface ConfigFile {
  /** Flag values from the file, as the flag parser's layer between env and defaults. */
  values: Record<string, string>;
  webhooks: WebhookEntry[];
}

const WEBHOOK_KEYS: Record<string, keyof WebhookEntry> = {
  event: 'event',
  kind: 'kind',
  'workspace-regex': 'workspaceRegex',
  'branch-regex': 'branchRegex',
  channel: 'channel',
  url: 'url',
};

/** A scalar as the text the flag parser converts (viper's weak decoding of YAML values). */
function asText(spec: FlagSpec, key: string, v: unknown, where: string): string {
  const bad = (what: string): UsageError => new UsageError(`invalid value for ${key} in ${where}: ${what}`);
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'boolean') {
    if (spec.type === 'int' || spec.type === 'duration')
      throw bad(`must be ${spec.type === 'int' ? 'an integer' : 'a duration'}, not ${v}`);
    return String(v);
  }
  if (typeof v === 'number') {
    if (spec.type === 'int' && !Number.isInteger(v)) throw bad(`must be an integer, not ${v}`);
    return String(v);
  }
  if (Array.isArray(v) && spec.type === 'list' && v.every((x) => typeof x === 'string' || typeof x === 'number')) return v.join(',');
  throw bad(
    `must be ${spec.type === 'list' ? 'a comma separated string or a list' : `a ${spec.type === 'int' ? 'number' : spec.type}`}, not a ${Array.isArray(v) ? 'list' : 'map'}`,
  );
}

function webhookEntries(raw: unknown, where: string): WebhookEntry[] {
  if (raw === null || raw === undefined) return [];
  if (!Array.isArray(raw)) throw new UsageError(`invalid value for webhooks in ${where}: must be a list`);
  return raw.map((item, i) => {
    const at = `webhooks[${i}] in ${where}`;
    if (typeof item !== 'object' || item === null || Array.isArray(item)) throw new UsageError(`invalid ${at}: must be a map`);
    const e: WebhookEntry = { event: '', kind: '', workspaceRegex: '', branchRegex: '', channel: '', url: '' };
    for (const [k, v] of Object.entries(item as Record<string, unknown>)) {
      const field = WEBHOOK_KEYS[k];
      if (!field) throw new UsageError(`unknown key ${JSON.stringify(k)} in ${at}: the keys are ${Object.keys(WEBHOOK_KEYS).join(', ')}`);
      if (v !== null && typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean')
        throw new UsageError(`invalid value for ${k} in ${at}: must be a string`);
      e[field] = v === null ? '' : String(v);
    }
    return e;
  });
}

/** Reads and checks the file; throws a UsageError naming the file and the key. */
export function readConfigFile(file: string, specs: FlagSpec[]): ConfigFile {
  const where = `--config ${file}`;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new UsageError(`invalid config: reading ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text, { maxAliasCount: 100 });
  } catch (e) {
    throw new UsageError(`invalid config: reading ${file}: ${(e as Error).message.split('\n')[0]}`);
  }
  if (doc === null || doc === undefined) return { values: {}, webhooks: [] };
  if (typeof doc !== 'object' || Array.isArray(doc))
    throw new UsageError(`invalid config: ${file} must be a YAML map of flag names to values`);
  const byName = new Map(specs.map((s) => [s.name, s]));
  const values: Record<string, string> = {};
  let webhooks: WebhookEntry[] = [];
  for (const [key, v] of Object.entries(doc as Record<string, unknown>)) {
    if (key === 'webhooks') {
      webhooks = webhookEntries(v, where);
      continue;
    }
    const spec = byName.get(key);
    // The file names itself on the command line or in ATLANTIS_CONFIG, never inside.
    if (!spec || key === 'config')
      throw new UsageError(
        `unknown key ${JSON.stringify(key)} in ${where}: not a server flag (keys are flag names without --, e.g. repo-allowlist)`,
      );
    values[key] = asText(spec, key, v, where);
  }
  return { values, webhooks };
}

export interface ParsedWithConfig extends ParsedFlags {
  webhooks: WebhookEntry[];
}

/**
 * Parses argv and env; when they name a --config file, parses again with its values as the
 * layer under env, so the file's values are converted and checked like any other.
 */
export function parseFlagsWithConfigFile(argv: string[], specs: FlagSpec[], env: NodeJS.ProcessEnv = process.env): ParsedWithConfig {
  const first = parseFlags(argv, specs, env);
  const file = first.values.config;
  if (first.help || typeof file !== 'string' || file === '') return { ...first, webhooks: [] };
  const cf = readConfigFile(file, specs);
  const parsed = parseFlags(argv, specs, env, cf.values, where(file));
  return { ...parsed, webhooks: cf.webhooks };
}

const where = (file: string): string => `--config ${file}`;

export type { FlagValues };
