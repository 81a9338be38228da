import { formatQuantity } from './quantity.js';
import { parseList } from './resources.js';
import type { ClusterSummary } from './types.js';

/** The resources `kubectl admiralty status` shows. */
export const ROOM_RESOURCES = ['cpu', 'memory', 'pods'] as const;

/** Free room of a target as its ClusterSummary says, formatted as quantities. */
export interface SummaryRoom {
  /** The most any one real node that takes new pods (Ready, not cordoned) has free, per resource. */
  largestFree: Record<string, string>;
  /** The sum over those nodes (the summary's own `free`). */
  totalFree: Record<string, string>;
  /** Real nodes in the summary, and how many of them take new pods. */
  nodes: number;
  schedulableNodes: number;
}

/**
 * What an operator asks of a target first: the largest free room on one real node (the biggest
 * pod it could take now, resource by resource) and the free room in all. Each resource's largest
 * is judged alone: one node may have the most cpu and another the most memory. Nodes that take no
 * new pods do not count, as the summary's `free` leaves them out. Pure.
 */
export function summaryRoom(summary: ClusterSummary): SummaryRoom {
  const largest = new Map<string, bigint>(ROOM_RESOURCES.map((r) => [r, 0n]));
  const total = new Map<string, bigint>(ROOM_RESOURCES.map((r) => [r, 0n]));
  let nodes = 0;
  let schedulableNodes = 0;
  for (const pool of summary.nodePools ?? []) {
    for (const node of pool.nodes ?? []) {
      nodes++;
      if (node.notReady || node.unschedulable) continue;
      schedulableNodes++;
      const free = parseList(node.free);
      for (const r of ROOM_RESOURCES) {
        const amount = free.get(r) ?? 0n;
        if (amount > largest.get(r)!) largest.set(r, amount);
        total.set(r, total.get(r)! + amount);
      }
    }
  }
  // A summary written before node pools existed has its sums only.
  const sums = summary.nodePools === undefined ? parseList(summary.free) : total;
  const format = (m: Map<string, bigint>) => Object.fromEntries(ROOM_RESOURCES.map((r) => [r, formatQuantity(m.get(r) ?? 0n, r)]));
  return { largestFree: format(largest), totalFree: format(sums), nodes, schedulableNodes };
}
