import type { Clock, ClockTimer } from '../core/clock.js';

export interface WorkQueueHooks {
  onAdd?(): void;
  onRetry?(): void;
  onDepth?(depth: number): void;
}

/**
 * A deduplicating work queue of string keys. A key is never handed to two workers at once: a
 * key added while it is being processed is handed out again after `done`. Supports delayed adds
 * and per-key exponential backoff with jitter; time comes from the injected clock.
 */
export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly queued = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly delayed = new Map<string, { timer: ClockTimer; at: number }>();
  private waiters: ((key: string | undefined) => void)[] = [];
  private shuttingDown = false;

  constructor(
    private readonly clock: Clock,
    private readonly opts: { baseDelayMs?: number; maxDelayMs?: number; hooks?: WorkQueueHooks; random?: () => number } = {},
  ) {}

  add(key: string): void {
    if (this.shuttingDown) return;
    this.opts.hooks?.onAdd?.();
    if (this.processing.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    const waiter = this.waiters.shift();
    if (waiter) {
      this.processing.add(key);
      waiter(key);
      return;
    }
    this.queued.add(key);
    this.queue.push(key);
    this.opts.hooks?.onDepth?.(this.queue.length);
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
    const key = this.queue.shift();
    if (key !== undefined) {
      this.queued.delete(key);
      this.processing.add(key);
      this.opts.hooks?.onDepth?.(this.queue.length);
      return Promise.resolve(key);
    }
    return new Promise((res) => this.waiters.push(res));
  }

  /** Marks the key processed; a key added meanwhile goes back in the queue. */
  done(key: string): void {
    this.processing.delete(key);
    if (this.dirty.delete(key)) this.add(key);
  }

  len(): number {
    return this.queue.length;
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
