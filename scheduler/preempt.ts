import type { V1LabelSelector, V1Pod, V1PodDisruptionBudget, V1PodDisruptionBudgetStatus } from '@kubernetes/client-node';
import type { ResourceAmounts } from '../provider/model/resources.js';
import { matchesLabelRequirement } from '../provider/model/target-keys.js';
import { fitsTarget, type FitOptions } from './fit.js';
import type { FitNode } from './target-nodes.js';

/** A proxy on a virtual node that a pod may preempt: the real node its delegate is on, and what the delegate holds there (pod slot included). */
export interface PreemptionCandidate {
  proxy: V1Pod;
  node: string;
  requests: ResourceAmounts;
}

/** The proxies to preempt so that a pod fits on `node`, a real node of the virtual node's target. */
export interface NodeVictims {
  node: string;
  victims: V1Pod[];
  /** How many victims a PodDisruptionBudget protects (see {@link budgetViolators}). */
  violations: number;
}

const priorityOf = (pod: V1Pod): number => pod.spec?.priority ?? 0;

/**
 * The fewest proxies on a virtual node whose delegates, once gone, leave one real node of its
 * target where `pod` fits ({@link fitsTarget}, with `opts` as the filter gives them), or undefined
 * when none would. kube-scheduler chooses its victims on a virtual node by what the whole node
 * offers; which room frees up where is known only here: three victims, one on each of three
 * nodes, may still leave no node with room.
 *
 * Only candidates of lower priority than `pod` are taken, as kube-scheduler would. On each node,
 * all of them first; then each is kept if the pod still fits without its room: first those whose
 * eviction a PodDisruptionBudget of `budgets` forbids ({@link budgetViolators}), then the others,
 * highest priority first in both (as kube-scheduler reprieves). The node whose victims violate
 * the fewest budgets wins, then the one that needs the fewest victims, then the one whose
 * highest victim priority is lowest, then the first by name. Freed room is the victims' requests
 * added to the node's free room: their host ports stay taken (a pod that needs a victim's port
 * is not offered that room).
 *
 * Pure.
 */
export function victimsOnOneNode(
  pod: V1Pod,
  nodes: readonly FitNode[],
  candidates: readonly PreemptionCandidate[],
  opts: FitOptions,
  budgets: readonly V1PodDisruptionBudget[] = [],
): NodeVictims | undefined {
  const priority = priorityOf(pod);
  const byNode = new Map<string, PreemptionCandidate[]>();
  for (const c of candidates) {
    if (priorityOf(c.proxy) >= priority || c.proxy.metadata?.deletionTimestamp) continue;
    const list = byNode.get(c.node);
    if (list) list.push(c);
    else byNode.set(c.node, [c]);
  }
  let best: { node: string; victims: PreemptionCandidate[]; top: number; violations: number } | undefined;
  for (const node of nodes) {
    const here = byNode.get(node.name);
    if (!here) continue;
    // The node's free room with every victim's room added; a reprieve takes its room back out.
    // One fit test per candidate: a target could claim every delegate sits on one node.
    const free = new Map(node.free);
    const shift = (c: PreemptionCandidate, sign: bigint) => {
      for (const [r, amount] of c.requests) free.set(r, (free.get(r) ?? 0n) + sign * amount);
    };
    // Room that proxies free, not what the target's own preemption would: that is the filter's.
    const fits = () => fitsTarget(pod, [{ ...node, free }], { ...opts, burst: undefined, priorityClassValues: undefined }).fits;
    for (const c of here) shift(c, 1n);
    if (!fits()) continue;
    const reprieved = new Set<PreemptionCandidate>();
    const byImportance = [...here].sort((a, b) => priorityOf(b.proxy) - priorityOf(a.proxy) || name(a).localeCompare(name(b)));
    const violators = budgetViolators(
      byImportance.map((c) => c.proxy),
      budgets,
    );
    const reprieveOrder = [...byImportance.filter((c) => violators.has(c.proxy)), ...byImportance.filter((c) => !violators.has(c.proxy))];
    for (const c of reprieveOrder) {
      shift(c, -1n);
      if (fits()) reprieved.add(c);
      else shift(c, 1n);
    }
    const victims = here.filter((c) => !reprieved.has(c));
    // Room there already (kube-scheduler judged the whole node from an older view): nothing to preempt.
    if (victims.length === 0) continue;
    const top = victims.reduce((max, v) => Math.max(max, priorityOf(v.proxy)), -Infinity);
    const violations = victims.filter((v) => violators.has(v.proxy)).length;
    const better = !best || violations < best.violations || (violations === best.violations && (victims.length < best.victims.length || (victims.length === best.victims.length && top < best.top)));
    if (better) best = { node: node.name, victims, top, violations };
  }
  return best && { node: best.node, victims: best.victims.map((v) => v.proxy), violations: best.violations };
}

/**
 * The pods of `pods` (most important first) whose eviction, after those before them, a
 * PodDisruptionBudget forbids: upstream's `filterPodsWithPDBViolation`. Each budget of a pod's
 * namespace whose selector matches the pod, and that does not list it as disrupted already,
 * gives one of its `disruptionsAllowed` to the pod; a pod that leaves one below zero violates it.
 * A budget with no selector, or an empty one, matches nothing, as kube-scheduler's preemption
 * reads it. Pure.
 */
export function budgetViolators(pods: readonly V1Pod[], budgets: readonly V1PodDisruptionBudget[]): Set<V1Pod> {
  const left = budgets.map((b) => ({ b, allowed: b.status?.disruptionsAllowed ?? 0 }));
  const out = new Set<V1Pod>();
  for (const pod of pods) {
    const labels = pod.metadata?.labels ?? {};
    if (Object.keys(labels).length === 0) continue;
    for (const budget of left) {
      const { b } = budget;
      if (b.metadata?.namespace !== pod.metadata?.namespace || !selects(b.spec?.selector, labels)) continue;
      const disrupted = b.status?.disruptedPods;
      if (disrupted && Object.prototype.hasOwnProperty.call(disrupted, pod.metadata?.name ?? '')) continue;
      if (--budget.allowed < 0) out.add(pod);
    }
  }
  return out;
}

/** What {@link budgetViolators} reads of a PodDisruptionBudget, and what its informer needs: the budgets' cache keeps only this. */
export function budgetFields(b: V1PodDisruptionBudget): V1PodDisruptionBudget {
  const status = { disruptionsAllowed: b.status?.disruptionsAllowed ?? 0, ...(b.status?.disruptedPods ? { disruptedPods: b.status.disruptedPods } : {}) };
  return {
    metadata: { name: b.metadata?.name, namespace: b.metadata?.namespace, resourceVersion: b.metadata?.resourceVersion },
    spec: { selector: b.spec?.selector },
    // The counts budgetViolators does not read are left out.
    status: status as V1PodDisruptionBudgetStatus,
  };
}

const SELECTOR_OPERATORS = new Set(['In', 'NotIn', 'Exists', 'DoesNotExist']);

/** Whether a label selector matches `labels`; one that is absent, empty or invalid matches nothing (see {@link budgetViolators}). */
function selects(selector: V1LabelSelector | undefined, labels: Readonly<Record<string, string>>): boolean {
  const equal = Object.entries(selector?.matchLabels ?? {});
  const expressions = selector?.matchExpressions ?? [];
  if (equal.length === 0 && expressions.length === 0) return false;
  if (expressions.some((e) => !SELECTOR_OPERATORS.has(e.operator))) return false;
  return equal.every(([k, v]) => labels[k] === v) && expressions.every((e) => matchesLabelRequirement(e, labels));
}

function name(c: PreemptionCandidate): string {
  return `${c.proxy.metadata?.namespace ?? ''}/${c.proxy.metadata?.name ?? ''}`;
}
