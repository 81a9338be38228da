import { CoreV1Api, RbacAuthorizationV1Api, type V1ClusterRoleBinding, type V1RoleBinding } from '@kubernetes/client-node';
import { isAlreadyExists, isNotFound } from '../core/errors.js';
import { admiraltyName } from '../model/names.js';
import { buildSourceObjects, sourceOwnerLabels, sourceOwnerSelector } from '../model/source.js';
import { equalNormalized } from '../model/normalize.js';
import type { ClusterSource, Source } from '../model/types.js';
import type { ObjectCache } from './object-cache.js';

/**
 * Target side of the user guide: for each Source (namespaced) or ClusterSource, makes the
 * ServiceAccount if missing and binds the source roles to it (and to `userName`). Namespaced
 * children are owned by the Source and garbage-collected with it; the ClusterRoleBindings of a
 * namespaced Source cannot be owned by it, so they are found by label and deleted here.
 *
 * Key: `Source/<ns>/<name>` or `ClusterSource/<name>`.
 */
export class SourcesReconciler {
  constructor(private readonly o: { core: CoreV1Api; rbac: RbacAuthorizationV1Api; sources: ObjectCache<Source>; clusterSources: ObjectCache<ClusterSource> }) {}

  static keyOf(obj: Source | ClusterSource, kind: 'Source' | 'ClusterSource'): string {
    return kind === 'Source' ? `Source/${obj.metadata.namespace}/${obj.metadata.name}` : `ClusterSource/${obj.metadata.name}`;
  }

  async reconcile(key: string): Promise<void> {
    const [kind, a, b] = key.split('/') as ['Source' | 'ClusterSource', string, string | undefined];
    const namespace = kind === 'Source' ? a : '';
    const name = kind === 'Source' ? b! : a;
    const obj = kind === 'Source' ? this.o.sources.get(name, namespace) : this.o.clusterSources.get(name);
    if (!obj) {
      await this.deleteBindings(kind, namespace, name, new Set());
      return;
    }
    const objects = buildSourceObjects(obj, kind);
    if (objects.serviceAccount) {
      await this.o.core
        .createNamespacedServiceAccount({ namespace: objects.serviceAccount.metadata!.namespace!, body: objects.serviceAccount })
        .catch((err) => {
          // An existing ServiceAccount (ours or the user's) is kept as it is.
          if (!isAlreadyExists(err)) throw new Error('creating the ServiceAccount', { cause: err });
        });
    }
    if (objects.roleBinding) await this.applyRoleBinding(objects.roleBinding);
    else if (kind === 'Source') await this.deleteRoleBinding(namespace, admiraltyName([{ value: 'admiralty-source', kind: 'constant' }, { value: name }]), sourceOwnerLabels(kind, namespace, name));
    for (const crb of objects.clusterRoleBindings) await this.applyClusterRoleBinding(crb);
    await this.deleteBindings(kind, namespace, name, new Set(objects.clusterRoleBindings.map((c) => c.metadata!.name!)));
  }

  private async applyRoleBinding(rb: V1RoleBinding): Promise<void> {
    const { name, namespace } = rb.metadata as { name: string; namespace: string };
    try {
      const existing = await this.o.rbac.readNamespacedRoleBinding({ name, namespace });
      if (!isOurs(existing.metadata?.labels, rb.metadata?.labels)) throw new Error(`RoleBinding ${namespace}/${name} exists and is not ours; refusing to replace it`);
      if (equalNormalized(existing.subjects, rb.subjects) && equalNormalized(existing.roleRef, rb.roleRef)) return;
      // roleRef is immutable: replace the binding.
      await this.o.rbac.deleteNamespacedRoleBinding({ name, namespace, body: { preconditions: { uid: existing.metadata!.uid } } });
    } catch (err) {
      if (!isNotFound(err)) throw new Error(`reading RoleBinding ${namespace}/${name}`, { cause: err });
    }
    await this.o.rbac.createNamespacedRoleBinding({ namespace, body: rb }).catch((err) => {
      if (!isAlreadyExists(err)) throw err;
    });
  }

  private async applyClusterRoleBinding(crb: V1ClusterRoleBinding): Promise<void> {
    const name = crb.metadata!.name!;
    try {
      const existing = await this.o.rbac.readClusterRoleBinding({ name });
      if (!isOurs(existing.metadata?.labels, crb.metadata?.labels)) throw new Error(`ClusterRoleBinding ${name} exists and is not ours; refusing to replace it`);
      if (equalNormalized(existing.subjects, crb.subjects) && equalNormalized(existing.roleRef, crb.roleRef)) return;
      await this.o.rbac.deleteClusterRoleBinding({ name, body: { preconditions: { uid: existing.metadata!.uid } } });
    } catch (err) {
      if (!isNotFound(err)) throw new Error(`reading ClusterRoleBinding ${name}`, { cause: err });
    }
    await this.o.rbac.createClusterRoleBinding({ body: crb }).catch((err) => {
      if (!isAlreadyExists(err)) throw err;
    });
  }

  /** Deletes our RoleBinding of a Source that no longer names anyone to bind. */
  private async deleteRoleBinding(namespace: string, name: string, owner: Record<string, string>): Promise<void> {
    try {
      const existing = await this.o.rbac.readNamespacedRoleBinding({ name, namespace });
      if (!isOurs(existing.metadata?.labels, owner)) return;
      await this.o.rbac.deleteNamespacedRoleBinding({ name, namespace, body: { preconditions: { uid: existing.metadata!.uid } } });
    } catch (err) {
      if (!isNotFound(err)) throw new Error(`deleting RoleBinding ${namespace}/${name}`, { cause: err });
    }
  }

  /** Deletes the ClusterRoleBindings made for this source that are no longer wanted. */
  private async deleteBindings(kind: 'Source' | 'ClusterSource', namespace: string, name: string, keep: Set<string>): Promise<void> {
    const list = await this.o.rbac.listClusterRoleBinding({ labelSelector: sourceOwnerSelector(kind, namespace, name) });
    for (const crb of list.items) {
      if (keep.has(crb.metadata!.name!)) continue;
      await this.o.rbac.deleteClusterRoleBinding({ name: crb.metadata!.name!, body: { preconditions: { uid: crb.metadata!.uid } } }).catch((err) => {
        if (!isNotFound(err)) throw err;
      });
    }
  }
}

/** Whether an existing object carries every owner label we would write. */
function isOurs(existing: Record<string, string> | undefined, ours: Record<string, string> | undefined): boolean {
  return Object.entries(ours ?? {}).every(([k, v]) => existing?.[k] === v);
}
