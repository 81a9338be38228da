import type { V1Namespace, V1Pod } from '@kubernetes/client-node';
import { ELECT_ANNOTATION, HAS_FINALIZER_LABEL, NAMESPACE_ENABLED_LABEL, NAMESPACE_ENABLED_VALUE, SOURCE_POD_MANIFEST_ANNOTATION } from '../core/keys.js';
import type { TargetRef } from './types.js';

/** Reasons of a `Delegated=False` condition when a proxy may not use its node's target. */
export const NOT_A_PROXY_REASON = 'NotAProxy';
export const NAMESPACE_NOT_ENABLED_REASON = 'NamespaceNotEnabled';
export const TARGET_NOT_ALLOWED_REASON = 'TargetNotAllowed';

/** Outcome of {@link checkTenancy}: allowed, or the condition reason and a message for the user. */
export type TenancyVerdict = { allowed: true } | { allowed: false; reason: string; message: string };

/**
 * Whether the provider may act for `proxy` (create its delegate and copies, serve its logs and
 * exec) with the credentials of `target`, the target behind the virtual node it is bound to.
 *
 * The webhook confines proxies to allowed virtual nodes, but a pod can reach a virtual node
 * without it (`spec.nodeName` set at creation in a namespace that was not opted in then, a
 * binding by another scheduler), and labels and annotations are the pod creator's to write.
 * So, checked on the objects themselves:
 * * provenance: the pod is elected, carries a source manifest and our `has-finalizer` label
 *   (all three set at creation only: the proxy-pod admission policy judges the updates of pods
 *   with that label, and refuses to add it), and its namespace is labelled
 *   `multicluster-scheduler=enabled` now (`namespace` undefined: absent or not enabled), so
 *   the webhook saw the pod;
 * * tenancy: a Target serves the pods of its own namespace only; a ClusterTarget serves every
 *   enabled namespace.
 *
 * Pure; called by the delegation and follow reconcilers and by the kubelet API's resolver.
 */
export function checkTenancy(proxy: V1Pod, namespace: V1Namespace | undefined, target: TargetRef): TenancyVerdict {
  const ns = proxy.metadata?.namespace ?? '';
  const annotations = proxy.metadata?.annotations ?? {};
  const where = target.kind === 'Target' ? `Target ${target.namespace}/${target.name}` : `ClusterTarget ${target.name}`;
  if (!(ELECT_ANNOTATION in annotations) || annotations[SOURCE_POD_MANIFEST_ANNOTATION] === undefined || proxy.metadata?.labels?.[HAS_FINALIZER_LABEL] !== 'true') {
    return { allowed: false, reason: NOT_A_PROXY_REASON, message: `pod ${ns}/${proxy.metadata?.name} is bound to the virtual node of ${where} but was not admitted as a proxy` };
  }
  if (!namespace || namespace.metadata?.name !== ns || namespace.metadata?.labels?.[NAMESPACE_ENABLED_LABEL] !== NAMESPACE_ENABLED_VALUE) {
    return { allowed: false, reason: NAMESPACE_NOT_ENABLED_REASON, message: `namespace ${ns} is not labelled ${NAMESPACE_ENABLED_LABEL}=${NAMESPACE_ENABLED_VALUE}` };
  }
  if (target.kind === 'Target' && target.namespace !== ns) {
    return { allowed: false, reason: TARGET_NOT_ALLOWED_REASON, message: `${where} serves pods of namespace ${target.namespace} only, not of ${ns}` };
  }
  return { allowed: true };
}
