/** Read access to an informer's cache: all a reconciler needs, and easy to fake in tests. */
export interface ObjectCache<T> {
  get(name: string, namespace?: string): T | undefined;
  list(namespace?: string): T[];
}
