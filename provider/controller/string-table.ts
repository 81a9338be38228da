import { Generations } from './generations.js';

/** Fields whose values differ in every object: looking them up would only churn the table. */
const UNIQUE_FIELDS = new Set(['uid', 'resourceVersion']);

export interface StringTableOptions {
  /** Strings per generation (default 4096). */
  maxEntries?: number;
  /** Characters per generation (default 256 Ki). */
  maxChars?: number;
  /** Longer strings are left as they are (default 8192 characters). */
  maxLength?: number;
}

/**
 * One copy of each string value that cached objects repeat.
 *
 * `JSON.parse` makes a fresh copy of every string value (V8 shares only the property names), so
 * 5000 cached pods of one namespace hold 5000 copies of its name, of each condition type, of
 * each toleration key and of the scheduling fields the proxies cache keeps: in a heap snapshot
 * of a provider with 5000 proxies Running, 13 of the 25 MiB of strings were such copies.
 * {@link internValues} replaces each string value of an object about to be cached with the
 * copy the table already holds, so the copies the watch event brought become garbage.
 *
 * Bounded whatever the objects hold ({@link Generations}): two generations of at most
 * `maxEntries` strings and `maxChars` characters each; a string found in the older one moves to
 * the newer, and when the newer is full the older is dropped. So a value that repeats stays
 * while it keeps coming, values that never repeat (names, timestamps) pass through, and the
 * table keeps at most two generations' worth alive after the objects that held them are gone.
 * Not shared across threads; one per process, shared by its informers (the wiring makes it).
 */
export class StringTable {
  private readonly strings: Generations<string>;
  private readonly maxLength: number;

  constructor(o: StringTableOptions = {}) {
    // Each string is held under itself: the copy a lookup came with is not kept as a key.
    this.strings = new Generations({ maxEntries: o.maxEntries ?? 4096, maxChars: o.maxChars ?? 256 * 1024, storedKey: (s) => s });
    this.maxLength = o.maxLength ?? 8192;
  }

  /** The table's copy of `s` (now `s` itself if it had none, or if `s` is too long to keep). */
  intern(s: string): string {
    return s.length > this.maxLength ? s : this.strings.take(s, () => s);
  }

  /**
   * Replaces, in place, every string value in `value` (objects and arrays, recursively; not
   * property names, which are shared already, nor `uid` and `resourceVersion`) with the table's
   * copy. Frozen objects are left as they are: they are shared whole already (a
   * `SubtreeTable`'s). For plain data as `JSON.parse` makes it, owned by the caller (an
   * informer's object before it is cached); returns `value`.
   */
  internValues<T>(value: T): T {
    this.walk(value);
    return value;
  }

  /** How many strings the table holds now (both generations; one string may be in both). */
  size(): number {
    return this.strings.size();
  }

  private walk(value: unknown): void {
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        const v = value[i];
        if (typeof v === 'string') value[i] = this.intern(v);
        else if (v !== null && typeof v === 'object' && !Object.isFrozen(v)) this.walk(v);
      }
    } else if (value !== null && typeof value === 'object') {
      const o = value as Record<string, unknown>;
      for (const k in o) {
        const v = o[k];
        if (typeof v === 'string') {
          if (!UNIQUE_FIELDS.has(k)) o[k] = this.intern(v);
        } else if (v !== null && typeof v === 'object' && !Object.isFrozen(v)) {
          this.walk(v);
        }
      }
    }
  }
}
