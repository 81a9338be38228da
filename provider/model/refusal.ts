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

/** The reason of a write the target's authorizer denies us: no Source (or ClusterSource) there for our identity. */
export const SOURCE_NOT_AUTHORIZED = 'SourceNotAuthorized';

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
 *   to create in which cluster, for which user (a ClusterTarget may use either: a Source for that
 *   namespace, or a ClusterSource for all);
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
        : `create a Source in namespace ${write.namespace} of that cluster${facts.user ? ` with spec.userName "${facts.user}"` : ' for that user'}, or a ClusterSource for every namespace`;
    return {
      reason: SOURCE_NOT_AUTHORIZED,
      message: `the cluster of ${target.ref.kind} ${t} does not authorize this source (${as}) to create ${WRITE_RESOURCE[write.kind]} in namespace ${write.namespace}: ${create}`,
    };
  }
  return write.kind === 'pod'
    ? { reason: 'DelegateForbidden', message: `${t} refused to create the delegate: ${facts.targetMessage}` }
    : { reason: 'CopyForbidden', message: `${t} refused this cluster's copy of ${write.kind} ${write.namespace}/${write.name}: ${facts.targetMessage}` };
}

/** Namespaces named at most in a ClusterTarget's status message; the rest are counted. */
const NAMESPACES_NAMED = 5;

/** What a target's authorizer answered about creating pods, as last asked (see `TargetAuthorization`). */
export interface PodRights {
  /** Whether we may create pods in every namespace (a ClusterSource grants it); undefined when unknown. */
  clusterWide?: boolean;
  /** The user the target says we are, sanitized, when known. */
  user?: string;
  /** Without cluster-wide rights: each opted-in namespace of the source asked about, and the answer. */
  namespaces: ReadonlyMap<string, boolean>;
}

/**
 * The `Ready` reason and message of a ClusterTarget whose summary was read, from what its
 * authorizer says about pods. Pure; called by the target registry's probe. Always ready: the
 * target is reachable, and whether it can run a pod depends on the pod's namespace, which the
 * extender's filter judges per pod.
 *
 * * `TargetReady`: cluster-wide rights, or unknown;
 * * `NoClusterSource`: no cluster-wide rights; a Source authorizes some opted-in namespaces (or
 *   none was asked about): only their pods are offered the target;
 * * `SourceNotAuthorized`: no cluster-wide rights, and none of the opted-in namespaces asked
 *   about is authorized: no pod of this source can go there.
 */
export function clusterTargetRights(server: string | undefined, rights: PodRights): { reason: string; message: string } {
  const reachable = `target reachable at ${server}`;
  if (rights.clusterWide !== false) return { reason: 'TargetReady', message: reachable };
  const as = rights.user ? `user "${rights.user}"` : 'the user of its kubeconfig';
  const allowed: string[] = [];
  const denied: string[] = [];
  for (const [namespace, ok] of rights.namespaces) (ok ? allowed : denied).push(namespace);
  if (allowed.length === 0 && denied.length > 0) {
    return {
      reason: SOURCE_NOT_AUTHORIZED,
      message: `${reachable}, but it authorizes this source (${as}) to create pods in none of its namespaces (${named(denied)}): create a ClusterSource in that cluster for every namespace, or a Source in each`,
    };
  }
  const where = allowed.length ? ` (${named(allowed)})` : '';
  const not = denied.length ? `; not in ${named(denied)}` : '';
  return {
    reason: 'NoClusterSource',
    message: `${reachable}; no ClusterSource there authorizes this source (${as}) in every namespace, so only pods of the namespaces where a Source does are offered this target${where}${not}`,
  };
}

/**
 * Why a namespaced Target whose summary was read is not ready, from what its authorizer says
 * about pods in the Target's namespace, the only one it serves: `TargetForbidden` (as when our
 * identity may not even list pods there) when the target denies us creating them, with the
 * words of {@link explainRefusal} (the Source to create, in which namespace, for which user).
 * Undefined when it allows it or nobody knows (the probe goes on). Pure; called by the target
 * registry's probe.
 */
export function targetForbidden(target: { ref: TargetRef; displayName: string }, server: string | undefined, rights: PodRights): { reason: string; message: string } | undefined {
  const namespace = target.ref.namespace;
  if (rights.namespaces.get(namespace) !== false) return undefined;
  const refusal = explainRefusal(target, { kind: 'pod', namespace }, { kind: 'Forbidden', targetMessage: '', authorized: false, ...(rights.user ? { user: rights.user } : {}) })!;
  return { reason: 'TargetForbidden', message: `target reachable at ${server}, but ${refusal.message}` };
}

/** Sorted names, the first {@link NAMESPACES_NAMED} of them, then how many more. */
function named(namespaces: string[]): string {
  const sorted = [...namespaces].sort();
  const shown = sorted.slice(0, NAMESPACES_NAMED).join(', ');
  return sorted.length > NAMESPACES_NAMED ? `${shown} and ${sorted.length - NAMESPACES_NAMED} more` : shown;
}
