import type { V1PodSpec } from '@kubernetes/client-node';
import { ONE_POD, type ResourceAmounts } from '../provider/model/resources.js';
import type { ClusterSummary, SummaryPriorityClass } from '../provider/model/types.js';
import { nodesOfSummary, type FitNode } from './target-nodes.js';

// Preemption inside a target: whether the target's own scheduler would make room for a delegate
// by preempting that target's pods of lower priority, judged from what its ClusterSummary
// publishes (its PriorityClasses with their values, and per node what its pods hold by priority).
// The target's scheduler does the preempting, as it would for the same pod created there: it
// picks the node and the victims, honours the target's PodDisruptionBudgets, and sets the
// delegate's nominatedNodeName, which the bind takes as the placement.

/** A target's PriorityClasses by name, and the one that gives its value to pods that name none. */
export interface TargetPriorityClasses {
  byName: ReadonlyMap<string, SummaryPriorityClass>;
  globalDefault?: SummaryPriorityClass;
}

const parsed = new WeakMap<ClusterSummary, TargetPriorityClasses>();

/**
 * The PriorityClasses with values that a ClusterSummary publishes (`priorityClassValues`), once
 * per summary object; undefined when it publishes none (its writer is an earlier version, or may
 * not read them): no preemption is then judged there, as before. Of two classes that claim
 * `globalDefault` (the apiserver allows one only), the lowest value wins, which promises least.
 * Pure apart from the cache.
 */
export function priorityClassValuesOfSummary(summary: ClusterSummary): TargetPriorityClasses | undefined {
  if (!summary.priorityClassValues) return undefined;
  const cached = parsed.get(summary);
  if (cached) return cached;
  const byName = new Map<string, SummaryPriorityClass>();
  let globalDefault: SummaryPriorityClass | undefined;
  for (const c of summary.priorityClassValues) {
    byName.set(c.name, c);
    if (c.globalDefault && (!globalDefault || c.value < globalDefault.value)) globalDefault = c;
  }
  const out = { byName, ...(globalDefault ? { globalDefault } : {}) };
  parsed.set(summary, out);
  return out;
}

/** A delegate's priority in a target, and whether it may preempt there (else why not). */
export type DelegatePriority = { priority: number; preempts: true } | { priority: number; preempts: false; why: string };

/**
 * The priority the target's Priority admission gives the delegate of `spec` (the delegate keeps
 * `priorityClassName` and drops `priority` and `preemptionPolicy`, see `buildDelegatePod`): the
 * value of the class of that name in the target, or for a pod that names none the target's
 * `globalDefault` class, else 0. It preempts unless the pod's own `preemptionPolicy` is `Never`
 * (the user asked it not to: the proxy scheduler honours it among proxies, and so do we in
 * targets) or its class in the target says `Never` (the target's admission gives the delegate
 * that policy, and its scheduler then preempts nothing). Undefined when the target's classes are
 * not known (`classes`), or the pod names a class the target lacks (its admission refuses the
 * delegate: `priorityClassRefusal` says so first). `target` names the target in the reason. Pure.
 */
export function delegatePriority(spec: V1PodSpec, classes: TargetPriorityClasses | undefined, target: string): DelegatePriority | undefined {
  if (!classes) return undefined;
  const name = spec.priorityClassName;
  const cls = name ? classes.byName.get(name) : classes.globalDefault;
  if (name && !cls) return undefined;
  const priority = cls?.value ?? 0;
  if (spec.preemptionPolicy === 'Never') return { priority, preempts: false, why: "the pod's preemptionPolicy is Never" };
  if (cls?.preemptionPolicy === 'Never') return { priority, preempts: false, why: `its PriorityClass ${cls.name} in ${target} has preemptionPolicy Never` };
  return { priority, preempts: true };
}

/**
 * What preempting every pod of priority below `priority` on `node` would free: the sum of its
 * buckets below it. A merged bucket carries the highest priority in it, so it counts only for a
 * pod above all of its pods. Empty when nothing would be freed. Pure.
 */
export function preemptibleRoom(node: FitNode, priority: number): ResourceAmounts {
  const out: ResourceAmounts = new Map();
  for (const b of node.heldByPriority ?? []) {
    if (b.priority >= priority) continue;
    for (const [r, amount] of b.requests) out.set(r, (out.get(r) ?? 0n) + amount);
  }
  return out;
}

/**
 * The nodes of `nodes` on which `requests` (pod slot included) would fit once the target's
 * scheduler had preempted the pods of priority below `priority`: free, plus their room, less
 * `assumed` (what this source placed there that the summary does not count yet). The caller
 * gives only the nodes that fit the pod but for room (ready, schedulable, matching, tolerated,
 * their host ports free): preemption frees room, nothing else. Pure.
 */
export function nodesFreedByPreemption(requests: ResourceAmounts, nodes: readonly FitNode[], priority: number, assumed?: ReadonlyMap<string, ResourceAmounts>): string[] {
  const out: string[] = [];
  for (const node of nodes) {
    const freed = preemptibleRoom(node, priority);
    if (freed.size === 0) continue;
    const promised = assumed?.get(node.name);
    let fits = true;
    for (const [r, amount] of requests) {
      if (amount <= 0n) continue;
      const room = (node.free.get(r) ?? 0n) + (freed.get(r) ?? 0n) - (promised?.get(r) ?? 0n);
      if (room < amount) {
        fits = false;
        break;
      }
    }
    if (fits) out.push(node.name);
  }
  return out;
}

/**
 * How many pods of lower priority than the delegate of `spec` a target's summary counts on its
 * node `nodeName` (the `pods` of its buckets below that priority: an upper bound on what the
 * target's scheduler preempts there, which evicts the fewest that make room); undefined when the
 * summary does not say (no classes with values, no such node, a class the target lacks). Pure
 * apart from the summary caches.
 */
export function lowerPriorityPodsOn(summary: ClusterSummary, nodeName: string, spec: V1PodSpec): number | undefined {
  const priority = delegatePriority(spec, priorityClassValuesOfSummary(summary), '');
  const node = priority && nodesOfSummary(summary).find((n) => n.name === nodeName);
  if (!priority || !node) return undefined;
  return Number((preemptibleRoom(node, priority.priority).get('pods') ?? 0n) / ONE_POD);
}
