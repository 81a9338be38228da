/**
 * `compute`, remembered per object: for a caller that asks again and again about the same
 * cached objects (an informer replaces a cached object on each change and never changes it, so
 * what follows from one object never changes). What is remembered is shared: the caller must not
 * change it. Held weakly: an object the caches dropped takes its entry with it. Each call makes a
 * memory of its own, so its owner decides how long it lives.
 */
export function perObject<T extends object, R>(compute: (o: T) => R): (o: T) => R {
  const memo = new WeakMap<T, R>();
  return (o) => {
    if (memo.has(o)) return memo.get(o) as R;
    const r = compute(o);
    memo.set(o, r);
    return r;
  };
}
