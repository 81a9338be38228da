import type { V1ContainerStatus, V1Pod, V1PodCondition, V1PodStatus } from '@kubernetes/client-node';
import { KEY_PREFIX, REPLACEABLE_CONDITION, TARGET_REACHABLE_CONDITION } from '../core/keys.js';
import { stringMapEquals } from './maps.js';
import { equalNormalized } from './normalize.js';

/**
 * The status the proxy pod should have, mirrored from its delegate (Admiralty's feedback):
 * phase, conditions, podIP(s), hostIP(s), startTime, message and reason come from the delegate;
 * container and init-container statuses too, keeping only names that exist in the proxy's spec
 * (in the delegate's order). Kept from the proxy: `qosClass` (the apiserver treats it as
 * immutable and it follows from the proxy's own resources), `ephemeralContainerStatuses` (the
 * delegate has none: ephemeral containers are not delegated) and `observedGeneration` (it refers
 * to the proxy's generation). Conditions lose `observedGeneration`, which counts the delegate's
 * generations, not the proxy's. The proxy's own `TargetReachable` and `Replaceable` conditions
 * (the outage and replacement reconcilers') are kept after the delegate's: the delegate knows
 * nothing of its target's reachability or of re-placement, and dropping it here would make the two writers undo each other. Timestamps are
 * passed through as they are (Date or string).
 *
 * Pure; called by the delegation reconciler, which writes the result with the status subresource
 * when {@link statusEquals} says it differs from the proxy's.
 */
export function buildProxyStatus(proxy: V1Pod, delegate: V1Pod): V1PodStatus {
  const from: V1PodStatus = delegate.status ?? {};
  const own: V1PodStatus = proxy.status ?? {};
  const containerNames = new Set((proxy.spec?.containers ?? []).map((c) => c.name));
  const initNames = new Set((proxy.spec?.initContainers ?? []).map((c) => c.name));
  const status: V1PodStatus = {
    phase: from.phase,
    conditions: withOwnConditions(from.conditions?.map(withoutObservedGeneration), own.conditions),
    message: from.message,
    reason: from.reason,
    hostIP: from.hostIP,
    hostIPs: from.hostIPs,
    podIP: from.podIP,
    podIPs: from.podIPs,
    startTime: from.startTime,
    containerStatuses: filterByName(from.containerStatuses, containerNames),
    initContainerStatuses: filterByName(from.initContainerStatuses, initNames),
    ephemeralContainerStatuses: own.ephemeralContainerStatuses,
    qosClass: own.qosClass,
    observedGeneration: own.observedGeneration,
  };
  return pruneUndefined(status);
}

function withoutObservedGeneration(c: V1PodCondition): V1PodCondition {
  if (c.observedGeneration === undefined) return c;
  const { observedGeneration: _ignored, ...rest } = c;
  return rest;
}

/** Conditions the proxy carries of its own (outage and replacement reconcilers), not its delegate's. */
const OWN_CONDITIONS = new Set([TARGET_REACHABLE_CONDITION, REPLACEABLE_CONDITION]);

/** The delegate's conditions, then the proxy's own conditions (TargetReachable, Replaceable) if it has any. */
function withOwnConditions(mirrored: V1PodCondition[] | undefined, own: V1PodCondition[] | undefined): V1PodCondition[] | undefined {
  const kept = own?.filter((c) => OWN_CONDITIONS.has(c.type)) ?? [];
  if (kept.length === 0) return mirrored;
  return [...(mirrored ?? []).filter((c) => !OWN_CONDITIONS.has(c.type)), ...kept];
}

function filterByName(statuses: V1ContainerStatus[] | undefined, names: Set<string>): V1ContainerStatus[] | undefined {
  return statuses?.filter((s) => names.has(s.name));
}

function pruneUndefined<T extends object>(obj: T): T {
  for (const k of Object.keys(obj) as (keyof T)[]) {
    if (obj[k] === undefined) delete obj[k];
  }
  return obj;
}

/**
 * Whether two pod statuses are the same once normalized ({@link normalizeForCompare}), so a
 * reconciler can skip no-op status writes. Order of list items matters.
 */
export function statusEquals(a: V1PodStatus | undefined, b: V1PodStatus | undefined): boolean {
  return equalNormalized(a, b);
}

/**
 * The annotations the proxy should carry: its own `multicluster.admiralty.io/*` annotations
 * (the source manifest, the election) plus the delegate's other annotations, so annotations that
 * target-side controllers write on the delegate (e.g. Argo's executor) flow back. Non-Admiralty
 * annotations present only on the proxy are therefore dropped, as in Admiralty.
 *
 * @returns the complete new annotation map, or null when the proxy already has exactly it (no
 *   write needed). Write it with an update, or turn it into a merge patch (removed keys as null)
 *   with `stringMapMergePatch`. Pure; called by the delegation reconciler.
 */
export function buildProxyAnnotations(proxy: V1Pod, delegate: V1Pod): Record<string, string> | null {
  const current = proxy.metadata?.annotations ?? {};
  const desired: Record<string, string> = {};
  for (const [k, v] of Object.entries(current)) {
    if (k.startsWith(KEY_PREFIX)) desired[k] = v;
  }
  for (const [k, v] of Object.entries(delegate.metadata?.annotations ?? {})) {
    if (!k.startsWith(KEY_PREFIX)) desired[k] = v;
  }
  return stringMapEquals(current, desired) ? null : desired;
}
