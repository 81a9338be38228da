import type { V1ObjectMeta, V1Pod, V1PodSpec, V1PodStatus } from '@kubernetes/client-node';

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
