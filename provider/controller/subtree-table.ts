import { Generations } from './generations.js';

export interface SubtreeTableOptions {
  /** Values per generation (default 4096). */
  maxEntries?: number;
  /** Characters of JSON per generation (default 256 Ki). */
  maxChars?: number;
  /** Values whose JSON is longer are left as they are (default 4096 characters). */
  maxLength?: number;
}

/**
 * One frozen copy of each object or array value that cached objects repeat whole.
 *
 * The pods of one workload carry the same affinity, tolerations, node selector, container
 * resources and projected service-account volume, and their conditions change at the same
 * seconds; each watch event parses its own copy of all of them (about half of what the
 * proxies and delegates caches held, in a heap snapshot of c1's provider with 1000 offloaded
 * pods). {@link share} gives a value the copy the table already holds when one of the same JSON
 * is there, so the copy the event brought becomes garbage. What the caller asks to share is its
 * choice (see `sharePodParts`): a part that names its object (a volume with its generated name,
 * a container status with its container ID) never repeats, and would only churn the table.
 *
 * A value entered is frozen, deeply: it is now part of every cached object that repeats it,
 * and a write through one of them would change them all. Cached objects are read, not written
 * (writes are built from copies), so a write to one is a bug, and it throws.
 *
 * Bounded whatever the objects hold, as the `StringTable` is ({@link Generations}): two
 * generations of at most `maxEntries` values and `maxChars` characters of their JSON each.
 * Values equal as JSON are taken for equal: an object parsed from a watch event (timestamps as
 * strings) may get the copy of one listed through the generated client (timestamps as Dates),
 * which every reader takes alike already, since a cache holds both. One per process, shared by
 * its informers.
 */
export class SubtreeTable {
  private readonly values: Generations<object>;
  private readonly maxLength: number;

  constructor(o: SubtreeTableOptions = {}) {
    this.values = new Generations({ maxEntries: o.maxEntries ?? 4096, maxChars: o.maxChars ?? 256 * 1024 });
    this.maxLength = o.maxLength ?? 4096;
  }

  /**
   * The table's frozen copy of `value`: the one it holds of the same JSON, or `value` itself,
   * frozen and entered (unless its JSON is longer than `maxLength`: then `value`, unchanged).
   * For plain data as `JSON.parse` makes it, owned by the caller until now.
   *
   * With `previous`, the same part of the version of the object cached until now: when that is
   * frozen (shared already) and equal to `value` (see {@link sameJson}), it is the answer, with
   * no JSON written and no lookup. Most of a pod's parts stay the same from one watch event of it
   * to the next, and writing each one's JSON to look it up was about a third of what caching an
   * event cost. The table is not asked then: a part that only ever comes back in later versions
   * of the objects that hold it may leave the table, and a new object with the same part then
   * gets a copy of its own, which later ones share in turn.
   */
  share<T extends object>(value: T, previous?: unknown): T {
    if (previous !== undefined && previous !== null && typeof previous === 'object' && Object.isFrozen(previous) && sameJson(value, previous)) return previous as T;
    const key = JSON.stringify(value);
    if (key === undefined || key.length > this.maxLength) return value;
    return this.values.take(key, () => deepFreeze(value)) as T;
  }

  /** How many values the table holds now (both generations; one value may be in both). */
  size(): number {
    return this.values.size();
  }
}

/**
 * Whether `a` and `b` are the same JSON data: equal strings, numbers, booleans and nulls, arrays
 * of the same length with the same items, and plain objects (as `JSON.parse` makes them) with
 * the same keys in the same order and the same values. Anything else (a Date, an instance of a
 * generated model class, undefined) is equal only to itself, so the caller looks it up instead.
 */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return a !== undefined;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameJson(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b) || !isPlainObject(a) || !isPlainObject(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  for (let i = 0; i < ka.length; i++) {
    const k = ka[i]!;
    if (k !== kb[i] || !sameJson((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])) return false;
  }
  return true;
}

function isPlainObject(o: object): boolean {
  const proto = Object.getPrototypeOf(o);
  return proto === Object.prototype || proto === null;
}

function deepFreeze<T>(value: T): T {
  if (value === null || typeof value !== 'object' || Object.isFrozen(value)) return value;
  for (const v of Object.values(value)) deepFreeze(v);
  return Object.freeze(value);
}
