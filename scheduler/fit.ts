import type { V1Pod, V1PodSpec } from '@kubernetes/client-node';
import { SOURCE_POD_MANIFEST_ANNOTATION } from '../provider/core/keys.js';
import { delegateSourcePod } from '../provider/model/delegate-pod.js';
import { formatQuantity } from '../provider/model/quantity.js';
import { ONE_POD, podRequests, type ResourceAmounts } from '../provider/model/resources.js';
import { matchesNodeSelectorAndAffinity, tolerates, untoleratedTaint, VIRTUAL_NODE_ONLY_LABEL_KEYS } from './node-match.js';
import type { FitNode } from './target-nodes.js';

/** Reasons, worded like kube-scheduler's own, so FailedScheduling events read familiar. */
export const REASON_NOT_READY = 'node(s) were not ready';
export const REASON_UNSCHEDULABLE = 'node(s) were unschedulable';
export const REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector";
export const REASON_TOO_MANY_PODS = 'Too many pods';

const UNSCHEDULABLE_TAINT = { key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' };

export interface FitOptions {
  /** Target name for the reason (`TargetClient.displayName`). */
  targetName: string;
  /** Label keys counted as satisfied; default {@link VIRTUAL_NODE_ONLY_LABEL_KEYS}. */
  ignoredLabelKeys?: ReadonlySet<string>;
  /**
   * Requests already promised on a node that its summary does not show yet (delegates this
   * source placed after the summary was written), by node name.
   */
  assumed?: ReadonlyMap<string, ResourceAmounts>;
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
 * Whether a target has a real node on which the delegate of `pod` fits now, judged from the
 * target's ClusterSummary ({@link nodesOfSummary}). A node fits when it is Ready, schedulable
 * (not cordoned, unless the pod tolerates `node.kubernetes.io/unschedulable`), matches the pod's
 * nodeSelector and required node affinity against its own labels (virtual-node-only keys
 * ignored, see {@link matchesNodeSelectorAndAffinity}), tolerates its NoSchedule/NoExecute
 * taints, and has free room (free minus `assumed`) for every resource the pod requests (see
 * {@link podRequests}) plus one pod slot. Checks run in that order and a node is counted under
 * its first failure, except resources, where every insufficient one is counted (as
 * kube-scheduler does); the reason then names the largest free amount of each such resource.
 *
 * Judged on the delegate's spec ({@link schedulingPod}). Ignores pod (anti-)affinity, topology
 * spread, host ports, volumes and DRA claims: the target's scheduler has the last word, at bind.
 *
 * Pure; called by the scheduler extender once per virtual node and pod.
 */
export function fitsTarget(pod: V1Pod, targetNodes: readonly FitNode[], opts: FitOptions): FitResult {
  const target = opts.targetName;
  let delegate: V1Pod;
  try {
    delegate = schedulingPod(pod);
  } catch (err) {
    return { fits: false, reason: (err as Error).message, fittingNodes: [], unresolvable: true };
  }
  const spec: V1PodSpec = delegate.spec ?? ({ containers: [] } as V1PodSpec);
  if (targetNodes.length === 0) {
    return { fits: false, reason: `no node in ${target} fits: ${target} has no nodes`, fittingNodes: [], unresolvable: true };
  }

  const ignored = opts.ignoredLabelKeys ?? VIRTUAL_NODE_ONLY_LABEL_KEYS;
  const requests = podRequests(spec);
  requests.set('pods', ONE_POD);
  const failures = new Map<string, number>();
  const fail = (reason: string) => failures.set(reason, (failures.get(reason) ?? 0) + 1);
  /** Largest free amount seen, per resource that was short somewhere. */
  const largestFree = new Map<string, bigint>();
  let resourceFailures = 0;
  const fittingNodes: string[] = [];

  for (const node of targetNodes) {
    if (node.notReady) {
      fail(REASON_NOT_READY);
      continue;
    }
    if (node.unschedulable && !(spec.tolerations ?? []).some((t) => tolerates(t, UNSCHEDULABLE_TAINT))) {
      fail(REASON_UNSCHEDULABLE);
      continue;
    }
    if (!matchesNodeSelectorAndAffinity(spec, node, ignored)) {
      fail(REASON_AFFINITY);
      continue;
    }
    const taint = untoleratedTaint(node.taints, spec.tolerations);
    if (taint) {
      fail(`node(s) had untolerated taint {${taint.key}: ${taint.value ?? ''}}`);
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
      resourceFailures++;
      for (const r of short.sort()) {
        fail(r === 'pods' ? REASON_TOO_MANY_PODS : `Insufficient ${r}`);
      }
      for (const [name] of requests) {
        const free = (node.free.get(name) ?? 0n) - (assumed?.get(name) ?? 0n);
        if (free > (largestFree.get(name) ?? -1n)) largestFree.set(name, free > 0n ? free : 0n);
      }
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
  return { fits: false, reason: `no node in ${target} fits: ${summary}`, fittingNodes, unresolvable: resourceFailures === 0 };
}
