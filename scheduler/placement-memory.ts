import type { V1Pod } from '@kubernetes/client-node';
import { summaryCounts } from '../provider/model/counted.js';
import { hostPortKey, type HostPort } from '../provider/model/host-ports.js';
import { isTerminal, type ResourceAmounts } from '../provider/model/resources.js';
import { unschedulableVerdict } from './delegate-verdict.js';

/** What a target's scheduler said when it would not place a delegate. */
export interface Refusal {
  reason: string;
  atMs: number;
  /** How long it keeps the pod off the target. */
  forMs: number;
  /** Refusals of this pod by this target in a row (each doubles `forMs`). */
  count: number;
}

/** A target kept off the pods of one controller, after one of its pods was re-placed out of it. */
export interface Avoidance {
  reason: string;
  untilMs: number;
}

interface Assumption {
  /** The real node; none for a bind in flight that no node was guessed for (yet), or whose delegate its target could not place. */
  node?: string;
  requests: ResourceAmounts;
  /** The host ports the delegate holds on its node (see `podHostPorts`); most have none. */
  hostPorts?: readonly HostPort[];
  /** When the delegate was placed; for a bind in flight, when the bind began. */
  atMs: number;
  /** The delegate placed, to tell when a summary counts it. */
  delegate?: { namespace: string; name: string };
  /** The delegate's namespace/name, made once. */
  delegateKey?: string;
  /** While the bind that made it is in flight ({@link PlacementMemory.reserve}): the pod being bound, to guess its node from. */
  binding?: V1Pod;
}

/**
 * Guesses the real node a target's scheduler will give the delegate of `pod`, given what is
 * assumed on each node already (requests, and host ports); none when no node fits.
 */
export type NodeGuess = (pod: V1Pod, assumed: ReadonlyMap<string, ResourceAmounts>, assumedPorts: ReadonlyMap<string, readonly HostPort[]>) => string | undefined;

/** The sum of the assumptions on one node. */
interface NodeSum {
  /** Assumptions summed. */
  count: number;
  requests: Map<string, bigint>;
  /** The host ports they hold, each with how many of them hold it. */
  ports: Map<string, { port: HostPort; count: number }>;
}

/** A target's summary as the extender has it: when it was read, and the pod version it accounts for. */
export interface SummaryRead {
  readAtMs: number;
  podsResourceVersion?: string;
}

/** Finds a delegate in the target's cache. */
export type DelegateLookup = (namespace: string, name: string) => V1Pod | undefined;

export interface PlacementMemoryOptions {
  /**
   * How long a target's first refusal of a pod keeps that pod off the target (default 10 s);
   * each further refusal of the same pod by the same target doubles it, up to `maxRefusalTtlMs`
   * (default 5 min), so a target that keeps refusing is asked less and less often.
   */
  refusalTtlMs?: number;
  maxRefusalTtlMs?: number;
  /**
   * For a summary that does not say which pod version it accounts for (a target running an
   * older provider), how long after a delegate was placed that summary is still taken not to
   * show it (default 3 s: a target writes its summary at most once a second, after its pod watch
   * sees the bind).
   */
  summaryLagMs?: number;
  /**
   * How long an assumption is kept at most, when no summary says it counts the delegate (the
   * delegate left the cache, or the target's summary stopped moving): default 60 s.
   */
  maxAssumptionMs?: number;
  /** Pods remembered at most (default 10 000), and controllers with avoided targets at most (the same); the oldest are forgotten first. */
  maxPods?: number;
  /**
   * Whether every change of a delegate in a target's cache (added, updated, deleted) is told to
   * {@link PlacementMemory.delegateChanged}. Then {@link PlacementMemory.assumedOn} looks again,
   * under a summary it has already walked the assumptions with, only at the assumptions made
   * since and those whose delegate changed: the extender asks on every filter, and under a
   * burst the summary moves about once a second while hundreds of assumptions wait for it.
   */
  toldOfDelegateChanges?: boolean;
}

/** What the last walk of a target's assumptions was made under, and what changed since. */
interface Walk {
  readAtMs: number;
  podsResourceVersion?: string;
  /** The first `walked` assumptions of the list were looked at under this summary. */
  walked: number;
  /** The delegates (namespace/name) of the list's assumptions. */
  delegates: Set<string>;
  /** Those of them that changed since the walk. */
  changed: Set<string>;
}

/**
 * What the extender learnt from binding, that summaries do not say yet:
 *
 * * refusals: a target whose scheduler would not place a pod's delegate is kept off that pod's
 *   next scheduling attempts for a while, so kube-scheduler tries another virtual node;
 * * assumptions: the requests of delegates placed that a target's summary does not count yet,
 *   per real node, so a burst does not pour into room that is already taken, and room is not
 *   taken twice once the summary counts them. An assumption ends when the summary counts its
 *   delegate (its `podsResourceVersion` has reached the delegate's version, see
 *   `summaryCounts`), when the delegate is finished, or, for a summary that cannot say, once a
 *   summary read `summaryLagMs` after the placement arrives; it moves to the node the target's
 *   scheduler chose, when that differs. A bind takes its room from the moment it begins
 *   ({@link PlacementMemory.reserve}), not once it succeeded: kube-scheduler binds in the
 *   background and filters the next pods meanwhile, and the target's scheduler may take up to
 *   the placement timeout to decide. Until the target's scheduler chooses, the room is taken on
 *   the node it most likely chooses (guessed by the caller of `assumedOn`, see {@link NodeGuess});
 *   a refused bind gives it back at once ({@link PlacementMemory.release}), a successful one
 *   keeps it as the delegate's assumption ({@link PlacementMemory.assume}).
 *
 * * avoidances: a target that a pod was re-placed out of (its delegate stuck there) is kept off
 *   the pods of that pod's controller until a time, so the replacement goes elsewhere.
 *
 * In memory only: a restarted provider starts from the summaries alone, and a target refuses
 * again if it must. Bounded by `maxPods`.
 */
export class PlacementMemory {
  private readonly refusals = new Map<string, Map<string, Refusal>>();
  private readonly assumptions = new Map<string, Assumption[]>();
  /**
   * The requests of each target's assumptions summed by node, kept as assumptions come, go and
   * move: the extender asks on every filter and prioritize, for every target, and summing the
   * whole list each time (hundreds of assumptions under a burst) was the extender's largest cost.
   */
  private readonly sums = new Map<string, Map<string, NodeSum>>();
  private readonly avoidances = new Map<string, Map<string, Avoidance>>();
  /** The last walk per target, when delegate changes are told (see `toldOfDelegateChanges`). */
  private readonly walks = new Map<string, Walk>();
  /** Per target, the assumptions of binds in flight whose node is to be guessed at the next `assumedOn`. */
  private readonly toGuess = new Map<string, Set<Assumption>>();
  private readonly toldOfDelegateChanges: boolean;
  private readonly refusalTtlMs: number;
  private readonly maxRefusalTtlMs: number;
  private readonly summaryLagMs: number;
  private readonly maxAssumptionMs: number;
  private readonly maxPods: number;

  constructor(o: PlacementMemoryOptions = {}) {
    this.refusalTtlMs = o.refusalTtlMs ?? 10_000;
    this.maxRefusalTtlMs = o.maxRefusalTtlMs ?? 300_000;
    this.summaryLagMs = o.summaryLagMs ?? 3_000;
    this.maxAssumptionMs = o.maxAssumptionMs ?? 60_000;
    this.maxPods = o.maxPods ?? 10_000;
    this.toldOfDelegateChanges = o.toldOfDelegateChanges ?? false;
  }

  /**
   * A delegate in `targetKey`'s cache was added, updated or deleted. Only for a memory made
   * with `toldOfDelegateChanges`, which must then be told of every change.
   */
  delegateChanged(targetKey: string, namespace: string, name: string): void {
    const walk = this.walks.get(targetKey);
    const key = `${namespace}/${name}`;
    if (walk?.delegates.has(key)) walk.changed.add(key);
  }

  /**
   * A delegate left `targetKey`'s cache: deleted there. The assumption of that placement ends at
   * once, for the delegate holds nothing there any more, and a summary that did not count it yet
   * never would: the assumption would have waited `maxAssumptionMs` (a minute in which the room
   * of a pod preempted, or deleted, just after its placement looked taken). A bind in flight
   * keeps its reservation: the bind's own end gives it back.
   */
  delegateGone(targetKey: string, namespace: string, name: string): void {
    const list = this.assumptions.get(targetKey);
    const key = `${namespace}/${name}`;
    const i = list ? list.findIndex((a) => a.delegateKey === key && !a.binding) : -1;
    if (i < 0 || !this.removeAt(targetKey, list!, i)) return;
    const walk = this.walks.get(targetKey);
    if (walk && !list!.some((x) => x.delegateKey === key)) walk.delegates.delete(key);
  }

  /** Remembers that `targetKey` refused the pod with this UID. */
  refuse(podUid: string, targetKey: string, reason: string, nowMs: number): void {
    let byTarget = this.refusals.get(podUid);
    if (byTarget)
      this.refusals.delete(podUid); // re-insert: Map order is age order
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

  /**
   * Keeps `targetKey` off the pods of the controller with UID `ownerUid` until `untilMs`. Called
   * by the replacement reconciler before it deletes a stuck proxy. The latest call for a
   * controller and target wins.
   */
  avoid(ownerUid: string, targetKey: string, reason: string, untilMs: number): void {
    const byTarget = this.avoidances.get(ownerUid) ?? new Map<string, Avoidance>();
    this.avoidances.delete(ownerUid); // re-insert: Map order is age order
    byTarget.set(targetKey, { reason, untilMs });
    this.avoidances.set(ownerUid, byTarget);
    while (this.avoidances.size > this.maxPods) this.avoidances.delete(this.avoidances.keys().next().value!);
  }

  /** Why the target is avoided for the pods of this controller, while it is; lapsed avoidances are dropped. */
  avoidance(ownerUid: string | undefined, targetKey: string, nowMs: number): Avoidance | undefined {
    if (!ownerUid) return undefined;
    const byTarget = this.avoidances.get(ownerUid);
    const a = byTarget?.get(targetKey);
    if (!a || nowMs < a.untilMs) return a;
    byTarget!.delete(targetKey);
    if (byTarget!.size === 0) this.avoidances.delete(ownerUid);
    return undefined;
  }

  /**
   * Remembers a delegate placed on `node` of `targetKey`, asking for `requests` (pod slot
   * included); `delegate` names it, so the assumption ends as soon as a summary counts it.
   * Called by the binder once the target's scheduler placed the delegate: the reservation of
   * that bind ({@link reserve}), if still held, becomes this assumption, so the delegate is
   * counted once.
   */
  assume(targetKey: string, node: string, requests: ResourceAmounts, nowMs: number, delegate?: { namespace: string; name: string }, hostPorts: readonly HostPort[] = []): void {
    const list = this.assumptions.get(targetKey) ?? [];
    const a: Assumption = {
      node,
      requests,
      ...(hostPorts.length ? { hostPorts } : {}),
      atMs: nowMs,
      ...(delegate ? { delegate, delegateKey: `${delegate.namespace}/${delegate.name}` } : {}),
    };
    const i = this.reservationOf(list, a.delegateKey);
    const reserved = list[i];
    if (reserved) {
      this.add(targetKey, reserved, -1n);
      this.toGuess.get(targetKey)?.delete(reserved);
      list[i] = a;
      this.add(targetKey, a, 1n);
      // The last walk's verdict on it was a bind's (kept whatever the summary said): look again.
      this.walks.get(targetKey)?.changed.add(a.delegateKey!);
      return;
    }
    list.push(a);
    this.assumptions.set(targetKey, list);
    this.add(targetKey, a, 1n);
    if (a.delegateKey !== undefined) this.walks.get(targetKey)?.delegates.add(a.delegateKey);
  }

  /**
   * Remembers that a bind of `pod` to `targetKey` began, its delegate named `delegate` and
   * asking for `requests` (pod slot included) and `hostPorts`: until the bind ends, the room (and
   * the ports) is taken on the
   * node the next `assumedOn` guesses, then on the node the target's cache shows the delegate
   * on. A delegate that its target's scheduler reported Unschedulable holds no node (in a target
   * with burst capacity it waits for a scale-up, and counts against that capacity instead).
   * Called by the binder before it writes anything; it then calls {@link assume} or
   * {@link release}. Not ended by any summary while the delegate has no node, nor by time but
   * `maxAssumptionMs`. A delegate reserved already keeps its reservation (a gang's plan reserves
   * its members before their binds, which reserve again).
   */
  reserve(targetKey: string, pod: V1Pod, requests: ResourceAmounts, nowMs: number, delegate: { namespace: string; name: string }, hostPorts: readonly HostPort[] = []): void {
    const list = this.assumptions.get(targetKey) ?? [];
    // Reserved already (a gang's plan took its members' room before their binds): held once.
    if (this.reservationOf(list, `${delegate.namespace}/${delegate.name}`) >= 0) return;
    const a: Assumption = { requests, ...(hostPorts.length ? { hostPorts } : {}), atMs: nowMs, delegate, delegateKey: `${delegate.namespace}/${delegate.name}`, binding: pod };
    list.push(a);
    this.assumptions.set(targetKey, list);
    let pending = this.toGuess.get(targetKey);
    if (!pending) this.toGuess.set(targetKey, (pending = new Set()));
    pending.add(a);
    this.walks.get(targetKey)?.delegates.add(a.delegateKey!);
  }

  /**
   * Gives back at once the room of a bind of `delegate` to `targetKey` that ended without a
   * delegate on a node (refused, or waiting for a scale-up). Idempotent; a reservation already
   * ended by `maxAssumptionMs` or by a summary is not there any more.
   */
  release(targetKey: string, delegate: { namespace: string; name: string }): void {
    const list = this.assumptions.get(targetKey);
    const i = list ? this.reservationOf(list, `${delegate.namespace}/${delegate.name}`) : -1;
    if (i >= 0) this.removeAt(targetKey, list!, i);
  }

  /** Takes assumption `i` out of a target's list and its sums; false when that left the list empty (the target is forgotten). */
  private removeAt(targetKey: string, list: Assumption[], i: number): boolean {
    const [a] = list.splice(i, 1);
    if (!a) throw new Error(`no assumption ${i} of ${list.length} for ${targetKey}`);
    this.add(targetKey, a, -1n);
    this.toGuess.get(targetKey)?.delete(a);
    if (list.length === 0) {
      this.forgetTarget(targetKey);
      return false;
    }
    // The last walk's verdicts go by position in the list: those after this one move up by one.
    const walk = this.walks.get(targetKey);
    if (walk && i < walk.walked) walk.walked--;
    return true;
  }

  /**
   * Requests assumed on each node of a target beyond its summary `read`, by the node each
   * delegate is on; assumptions that summary covers are dropped. `delegateOf` finds the
   * delegates in the target's cache; without it, or when the summary cannot say, time decides
   * (see the class). `guess` places the binds in flight that no node was guessed for yet (once
   * each, in the order they began); without it they take no room until their delegate is on a
   * node.
   */
  assumedOn(targetKey: string, read: SummaryRead, delegateOf?: DelegateLookup, guess?: NodeGuess): Map<string, ResourceAmounts> {
    this.walk(targetKey, read, delegateOf);
    const pending = this.toGuess.get(targetKey);
    if (pending && guess) {
      for (const a of pending) {
        // Each guess sees the binds guessed before it.
        const node = guess(a.binding!, this.sumsOf(targetKey), this.assumedPortsOn(targetKey));
        if (node !== undefined) {
          a.node = node;
          this.add(targetKey, a, 1n);
        }
      }
      this.toGuess.delete(targetKey);
    }
    return this.sumsOf(targetKey);
  }

  /**
   * The host ports that the assumptions of a target hold, by node (nodes without any left out),
   * as of the last `assumedOn`.
   */
  assumedPortsOn(targetKey: string): Map<string, HostPort[]> {
    const out = new Map<string, HostPort[]>();
    for (const [node, sum] of this.sums.get(targetKey) ?? []) {
      if (sum.ports.size > 0)
        out.set(
          node,
          [...sum.ports.values()].map((p) => p.port),
        );
    }
    return out;
  }

  /** Drops and moves a target's assumptions as of `read` (see `assumedOn`). */
  private walk(targetKey: string, read: SummaryRead, delegateOf?: DelegateLookup): void {
    const list = this.assumptions.get(targetKey);
    if (!list) return;
    // Under the summary of the last walk, an assumption looked at then, whose delegate has not
    // changed since, gets the same verdict: kept, on the node it was moved to.
    const last = this.walks.get(targetKey);
    const sameSummary = !!delegateOf && !!last && last.readAtMs === read.readAtMs && last.podsResourceVersion === read.podsResourceVersion;
    if (sameSummary && last!.walked === list.length && last!.changed.size === 0) return;
    const settled = (a: Assumption, i: number) => sameSummary && i < last!.walked && (last!.changed.size === 0 || a.delegateKey === undefined || !last!.changed.has(a.delegateKey));
    const kept: Assumption[] = [];
    const drop = (a: Assumption) => {
      this.add(targetKey, a, -1n);
      this.toGuess.get(targetKey)?.delete(a);
    };
    for (const [i, a] of list.entries()) {
      if (settled(a, i)) {
        kept.push(a);
        continue;
      }
      if (read.readAtMs - a.atMs >= this.maxAssumptionMs) {
        drop(a);
        continue;
      }
      const delegate = a.delegate && delegateOf?.(a.delegate.namespace, a.delegate.name);
      if (read.podsResourceVersion === undefined) {
        // A summary that cannot say which pods it counts: time decides, from the placement (a
        // bind in flight has placed nothing yet).
        if (!a.binding && read.readAtMs - a.atMs >= this.summaryLagMs) {
          drop(a);
          continue;
        }
      } else if (delegate) {
        // Kept while its delegate is not cached yet, or its version does not compare.
        const counted = summaryCounts(read, delegate);
        if (counted !== undefined && (counted || isTerminal(delegate))) {
          drop(a);
          continue;
        }
      }
      const placedOn = delegate?.spec?.nodeName;
      // A bind whose delegate its target's scheduler could not place holds no node: it is
      // refused, or waits for a scale-up and counts against burst capacity (`waitingRequests`).
      const unplaced = !placedOn && !!a.binding && !!delegate && unschedulableVerdict(delegate) !== undefined;
      if (unplaced) this.toGuess.get(targetKey)?.delete(a);
      const node = placedOn || (unplaced ? undefined : a.node);
      if (node !== a.node) {
        drop(a);
        const moved = { ...a, node };
        this.add(targetKey, moved, 1n);
        kept.push(moved);
      } else kept.push(a);
    }
    if (kept.length === 0) {
      this.forgetTarget(targetKey);
      return;
    }
    if (kept.length !== list.length || kept.some((a, i) => a !== list[i])) this.assumptions.set(targetKey, kept);
    if (this.toldOfDelegateChanges && delegateOf) {
      // `assume` adds to the last walk's delegates: while none was dropped, they are the list's.
      let delegates = last?.delegates;
      if (!delegates || kept.length !== list.length) {
        delegates = new Set<string>();
        for (const a of kept) if (a.delegateKey !== undefined) delegates.add(a.delegateKey);
      }
      this.walks.set(targetKey, { readAtMs: read.readAtMs, podsResourceVersion: read.podsResourceVersion, walked: kept.length, delegates, changed: new Set() });
    } else {
      // A walk without lookups may have dropped some: the last walk's positions no longer hold.
      this.walks.delete(targetKey);
    }
  }

  /** The index in `list` of the reservation of the delegate `delegateKey` names, or -1. */
  private reservationOf(list: readonly Assumption[], delegateKey: string | undefined): number {
    // A scan: once per bind, against a list of the binds of the last seconds.
    return delegateKey === undefined ? -1 : list.findIndex((a) => a.binding && a.delegateKey === delegateKey);
  }

  /** Forgets a target without assumptions left. */
  private forgetTarget(targetKey: string): void {
    this.assumptions.delete(targetKey);
    this.sums.delete(targetKey);
    this.walks.delete(targetKey);
    this.toGuess.delete(targetKey);
  }

  /** The sums of a target's assumptions by node, as copies: the caller may change what it gets. */
  private sumsOf(targetKey: string): Map<string, ResourceAmounts> {
    const out = new Map<string, ResourceAmounts>();
    for (const [node, sum] of this.sums.get(targetKey) ?? []) out.set(node, new Map(sum.requests));
    return out;
  }

  /** Adds (`sign` 1n) or takes away (-1n) an assumption's requests from its node's sum. */
  private add(targetKey: string, a: Assumption, sign: 1n | -1n): void {
    if (a.node === undefined) return;
    let byNode = this.sums.get(targetKey);
    if (!byNode) this.sums.set(targetKey, (byNode = new Map()));
    const node = a.node;
    let sum = byNode.get(node);
    if (!sum) byNode.set(node, (sum = { count: 0, requests: new Map(), ports: new Map() }));
    sum.count += sign === 1n ? 1 : -1;
    if (sum.count === 0) {
      byNode.delete(node);
      return;
    }
    for (const [name, amount] of a.requests) {
      const next = (sum.requests.get(name) ?? 0n) + sign * amount;
      // What the assumptions left no longer appears, as if summed from them.
      if (next === 0n && sign === -1n) sum.requests.delete(name);
      else sum.requests.set(name, next);
    }
    for (const port of a.hostPorts ?? []) {
      const key = hostPortKey(port);
      const held = sum.ports.get(key);
      const count = (held?.count ?? 0) + (sign === 1n ? 1 : -1);
      if (count <= 0) sum.ports.delete(key);
      else sum.ports.set(key, { port, count });
    }
  }
}
