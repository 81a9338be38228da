import type { V1Node } from '@kubernetes/client-node';
import { API_GROUP, API_VERSION, CLUSTER_SUMMARY_NAME, VIRTUAL_KUBELET_PROVIDER_LABEL } from '../core/keys.js';
import { stringMapEquals } from './maps.js';
import { formatQuantity, parseQuantity, resourceListEquals } from './quantity.js';
import type { ClusterSummary } from './types.js';

/**
 * The ClusterSummary `singleton` a cluster writes about itself, over its real nodes (every node
 * carrying `virtual-kubelet.io/provider`, whatever the value, is left out: its capacity is
 * another cluster's, and counting it would let chained clusters count capacity twice).
 *
 * * capacity / allocatable: per resource, the exact sum over the nodes (no Ready or cordon
 *   filter, as in Admiralty), written canonically ({@link formatQuantity}); quantities that do not
 *   parse are skipped;
 * * metadata.labels: the labels whose key has one single value on every node that carries it
 *   (a key with two values anywhere is dropped), sorted by key.
 *
 * Pure and deterministic (independent of node order); called by the summary reconciler.
 */
export function buildClusterSummary(nodes: V1Node[]): ClusterSummary {
  const real = nodes.filter((n) => n.metadata?.labels?.[VIRTUAL_KUBELET_PROVIDER_LABEL] === undefined);
  const labelValues = new Map<string, string | null>(); // null: conflicting values
  for (const node of real) {
    for (const [k, v] of Object.entries(node.metadata?.labels ?? {})) {
      const seen = labelValues.get(k);
      if (seen === undefined) labelValues.set(k, v);
      else if (seen !== v) labelValues.set(k, null);
    }
  }
  const labels: Record<string, string> = {};
  for (const k of [...labelValues.keys()].sort()) {
    const v = labelValues.get(k);
    if (v !== null && v !== undefined) labels[k] = v;
  }
  return {
    apiVersion: `${API_GROUP}/${API_VERSION}`,
    kind: 'ClusterSummary',
    metadata: { name: CLUSTER_SUMMARY_NAME, labels },
    capacity: sumResources(real.map((n) => n.status?.capacity)),
    allocatable: sumResources(real.map((n) => n.status?.allocatable)),
  };
}

function sumResources(lists: (Record<string, string> | undefined)[]): Record<string, string> {
  const sums = new Map<string, bigint>();
  for (const list of lists) {
    for (const [name, value] of Object.entries(list ?? {})) {
      let nano: bigint;
      try {
        nano = parseQuantity(value);
      } catch {
        continue; // the apiserver validates node quantities; a bad one must not poison the sum
      }
      sums.set(name, (sums.get(name) ?? 0n) + nano);
    }
  }
  const out: Record<string, string> = {};
  for (const name of [...sums.keys()].sort()) out[name] = formatQuantity(sums.get(name)!, name);
  return out;
}

/**
 * Whether two summaries say the same (labels, and capacity/allocatable by value, so `1Gi` equals
 * `1073741824`); the summary reconciler skips the write when true.
 */
export function summaryEquals(a: ClusterSummary | undefined, b: ClusterSummary | undefined): boolean {
  if (!a || !b) return a === b;
  return (
    stringMapEquals(a.metadata?.labels, b.metadata?.labels) &&
    resourceListEquals(a.capacity, b.capacity) &&
    resourceListEquals(a.allocatable, b.allocatable)
  );
}
