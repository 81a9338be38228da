export interface GenerationsOptions<V> {
  /** Entries per generation. */
  maxEntries: number;
  /** Characters of keys per generation. */
  maxChars: number;
  /**
   * The key an entry is held under once taken: the looked-up key by default. A table whose
   * values are their own keys (strings) holds each under the value, so that the copy a lookup
   * came with is not kept alive as a key.
   */
  storedKey?: (value: V, key: string) => string;
}

/**
 * A map bounded whatever goes into it, for tables of values that repeat (see `StringTable`,
 * `SubtreeTable`): two generations of at most `maxEntries` entries and `maxChars` characters of
 * keys each. An entry found in the older one moves to the newer, and when the newer is full the
 * older is dropped. So a value that keeps coming stays, values that never repeat pass through,
 * and at most two generations' worth stays alive after what held the values is gone.
 */
export class Generations<V> {
  private younger = new Map<string, V>();
  private older = new Map<string, V>();
  private youngerChars = 0;

  constructor(private readonly o: GenerationsOptions<V>) {}

  /** The value held under `key` (now in the newer generation), or `fresh()`, entered under it. */
  take(key: string, fresh: () => V): V {
    const young = this.younger.get(key);
    if (young !== undefined) return young;
    const value = this.older.get(key) ?? fresh();
    const stored = this.o.storedKey ? this.o.storedKey(value, key) : key;
    this.younger.set(stored, value);
    this.youngerChars += stored.length;
    if (this.younger.size >= this.o.maxEntries || this.youngerChars >= this.o.maxChars) {
      this.older = this.younger;
      this.younger = new Map();
      this.youngerChars = 0;
    }
    return value;
  }

  /** How many entries are held (both generations; one key may be in both). */
  size(): number {
    return this.younger.size + this.older.size;
  }
}
