import type { V1Pod, V1PodSpec } from '@kubernetes/client-node';
import { PARENT_UID_LABEL, SOURCE_POD_MANIFEST_ANNOTATION } from '../provider/core/keys.js';
import { delegateSourceView, isOurDelegate } from '../provider/model/delegate-pod.js';
import { formatQuantity } from '../provider/model/quantity.js';
import { podHostPorts, UsedHostPorts, type HostPort } from '../provider/model/host-ports.js';
import { addInto, isTerminal, ONE_POD, podRequests, type ResourceAmounts } from '../provider/model/resources.js';
import { resolveTargetKeys, VIRTUAL_NODE_ONLY_LABEL_KEYS } from '../provider/model/target-keys.js';
import { matchesNodeSelectorAndAffinity, matchesTerm, tolerates, untoleratedTaint } from './node-match.js';
import { asTargetAdmits, priorityClassRefusal, type RuntimeClasses } from './target-classes.js';
import { delegatePriority, nodesFreedByPreemption, type TargetPriorityClasses } from './preemption.js';
import type { FitNode } from './target-nodes.js';

/** Reasons, worded like kube-scheduler's own, so FailedScheduling events read familiar. */
export const REASON_NOT_READY = 'node(s) were not ready';
export const REASON_UNSCHEDULABLE = 'node(s) were unschedulable';
export const REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector";
export const REASON_TOO_MANY_PODS = 'Too many pods';
export const REASON_PORTS = "node(s) didn't have free ports for the requested pod ports";

const UNSCHEDULABLE_TAINT = { key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' };

export interface FitOptions {
  /** Target name for the reason (`TargetClient.displayName`). */
  targetName: string;
  /**
   * The target's own labels (`targetIdentityLabels`): the pod's nodeSelector and required node
   * affinity on them are judged against these (`resolveTargetKeys`), the rest against each node.
   */
  targetLabels: Readonly<Record<string, string>>;
  /**
   * Requests already promised on a node that its summary does not show yet (delegates this
   * source placed after the summary was written), by node name.
   */
  assumed?: ReadonlyMap<string, ResourceAmounts>;
  /** Host ports promised on a node that its summary does not show yet (binds in flight and delegates just placed), by node name. */
  assumedPorts?: ReadonlyMap<string, readonly HostPort[]>;
  /**
   * The target's `spec.placement.burstCapacity` (a resource absent is not limited) and what this
   * source's delegates already waiting there without a node ask for (pod slots included): when
   * no current node fits, the pod still fits if its requests fit in the difference.
   */
  burst?: { capacity: ReadonlyMap<string, bigint>; waiting?: () => ReadonlyMap<string, bigint> };
  /**
   * The target's RuntimeClasses, from its summary (`runtimeClassesOfSummary`); undefined when
   * the summary does not publish them, and a pod's runtime class is then not judged.
   */
  runtimeClasses?: RuntimeClasses;
  /** The names of the target's PriorityClasses, from its summary; undefined when unknown. */
  priorityClasses?: ReadonlySet<string>;
  /**
   * The target's PriorityClasses with their values, from its summary
   * (`priorityClassValuesOfSummary`): when given, a pod that no node has room for still fits
   * where the target's scheduler would preempt pods of lower priority for it (see
   * {@link fitsTarget}); undefined: preemption in the target is not judged.
   */
  priorityClassValues?: TargetPriorityClasses;
}

export interface FitResult {
  /** Whether at least one real node of the target can take the delegate now. */
  fits: boolean;
  /**
   * Short, specific and stable (no timestamps, counts ordered), e.g.
   * `no node in c2 fits: 2 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector`,
   * or `3 of 5 node(s) in c2 fit`.
   */
  reason: string;
  /** Names of the real nodes that fit. */
  fittingNodes: string[];
  /**
   * True when no rejection was about resources or host ports: evicting pods (preemption) could
   * not help, so the extender reports the virtual node under `FailedAndUnresolvableNodes`.
   */
  unresolvable: boolean;
  /** True when no current node fits but the target's burst capacity can hold the pod (a scale-up is expected). */
  byBurst?: boolean;
  /**
   * True when no node has room now but the target's scheduler would make room by preempting
   * pods of lower priority (`fittingNodes` are the nodes where it could).
   */
  byPreemption?: boolean;
}

/**
 * The pod whose spec the delegate will have ({@link delegateSourcePod}: the proxy with the
 * scheduling fields of the source pod manifest the webhook saved), else, for a pod without the
 * manifest annotation, the pod itself. Shares the pod's objects: read it, never change it.
 *
 * @throws ValidationError when the annotation is present but unreadable.
 */
export function schedulingPod(pod: V1Pod): V1Pod {
  if (pod.metadata?.annotations?.[SOURCE_POD_MANIFEST_ANNOTATION] === undefined) return pod;
  return delegateSourceView(pod);
}

/**
 * Whether a target has a real node on which the delegate of `pod` fits now, judged from the
 * target's ClusterSummary ({@link nodesOfSummary}). A node fits when it is Ready, schedulable
 * (not cordoned, unless the pod tolerates `node.kubernetes.io/unschedulable`), matches the pod's
 * nodeSelector and required node affinity against its own labels (those on the target's own
 * keys, such as `multicluster.admiralty.io/target-name`, against `opts.targetLabels` first: a
 * pod they exclude fits no node; see {@link matchesNodeSelectorAndAffinity}), tolerates its NoSchedule/NoExecute
 * taints, has none of the host ports the pod asks for in use (see `UsedHostPorts`; those of
 * `assumedPorts` too), and has free room (free minus `assumed`) for every resource the pod
 * requests (see {@link podRequests}) plus one pod slot. A pod that names a RuntimeClass is judged
 * as the target's RuntimeClass admission will make its delegate, when the summary publishes the
 * target's classes (`opts.runtimeClasses`, see `asTargetAdmits`): it fits no node of a target
 * without that class or whose class selects nodes the pod's nodeSelector excludes; else the
 * class's node selector and tolerations count with the pod's, and its overhead with the requests.
 * Checks run in that order and a node is counted under
 * its first failure, except resources, where every insufficient one is counted (as
 * kube-scheduler does); the reason then names the largest free amount of each such resource.
 *
 * When no node has room, the pod still fits (`byPreemption`) on the nodes that lacked only room,
 * if the target's scheduler would preempt pods of lower priority there to make it (its summary's
 * classes with values in `opts.priorityClassValues`; see `delegatePriority` and
 * `nodesFreedByPreemption`): the bind then takes the delegate's nomination as its placement. A
 * pod that may not preempt there (`preemptionPolicy: Never`, its own or its class's in the
 * target) is told so in the reason.
 *
 * When no node fits and `opts.burst` is given, the pod fits anyway (`byBurst`) if its requests
 * fit in the target's burst capacity less what is already waiting there ({@link FitOptions.burst}):
 * the target's cluster-autoscaler is expected to add a node. Node constraints are not judged
 * against nodes that do not exist yet: the autoscaler says `NotTriggerScaleUp` if no node group
 * fits, and the binder then refuses the target.
 *
 * Judged on the delegate's spec ({@link schedulingPod}). Ignores pod (anti-)affinity, topology
 * spread, volumes and DRA claims: the target's scheduler has the last word, at bind.
 *
 * Pure; called by the scheduler extender once per virtual node and pod.
 */
// eslint-disable-next-line max-lines-per-function -- its checks run in order, each answering its own reason, on requests worked out once at the top
export function fitsTarget(pod: V1Pod, targetNodes: readonly FitNode[], opts: FitOptions): FitResult {
  const target = opts.targetName;
  let delegate: V1Pod;
  try {
    delegate = schedulingPod(pod);
  } catch (err) {
    return { fits: false, reason: (err as Error).message, fittingNodes: [], unresolvable: true };
  }
  const resolved = resolveTargetKeys(delegate.spec ?? ({ containers: [] } as V1PodSpec), opts.targetLabels);
  if (!resolved) return { fits: false, reason: `no node in ${target} fits: the pod's nodeSelector or node affinity on target labels excludes ${target}`, fittingNodes: [], unresolvable: true };
  // What the target's admission would refuse, no node can help.
  const refused = (why: string): FitResult => ({ fits: false, reason: `no node in ${target} fits: ${why}`, fittingNodes: [], unresolvable: true });
  const noPriorityClass = priorityClassRefusal(resolved, opts.priorityClasses, target);
  if (noPriorityClass) return refused(noPriorityClass);
  const admitted = asTargetAdmits(resolved, opts.runtimeClasses, target);
  if (admitted.refusal !== undefined) return refused(admitted.refusal);
  const spec = admitted.spec;
  const requests = podRequests(spec);
  if (admitted.overhead) addInto(requests, admitted.overhead);
  requests.set('pods', ONE_POD);
  const hostPorts = podHostPorts(spec);
  const burst = (why: string, unresolvable: boolean): FitResult => {
    const room = opts.burst && burstRoom(requests, opts.burst.capacity, opts.burst.waiting?.());
    if (room === undefined) return { fits: false, reason: `no node in ${target} fits: ${why}`, fittingNodes: [], unresolvable };
    if (room === '') return { fits: true, reason: `no node in ${target} fits now (${why}); its burst capacity can hold the pod`, fittingNodes: [], unresolvable: false, byBurst: true };
    return { fits: false, reason: `no node in ${target} fits: ${why}; burst capacity short of ${room}`, fittingNodes: [], unresolvable };
  };
  if (targetNodes.length === 0) return burst(`${target} has no nodes`, true);

  const failures = new Map<string, number>();
  const fail = (reason: string) => failures.set(reason, (failures.get(reason) ?? 0) + 1);
  /** Largest free amount seen, per resource that was short somewhere. */
  const largestFree = new Map<string, bigint>();
  /** Rejections that evicting pods could resolve (resources, host ports). */
  let resolvableFailures = 0;
  const fittingNodes: string[] = [];
  /** Nodes rejected for room alone: preemption in the target could make it. */
  const shortOfRoom: FitNode[] = [];

  for (const node of targetNodes) {
    if (node.notReady) {
      fail(REASON_NOT_READY);
      continue;
    }
    if (node.unschedulable && !(spec.tolerations ?? []).some((t) => tolerates(t, UNSCHEDULABLE_TAINT))) {
      fail(REASON_UNSCHEDULABLE);
      continue;
    }
    if (!matchesNodeSelectorAndAffinity(spec, node)) {
      fail(REASON_AFFINITY);
      continue;
    }
    const taint = untoleratedTaint(node.taints, spec.tolerations);
    if (taint) {
      fail(`node(s) had untolerated taint {${taint.key}: ${taint.value ?? ''}}`);
      continue;
    }
    const promised = hostPorts.length > 0 ? opts.assumedPorts?.get(node.name) : undefined;
    if (hostPorts.length > 0 && ((node.usedPorts && !node.usedPorts.fits(hostPorts)) || (promised && !new UsedHostPorts(promised).fits(hostPorts)))) {
      resolvableFailures++;
      fail(REASON_PORTS);
      continue;
    }
    const assumed = opts.assumed?.get(node.name);
    const short: string[] = [];
    for (const [name, amount] of requests) {
      if (amount <= 0n) continue;
      const free = (node.free.get(name) ?? 0n) - (assumed?.get(name) ?? 0n);
      if (free < amount) short.push(name);
    }
    if (short.length > 0) {
      resolvableFailures++;
      for (const r of short.sort()) {
        fail(r === 'pods' ? REASON_TOO_MANY_PODS : `Insufficient ${r}`);
      }
      for (const [name] of requests) {
        const free = (node.free.get(name) ?? 0n) - (assumed?.get(name) ?? 0n);
        if (free > (largestFree.get(name) ?? -1n)) largestFree.set(name, free > 0n ? free : 0n);
      }
      shortOfRoom.push(node);
      continue;
    }
    fittingNodes.push(node.name);
  }

  if (fittingNodes.length > 0) {
    return { fits: true, reason: `${fittingNodes.length} of ${targetNodes.length} node(s) in ${target} fit`, fittingNodes, unresolvable: false };
  }
  const summary = [...failures]
    .sort(([a, m], [b, n]) => n - m || (a < b ? -1 : a > b ? 1 : 0))
    .map(([reason, count]) => {
      const resource = reason.startsWith('Insufficient ') ? reason.slice('Insufficient '.length) : undefined;
      const most = resource === undefined ? undefined : largestFree.get(resource);
      return `${count} ${reason}${most === undefined ? '' : ` (largest free ${formatQuantity(most, resource!)})`}`;
    })
    .join(', ');
  const priority = shortOfRoom.length > 0 ? delegatePriority(spec, opts.priorityClassValues, target) : undefined;
  const freed = priority ? nodesFreedByPreemption(requests, shortOfRoom, priority.priority, opts.assumed) : [];
  if (priority && freed.length > 0) {
    const where = `preempting pods of priority below ${priority.priority} would make room on ${freed.length} node(s)`;
    if (priority.preempts) return { fits: true, reason: `no node in ${target} fits now (${summary}); ${where}`, fittingNodes: freed, unresolvable: false, byPreemption: true };
    return burst(`${summary}; ${where}, but ${priority.why}`, resolvableFailures === 0);
  }
  return burst(summary, resolvableFailures === 0);
}

/**
 * '' when `requests` fit in `capacity` less `waiting` for every resource `capacity` names, else
 * the resources short, comma-separated; undefined without a capacity. Resources the capacity
 * does not name are not limited: the target's autoscaler has the last word.
 */
function burstRoom(requests: ResourceAmounts, capacity: ReadonlyMap<string, bigint>, waiting: ReadonlyMap<string, bigint> | undefined): string | undefined {
  if (capacity.size === 0) return undefined;
  const short: string[] = [];
  for (const [name, limit] of capacity) {
    const amount = requests.get(name) ?? 0n;
    if (amount > 0n && amount > limit - (waiting?.get(name) ?? 0n)) short.push(name);
  }
  return short.sort().join(', ');
}

/**
 * What this source already has waiting in a target without a node, counted against its burst
 * capacity: the requests (plus one pod slot each) of our delegates there that have no node and
 * are neither finished nor being deleted, and of the proxies being placed there whose delegate is
 * not in `delegates` yet (`placing`, by proxy UID). A delegate that got a node (the new one, once
 * Ready) stops counting: that node's room shows in the target's summary instead. Pure; the
 * extender's filter calls it for a target with burst capacity that no current node fits.
 */
export function waitingRequests(delegates: readonly V1Pod[], placing: readonly V1Pod[], sourceClusterName: string): ResourceAmounts {
  const total: ResourceAmounts = new Map();
  const add = (spec: V1PodSpec | undefined) => {
    const r = podRequests(spec);
    r.set('pods', ONE_POD);
    for (const [name, amount] of r) total.set(name, (total.get(name) ?? 0n) + amount);
  };
  const seen = new Set<string>();
  for (const d of delegates) {
    if (!isOurDelegate(d, sourceClusterName)) continue;
    // isOurDelegate checked the label is there.
    seen.add(d.metadata!.labels![PARENT_UID_LABEL]!);
    if (d.spec?.nodeName || d.metadata?.deletionTimestamp || isTerminal(d)) continue;
    add(d.spec);
  }
  for (const proxy of placing) {
    if (proxy.metadata?.uid && seen.has(proxy.metadata.uid)) continue;
    let spec: V1PodSpec | undefined;
    try {
      spec = schedulingPod(proxy).spec;
    } catch {
      spec = proxy.spec;
    }
    add(spec);
  }
  return total;
}

/**
 * The real node of a target that the target's scheduler most likely gives the delegate of
 * `pod`: among the nodes that fit as {@link fitsTarget} judges (burst capacity aside: a pod that
 * no current node fits gets none, it waits for a scale-up) and, of those, the ones that match the
 * most weight of the pod's preferred node affinity (as the NodeAffinity score ranks them; terms
 * on the target's own keys are alike on all its nodes and left out), the one with the most free room
 * (free less `opts.assumed`) of the pod's largest request, the resource whose request is the
 * largest share of the most any fitting node has free (a pod asking nothing: cpu). kube-scheduler's
 * default scoring spreads pods to the least allocated nodes, so this is a guess, and is taken as
 * one: the extender counts a bind in flight there until the target's cache shows the node the
 * target's scheduler really chose (see `PlacementMemory.reserve`). Ties go to the first node in
 * the summary's order. Pure.
 */
export function likelyNode(pod: V1Pod, targetNodes: readonly FitNode[], opts: FitOptions): string | undefined {
  const { fittingNodes } = fitsTarget(pod, targetNodes, { ...opts, burst: undefined });
  if (fittingNodes.length <= 1) return fittingNodes[0];
  let fitting = targetNodes.filter((n) => fittingNodes.includes(n.name));
  const view = schedulingPod(pod);
  const preferred = (view.spec?.affinity?.nodeAffinity?.preferredDuringSchedulingIgnoredDuringExecution ?? [])
    .filter((t) => t && typeof t.weight === 'number' && t.weight > 0 && t.preference)
    .map((t) => ({ weight: t.weight, term: { ...t.preference, matchExpressions: (t.preference.matchExpressions ?? []).filter((e) => !VIRTUAL_NODE_ONLY_LABEL_KEYS.has(e.key)) } }))
    .filter((t) => t.term.matchExpressions.length + (t.term.matchFields ?? []).length > 0);
  if (preferred.length > 0) {
    const weightOn = new Map(fitting.map((n) => [n, preferred.reduce((sum, t) => sum + (matchesTerm(t.term, n) ? t.weight : 0), 0)]));
    const most = Math.max(...weightOn.values());
    fitting = fitting.filter((n) => weightOn.get(n) === most);
  }
  const free = (node: FitNode, resource: string) => (node.free.get(resource) ?? 0n) - (opts.assumed?.get(node.name)?.get(resource) ?? 0n);
  // fitsTarget read the pod's scheduling view without failing.
  const requests = podRequests(view.spec);
  let largest = 'cpu';
  let share: [bigint, bigint] = [0n, 1n];
  for (const [name, amount] of requests) {
    if (amount <= 0n) continue;
    let most = 0n;
    for (const node of fitting) if (free(node, name) > most) most = free(node, name);
    // amount / most > share[0] / share[1], without division.
    if (most > 0n && amount * share[1] > share[0] * most) {
      largest = name;
      share = [amount, most];
    }
  }
  // The node with the most of that resource free; the first of them on a tie.
  const best = fitting.reduce((b, node) => (free(node, largest) > free(b, largest) ? node : b));
  return best.name;
}
