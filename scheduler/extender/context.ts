import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { TargetClient } from '../../provider/clusters/target-client.js';
import { realClock, type Clock } from '../../provider/core/clock.js';
import { VIRTUAL_KUBELET_PROVIDER_LABEL, VIRTUAL_KUBELET_PROVIDER_VALUE } from '../../provider/core/keys.js';
import type { Logger } from '../../provider/core/logger.js';
import { targetIdentityLabels } from '../../provider/model/virtual-node.js';
import { likelyNode, schedulingPod } from '../fit.js';
import { PlacementMemory } from '../placement-memory.js';
import { placementGroup } from '../placement-policy.js';
import type { PlacementPolicy } from '../score.js';
import { mayHavePodTerms, podTerms, type PodTerms } from '../topology.js';
import type { ExtenderArgs, ExtenderRoutesOptions, TargetState } from './types.js';

/**
 * How long the target prioritize ranked first counts as a pod's placement for weights: above
 * the time from kube-scheduler's choice to the end of its bind (at most the delegate placement
 * timeout, 20 s by default), after which the binder or the proxies cache say where it went.
 */
export const CHOSEN_TTL_MS = 30_000;

/** Pods remembered at most for {@link CHOSEN_TTL_MS} and for warnings. */
export const MAX_REMEMBERED_PODS = 10_000;

/** A pod prioritize ranked first alone: by what topology and weights count it, until its bind shows. */
export interface Chosen {
  group: string;
  targetKey: string;
  atMs: number;
  /** Its namespace and labels, not the pod: topology counts it by those. */
  namespace: string;
  labels: Readonly<Record<string, string>>;
  /** Its own pod (anti-)affinity terms, when it has some. */
  terms?: PodTerms;
}

/**
 * What every verb of the extender works with: its options, the placement memory it shares with
 * the binder, its clock, and the stores it keeps between calls (bounded by
 * {@link MAX_REMEMBERED_PODS}). One per extender; the verbs are functions of it and of their call.
 */
export interface ExtenderContext {
  readonly opts: ExtenderRoutesOptions;
  readonly logger: Logger;
  readonly registry: ExtenderRoutesOptions['registry'];
  readonly clock: Clock;
  /** Refusals and assumptions shared with the binder (`opts.memory`, or a fresh one). */
  readonly memory: PlacementMemory;
  /** `opts.delegate` as it was when the extender was made. */
  readonly delegate: ExtenderRoutesOptions['delegate'];
  /** The default placement policy now (`opts.policy`, read on every call when a function). */
  readonly policyOf: () => PlacementPolicy;
  /** `opts.isVirtualNodeName`, or its default. */
  readonly isVirtualNodeName: (nodeName: string) => boolean;
  /** The labels of a source namespace, when known (`opts.namespace`). */
  readonly namespaceLabels: (name: string) => Readonly<Record<string, string>> | undefined;

  /** Pod UID -> the target prioritize ranked first alone, until its bind shows in `groupPlacements`; at most {@link MAX_REMEMBERED_PODS}, oldest forgotten first. */
  readonly chosen: Map<string, Chosen>;
  /** The entries of `chosen` whose pods have terms (an entry no longer in `chosen` is dropped on read): `affinePods` reads only these. */
  readonly chosenWithTerms: Map<string, Chosen & { terms: PodTerms }>;
  /** Pod UID -> until when a preemption it made is settling (see `preempt`); oldest forgotten first. */
  readonly preempted: Map<string, number>;
  /** Pods already warned about an unusable policy annotation (bounded; oldest forgotten first). */
  readonly warned: Set<string>;
  /**
   * The terms of a proxy's delegate, worked out once per cached proxy object and kept only for
   * proxies that have some (a cached proxy is replaced, never changed, when it changes): the memo
   * holds what the index of {@link ExtenderRoutesOptions.affineProxies} holds.
   */
  readonly termsMemo: WeakMap<V1Pod, PodTerms | null>;
}

/** Builds the context of one extender: its defaults filled in, its stores empty. */
export function createExtenderContext(opts: ExtenderRoutesOptions): ExtenderContext {
  const { logger, registry } = opts;
  return {
    opts,
    logger,
    registry,
    clock: opts.clock ?? realClock,
    memory: opts.memory ?? new PlacementMemory(),
    delegate: opts.delegate,
    policyOf: typeof opts.policy === 'function' ? opts.policy : () => opts.policy as PlacementPolicy,
    isVirtualNodeName: opts.isVirtualNodeName ?? ((name: string) => registry.byNodeName(name) !== undefined || /^admiralty-(namespace|cluster)-/.test(name)),
    namespaceLabels: (name: string) => opts.namespace?.(name)?.metadata?.labels,
    chosen: new Map(),
    chosenWithTerms: new Map(),
    preempted: new Map(),
    warned: new Set(),
    termsMemo: new WeakMap(),
  };
}

/** What every fit test against a target's nodes is given: who it is, its runtime and priority classes. */
export function judgedAs(target: TargetClient, state: TargetState) {
  return {
    targetName: target.displayName,
    targetLabels: targetIdentityLabels(target.ref),
    runtimeClasses: state.runtimeClasses,
    priorityClasses: state.priorityClasses,
    priorityClassValues: state.priorityClassValues,
  };
}

/**
 * What binds in flight and placements the summary does not show yet take on each node of a
 * target: a bind in flight takes room on the node the target's scheduler most likely chooses, as
 * the filter judges nodes (see `PlacementMemory.reserve`).
 */
export function assumedOn(ctx: ExtenderContext, target: TargetClient, state: TargetState) {
  const { memory, delegate } = ctx;
  return memory.assumedOn(target.key, state, delegate && ((namespace, name) => delegate(target.key, namespace, name)), (pod, assumed, assumedPorts) =>
    likelyNode(pod, state.nodes, { ...judgedAs(target, state), assumed, assumedPorts }),
  );
}

/** Each candidate with its Node object when the call carried objects. */
export function candidates(args: ExtenderArgs): { name: string; node?: V1Node }[] {
  if (args.NodeNames) {
    const byName = new Map((args.Nodes?.items ?? []).map((n) => [n.metadata!.name!, n]));
    return args.NodeNames.map((name) => ({ name, node: byName.get(name) }));
  }
  return (args.Nodes?.items ?? []).map((node) => ({ name: node.metadata!.name!, node }));
}

/** Whether a candidate is one of our virtual nodes: by its label when the call carried its Node, else by its name. */
export function isVirtual(ctx: ExtenderContext, c: { name: string; node?: V1Node }): boolean {
  const { isVirtualNodeName } = ctx;
  return c.node ? c.node.metadata?.labels?.[VIRTUAL_KUBELET_PROVIDER_LABEL] === VIRTUAL_KUBELET_PROVIDER_VALUE : isVirtualNodeName(c.name);
}

/**
 * The terms of a proxy's delegate ({@link podTerms}), worked out once per cached proxy object
 * and kept only for those that have some (see {@link ExtenderContext.termsMemo}).
 */
export function termsOfProxy(ctx: ExtenderContext, proxy: V1Pod): PodTerms | undefined {
  const { termsMemo, namespaceLabels } = ctx;
  if (!mayHavePodTerms(proxy)) return undefined;
  let terms = termsMemo.get(proxy);
  if (terms === undefined) termsMemo.set(proxy, (terms = podTerms(delegateSpecOf(proxy), namespaceLabels) ?? null));
  return terms ?? undefined;
}

/** Whether the bind of a pod prioritize chose was refused since it chose it. */
export function refusedSince(ctx: ExtenderContext, uid: string, c: { targetKey: string; atMs: number }, now: number): boolean {
  const { memory } = ctx;
  const refused = memory.refusal(uid, c.targetKey, now);
  return refused !== undefined && refused.atMs >= c.atMs;
}

/**
 * Remembers that kube-scheduler is about to bind the pod to a target's virtual node: prioritize
 * ranked it first alone, or the filter kept no other (kube-scheduler then calls no prioritize,
 * and may filter the next pod before this one's bind begins). Read by topology and weights.
 */
export function rememberChoice(ctx: ExtenderContext, proxy: V1Pod, targetKey: string): void {
  const { clock, chosen, chosenWithTerms } = ctx;
  const uid = proxy.metadata?.uid;
  if (!uid) return;
  chosen.delete(uid);
  // The pod's labels and namespace, not the pod: topology counts it by those.
  const c: Chosen = { group: placementGroup(proxy), targetKey, atMs: clock.now(), namespace: proxy.metadata?.namespace ?? '', labels: proxy.metadata?.labels ?? {} };
  const terms = termsOfProxy(ctx, proxy);
  chosen.set(uid, terms ? { ...c, terms } : c);
  chosenWithTerms.delete(uid);
  if (terms) chosenWithTerms.set(uid, chosen.get(uid) as Chosen & { terms: PodTerms });
  while (chosen.size > MAX_REMEMBERED_PODS) chosen.delete(chosen.keys().next().value!);
  while (chosenWithTerms.size > MAX_REMEMBERED_PODS) chosenWithTerms.delete(chosenWithTerms.keys().next().value!);
}

/**
 * The delegate's scheduling spec, worked out once per call rather than once per target (the
 * saved manifest is parsed each time). Unreadable: the pod as is, so that `fitsTarget` gives the
 * reason on every virtual node.
 */
export function delegateSpecOf(pod: V1Pod): V1Pod {
  try {
    return schedulingPod(pod);
  } catch {
    return pod;
  }
}

/** `namespace/name` of a pod, for logs. */
export function podKey(pod: V1Pod | undefined): string {
  return `${pod?.metadata?.namespace ?? ''}/${pod?.metadata?.name ?? ''}`;
}
