import type { RbacV1Subject, V1ClusterRoleBinding, V1RoleBinding } from '@kubernetes/client-node';
import { ValidationError } from '../core/errors.js';
import { API_GROUP, API_VERSION, CLUSTER_TARGET_NAME_LABEL, SELF_BINDING_FINALIZER, SOURCE_CLUSTER_ROLE, TARGET_NAMESPACE_LABEL, TARGET_NAME_LABEL } from '../core/keys.js';
import { admiraltyName, labelValueFor } from './names.js';
import type { TargetRef } from './types.js';

const RBAC_GROUP = 'rbac.authorization.k8s.io';
const SERVICE_ACCOUNT_USER = /^system:serviceaccount:([^:]+):([^:]+)$/;

/** The binding that lets the provider act as a source against its own cluster for one self target. */
export type SelfTargetBinding = { kind: 'RoleBinding'; object: V1RoleBinding } | { kind: 'ClusterRoleBinding'; object: V1ClusterRoleBinding };

/**
 * The RBAC subject of an authenticated user name (as a SelfSubjectReview reports it): a
 * ServiceAccount for `system:serviceaccount:<ns>:<name>`, a User otherwise (e.g. a provider run
 * out of cluster with a personal kubeconfig).
 */
export function subjectOfUser(username: string): RbacV1Subject {
  const [, namespace, name] = SERVICE_ACCOUNT_USER.exec(username) ?? [];
  if (namespace !== undefined && name !== undefined) return { kind: 'ServiceAccount', namespace, name };
  if (!username) throw new ValidationError('empty user name: cannot bind the source role to it');
  return { kind: 'User', apiGroup: RBAC_GROUP, name: username };
}

/** Labels that mark the binding made for a self target (read before replacing or deleting it). */
export function selfTargetOwnerLabels(ref: TargetRef): Record<string, string> {
  return ref.kind === 'Target' ? { [TARGET_NAMESPACE_LABEL]: ref.namespace, [TARGET_NAME_LABEL]: labelValueFor(ref.name) } : { [CLUSTER_TARGET_NAME_LABEL]: labelValueFor(ref.name) };
}

/** Name of the binding of a self target: `admiralty-self-target-<name>` or `admiralty-self-cluster-target-<name>`. */
export function selfTargetBindingName(ref: TargetRef): string {
  return admiraltyName([{ value: ref.kind === 'Target' ? 'admiralty-self-target' : 'admiralty-self-cluster-target', kind: 'constant' }, { value: ref.name }]);
}

/**
 * What a self target needs: the provider's own identity bound to ClusterRole
 * `multicluster-scheduler-source`, exactly where the target reaches: a RoleBinding in the
 * Target's namespace, or a ClusterRoleBinding for a ClusterTarget. Nothing is shipped bound: the
 * provider holds only `bind` on that role and makes this binding while the self target exists.
 *
 * The binding is owned by the (Cluster)Target (controller reference, without
 * blockOwnerDeletion, which would need update on the Target's finalizers), so the garbage
 * collector deletes it with the Target even when the provider is down. It carries
 * {@link SELF_BINDING_FINALIZER}: a binding being deleted still grants its role, so the rights
 * last until the provider has stopped the target's watches and releases it (deleting a
 * namespace may remove the binding before the Target). Pure.
 *
 * @throws ValidationError when the Target has no uid.
 */
export function buildSelfTargetBinding(ref: TargetRef, targetUid: string | undefined, subject: RbacV1Subject): SelfTargetBinding {
  if (!targetUid) throw new ValidationError(`${ref.kind} ${ref.name} has no uid`);
  const metadata = {
    name: selfTargetBindingName(ref),
    labels: selfTargetOwnerLabels(ref),
    finalizers: [SELF_BINDING_FINALIZER],
    ownerReferences: [{ apiVersion: `${API_GROUP}/${API_VERSION}`, kind: ref.kind, name: ref.name, uid: targetUid, controller: true }],
  };
  const roleRef = { apiGroup: RBAC_GROUP, kind: 'ClusterRole', name: SOURCE_CLUSTER_ROLE };
  const subjects = [{ ...subject }];
  if (ref.kind === 'Target') {
    return { kind: 'RoleBinding', object: { apiVersion: `${RBAC_GROUP}/v1`, kind: 'RoleBinding', metadata: { ...metadata, namespace: ref.namespace }, roleRef, subjects } };
  }
  return { kind: 'ClusterRoleBinding', object: { apiVersion: `${RBAC_GROUP}/v1`, kind: 'ClusterRoleBinding', metadata, roleRef, subjects } };
}

type BindingMeta = { uid?: string; finalizers?: string[] };

/*
 * Both patches below change finalizers only: the apiserver then skips its check that the writer
 * may bind the binding's role, so `admiralty cleanup` can take the finalizer off too. (A label
 * such as has-finalizer would make them escalation-checked writes.)
 */

/**
 * JSON patch that gives a binding of ours made before the finalizer existed its finalizer, only
 * on that object (uid) and only if its finalizers are still those seen; undefined when it has
 * it, or is being deleted (a finalizer cannot be added then). Pure.
 */
export function holdSelfBindingPatch(meta: BindingMeta & { deletionTimestamp?: unknown }): object[] | undefined {
  const finalizers = meta.finalizers ?? [];
  if (finalizers.includes(SELF_BINDING_FINALIZER) || meta.deletionTimestamp) return undefined;
  return [
    { op: 'test', path: '/metadata/uid', value: meta.uid },
    ...(meta.finalizers
      ? [
          { op: 'test', path: '/metadata/finalizers', value: finalizers },
          { op: 'replace', path: '/metadata/finalizers', value: [...finalizers, SELF_BINDING_FINALIZER] },
        ]
      : [{ op: 'add', path: '/metadata/finalizers', value: [SELF_BINDING_FINALIZER] }]),
  ];
}

/**
 * JSON patch that takes our finalizer off a binding, only on that object and only if its
 * finalizers are still those seen; undefined when it has none of ours. Pure.
 */
export function releaseSelfBindingPatch(meta: BindingMeta): object[] | undefined {
  const finalizers = meta.finalizers ?? [];
  if (!finalizers.includes(SELF_BINDING_FINALIZER)) return undefined;
  const kept = finalizers.filter((f) => f !== SELF_BINDING_FINALIZER);
  return [
    { op: 'test', path: '/metadata/uid', value: meta.uid },
    { op: 'test', path: '/metadata/finalizers', value: finalizers },
    kept.length ? { op: 'replace', path: '/metadata/finalizers', value: kept } : { op: 'remove', path: '/metadata/finalizers' },
  ];
}
