import type { KubeConfig, KubernetesObject } from '@kubernetes/client-node';
import type { Clock } from '../core/clock.js';
import type { Logger } from '../core/logger.js';
import type { Metrics } from '../core/metrics.js';
import type { CacheBudget } from './cache-budget.js';
import { Informer, type InformerOptions } from './informer.js';
import type { StringTable } from './string-table.js';
import type { SubtreeTable } from './subtree-table.js';

/**
 * What a part asks a cluster's caches for: one collection, through its selectors, and what the
 * cache keeps of it (see {@link InformerOptions} for each field).
 */
export interface CacheRequest<T extends KubernetesObject> {
  /** Short name for logs and metrics, e.g. `proxies`. */
  name: string;
  /** Collection path, e.g. `/api/v1/pods`. */
  resource: string;
  list: InformerOptions<T>['list'];
  labelSelector?: string;
  /** A function (a selector that changes while the cache runs) makes a cache no other request shares. */
  fieldSelector?: InformerOptions<T>['fieldSelector'];
  transform?: (obj: T) => T;
  keep?: (obj: T) => boolean;
  /** Merged with those of the other requests for the same collection, until the cache starts. */
  indexers?: Record<string, (obj: T) => string[]>;
  /** Which parts of each cached object to share with the others' (for pods, `sharePodParts`). */
  share?: (obj: T, table: SubtreeTable, previous: T | undefined) => void;
  /**
   * True for a cache that parts every replica runs read outside of any runnable's start (the
   * extender's, the binder's): the manager starts it with the always-on runnables, and the
   * replica is not ready before it has synced.
   */
  everyReplica?: boolean;
}

/** What every informer of the process shares: the tables of repeated values, logs, the clock, metrics. */
export interface InformerServices {
  strings?: StringTable;
  subtrees?: SubtreeTable;
  logger: Logger;
  clock: Clock;
  metrics?: Metrics;
}

/** One cluster, as its caches see it. */
export interface CacheCluster {
  /** For logs. */
  name: string;
  kubeConfig: KubeConfig;
  /** What the cluster's caches may hold together (a target's; see `CacheBudget`). */
  budget?: CacheBudget;
}

interface Entry {
  informer: Informer<KubernetesObject>;
  request: CacheRequest<KubernetesObject>;
  /** The indexers the informer was given: those of every request, merged. */
  indexers: Record<string, (obj: KubernetesObject) => string[]>;
}

/**
 * The caches of one cluster (controller-runtime's cache of a cluster): one informer per watched
 * collection and selectors, whoever asks for it. Two parts that ask for the same collection
 * through the same selectors get the same informer, so it is listed and watched once; they must
 * then agree on what it keeps (the same transform, keep and share functions), and their indexers
 * are merged. The manager starts and stops the informers (see `Manager`).
 */
export class ClusterCaches {
  private readonly entries = new Map<string | object, Entry>();
  private frozen = false;

  constructor(
    readonly cluster: CacheCluster,
    private readonly services: InformerServices,
  ) {}

  /** The cache of `request`'s collection, made on the first request for it. */
  informer<T extends KubernetesObject>(request: CacheRequest<T>): Informer<T> {
    const req = request as unknown as CacheRequest<KubernetesObject>;
    // A selector that changes cannot be compared: such a request is its own.
    const key = typeof req.fieldSelector === 'function' ? {} : JSON.stringify([req.resource, req.labelSelector ?? '', req.fieldSelector ?? '']);
    const existing = this.entries.get(key);
    if (existing) {
      const other = existing.request;
      for (const field of ['transform', 'keep', 'share'] as const) {
        if (other[field] !== req[field]) throw new Error(`cache ${req.name}: ${req.resource} is already cached as ${other.name}, with another ${field}`);
      }
      this.addIndexers(existing, req);
      if (req.everyReplica) other.everyReplica = true;
      return existing.informer as unknown as Informer<T>;
    }
    if (this.frozen) throw new Error(`cache ${req.name}: asked for after the caches of ${this.cluster.name} started`);
    const { strings, subtrees, logger, clock, metrics } = this.services;
    const indexers: Entry['indexers'] = {};
    const informer = new Informer<KubernetesObject>({
      name: req.name,
      cluster: this.cluster.name,
      kubeConfig: this.cluster.kubeConfig,
      path: req.resource,
      list: req.list,
      labelSelector: req.labelSelector,
      fieldSelector: req.fieldSelector,
      transform: req.transform,
      keep: req.keep,
      indexers,
      strings,
      share: req.share && subtrees && { table: subtrees, parts: req.share },
      budget: this.cluster.budget,
      logger,
      clock,
      metrics,
    });
    const entry = { informer, request: { ...req }, indexers };
    this.addIndexers(entry, req);
    this.entries.set(key, entry);
    return informer as unknown as Informer<T>;
  }

  /** Every cache made so far. */
  all(): Informer<KubernetesObject>[] {
    return [...this.entries.values()].map((e) => e.informer);
  }

  /** The caches asked for with `everyReplica`. */
  everyReplica(): Informer<KubernetesObject>[] {
    return [...this.entries.values()].filter((e) => e.request.everyReplica).map((e) => e.informer);
  }

  /**
   * From now on no request may make a cache (no one would start it) nor add indexers to one (a
   * started cache would not have indexed what it holds).
   */
  freeze(): void {
    this.frozen = true;
  }

  /** Stops every cache. */
  stop(): void {
    for (const e of this.entries.values()) e.informer.stop();
  }

  private addIndexers(entry: Entry, req: CacheRequest<KubernetesObject>): void {
    for (const [index, values] of Object.entries(req.indexers ?? {})) {
      if (entry.indexers[index] === values) continue;
      if (index in entry.indexers) throw new Error(`cache ${req.name}: index ${index} is already defined otherwise`);
      if (this.frozen) throw new Error(`cache ${req.name}: index ${index} asked for after the caches started`);
      entry.indexers[index] = values;
    }
  }
}
