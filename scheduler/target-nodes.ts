import type { V1Taint } from '@kubernetes/client-node';
import { UsedHostPorts } from '../provider/model/host-ports.js';
import { parseList, type ResourceAmounts } from '../provider/model/resources.js';
import type { ClusterSummary } from '../provider/model/types.js';

/**
 * One real node of a target as the extender judges it: what the target's ClusterSummary says
 * of it, with quantities parsed. The source never reads a target's nodes or pods itself.
 */
export interface FitNode {
  name: string;
  /**
   * The pool's labels: one object for all its nodes, not a copy each (a pool of 10 000 nodes
   * with 2000 labels would be 20 M of them: about a GiB).
   */
  labels: Readonly<Record<string, string>>;
  /** Its `kubernetes.io/hostname` (the summary keeps it out of pool keys), which wins over the pool's. */
  hostname: string;
  /** NoSchedule and NoExecute taints. */
  taints: readonly V1Taint[];
  unschedulable: boolean;
  notReady: boolean;
  allocatable: ResourceAmounts;
  /** Allocatable minus the requests of the pods bound to it when the summary was written. */
  free: ResourceAmounts;
  /** The host ports its pods held when the summary was written; absent when none. */
  usedPorts?: UsedHostPorts;
  /** What its pods a user's pod can preempt held, by priority, lowest first; absent when none (or not published). */
  heldByPriority?: readonly HeldAtPriority[];
}

/** One bucket of a node's pods by priority (`SummaryNode.heldByPriority`), quantities parsed. */
export interface HeldAtPriority {
  priority: number;
  requests: ResourceAmounts;
}

const parsed = new WeakMap<ClusterSummary, readonly FitNode[]>();

/**
 * The nodes of a ClusterSummary's pools, parsed once per summary object (the extender calls
 * this for every virtual node of every pod; a summary object is replaced, never changed).
 * A summary without pools (written by an older provider) has no nodes: no pod fits it.
 *
 * Pure apart from the cache.
 */
export function nodesOfSummary(summary: ClusterSummary): readonly FitNode[] {
  const cached = parsed.get(summary);
  if (cached) return cached;
  const out: FitNode[] = [];
  for (const pool of summary.nodePools ?? []) {
    const taints = (pool.taints ?? []).map((t) => ({ key: t.key, value: t.value, effect: t.effect }));
    for (const n of pool.nodes ?? []) {
      out.push({
        name: n.name,
        labels: pool.labels,
        hostname: n.hostname ?? n.name,
        taints,
        unschedulable: n.unschedulable === true,
        notReady: n.notReady === true,
        allocatable: parseList(n.allocatable),
        free: parseList(n.free),
        ...(n.hostPorts?.length ? { usedPorts: new UsedHostPorts(n.hostPorts) } : {}),
        ...(n.heldByPriority?.length ? { heldByPriority: n.heldByPriority.map((b) => ({ priority: b.priority, requests: parseList(b.requests) })) } : {}),
      });
    }
  }
  parsed.set(summary, out);
  return out;
}
