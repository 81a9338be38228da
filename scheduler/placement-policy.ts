import type { V1Namespace, V1Pod } from '@kubernetes/client-node';
import { PLACEMENT_POLICY_ANNOTATION } from '../provider/core/keys.js';
import type { PlacementPolicy } from './score.js';

/** The values `multicluster.admiralty.io/placement-policy` may take. */
export const PLACEMENT_POLICY_NAMES: readonly PlacementPolicy['kind'][] = ['spread', 'pack', 'burst'];

/** Longest piece of an invalid annotation value quoted back in an event (it is user input). */
const MAX_QUOTED_CHARS = 64;

/** The policy a pod is placed by, where it came from, and what was wrong if its annotation was unusable. */
export interface PolicyChoice {
  policy: PlacementPolicy;
  from: 'pod' | 'namespace' | 'default';
  /** Set when the annotation that applies holds something else than a policy name: `message` says what and what is used instead. */
  invalid?: { from: 'pod' | 'namespace'; message: string };
}

/**
 * Reads `multicluster.admiralty.io/placement-policy` from the pod, else from its namespace; the
 * pod's annotation wins whenever it is present. A value that is not exactly one of `spread`,
 * `pack`, `burst` is not guessed at: the pod gets `fallback` (the default policy) and `invalid`
 * says so, quoting at most 64 characters of the value (escaped: it is user input).
 *
 * Pure; called by the scheduler extender's prioritize verb.
 */
export function placementPolicyOf(pod: V1Pod, namespace: V1Namespace | undefined, fallback: PlacementPolicy): PolicyChoice {
  const own = pod.metadata?.annotations?.[PLACEMENT_POLICY_ANNOTATION];
  const inherited = namespace?.metadata?.annotations?.[PLACEMENT_POLICY_ANNOTATION];
  const from = own !== undefined ? 'pod' : 'namespace';
  const text = own ?? inherited;
  if (text === undefined) return { policy: fallback, from: 'default' };
  const kind = PLACEMENT_POLICY_NAMES.find((n) => n === text);
  if (kind) return { policy: { kind }, from };
  const quoted = JSON.stringify(text.length > MAX_QUOTED_CHARS ? `${text.slice(0, MAX_QUOTED_CHARS)}…` : text);
  const where = from === 'pod' ? 'the pod' : `namespace ${namespace?.metadata?.name ?? ''}`;
  return {
    policy: fallback,
    from: 'default',
    invalid: { from, message: `${PLACEMENT_POLICY_ANNOTATION} ${quoted} on ${where} is not one of ${PLACEMENT_POLICY_NAMES.join(', ')}: placed by ${fallback.kind}` },
  };
}

/**
 * The group a pod's placement is counted in for target weights: the pods of one controller
 * (ownerReference with `controller: true`, by UID: a ReplicaSet, a StatefulSet, a Job), else
 * the controller-less pods of its namespace. Pure.
 */
export function placementGroup(pod: V1Pod): string {
  const owner = pod.metadata?.ownerReferences?.find((r) => r.controller === true);
  return owner?.uid ? `controller/${owner.uid}` : `namespace/${pod.metadata?.namespace ?? ''}`;
}

/**
 * The other pods of `pod`'s placement group and the target each is on or going to: from
 * `proxies` (the namespace's proxies; those bound to a virtual node, by `targetOfNode`), then
 * from `placing` (proxies being bound now, with their target) for those not bound yet. Finished
 * and terminating pods do not count: a Deployment scaled down gives their share back. Pure;
 * the extender reads it for target weights.
 */
export function groupPlacements(
  pod: V1Pod,
  proxies: readonly V1Pod[],
  targetOfNode: (nodeName: string) => string | undefined,
  placing: readonly { proxy: V1Pod; targetKey: string }[],
): Map<string, string> {
  const group = placementGroup(pod);
  const counts = (p: V1Pod) => !p.metadata?.deletionTimestamp && p.status?.phase !== 'Succeeded' && p.status?.phase !== 'Failed' && placementGroup(p) === group;
  const out = new Map<string, string>();
  for (const p of proxies) {
    const target = p.spec?.nodeName ? targetOfNode(p.spec.nodeName) : undefined;
    if (target && p.metadata?.uid && counts(p)) out.set(p.metadata.uid, target);
  }
  for (const { proxy, targetKey } of placing) {
    const uid = proxy.metadata?.uid;
    if (uid && !out.has(uid) && counts(proxy)) out.set(uid, targetKey);
  }
  return out;
}
