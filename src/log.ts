// Structured JSON logging (SPEC section 8): `level`, `time`, `msg`, lowerCamelCase keys.
// Messages are constants starting with a capital and without a final period; the
// variable parts go in fields. Secret values are scrubbed before they are written.
import winston from 'winston';
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

const jsonLine = winston.format.printf((info) => {
  const { level, message, timestamp, ...rest } = info as winston.Logform.TransformableInfo & { timestamp?: string };
  // The process's secrets (server/secrets/redact.ts), in every form they may take, scrubbed
  // inside the fields' strings: the line stays valid JSON whatever a secret is. The level,
  // time and message are the server's own constants.
  return JSON.stringify({ level, time: timestamp, msg: message, ...processRedactor.redactValue(rest) });
});

export interface LoggerOptions {
  level?: LogLevel;
  /** Where lines go; defaults to stderr so that stdout stays free for command output. */
  stream?: NodeJS.WritableStream;
  silent?: boolean;
}

class WinstonLogger implements Logger {
  constructor(private readonly w: winston.Logger) {}
  error(msg: string, fields?: LogFields): void {
    this.w.error(msg, fields ?? {});
  }
  warn(msg: string, fields?: LogFields): void {
    this.w.warn(msg, fields ?? {});
  }
  info(msg: string, fields?: LogFields): void {
    this.w.info(msg, fields ?? {});
  }
  debug(msg: string, fields?: LogFields): void {
    this.w.debug(msg, fields ?? {});
  }
  child(fields: LogFields): Logger {
    return new WinstonLogger(this.w.child(fields));
  }
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  const w = winston.createLogger({
    level: opts.level ?? 'info',
    silent: opts.silent ?? false,
    format: winston.format.combine(winston.format.timestamp(), jsonLine),
    transports: [new winston.transports.Stream({ stream: opts.stream ?? process.stderr })],
  });
  return new WinstonLogger(w);
}

/** A logger that writes nothing; for unit tests that do not look at logs. */
export function nullLogger(): Logger {
  return createLogger({ silent: true });
}
