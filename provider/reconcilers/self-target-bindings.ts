import {
  PatchStrategy,
  setHeaderOptions,
  type AuthenticationV1Api,
  type AuthorizationV1Api,
  type RbacAuthorizationV1Api,
  type RbacV1Subject,
  type V1ClusterRoleBinding,
  type V1RoleBinding,
} from '@kubernetes/client-node';
import { classifyApiError, isAlreadyExists, isNotFound } from '../core/errors.js';
import { equalNormalized } from '../model/normalize.js';
import { buildSelfTargetBinding, holdSelfBindingPatch, releaseSelfBindingPatch, selfTargetBindingName, selfTargetOwnerLabels, subjectOfUser } from '../model/self-target-binding.js';
import type { TargetRef } from '../model/types.js';

export interface SelfTargetBindingsOptions {
  rbac: Pick<
    RbacAuthorizationV1Api,
    | 'readNamespacedRoleBinding'
    | 'createNamespacedRoleBinding'
    | 'patchNamespacedRoleBinding'
    | 'deleteNamespacedRoleBinding'
    | 'readClusterRoleBinding'
    | 'createClusterRoleBinding'
    | 'patchClusterRoleBinding'
    | 'deleteClusterRoleBinding'
  >;
  /** Asks who the provider is (SelfSubjectReview): no flag to keep in step with the ServiceAccount. */
  authentication: Pick<AuthenticationV1Api, 'createSelfSubjectReview'>;
  /** Asks what the provider may do (SelfSubjectAccessReview), to tell whether a binding is in force. */
  authorization: Pick<AuthorizationV1Api, 'createSelfSubjectAccessReview'>;
}

/**
 * Grants the provider the source role in its own cluster only while, and only where, a self
 * target needs it: called by the targets reconciler. A binding that exists under our name but
 * lacks our labels is someone else's and is never replaced or deleted.
 *
 * Our bindings carry a finalizer that only {@link remove} releases, so a binding deleted by
 * someone else (the namespace controller removes a namespace's bindings and Targets in any
 * order) keeps granting the role until the provider no longer acts with it.
 */
export class SelfTargetBindings {
  private subject?: RbacV1Subject;

  constructor(private readonly o: SelfTargetBindingsOptions) {}

  /**
   * Makes the binding of a self target exist as built (creating it, or replacing ours when its
   * subject changed: roleRef is immutable). Idempotent. Resolves true when it wrote something,
   * so the caller knows the authorizer may lag behind for a moment.
   */
  async ensure(ref: TargetRef, targetUid: string | undefined): Promise<boolean> {
    const desired = buildSelfTargetBinding(ref, targetUid, await this.whoAmI());
    const name = desired.object.metadata!.name!;
    const existing = await this.read(ref);
    if (existing) {
      if (!isOurs(existing, ref)) throw new Error(`${desired.kind} ${name} exists and is not ours; refusing to replace it`);
      if (equalNormalized(existing.subjects, desired.object.subjects) && equalNormalized(existing.roleRef, desired.object.roleRef)) {
        // One made before the finalizer existed gets it; the rights it grants do not change.
        const hold = holdSelfBindingPatch(existing.metadata ?? {});
        if (hold) await this.patch(ref, name, hold);
        return false;
      }
      await this.deleteExactly(ref, existing);
    }
    try {
      if (desired.kind === 'RoleBinding') await this.o.rbac.createNamespacedRoleBinding({ namespace: ref.namespace, body: desired.object });
      else await this.o.rbac.createClusterRoleBinding({ body: desired.object });
    } catch (err) {
      if (!isAlreadyExists(err)) throw new Error(`creating ${desired.kind} ${name}`, { cause: err });
    }
    return true;
  }

  /**
   * Deletes our binding of a target that is gone or no longer self (UID precondition) and
   * releases its finalizer; the caller has stopped every watch that used it. Idempotent. Where
   * the provider may not even read bindings (its self role is not installed: a source without
   * self targets), it cannot have made one: nothing to do.
   */
  async remove(ref: TargetRef): Promise<void> {
    const existing = await this.read(ref, true);
    if (existing && isOurs(existing, ref)) await this.deleteExactly(ref, existing);
  }

  /** Whether the provider may create pods where the target reaches, i.e. whether the binding is in force. */
  async allowed(ref: TargetRef): Promise<boolean> {
    const review = await this.o.authorization.createSelfSubjectAccessReview({
      body: {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SelfSubjectAccessReview',
        spec: { resourceAttributes: { verb: 'create', resource: 'pods', namespace: ref.kind === 'Target' ? ref.namespace : '' } },
      },
    });
    return review.status?.allowed === true;
  }

  private async whoAmI(): Promise<RbacV1Subject> {
    if (this.subject) return this.subject;
    const review = await this.o.authentication.createSelfSubjectReview({ body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' } });
    this.subject = subjectOfUser(review.status?.userInfo?.username ?? '');
    return this.subject;
  }

  private async read(ref: TargetRef, forbiddenIsNone = false): Promise<V1RoleBinding | V1ClusterRoleBinding | undefined> {
    const name = selfTargetBindingName(ref);
    try {
      return ref.kind === 'Target' ? await this.o.rbac.readNamespacedRoleBinding({ name, namespace: ref.namespace }) : await this.o.rbac.readClusterRoleBinding({ name });
    } catch (err) {
      if (isNotFound(err) || (forbiddenIsNone && classifyApiError(err) === 'Forbidden')) return undefined;
      throw new Error(`reading the binding ${name} of the self ${ref.kind}`, { cause: err });
    }
  }

  /** Deletes `existing` (unless it is being deleted already), then takes our finalizer off it. */
  private async deleteExactly(ref: TargetRef, existing: V1RoleBinding | V1ClusterRoleBinding): Promise<void> {
    const name = existing.metadata!.name!;
    if (!existing.metadata?.deletionTimestamp) {
      const body = { preconditions: { uid: existing.metadata!.uid } };
      try {
        if (ref.kind === 'Target') await this.o.rbac.deleteNamespacedRoleBinding({ name, namespace: ref.namespace, body });
        else await this.o.rbac.deleteClusterRoleBinding({ name, body });
      } catch (err) {
        if (isNotFound(err)) return;
        throw new Error(`deleting the binding ${name} of the self ${ref.kind}`, { cause: err });
      }
    }
    const release = releaseSelfBindingPatch(existing.metadata ?? {});
    if (release) await this.patch(ref, name, release);
  }

  /** Applies a JSON patch to our binding; gone already is fine. */
  private async patch(ref: TargetRef, name: string, body: object[]): Promise<void> {
    const opts = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);
    try {
      if (ref.kind === 'Target') await this.o.rbac.patchNamespacedRoleBinding({ name, namespace: ref.namespace, body }, opts);
      else await this.o.rbac.patchClusterRoleBinding({ name, body }, opts);
    } catch (err) {
      if (!isNotFound(err)) throw new Error(`patching the finalizer of the binding ${name} of the self ${ref.kind}`, { cause: err });
    }
  }
}

function isOurs(obj: V1RoleBinding | V1ClusterRoleBinding, ref: TargetRef): boolean {
  const labels = obj.metadata?.labels ?? {};
  return Object.entries(selfTargetOwnerLabels(ref)).every(([k, v]) => labels[k] === v);
}
