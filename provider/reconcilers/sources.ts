import { CoreV1Api, RbacAuthorizationV1Api, type V1ClusterRoleBinding, type V1RoleBinding } from '@kubernetes/client-node';
import { isAlreadyExists, isNotFound } from '../core/errors.js';
import type { EventRecorder, InvolvedObject } from '../core/events.js';
import { API_GROUP, API_VERSION } from '../core/keys.js';
import { admiraltyBindingMismatch } from '../model/admiralty-binding.js';
import { admiraltyName } from '../model/names.js';
import { buildSourceObjects, sourceOwnerLabels, sourceOwnerSelector } from '../model/source.js';
import { equalNormalized } from '../model/normalize.js';
import type { ClusterSource, Source } from '../model/types.js';
import type { ObjectCache } from '../controller/object-cache.js';

/**
 * Target side of the user guide: for each Source (namespaced) or ClusterSource, makes the
 * ServiceAccount if missing and binds the source roles to it (and to `userName`). Namespaced
 * children are owned by the Source and garbage-collected with it; the ClusterRoleBindings of a
 * namespaced Source cannot be owned by it, so they are found by label and deleted here.
 *
 * Key: `Source/<ns>/<name>` or `ClusterSource/<name>`.
 */
export class SourcesReconciler {
  constructor(private readonly o: { core: CoreV1Api; rbac: RbacAuthorizationV1Api; sources: ObjectCache<Source>; clusterSources: ObjectCache<ClusterSource>; events: Pick<EventRecorder, 'record'> }) {}

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
      await this.o.core.createNamespacedServiceAccount({ namespace: objects.serviceAccount.metadata!.namespace!, body: objects.serviceAccount }).catch((err) => {
        // An existing ServiceAccount (ours or the user's) is kept as it is.
        if (!isAlreadyExists(err)) throw new Error('creating the ServiceAccount', { cause: err });
      });
    }
    const source: SourceRef = { kind, obj, involved: { kind, apiVersion: `${API_GROUP}/${API_VERSION}`, metadata: obj.metadata } };
    if (objects.roleBinding) await this.applyRoleBinding(objects.roleBinding, source);
    else if (kind === 'Source') await this.deleteRoleBinding(namespace, admiraltyName([{ value: 'admiralty-source', kind: 'constant' }, { value: name }]), sourceOwnerLabels(kind, namespace, name));
    for (const crb of objects.clusterRoleBindings) await this.applyClusterRoleBinding(crb, source);
    await this.deleteBindings(kind, namespace, name, new Set(objects.clusterRoleBindings.map((c) => c.metadata!.name!)));
  }

  private async applyRoleBinding(rb: V1RoleBinding, source: SourceRef): Promise<void> {
    const { name, namespace } = rb.metadata as { name: string; namespace: string };
    await this.applyBinding(`RoleBinding ${namespace}/${name}`, rb, source, {
      read: () => this.o.rbac.readNamespacedRoleBinding({ name, namespace }),
      delete: (uid) => this.o.rbac.deleteNamespacedRoleBinding({ name, namespace, body: { preconditions: { uid } } }),
      create: () => this.o.rbac.createNamespacedRoleBinding({ namespace, body: rb }),
    });
  }

  private async applyClusterRoleBinding(crb: V1ClusterRoleBinding, source: SourceRef): Promise<void> {
    const name = crb.metadata!.name!;
    await this.applyBinding(`ClusterRoleBinding ${name}`, crb, source, {
      read: () => this.o.rbac.readClusterRoleBinding({ name }),
      delete: (uid) => this.o.rbac.deleteClusterRoleBinding({ name, body: { preconditions: { uid } } }),
      create: () => this.o.rbac.createClusterRoleBinding({ body: crb }),
    });
  }

  /**
   * Makes the binding `wanted`: creates it, or replaces an existing one that is ours (labels) or
   * that Admiralty's source controller made for this same (Cluster)Source (it is left behind when
   * Admiralty is replaced by us, and has the name ours wants). roleRef is immutable, so replacing
   * is delete (with a UID precondition) then create. Anything else is refused, with a Warning
   * event on the (Cluster)Source that says why.
   */
  private async applyBinding(
    what: string,
    wanted: V1RoleBinding | V1ClusterRoleBinding,
    source: SourceRef,
    ops: { read(): Promise<V1RoleBinding | V1ClusterRoleBinding>; delete(uid: string | undefined): Promise<unknown>; create(): Promise<unknown> },
  ): Promise<void> {
    let existing: V1RoleBinding | V1ClusterRoleBinding | undefined;
    try {
      existing = await ops.read();
    } catch (err) {
      if (!isNotFound(err)) throw new Error(`reading ${what}`, { cause: err });
    }
    if (existing) {
      if (isOurs(existing.metadata?.labels, wanted.metadata?.labels)) {
        if (equalNormalized(existing.subjects, wanted.subjects) && equalNormalized(existing.roleRef, wanted.roleRef)) return;
      } else {
        const mismatch = admiraltyBindingMismatch(existing, wanted, { kind: source.kind, name: source.obj.metadata.name!, uid: source.obj.metadata.uid! });
        if (mismatch) {
          const message = `${what} exists and is neither ours nor the one Admiralty made for this ${source.kind}: ${mismatch}. Refusing to replace it; delete it if it is not needed (see docs/migration.md, "Migrating from Admiralty")`;
          this.o.events.record(source.involved, 'Warning', BINDING_CONFLICT_REASON, message);
          throw new Error(message);
        }
        this.o.events.record(source.involved, 'Normal', ADOPTED_ADMIRALTY_BINDING_REASON, `replacing ${what}, left by Admiralty for this ${source.kind}, with ours`);
      }
      // roleRef is immutable: replace the binding.
      await ops.delete(existing.metadata!.uid).catch((err) => {
        if (!isNotFound(err)) throw err;
      });
    }
    await ops.create().catch((err) => {
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

/** Event reasons on a (Cluster)Source (source reconciler writes; users read). */
export const ADOPTED_ADMIRALTY_BINDING_REASON = 'AdoptedAdmiraltyBinding';
export const BINDING_CONFLICT_REASON = 'BindingConflict';

interface SourceRef {
  kind: 'Source' | 'ClusterSource';
  obj: Source | ClusterSource;
  involved: InvolvedObject;
}

/** Whether an existing object carries every owner label we would write. */
function isOurs(existing: Record<string, string> | undefined, ours: Record<string, string> | undefined): boolean {
  return Object.entries(ours ?? {}).every(([k, v]) => existing?.[k] === v);
}
