import type { ObjectCache } from '../../../../provider/controller/object-cache.js';

/** An informer cache stand-in for reconciler tests: objects by namespace and name, in a Map. */
export class MapCache<T extends { metadata?: { name?: string; namespace?: string } }> implements ObjectCache<T> {
  readonly items = new Map<string, T>();
  private readonly indexers: Record<string, (obj: T) => string[]> = {};
  constructor(...objs: T[]) {
    for (const o of objs) this.put(o);
  }
  /** Adds an index, as an informer's `indexers` would (computed on every lookup). */
  withIndex(index: string, of: (obj: T) => string[]): this {
    this.indexers[index] = of;
    return this;
  }
  byIndex(index: string, value: string): T[] {
    const of = this.indexers[index];
    if (!of) throw new Error(`MapCache has no index ${index}`);
    return [...this.items.values()].filter((o) => of(o).includes(value));
  }
  put(obj: T): void {
    this.items.set(`${obj.metadata?.namespace ?? ''}/${obj.metadata?.name}`, obj);
  }
  remove(obj: T): void {
    this.items.delete(`${obj.metadata?.namespace ?? ''}/${obj.metadata?.name}`);
  }
  get(name: string, namespace?: string): T | undefined {
    return this.items.get(`${namespace ?? ''}/${name}`);
  }
  list(namespace?: string): T[] {
    return [...this.items.values()].filter((o) => namespace === undefined || o.metadata?.namespace === namespace);
  }
}
