import type { V1Node, V1Pod, V1PodSpec } from '@kubernetes/client-node';
import { SOURCE_POD_MANIFEST_ANNOTATION, VIRTUAL_KUBELET_PROVIDER_LABEL, VIRTUAL_KUBELET_PROVIDER_VALUE } from '../provider/core/keys.js';
import { delegateSourcePod } from '../provider/model/delegate-pod.js';
import { matchesNodeSelectorAndAffinity, tolerates, untoleratedTaint, VIRTUAL_NODE_ONLY_LABEL_KEYS } from './node-match.js';
import { allocatableOf, ONE_POD, podRequests, requestedByNode, type ResourceAmounts } from '../provider/model/resources.js';

/** Reasons, worded like kube-scheduler's own, so FailedScheduling events read familiar. */
export const REASON_NOT_READY = 'node(s) were not ready';
export const REASON_UNSCHEDULABLE = 'node(s) were unschedulable';
export const REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector";
export const REASON_VIRTUAL = 'node(s) were virtual nodes of admiralty';
export const REASON_TOO_MANY_PODS = 'Too many pods';

const UNSCHEDULABLE_TAINT = { key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' };

export interface FitOptions {
  /** Target name for the reason (`TargetClient.displayName`). */
  targetName: string;
  /** Label keys counted as satisfied; default {@link VIRTUAL_NODE_ONLY_LABEL_KEYS}. */
  ignoredLabelKeys?: ReadonlySet<string>;
  /**
   * Namespaces that exist in the target, when known. The delegate is created in the proxy's
   * namespace; if it is missing, no node fits. Omit when unknown (no check).
   */
  namespaces?: ReadonlySet<string>;
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
   * True when no rejection was about resources: evicting pods (preemption) could not help, so the
   * extender reports the virtual node under `FailedAndUnresolvableNodes`.
   */
  unresolvable: boolean;
}

/**
 * The pod whose spec the delegate will have ({@link delegateSourcePod}: the proxy with the
 * scheduling fields of the source pod manifest the webhook saved), else, for a pod without the
 * manifest annotation, the pod itself.
 *
 * @throws ValidationError when the annotation is present but unreadable.
 */
export function schedulingPod(pod: V1Pod): V1Pod {
  if (pod.metadata?.annotations?.[SOURCE_POD_MANIFEST_ANNOTATION] === undefined) return pod;
  return delegateSourcePod(pod);
}

/**
 * Whether a target has a real node on which the delegate of `pod` fits now. A node fits when it
 * is not one of our virtual nodes, is Ready, is schedulable (not cordoned, unless the pod
 * tolerates `node.kubernetes.io/unschedulable`), matches the pod's nodeSelector and required node
 * affinity against its own labels (virtual-node-only keys ignored, see
 * {@link matchesNodeSelectorAndAffinity}), tolerates its NoSchedule/NoExecute taints, and has
 * free allocatable (allocatable minus the requests of the non-terminal pods bound to it) for every
 * resource the pod requests (see {@link podRequests}) plus one pod slot. Checks run in that order
 * and a node is counted under its first failure, except resources, where every insufficient one
 * is counted (as kube-scheduler does).
 *
 * Judged on the delegate's spec ({@link schedulingPod}). Ignores pod (anti-)affinity, topology
 * spread, host ports, volumes and DRA claims: the target's scheduler still has the last word.
 *
 * Pure; called by the scheduler extender once per virtual node and pod.
 */
export function fitsTarget(pod: V1Pod, targetNodes: readonly V1Node[], targetPods: readonly V1Pod[], opts: FitOptions): FitResult {
  const target = opts.targetName;
  let delegate: V1Pod;
  try {
    delegate = schedulingPod(pod);
  } catch (err) {
    return { fits: false, reason: (err as Error).message, fittingNodes: [], unresolvable: true };
  }
  const spec: V1PodSpec = delegate.spec ?? ({ containers: [] } as V1PodSpec);
  const namespace = delegate.metadata?.namespace;
  if (opts.namespaces && namespace && !opts.namespaces.has(namespace)) {
    return { fits: false, reason: `namespace ${namespace} does not exist in ${target}`, fittingNodes: [], unresolvable: true };
  }
  if (targetNodes.length === 0) {
    return { fits: false, reason: `no node in ${target} fits: ${target} has no nodes`, fittingNodes: [], unresolvable: true };
  }

  const ignored = opts.ignoredLabelKeys ?? VIRTUAL_NODE_ONLY_LABEL_KEYS;
  const requests = podRequests(spec);
  requests.set('pods', ONE_POD);
  const used = requestedByNode(targetPods);
  const failures = new Map<string, number>();
  const fail = (reason: string) => failures.set(reason, (failures.get(reason) ?? 0) + 1);
  let resourceFailures = 0;
  const fittingNodes: string[] = [];

  for (const node of targetNodes) {
    const nodeName = node.metadata?.name ?? '';
    if (node.metadata?.labels?.[VIRTUAL_KUBELET_PROVIDER_LABEL] === VIRTUAL_KUBELET_PROVIDER_VALUE) {
      fail(REASON_VIRTUAL);
      continue;
    }
    if (!isReady(node)) {
      fail(REASON_NOT_READY);
      continue;
    }
    if (node.spec?.unschedulable && !(spec.tolerations ?? []).some((t) => tolerates(t, UNSCHEDULABLE_TAINT))) {
      fail(REASON_UNSCHEDULABLE);
      continue;
    }
    if (!matchesNodeSelectorAndAffinity(spec, node, ignored)) {
      fail(REASON_AFFINITY);
      continue;
    }
    const taint = untoleratedTaint(node.spec?.taints, spec.tolerations);
    if (taint) {
      fail(`node(s) had untolerated taint {${taint.key}: ${taint.value ?? ''}}`);
      continue;
    }
    const insufficient = insufficientResources(requests, allocatableOf(node), used.get(nodeName));
    if (insufficient.length > 0) {
      resourceFailures++;
      for (const r of insufficient) fail(r === 'pods' ? REASON_TOO_MANY_PODS : `Insufficient ${r}`);
      continue;
    }
    fittingNodes.push(nodeName);
  }

  if (fittingNodes.length > 0) {
    return { fits: true, reason: `${fittingNodes.length} of ${targetNodes.length} node(s) in ${target} fit`, fittingNodes, unresolvable: false };
  }
  const summary = [...failures]
    .sort(([a, m], [b, n]) => n - m || (a < b ? -1 : a > b ? 1 : 0))
    .map(([reason, count]) => `${count} ${reason}`)
    .join(', ');
  return { fits: false, reason: `no node in ${target} fits: ${summary}`, fittingNodes, unresolvable: resourceFailures === 0 };
}

/** A node is Ready when its `Ready` condition is `True`. */
export function isReady(node: V1Node): boolean {
  return (node.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
}

/** Resource names (sorted) for which `allocatable - used` is less than the request; zero requests are skipped. */
function insufficientResources(requests: ResourceAmounts, allocatable: ResourceAmounts, used: ResourceAmounts | undefined): string[] {
  const out: string[] = [];
  for (const [name, amount] of requests) {
    if (amount <= 0n) continue;
    const free = (allocatable.get(name) ?? 0n) - (used?.get(name) ?? 0n);
    if (free < amount) out.push(name);
  }
  return out.sort();
}
