import type { KubernetesListObject, KubernetesObject, V1Namespace, V1Node, V1Pod } from '@kubernetes/client-node';
import type { TargetClient } from '../clusters/target-client.js';
import type { ClusterCaches } from '../controller/cluster-caches.js';
import type { Informer } from '../controller/informer.js';
import {
  API_GROUP,
  API_VERSION,
  HAS_FINALIZER_LABEL,
  PARENT_CLUSTER_NAME_LABEL,
  NAMESPACE_ENABLED_LABEL,
  NAMESPACE_ENABLED_VALUE,
  VIRTUAL_KUBELET_PROVIDER_LABEL,
  VIRTUAL_KUBELET_PROVIDER_VALUE,
} from '../core/keys.js';
import { delegateFields } from '../model/delegate-pod.js';
import { PROXIES_BY_NODE_INDEX, proxyNodeIndex } from '../model/proxy-index.js';
import { PROXIES_BY_GROUP_INDEX, proxyGroupIndex } from '../model/pod-group.js';
import { proxyFields } from '../model/proxy-status.js';
import { sharePodParts } from '../model/shared-pod-parts.js';
import { mayHavePodTerms, POD_AFFINITY_INDEX, POD_AFFINITY_INDEX_VALUE } from '../../scheduler/topology.js';
import type { Wiring } from './wiring.js';

/**
 * The caches of this cluster that more than one part reads. Each part asks for the ones it reads
 * (the manager's caches make each once, however many ask: see `ClusterCaches`); `everyReplica`
 * says that the part reads it on every replica, outside of a writer.
 */

/** Which parts read a cache on every replica. */
export interface CacheUse {
  everyReplica?: boolean;
}

/** The proxies whose own pod (anti-)affinity terms judge every pod placed after them (symmetry). */
const podAffinityIndex = (p: V1Pod) => (mayHavePodTerms(p) ? [POD_AFFINITY_INDEX_VALUE] : []);

/**
 * Our proxies (pods with our finalizer), all namespaces. The cache keeps no container statuses
 * nor IPs (delegation writes a proxy's status by patch and compares it by digest) and, of the
 * saved manifest, only its scheduling fields (see proxyFields); the parts it repeats of other
 * proxies and delegates (constraints, volume sources, conditions) are one shared copy (see
 * sharePodParts). Indexed by whether its terms judge the pods placed after it, by node, and by
 * pod group (a gang's members).
 */
export function proxiesCache(wiring: Wiring, use: CacheUse = {}): Informer<V1Pod> {
  return wiring.manager.caches().informer<V1Pod>({
    name: 'proxies',
    resource: '/api/v1/pods',
    list: (page) => wiring.core.listPodForAllNamespaces(page),
    labelSelector: `${HAS_FINALIZER_LABEL}=true`,
    transform: proxyFields,
    share: sharePodParts,
    indexers: { [POD_AFFINITY_INDEX]: podAffinityIndex, [PROXIES_BY_NODE_INDEX]: proxyNodeIndex, [PROXIES_BY_GROUP_INDEX]: proxyGroupIndex },
    ...use,
  });
}

/** The proxies bound to a node, from the proxies cache's index (see {@link proxiesCache}). */
export function proxiesOnNode(proxies: Pick<Informer<V1Pod>, 'byIndex'>): (nodeName: string) => V1Pod[] {
  return (nodeName) => proxies.byIndex(PROXIES_BY_NODE_INDEX, nodeName);
}

/**
 * The opted-in namespaces only: the tenancy check needs no more, and a namespace whose label
 * goes away leaves the cache (a watch with a selector reports it as deleted).
 */
export function namespacesCache(wiring: Wiring, use: CacheUse = {}): Informer<V1Namespace> {
  return wiring.manager.caches().informer<V1Namespace>({
    name: 'namespaces',
    resource: '/api/v1/namespaces',
    list: (page) => wiring.core.listNamespace(page),
    labelSelector: `${NAMESPACE_ENABLED_LABEL}=${NAMESPACE_ENABLED_VALUE}`,
    ...use,
  });
}

/** The virtual nodes of this provider. */
export function virtualNodesCache(wiring: Wiring, use: CacheUse = {}): Informer<V1Node> {
  return wiring.manager.caches().informer<V1Node>({
    name: 'virtual-nodes',
    resource: '/api/v1/nodes',
    list: (page) => wiring.core.listNode(page),
    labelSelector: `${VIRTUAL_KUBELET_PROVIDER_LABEL}=${VIRTUAL_KUBELET_PROVIDER_VALUE}`,
    ...use,
  });
}

/** One of our CRDs, all namespaces: `targets`, `clustertargets`, `sources`, `clustersources`. */
export function crdCache<T extends KubernetesObject>(wiring: Wiring, plural: string, use: CacheUse = {}): Informer<T> {
  return wiring.manager.caches().informer<T>({
    name: plural,
    resource: `/apis/${API_GROUP}/${API_VERSION}/${plural}`,
    list: (page) => wiring.custom.listClusterCustomObject({ group: API_GROUP, version: API_VERSION, plural, ...page }) as Promise<KubernetesListObject<T>>,
    ...use,
  });
}

/**
 * Where a target's caches list: a Target's Source grants rights in the Target's namespace only,
 * a ClusterTarget's everywhere. `namespace` is undefined for a ClusterTarget.
 */
export function targetScope(target: TargetClient): { namespace: string | undefined; path: (resource: string) => string } {
  const namespace = target.ref.kind === 'Target' ? target.ref.namespace : undefined;
  return { namespace, path: (resource) => (namespace ? `/api/v1/namespaces/${namespace}/${resource}` : `/api/v1/${resource}`) };
}

/** The label our delegates and copies carry in a target: the name of this (their source) cluster. */
export const ownedBy = (sourceClusterName: string) => `${PARENT_CLUSTER_NAME_LABEL}=${sourceClusterName}`;

/**
 * Our delegates in a target (one of the target's caches, see `Manager.onEngage`): delegation,
 * the binder, the extender and the virtual nodes read it. Those who look delegates up by their
 * proxy add that index (`indexers`).
 */
export function delegatesCache(caches: ClusterCaches, target: TargetClient, sourceClusterName: string, indexers?: Record<string, (p: V1Pod) => string[]>): Informer<V1Pod> {
  const { namespace, path } = targetScope(target);
  return caches.informer<V1Pod>({
    name: 'delegates',
    resource: path('pods'),
    list: (page) => (namespace ? target.core.listNamespacedPod({ namespace, ...page }) : target.core.listPodForAllNamespaces(page)),
    labelSelector: ownedBy(sourceClusterName),
    transform: delegateFields,
    share: sharePodParts,
    indexers,
  });
}
