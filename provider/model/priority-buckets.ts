import type { V1Pod, V1PriorityClass } from '@kubernetes/client-node';
import { formatQuantity, parseQuantity } from './quantity.js';
import { isTerminal, ONE_POD, podRequestsWithOverhead, type ResourceAmounts } from './resources.js';
import type { ClusterSummary, PriorityBucket, SummaryPriorityClass } from './types.js';

/**
 * The highest priority a user's PriorityClass may have (upstream `HighestUserDefinablePriority`).
 * A pod preempts only pods of lower priority than its own, so the pods at or above it (the
 * system classes' pods, mostly DaemonSets) are no user pod's victims, and the summary does not
 * publish what they hold.
 */
export const HIGHEST_USER_PRIORITY = 1_000_000_000;

/**
 * The most priority buckets a summary publishes per node. Clusters use a handful of classes, and
 * the summary is written about once a second: a node's pods of more priorities than this share
 * the last bucket.
 */
export const MAX_PRIORITY_BUCKETS = 4;

/**
 * What the non-terminal pods bound to each node hold, by priority (`spec.priority`, 0 when unset,
 * as kube-scheduler reads it), for the pods below `below` (default {@link HIGHEST_USER_PRIORITY};
 * see {@link preemptionCeiling}: no pod of the cluster can preempt the others): per node, one
 * bucket per priority, lowest first, with the pods' requests (`requestsOf`, default
 * {@link podRequestsWithOverhead}) and a pod slot each under `pods`. A node whose pods have more
 * than {@link MAX_PRIORITY_BUCKETS} priorities has its highest ones merged into the last bucket,
 * which carries the highest of them: a reader then takes those pods as preemptible only by a pod
 * of higher priority than all of them, never more room than the cluster's scheduler would free.
 * Pods being deleted are counted, as in `free` (their room is not free until they are gone, and
 * is freed whatever the priority of the pod waiting for it). Nodes without such pods are left
 * out. Pure and independent of pod order.
 */
export function heldByPriority(pods: readonly V1Pod[], requestsOf: (pod: V1Pod) => ResourceAmounts = podRequestsWithOverhead, below = HIGHEST_USER_PRIORITY): Map<string, PriorityBucket[]> {
  const byNode = new Map<string, Map<number, ResourceAmounts>>();
  for (const pod of pods) {
    const node = pod.spec?.nodeName;
    const priority = pod.spec?.priority ?? 0;
    if (!node || isTerminal(pod) || !Number.isInteger(priority) || priority >= below) continue;
    let buckets = byNode.get(node);
    if (!buckets) byNode.set(node, (buckets = new Map()));
    let held = buckets.get(priority);
    if (!held) buckets.set(priority, (held = new Map()));
    for (const [r, amount] of requestsOf(pod)) held.set(r, (held.get(r) ?? 0n) + amount);
    held.set('pods', (held.get('pods') ?? 0n) + ONE_POD);
  }
  const out = new Map<string, PriorityBucket[]>();
  for (const [node, buckets] of byNode) {
    const priorities = [...buckets.keys()].sort((a, b) => a - b);
    const kept: { priority: number; held: ResourceAmounts }[] = [];
    for (const p of priorities) {
      const held = buckets.get(p)!;
      const last = kept.length < MAX_PRIORITY_BUCKETS ? undefined : kept.at(-1);
      if (!last) {
        kept.push({ priority: p, held: new Map(held) });
        continue;
      }
      // Merged upwards: the bucket is labelled with the highest priority in it.
      last.priority = p;
      for (const [r, amount] of held) last.held.set(r, (last.held.get(r) ?? 0n) + amount);
    }
    out.set(
      node,
      kept.map((b) => ({ priority: b.priority, requests: formatAmounts(b.held) })),
    );
  }
  return out;
}

/**
 * The highest priority a pod of a cluster with these PriorityClasses can get from a class a user
 * may define (at most {@link HIGHEST_USER_PRIORITY}), or undefined when it has none: only pods
 * below it can be anyone's victims (the system classes aside, whose pods are the cluster's own).
 * A cluster without user classes has nothing to publish by priority, and its summary stays as
 * small as before. Pure.
 */
export function preemptionCeiling(classes: readonly { value: number }[]): number | undefined {
  let highest: number | undefined;
  for (const c of classes) if (Number.isInteger(c.value) && c.value <= HIGHEST_USER_PRIORITY && (highest === undefined || c.value > highest)) highest = c.value;
  return highest;
}

/**
 * The PriorityClasses as a summary publishes them (`priorityClassValues`): name, value, and
 * `preemptionPolicy` and `globalDefault` only when they change what a pod gets (`Never`; true),
 * sorted by name. Classes without a name or an integer value are left out. Pure.
 */
export function summaryPriorityClassValues(classes: readonly V1PriorityClass[]): SummaryPriorityClass[] {
  const out: SummaryPriorityClass[] = [];
  for (const pc of classes) {
    const name = pc.metadata?.name;
    if (!name || !Number.isInteger(pc.value)) continue;
    out.push({ name, value: pc.value, ...(pc.preemptionPolicy === 'Never' ? { preemptionPolicy: 'Never' as const } : {}), ...(pc.globalDefault === true ? { globalDefault: true as const } : {}) });
  }
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/**
 * What the pods that some delegate could preempt hold on a cluster's nodes that take new pods
 * (Ready, not cordoned): the buckets its summary publishes below the highest value of its
 * PriorityClasses that a user may define (at most {@link HIGHEST_USER_PRIORITY}), the highest
 * priority a delegate can get there. Nothing without such classes (or without their values): a
 * cluster whose pods all share the default priority has nothing to preempt for anyone. A virtual
 * node advertises this on top of what is free, so that the proxy scheduler's own resource check
 * lets a pod of high priority reach the extender's filter, which alone judges, per real node and
 * per priority, whether preemption there would make room. The system classes are left out (they
 * would make every bucket count, for the pods of every priority): a delegate of such a class is
 * still judged exactly by the filter once the virtual node's free room lets it through.
 * Quantities that do not parse are skipped (the target wrote them). Pure.
 */
export function preemptibleHeld(summary: ClusterSummary | undefined): ResourceAmounts {
  const out: ResourceAmounts = new Map();
  const highest = preemptionCeiling(summary?.priorityClassValues ?? []);
  if (highest === undefined) return out;
  for (const pool of summary?.nodePools ?? []) {
    for (const node of pool.nodes ?? []) {
      if (node.notReady || node.unschedulable) continue;
      for (const b of node.heldByPriority ?? []) {
        if (b.priority >= highest) continue;
        for (const [r, text] of Object.entries(b.requests ?? {})) {
          let amount: bigint;
          try {
            amount = parseQuantity(text);
          } catch {
            continue;
          }
          out.set(r, (out.get(r) ?? 0n) + amount);
        }
      }
    }
  }
  return out;
}

function formatAmounts(amounts: ResourceAmounts): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of [...amounts.keys()].sort()) {
    const amount = amounts.get(name)!;
    if (amount > 0n) out[name] = formatQuantity(amount, name);
  }
  return out;
}
