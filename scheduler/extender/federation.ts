import type { V1Pod } from '@kubernetes/client-node';
import { errorFields } from '../../provider/core/logger.js';
import { isTerminal } from '../../provider/model/resources.js';
import { targetIdentityLabels } from '../../provider/model/virtual-node.js';
import { matchesNodeSelectorAndAffinity } from '../node-match.js';
import { hasRequiredTopology, podTopology, topologyFilter, unconstrainedTopology, type PlacedPod, type PodTopology, type TopologyTarget } from '../topology.js';
import { CHOSEN_TTL_MS, refusedSince, termsOfProxy, type ExtenderContext } from './context.js';
import type { TargetState, TopologyJudge } from './types.js';

/**
 * The pod's topology spread (DoNotSchedule) and required pod (anti-)affinity judged across the
 * federation ({@link topologyFilter}), with the counted proxies' own required anti-affinity
 * against it, worked out once per filter call; undefined when the pod has none and no proxy of
 * {@link affinePods} has required anti-affinity. Domains: the real nodes of every target with a summary (in scope: the targets the
 * pod's namespace may use whose virtual node the proxy's own node constraints admit); pods: the
 * source's proxies bound or being bound ({@link ExtenderRoutesOptions.placedProxies}) and those
 * prioritize just ranked first, on the real node of their delegate when the target's cache has it.
 */
export function topologyOf(ctx: ExtenderContext, proxy: V1Pod, pod: V1Pod): TopologyJudge | undefined {
  const { namespaceLabels } = ctx;
  const own = podTopology(pod, namespaceLabels);
  const required = own !== undefined && hasRequiredTopology(own);
  // Existing pods' anti-affinity judges a pod without constraints of its own too.
  if (!required && !affinePods(ctx, proxy).some((p) => p.terms!.antiAffinity.length > 0)) return undefined;
  const topology = own ?? unconstrainedTopology(pod);
  const { targets, pods } = federationOf(ctx, proxy, topology);
  return topologyFilter(topology, targets, pods);
}

/**
 * The pods whose own terms judge `proxy`: the proxies of {@link ExtenderRoutesOptions.affineProxies}
 * with terms, then those prioritize ranked first lately that have terms, but those whose UIDs
 * are `seen` already (which it adds to). Cost O(such pods).
 */
export function affinePods(ctx: ExtenderContext, proxy: V1Pod, seen = new Set<string>()): PlacedPod[] {
  const { opts, clock, chosen, chosenWithTerms } = ctx;
  const self = proxy.metadata?.uid;
  const out: PlacedPod[] = [];
  for (const { proxy: p, targetKey } of opts.affineProxies?.() ?? []) {
    const uid = p.metadata?.uid;
    const placed = uid && uid !== self && !seen.has(uid) && placedPod(ctx, p, targetKey);
    if (!placed || !placed.terms) continue;
    seen.add(uid);
    out.push(placed);
  }
  const now = clock.now();
  for (const [uid, c] of chosenWithTerms) {
    if (chosen.get(uid) !== c || now - c.atMs > CHOSEN_TTL_MS) chosenWithTerms.delete(uid);
    else if (uid !== self && !seen.has(uid) && !refusedSince(ctx, uid, c, now)) {
      seen.add(uid);
      out.push({ namespace: c.namespace, labels: c.labels, targetKey: c.targetKey, terms: c.terms });
    }
  }
  return out;
}

/** A live proxy on (or going to) a target as topology counts it, or undefined for one deleted or done. */
export function placedPod(ctx: ExtenderContext, p: V1Pod, targetKey: string): PlacedPod | undefined {
  const { opts } = ctx;
  if (p.metadata?.deletionTimestamp || isTerminal(p)) return undefined;
  const nodeName = opts.delegateOf?.(targetKey, p)?.spec?.nodeName;
  const terms = termsOfProxy(ctx, p);
  return { namespace: p.metadata?.namespace ?? '', labels: p.metadata?.labels ?? {}, targetKey, ...(nodeName ? { nodeName } : {}), ...(terms ? { terms } : {}) };
}

/** Whether a pod's own terms score the pods placed after it (preferred terms, required affinity). */
export function scoresOthers(p: PlacedPod): boolean {
  return !!p.terms && p.terms.preferred.length + p.terms.affinity.length > 0;
}

/** The targets (every one with a summary, in scope or not) and the pods a topology counts. */
export function federationOf(ctx: ExtenderContext, proxy: V1Pod, topology: PodTopology): { targets: TopologyTarget[]; pods: PlacedPod[] } {
  const { opts, logger, registry } = ctx;
  const namespace = proxy.metadata?.namespace ?? '';
  const targets: TopologyTarget[] = [];
  for (const t of registry.list()) {
    let state: TargetState | undefined;
    try {
      state = opts.targetState(t.key);
    } catch (err) {
      logger.error('scheduler extender: reading target state failed', { cluster: t.displayName, ...errorFields(err) });
    }
    if (!state) continue;
    const identity = targetIdentityLabels(t.ref);
    const scoped = t.ref.kind !== 'Target' || t.ref.namespace === namespace;
    targets.push({ key: t.key, identity, nodes: state.nodes, inScope: scoped && admitsVirtualNode(ctx, proxy, t.key, identity) });
  }
  return { targets, pods: placedPods(ctx, proxy, topology) };
}

/** Whether the proxy's own nodeSelector and required node affinity admit a target's virtual node. */
export function admitsVirtualNode(ctx: ExtenderContext, proxy: V1Pod, targetKey: string, identity: Readonly<Record<string, string>>): boolean {
  const { opts, registry } = ctx;
  let labels: Readonly<Record<string, string>> | undefined;
  try {
    labels = opts.virtualNodeLabels?.(targetKey);
  } catch {
    labels = undefined;
  }
  const name = registry.nodeNameOf(targetKey) ?? '';
  return matchesNodeSelectorAndAffinity(proxy.spec ?? { containers: [] }, { name, labels: labels ?? identity, hostname: name });
}

/**
 * The pods topology counts for `proxy`: when the pod has constraints of its own, the other live
 * proxies of its `namespaces` bound or being bound, then those prioritize ranked first within
 * {@link CHOSEN_TTL_MS} (kube-scheduler's cycle runs ahead of its binds) unless their bind was
 * refused since; in any case the pods whose own terms may judge it ({@link affinePods}). Each
 * carries its terms when it has some.
 */
export function placedPods(ctx: ExtenderContext, proxy: V1Pod, topology: PodTopology): PlacedPod[] {
  const { opts, clock, chosen } = ctx;
  const self = proxy.metadata?.uid;
  const seen = new Set<string>();
  const out: PlacedPod[] = [];
  const own = topology.spread.length + topology.softSpread.length + topology.affinity.length + topology.antiAffinity.length + topology.preferred.length > 0;
  const namespaces = topology.namespaces;
  const lists = !own ? [] : namespaces === 'all' ? [opts.placedProxies?.(undefined) ?? []] : [...namespaces].map((n) => opts.placedProxies?.(n) ?? []);
  for (const list of lists) {
    for (const { proxy: p, targetKey } of list) {
      const uid = p.metadata?.uid;
      if (!uid || uid === self || seen.has(uid)) continue;
      const placed = placedPod(ctx, p, targetKey);
      if (!placed) continue;
      seen.add(uid);
      out.push(placed);
    }
  }
  const now = clock.now();
  if (own) {
    for (const [uid, c] of chosen) {
      if (uid === self || seen.has(uid) || now - c.atMs > CHOSEN_TTL_MS) continue;
      if (namespaces !== 'all' && !namespaces.has(c.namespace)) continue;
      if (refusedSince(ctx, uid, c, now)) continue;
      seen.add(uid);
      out.push({ namespace: c.namespace, labels: c.labels, targetKey: c.targetKey, ...(c.terms ? { terms: c.terms } : {}) });
    }
  }
  // Those with terms in other namespaces (those above are seen already).
  out.push(...affinePods(ctx, proxy, seen));
  return out;
}
