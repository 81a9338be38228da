import type { TargetRef } from './types.js';

/** A write of ours into a target that its apiserver refused: the delegate, or this source's copy of a ConfigMap or Secret. */
export interface RefusedWrite {
  kind: 'pod' | 'configmap' | 'secret';
  namespace: string;
  /** For a copy: the original's name in the source (a delegate is "the delegate"). */
  name?: string;
}

/** What the target's apiserver answered, and what it said about us when asked after a 403. */
export interface RefusalFacts {
  /** How the request failed (see `classifyApiError`); others are not refusals the pod's owner can act on. */
  kind: 'NotFound' | 'Forbidden' | 'Invalid';
  /** The target's message, sanitized. */
  targetMessage: string;
  /** After a 403: whether the target's authorizer lets us create that resource in that namespace (SelfSubjectAccessReview); undefined when unknown. */
  authorized?: boolean;
  /** After a 403: who the target says we are (SelfSubjectReview), sanitized; undefined when unknown. */
  user?: string;
}

/** The proxy's `Delegated=False` reason and message for a refused write. */
export interface Refusal {
  reason: string;
  message: string;
}

/** The API resource each kind of write creates. */
export const WRITE_RESOURCE: Record<RefusedWrite['kind'], string> = { pod: 'pods', configmap: 'configmaps', secret: 'secrets' };

/**
 * Why a pod gets no delegate when `target` refused one of the writes its delegate needs, in the
 * words its owner acts on. Pure; called by the delegation reconciler, the follow reconciler (for
 * copies) and the scheduler extender's bind, so the reasons are the same on every path:
 *
 * * `TargetNamespaceMissing` (404): the namespace does not exist in the target;
 * * `SourceNotAuthorized` (403, and the target's authorizer denies us that write): the target has
 *   no Source (or ClusterSource) for this source's identity there; the message says which object
 *   to create in which cluster, for which user;
 * * `DelegateForbidden` / `CopyForbidden` (another 403: admission, a quota, a namespace being
 *   deleted): the target's own message;
 * * `DelegateInvalid` (400/422 on the delegate): the target's own message.
 *
 * Undefined for an invalid copy: built from an object the source accepted, it is retried as an error.
 */
export function explainRefusal(target: { ref: TargetRef; displayName: string }, write: RefusedWrite, facts: RefusalFacts): Refusal | undefined {
  const t = target.displayName;
  if (facts.kind === 'NotFound') return { reason: 'TargetNamespaceMissing', message: `namespace ${write.namespace} does not exist in ${t}` };
  if (facts.kind === 'Invalid') return write.kind === 'pod' ? { reason: 'DelegateInvalid', message: `${t} rejected the delegate: ${facts.targetMessage}` } : undefined;
  if (facts.authorized === false) {
    const as = facts.user ? `user "${facts.user}"` : `the user of the ${target.ref.kind}'s kubeconfig`;
    const create =
      target.ref.kind === 'Target'
        ? `create a Source in namespace ${write.namespace} of that cluster${facts.user ? ` with spec.userName "${facts.user}"` : ' for that user'}`
        : `create a ClusterSource in that cluster${facts.user ? ` with spec.userName "${facts.user}"` : ' for that user'}`;
    return {
      reason: 'SourceNotAuthorized',
      message: `the cluster of ${target.ref.kind} ${t} does not authorize this source (${as}) to create ${WRITE_RESOURCE[write.kind]} in namespace ${write.namespace}: ${create}`,
    };
  }
  return write.kind === 'pod'
    ? { reason: 'DelegateForbidden', message: `${t} refused to create the delegate: ${facts.targetMessage}` }
    : { reason: 'CopyForbidden', message: `${t} refused this cluster's copy of ${write.kind} ${write.namespace}/${write.name}: ${facts.targetMessage}` };
}
