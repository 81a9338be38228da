import type { V1Pod } from '@kubernetes/client-node';
import type { ResourceAmounts } from '../provider/model/resources.js';
import { podRequests } from '../provider/model/resources.js';
import { schedulingPod } from './fit.js';
import type { FitNode } from './target-nodes.js';

/** Highest score of {@link scoreTarget}. */
export const MAX_TARGET_SCORE = 100;

/**
 * CPU counted for a pod that requests none, as kube-scheduler does for scoring (its
 * `DefaultMilliCPURequest`, 100m), so empty-request pods still move the needle. Nano-units.
 */
const DEFAULT_CPU_REQUEST = 100_000_000n;

/**
 * How the extender ranks the targets whose virtual nodes passed filtering.
 * * `spread`: prefer the target with the largest fraction of free cpu (after placing the pod);
 * * `pack`: prefer the target with the smallest such fraction (fill one target first);
 * * `weights`: a static score per target, looked up by target key (`ClusterTarget/c2`,
 *   `Target/ns/name`), then by display name (`c2`, `ns/name`), else `defaultWeight` (0); values
 *   are clamped to 0..100.
 */
export type PlacementPolicy =
  | { kind: 'spread' }
  | { kind: 'pack' }
  | { kind: 'weights'; weights: Readonly<Record<string, number>>; defaultWeight?: number };

/** What {@link scoreTarget} needs to know of one target. */
export interface ScoredTarget {
  key: string;
  displayName: string;
  nodes: readonly FitNode[];
  /** Requests promised on nodes beyond what their summary shows, by node name. */
  assumed?: ReadonlyMap<string, ResourceAmounts>;
}

/**
 * Scores one target for a pod, 0..100 (higher is better).
 *
 * `spread` and `pack` look at cpu only: free = the nodes' free cpu - assumed - the pod's own
 * request (100m when it requests none), summed over the target's Ready, schedulable nodes, as a
 * fraction of their allocatable; spread = round(100 x fraction), pack = 100 - spread, both
 * clamped to 0..100. A target with no such node (or zero allocatable cpu) scores 0 under both.
 * The fraction is of the target as a whole, so a target with many half-busy nodes and one with
 * a single free node may score alike even if only one of them fits well.
 *
 * Ties: this function does not break them. The extender scales scores to 0..10 (more ties), and
 * kube-scheduler adds `score x extender weight x 10` to its own plugin scores per node, then picks
 * at random among the nodes with the highest total. So equal targets share pods at random.
 *
 * Pure; called by the scheduler extender's prioritize verb, once per virtual node.
 */
export function scoreTarget(policy: PlacementPolicy, pod: V1Pod, target: ScoredTarget): number {
  if (policy.kind === 'weights') {
    const w = policy.weights[target.key] ?? policy.weights[target.displayName] ?? policy.defaultWeight ?? 0;
    return clamp(Number.isFinite(w) ? Math.round(w) : 0);
  }
  const free = freeCpuFraction(pod, target);
  if (free === undefined) return 0;
  const spread = clamp(Math.round(free * MAX_TARGET_SCORE));
  return policy.kind === 'spread' ? spread : MAX_TARGET_SCORE - spread;
}

/** Free cpu fraction after placing the pod, or undefined when the target has no usable cpu. */
function freeCpuFraction(pod: V1Pod, target: ScoredTarget): number | undefined {
  let delegateRequest: bigint;
  try {
    delegateRequest = podRequests(schedulingPod(pod).spec).get('cpu') ?? 0n;
  } catch {
    delegateRequest = 0n;
  }
  if (delegateRequest <= 0n) delegateRequest = DEFAULT_CPU_REQUEST;
  let allocatable = 0n;
  let free = 0n;
  for (const node of target.nodes) {
    if (node.notReady || node.unschedulable) continue;
    allocatable += node.allocatable.get('cpu') ?? 0n;
    free += (node.free.get('cpu') ?? 0n) - (target.assumed?.get(node.name)?.get('cpu') ?? 0n);
  }
  if (allocatable <= 0n) return undefined;
  free -= delegateRequest;
  if (free <= 0n) return 0;
  // Parts per million in bigint first: nano-unit sums can exceed the exact range of a Number.
  return Number((free * 1_000_000n) / allocatable) / 1_000_000;
}

function clamp(score: number): number {
  return Math.max(0, Math.min(MAX_TARGET_SCORE, score));
}
