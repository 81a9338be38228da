import type { V1PodSpec } from '@kubernetes/client-node';
import { formatQuantity } from './quantity.js';
import { ONE_POD, parseList, podRequests, type ResourceAmounts } from './resources.js';
import type { ClusterSummary, TargetRef } from './types.js';
import { targetIdentityLabels } from './virtual-node.js';

/**
 * The decision of the Kueue AdmissionCheck the provider is to serve (issue 56, part 2; not wired
 * yet: no controller reads Workloads): a Workload that Kueue reserved quota for in a target's
 * flavor is Ready only when that target can take all its pods now, judged against the target's
 * ClusterSummary. Quota is not capacity: without the check, Kueue admits a Job to a full target
 * and its pods wait there. Pure.
 */

/** The `spec.controllerName` of the AdmissionCheck the provider would serve. */
export const CAPACITY_CHECK_CONTROLLER = 'multicluster.admiralty.io/capacity';

/** Most pods one verdict places one by one; a Workload of more is judged by its sums only. */
export const MAX_PODS_PLACED = 10_000;

/** One pod set of a Workload: how many pods, each asking for `requests` (a pod slot included). */
export interface CheckPodSet {
  name: string;
  count: number;
  requests: ResourceAmounts;
}

/** What the check answers, as Kueue's AdmissionCheckState takes it. */
export interface CapacityVerdict {
  /** `Ready`: admit; `Retry`: release the reservation, Kueue requeues the Workload later. */
  state: 'Ready' | 'Retry';
  message: string;
}

/**
 * The target whose virtual node's identity labels a flavor's `nodeLabels` carry (as `admiralty
 * kueue setup` writes them), among `targets`; undefined when none (a flavor of no target: the
 * check has no say there). Pure.
 */
export function flavorTarget(nodeLabels: Readonly<Record<string, string>> | undefined, targets: readonly TargetRef[]): TargetRef | undefined {
  if (!nodeLabels) return undefined;
  return targets.find((t) => Object.entries(targetIdentityLabels(t)).every(([k, v]) => nodeLabels[k] === v));
}

/** A Workload's `spec.podSets`, each pod's requests read as the scheduler reads them (init containers, overhead), plus its pod slot. Pure. */
export function checkPodSets(podSets: ReadonlyArray<{ name?: string; count?: number; template?: { spec?: V1PodSpec } }> | undefined): CheckPodSet[] {
  return (podSets ?? []).map((p, i) => {
    const requests = podRequests(p.template?.spec, { includeOverhead: true });
    requests.set('pods', (requests.get('pods') ?? 0n) + ONE_POD);
    return { name: p.name ?? `#${i}`, count: Math.max(0, Math.floor(p.count ?? 1)), requests };
  });
}

const fitsIn = (free: ResourceAmounts, want: ResourceAmounts) => [...want].every(([r, amount]) => amount <= 0n || (free.get(r) ?? 0n) >= amount);

/** What `want` lacks in `free`, as `cpu 2 (1500m free)`. */
function shortOf(free: ResourceAmounts, want: ResourceAmounts): string {
  return [...want]
    .filter(([r, amount]) => amount > (free.get(r) ?? 0n))
    .map(([r, amount]) => `${r} ${formatQuantity(amount, r)} (${formatQuantity(free.get(r) ?? 0n, r)} free)`)
    .join(', ');
}

/**
 * Whether all the pods of `podSets` fit now on the target's real nodes that take new pods
 * (Ready, not cordoned), by their free room, first fit with the largest pods first (pods of one
 * set are alike). Judges resources only: node selectors, taints and affinity are left to the
 * extender's filter when the pods come. A Workload of more than {@link MAX_PODS_PLACED} pods is
 * judged by the sums of free room only. Pure.
 */
export function capacityVerdict(target: string, summary: ClusterSummary | undefined, podSets: readonly CheckPodSet[]): CapacityVerdict {
  if (!summary) return { state: 'Retry', message: `no summary of target ${target} yet: its room is unknown` };
  const nodes = (summary.nodePools ?? []).flatMap((p) => p.nodes ?? []).filter((n) => !n.notReady && !n.unschedulable);
  const total = podSets.reduce((n, p) => n + p.count, 0);
  if (total === 0) return { state: 'Ready', message: `no pod to place in ${target}` };
  if (total > MAX_PODS_PLACED || summary.nodePools === undefined) {
    const free = summary.nodePools === undefined ? parseList(summary.free) : new Map<string, bigint>();
    for (const n of nodes) for (const [r, v] of parseList(n.free)) free.set(r, (free.get(r) ?? 0n) + v);
    const want = new Map<string, bigint>();
    for (const p of podSets) for (const [r, v] of p.requests) want.set(r, (want.get(r) ?? 0n) + v * BigInt(p.count));
    return fitsIn(free, want)
      ? { state: 'Ready', message: `${total} pods fit in ${target}'s free room now (by its sums)` }
      : { state: 'Retry', message: `${target} has not the room for all ${total} pods now: short of ${shortOf(free, want)}` };
  }
  const free = nodes.map((n) => parseList(n.free));
  const bySize = [...podSets].sort((a, b) => Number((b.requests.get('cpu') ?? 0n) - (a.requests.get('cpu') ?? 0n)) || Number((b.requests.get('memory') ?? 0n) - (a.requests.get('memory') ?? 0n)));
  let placed = 0;
  for (const p of bySize) {
    for (let i = 0; i < p.count; i++) {
      const node = free.find((f) => fitsIn(f, p.requests));
      if (!node) {
        const largest = free.reduce<ResourceAmounts | undefined>((best, f) => (!best || (f.get('cpu') ?? 0n) > (best.get('cpu') ?? 0n) ? f : best), undefined) ?? new Map<string, bigint>();
        return {
          state: 'Retry',
          message: `${placed} of ${total} pods fit in ${target} now: no node has room for another pod of set ${p.name} (the largest free node: ${shortOf(largest, p.requests)})`,
        };
      }
      for (const [r, v] of p.requests) node.set(r, (node.get(r) ?? 0n) - v);
      placed++;
    }
  }
  return { state: 'Ready', message: `all ${total} pods fit in ${target} now` };
}
