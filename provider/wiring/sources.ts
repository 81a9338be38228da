import { RbacAuthorizationV1Api, type KubernetesObject } from '@kubernetes/client-node';
import { leaderController } from '../controller/manager.js';
import type { ClusterSource, Source } from '../model/types.js';
import { SourcesReconciler } from '../reconcilers/sources.js';
import { CLUSTER_WIDE, type Wiring } from './wiring.js';
import { crdCache } from './caches.js';

/** Sources and ClusterSources (target side): the rights each source cluster is granted here. */
export function setupSources(wiring: Wiring): void {
  const { kc, core, events, manager } = wiring;
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  const sources = crdCache<Source & KubernetesObject>(wiring, 'sources');
  const clusterSources = crdCache<ClusterSource & KubernetesObject>(wiring, 'clustersources');
  const controller = wiring.newController('sources', new SourcesReconciler({ core, rbac, sources, clusterSources, events }), { shardOf: CLUSTER_WIDE });
  controller.watch(sources, (source) => [SourcesReconciler.keyOf(source, 'Source')]);
  controller.watch(clusterSources, (source) => [SourcesReconciler.keyOf(source, 'ClusterSource')]);
  manager.add(leaderController(controller, [sources, clusterSources]));
}
