import type { ResourceAmounts } from '../provider/model/resources.js';

/** What a target's scheduler said when it would not place a delegate. */
export interface Refusal {
  reason: string;
  atMs: number;
  /** How long it keeps the pod off the target. */
  forMs: number;
  /** Refusals of this pod by this target in a row (each doubles `forMs`). */
  count: number;
}

interface Assumption {
  node: string;
  requests: ResourceAmounts;
  atMs: number;
}

export interface PlacementMemoryOptions {
  /**
   * How long a target's first refusal of a pod keeps that pod off the target (default 10 s);
   * each further refusal of the same pod by the same target doubles it, up to `maxRefusalTtlMs`
   * (default 5 min), so a target that keeps refusing is asked less and less often.
   */
  refusalTtlMs?: number;
  maxRefusalTtlMs?: number;
  /**
   * How long after a delegate was placed a summary is still taken not to show it (default 3 s:
   * a target writes its summary at most once a second, after its pod watch sees the bind).
   */
  summaryLagMs?: number;
  /** Pods remembered at most (default 10 000); the oldest are forgotten first. */
  maxPods?: number;
}

/**
 * What the extender learnt from binding, that summaries do not say yet:
 *
 * * refusals: a target whose scheduler would not place a pod's delegate is kept off that pod's
 *   next scheduling attempts for a while, so kube-scheduler tries another virtual node;
 * * assumptions: the requests of delegates placed since a target's summary was read, per real
 *   node, so a burst does not pour into room that is already taken. An assumption ends once a
 *   summary read `summaryLagMs` after it arrives (that summary counts the delegate itself).
 *
 * In memory only: a restarted provider starts from the summaries alone, and a target refuses
 * again if it must. Bounded by `maxPods`.
 */
export class PlacementMemory {
  private readonly refusals = new Map<string, Map<string, Refusal>>();
  private readonly assumptions = new Map<string, Assumption[]>();
  private readonly refusalTtlMs: number;
  private readonly maxRefusalTtlMs: number;
  private readonly summaryLagMs: number;
  private readonly maxPods: number;

  constructor(o: PlacementMemoryOptions = {}) {
    this.refusalTtlMs = o.refusalTtlMs ?? 10_000;
    this.maxRefusalTtlMs = o.maxRefusalTtlMs ?? 300_000;
    this.summaryLagMs = o.summaryLagMs ?? 3_000;
    this.maxPods = o.maxPods ?? 10_000;
  }

  /** Remembers that `targetKey` refused the pod with this UID. */
  refuse(podUid: string, targetKey: string, reason: string, nowMs: number): void {
    let byTarget = this.refusals.get(podUid);
    if (byTarget) this.refusals.delete(podUid); // re-insert: Map order is age order
    else byTarget = new Map();
    const count = (byTarget.get(targetKey)?.count ?? 0) + 1;
    const forMs = Math.min(this.maxRefusalTtlMs, this.refusalTtlMs * 2 ** Math.min(count - 1, 30));
    byTarget.set(targetKey, { reason, atMs: nowMs, forMs, count });
    this.refusals.set(podUid, byTarget);
    while (this.refusals.size > this.maxPods) this.refusals.delete(this.refusals.keys().next().value!);
  }

  /** The target's refusal of this pod, while it still keeps the pod off the target. */
  refusal(podUid: string | undefined, targetKey: string, nowMs: number): Refusal | undefined {
    if (!podUid) return undefined;
    const r = this.refusals.get(podUid)?.get(targetKey);
    // Kept after it lapses: a refusal in a row doubles the next one's time.
    return r && nowMs - r.atMs < r.forMs ? r : undefined;
  }

  /** Forgets a pod (it was bound, or is gone). */
  forget(podUid: string): void {
    this.refusals.delete(podUid);
  }

  /** Remembers a delegate placed on `node` of `targetKey`, asking for `requests` (pod slot included). */
  assume(targetKey: string, node: string, requests: ResourceAmounts, nowMs: number): void {
    const list = this.assumptions.get(targetKey) ?? [];
    list.push({ node, requests, atMs: nowMs });
    this.assumptions.set(targetKey, list);
  }

  /**
   * Requests assumed on each node of a target beyond a summary read at `summaryReadAtMs`;
   * assumptions that summary already covers are dropped.
   */
  assumedOn(targetKey: string, summaryReadAtMs: number): Map<string, ResourceAmounts> {
    const out = new Map<string, ResourceAmounts>();
    const list = this.assumptions.get(targetKey);
    if (!list) return out;
    const kept = list.filter((a) => summaryReadAtMs - a.atMs < this.summaryLagMs);
    if (kept.length === 0) this.assumptions.delete(targetKey);
    else if (kept.length !== list.length) this.assumptions.set(targetKey, kept);
    for (const a of kept) {
      const sum = out.get(a.node) ?? new Map<string, bigint>();
      for (const [name, amount] of a.requests) sum.set(name, (sum.get(name) ?? 0n) + amount);
      out.set(a.node, sum);
    }
    return out;
  }
}
