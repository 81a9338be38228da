import type { V1NodeSelectorRequirement, V1NodeSelectorTerm, V1Pod, V1PreferredSchedulingTerm } from '@kubernetes/client-node';
import { HOSTNAME_LABEL } from '../provider/core/keys.js';
import { matchesLabelRequirement, VIRTUAL_NODE_ONLY_LABEL_KEYS } from '../provider/model/target-keys.js';
import { matchesTerm, type NodeIdentity } from './node-match.js';
import type { FitNode } from './target-nodes.js';

/** One of the pod's own preferred terms, split once: what the target's identity judges, and what each real node does. */
interface RealNodeTerm {
  weight: number;
  /** Its requirements on {@link VIRTUAL_NODE_ONLY_LABEL_KEYS}: no real node has those labels. */
  onTarget: readonly V1NodeSelectorRequirement[];
  /** The rest, judged per real node; undefined when nothing is left (the term is about the target alone). */
  onNode?: V1NodeSelectorTerm;
  /** Whether `onNode` reads only the pool's labels (no hostname, no `matchFields`), so one answer serves a pool. */
  byPool: boolean;
}

/**
 * The node preferences of a pod, worked out once per prioritize call ({@link podPreferences})
 * and judged per target by {@link preferenceScore}.
 */
export interface PodPreferences {
  /** The pod's own preferred node-affinity terms (the delegate's), judged per real node. */
  realNode: readonly RealNodeTerm[];
  /**
   * The proxy's preferred terms that are not the pod's own: those of
   * `proxy-pod-scheduling-constraints`, judged against the virtual node's labels.
   */
  virtualNode: readonly V1PreferredSchedulingTerm[];
}

/** What {@link preferenceScore} needs to know of one target. */
export interface PreferenceTarget {
  /** Its identity labels (`targetIdentityLabels`): the pod's own terms on target keys are judged against them. */
  identity: Readonly<Record<string, string>>;
  /** Its virtual node (name and labels): the proxy's own terms are judged against it. */
  virtualNode: NodeIdentity;
  /** Its real nodes that fit the pod now (`fitsTarget`'s `fittingNodes`). */
  fittingNodes: readonly FitNode[];
}

/**
 * The preferred node-affinity terms of a pod, split by where each is judged: the pod's own (those
 * of `delegate`, its scheduling view, `schedulingPod`) per real node of a target, and the proxy's
 * own that are not among them (the webhook puts `proxy-pod-scheduling-constraints` there in
 * exact mode; a term the proxy keeps from the pod's spec would otherwise count twice) against
 * the virtual node. Terms of weight 0 or less are left out, as kube-scheduler leaves them.
 * Returns undefined when the pod prefers nothing, so that a pod without preferences costs
 * nothing more. Cost linear in the terms and their requirements; the webhook caps both
 * (`POD_LIST_LIMITS`). Pure.
 */
export function podPreferences(proxy: V1Pod, delegate: V1Pod): PodPreferences | undefined {
  const own = preferredTerms(delegate);
  const counted = new Map<string, number>();
  for (const t of own) counted.set(termKey(t), (counted.get(termKey(t)) ?? 0) + 1);
  const virtualNode: V1PreferredSchedulingTerm[] = [];
  for (const t of proxy === delegate ? [] : preferredTerms(proxy)) {
    const key = termKey(t);
    const left = counted.get(key) ?? 0;
    if (left > 0) counted.set(key, left - 1);
    else virtualNode.push(t);
  }
  if (own.length === 0 && virtualNode.length === 0) return undefined;
  const realNode = own.map((t): RealNodeTerm => {
    const expressions = t.preference.matchExpressions ?? [];
    const fields = t.preference.matchFields ?? [];
    const onTarget = expressions.filter((e) => VIRTUAL_NODE_ONLY_LABEL_KEYS.has(e.key));
    const rest = expressions.filter((e) => !VIRTUAL_NODE_ONLY_LABEL_KEYS.has(e.key));
    // A term only on target keys matches every node of a target it admits; an empty one, none.
    const aboutTargetAlone = onTarget.length > 0 && rest.length === 0 && fields.length === 0;
    return {
      weight: t.weight,
      onTarget,
      onNode: aboutTargetAlone ? undefined : { matchExpressions: rest, matchFields: fields },
      byPool: fields.length === 0 && !rest.some((e) => e.key === HOSTNAME_LABEL),
    };
  });
  return { realNode, virtualNode };
}

/**
 * How much a pod prefers a target, as kube-scheduler's NodeAffinity score counts a node's (the
 * sum of the weights of the preferred terms it matches): the weights of the proxy's own terms
 * the virtual node matches, plus the most that one of the target's fitting real nodes gets of
 * the pod's own terms (the target's scheduler scores those nodes the same way). A requirement of
 * the pod's own on a target key is judged against the target's identity (a term whose target
 * requirement fails counts nowhere in this target; one only on target keys counts once when they
 * hold, even while no node fits and the target takes the pod by its burst capacity).
 *
 * Cost O(pools + nodes with a hostname or `matchFields` term) × terms × requirements: one answer
 * per pool's label object otherwise. Pure.
 */
export function preferenceScore(prefs: PodPreferences, target: PreferenceTarget): number {
  let score = 0;
  for (const t of prefs.virtualNode) if (matchesTerm(t.preference, target.virtualNode)) score += t.weight;
  const perNode: RealNodeTerm[] = [];
  for (const t of prefs.realNode) {
    if (!t.onTarget.every((r) => matchesLabelRequirement(r, target.identity))) continue;
    if (t.onNode) perNode.push(t);
    else score += t.weight;
  }
  if (perNode.length === 0) return score;
  const byPool = perNode.filter((t) => t.byPool);
  const byNode = perNode.filter((t) => !t.byPool);
  const pools = new Map<Readonly<Record<string, string>>, number>();
  let best = 0;
  for (const node of target.fittingNodes) {
    let sum = pools.get(node.labels);
    if (sum === undefined) {
      sum = 0;
      for (const t of byPool) if (matchesTerm(t.onNode!, node)) sum += t.weight;
      pools.set(node.labels, sum);
    }
    for (const t of byNode) if (matchesTerm(t.onNode!, node)) sum += t.weight;
    if (sum > best) best = sum;
  }
  return score + best;
}

/** A pod's preferred node-affinity terms of positive weight with a preference. */
function preferredTerms(pod: V1Pod): V1PreferredSchedulingTerm[] {
  const terms = pod.spec?.affinity?.nodeAffinity?.preferredDuringSchedulingIgnoredDuringExecution ?? [];
  return terms.filter((t) => t && typeof t.weight === 'number' && t.weight > 0 && t.preference);
}

/** A term as a string, whatever the order of its fields (the saved manifest and the proxy are serialized apart). */
function termKey(t: V1PreferredSchedulingTerm): string {
  const requirements = (list: V1NodeSelectorRequirement[] | undefined) => (list ?? []).map((r) => [r.key, r.operator, r.values ?? []]);
  return JSON.stringify([t.weight, requirements(t.preference.matchExpressions), requirements(t.preference.matchFields)]);
}
