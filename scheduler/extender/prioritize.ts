import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { TargetClient } from '../../provider/clusters/target-client.js';
import { errorFields } from '../../provider/core/logger.js';
import type { ResourceAmounts } from '../../provider/model/resources.js';
import { targetIdentityLabels } from '../../provider/model/virtual-node.js';
import { placementGroup, placementPolicyOf, type PolicyChoice } from '../placement-policy.js';
import { podPreferences, preferenceScore } from '../preference.js';
import { MAX_SCORE, rankTargets, weightsDiffer, type ScoredTarget } from '../score.js';
import { podTopology, softTopologyScores, unconstrainedTopology, type PodTopology } from '../topology.js';
import { assumedOn, candidates, CHOSEN_TTL_MS, delegateSpecOf, isVirtual, MAX_REMEMBERED_PODS, rememberChoice, type ExtenderContext } from './context.js';
import { affinePods, federationOf, scoresOthers } from './federation.js';
import { fittingNodesOf } from './judge.js';
import type { ExtenderArgs, HostPriority, TargetState } from './types.js';

/** Upstream `MaxExtenderPriority` (k8s.io/kube-scheduler/extender/v1): extender scores are 0..10. */
export const MAX_EXTENDER_PRIORITY = MAX_SCORE;

/** What prioritize found out for explain: the pod's policy, whether weights counted, each host's preference. */
export interface PrioritizeDetail {
  choice?: PolicyChoice;
  preference: Map<string, number>;
  weighted: boolean;
}

/**
 * How much the pod prefers one target (`preferenceScore`): its own terms over the real nodes
 * that fit it now, judged as the filter judges them (binds in flight counted), the proxy's
 * own against the virtual node.
 */
export function preferenceOf(
  ctx: ExtenderContext,
  prefs: NonNullable<ReturnType<typeof podPreferences>>,
  pod: V1Pod,
  c: { name: string; node?: V1Node },
  target: TargetClient,
  state: TargetState,
  assumed: ReadonlyMap<string, ResourceAmounts>,
): number {
  const { opts, logger } = ctx;
  const identity = targetIdentityLabels(target.ref);
  const fittingNodes = prefs.realNode.length > 0 ? fittingNodesOf(ctx, pod, target, state, assumed) : [];
  let labels = c.node?.metadata?.labels;
  if (!labels && prefs.virtualNode.length > 0) {
    try {
      labels = opts.virtualNodeLabels?.(target.key);
    } catch (err) {
      logger.error('scheduler extender: reading the labels of a virtual node failed', { cluster: target.displayName, ...errorFields(err) });
    }
  }
  return preferenceScore(prefs, { identity, virtualNode: { name: c.name, labels: labels ?? identity, hostname: c.name }, fittingNodes });
}

/**
 * Folds the pod's soft topology into each target's `preference`, as kube-scheduler's default
 * profile adds its scores up (NodeAffinity, PodTopologySpread and InterPodAffinity, weight 2
 * each): the preferred node-affinity weights normalized to 0..100 over the candidates (the most
 * preferred gets 100), plus `softTopologyScores` over the nodes of each that fit the pod now.
 * Only for pods with soft topology, or that counted pods' own terms score ({@link affinePods}):
 * the others keep their plain weights, which rank the same.
 */
export function withSoftTopology(ctx: ExtenderContext, proxy: V1Pod, pod: V1Pod, topology: PodTopology, scored: (ScoredTarget & { target: TargetClient; state: TargetState })[]): void {
  if (topology.softSpread.length === 0 && topology.preferred.length === 0 && !affinePods(ctx, proxy).some(scoresOthers)) return;
  const { targets, pods } = federationOf(ctx, proxy, topology);
  const candidates = scored.map((t) => ({ key: t.key, nodes: fittingNodesOf(ctx, pod, t.target, t.state, t.assumed ?? new Map()) }));
  const soft = softTopologyScores(topology, targets, pods, candidates);
  if (!soft) return;
  const most = Math.max(0, ...scored.map((t) => t.preference ?? 0));
  for (const t of scored) t.preference = (most > 0 ? Math.floor((100 * (t.preference ?? 0)) / most) : 0) + (soft.get(t.key) ?? 0);
}

/** How many pods of the pod's group each target has, bound, being bound, or just chosen. */
export function groupCounts(ctx: ExtenderContext, pod: V1Pod): Map<string, number> {
  const { opts, clock, chosen } = ctx;
  const uid = pod.metadata?.uid ?? '';
  const group = placementGroup(pod);
  const byPod = new Map(opts.groupPlacements?.(pod) ?? []);
  const now = clock.now();
  for (const [other, c] of chosen) {
    if (now - c.atMs > CHOSEN_TTL_MS) chosen.delete(other);
    else if (c.group === group && !byPod.has(other)) byPod.set(other, c.targetKey);
  }
  byPod.delete(uid);
  const counts = new Map<string, number>();
  for (const key of byPod.values()) counts.set(key, (counts.get(key) ?? 0) + 1);
  return counts;
}

/**
 * kube-scheduler's `prioritize` (see `createExtenderRoutes`).
 * `remember: false` (explain): no Warning event, and the pod's choice is not counted for weights.
 */
export function prioritize(ctx: ExtenderContext, args: ExtenderArgs, remember = true, detail?: PrioritizeDetail): HostPriority[] {
  const { opts, logger, registry, policyOf, warned, namespaceLabels } = ctx;
  const choice = placementPolicyOf(args.Pod, args.Pod.metadata?.namespace ? opts.namespace?.(args.Pod.metadata.namespace) : undefined, policyOf());
  const uid = args.Pod.metadata?.uid;
  if (remember && choice.invalid && uid && !warned.has(uid)) {
    if (warned.size >= MAX_REMEMBERED_PODS) warned.delete(warned.values().next().value!);
    warned.add(uid);
    opts.events?.record({ kind: 'Pod', apiVersion: 'v1', metadata: args.Pod.metadata! }, 'Warning', 'InvalidPlacementPolicy', choice.invalid.message);
  }
  const pod = delegateSpecOf(args.Pod);
  const prefs = podPreferences(args.Pod, pod);
  const scored: (ScoredTarget & { host: string; target: TargetClient; state: TargetState })[] = [];
  const hosts = candidates(args).map((c) => {
    if (!isVirtual(ctx, c)) return { Host: c.name, Score: 0 };
    const target = registry.byNodeName(c.name);
    let state: TargetState | undefined;
    try {
      state = target ? opts.targetState(target.key) : undefined;
    } catch (err) {
      logger.error('scheduler extender: reading target state failed', { cluster: target?.displayName, ...errorFields(err) });
    }
    if (target && state) {
      const assumed = assumedOn(ctx, target, state);
      const t: (typeof scored)[number] = { host: c.name, key: target.key, nodes: state.nodes, assumed, placement: opts.targetPlacement?.(target.key), target, state };
      if (prefs) t.preference = preferenceOf(ctx, prefs, pod, c, target, state, assumed);
      scored.push(t);
    }
    return { Host: c.name, Score: 0 };
  });
  const topology = podTopology(pod, namespaceLabels);
  // Existing pods' terms score a pod without constraints of its own too.
  const scoredBy = topology ?? (affinePods(ctx, args.Pod).some(scoresOthers) ? unconstrainedTopology(pod) : undefined);
  if (scoredBy) withSoftTopology(ctx, args.Pod, pod, scoredBy, scored);
  const group = weightsDiffer(scored.map((t) => t.placement)) ? groupCounts(ctx, args.Pod) : undefined;
  if (detail) {
    detail.choice = choice;
    detail.weighted = group !== undefined;
    if (prefs || topology) for (const t of scored) detail.preference.set(t.host, t.preference ?? 0);
  }
  if (group) for (const t of scored) t.groupPods = group.get(t.key) ?? 0;
  const scores = rankTargets(choice.policy, pod, scored);
  let top = scored.filter((t) => scores.get(t.key) === MAX_SCORE);
  if (top.length > 1 && topology) {
    // The next pods' topology counts this one where it goes before its bind shows, and only a
    // target ranked first alone is known to be where it goes: the tie is broken here, by key,
    // rather than by kube-scheduler at random.
    top = [...top].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    for (const t of top.slice(1)) scores.set(t.key, MAX_SCORE - 1);
    top = top.slice(0, 1);
  }
  const byHost = new Map(scored.map((t) => [t.host, scores.get(t.key) ?? 0]));
  const only = top.length === 1 ? top[0] : undefined;
  if (remember && only) rememberChoice(ctx, args.Pod, only.key);
  return hosts.map((h) => (byHost.has(h.Host) ? { Host: h.Host, Score: byHost.get(h.Host)! } : h));
}
