/**
 * Small helpers for string maps (labels, annotations).
 */

/** Whether two string maps have the same entries (absent and empty maps are equal). */
export function stringMapEquals(a: Record<string, string> | undefined | null, b: Record<string, string> | undefined | null): boolean {
  const x = a ?? {};
  const y = b ?? {};
  const keys = Object.keys(x);
  if (keys.length !== Object.keys(y).length) return false;
  return keys.every((k) => Object.prototype.hasOwnProperty.call(y, k) && x[k] === y[k]);
}

/**
 * The JSON merge patch (RFC 7386) fragment that turns `current` into exactly `desired`: changed
 * or new keys with their value, removed keys with null. Null when nothing changes.
 */
export function stringMapMergePatch(current: Record<string, string> | undefined | null, desired: Record<string, string>): Record<string, string | null> | null {
  const cur = current ?? {};
  const patch: Record<string, string | null> = {};
  for (const k of Object.keys(cur).sort()) {
    if (!Object.prototype.hasOwnProperty.call(desired, k)) patch[k] = null;
  }
  for (const [k, want] of sortedEntries(desired)) {
    if (cur[k] !== want) patch[k] = want;
  }
  return Object.keys(patch).length ? patch : null;
}

/** The entries of a string-keyed record sorted by key, in the order `Object.keys(record).sort()` gives. */
export function sortedEntries<V>(record: Record<string, V>): [string, V][] {
  return Object.entries(record).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}
