// A small flag parser with Atlantis's conventions: `--flag value`, `--flag=value`,
// boolean `--flag` / `--flag=false`, and every flag also readable from the env var
// ATLANTIS_<FLAG_IN_UPPER_SNAKE>, so an Atlantis user's existing environment keeps working.
// Command line beats env beats a --config file (config-file.ts) beats default. Every problem
// is a UsageError: one line, exit code 2.
import { MAX_TIMER_DELAY_MS } from '../async.js';
import { formatDuration, parseDuration } from './duration.js';

export type FlagType = 'string' | 'int' | 'bool' | 'duration' | 'list';

export interface FlagSpec {
  name: string;
  type: FlagType;
  description: string;
  default?: string | number | boolean | string[];
  /** Env var prefix; flags of the server use ATLANTIS_, others may opt out with null. */
  envPrefix?: string | null;
  /** Hidden from --help (still accepted). */
  hidden?: boolean;
  /**
   * Durations only: the largest value accepted (default MAX_TIMER_DELAY_MS, Node's timer
   * limit). Raise it only for a flag whose timers use setLongTimeout.
   */
  maxMs?: number;
}

export type FlagValue = string | number | boolean | string[] | undefined;
export type FlagValues = Record<string, FlagValue>;

export class UsageError extends Error {
  readonly exitCode = 2;
}

export function envNameFor(flag: string, prefix = 'ATLANTIS_'): string {
  return prefix + flag.replace(/-/g, '_').toUpperCase();
}

function convert(spec: FlagSpec, raw: string, origin: string): FlagValue {
  switch (spec.type) {
    case 'string':
      return raw;
    case 'int': {
      if (!/^-?\d+$/.test(raw.trim())) throw new UsageError(`invalid value "${raw}" for ${origin}: must be an integer`);
      return Number(raw);
    }
    case 'bool': {
      const v = raw.trim().toLowerCase();
      if (['true', '1', 'yes', ''].includes(v)) return true;
      if (['false', '0', 'no'].includes(v)) return false;
      throw new UsageError(`invalid value "${raw}" for ${origin}: must be true or false`);
    }
    case 'duration': {
      const ms = parseDuration(raw);
      if (ms === undefined) throw new UsageError(`invalid value "${raw}" for ${origin}: must be a duration like 90s, 10m or 1h`);
      const max = spec.maxMs ?? MAX_TIMER_DELAY_MS;
      if (ms > max)
        throw new UsageError(`invalid value "${raw}" for ${origin}: must be at most ${formatDuration(Math.floor(max / 1000) * 1000)}`);
      return ms;
    }
    case 'list':
      return raw
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s.length > 0);
  }
}

export interface ParsedFlags {
  values: FlagValues;
  positionals: string[];
  help: boolean;
}

/**
 * Parses argv (without the subcommand) against specs, then fills from env, then from `file`
 * (values of a --config file as text, named `fileName` in errors), then defaults.
 */
export function parseFlags(
  argv: string[],
  specs: FlagSpec[],
  env: NodeJS.ProcessEnv = process.env,
  file: Record<string, string> = {},
  fileName = 'the config file',
): ParsedFlags {
  const byName = new Map(specs.map((s) => [s.name, s]));
  const values: FlagValues = {};
  const positionals: string[] = [];
  let help = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--help' || arg === '-h') {
      help = true;
      continue;
    }
    if (arg === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (!arg.startsWith('-') || arg === '-') {
      positionals.push(arg);
      continue;
    }
    const body = arg.replace(/^--?/, '');
    const eq = body.indexOf('=');
    const name = eq >= 0 ? body.slice(0, eq) : body;
    const spec = byName.get(name);
    if (!spec) throw new UsageError(`unknown flag: --${name}`);
    let raw: string;
    if (eq >= 0) raw = body.slice(eq + 1);
    else if (spec.type === 'bool') raw = 'true';
    else {
      const next = argv[i + 1];
      if (next === undefined) throw new UsageError(`flag needs an argument: --${name}`);
      raw = next;
      i++;
    }
    values[name] = convert(spec, raw, `--${name}`);
  }
  for (const spec of specs) {
    if (values[spec.name] !== undefined) continue;
    if (spec.envPrefix !== null) {
      const envName = envNameFor(spec.name, spec.envPrefix ?? 'ATLANTIS_');
      const fromEnv = env[envName];
      // As Atlantis: a Service named e.g. "atlantis-redis" makes Kubernetes set
      // ATLANTIS_REDIS_PORT=tcp://10.0.0.7:6379 in every pod of its namespace; such a
      // Service link is not a value for an int flag, which keeps its default.
      const serviceLink = spec.type === 'int' && fromEnv !== undefined && /^(tcp|udp):\/\//.test(fromEnv);
      if (fromEnv !== undefined && fromEnv !== '' && !serviceLink) {
        values[spec.name] = convert(spec, fromEnv, `${envName} (--${spec.name})`);
        continue;
      }
    }
    const fromFile = file[spec.name];
    if (fromFile !== undefined && fromFile !== '') {
      values[spec.name] = convert(spec, fromFile, `${spec.name} in ${fileName}`);
      continue;
    }
    values[spec.name] = spec.default;
  }
  return { values, positionals, help };
}

function showDefault(s: FlagSpec): string {
  if (Array.isArray(s.default)) return s.default.join(',');
  if (s.type === 'duration' && typeof s.default === 'number') return formatDuration(s.default);
  return String(s.default);
}

/** Renders the --help text of one subcommand. */
export function renderHelp(usage: string, summary: string, specs: FlagSpec[]): string {
  const rows = specs
    .filter((s) => !s.hidden)
    .map((s) => {
      const arg = s.type === 'bool' ? '' : ` ${s.type === 'list' ? 'a,b' : s.type}`;
      const def =
        s.default === undefined || s.default === '' || (Array.isArray(s.default) && s.default.length === 0)
          ? ''
          : ` (default ${showDefault(s)})`;
      const env = s.envPrefix === null ? '' : `  [$${envNameFor(s.name, s.envPrefix ?? 'ATLANTIS_')}]`;
      return `  --${s.name}${arg}\n      ${s.description}${def}${env}`;
    });
  return `${summary}\n\nUsage:\n  ${usage}\n\nFlags:\n${rows.join('\n')}\n  --help\n      show this help\n`;
}
