import type { V1Pod } from '@kubernetes/client-node';
import { PARENT_NAME_ANNOTATION, PARENT_UID_LABEL } from '../core/keys.js';

/**
 * Where shared parts come from: the informers' `SubtreeTable` (provider/controller/), which
 * returns the frozen copy it holds of a value of the same JSON, or the value itself. Declared
 * here so that this pure module depends on no machinery.
 */
export interface PartTable {
  share<T extends object>(value: T, previous?: unknown): T;
}

/** Of a pod's spec: parts that the pods of one workload repeat whole. */
const SPEC_PARTS = [
  'affinity',
  'tolerations',
  'nodeSelector',
  'securityContext',
  'topologySpreadConstraints',
  'imagePullSecrets',
  'readinessGates',
  'dnsConfig',
  'hostAliases',
  'overhead',
  'resources',
  'os',
] as const;
/** Of each container: the same. Not `volumeMounts`, which name the generated service-account volume. */
const CONTAINER_PARTS = ['command', 'args', 'env', 'envFrom', 'ports', 'resources', 'securityContext', 'livenessProbe', 'readinessProbe', 'startupProbe', 'lifecycle', 'resizePolicy'] as const;
/** Of each container status: its state and last state (a container ID or a start second in common with other pods, or empty). */
const CONTAINER_STATUS_PARTS = ['state', 'lastState'] as const;

/**
 * Gives the parts of `pod` that other cached pods are likely to repeat whole the copies `table`
 * holds (see {@link PartTable}): the workload's labels and annotations (not a delegate's,
 * which name its proxy), scheduling constraints, security context and container resources,
 * each volume's source (the projected service-account token, a ConfigMap; not the volume, whose
 * name may be generated), finalizers and owners, conditions (which many pods reach in the same
 * second), the node's IPs, and the states of container statuses. Those parts are then frozen;
 * everything else of the pod stays its own. In place, on a pod owned by the caller (an
 * informer's, about to be cached); returns `pod`. The proxies and delegates informers call it.
 *
 * `previous`, the version of the same pod cached until now, offers its parts for the same
 * places (the same field; in a list, the item at the same index): one equal to the new part is
 * taken as it is, without a lookup in the table.
 */
export function sharePodParts(pod: V1Pod, table: PartTable, previous?: V1Pod): V1Pod {
  const metadata = pod.metadata;
  if (metadata) {
    const before = previous?.metadata;
    shareFields(metadata, ['finalizers', 'ownerReferences'], table, before);
    // A delegate's labels and annotations name its proxy: they never repeat.
    if (isShareable(metadata.labels) && metadata.labels[PARENT_UID_LABEL] === undefined) metadata.labels = table.share(metadata.labels, before?.labels);
    if (isShareable(metadata.annotations) && metadata.annotations[PARENT_NAME_ANNOTATION] === undefined) metadata.annotations = table.share(metadata.annotations, before?.annotations);
  }
  const spec = pod.spec;
  if (spec && !Object.isFrozen(spec)) {
    const before = previous?.spec;
    shareFields(spec, SPEC_PARTS, table, before);
    forEachMutable(spec.volumes, before?.volumes, (volume, was) =>
      shareFields(
        volume,
        Object.keys(volume).filter((k) => k !== 'name'),
        table,
        was,
      ),
    );
    forEachMutable(spec.containers, before?.containers, (c, was) => shareFields(c, CONTAINER_PARTS, table, was));
    forEachMutable(spec.initContainers, before?.initContainers, (c, was) => shareFields(c, CONTAINER_PARTS, table, was));
  }
  const status = pod.status;
  if (status && !Object.isFrozen(status)) {
    const before = previous?.status;
    const conditions = status.conditions;
    if (Array.isArray(conditions) && !Object.isFrozen(conditions)) {
      const was = Array.isArray(before?.conditions) ? before.conditions : undefined;
      for (let i = 0; i < conditions.length; i++) if (isShareable(conditions[i])) conditions[i] = table.share(conditions[i]!, was?.[i]);
    }
    shareFields(status, ['hostIPs'], table, before);
    forEachMutable(status.containerStatuses, before?.containerStatuses, (s, was) => shareFields(s, CONTAINER_STATUS_PARTS, table, was));
    forEachMutable(status.initContainerStatuses, before?.initContainerStatuses, (s, was) => shareFields(s, CONTAINER_STATUS_PARTS, table, was));
  }
  return pod;
}

/** Gives each of `fields` of `obj` that is not shared yet the table's copy (or that of `previous`, the same object's version cached until now). */
function shareFields(obj: object, fields: readonly string[], table: PartTable, previous: object | undefined): void {
  const parts = obj as Record<string, unknown>;
  const was = previous as Record<string, unknown> | undefined;
  for (const f of fields) if (isShareable(parts[f])) parts[f] = table.share(parts[f], was?.[f]);
}

/** An object or array not shared yet. */
function isShareable(v: unknown): v is object {
  return v !== null && typeof v === 'object' && !Object.isFrozen(v);
}

/**
 * Calls `fn` with each item of `list` that may still be written (an object, in a list that is not
 * a shared one), and with the item at the same index of `previous` (the same list in the
 * version cached until now), if any.
 */
function forEachMutable<T>(list: T[] | undefined, previous: T[] | undefined, fn: (item: T & object, was: object | undefined) => void): void {
  if (!Array.isArray(list) || Object.isFrozen(list)) return;
  const was = Array.isArray(previous) ? previous : undefined;
  for (let i = 0; i < list.length; i++) {
    const item = list[i];
    if (item !== null && typeof item === 'object' && !Object.isFrozen(item)) {
      const before = was?.[i];
      fn(item, before !== null && typeof before === 'object' ? before : undefined);
    }
  }
}
