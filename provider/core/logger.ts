import winston from 'winston';
import { redactCredentials } from './redact.js';

// Kept apart from winston so that code without a logger (the admission worker) can use it.
export { errorFields } from './error-fields.js';

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
            return `${String(timestamp)} ${level} ${String(message)}${extra}`;
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
