import { CoreV1Api, PatchStrategy, setHeaderOptions, type V1Pod, type V1PodCondition } from '@kubernetes/client-node';
import { classifyApiError, isNotFound } from '../core/errors.js';
import { DELEGATED_CONDITION } from '../core/keys.js';
import type { EventSink } from './event-sink.js';

/**
 * Writes one condition of a proxy with a strategic-merge patch of its status (merge key `type`),
 * so the other conditions stay as they are. A proxy gone meanwhile is not an error. Used by the
 * reconcilers that give proxies conditions of their own (outage, replacement).
 */
export async function writeProxyCondition(core: CoreV1Api, proxy: V1Pod, condition: V1PodCondition): Promise<void> {
  const name = proxy.metadata!.name!;
  const namespace = proxy.metadata!.namespace!;
  const body = { status: { conditions: [{ ...condition, lastTransitionTime: new Date(condition.lastTransitionTime as Date).toISOString() }] } };
  try {
    await core.patchNamespacedPodStatus({ name, namespace, body }, setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch));
  } catch (err) {
    if (isNotFound(err)) return;
    throw new Error(`writing condition ${condition.type} of proxy ${namespace}/${name}`, { cause: err });
  }
}

/**
 * Sets the proxy's `multicluster.admiralty.io/Delegated` condition to False with the reason,
 * unless it says so already. It goes away by itself: once a delegate exists, the proxy's
 * conditions are the delegate's. Best effort: a failure here must not hide the one the caller
 * reports (the event or the extender's answer says it too). Used by the delegation reconciler
 * and the scheduler extender's bind, so a pod says why it has no delegate on either path.
 */
export async function markNotDelegated(core: CoreV1Api, proxy: V1Pod, reason: string, message: string, now: Date): Promise<void> {
  const current = proxy.status?.conditions?.find((c) => c.type === DELEGATED_CONDITION);
  if (current?.status === 'False' && current.reason === reason && current.message === message) return;
  await writeProxyCondition(core, proxy, { type: DELEGATED_CONDITION, status: 'False', reason, message, lastTransitionTime: now }).catch(() => undefined);
}

/** Records an event about a proxy (by name, namespace and UID). */
export function recordProxyEvent(events: EventSink, proxy: V1Pod, e: { type: 'Normal' | 'Warning'; reason: string; message: string }): void {
  events.record({ kind: 'Pod', apiVersion: 'v1', metadata: { name: proxy.metadata?.name, namespace: proxy.metadata?.namespace, uid: proxy.metadata?.uid } }, e.type, e.reason, e.message);
}

/**
 * Deletes a proxy at once (UID precondition, no grace: no kubelet will confirm it; our finalizer
 * still holds it until released). Resolves false when it was gone already (404) or another pod
 * has its name now (409), true when this call deleted it. `why` names the purpose in errors.
 */
export async function deleteProxyNow(core: CoreV1Api, proxy: V1Pod, why: string): Promise<boolean> {
  const name = proxy.metadata!.name!;
  const namespace = proxy.metadata!.namespace!;
  try {
    await core.deleteNamespacedPod({ name, namespace, gracePeriodSeconds: 0, body: { gracePeriodSeconds: 0, preconditions: { uid: proxy.metadata!.uid } } });
    return true;
  } catch (err) {
    if (isNotFound(err) || classifyApiError(err) === 'Conflict') return false;
    throw new Error(`deleting proxy ${namespace}/${name} ${why}`, { cause: err });
  }
}
