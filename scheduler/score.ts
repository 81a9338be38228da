import type { V1Pod } from '@kubernetes/client-node';
import type { ResourceAmounts } from '../provider/model/resources.js';
import { DEFAULT_TARGET_PLACEMENT, type TargetPlacement } from '../provider/model/target.js';
import { podRequests } from '../provider/model/resources.js';
import { schedulingPod } from './fit.js';
import type { FitNode } from './target-nodes.js';

/** Highest score {@link rankTargets} gives: upstream `MaxExtenderPriority` (extender scores are 0..10). */
export const MAX_SCORE = 10;

/**
 * CPU counted for a pod that requests none, as kube-scheduler does for scoring (its
 * `DefaultMilliCPURequest`, 100m), so empty-request pods still move the needle. Nano-units.
 */
const DEFAULT_CPU_REQUEST = 100_000_000n;

/**
 * How the extender ranks the targets whose virtual nodes passed filtering (annotation
 * `multicluster.admiralty.io/placement-policy`):
 * * `spread`: the most free cpu first (worst-fit); with unequal target weights, shares first;
 * * `pack`: the least free cpu first (best-fit: fill one target, then the next);
 * * `burst`: the lowest `spec.placement.priority` first, `spread` among equal priorities.
 */
export type PlacementPolicy = { kind: 'spread' } | { kind: 'pack' } | { kind: 'burst' };

/** What {@link rankTargets} needs to know of one target. */
export interface ScoredTarget {
  key: string;
  nodes: readonly FitNode[];
  /** Requests promised on nodes beyond what their summary shows, by node name. */
  assumed?: ReadonlyMap<string, ResourceAmounts>;
  /** Default {@link DEFAULT_TARGET_PLACEMENT}. */
  placement?: TargetPlacement;
  /** Pods of the pod's placement group already placed (or being placed) there; default 0. */
  groupPods?: number;
  /** How much the pod prefers this target (`preferenceScore`: weights of preferred node-affinity terms); default 0. */
  preference?: number;
}

/** A target with what ranking compares, worked out once. */
interface Ranked {
  key: string;
  weight: number;
  priority: number;
  groupPods: number;
  preference: number;
  /** Free cpu after placing the pod, parts per million of allocatable; -1 when it has no usable cpu. */
  freePpm: number;
}

/**
 * Scores the candidate targets of a pod, 0..{@link MAX_SCORE} (higher is better), by rank:
 * the best gets 10, the next 9, and so on down to 1 (a longer tail stays at 1); targets that
 * compare equal get the same score, and kube-scheduler picks at random among equal totals.
 * Ranks rather than scaled values, so that a small difference is never rounded into a tie.
 *
 * * Weight 0: score 0, under every policy, so such a target is chosen only when no target of
 *   weight > 0 passed filtering.
 * * Preference first: the pod's preferred node affinity (`preference`, higher first) orders the
 *   targets before the policy does, whatever the policy; the policy below orders each set of
 *   equally preferred targets. So what the user asked for wins over the default's tie-breaking
 *   by free cpu, and `pack`, `burst`, weights hold among targets the pod prefers alike (a pod
 *   that prefers nothing, or every target alike, is placed by the policy alone).
 * * Free cpu: the target's Ready, schedulable nodes' free cpu, less `assumed`, less the pod's
 *   own request (100m when it requests none), as a fraction of their allocatable.
 * * Shares (`spread`, and `burst` within one priority), only when the targets compared carry
 *   different weights: the target whose share of the group would stay lowest relative to its
 *   weight, `(groupPods + 1) / weight`, comes first (smooth weighted round robin: weights 3:1
 *   give 3 placements out of 4 to the first); ties by free cpu. With equal weights, free cpu alone.
 * * `pack`: least free cpu first; ties by target key, so that one target fills first.
 *
 * Pure; called by the scheduler extender's prioritize verb with every candidate of one pod.
 * Returns a score for every target key given.
 */
export function rankTargets(policy: PlacementPolicy, pod: V1Pod, targets: readonly ScoredTarget[]): Map<string, number> {
  const request = cpuRequest(pod);
  const scores = new Map<string, number>();
  const ranked: Ranked[] = [];
  for (const t of targets) {
    const placement = t.placement ?? DEFAULT_TARGET_PLACEMENT;
    if (placement.weight <= 0) scores.set(t.key, 0);
    else ranked.push({ key: t.key, weight: placement.weight, priority: placement.priority, groupPods: t.groupPods ?? 0, preference: t.preference ?? 0, freePpm: freeCpuPpm(request, t) });
  }
  const byPolicy = comparator(policy, ranked);
  const cmp = (a: Ranked, b: Ranked) => b.preference - a.preference || byPolicy(a, b);
  ranked.sort(cmp);
  let rank = 0;
  let previous: Ranked | undefined;
  for (const t of ranked) {
    if (previous && cmp(previous, t) !== 0) rank++;
    scores.set(t.key, Math.max(1, MAX_SCORE - rank));
    previous = t;
  }
  return scores;
}

/** Whether weights decide among these targets: at least two different ones. */
export function weightsDiffer(placements: readonly (TargetPlacement | undefined)[]): boolean {
  const positive = new Set(placements.map((p) => (p ?? DEFAULT_TARGET_PLACEMENT).weight).filter((w) => w > 0));
  return positive.size > 1;
}

/** Best first. */
function comparator(policy: PlacementPolicy, targets: readonly Ranked[]): (a: Ranked, b: Ranked) => number {
  const moreFree = (a: Ranked, b: Ranked) => b.freePpm - a.freePpm;
  const byShare = (a: Ranked, b: Ranked) => (a.groupPods + 1) * b.weight - (b.groupPods + 1) * a.weight;
  switch (policy.kind) {
    case 'pack':
      // A target without usable cpu (-1) last, as under spread.
      return (a, b) => (a.freePpm < 0 ? 1 : 0) - (b.freePpm < 0 ? 1 : 0) || a.freePpm - b.freePpm || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
    case 'burst': {
      // Weights decide within a priority level only if they differ within that level.
      const levels = new Map<number, Set<number>>();
      for (const t of targets) levels.set(t.priority, (levels.get(t.priority) ?? new Set()).add(t.weight));
      return (a, b) => a.priority - b.priority || ((levels.get(a.priority)?.size ?? 0) > 1 ? byShare(a, b) : 0) || moreFree(a, b);
    }
    case 'spread':
    default: {
      const shares = new Set(targets.map((t) => t.weight)).size > 1;
      return (a, b) => (shares ? byShare(a, b) : 0) || moreFree(a, b);
    }
  }
}

/** The delegate's cpu request, 100m when none (nano-units). */
function cpuRequest(pod: V1Pod): bigint {
  let request: bigint;
  try {
    request = podRequests(schedulingPod(pod).spec).get('cpu') ?? 0n;
  } catch {
    request = 0n;
  }
  return request > 0n ? request : DEFAULT_CPU_REQUEST;
}

/** Free cpu fraction after placing the pod, in parts per million (0 when it would not fit), or -1 when the target has no usable cpu. */
function freeCpuPpm(request: bigint, target: ScoredTarget): number {
  let allocatable = 0n;
  let free = 0n;
  for (const node of target.nodes) {
    if (node.notReady || node.unschedulable) continue;
    allocatable += node.allocatable.get('cpu') ?? 0n;
    free += (node.free.get('cpu') ?? 0n) - (target.assumed?.get(node.name)?.get('cpu') ?? 0n);
  }
  if (allocatable <= 0n) return -1;
  free -= request;
  if (free <= 0n) return 0;
  // In bigint first: nano-unit sums can exceed the exact range of a Number.
  return Number((free * 1_000_000n) / allocatable);
}
