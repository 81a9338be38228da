import type { KubernetesListObject, KubernetesObject, V1Namespace, V1Node, V1Pod } from '@kubernetes/client-node';
import type { Informer } from '../controller/informer.js';
import { API_GROUP, API_VERSION, HAS_FINALIZER_LABEL, NAMESPACE_ENABLED_LABEL, NAMESPACE_ENABLED_VALUE, VIRTUAL_KUBELET_PROVIDER_LABEL, VIRTUAL_KUBELET_PROVIDER_VALUE } from '../core/keys.js';
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
 * sharePodParts). Indexed by whether its terms judge the pods placed after it.
 */
export function proxiesCache(w: Wiring, use: CacheUse = {}): Informer<V1Pod> {
  return w.manager.caches().informer<V1Pod>({
    name: 'proxies',
    resource: '/api/v1/pods',
    list: (page) => w.core.listPodForAllNamespaces(page),
    labelSelector: `${HAS_FINALIZER_LABEL}=true`,
    transform: proxyFields,
    share: sharePodParts,
    indexers: { [POD_AFFINITY_INDEX]: podAffinityIndex },
    ...use,
  });
}

/**
 * The opted-in namespaces only: the tenancy check needs no more, and a namespace whose label
 * goes away leaves the cache (a watch with a selector reports it as deleted).
 */
export function namespacesCache(w: Wiring, use: CacheUse = {}): Informer<V1Namespace> {
  return w.manager.caches().informer<V1Namespace>({
    name: 'namespaces',
    resource: '/api/v1/namespaces',
    list: (page) => w.core.listNamespace(page),
    labelSelector: `${NAMESPACE_ENABLED_LABEL}=${NAMESPACE_ENABLED_VALUE}`,
    ...use,
  });
}

/** The virtual nodes of this provider. */
export function virtualNodesCache(w: Wiring, use: CacheUse = {}): Informer<V1Node> {
  return w.manager.caches().informer<V1Node>({
    name: 'virtual-nodes',
    resource: '/api/v1/nodes',
    list: (page) => w.core.listNode(page),
    labelSelector: `${VIRTUAL_KUBELET_PROVIDER_LABEL}=${VIRTUAL_KUBELET_PROVIDER_VALUE}`,
    ...use,
  });
}

/** One of our CRDs, all namespaces: `targets`, `clustertargets`, `sources`, `clustersources`. */
export function crdCache<T extends KubernetesObject>(w: Wiring, plural: string, use: CacheUse = {}): Informer<T> {
  return w.manager.caches().informer<T>({
    name: plural,
    resource: `/apis/${API_GROUP}/${API_VERSION}/${plural}`,
    list: (page) => w.custom.listClusterCustomObject({ group: API_GROUP, version: API_VERSION, plural, ...page }) as Promise<KubernetesListObject<T>>,
    ...use,
  });
}
