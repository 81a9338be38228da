/**
 * A normal form of API objects for "did anything change?" comparisons.
 */

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/**
 * A JSON-ready normal form for comparisons: Dates and RFC 3339 strings become ISO strings
 * (millisecond precision, UTC), keys are sorted, and null, undefined, empty arrays and empty
 * objects are dropped (the apiserver omits them, so they must not count as a change).
 */
export function normalizeForCompare(value: unknown): unknown {
  if (value instanceof Date) return value.toISOString();
  // The length and the first dash first: most strings are names, and this runs on every field
  // of every status compared.
  if (typeof value === 'string' && value.length >= 20 && value.charCodeAt(4) === 45 && RFC3339.test(value)) {
    const d = new Date(value);
    return Number.isNaN(d.getTime()) ? value : d.toISOString();
  }
  if (Array.isArray(value)) {
    const items = value.map(normalizeForCompare).filter((v) => v !== undefined);
    return items.length ? items : undefined;
  }
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(value).sort()) {
      const v = normalizeForCompare((value as Record<string, unknown>)[k]);
      if (v !== undefined) out[k] = v;
    }
    return Object.keys(out).length ? out : undefined;
  }
  return value === null ? undefined : value;
}

/** Whether two values are equal once normalized ({@link normalizeForCompare}). */
export function equalNormalized(a: unknown, b: unknown): boolean {
  return JSON.stringify(normalizeForCompare(a) ?? null) === JSON.stringify(normalizeForCompare(b) ?? null);
}
