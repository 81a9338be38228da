import winston from 'winston';

export type Logger = winston.Logger;

export interface LoggerOptions {
  level?: string;
  /** `json` (default, for machines) or `text` (for people at a terminal). */
  format?: 'json' | 'text';
  /** Where to write; default stderr. Tests pass a silent logger instead. */
  silent?: boolean;
}

/** Builds the process logger. Structured fields go in the metadata (`cluster`, `key`, `controller`). */
export function createLogger(opts: LoggerOptions = {}): Logger {
  const format =
    opts.format === 'text'
      ? winston.format.combine(
          winston.format.timestamp(),
          winston.format.printf(({ timestamp, level, message, ...meta }) => {
            const extra = Object.keys(meta).length ? ' ' + JSON.stringify(meta) : '';
            return `${timestamp} ${level} ${message}${extra}`;
          }),
        )
      : winston.format.combine(winston.format.timestamp(), winston.format.errors({ stack: false }), winston.format.json());
  return winston.createLogger({
    level: opts.level ?? 'info',
    format,
    silent: opts.silent ?? false,
    transports: [new winston.transports.Console({ stderrLevels: ['error', 'warn', 'info', 'debug', 'verbose', 'silly'] })],
  });
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
    parts.push(e instanceof Error ? e.message : String(e));
    e = e instanceof Error ? (e as Error & { cause?: unknown }).cause : undefined;
  }
  return { error: parts.join(': ') };
}
