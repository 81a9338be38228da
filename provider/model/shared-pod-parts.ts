import type { V1Pod } from '@kubernetes/client-node';
import type { SubtreeTable } from '../controller/subtree-table.js';
import { PARENT_NAME_ANNOTATION, PARENT_UID_LABEL } from '../core/keys.js';

/** Of a pod's spec: parts that the pods of one workload repeat whole. */
const SPEC_PARTS = ['affinity', 'tolerations', 'nodeSelector', 'securityContext', 'topologySpreadConstraints', 'imagePullSecrets', 'readinessGates', 'dnsConfig', 'hostAliases', 'overhead', 'resources', 'os'] as const;
/** Of each container: the same. Not `volumeMounts`, which name the generated service-account volume. */
const CONTAINER_PARTS = ['command', 'args', 'env', 'envFrom', 'ports', 'resources', 'securityContext', 'livenessProbe', 'readinessProbe', 'startupProbe', 'lifecycle', 'resizePolicy'] as const;
/** Of each container status: its state and last state (a container ID or a start second in common with other pods, or empty). */
const CONTAINER_STATUS_PARTS = ['state', 'lastState'] as const;

/**
 * Gives the parts of `pod` that other cached pods are likely to repeat whole the copies `table`
 * holds (see {@link SubtreeTable}): the workload's labels and annotations (not a delegate's,
 * which name its proxy), scheduling constraints, security context and container resources,
 * each volume's source (the projected service-account token, a ConfigMap; not the volume, whose
 * name may be generated), finalizers and owners, conditions (which many pods reach in the same
 * second), the node's IPs, and the states of container statuses. Those parts are then frozen;
 * everything else of the pod stays its own. In place, on a pod owned by the caller (an
 * informer's, about to be cached); returns `pod`. The proxies and delegates informers call it.
 */
export function sharePodParts(pod: V1Pod, table: SubtreeTable): V1Pod {
  const metadata = pod.metadata;
  if (metadata) {
    shareFields(metadata, ['finalizers', 'ownerReferences'], table);
    // A delegate's labels and annotations name its proxy: they never repeat.
    if (isShareable(metadata.labels) && metadata.labels[PARENT_UID_LABEL] === undefined) metadata.labels = table.share(metadata.labels);
    if (isShareable(metadata.annotations) && metadata.annotations[PARENT_NAME_ANNOTATION] === undefined) metadata.annotations = table.share(metadata.annotations);
  }
  const spec = pod.spec;
  if (spec && !Object.isFrozen(spec)) {
    shareFields(spec, SPEC_PARTS, table);
    for (const volume of mutable(spec.volumes)) shareFields(volume, Object.keys(volume).filter((k) => k !== 'name'), table);
    for (const c of [...mutable(spec.containers), ...mutable(spec.initContainers)]) shareFields(c, CONTAINER_PARTS, table);
  }
  const status = pod.status;
  if (status && !Object.isFrozen(status)) {
    const conditions = status.conditions;
    if (Array.isArray(conditions) && !Object.isFrozen(conditions)) for (let i = 0; i < conditions.length; i++) if (isShareable(conditions[i])) conditions[i] = table.share(conditions[i]!);
    shareFields(status, ['hostIPs'], table);
    for (const s of [...mutable(status.containerStatuses), ...mutable(status.initContainerStatuses)]) shareFields(s, CONTAINER_STATUS_PARTS, table);
  }
  return pod;
}

/** Gives each of `fields` of `obj` that is not shared yet the table's copy. */
function shareFields(obj: object, fields: readonly string[], table: SubtreeTable): void {
  const parts = obj as Record<string, unknown>;
  for (const f of fields) if (isShareable(parts[f])) parts[f] = table.share(parts[f]);
}

/** An object or array not shared yet. */
function isShareable(v: unknown): v is object {
  return v !== null && typeof v === 'object' && !Object.isFrozen(v);
}

/** The items of `list` when it is an array that may still be written (not a shared one). */
function mutable<T>(list: T[] | undefined): T[] {
  return Array.isArray(list) && !Object.isFrozen(list) ? list.filter((x) => x !== null && typeof x === 'object' && !Object.isFrozen(x)) : [];
}
