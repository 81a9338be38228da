import type { RbacV1Subject, V1ClusterRoleBinding, V1RoleBinding } from '@kubernetes/client-node';
import { ADMIRALTY_CLUSTER_ROLES, API_GROUP, API_VERSION } from '../core/keys.js';
import { equalNormalized } from './normalize.js';

const RBAC_GROUP = 'rbac.authorization.k8s.io';

/**
 * Why an existing RoleBinding or ClusterRoleBinding that has the name of one of ours is *not*
 * the one Admiralty 0.17's source controller made for the same (Cluster)Source, or `undefined`
 * when it is, and so may be replaced by ours (see the source reconciler).
 *
 * Admiralty's shape, exactly (its `pkg/controllers/source`): no labels and no annotations; one
 * ownerReference, the controller reference to the (Cluster)Source, with its name and uid (the
 * live object's uid: a binding left by an earlier object of the same name is not taken); roleRef
 * to the ClusterRole of Admiralty's chart installed as release `admiralty` that matches the role
 * of ours (`admiralty-source` or `admiralty-cluster-summary-viewer`, see
 * {@link ADMIRALTY_CLUSTER_ROLES}); the same subjects as ours (Admiralty keeps them in step with
 * the Source, and the API server defaults a User subject's apiGroup as ours sets it).
 *
 * Pure; `wanted` is ours, from `buildSourceObjects`.
 */
export function admiraltyBindingMismatch(
  existing: V1RoleBinding | V1ClusterRoleBinding,
  wanted: V1RoleBinding | V1ClusterRoleBinding,
  owner: { kind: 'Source' | 'ClusterSource'; name: string; uid: string },
): string | undefined {
  const meta = existing.metadata ?? {};
  if (Object.keys(meta.labels ?? {}).length > 0) return `it has labels (${Object.keys(meta.labels!).sort().join(', ')})`;
  if (Object.keys(meta.annotations ?? {}).length > 0) return `it has annotations (${Object.keys(meta.annotations!).sort().join(', ')})`;
  const refs = meta.ownerReferences ?? [];
  const ref = refs[0];
  const ownerOk = refs.length === 1 && ref!.apiVersion === `${API_GROUP}/${API_VERSION}` && ref!.kind === owner.kind && ref!.name === owner.name && ref!.uid === owner.uid && ref!.controller === true;
  if (!ownerOk) return `its owner is not this ${owner.kind} (uid ${owner.uid})`;
  const admiraltyRole = ADMIRALTY_CLUSTER_ROLES[wanted.roleRef.name];
  const roleRef = existing.roleRef;
  if (!admiraltyRole) return `Admiralty has no counterpart of ClusterRole/${wanted.roleRef.name}`;
  if (roleRef?.apiGroup !== RBAC_GROUP || roleRef.kind !== 'ClusterRole' || roleRef.name !== admiraltyRole) {
    return `its roleRef is ${roleRef?.kind}/${roleRef?.name}, not ClusterRole/${admiraltyRole}`;
  }
  if (!equalNormalized(subjectsOf(existing), subjectsOf(wanted))) return 'its subjects are not those of this ' + owner.kind;
  return undefined;
}

function subjectsOf(b: V1RoleBinding | V1ClusterRoleBinding): RbacV1Subject[] {
  return b.subjects ?? [];
}
