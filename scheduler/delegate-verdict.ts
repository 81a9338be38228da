import type { CoreV1Event, V1Pod, V1PodCondition } from '@kubernetes/client-node';

/**
 * The start of kube-scheduler's message (VolumeBinding's PreFilter) for a pod whose generic
 * ephemeral volume has no claim yet. Each cluster's ephemeral-volume controller makes that claim
 * only once the pod exists, so a delegate's first verdict is often this one, and the target's
 * scheduler tries the pod again as soon as the claim is there (upstream calls the situation
 * "normal directly after creating a pod").
 */
export const AWAITING_EPHEMERAL_CLAIM = 'waiting for ephemeral volume controller to create the persistentvolumeclaim';

/**
 * The words kube-scheduler's gang plugin (1.36) puts in a pod's Unschedulable condition while its
 * PodGroup has fewer than `minCount` pods with a place: the group waits for the rest of its
 * members, and no plugin found the pod itself unplaceable.
 */
export const AWAITING_GANG_MEMBERS = 'waiting for minCount pods';

/**
 * The delegate's `PodScheduled=False` condition with reason `Unschedulable`, when it is the
 * target's verdict on the pod, or undefined. Not a verdict: the wait for an ephemeral volume's
 * claim ({@link AWAITING_EPHEMERAL_CLAIM}) of a delegate that has such a volume; the target's
 * scheduler decides again once the claim exists, and that decision counts. Nor, for a delegate
 * in a PodGroup of its target, the gang's wait for its other members ({@link AWAITING_GANG_MEMBERS}):
 * their delegates are being created, and the target decides for all of them once they are.
 */
export function unschedulableVerdict(delegate: V1Pod): V1PodCondition | undefined {
  const c = unschedulableCondition(delegate);
  if (c?.message?.includes(AWAITING_EPHEMERAL_CLAIM) && delegate.spec?.volumes?.some((v) => v.ephemeral)) return undefined;
  if (c?.message?.includes(AWAITING_GANG_MEMBERS) && (delegate.spec as { schedulingGroup?: unknown } | undefined)?.schedulingGroup) return undefined;
  return c;
}

/** The delegate's `PodScheduled=False` condition with reason `Unschedulable`, whatever it says. */
function unschedulableCondition(delegate: V1Pod): V1PodCondition | undefined {
  const c = delegate.status?.conditions?.find((x) => x.type === 'PodScheduled');
  return c?.status === 'False' && c.reason === 'Unschedulable' ? c : undefined;
}

/**
 * The node a target's scheduler chose for a delegate that it has not bound yet, or undefined.
 * Since Kubernetes 1.35 (`NominatedNodeNameForExpectation`, on by default) a scheduler writes the
 * node it chose into `status.nominatedNodeName` before it waits on its PreBind plugins or on
 * Permit: a PersistentVolumeClaim being provisioned and bound on that node (which takes cloud
 * disks tens of seconds, past the placement timeout), a gang waiting for its members. The target
 * has taken the pod, as it has once `nodeName` is set; a delegate left to wait there is what the
 * same pod created in the target directly would be. A nomination that comes with an
 * Unschedulable condition is the target's preemption: its scheduler found no room, chose a node
 * and the pods of lower priority to evict there ({@link preemptingFor}), and binds the pod there
 * once they are gone, as it would the same pod created in the target. That is taken as the
 * placement too: the room is the target's promise as much as a volume's node is (a pod that
 * preemption could not help has its nomination cleared in the same write, upstream).
 */
export function nominatedFor(delegate: V1Pod): string | undefined {
  const node = delegate.status?.nominatedNodeName;
  if (!node || delegate.spec?.nodeName) return undefined;
  return node;
}

/**
 * The node on which the target's scheduler is preempting pods for a delegate, or undefined: a
 * nomination ({@link nominatedFor}) that comes with the Unschedulable condition of the cycle that
 * preempted (the victims are being deleted; the pod is bound once they are gone).
 */
export function preemptingFor(delegate: V1Pod): string | undefined {
  const node = nominatedFor(delegate);
  return node && unschedulableCondition(delegate) ? node : undefined;
}

/** Reason of the Warning event that a cluster's resource-claim controller puts on a pod whose ResourceClaim it cannot make from its template. */
export const FAILED_RESOURCE_CLAIM_CREATION = 'FailedResourceClaimCreation';

/** Whether a pod asks for ResourceClaims made from templates (which its cluster's resource-claim controller makes once the pod exists). */
export function asksClaimTemplates(pod: V1Pod): boolean {
  return pod.spec?.resourceClaims?.some((c) => c.resourceClaimTemplateName) ?? false;
}

/**
 * Why the target cannot make the ResourceClaims of a delegate that asks for them from templates
 * (see {@link asksClaimTemplates}: ask it of the proxy, whose spec the delegate has; the
 * delegates cache keeps no `resourceClaims`): a {@link FAILED_RESOURCE_CLAIM_CREATION} Warning on
 * this very delegate (its UID), e.g. `PodResourceClaim gpu: resource claim template "gpu": ...
 * not found`; undefined when there is none. Such a delegate gets no word from the target's
 * scheduler at all: its DynamicResources plugin keeps a pod out of the queue until its claims
 * exist, so only this event tells the wait will not end.
 */
export function claimCreationFailure(delegate: V1Pod, events: { list(namespace?: string): CoreV1Event[] } | undefined): string | undefined {
  const uid = delegate.metadata?.uid;
  if (!events || !uid) return undefined;
  const ev = events.list(delegate.metadata?.namespace).find((e) => e.reason === FAILED_RESOURCE_CLAIM_CREATION && e.type === 'Warning' && e.involvedObject?.uid === uid);
  return ev ? (ev.message ?? FAILED_RESOURCE_CLAIM_CREATION) : undefined;
}
