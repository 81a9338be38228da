import type { KubeConfig } from '@kubernetes/client-node';
import type { CacheBudget } from './cache-budget.js';
import { ClusterCaches, type InformerServices } from './cluster-caches.js';

/** A target cluster as its caches see it (a `TargetClient` is one). */
export interface EngagedTarget {
  /** Stable across its clients, e.g. `Target/ns/name`. */
  readonly key: string;
  /** For logs. */
  readonly displayName: string;
  readonly kubeConfig: KubeConfig;
}

/**
 * What a part does when a target joins (multicluster-runtime's `Engage`): asks `caches` for the
 * informers it reads there and registers its watches on them. `signal` is aborted when the
 * target leaves (or its clients are replaced) and at shutdown: the part undoes its watches then.
 */
export type EngageHandler<T extends EngagedTarget> = (target: T, caches: ClusterCaches, signal: AbortSignal) => void;

interface Engagement {
  caches: ClusterCaches;
  controller: AbortController;
}

/**
 * The caches of each target, from the moment it joins until it leaves: one {@link ClusterCaches}
 * per target, made when the target is engaged, asked by every part's {@link EngageHandler} in
 * turn (so two parts that read the same collection share one informer), then started; stopped
 * when the target is disengaged. A target engaged again (new clients) first leaves.
 */
export class TargetCaches<T extends EngagedTarget> {
  private readonly handlers: EngageHandler<T>[] = [];
  private readonly engaged = new Map<string, Engagement>();
  private closed = false;

  constructor(private readonly services: InformerServices) {}

  /** Adds a part's handler; it is called for every target engaged from then on. */
  onEngage(handler: EngageHandler<T>): void {
    this.handlers.push(handler);
  }

  /**
   * A value per engaged target, made by `make` when it joins and forgotten when it leaves: what
   * a part reads of a target's caches, looked up by the target's key.
   */
  perTarget<V>(make: (target: T, caches: ClusterCaches) => V): (targetKey: string) => V | undefined {
    const values = new Map<string, V>();
    this.onEngage((target, caches, signal) => {
      values.set(target.key, make(target, caches));
      signal.addEventListener('abort', () => values.delete(target.key), { once: true });
    });
    return (key) => values.get(key);
  }

  /** The target joins: every handler asks for its caches, which then start. Ignored once closed. */
  engage(target: T, budget?: CacheBudget): void {
    if (this.closed) return;
    this.disengage(target.key);
    const caches = new ClusterCaches({ name: target.displayName, kubeConfig: target.kubeConfig, budget }, this.services);
    const controller = new AbortController();
    this.engaged.set(target.key, { caches, controller });
    for (const handler of this.handlers) handler(target, caches, controller.signal);
    caches.freeze();
    for (const informer of caches.all()) informer.start();
  }

  /** The target leaves: its handlers' signal is aborted, then its caches stop. */
  disengage(targetKey: string): void {
    const engagement = this.engaged.get(targetKey);
    if (!engagement) return;
    this.engaged.delete(targetKey);
    engagement.controller.abort();
    engagement.caches.stop();
  }

  /** The keys of the targets engaged now. */
  keys(): string[] {
    return [...this.engaged.keys()];
  }

  /** Every target leaves, and none joins from now on (shutdown). */
  close(): void {
    this.closed = true;
    for (const key of this.keys()) this.disengage(key);
  }
}
