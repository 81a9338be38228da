/** One RFC 6902 operation, as sent base64-encoded in an AdmissionResponse. */
export type JsonPatchOp = { op: 'add'; path: string; value: unknown } | { op: 'replace'; path: string; value: unknown } | { op: 'remove'; path: string } | { op: 'test'; path: string; value: unknown };

/** Escapes one JSON Pointer reference token (RFC 6901: `~` -> `~0`, then `/` -> `~1`). */
export function escapePointerToken(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}

/**
 * The RFC 6902 operations that turn `before` into `after`, both taken as JSON (keys whose value
 * is `undefined` count as absent; Dates become strings). Objects are diffed key by key; arrays
 * and scalars that differ are replaced whole (simpler and safe for admission, where nobody else
 * patches the object between our read and the apiserver applying the patch). Pure.
 *
 * `after` is walked as it is, never copied: a subtree it shares with `before` (the mutated pod
 * keeps the input's containers, volumes...) is equal at once, and only the values that go into
 * the patch are made JSON. `beforeIsJson`: `before` is a value `JSON.parse` made (no
 * `undefined`, no Dates, no prototypes), used as it is instead of being copied through JSON: the
 * webhook's pod, parsed from the AdmissionReview, saves a round trip on every admission.
 *
 * Called by the webhook's /mutate route to answer an AdmissionReview. An empty array means "no change".
 */
export function createJsonPatch(before: unknown, after: unknown, opts: { beforeIsJson?: boolean } = {}): JsonPatchOp[] {
  const ops: JsonPatchOp[] = [];
  diff(opts.beforeIsJson ? before : toJson(before), after === undefined ? null : after, '', ops);
  return ops;
}

/** Deep equality of two JSON values (object key order ignored; `undefined` members absent; a Date as its JSON string). Pure. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a instanceof Date) return jsonEqual(a.toJSON(), b);
  if (b instanceof Date) return jsonEqual(a, b.toJSON());
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i])) return false;
    return true;
  }
  if (!isPlainObject(a) || !isPlainObject(b)) return false;
  // Without arrays of keys: this runs on every subtree the webhook compares.
  let defined = 0;
  for (const k in a) {
    if (!Object.hasOwn(a, k) || a[k] === undefined) continue;
    defined++;
    if (!Object.hasOwn(b, k) || b[k] === undefined || !jsonEqual(a[k], b[k])) return false;
  }
  for (const k in b) if (Object.hasOwn(b, k) && b[k] !== undefined) defined--;
  return defined === 0;
}

/**
 * JSON text of `value` with object keys sorted and `undefined` members left out, so that two
 * values are {@link jsonEqual} exactly when their canonical texts are the same (Dates as their
 * JSON strings). For keying sets of values in linear time. Pure.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (!isPlainObject(v)) return v;
    const sorted: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) sorted[k] = v[k];
    return sorted;
  });
}

function diff(a: unknown, b: unknown, path: string, ops: JsonPatchOp[]): void {
  // Objects are walked once, key by key (an equality test of each subtree before walking it
  // would compare the deepest parts once per level above them); the rest is compared whole.
  if (!isPlainObject(a) || !isPlainObject(b)) {
    if (!jsonEqual(a, b)) ops.push({ op: 'replace', path, value: toJson(b) });
    return;
  }
  for (const key of Object.keys(a)) {
    if (!Object.hasOwn(b, key) || b[key] === undefined) ops.push({ op: 'remove', path: `${path}/${escapePointerToken(key)}` });
  }
  for (const key of Object.keys(b)) {
    if (b[key] === undefined) continue;
    const child = `${path}/${escapePointerToken(key)}`;
    if (Object.hasOwn(a, key)) diff(a[key], b[key], child, ops);
    else ops.push({ op: 'add', path: child, value: toJson(b[key]) });
  }
}

function toJson(value: unknown): unknown {
  return value === undefined ? null : JSON.parse(JSON.stringify(value));
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date);
}
