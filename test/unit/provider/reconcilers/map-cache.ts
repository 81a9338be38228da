import type { ObjectCache } from '../../../../provider/reconcilers/object-cache.js';

/** An informer cache stand-in for reconciler tests: objects by namespace and name, in a Map. */
export class MapCache<T extends { metadata?: { name?: string; namespace?: string } }> implements ObjectCache<T> {
  readonly items = new Map<string, T>();
  constructor(...objs: T[]) {
    for (const o of objs) this.put(o);
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
