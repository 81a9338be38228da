import type { KubeConfig, KubernetesListObject, KubernetesObject } from '@kubernetes/client-node';
import type { Clock, ClockTimer } from '../core/clock.js';
import { CacheBudgetExceededError, estimateHeapBytes, type CacheBudget } from './cache-budget.js';
import { errorFields, type Logger } from '../core/logger.js';
import type { Metrics } from '../core/metrics.js';
import { LineWatch } from './line-watch.js';
import { forEachPage } from './pager.js';
import type { StringTable } from './string-table.js';
import type { SubtreeTable } from './subtree-table.js';

/** `.../namespaces/<ns>/<resource>`: a path of one namespace's objects. */
const NAMESPACED_PATH = /\/namespaces\/([^/]+)\/[^/]+$/;

export interface InformerOptions<T extends KubernetesObject> {
  /** Short name for logs and metrics, e.g. `proxies`. */
  name: string;
  /** Cluster the objects come from, for logs. */
  cluster: string;
  kubeConfig: KubeConfig;
  /** Collection path, e.g. `/api/v1/pods`. */
  path: string;
  /**
   * Lists one page of the collection with the selectors the watch will use: at most `limit`
   * objects, from where `_continue` (the last page's `metadata.continue`) says, as client-node's
   * list calls take them.
   */
  list: (query: ListQuery) => Promise<KubernetesListObject<T>>;
  /** Objects asked for per page of a list (default 500, `DEFAULT_PAGE_SIZE` of the pager). */
  pageSize?: number;
  /**
   * What this informer's cache may hold together with the others sharing the budget (a
   * target's). Without one, the cache holds whatever the server names (the source cluster's
   * informers: our own cluster). With one, an object or a list that would pass it is refused
   * (see {@link Informer}).
   */
  budget?: CacheBudget;
  labelSelector?: string;
  /**
   * The server-side field selector; a function for one that changes while the informer runs,
   * read at each relist (see {@link Informer.reselect}).
   */
  fieldSelector?: string | (() => string);
  logger: Logger;
  clock: Clock;
  metrics?: Metrics;
  /** Restart a watch that has seen nothing, not even a bookmark, for this long (default 5 min). */
  idleRestartMs?: number;
  /** Starts watches; tests may pass a fake. Defaults to a {@link LineWatch} on `kubeConfig`. */
  watch?: WatchStarter;
  /**
   * Applied to every object before it is cached or handed to handlers, to keep only what is
   * used (memory grows with the objects cached, not with what the code reads of them). Must
   * keep `metadata.name`, `namespace` and `resourceVersion`. `metadata.managedFields` is
   * dropped before it, in every informer (see {@link Informer}).
   */
  transform?: (obj: T) => T;
  /**
   * Which objects to cache, asked after the transform: one it refuses is neither cached nor
   * handed to handlers, and one cached before that it now refuses (on an update or a relist)
   * leaves the cache with a `delete` event. For a selection the server cannot make (no label or
   * field selector says it), so that the cache grows with what is used, not with the cluster.
   */
  keep?: (obj: T) => boolean;
  /**
   * Secondary indexes, as client-go's Indexers: by index name, the values under which
   * {@link Informer.byIndex} finds an object (of what is cached, after the transform). Kept
   * current with the cache on every add, update and delete, so a lookup costs what it finds, not
   * a walk of the cache.
   */
  indexers?: Record<string, (obj: T) => string[]>;
  /**
   * Where the string values of each object about to be cached are shared with those of the
   * objects cached before (see {@link StringTable}); one per process, for all its informers.
   */
  strings?: StringTable;
  /**
   * Gives parts of each object about to be cached the copies a table holds of the same parts
   * of objects cached before (see {@link SubtreeTable}; for pods, `sharePodParts`), with the
   * table: one per process, for all its informers. Asked after the transform and `keep`, before
   * the strings are shared; the parts it shares are frozen. `previous` is the version of the
   * same object cached until now, if any: a part equal to its counterpart there can take that
   * (already shared) part without a lookup (see {@link SubtreeTable.share}).
   */
  share?: { table: SubtreeTable; parts: (obj: T, table: SubtreeTable, previous: T | undefined) => void };
}

/** What the informer needs to watch: a {@link LineWatch}, or a fake in tests. */
export interface WatchStarter {
  watch(path: string, query: Record<string, string | number | boolean | undefined>, onEvent: (type: string, obj: unknown) => void, done: (err: unknown) => void): Promise<{ abort(): void }>;
}

/** One page of a list: the selectors, and where the page starts (see {@link InformerOptions.list}). */
export interface ListQuery {
  labelSelector?: string;
  fieldSelector?: string;
  limit: number;
  _continue?: string;
}

type Handler<T> = (obj: T) => void;

/** The server ends each watch after 5 to 10 minutes (as client-go does), so none lives forever. */
const WATCH_TIMEOUT_MIN_S = 300;

/**
 * A cache of one kind of object in one cluster, kept current by list + watch.
 *
 * The loop: list (replacing the cache, with `delete` events for what vanished), then watch from
 * the list's resourceVersion, re-watching from the last seen version when the server ends the
 * watch, and relisting on 410 Gone. Any failure restarts the loop after a capped exponential
 * backoff (1 s to 30 s, with jitter) that resets once a watch has worked: it sent an event or a
 * bookmark, or lasted a second before the server ended it. A watch silent for longer than
 * `idleRestartMs` (bookmarks count as activity) is assumed half-open and restarted.
 *
 * No answer of the server makes it loop without that backoff: a 410 within a second of the last
 * list, and a watch the server ends within a second of its start, are failures (client-go's
 * reflector takes a "very short watch" for one too, when it brought nothing). So it lists, and
 * watches, at most about once a second, whatever a server answers. A failure relists, but for a
 * short watch that brought a newer version: the watch after the backoff goes on from it (an
 * apiserver closes the watch of a watcher that falls behind, and a list of the whole collection
 * would add to the load that made it fall behind).
 *
 * A list comes in pages ({@link InformerOptions.pageSize} objects each, as client-go's pager
 * asks), each page kept as the cache would keep it before the next is asked for: a list holds
 * about what the cache will, and no answer need be bigger than a page. With a budget (a
 * target's informers share one), each object cached counts its estimated size; an object a watch
 * sends that would pass the budget is not taken, and a list that would is not finished, with
 * the refusal noted in the budget: both are failures (the informer lists again after its
 * backoff, and the refusal stands until a list fits). The cache keeps what it had meanwhile.
 *
 * Objects are cached without `metadata.managedFields`, then through the `transform` if any, and
 * only those that `keep` (if any) accepts. An informer of a namespaced path
 * (`.../namespaces/<ns>/<resource>`) takes objects of that namespace only: a target's server is
 * whoever wrote the Target's kubeconfig, and what its answers say of other namespaces must not
 * reach the reconcilers (they would act there in the source).
 *
 * Each attempt carries a generation number: callbacks of an attempt that was superseded (our
 * own aborts included) are ignored, so a restart can never disturb the attempt that follows it.
 */
export class Informer<T extends KubernetesObject> {
  private readonly handlers: Record<'add' | 'update' | 'delete', Handler<T>[]> = { add: [], update: [], delete: [] };
  private readonly cache = new Map<string, T>();
  /**
   * By index name, then value: the cache key of the object found under it, or a Set of keys
   * when there are several (most values of our indexes name one object: a Set each would cost
   * about 150 bytes per cached object).
   */
  private readonly indexes = new Map<string, Map<string, string | Set<string>>>();
  private readonly watcher: WatchStarter;
  private running = false;
  private synced = false;
  private failures = 0;
  private generation = 0;
  private resourceVersion = '';
  private request?: { abort(): void };
  private restartTimer?: ClockTimer;
  private idleTimer?: ClockTimer;
  private lastError?: { message: string; atMs: number };
  /** When the last list succeeded (the informer's clock), or never. */
  private listedAtMs = -Infinity;
  /** The field selector of the last list, which its watches go on with. */
  private fieldSelectorInUse?: string;
  /** With a budget: the estimated size of each cached object, by key, and their sum. */
  private readonly sizes?: Map<string, number>;
  private held = 0;

  /** The namespace of a namespaced path, the only one whose objects are taken. */
  private readonly scope?: string;

  constructor(private readonly o: InformerOptions<T>) {
    this.watcher = o.watch ?? new LineWatch(o.kubeConfig);
    this.scope = NAMESPACED_PATH.exec(o.path)?.[1];
    if (o.budget) this.sizes = new Map();
  }

  get name(): string {
    return this.o.name;
  }

  on(verb: 'add' | 'update' | 'delete', handler: Handler<T>): void {
    this.handlers[verb].push(handler);
  }

  /** Removes a handler that `on` added (each time it was added). */
  off(verb: 'add' | 'update' | 'delete', handler: Handler<T>): void {
    this.handlers[verb] = this.handlers[verb].filter((h) => h !== handler);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    void this.attempt(true);
  }

  /**
   * Lists and watches again, now, if the field selector (a function) says otherwise than at the
   * last list: what the cache holds is then what the new selector selects (objects it leaves
   * out leave the cache with `delete` events). A restart already waiting (backoff) uses it.
   */
  reselect(): void {
    if (!this.running || this.restartTimer || this.fieldSelectorNow() === this.fieldSelectorInUse) return;
    void this.attempt(true);
  }

  private fieldSelectorNow(): string | undefined {
    const f = this.o.fieldSelector;
    return typeof f === 'function' ? f() : f;
  }

  /**
   * Stops listing and watching. The cache stays as it was, but what it holds no longer counts
   * in the budget (the informer is being let go; one started again counts its cache afresh).
   */
  stop(): void {
    this.running = false;
    this.generation++;
    this.clearTimers();
    this.abortRequest();
    if (this.o.budget) {
      this.o.budget.add(-this.held);
      this.o.budget.clear(this.o.name);
      this.sizes!.clear();
      this.held = 0;
    }
  }

  get(name: string, namespace?: string): T | undefined {
    return this.cache.get(keyOf(namespace, name));
  }

  list(namespace?: string): T[] {
    const all = [...this.cache.values()];
    return namespace === undefined ? all : all.filter((o) => o.metadata?.namespace === namespace);
  }

  /**
   * The cached objects that index `index` (one of `indexers`) puts under `value`, in no
   * particular order. Throws for an index the informer was not given.
   */
  byIndex(index: string, value: string): T[] {
    if (!this.o.indexers?.[index]) throw new Error(`informer ${this.o.name} has no index ${index}`);
    const keys = this.indexes.get(index)?.get(value);
    if (keys === undefined) return [];
    if (typeof keys === 'string') return [this.cache.get(keys)!];
    return [...keys].map((k) => this.cache.get(k)!);
  }

  hasSynced(): boolean {
    return this.synced;
  }

  /**
   * The newest resourceVersion the cache has taken in (of a list, an event or a bookmark): the
   * cache reflects every change of the watched objects up to it. Empty before the first list.
   */
  lastResourceVersion(): string {
    return this.resourceVersion;
  }

  health(): { ok: boolean; lastError?: string; lastErrorAt?: number } {
    return { ok: this.synced && !this.restartTimer, lastError: this.lastError?.message, lastErrorAt: this.lastError?.atMs };
  }

  /** One list (when needed) + watch attempt; every callback checks it is still current. */
  private async attempt(relist: boolean): Promise<void> {
    const gen = ++this.generation;
    const current = () => this.running && gen === this.generation;
    this.abortRequest();
    try {
      if (relist || !this.resourceVersion) {
        const fieldSelector = this.fieldSelectorNow();
        this.fieldSelectorInUse = fieldSelector;
        const list = await this.listPages(fieldSelector, current);
        if (!list) return;
        this.replace(list.items);
        this.o.budget?.clear(this.o.name);
        this.resourceVersion = list.resourceVersion;
        this.synced = true;
        this.listedAtMs = this.o.clock.now();
      }
      this.touch(gen);
      const watchedAt = this.o.clock.now();
      const watchedFrom = this.resourceVersion;
      const query: Record<string, string | number | boolean | undefined> = {
        resourceVersion: this.resourceVersion,
        allowWatchBookmarks: true,
        timeoutSeconds: WATCH_TIMEOUT_MIN_S + Math.floor(Math.random() * WATCH_TIMEOUT_MIN_S),
        labelSelector: this.o.labelSelector,
        fieldSelector: this.fieldSelectorInUse,
      };
      const request = await this.watcher.watch(
        this.o.path,
        query,
        (type, obj) => {
          if (current()) this.onWatchEvent(gen, type, obj);
        },
        (err) => {
          if (!current()) return;
          this.request = undefined;
          if (statusOf(err) === 410) {
            this.gone(err);
          } else if (err) {
            this.fail(err);
          } else if (this.o.clock.now() - watchedAt < 1000) {
            // One that brought a newer version (the apiserver closes the watch of a watcher that
            // falls behind, often mid-burst) goes on from it after the backoff: a list would
            // add the whole collection to the load that closed it.
            this.fail(new Error(`the server ended the watch of ${this.o.path} within a second of its start`), { relist: this.resourceVersion === watchedFrom });
          } else {
            // The server ended the watch (its timeout): carry on from the last version seen.
            this.failures = 0;
            void this.attempt(false);
          }
        },
      );
      if (current()) this.request = request;
      else request.abort();
    } catch (err) {
      if (current()) this.fail(err);
    }
  }

  private onWatchEvent(gen: number, type: string, raw: unknown): void {
    this.touch(gen);
    const obj = raw as T & { code?: number; status?: string };
    if (type !== 'ERROR') this.failures = 0;
    switch (type) {
      case 'ADDED':
      case 'MODIFIED':
        this.upsert(obj);
        break;
      case 'DELETED': {
        this.remember(obj);
        if (this.outOfScope(obj)) break;
        const key = keyOf(obj.metadata?.namespace, obj.metadata?.name ?? '');
        const old = this.cache.get(key);
        this.evict(key);
        if (old) {
          this.emit('delete', old);
        } else {
          // Not cached: a delete the handlers may still need (it came before the list), unless refused.
          const kept = this.keep(obj);
          if (!this.o.keep || this.o.keep(kept)) this.emit('delete', kept);
        }
        break;
      }
      case 'BOOKMARK':
        this.remember(obj);
        break;
      case 'ERROR': {
        // A Status in the stream: 410 means our version is too old to resume from. Either way
        // the watch is over; what follows aborts it once this attempt is superseded.
        const err = Object.assign(new Error(`watch error: ${(obj as { message?: string }).message ?? 'unknown'}`), { statusCode: obj.code });
        if (obj.code === 410) this.gone(err);
        else this.fail(err);
        break;
      }
    }
  }

  /**
   * 410 Gone: the watch's version is too old, so relist, at once; unless the last list is less
   * than a second old, where another would likely meet the same answer (a server whose watch
   * lags its list, or one that answers so on purpose): that is a failure, with its backoff.
   */
  private gone(err: unknown): void {
    if (this.o.clock.now() - this.listedAtMs < 1000) this.fail(err);
    else void this.attempt(true);
  }

  /**
   * Lists the collection page by page (see `forEachPage`), keeping of each page what the cache
   * would keep (so that a list holds what the cache will, not the pages it came in). With a
   * budget, the list fails once what it keeps, with what the other informers of the budget hold,
   * would pass it. Undefined when the attempt was superseded meanwhile.
   */
  private async listPages(fieldSelector: string | undefined, current: () => boolean): Promise<{ items: Kept<T>[]; resourceVersion: string } | undefined> {
    const items: Kept<T>[] = [];
    let bytes = 0;
    const resourceVersion = await forEachPage(
      (limit, from) => this.o.list({ labelSelector: this.o.labelSelector, fieldSelector, limit, _continue: from }),
      (objects) => {
        for (const raw of objects) {
          const obj = this.prepare(raw);
          if (obj === undefined) continue;
          const size = this.sizes ? estimateHeapBytes(obj) : 0;
          items.push({ obj, size });
          bytes += size;
        }
        if (this.o.budget && !this.o.budget.fits(bytes, this.held)) this.overBudget(`listing ${this.o.path} (${items.length} objects kept so far)`);
      },
      { what: this.o.path, pageSize: this.o.pageSize, current },
    );
    return resourceVersion === undefined ? undefined : { items, resourceVersion };
  }

  /**
   * Refuses what would pass the budget: noted in the budget (the target's status says it) and
   * thrown, a failure like any other (the informer starts again after its backoff, with a list).
   */
  private overBudget(what: string): never {
    const budget = this.o.budget!;
    const message = `the target's objects would pass the provider's cache budget of ${Math.round(budget.limitBytes / 2 ** 20)} MiB (--target-cache-budget-mib), ${what}; informer ${this.o.name} stopped taking them`;
    budget.refuse(this.o.name, message);
    throw new CacheBudgetExceededError(message);
  }

  /** Replaces the cache with a fresh list: adds, updates (new resourceVersion) and deletes. */
  private replace(items: Kept<T>[]): void {
    const seen = new Set<string>();
    for (const { obj, size } of items) {
      const key = keyOf(obj.metadata?.namespace, obj.metadata?.name ?? '');
      seen.add(key);
      const old = this.cache.get(key);
      this.store(key, obj, size);
      if (!old) this.emit('add', obj);
      else if (old.metadata?.resourceVersion !== obj.metadata?.resourceVersion) this.emit('update', obj);
    }
    for (const [key, old] of [...this.cache]) {
      if (seen.has(key)) continue;
      this.evict(key);
      this.emit('delete', old);
    }
  }

  /** What the cache would keep of `raw` (see {@link keep}), or undefined: out of scope or refused by `keep`. */
  private prepare(raw: T): T | undefined {
    if (this.outOfScope(raw)) return undefined;
    const obj = this.keep(raw);
    return this.o.keep && !this.o.keep(obj) ? undefined : obj;
  }

  /**
   * What is cached of an object the server sent: no `metadata.managedFields` (nothing of ours
   * reads them, and for a pod they are a good part of its size and of what each event makes the
   * garbage collector walk), then the informer's transform. The object is freshly parsed and
   * ours, so it is changed in place. Writes built from a cached object (an update of a proxy's
   * status) lose nothing by it: the apiserver keeps the live object's managedFields when an
   * update carries none.
   */
  private keep(raw: T): T {
    if (raw.metadata?.managedFields) delete raw.metadata.managedFields;
    return this.o.transform ? this.o.transform(raw) : raw;
  }

  /** Whether `obj` is of another namespace than the namespaced path's (see the class). */
  private outOfScope(obj: T): boolean {
    return this.scope !== undefined && obj.metadata?.namespace !== this.scope;
  }

  /** An object a watch sent (added or modified). */
  private upsert(raw: T): void {
    if (this.outOfScope(raw)) {
      this.remember(raw);
      return;
    }
    const obj = this.keep(raw);
    const key = keyOf(obj.metadata?.namespace, obj.metadata?.name ?? '');
    const old = this.cache.get(key);
    if (this.o.keep && !this.o.keep(obj)) {
      this.remember(obj);
      if (old) {
        this.evict(key);
        this.emit('delete', old);
      }
      return;
    }
    const size = this.sizes ? estimateHeapBytes(obj) : 0;
    if (this.o.budget && !this.o.budget.fits(size, this.sizes!.get(key) ?? 0)) {
      try {
        this.overBudget(`at ${obj.metadata?.namespace ? `${obj.metadata.namespace}/` : ''}${obj.metadata?.name ?? ''}`);
      } catch (err) {
        // Not taken, and its version not remembered: the list after the backoff says what is there.
        this.fail(err);
        return;
      }
    }
    this.remember(obj);
    this.store(key, obj, size);
    if (!old) this.emit('add', obj);
    else if (old.metadata?.resourceVersion !== obj.metadata?.resourceVersion) this.emit('update', obj);
  }

  /** Caches `obj` under `key`, in place of what was there, and in the indexes; `size` counts in the budget. */
  private store(key: string, obj: T, size: number): void {
    const previous = this.cache.get(key);
    this.evict(key);
    if (this.sizes) {
      this.sizes.set(key, size);
      this.held += size;
      this.o.budget!.add(size);
    }
    if (this.o.share) this.o.share.parts(obj, this.o.share.table, previous);
    this.o.strings?.internValues(obj);
    this.cache.set(key, obj);
    for (const [index, values] of Object.entries(this.o.indexers ?? {})) {
      let byValue = this.indexes.get(index);
      if (!byValue) this.indexes.set(index, (byValue = new Map()));
      for (const v of values(obj)) {
        const keys = byValue.get(v);
        if (keys === undefined) byValue.set(v, key);
        else if (typeof keys !== 'string') keys.add(key);
        else if (keys !== key) byValue.set(v, new Set([keys, key]));
      }
    }
  }

  /** Removes what is cached under `key`, and from the indexes (under the values it was stored with). */
  private evict(key: string): void {
    const old = this.cache.get(key);
    if (!old) return;
    this.cache.delete(key);
    const size = this.sizes?.get(key);
    if (size !== undefined) {
      this.sizes!.delete(key);
      this.held -= size;
      this.o.budget!.add(-size);
    }
    for (const [index, values] of Object.entries(this.o.indexers ?? {})) {
      const byValue = this.indexes.get(index);
      for (const v of values(old)) {
        const keys = byValue?.get(v);
        if (keys === key) byValue!.delete(v);
        else if (keys instanceof Set) {
          keys.delete(key);
          if (keys.size === 1) byValue!.set(v, keys.values().next().value!);
        }
      }
    }
  }

  private remember(obj: KubernetesObject): void {
    const rv = obj.metadata?.resourceVersion;
    if (rv) this.resourceVersion = rv;
  }

  private emit(verb: 'add' | 'update' | 'delete', obj: T): void {
    for (const h of this.handlers[verb]) {
      try {
        h(obj);
      } catch (err) {
        this.o.logger.error('informer handler threw', { informer: this.o.name, verb, ...errorFields(err) });
      }
    }
  }

  private fail(err: unknown, o: { relist: boolean } = { relist: true }): void {
    if (!this.running || this.restartTimer) {
      this.abortRequest();
      return;
    }
    // Nothing of the failed attempt may act any more: not even the abort that follows, whose
    // callback (at once, with LineWatch) would otherwise be taken for the failure.
    this.generation++;
    this.abortRequest();
    this.failures++;
    const delay = Math.min(30_000, 1000 * 2 ** Math.min(this.failures - 1, 5));
    const jittered = Math.round(delay * (1 + 0.2 * Math.random()));
    this.lastError = { message: errorFields(err).error, atMs: this.o.clock.now() };
    this.o.logger.warn('informer failed; restarting', { informer: this.o.name, cluster: this.o.cluster, retryInMs: jittered, ...errorFields(err) });
    this.o.metrics?.informerRestarts.inc({ informer: this.o.name });
    if (this.idleTimer) this.o.clock.clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    this.restartTimer = this.o.clock.setTimeout(() => {
      this.restartTimer = undefined;
      // A relist after a failure (events may have been missed), unless the server ended the
      // watch cleanly: what it sent up to the last version seen is all there was.
      void this.attempt(o.relist);
    }, jittered);
  }

  /** Re-arms the idle watchdog for attempt `gen`. */
  private touch(gen: number): void {
    if (this.idleTimer) this.o.clock.clearTimeout(this.idleTimer);
    this.idleTimer = this.o.clock.setTimeout(
      () => {
        this.idleTimer = undefined;
        if (!this.running || gen !== this.generation) return;
        this.o.logger.debug('informer idle; restarting its watch', { informer: this.o.name, cluster: this.o.cluster });
        void this.attempt(false);
      },
      this.o.idleRestartMs ?? 5 * 60_000 + WATCH_TIMEOUT_MIN_S * 1000,
    );
  }

  private abortRequest(): void {
    const r = this.request;
    this.request = undefined;
    try {
      r?.abort();
    } catch {
      /* already closed */
    }
  }

  private clearTimers(): void {
    if (this.restartTimer) this.o.clock.clearTimeout(this.restartTimer);
    if (this.idleTimer) this.o.clock.clearTimeout(this.idleTimer);
    this.restartTimer = this.idleTimer = undefined;
  }
}

/** An object as the cache would keep it, with its estimated size (0 without a budget). */
interface Kept<T> {
  obj: T;
  size: number;
}

function keyOf(namespace: string | undefined, name: string): string {
  return namespace ? `${namespace}/${name}` : name;
}

function statusOf(err: unknown): number | undefined {
  const e = err as { statusCode?: number; code?: number };
  return e?.statusCode ?? (typeof e?.code === 'number' ? e.code : undefined);
}
