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
  clock: Clock;
  logger: Logger;
  metrics?: Metrics;
}

/**
 * The one generic runner: informers -> key mappers -> workqueue -> workers. It owns the logging
 * and metrics of reconciles, so reconcilers only throw.
 */
export class Controller {
  readonly name: string;
  private readonly queue: WorkQueue;
  private readonly inFlight = new Set<Promise<void>>();
  private workers: Promise<void>[] = [];
  private started = false;
  /** The informers this controller watches: its workers start once each has listed. */
  private readonly caches: Array<{ hasSynced(): boolean }> = [];

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
    return () => {
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
      const p = this.process(key);
      this.inFlight.add(p);
      await p;
      this.inFlight.delete(p);
    }
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
    const all = Promise.all([...this.inFlight]).then(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([all, new Promise<void>((res) => (timer = setTimeout(res, deadlineMs)))]);
    clearTimeout(timer);
  }
}
