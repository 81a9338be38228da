import winston from 'winston';
import { redactCredentials } from './redact.js';

export type Logger = winston.Logger;

export interface LoggerOptions {
  level?: string;
  /** `json` (default, for machines) or `text` (for people at a terminal). */
  format?: 'json' | 'text';
  /** Drop everything (unit tests). */
  silent?: boolean;
  /** Where to write; default stderr. */
  stream?: NodeJS.WritableStream;
}

/** Builds the process logger. Structured fields go in the metadata (`cluster`, `key`, `controller`). */
export function createLogger(opts: LoggerOptions = {}): Logger {
  const format =
    opts.format === 'text'
      ? winston.format.combine(
          redact(),
          winston.format.timestamp(),
          winston.format.printf(({ timestamp, level, message, ...meta }) => {
            const extra = Object.keys(meta).length ? ' ' + JSON.stringify(meta) : '';
            return `${timestamp} ${level} ${message}${extra}`;
          }),
        )
      : winston.format.combine(redact(), winston.format.timestamp(), winston.format.errors({ stack: false }), winston.format.json());
  return skipDisabledLevels(
    winston.createLogger({
      level: opts.level ?? 'info',
      format,
      silent: opts.silent ?? false,
      transports: [opts.stream ? new winston.transports.Stream({ stream: opts.stream }) : new winston.transports.Console({ stderrLevels: ['error', 'warn', 'info', 'debug', 'verbose', 'silly'] })],
    }),
  );
}

/**
 * Makes `logger.debug(...)` and the other level methods return at once when their level is not
 * enabled. Winston leaves that to the transport: a debug line at level info still has its fields
 * merged, redacted, timestamped and turned into JSON before it is dropped, and the binder, among
 * others, logs one per pod. The check is made on every call, so a level changed later
 * (`logger.level = 'debug'`) takes effect, and child loggers (which inherit the methods) get it.
 */
function skipDisabledLevels(logger: winston.Logger): winston.Logger {
  const methods = logger as unknown as Record<string, (...args: unknown[]) => winston.Logger>;
  for (const level of Object.keys(logger.levels)) {
    const write = methods[level];
    if (typeof write !== 'function') continue;
    methods[level] = function (this: winston.Logger, ...args: unknown[]) {
      const self = this ?? logger;
      return self.isLevelEnabled(level) ? write.apply(self, args) : self;
    };
  }
  return logger;
}

/**
 * Redacts HTTP credentials from the message and every string field, whoever logged them: an
 * error's text can be a request header (an invalid header value is echoed whole by Node and
 * node-fetch), so this cannot be left to each call site. Nested fields are copied, not changed.
 */
const redact = winston.format((info) => {
  for (const key of Object.keys(info)) info[key] = redactValue(info[key], 0);
  return info;
});

function redactValue(value: unknown, depth: number): unknown {
  if (typeof value === 'string') return redactCredentials(value);
  if (depth >= 4 || typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map((v) => redactValue(v, depth + 1));
  if (value instanceof Error) return redactCredentials(value.message);
  if (Object.getPrototypeOf(value) !== Object.prototype) return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactValue(v, depth + 1)]));
}

/** A logger that drops everything, for unit tests. */
export function silentLogger(): Logger {
  return createLogger({ silent: true });
}

/** Error details fit for a log line (message and cause chain, no stack, no response bodies). */
export function errorFields(err: unknown): { error: string } {
  const parts: string[] = [];
  let e: unknown = err;
  for (let i = 0; e && i < 5; i++) {
    parts.push(describe(e));
    e = e instanceof Error ? (e as Error & { cause?: unknown }).cause : undefined;
  }
  return { error: parts.join(': ') };
}

/** One line for an error: an ApiException's embedded body and headers are cut to the Status message. */
function describe(e: unknown): string {
  const api = e as { code?: unknown; body?: unknown };
  if (typeof api.code === 'number' && api.body !== undefined) {
    try {
      const status = typeof api.body === 'string' ? JSON.parse(api.body) : api.body;
      if (status && typeof status.message === 'string') return `HTTP ${api.code}: ${status.message}`;
    } catch {
      /* not a Status */
    }
    return `HTTP ${api.code}`;
  }
  return e instanceof Error ? e.message.split('\n')[0] : String(e);
}
