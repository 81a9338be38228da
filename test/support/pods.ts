import type { V1ObjectMeta, V1OwnerReference, V1Pod, V1PodCondition, V1PodSpec, V1PodStatus } from '@kubernetes/client-node';
import { ELECT_ANNOTATION, HAS_FINALIZER_LABEL, SOURCE_POD_MANIFEST_ANNOTATION } from '../../provider/core/keys.js';

export interface PodFixture extends Omit<V1ObjectMeta, 'name' | 'namespace'> {
  /** Default 'p'. */
  name?: string;
  /** Default 'default'. */
  namespace?: string;
  /** When given, the pod has a spec: no containers unless it says so. */
  spec?: Partial<V1PodSpec>;
  status?: V1PodStatus;
  /** With `apiVersion: v1` and `kind: Pod`, as the API server serves it. Default false. */
  typed?: boolean;
}

/**
 * A pod for tests. Its metadata holds only the fields given (a field given as undefined is left
 * out, so a test comparing whole objects sees no stray keys); spec and status only when given.
 */
export function pod(o: PodFixture = {}): V1Pod {
  const { spec, status, typed, ...meta } = o;
  const metadata = Object.fromEntries(Object.entries({ name: 'p', namespace: 'default', ...meta }).filter(([, v]) => v !== undefined)) as V1ObjectMeta;
  return {
    ...(typed ? { apiVersion: 'v1', kind: 'Pod' } : {}),
    metadata,
    ...(spec ? { spec: { containers: [], ...spec } } : {}),
    ...(status ? { status } : {}),
  };
}

/** The controller a {@link proxy} with `owner` has, unless it says otherwise. */
export const OWNER_REPLICA_SET: V1OwnerReference = { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-abc', uid: 'rs', controller: true };

export interface ProxyFixture extends PodFixture {
  /** Bound to this (virtual) node: `spec.nodeName`. */
  nodeName?: string;
  /** `status.phase`. */
  phase?: string;
  /** `status.conditions`. */
  conditions?: V1PodCondition[];
  /** Owned by {@link OWNER_REPLICA_SET}, with the fields given changed. */
  owner?: boolean | Partial<V1OwnerReference>;
  /** Being deleted: its `deletionTimestamp`. */
  deletedAt?: Date;
  /**
   * As the webhook leaves a proxy: the elect annotation, the source pod saved in its annotation
   * (`{}` unless given) and the has-finalizer label, under the annotations and labels given.
   */
  elected?: boolean | { sourcePod: V1Pod };
}

/**
 * A proxy for tests: a {@link pod} with the shorthands of {@link ProxyFixture}. As with `pod()`,
 * only what is given is there: `spec` once it has a node, `status` once it has a phase or conditions.
 */
export function proxy(o: ProxyFixture = {}): V1Pod {
  const { nodeName, phase, conditions, owner, deletedAt, elected, ...rest } = o;
  const marked = elected
    ? {
        annotations: { [ELECT_ANNOTATION]: '', [SOURCE_POD_MANIFEST_ANNOTATION]: elected === true ? '{}' : JSON.stringify(elected.sourcePod), ...rest.annotations },
        labels: { [HAS_FINALIZER_LABEL]: 'true', ...rest.labels },
      }
    : {};
  const spec = nodeName !== undefined ? { ...rest.spec, nodeName } : rest.spec;
  const status = phase !== undefined || conditions !== undefined ? { ...rest.status, ...(phase !== undefined ? { phase } : {}), ...(conditions ? { conditions } : {}) } : rest.status;
  return pod({
    ...rest,
    ...marked,
    ...(owner ? { ownerReferences: [{ ...OWNER_REPLICA_SET, ...(owner === true ? {} : owner) }] } : {}),
    ...(deletedAt ? { deletionTimestamp: deletedAt } : {}),
    spec,
    status,
  });
}
