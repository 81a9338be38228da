import { CustomObjectsApi, type V1Node } from '@kubernetes/client-node';
import { isAlreadyExists, isNotFound } from '../core/errors.js';
import { API_GROUP, API_VERSION, CLUSTER_SUMMARY_NAME } from '../core/keys.js';
import { buildClusterSummary, summaryEquals } from '../model/cluster-summary.js';
import type { ClusterSummary } from '../model/types.js';
import type { ObjectCache } from './object-cache.js';

/**
 * Writes this cluster's singleton ClusterSummary (sums of capacity and allocatable over its
 * real nodes, and the node labels with a single value), which sources read to build the
 * virtual node of this cluster. Runs in every cluster; one key, `singleton`, woken by any node
 * change and every minute.
 */
export class SummaryReconciler {
  static readonly KEY = CLUSTER_SUMMARY_NAME;

  constructor(private readonly o: { custom: CustomObjectsApi; nodes: ObjectCache<V1Node>; resyncMs?: number }) {}

  async reconcile(): Promise<{ requeueAfterMs?: number }> {
    const desired = buildClusterSummary(this.o.nodes.list());
    const api = { group: API_GROUP, version: API_VERSION, plural: 'clustersummaries' };
    let existing: ClusterSummary | undefined;
    try {
      existing = (await this.o.custom.getClusterCustomObject({ ...api, name: CLUSTER_SUMMARY_NAME })) as ClusterSummary;
    } catch (err) {
      if (!isNotFound(err)) throw new Error('reading the ClusterSummary', { cause: err });
    }
    if (!existing) {
      await this.o.custom.createClusterCustomObject({ ...api, body: { apiVersion: `${API_GROUP}/${API_VERSION}`, kind: 'ClusterSummary', ...desired } }).catch((err) => {
        if (!isAlreadyExists(err)) throw new Error('creating the ClusterSummary', { cause: err });
      });
    } else if (!summaryEquals(existing, desired)) {
      const body = {
        ...existing,
        metadata: { ...existing.metadata, labels: desired.metadata.labels },
        capacity: desired.capacity,
        allocatable: desired.allocatable,
      };
      await this.o.custom.replaceClusterCustomObject({ ...api, name: CLUSTER_SUMMARY_NAME, body });
    }
    return { requeueAfterMs: this.o.resyncMs ?? 60_000 };
  }
}
