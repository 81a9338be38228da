import type { Clock } from '../provider/core/clock.js';

/** Who turned a pod away from a target: the extender's filter, or the bind (the target itself, or our checks before it). */
export type RefusalSource = 'filter' | 'bind';

/** One reason a target was refused pods for, over the log's window (see {@link RefusalLog.recent}). */
export interface RefusalCount {
  source: RefusalSource;
  /** A stable name for the reason (`NoNodeFits`, `TargetNotReady`, `DelegateNotPlaced`, ...). */
  reason: string;
  /** How many times, within the window. */
  count: number;
  /** What the last of them said, in full (bounded to {@link MAX_MESSAGE_CHARS}). */
  lastMessage: string;
  /** When the last of them happened (RFC 3339, by the wall clock). */
  lastAt: string;
}

export interface RefusalLogOptions {
  clock: Clock;
  /** How far back {@link RefusalLog.recent} counts (default 10 minutes), to the precision of one bucket. */
  windowMs?: number;
  /** Buckets the window is cut into (default 10: one per minute). */
  buckets?: number;
  /** Reasons kept per target (default 16); a new one pushes out the one seen longest ago. */
  maxReasons?: number;
  /** Targets kept (default 1000); a new one pushes out the one refused longest ago. */
  maxTargets?: number;
}

/** Longest message kept; longer ones are cut with an ellipsis. */
export const MAX_MESSAGE_CHARS = 500;

interface Bucket {
  /** Which bucket of time (monotonic ms / bucket length) its counts are of. */
  index: number;
  counts: Map<string, number>;
}

interface TargetLog {
  /** A ring of `buckets` buckets: the one of bucket index i sits at i % buckets. */
  ring: (Bucket | undefined)[];
  /** Per reason key (`source/reason`): the last message and when. */
  last: Map<string, { source: RefusalSource; reason: string; message: string; atMs: number; monoMs: number }>;
}

/**
 * How often each target refused pods lately, and why: what `kubectl admiralty status` shows as a
 * target's last refusals. The extender's filter records each virtual node it rejects for a pod
 * (one scheduling attempt, one count) and the binder each bind a target did not take.
 *
 * Bounded in memory whatever the rate: per target, a ring of a fixed number of buckets (one per
 * minute by default) each counting at most `maxReasons` reasons, and the last message of each
 * reason; at most `maxTargets` targets. Counted on the monotonic clock, so a stepped wall clock
 * neither drops nor keeps counts. Per process: each replica counts what it judged and bound.
 */
export class RefusalLog {
  private readonly clock: Clock;
  private readonly bucketMs: number;
  private readonly buckets: number;
  private readonly maxReasons: number;
  private readonly maxTargets: number;
  private readonly targets = new Map<string, TargetLog>();

  constructor(opts: RefusalLogOptions) {
    this.clock = opts.clock;
    this.buckets = opts.buckets ?? 10;
    this.bucketMs = (opts.windowMs ?? 600_000) / this.buckets;
    this.maxReasons = opts.maxReasons ?? 16;
    this.maxTargets = opts.maxTargets ?? 1000;
    if (!(this.buckets >= 1 && Number.isInteger(this.buckets)) || !(this.bucketMs > 0)) throw new RangeError('RefusalLog: windowMs and buckets must be positive (buckets an integer)');
  }

  /** Counts one refusal of a pod by a target, now. */
  record(targetKey: string, source: RefusalSource, reason: string, message: string): void {
    const monoMs = this.clock.monotonicMs();
    const index = Math.floor(monoMs / this.bucketMs);
    let log = this.targets.get(targetKey);
    if (log) this.targets.delete(targetKey);
    else {
      log = { ring: new Array<Bucket | undefined>(this.buckets).fill(undefined), last: new Map() };
      if (this.targets.size >= this.maxTargets) this.targets.delete(this.targets.keys().next().value!);
    }
    // Most recently refused last: the first is the one to push out.
    this.targets.set(targetKey, log);
    const key = `${source}/${reason}`;
    if (log.last.has(key)) log.last.delete(key);
    else if (log.last.size >= this.maxReasons) {
      const oldest = log.last.keys().next().value!;
      log.last.delete(oldest);
      for (const b of log.ring) b?.counts.delete(oldest);
    }
    const text = message.length > MAX_MESSAGE_CHARS ? `${message.slice(0, MAX_MESSAGE_CHARS - 1)}…` : message;
    log.last.set(key, { source, reason, message: text, atMs: this.clock.now(), monoMs });
    const slot = index % this.buckets;
    let bucket = log.ring[slot];
    if (!bucket || bucket.index !== index) log.ring[slot] = bucket = { index, counts: new Map() };
    bucket.counts.set(key, (bucket.counts.get(key) ?? 0) + 1);
  }

  /** The reasons a target was refused for within the window, the most frequent first (then by name); empty when none. */
  recent(targetKey: string): RefusalCount[] {
    const log = this.targets.get(targetKey);
    if (!log) return [];
    const now = Math.floor(this.clock.monotonicMs() / this.bucketMs);
    const totals = new Map<string, number>();
    for (const b of log.ring) {
      if (!b || b.index <= now - this.buckets || b.index > now) continue;
      for (const [key, n] of b.counts) totals.set(key, (totals.get(key) ?? 0) + n);
    }
    const out: RefusalCount[] = [];
    for (const [key, count] of totals) {
      const last = log.last.get(key);
      if (last) out.push({ source: last.source, reason: last.reason, count, lastMessage: last.message, lastAt: new Date(last.atMs).toISOString() });
    }
    return out.sort((a, b) => b.count - a.count || (a.reason < b.reason ? -1 : a.reason > b.reason ? 1 : 0) || (a.source < b.source ? -1 : 1));
  }
}
