/**
 * A normal form of API objects for "did anything change?" comparisons.
 */

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/**
 * The normal form of a JSON value, as JSON text, for comparisons: Dates and RFC 3339 strings
 * become ISO strings (millisecond precision, UTC), object keys are sorted, and null, undefined,
 * empty arrays and empty objects are dropped (the apiserver omits them, so they must not count as
 * a change); `null` when nothing is left. Two values are equal in normal form exactly when their
 * texts are equal. Written straight to text, without a normalized copy of the value: this runs
 * on every status the delegation reconciler compares, and on every proxy its informer caches.
 */
export function normalJson(value: unknown): string {
  return normalText(value) ?? 'null';
}

/**
 * Texts made before, by what they were made of: object keys quoted, and timestamps in normal
 * form (a parse of the date, the costliest step, for each). A status has a handful of field
 * names and timestamps, shared by many pods; both are cleared when they reach {@link MEMO_MAX}
 * entries, so that keys and timestamps without end (labels' keys compared in Services, say)
 * cost a bounded amount of memory.
 */
const quotedKeys = new Map<string, string>();
const normalTimes = new Map<string, string>();
const MEMO_MAX = 4096;

function remembered(memo: Map<string, string>, key: string, make: (key: string) => string): string {
  let text = memo.get(key);
  if (text === undefined) {
    if (memo.size >= MEMO_MAX) memo.clear();
    memo.set(key, (text = make(key)));
  }
  return text;
}

function normalTime(value: string): string {
  const d = new Date(value);
  return JSON.stringify(Number.isNaN(d.getTime()) ? value : d.toISOString());
}

/** The normal form's text, or undefined when the value normalizes to nothing. */
function normalText(value: unknown): string | undefined {
  if (value === null || value === undefined) return undefined;
  if (typeof value === 'string') {
    // The length and the first dash first: most strings are names.
    if (value.length >= 20 && value.charCodeAt(4) === 45 && RFC3339.test(value)) return remembered(normalTimes, value, normalTime);
    return JSON.stringify(value);
  }
  if (typeof value !== 'object') return JSON.stringify(value);
  if (value instanceof Date) return JSON.stringify(value.toISOString());
  let out = '';
  if (Array.isArray(value)) {
    for (const item of value) {
      const text = normalText(item);
      if (text !== undefined) out += out === '' ? text : `,${text}`;
    }
    return out === '' ? undefined : `[${out}]`;
  }
  for (const k of Object.keys(value).sort()) {
    const text = normalText((value as Record<string, unknown>)[k]);
    if (text !== undefined) out += `${out === '' ? '' : ','}${remembered(quotedKeys, k, JSON.stringify)}:${text}`;
  }
  return out === '' ? undefined : `{${out}}`;
}

/** Whether two values are equal once normalized ({@link normalJson}). */
export function equalNormalized(a: unknown, b: unknown): boolean {
  return normalJson(a) === normalJson(b);
}
