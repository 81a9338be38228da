import type { Clock, ClockTimer } from '../core/clock.js';

export interface WorkQueueHooks {
  onAdd?(): void;
  onRetry?(): void;
  onDepth?(depth: number): void;
}

/**
 * Keys grouped by what they touch (for delegation: the target of a proxy), with a cap on how
 * many keys of one group are processed at once, so that one group whose calls hang (a target
 * that accepts connections and never answers) cannot hold every worker.
 */
export interface WorkQueueShards {
  /** The group of a key when it is handed out; undefined means no group (never held back). */
  of(key: string): string | undefined;
  /** Keys of one group processed at once, at most; at least 1. */
  maxInFlight: number;
}

/**
 * A deduplicating work queue of string keys. A key is never handed to two workers at once: a
 * key added while it is being processed is handed out again after `done`. Supports delayed adds
 * and per-key exponential backoff with jitter; time comes from the injected clock. With
 * `shards`, a key whose group is at its cap waits while later keys of other groups are handed
 * out.
 *
 * Held-back keys are set aside per group ("parked") when they reach the front, and a group's
 * parked keys go first when one of its slots frees: each key is looked at a bounded number of
 * times, so handing out a key costs the same with 10 queued keys as with 5000, even when most of
 * them wait for a full group. A parked key's group is asked again when it is handed out (a
 * proxy's target changes when it is bound); one whose group changed meanwhile waits at most
 * until its old group frees a slot.
 */
export class WorkQueue {
  /** Keys in arrival order from `head` on; the part before `head` is taken, dropped in batches. */
  private queue: string[] = [];
  private head = 0;
  /** Keys held back, by the group that was full when they reached the front, in arrival order. */
  private readonly parked = new Map<string, string[]>();
  /** Groups with parked keys and a free slot since: their parked keys go before the queue. */
  private readonly unblocked = new Set<string>();
  /** Every queued key, parked or not. */
  private readonly queued = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly delayed = new Map<string, { timer: ClockTimer; at: number }>();
  private waiters: ((key: string | undefined) => void)[] = [];
  private shuttingDown = false;
  /** Keys being processed per group, and the group each processing key was counted in. */
  private readonly inFlight = new Map<string, number>();
  private readonly groupOf = new Map<string, string>();

  constructor(
    private readonly clock: Clock,
    private readonly opts: { baseDelayMs?: number; maxDelayMs?: number; hooks?: WorkQueueHooks; random?: () => number; shards?: WorkQueueShards } = {},
  ) {}

  add(key: string): void {
    if (this.shuttingDown) return;
    this.opts.hooks?.onAdd?.();
    if (this.processing.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    this.queued.add(key);
    this.queue.push(key);
    this.opts.hooks?.onDepth?.(this.queued.size);
    this.serveWaiters();
  }

  /**
   * Marks `key` processing and counts it in its group if the group is under its cap; false
   * (nothing changed) when the group is full.
   */
  private admit(key: string, group = this.opts.shards?.of(key)): boolean {
    const shards = this.opts.shards;
    if (group !== undefined) {
      const n = this.inFlight.get(group) ?? 0;
      if (n >= Math.max(1, shards!.maxInFlight)) return false;
      this.inFlight.set(group, n + 1);
      this.groupOf.set(key, group);
    }
    this.processing.add(key);
    return true;
  }

  /**
   * The next key that {@link admit} lets through, taken out of the queue: first the parked keys
   * of groups that freed a slot, then the queue in order, parking the keys of full groups met on
   * the way.
   */
  private takeNext(): string | undefined {
    for (const group of this.unblocked) {
      this.unblocked.delete(group);
      const keys = this.parked.get(group) ?? [];
      for (let key = keys[0]; key !== undefined; key = keys[0]) {
        const now = this.opts.shards!.of(key);
        if (this.admit(key, now)) {
          keys.shift();
          if (!keys.length) this.parked.delete(group);
          // More may go: a later call looks at the rest.
          if (keys.length) this.unblocked.add(group);
          return this.taken(key);
        }
        // Full again: the rest wait for its next free slot.
        if (now === group) break;
        // Moved to another group, full too (a proxy got bound meanwhile): wait there.
        keys.shift();
        this.park(key, now!);
      }
      if (!keys.length) this.parked.delete(group);
    }
    for (let key = this.queue[this.head]; key !== undefined; key = this.queue[this.head]) {
      this.head++;
      this.compact();
      const group = this.opts.shards?.of(key);
      if (this.admit(key, group)) return this.taken(key);
      this.park(key, group!);
    }
    return undefined;
  }

  /** Sets a key whose group is full aside, under that group. */
  private park(key: string, group: string): void {
    const keys = this.parked.get(group);
    if (keys) keys.push(key);
    else this.parked.set(group, [key]);
  }

  private taken(key: string): string {
    this.queued.delete(key);
    this.opts.hooks?.onDepth?.(this.queued.size);
    return key;
  }

  /** Drops the taken part of the queue once it is most of it (amortized O(1) per key). */
  private compact(): void {
    if (this.head >= 1024 && this.head * 2 >= this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
  }

  /** Hands out keys to waiting workers while any may go. */
  private serveWaiters(): void {
    while (this.waiters.length && !this.shuttingDown) {
      const next = this.takeNext();
      if (next === undefined) break;
      this.waiters.shift()!(next);
    }
  }

  /** Adds the key after `ms`; an earlier pending delayed add of the same key wins. */
  addAfter(key: string, ms: number): void {
    if (this.shuttingDown) return;
    if (ms <= 0) return this.add(key);
    const at = this.clock.now() + ms;
    const pending = this.delayed.get(key);
    if (pending && pending.at <= at) return;
    if (pending) this.clock.clearTimeout(pending.timer);
    const timer = this.clock.setTimeout(() => {
      this.delayed.delete(key);
      this.add(key);
    }, ms);
    this.delayed.set(key, { timer, at });
  }

  /** Adds the key after its backoff: base * 2^failures, capped, with up to 10 % jitter. */
  addRateLimited(key: string): void {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    this.opts.hooks?.onRetry?.();
    const base = this.opts.baseDelayMs ?? 500;
    const max = this.opts.maxDelayMs ?? 5 * 60_000;
    const delay = Math.min(max, base * 2 ** Math.min(n, 30));
    const jitter = delay * 0.1 * (this.opts.random ?? Math.random)();
    this.addAfter(key, Math.round(delay + jitter));
  }

  /** Resets the key's backoff. */
  forget(key: string): void {
    this.failures.delete(key);
  }

  failuresOf(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  /** Next key to process, waiting for one; undefined once shut down. */
  get(): Promise<string | undefined> {
    // Keys still queued at shut down are dropped, not handed out: stop means stop writing.
    if (this.shuttingDown) return Promise.resolve(undefined);
    const key = this.takeNext();
    if (key !== undefined) return Promise.resolve(key);
    return new Promise((res) => this.waiters.push(res));
  }

  /** Marks the key processed; a key added meanwhile goes back in the queue. */
  done(key: string): void {
    this.processing.delete(key);
    const group = this.groupOf.get(key);
    if (group !== undefined) {
      this.groupOf.delete(key);
      const n = (this.inFlight.get(group) ?? 1) - 1;
      if (n > 0) this.inFlight.set(group, n);
      else this.inFlight.delete(group);
      if (this.parked.has(group)) this.unblocked.add(group);
    }
    if (this.dirty.delete(key)) this.add(key);
    // A slot of this group is free: a waiting worker may take a key that was held back.
    this.serveWaiters();
  }

  /** Keys waiting to be handed out, held back or not. */
  len(): number {
    return this.queued.size;
  }

  shutDown(): void {
    this.shuttingDown = true;
    for (const { timer } of this.delayed.values()) this.clock.clearTimeout(timer);
    this.delayed.clear();
    for (const w of this.waiters.splice(0)) w(undefined);
  }

  isShuttingDown(): boolean {
    return this.shuttingDown;
  }
}
