// Structured JSON logging (SPEC section 8): `level`, `time`, `msg`, lowerCamelCase keys.
// Messages are constants starting with a capital and without a final period; the
// variable parts go in fields. Secret values are scrubbed before they are written.
import { processRedactor } from './server/secrets/redact.js';

export type LogLevel = 'error' | 'warn' | 'info' | 'debug';
export type LogFields = Record<string, unknown>;

export interface Logger {
  error(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  debug(msg: string, fields?: LogFields): void;
  /** A logger whose every line also carries `fields` (e.g. a reconcileID). */
  child(fields: LogFields): Logger;
}

const SEVERITY: Record<LogLevel, number> = { error: 0, warn: 1, info: 2, debug: 3 };

/**
 * One JSON line. The process's secrets (server/secrets/redact.ts), in every form they may take,
 * are scrubbed inside the fields' strings: the line stays valid JSON whatever a secret is. The
 * level, time and message are the server's own constants. A `message` field is appended to
 * the message, not kept as a field of its own.
 */
export function logLine(level: LogLevel, msg: string, fields: LogFields, time = new Date()): string {
  const { level: _l, message, timestamp: _t, ...rest } = fields;
  const text = message ? `${msg} ${String(message)}` : msg;
  return `${JSON.stringify({ level, time: time.toISOString(), msg: text, ...processRedactor.redactValue(rest) })}\n`;
}

export interface LoggerOptions {
  level?: LogLevel;
  /** Where lines go; defaults to stderr so that stdout stays free for command output. */
  stream?: NodeJS.WritableStream;
  silent?: boolean;
}

// Written directly, one write per line: a logging library would add its load time to every
// server start for what is one JSON.stringify.
class JsonLogger implements Logger {
  constructor(
    private readonly out: NodeJS.WritableStream | undefined,
    private readonly max: number,
    private readonly fields: LogFields,
  ) {}
  error(msg: string, fields?: LogFields): void {
    this.write('error', msg, fields);
  }
  warn(msg: string, fields?: LogFields): void {
    this.write('warn', msg, fields);
  }
  info(msg: string, fields?: LogFields): void {
    this.write('info', msg, fields);
  }
  debug(msg: string, fields?: LogFields): void {
    this.write('debug', msg, fields);
  }
  child(fields: LogFields): Logger {
    return new JsonLogger(this.out, this.max, { ...this.fields, ...fields });
  }
  private write(level: LogLevel, msg: string, fields: LogFields | undefined): void {
    if (!this.out || SEVERITY[level] > this.max) return;
    this.out.write(logLine(level, msg, { ...this.fields, ...fields }));
  }
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  const out = opts.silent ? undefined : (opts.stream ?? process.stderr);
  return new JsonLogger(out, SEVERITY[opts.level ?? 'info'], {});
}

/** A logger that writes nothing; for unit tests that do not look at logs. */
export function nullLogger(): Logger {
  return createLogger({ silent: true });
}
