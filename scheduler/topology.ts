import type { V1LabelSelector, V1LabelSelectorRequirement, V1Pod, V1PodAffinityTerm, V1PodSpec, V1TopologySpreadConstraint, V1WeightedPodAffinityTerm } from '@kubernetes/client-node';
import { HOSTNAME_LABEL, SOURCE_POD_MANIFEST_ANNOTATION } from '../provider/core/keys.js';
import { matchesLabelRequirement, resolveTargetKeys, VIRTUAL_NODE_ONLY_LABEL_KEYS } from '../provider/model/target-keys.js';
import { matchesNodeSelectorAndAffinity, untoleratedTaint } from './node-match.js';
import type { FitNode } from './target-nodes.js';

/** Reasons, in kube-scheduler's words (PodTopologySpread and InterPodAffinity), so FailedScheduling events read familiar. */
export const REASON_SPREAD = "node(s) didn't match pod topology spread constraints";
export const REASON_SPREAD_LABEL = `${REASON_SPREAD} (missing required label)`;
export const REASON_POD_AFFINITY = "node(s) didn't match pod affinity rules";
export const REASON_POD_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules";
export const REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules";

/**
 * What a counted pod's required affinity term that matches the pod being placed adds to a
 * domain's score: upstream's `hardPodAffinityWeight` at its default (InterPodAffinityArgs).
 */
export const HARD_POD_AFFINITY_WEIGHT = 1;

type Labels = Readonly<Record<string, string>>;
type Selector = (labels: Labels) => boolean;

/** The node that kube-scheduler's cordon taint stands for: a cordoned node of a summary carries only the flag. */
const UNSCHEDULABLE_TAINT = { key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' };

/** One `DoNotSchedule` topology spread constraint, with upstream's defaults applied. */
interface SpreadRule {
  key: string;
  maxSkew: number;
  /** `labelSelector` with `matchLabelKeys` merged in, as upstream merges them. */
  selector: Selector;
  /** Default 1. */
  minDomains: number;
  /** `nodeAffinityPolicy`: Honor (the default) counts only the nodes the pod's node constraints admit. */
  honorAffinity: boolean;
  /** `nodeTaintsPolicy`: Honor counts only the nodes whose taints the pod tolerates; Ignore (the default) counts all. */
  honorTaints: boolean;
}

/** One pod (anti-)affinity term. */
interface AffinityRule {
  key: string;
  /** `labelSelector` with `matchLabelKeys` (`In`) and `mismatchLabelKeys` (`NotIn`) merged in. */
  selector: Selector;
  /** Whether the pods of a namespace are looked at. */
  inNamespace: (namespace: string) => boolean;
}

/** A preferred term: its weight, negative for anti-affinity. */
type WeightedRule = AffinityRule & { weight: number };

/**
 * What is judged of a pod across the federation: its topology spread constraints and its pod
 * affinity and anti-affinity terms, required ones by the filter, the others by prioritize.
 * Built by {@link podTopology}.
 */
export interface PodTopology {
  namespace: string;
  labels: Labels;
  spec: V1PodSpec;
  spread: readonly SpreadRule[];
  affinity: readonly AffinityRule[];
  antiAffinity: readonly AffinityRule[];
  /** `ScheduleAnyway` spread: scored only. */
  softSpread: readonly SpreadRule[];
  /** Preferred pod affinity terms (positive weight) and anti-affinity terms (negative): scored only. */
  preferred: readonly WeightedRule[];
  /**
   * The namespaces whose pods count: the pod's own for spread, each term's for (anti-)affinity;
   * `'all'` when a term has a `namespaceSelector` (its namespaces are known only by their labels).
   */
  namespaces: ReadonlySet<string> | 'all';
}

/** One real node of a target, or a whole target, as topology sees it. */
export interface TopologyTarget {
  key: string;
  /** Its identity labels (`targetIdentityLabels`): the values of the keys only virtual nodes carry (`multicluster.admiralty.io/target-name`). */
  identity: Labels;
  /** The real nodes of its last ClusterSummary. */
  nodes: readonly FitNode[];
  /**
   * Whether the pod may be placed there at all (the pod's namespace may use it and the proxy's
   * own node constraints admit its virtual node): under `nodeAffinityPolicy: Honor`, only such
   * targets' nodes are domains of a spread constraint.
   */
  inScope: boolean;
}

/**
 * The pod (anti-)affinity terms of a counted pod, by which it judges the pods placed after it
 * (upstream's symmetry: an existing pod's terms count against the incoming pod): required
 * anti-affinity in the filter, required affinity (weight {@link HARD_POD_AFFINITY_WEIGHT}) and
 * preferred terms in the score. Built by {@link podTerms}.
 */
export interface PodTerms {
  antiAffinity: readonly AffinityRule[];
  affinity: readonly AffinityRule[];
  /** Preferred pod affinity terms (positive weight) and anti-affinity terms (negative). */
  preferred: readonly WeightedRule[];
}

/** A pod counted by topology: a proxy of the source, with the target it is on or going to. */
export interface PlacedPod {
  namespace: string;
  labels: Labels;
  targetKey: string;
  /** The real node its delegate is on, when its target's cache says so. */
  nodeName?: string;
  /** Its own pod (anti-)affinity terms, when it has any ({@link podTerms} of its delegate's view). */
  terms?: PodTerms;
}

/** A target's verdict: kept with the nodes that pass, or rejected with the reason. */
export type TopologyVerdict = { fits: true; nodes: readonly FitNode[] } | { fits: false; reason: string };

/**
 * The topology constraints of `pod` (the delegate's view, `schedulingPod`) that the extender
 * judges across the federation, or undefined when it has none (so that a pod without them costs
 * nothing more): topology spread constraints, and pod affinity and anti-affinity terms, required
 * and preferred (terms of weight 0 are left out). As upstream: a constraint's `minDomains` defaults to 1, `nodeAffinityPolicy` to
 * Honor, `nodeTaintsPolicy` to Ignore; `matchLabelKeys` adds `key=value` of the pod's own labels
 * to the selector (a key the pod lacks is ignored), and for pod (anti-)affinity
 * `mismatchLabelKeys` adds `key NotIn [value]`; a nil `labelSelector` selects nothing, an empty
 * one everything; a term's namespaces are its `namespaces` and those its `namespaceSelector`
 * selects (`namespaceLabels`), the pod's own when it names neither. Pure.
 */
export function podTopology(pod: V1Pod, namespaceLabels: (name: string) => Labels | undefined): PodTopology | undefined {
  const spec = pod.spec;
  const constraints = (spec?.topologySpreadConstraints ?? []).filter((c) => c?.topologyKey);
  const hardSpread = constraints.filter((c) => c.whenUnsatisfiable === 'DoNotSchedule');
  const softSpread = constraints.filter((c) => c.whenUnsatisfiable === 'ScheduleAnyway');
  const terms = termsOf(pod, namespaceLabels);
  if (!spec || (hardSpread.length + softSpread.length === 0 && !terms)) return undefined;
  const labels: Labels = pod.metadata?.labels ?? {};
  const spreadRule = (c: V1TopologySpreadConstraint): SpreadRule => ({
    key: c.topologyKey,
    maxSkew: c.maxSkew,
    selector: selectorOf(c.labelSelector, keyed(c.matchLabelKeys, labels, 'In')),
    minDomains: typeof c.minDomains === 'number' && c.minDomains > 0 ? c.minDomains : 1,
    honorAffinity: c.nodeAffinityPolicy !== 'Ignore',
    honorTaints: c.nodeTaintsPolicy === 'Honor',
  });
  return {
    ...unconstrainedTopology(pod),
    spread: hardSpread.map(spreadRule),
    softSpread: softSpread.map(spreadRule),
    ...(terms ?? {}),
  };
}

/**
 * The topology of a pod with no constraints of its own: what the counted pods' own terms
 * ({@link PlacedPod.terms}) judge it by. Pure.
 */
export function unconstrainedTopology(pod: V1Pod): PodTopology {
  const namespace = pod.metadata?.namespace ?? '';
  return {
    namespace,
    labels: pod.metadata?.labels ?? {},
    spec: pod.spec ?? { containers: [] },
    spread: [],
    affinity: [],
    antiAffinity: [],
    softSpread: [],
    preferred: [],
    namespaces: new Set([namespace]),
  };
}

/**
 * The pod (anti-)affinity terms of a pod (its delegate's view) that judge the pods placed after
 * it, or undefined when it has none: required and preferred, read as {@link podTopology} reads
 * them (its own labels for `matchLabelKeys`, its own namespace when a term names none). Pure.
 */
export function podTerms(pod: V1Pod, namespaceLabels: (name: string) => Labels | undefined): PodTerms | undefined {
  const terms = termsOf(pod, namespaceLabels);
  return terms && { antiAffinity: terms.antiAffinity, affinity: terms.affinity, preferred: terms.preferred };
}

/** The terms of a pod with the namespaces they count, or undefined when it has none. */
function termsOf(pod: V1Pod, namespaceLabels: (name: string) => Labels | undefined): (PodTerms & { namespaces: ReadonlySet<string> | 'all' }) | undefined {
  const affinity = pod.spec?.affinity;
  const required = (terms: V1PodAffinityTerm[] | undefined) => (terms ?? []).filter((t) => t?.topologyKey);
  const preferred = (terms: V1WeightedPodAffinityTerm[] | undefined) => (terms ?? []).filter((t) => typeof t?.weight === 'number' && t.weight !== 0 && t.podAffinityTerm?.topologyKey);
  const affinityTerms = required(affinity?.podAffinity?.requiredDuringSchedulingIgnoredDuringExecution);
  const antiTerms = required(affinity?.podAntiAffinity?.requiredDuringSchedulingIgnoredDuringExecution);
  const preferredAffinity = preferred(affinity?.podAffinity?.preferredDuringSchedulingIgnoredDuringExecution);
  const preferredAnti = preferred(affinity?.podAntiAffinity?.preferredDuringSchedulingIgnoredDuringExecution);
  if (affinityTerms.length + antiTerms.length + preferredAffinity.length + preferredAnti.length === 0) return undefined;
  const namespace = pod.metadata?.namespace ?? '';
  const labels: Labels = pod.metadata?.labels ?? {};
  const namespaces = new Set<string>([namespace]);
  let allNamespaces = false;
  const rule = (t: V1PodAffinityTerm): AffinityRule => {
    const named = new Set(t.namespaces ?? []);
    const bySelector = t.namespaceSelector ? selectorOf(t.namespaceSelector, []) : undefined;
    if (bySelector) allNamespaces = true;
    else if (named.size === 0) named.add(namespace);
    for (const n of named) namespaces.add(n);
    return {
      key: t.topologyKey,
      selector: selectorOf(t.labelSelector, [...keyed(t.matchLabelKeys, labels, 'In'), ...keyed(t.mismatchLabelKeys, labels, 'NotIn')]),
      inNamespace: (n) => named.has(n) || (bySelector !== undefined && bySelector(namespaceLabels(n) ?? {})),
    };
  };
  return {
    affinity: affinityTerms.map(rule),
    antiAffinity: antiTerms.map(rule),
    preferred: [...preferredAffinity.map((t) => ({ ...rule(t.podAffinityTerm), weight: t.weight })), ...preferredAnti.map((t) => ({ ...rule(t.podAffinityTerm), weight: -t.weight }))],
    namespaces: allNamespaces ? 'all' : namespaces,
  };
}

/**
 * Whether a proxy's delegate may carry pod (anti)-affinity terms ({@link podTerms}): a cheap
 * look at the saved source pod manifest as text (or, without one, at the proxy's spec), so that
 * an index of the proxies cache ({@link POD_AFFINITY_INDEX}) holds only those worth parsing.
 * May say yes for a pod without terms (the word in another field), never no for one with them.
 */
export function mayHavePodTerms(proxy: V1Pod): boolean {
  const manifest = proxy.metadata?.annotations?.[SOURCE_POD_MANIFEST_ANNOTATION];
  if (manifest !== undefined) return manifest.includes('podAffinity') || manifest.includes('podAntiAffinity');
  const affinity = proxy.spec?.affinity;
  return !!(affinity?.podAffinity || affinity?.podAntiAffinity);
}

/** The name, and the one value, of the proxies cache's index of the proxies that {@link mayHavePodTerms}. */
export const POD_AFFINITY_INDEX = 'pod-affinity';
export const POD_AFFINITY_INDEX_VALUE = 'yes';

/** Whether the filter has anything to judge of this topology: DoNotSchedule spread or required terms. */
export function hasRequiredTopology(topology: PodTopology): boolean {
  return topology.spread.length + topology.affinity.length + topology.antiAffinity.length > 0;
}

/**
 * Judges the targets of one pod against its topology across the federation, as kube-scheduler's
 * PodTopologySpread and InterPodAffinity filters judge nodes, with the real nodes of every target
 * as the nodes and the source's proxies as the pods:
 *
 * * the value of a key on a real node is its label, except for the keys only virtual nodes carry
 *   (`multicluster.admiralty.io/target-name` and the like), whose value is the target's own;
 * * a counted pod (`pods`: never the pod being placed) is on the real node its delegate is on
 *   when that is known, else on every node of its target: it counts for each value they carry;
 * * spread: the domains of a constraint are the values of its key on the eligible nodes (those
 *   that carry every `DoNotSchedule` key; under `nodeAffinityPolicy: Honor`, of targets in scope
 *   and matching the pod's nodeSelector and required node affinity; under `nodeTaintsPolicy:
 *   Honor`, whose taints the pod tolerates); a pod counts in the domains of its eligible nodes,
 *   in its own namespace only, if the selector matches its labels. A node passes when it carries
 *   the key and `matching pods in its domain + (1 if the pod matches its own selector) - the
 *   fewest in any domain <= maxSkew`, the fewest being 0 while there are fewer domains than `minDomains`;
 * * required anti-affinity: a node passes a term when it lacks the key or no matching pod (of
 *   the term's namespaces) is in its domain;
 * * required affinity: a node passes when it carries every term's key and a matching pod is in
 *   its domain for each term, or when no pod matches any term anywhere and the pod matches all of
 *   its own terms (the first of a group that attracts itself);
 * * existing pods' required anti-affinity (symmetry): a node fails when a counted pod with a
 *   required anti-affinity term that matches the pod being placed (its labels, and its namespace
 *   among the term's) is in the node's domain of that term's key. This holds for a pod with no
 *   constraints of its own too ({@link unconstrainedTopology}).
 *
 * Returns a judge of one target: `nodes` are the candidates there (the real nodes that fit the
 * pod); it keeps the target with the nodes that pass, or rejects it with the count of nodes per
 * first failure, each with the domain it is about (`2 node(s) didn't match pod anti-affinity
 * rules (topology.kubernetes.io/region=eu has 1 matching pod)`, `2 node(s) didn't satisfy
 * existing pods anti-affinity rules (topology.kubernetes.io/region=eu has 1 pod whose
 * anti-affinity matches this pod)`). Not judged here: pods that are not proxies of this source
 * (the target's scheduler judges them among its own nodes when it places the delegate).
 *
 * Cost O(targets × nodes × constraints + pods × (constraints + their own terms)) to build,
 * O(nodes × (constraints + keys of the pods' anti-affinity terms)) per target judged. Pure.
 */
export function topologyFilter(topology: PodTopology, targets: readonly TopologyTarget[], pods: readonly PlacedPod[]): (targetKey: string, nodes: readonly FitNode[]) => TopologyVerdict {
  const world = new Federation(topology, targets, pods);
  const spread = world.spreadCounts(topology.spread).map(({ rule, counts }) => {
    const fewest = counts.size < rule.minDomains ? 0 : counts.size === 0 ? Infinity : Math.min(...counts.values());
    return { rule, counts, fewest };
  });
  const affinityCounts = world.termCounts(topology.affinity);
  const antiCounts = world.termCounts(topology.antiAffinity);
  const existingAnti = world.symmetricCounts(
    (terms) => terms.antiAffinity,
    () => 1,
    true,
  );
  const noAffinityMatch = affinityCounts.every(({ counts }) => counts.size === 0);
  const selfAffine = topology.affinity.every((r) => r.inNamespace(topology.namespace) && r.selector(topology.labels));

  /** The first reason a node fails, or undefined when it passes. */
  const failure = (t: TopologyTarget, n: FitNode): string | undefined => {
    for (const { rule: r, counts, fewest } of spread) {
      const v = valueOf(r.key, t, n);
      if (v === undefined) return `${REASON_SPREAD_LABEL} (no ${r.key})`;
      const self = r.selector(topology.labels) ? 1 : 0;
      const matching = counts.get(v) ?? 0;
      if (matching + self - fewest > r.maxSkew) {
        return `${REASON_SPREAD} (${r.key}=${v} has ${plural(matching, 'matching pod')}, the fewest in a domain is ${fewest}, maxSkew ${r.maxSkew})`;
      }
    }
    for (const { rule: r, counts } of antiCounts) {
      const v = valueOf(r.key, t, n);
      const matching = v === undefined ? 0 : (counts.get(v) ?? 0);
      if (matching > 0) return `${REASON_POD_ANTI_AFFINITY} (${r.key}=${v} has ${plural(matching, 'matching pod')})`;
    }
    if (topology.affinity.length > 0) {
      let missing: string | undefined;
      for (const { rule: r, counts } of affinityCounts) {
        const v = valueOf(r.key, t, n);
        if (v === undefined) return `${REASON_POD_AFFINITY} (no ${r.key})`;
        if (missing === undefined && !(counts.get(v) ?? 0)) missing = `${r.key}=${v}`;
      }
      if (missing !== undefined && !(noAffinityMatch && selfAffine)) return `${REASON_POD_AFFINITY} (${missing} has no matching pod)`;
    }
    for (const [key, counts] of existingAnti) {
      const v = valueOf(key, t, n);
      const against = v === undefined ? 0 : (counts.get(v) ?? 0);
      if (against > 0) return `${REASON_EXISTING_ANTI_AFFINITY} (${key}=${v} has ${plural(against, 'pod')} whose anti-affinity matches this pod)`;
    }
    return undefined;
  };

  return (targetKey, nodes) => {
    const t = world.target(targetKey);
    if (!t) return { fits: true, nodes };
    const passing: FitNode[] = [];
    const failures = new Map<string, number>();
    for (const n of nodes) {
      const why = failure(t, n);
      if (why === undefined) passing.push(n);
      else failures.set(why, (failures.get(why) ?? 0) + 1);
    }
    if (passing.length > 0 || nodes.length === 0) return { fits: true, nodes: passing };
    const reason = [...failures]
      .sort(([a, x], [b, y]) => y - x || (a < b ? -1 : a > b ? 1 : 0))
      .map(([why, k]) => `${k} ${why}`)
      .join(', ');
    return { fits: false, reason };
  };
}

/** Upstream's `MaxNodeScore`: each soft score is normalized to 0..100 over the candidates. */
const MAX_NODE_SCORE = 100;

/**
 * How much the pod's soft topology likes each candidate target, as kube-scheduler's default
 * profile scores nodes with PodTopologySpread and InterPodAffinity (both weight 2, so their
 * normalized scores add up alike), with the domains, pods and counting of {@link topologyFilter}:
 *
 * * `ScheduleAnyway` spread: a node's raw score is, over the constraints, the matching pods in
 *   its domain times `log(domains among the candidate nodes + 2)`, plus `maxSkew - 1` (fewer is
 *   better); a node lacking a key gets 0. Normalized as upstream: `100 × (max + min - raw) / max`,
 *   100 for all when every raw score is 0;
 * * pod affinity: a node's raw score is the sum of `weight` (minus `weight` for anti-affinity)
 *   times the matching pods in its domain, over the pod's preferred terms, plus, as upstream
 *   counts existing pods' terms (symmetry), for each counted pod whose own term matches the pod
 *   being placed and whose domain of that term's key is the node's: the term's weight (minus it
 *   for preferred anti-affinity), {@link HARD_POD_AFFINITY_WEIGHT} for a required affinity term.
 *   Normalized as upstream: `100 × (raw - min) / (max - min)`, 0 for all when they are equal.
 *
 * A target's raw score is that of its best candidate node (its own scheduler then picks among
 * them); targets without candidates are left out. Returns the sum of the two normalized scores
 * (0..200) by target key, or undefined when neither the pod's soft topology nor a counted pod's
 * terms have anything to score. Cost as {@link topologyFilter}'s. Pure.
 */
export function softTopologyScores(
  topology: PodTopology,
  targets: readonly TopologyTarget[],
  pods: readonly PlacedPod[],
  candidates: readonly { key: string; nodes: readonly FitNode[] }[],
): Map<string, number> | undefined {
  const world = new Federation(topology, targets, pods);
  const symmetric = world.symmetricCounts(
    (terms) => [...terms.preferred, ...terms.affinity],
    (r) => (r as Partial<WeightedRule>).weight ?? HARD_POD_AFFINITY_WEIGHT,
  );
  if (topology.softSpread.length === 0 && topology.preferred.length === 0 && symmetric.size === 0) return undefined;
  const judged = candidates.filter((c) => c.nodes.length > 0 && world.target(c.key));
  const out = new Map<string, number>(judged.map((c) => [c.key, 0]));
  if (topology.softSpread.length > 0) {
    // Upstream weighs each constraint by the number of its domains among the candidate nodes
    // that carry every key (node inclusion policies play no part there).
    const rules = world.spreadCounts(topology.softSpread).map(({ rule: r, counts }) => {
      const domains = new Set<string>();
      for (const c of judged) {
        const t = world.target(c.key)!;
        for (const n of c.nodes) if (topology.softSpread.every((k) => valueOf(k.key, t, n) !== undefined)) domains.add(valueOf(r.key, t, n)!);
      }
      return { rule: r, counts, weight: Math.log(domains.size + 2) };
    });
    const raw = new Map<string, number>();
    for (const c of judged) {
      const t = world.target(c.key)!;
      let best: number | undefined;
      for (const n of c.nodes) {
        if (!topology.softSpread.every((r) => valueOf(r.key, t, n) !== undefined)) continue;
        let score = 0;
        for (const { rule: r, counts, weight } of rules) score += (counts.get(valueOf(r.key, t, n)!) ?? 0) * weight + (r.maxSkew - 1);
        score = Math.round(score);
        if (best === undefined || score < best) best = score;
      }
      if (best !== undefined) raw.set(c.key, best);
    }
    const values = [...raw.values()];
    const max = Math.max(0, ...values);
    const min = Math.min(...values);
    for (const [key, s] of raw) out.set(key, out.get(key)! + (max === 0 ? MAX_NODE_SCORE : Math.floor((MAX_NODE_SCORE * (max + min - s)) / max)));
  }
  if (topology.preferred.length > 0 || symmetric.size > 0) {
    const preferred = world.termCounts(topology.preferred);
    const raw = new Map<string, number>();
    for (const c of judged) {
      const t = world.target(c.key)!;
      let best = -Infinity;
      for (const n of c.nodes) {
        let score = 0;
        for (const { rule: r, counts } of preferred) {
          const v = valueOf(r.key, t, n);
          if (v !== undefined) score += r.weight * (counts.get(v) ?? 0);
        }
        for (const [key, byValue] of symmetric) {
          const v = valueOf(key, t, n);
          if (v !== undefined) score += byValue.get(v) ?? 0;
        }
        best = Math.max(best, score);
      }
      raw.set(c.key, best);
    }
    const values = [...raw.values()];
    const max = Math.max(...values);
    const min = Math.min(...values);
    for (const [key, s] of raw) out.set(key, out.get(key)! + (max > min ? Math.floor((MAX_NODE_SCORE * (s - min)) / (max - min)) : 0));
  }
  return out;
}

/**
 * The federation as one pod's topology sees it: which nodes are domains of a spread constraint
 * (worked out once per target, constraint and node) and how many matching pods each domain
 * holds. Built per extender call.
 */
class Federation {
  private readonly byKey: Map<string, TopologyTarget>;
  private readonly resolved = new Map<string, V1PodSpec | undefined>();
  private readonly byName = new Map<string, Map<string, FitNode>>();

  constructor(
    private readonly topology: PodTopology,
    private readonly targets: readonly TopologyTarget[],
    private readonly pods: readonly PlacedPod[],
  ) {
    this.byKey = new Map(targets.map((t) => [t.key, t]));
  }

  target(key: string): TopologyTarget | undefined {
    return this.byKey.get(key);
  }

  /** Whether node `n` of `t` is a domain of `r`, one of the constraints `all` (it must carry all of their keys). */
  eligible(all: readonly SpreadRule[], r: SpreadRule, t: TopologyTarget, n: FitNode): boolean {
    if (!all.every((c) => valueOf(c.key, t, n) !== undefined)) return false;
    if (r.honorAffinity) {
      if (!this.resolved.has(t.key)) this.resolved.set(t.key, t.inScope ? resolveTargetKeys(this.topology.spec, t.identity) : undefined);
      const spec = this.resolved.get(t.key);
      if (!spec || !matchesNodeSelectorAndAffinity(spec, n)) return false;
    }
    if (r.honorTaints) {
      const taints = n.unschedulable ? [...n.taints, UNSCHEDULABLE_TAINT] : n.taints;
      if (untoleratedTaint(taints, this.topology.spec.tolerations)) return false;
    }
    return true;
  }

  /** Each of `rules` with its matching pods per domain, every domain present (with 0 when empty). */
  spreadCounts(rules: readonly SpreadRule[]): { rule: SpreadRule; counts: Map<string, number> }[] {
    return rules.map((r) => {
      const counts = new Map<string, number>();
      /** Per target: the domains of its eligible nodes, for its pods whose node is not known. */
      const values = new Map<string, Set<string>>();
      const eligibleNodes = new Map<string, Set<FitNode>>();
      for (const t of this.targets) {
        const mine = new Set<FitNode>();
        for (const n of t.nodes) if (this.eligible(rules, r, t, n)) mine.add(n);
        eligibleNodes.set(t.key, mine);
        const vs = valuesOn(r.key, t, [...mine]);
        values.set(t.key, vs);
        for (const v of vs) counts.set(v, counts.get(v) ?? 0);
      }
      for (const p of this.pods) {
        if (p.namespace !== this.topology.namespace || !r.selector(p.labels)) continue;
        const t = this.byKey.get(p.targetKey);
        if (!t) continue;
        const known = this.nodeOf(t, p.nodeName);
        const where = known ? (eligibleNodes.get(t.key)!.has(known) ? [valueOf(r.key, t, known)!] : []) : values.get(t.key)!;
        for (const v of where) counts.set(v, (counts.get(v) ?? 0) + 1);
      }
      return { rule: r, counts };
    });
  }

  /** Each of `rules` with its matching pods (of its namespaces) per value of its key, on any node that carries it. */
  termCounts<R extends AffinityRule>(rules: readonly R[]): { rule: R; counts: Map<string, number> }[] {
    return rules.map((r) => {
      const counts = new Map<string, number>();
      const values = new Map<string, Set<string>>();
      for (const p of this.pods) {
        if (!r.inNamespace(p.namespace) || !r.selector(p.labels)) continue;
        const t = this.byKey.get(p.targetKey);
        if (!t) continue;
        const known = this.nodeOf(t, p.nodeName);
        let where: Iterable<string>;
        if (known) {
          const v = valueOf(r.key, t, known);
          where = v === undefined ? [] : [v];
        } else {
          if (!values.has(t.key)) values.set(t.key, valuesOn(r.key, t, t.nodes));
          where = values.get(t.key)!;
        }
        for (const v of where) counts.set(v, (counts.get(v) ?? 0) + 1);
      }
      return { rule: r, counts };
    });
  }

  /**
   * Symmetry
: per topology key, per value, the sum of `weight` over the terms (`pick` of each
   * counted pod's own {@link PodTerms}) that match the pod being placed, in the domain of the pod
   * that holds them. A pod adds each term to each value it is counted in; with `onePerPod`, it
   * adds one at most to each key and value (the filter counts pods). O(pods × their terms), plus
   * the values of a target's nodes once per key.
   */
  symmetricCounts(pick: (terms: PodTerms) => readonly AffinityRule[], weight: (r: AffinityRule) => number, onePerPod = false): Map<string, Map<string, number>> {
    const out = new Map<string, Map<string, number>>();
    const values = new Map<string, Set<string>>();
    const { namespace, labels } = this.topology;
    for (const p of this.pods) {
      if (!p.terms) continue;
      const t = this.byKey.get(p.targetKey);
      if (!t) continue;
      const known = this.nodeOf(t, p.nodeName);
      /** With `onePerPod`: per key, the values this pod was counted in already. */
      const once = new Map<string, Set<string>>();
      for (const r of pick(p.terms)) {
        if (!r.inNamespace(namespace) || !r.selector(labels)) continue;
        let where: Iterable<string>;
        if (known) {
          const v = valueOf(r.key, t, known);
          where = v === undefined ? [] : [v];
        } else {
          const at = `${t.key}\u0000${r.key}`;
          if (!values.has(at)) values.set(at, valuesOn(r.key, t, t.nodes));
          where = values.get(at)!;
        }
        const w = weight(r);
        let byValue = out.get(r.key);
        for (const v of where) {
          if (onePerPod) {
            let seen = once.get(r.key);
            if (!seen) once.set(r.key, (seen = new Set()));
            if (seen.has(v)) continue;
            seen.add(v);
          }
          if (!byValue) out.set(r.key, (byValue = new Map()));
          byValue.set(v, (byValue.get(v) ?? 0) + w);
        }
      }
    }
    return out;
  }

  /** The node of `t` named `name`, when it is one of its summary's. */
  private nodeOf(t: TopologyTarget, name: string | undefined): FitNode | undefined {
    if (name === undefined) return undefined;
    let names = this.byName.get(t.key);
    if (!names) this.byName.set(t.key, (names = new Map(t.nodes.map((n) => [n.name, n]))));
    return names.get(name);
  }
}

/** The value of `key` on a real node of `t`: a key only virtual nodes carry is the target's own; the hostname is the node's. */
function valueOf(key: string, t: TopologyTarget, n: FitNode): string | undefined {
  if (VIRTUAL_NODE_ONLY_LABEL_KEYS.has(key)) return Object.prototype.hasOwnProperty.call(t.identity, key) ? t.identity[key] : undefined;
  if (key === HOSTNAME_LABEL) return n.hostname;
  return Object.prototype.hasOwnProperty.call(n.labels, key) ? n.labels[key] : undefined;
}

/** The distinct values of `key` on these nodes of `t`. */
function valuesOn(key: string, t: TopologyTarget, nodes: readonly FitNode[]): Set<string> {
  const out = new Set<string>();
  for (const n of nodes) {
    const v = valueOf(key, t, n);
    if (v !== undefined) out.add(v);
  }
  return out;
}

/** `key In [value]` (or NotIn) for each of `keys` the pod's labels carry: how upstream merges matchLabelKeys and mismatchLabelKeys. */
function keyed(keys: readonly string[] | undefined, labels: Labels, operator: 'In' | 'NotIn'): V1LabelSelectorRequirement[] {
  const out: V1LabelSelectorRequirement[] = [];
  for (const key of keys ?? []) {
    const value = Object.prototype.hasOwnProperty.call(labels, key) ? labels[key] : undefined;
    if (value !== undefined) out.push({ key, operator, values: [value] });
  }
  return out;
}

const SELECTOR_OPERATORS = new Set(['In', 'NotIn', 'Exists', 'DoesNotExist']);

/**
 * A label selector as upstream's `LabelSelectorAsSelector` reads it, plus `extra` requirements:
 * nil selects nothing, unless `extra` has requirements (upstream then selects by those alone),
 * empty everything; an unknown operator selects nothing (the apiserver refuses such pods).
 */
function selectorOf(s: V1LabelSelector | undefined | null, extra: readonly V1LabelSelectorRequirement[]): Selector {
  if (!s && extra.length === 0) return () => false;
  s ??= {};
  const equal = Object.entries(s.matchLabels ?? {});
  const expressions = [...(s.matchExpressions ?? []), ...extra];
  if (expressions.some((e) => !SELECTOR_OPERATORS.has(e.operator))) return () => false;
  return (labels) => equal.every(([k, v]) => Object.prototype.hasOwnProperty.call(labels, k) && labels[k] === v) && expressions.every((e) => matchesLabelRequirement(e, labels));
}

function plural(n: number, what: string): string {
  return `${n} ${what}${n === 1 ? '' : 's'}`;
}
