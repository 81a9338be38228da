import type { RbacV1Subject, V1ClusterRoleBinding, V1OwnerReference, V1RoleBinding, V1ServiceAccount } from '@kubernetes/client-node';
import { ValidationError } from '../core/errors.js';
import { API_GROUP, API_VERSION, CLUSTER_SOURCE_NAME_LABEL, CLUSTER_SUMMARY_VIEWER_CLUSTER_ROLE, SOURCE_CLUSTER_ROLE, SOURCE_NAMESPACE_LABEL, SOURCE_NAME_LABEL } from '../core/keys.js';
import { admiraltyName, labelValueFor } from './names.js';
import type { ClusterSource, Source } from './types.js';

const RBAC_GROUP = 'rbac.authorization.k8s.io';

/** What a target cluster needs so that a source may use it (see {@link buildSourceObjects}). */
export interface SourceObjects {
  /** To create when missing (never take over an existing one that is not ours). */
  serviceAccount?: V1ServiceAccount;
  /** Source only: binds the source ClusterRole in the Source's namespace. */
  roleBinding?: V1RoleBinding;
  clusterRoleBindings: V1ClusterRoleBinding[];
}

/**
 * Labels that mark the objects made for a Source (`source-namespace`, `source-name`) or a
 * ClusterSource (`cluster-source-name`). Values longer than 63 characters are hashed.
 */
export function sourceOwnerLabels(kind: 'Source' | 'ClusterSource', namespace: string, name: string): Record<string, string> {
  return kind === 'Source' ? { [SOURCE_NAMESPACE_LABEL]: namespace, [SOURCE_NAME_LABEL]: labelValueFor(name) } : { [CLUSTER_SOURCE_NAME_LABEL]: labelValueFor(name) };
}

/** Label selector for {@link sourceOwnerLabels}: lists what was made for a (Cluster)Source, e.g. to delete it. */
export function sourceOwnerSelector(kind: 'Source' | 'ClusterSource', namespace: string, name: string): string {
  const labels = sourceOwnerLabels(kind, namespace, name);
  return Object.keys(labels)
    .sort()
    .map((k) => `${k}=${labels[k]}`)
    .join(',');
}

/**
 * The RBAC objects the source reconciler ensures in a target cluster for a Source or a
 * ClusterSource, with Admiralty's names (its hashing rule included, see `admiraltyName`):
 *
 * * Source `ns/name`: ServiceAccount `spec.serviceAccountName` in `ns` (if set); RoleBinding
 *   `admiralty-source-<name>` in `ns` to ClusterRole `multicluster-scheduler-source`;
 *   ClusterRoleBinding `admiralty-source-<ns>-<name>-cluster-summary-viewer` to
 *   `multicluster-scheduler-cluster-summary-viewer`.
 * * ClusterSource `name`: ServiceAccount `spec.serviceAccount` (if set); ClusterRoleBindings
 *   `admiralty-cluster-source-<name>` (source role) and
 *   `admiralty-cluster-source-<name>-cluster-summary-viewer`.
 *
 * Subjects: the ServiceAccount, then the User, whichever are set; with neither, no binding is
 * made. Ownership: everything carries {@link sourceOwnerLabels}. Namespaced objects of a Source,
 * and everything of a ClusterSource, also carry a controller ownerReference, so deleting the
 * (Cluster)Source garbage-collects them. The ClusterRoleBinding of a namespaced Source cannot:
 * the garbage collector never resolves a namespaced owner of a cluster-scoped object (Admiralty
 * sets one anyway, and the binding is never collected). The reconciler must delete it itself,
 * found by {@link sourceOwnerSelector}, when the Source is deleted (e.g. through a finalizer).
 *
 * Pure; called by the source reconciler.
 *
 * @throws ValidationError when the object has no name or uid, or a ClusterSource's
 *   serviceAccount lacks a name or namespace.
 */
// eslint-disable-next-line max-lines-per-function -- the objects of one Source share its names, labels and service account
export function buildSourceObjects(source: Source | ClusterSource, kind: 'Source' | 'ClusterSource'): SourceObjects {
  const name = source.metadata?.name;
  const uid = source.metadata?.uid;
  const namespace = kind === 'Source' ? (source.metadata?.namespace ?? '') : '';
  if (!name || !uid || (kind === 'Source' && !namespace)) {
    throw new ValidationError(`${kind} must have a name${kind === 'Source' ? ', a namespace' : ''} and a uid`);
  }
  const owner: V1OwnerReference = {
    apiVersion: `${API_GROUP}/${API_VERSION}`,
    kind,
    name,
    uid,
    controller: true,
    blockOwnerDeletion: true,
  };
  const labels = sourceOwnerLabels(kind, namespace, name);

  let sa: { name: string; namespace: string } | undefined;
  let userName: string | undefined;
  if (kind === 'Source') {
    const spec = (source as Source).spec ?? {};
    if (spec.serviceAccountName) sa = { name: spec.serviceAccountName, namespace };
    userName = spec.userName || undefined;
  } else {
    const spec = (source as ClusterSource).spec ?? {};
    if (spec.serviceAccount) {
      if (!spec.serviceAccount.name || !spec.serviceAccount.namespace) {
        throw new ValidationError(`ClusterSource ${name}: spec.serviceAccount needs a name and a namespace`);
      }
      sa = { name: spec.serviceAccount.name, namespace: spec.serviceAccount.namespace };
    }
    userName = spec.userName || undefined;
  }

  const subjects: RbacV1Subject[] = [];
  if (sa) subjects.push({ kind: 'ServiceAccount', name: sa.name, namespace: sa.namespace });
  if (userName) subjects.push({ kind: 'User', apiGroup: RBAC_GROUP, name: userName });

  const out: SourceObjects = { clusterRoleBindings: [] };
  if (sa) {
    out.serviceAccount = {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: sa.name, namespace: sa.namespace, labels: { ...labels }, ownerReferences: [{ ...owner }] },
    };
  }
  if (subjects.length === 0) return out;

  const clusterRoleBinding = (bindingName: string, role: string, owned: boolean): V1ClusterRoleBinding => ({
    apiVersion: `${RBAC_GROUP}/v1`,
    kind: 'ClusterRoleBinding',
    metadata: { name: bindingName, labels: { ...labels }, ...(owned ? { ownerReferences: [{ ...owner }] } : {}) },
    roleRef: { apiGroup: RBAC_GROUP, kind: 'ClusterRole', name: role },
    subjects: subjects.map((s) => ({ ...s })),
  });

  if (kind === 'Source') {
    out.roleBinding = {
      apiVersion: `${RBAC_GROUP}/v1`,
      kind: 'RoleBinding',
      metadata: {
        name: admiraltyName([{ value: 'admiralty-source', kind: 'constant' }, { value: name }]),
        namespace,
        labels: { ...labels },
        ownerReferences: [{ ...owner }],
      },
      roleRef: { apiGroup: RBAC_GROUP, kind: 'ClusterRole', name: SOURCE_CLUSTER_ROLE },
      subjects: subjects.map((s) => ({ ...s })),
    };
    out.clusterRoleBindings.push(
      clusterRoleBinding(
        admiraltyName([{ value: 'admiralty-source', kind: 'constant' }, { value: namespace }, { value: name }, { value: 'cluster-summary-viewer', kind: 'constant' }]),
        CLUSTER_SUMMARY_VIEWER_CLUSTER_ROLE,
        false,
      ),
    );
  } else {
    out.clusterRoleBindings.push(
      clusterRoleBinding(admiraltyName([{ value: 'admiralty-cluster-source', kind: 'constant' }, { value: name }]), SOURCE_CLUSTER_ROLE, true),
      clusterRoleBinding(
        admiraltyName([{ value: 'admiralty-cluster-source', kind: 'constant' }, { value: name }, { value: 'cluster-summary-viewer', kind: 'constant' }]),
        CLUSTER_SUMMARY_VIEWER_CLUSTER_ROLE,
        true,
      ),
    );
  }
  return out;
}
