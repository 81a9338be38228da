import type { KubernetesObject, V1Pod } from '@kubernetes/client-node';
import { PARENT_CLUSTER_NAME_LABEL } from '../core/keys.js';
import { copyName } from './names.js';

/**
 * Kubernetes' gang scheduling API (1.36, alpha): a PodGroup in `scheduling.k8s.io/v1alpha2`
 * (feature gate `GenericWorkload`), named by a pod's `spec.schedulingGroup.podGroupName`. A
 * PodGroup with `spec.schedulingPolicy.gang.minCount` is placed all or nothing; its
 * `spec.schedulingConstraints.topology[0].key` (gate `TopologyAwareWorkloadScheduling`) keeps
 * all its pods in one domain of that node label.
 */
export const POD_GROUP_GROUP = 'scheduling.k8s.io';
export const POD_GROUP_VERSION = 'v1alpha2';
export const POD_GROUP_PLURAL = 'podgroups';

/**
 * The largest gang the extender plans: its plan walks each member against each target's nodes,
 * so the size of a group is bounded as every list of a pod is (a PodGroup of a million is
 * refused with that reason, not planned).
 */
export const MAX_GANG_SIZE = 1000;

/** The fields of a PodGroup we read and write. */
export interface PodGroupObject extends KubernetesObject {
  spec?: {
    schedulingPolicy?: { gang?: { minCount?: number }; basic?: Record<string, never> };
    schedulingConstraints?: { topology?: { key?: string }[] };
  };
}

/** A gang as the extender plans it: `minCount` pods at once, all in one domain of `topologyKey` when set. */
export interface Gang {
  namespace: string;
  name: string;
  minCount: number;
  topologyKey?: string;
}

/** The PodGroup a pod names (`spec.schedulingGroup.podGroupName`), if any. */
export function podGroupNameOf(pod: V1Pod): string | undefined {
  const group = (pod.spec as { schedulingGroup?: { podGroupName?: unknown } } | undefined)?.schedulingGroup;
  const name = group?.podGroupName;
  return typeof name === 'string' && name !== '' ? name : undefined;
}

/** `namespace/name` of a pod group: the key of its plan and of the proxies cache's index. */
export function groupKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/**
 * The gang a PodGroup asks for, or why it cannot be planned; undefined for a PodGroup that is no
 * gang (the basic policy: its pods are placed one by one, as today). Pure.
 */
export function gangOf(pg: PodGroupObject): { gang: Gang } | { invalid: string } | undefined {
  const namespace = pg.metadata?.namespace ?? '';
  const name = pg.metadata?.name ?? '';
  const gang = pg.spec?.schedulingPolicy?.gang;
  if (!gang) return undefined;
  const minCount = gang.minCount;
  if (typeof minCount !== 'number' || !Number.isInteger(minCount) || minCount < 1) return { invalid: `PodGroup ${namespace}/${name} has no valid spec.schedulingPolicy.gang.minCount` };
  if (minCount > MAX_GANG_SIZE) return { invalid: `PodGroup ${namespace}/${name} asks for a gang of ${minCount}: the extender plans gangs of at most ${MAX_GANG_SIZE} pods` };
  const key = pg.spec?.schedulingConstraints?.topology?.[0]?.key;
  return { gang: { namespace, name, minCount, ...(typeof key === 'string' && key !== '' ? { topologyKey: key } : {}) } };
}

/** The proxies cache's index by pod group (`namespace/name`): a gang's members are read from it. */
export const PROXIES_BY_GROUP_INDEX = 'by-group';

export function proxyGroupIndex(proxy: V1Pod): string[] {
  const name = podGroupNameOf(proxy);
  return name ? [groupKey(proxy.metadata?.namespace ?? '', name)] : [];
}

/**
 * The name of the PodGroup a source's delegates of one group form in a target: the source
 * group's name, with a hash of the source cluster's name and the group's (as copies are named),
 * so two sources' groups of one name never share one.
 */
export function targetPodGroupName(groupName: string, sourceClusterName: string): string {
  return copyName(groupName, sourceClusterName);
}

/**
 * The PodGroup our delegates of one gang form in a target: a gang of `minCount` (the members
 * planned there), so the target's scheduler places them all or none. Labelled as our delegates
 * are, so it is known for ours. Pure.
 */
export function targetPodGroup(name: string, namespace: string, minCount: number, sourceClusterName: string): PodGroupObject {
  return {
    apiVersion: `${POD_GROUP_GROUP}/${POD_GROUP_VERSION}`,
    kind: 'PodGroup',
    metadata: { name, namespace, labels: { [PARENT_CLUSTER_NAME_LABEL]: sourceClusterName } },
    spec: { schedulingPolicy: { gang: { minCount } } },
  };
}
