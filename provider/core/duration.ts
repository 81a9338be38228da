import { ValidationError } from './errors.js';

/** Go's longest duration (2^63 - 1 ns), in ms: `time.ParseDuration` refuses more. */
const MAX_GO_DURATION_MS = 9_223_372_036_854;

const UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, μs: 1e-3, ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/**
 * Parses a Go duration (`time.ParseDuration`: `30s`, `2m`, `1h30m`, `1.5h`, `0`) into
 * milliseconds. Negative durations are refused: every duration we read (a failover delay, a
 * re-placement delay) is a wait.
 *
 * @throws ValidationError with a message for the user. Pure.
 */
export function parseGoDuration(text: string): number {
  const s = text.trim();
  if (s === '0') return 0;
  const bad = () => new ValidationError(`"${text}" is not a duration like 30s, 2m or 1h30m`);
  if (s.startsWith('-')) throw new ValidationError(`"${text}" is negative: a delay must be 0 or more`);
  const body = s.startsWith('+') ? s.slice(1) : s;
  if (body === '') throw bad();
  const part = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;
  let ms = 0;
  let at = 0;
  while (at < body.length) {
    part.lastIndex = at;
    const m = part.exec(body);
    if (!m) throw bad();
    const unit = UNIT_MS[m[2] ?? ''];
    if (unit === undefined) throw bad();
    ms += Number(m[1]) * unit;
    at = part.lastIndex;
  }
  if (!Number.isFinite(ms)) throw bad();
  if (ms > MAX_GO_DURATION_MS) throw new ValidationError(`"${text}" is longer than a Go duration can be (about 292 years)`);
  return Math.round(ms);
}
