import type { KubernetesObject } from '@kubernetes/client-node';
import type { Clock } from '../core/clock.js';
import { TerminalError } from '../core/errors.js';
import { errorFields, type Logger } from '../core/logger.js';
import type { Metrics } from '../core/metrics.js';
import type { Informer } from './informer.js';
import { WorkQueue, type WorkQueueShards } from './workqueue.js';

/** How often start() checks whether the watched informers have listed. */
const CACHE_SYNC_POLL_MS = 100;

const VERBS = ['add', 'update', 'delete'] as const;

/** A level-based reconciler: it sees only a key, never the event that woke it. */
export interface Reconciler {
  /** Throwing means retry with backoff; a TerminalError means log, count and drop. */
  reconcile(key: string): Promise<{ requeueAfterMs?: number } | void>;
}

export interface ControllerOptions {
  name: string;
  reconciler: Reconciler;
  workers?: number;
  /** Caps how many keys of one group (e.g. one target) the workers process at once. */
  shards?: WorkQueueShards;
  /** The longest wait before a failed key is tried again (default 5 min). */
  maxBackoffMs?: number;
  /** With sharding: which keys this replica may reconcile (see {@link ControllerGate}). */
  gate?: ControllerGate;
  clock: Clock;
  logger: Logger;
  metrics?: Metrics;
}

/**
 * Which of a controller's keys this replica reconciles, when targets are sharded across replicas:
 * a key belongs to one shard (a target's key, or undefined for the cluster-wide share), and only
 * the shard's owner reconciles it. A key of a shard this replica does not own is dropped when
 * a worker takes it (the owner saw the same event); a shard this replica claims is resynced
 * ({@link Controller.resync}), so nothing dropped before the claim is lost.
 */
export interface ControllerGate {
  shardOf(key: string): string | undefined;
  owns(shard: string | undefined): boolean;
}

/**
 * The one generic runner: informers -> key mappers -> workqueue -> workers. It owns the logging
 * and metrics of reconciles, so reconcilers only throw.
 */
export class Controller {
  readonly name: string;
  private readonly queue: WorkQueue;
  /** In-flight reconciles, with the shard each one writes (see {@link ControllerGate}). */
  private readonly inFlight = new Map<Promise<void>, string | undefined>();
  private workers: Promise<void>[] = [];
  private started = false;
  /** The informers this controller watches: its workers start once each has listed. */
  private readonly caches: Array<{ hasSynced(): boolean }> = [];
  /** Every watch's replay: what {@link resync} runs. */
  private readonly replays = new Set<() => void>();

  constructor(private readonly o: ControllerOptions) {
    this.name = o.name;
    const labels = { controller: o.name };
    this.queue = new WorkQueue(o.clock, {
      shards: o.shards,
      maxDelayMs: o.maxBackoffMs,
      hooks: {
        onAdd: () => o.metrics?.workqueueAdds.inc(labels),
        onRetry: () => o.metrics?.workqueueRetries.inc(labels),
        onDepth: (d) => o.metrics?.workqueueDepth.set(labels, d),
      },
    });
  }

  enqueue(key: string): void {
    this.queue.add(key);
  }

  enqueueAfter(key: string, ms: number): void {
    this.queue.addAfter(key, ms);
  }

  /**
   * Wires an informer's events to keys of this controller; start() waits for it to sync, unless
   * `waitForSync` is false: a cache that may never list (a target's, while the target is out of
   * reach) must not hold every other key, so its reconciler tells for itself whether it has
   * synced. Returns what undoes it: a stopped informer (a removed target's) is then no longer
   * waited for, and neither it nor its cache is kept alive by this controller.
   */
  watch<T extends KubernetesObject>(informer: Informer<T>, mapToKeys: (obj: T) => string[], opts: { waitForSync?: boolean } = {}): () => void {
    const waitsFor = opts.waitForSync !== false;
    if (waitsFor) this.caches.push(informer);
    const handler = (obj: T) => {
      let keys: string[] = [];
      try {
        keys = mapToKeys(obj);
      } catch (err) {
        this.o.logger.warn('key mapper failed', { controller: this.name, informer: informer.name, ...errorFields(err) });
      }
      for (const k of keys) this.queue.add(k);
    };
    for (const verb of VERBS) informer.on(verb, handler);
    const replay = () => {
      for (const obj of informer.list()) handler(obj);
    };
    this.replays.add(replay);
    return () => {
      this.replays.delete(replay);
      for (const verb of VERBS) informer.off(verb, handler);
      const i = waitsFor ? this.caches.indexOf(informer) : -1;
      if (i >= 0) this.caches.splice(i, 1);
    };
  }

  /**
   * Starts the workers once every watched informer holds its first list (as controller-runtime
   * waits for its caches). A reconcile that ran earlier would take an object not listed yet for
   * an object that is gone: after a restart, the targets reconciler woke by the virtual-nodes
   * informer deleted the virtual node of every Target whose informer had not listed yet. Keys
   * queue up meanwhile. Idempotent.
   */
  start(): void {
    if (this.started) return;
    this.started = true;
    const begin = () => {
      if (this.queue.isShuttingDown()) return;
      if (!this.caches.every((c) => c.hasSynced())) {
        this.o.clock.setTimeout(begin, CACHE_SYNC_POLL_MS);
        return;
      }
      for (let i = 0; i < (this.o.workers ?? 2); i++) this.workers.push(this.work());
    };
    begin();
  }

  private async work(): Promise<void> {
    for (;;) {
      const key = await this.queue.get();
      if (key === undefined) return;
      // A key handed to this worker just before stop() resumes it only after: drop that key.
      if (this.queue.isShuttingDown()) {
        this.queue.done(key);
        return;
      }
      const gate = this.o.gate;
      const shard = gate?.shardOf(key);
      if (gate && !gate.owns(shard)) {
        // Another replica's: it saw the same event. Claiming the shard resyncs it here.
        this.queue.forget(key);
        this.queue.done(key);
        continue;
      }
      const p = this.process(key);
      this.inFlight.set(p, shard);
      await p;
      this.inFlight.delete(p);
    }
  }

  /**
   * Enqueues the keys of every object the watched informers hold, as if each had just changed:
   * after this replica claims a shard, the keys it dropped while another replica owned it.
   */
  resync(): void {
    for (const replay of this.replays) replay();
  }

  /**
   * Resolves once no reconcile of `shard` is in flight. The gate must already refuse the shard
   * (its owner released it), so none starts after: then this controller cannot write it again.
   */
  async quiesce(shard: string | undefined): Promise<void> {
    const running = [...this.inFlight].filter(([, s]) => s === shard).map(([p]) => p);
    await Promise.all(running);
  }

  private async process(key: string): Promise<void> {
    const started = this.o.clock.now();
    const labels = { controller: this.name };
    try {
      const result = await this.o.reconciler.reconcile(key);
      this.queue.forget(key);
      this.o.metrics?.reconcileTotal.inc({ ...labels, result: 'success' });
      if (result?.requeueAfterMs) this.queue.addAfter(key, result.requeueAfterMs);
    } catch (err) {
      if (err instanceof TerminalError) {
        this.queue.forget(key);
        this.o.metrics?.reconcileTotal.inc({ ...labels, result: 'terminal' });
        this.o.logger.warn('reconcile failed; not retrying', { controller: this.name, key, ...errorFields(err) });
      } else {
        this.o.metrics?.reconcileTotal.inc({ ...labels, result: 'error' });
        const level = this.queue.failuresOf(key) >= 3 ? 'warn' : 'debug';
        this.o.logger.log(level, 'reconcile failed; retrying with backoff', { controller: this.name, key, failures: this.queue.failuresOf(key) + 1, ...errorFields(err) });
        this.queue.addRateLimited(key);
      }
    } finally {
      this.o.metrics?.reconcileDuration.observe(labels, (this.o.clock.now() - started) / 1000);
      this.queue.done(key);
    }
  }

  /** Stops taking keys and waits for in-flight reconciles, at most `deadlineMs`. */
  async stop(deadlineMs: number): Promise<void> {
    this.queue.shutDown();
    const all = Promise.all([...this.inFlight.keys()]).then(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([all, new Promise<void>((res) => (timer = setTimeout(res, deadlineMs)))]);
    clearTimeout(timer);
  }
}
