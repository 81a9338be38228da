/**
 * Federation topologies the sandbox can build, as the user guide draws them:
 * * `star`: c1 is the only source; it targets itself (`self: true`) and every other cluster,
 *   whose providers run the target-side parts only (summary, sources);
 * * `mesh`: every cluster is a source and targets every cluster, itself included;
 * * `hub`: every cluster but c1 is a source that targets c1 only (edge clusters bursting into a
 *   central one); c1 is a target only.
 * In `mesh` and `hub` every provider runs every component.
 */
export const TOPOLOGIES = ['star', 'mesh', 'hub'] as const;
export type Topology = (typeof TOPOLOGIES)[number];

/** The cluster of the `star` topology's source and of the `hub` topology's target. */
export const FIRST_CLUSTER = 'c1';

/** Who sends pods where: each source cluster with the clusters it has a Target for, itself (`self: true`) possibly among them. */
export interface TopologyLinks {
  sources: { cluster: string; targets: string[] }[];
}

/** The source and target links of `topology` over `clusters` (c1 first). Pure. */
export function topologyLinks(topology: Topology, clusters: readonly string[]): TopologyLinks {
  switch (topology) {
    case 'star':
      return { sources: [{ cluster: FIRST_CLUSTER, targets: [...clusters] }] };
    case 'mesh':
      return { sources: clusters.map((cluster) => ({ cluster, targets: [...clusters] })) };
    case 'hub':
      return { sources: clusters.filter((c) => c !== FIRST_CLUSTER).map((cluster) => ({ cluster, targets: [FIRST_CLUSTER] })) };
  }
}

/** Whether `cluster` sends pods in `topology` (its provider then runs every component, the proxy scheduler beside it). */
export function isSource(topology: Topology, clusters: readonly string[], cluster: string): boolean {
  return topologyLinks(topology, clusters).sources.some((s) => s.cluster === cluster);
}

/** The identity a source cluster's provider acts as in its targets: the ServiceAccount of its Source there, in namespace default. */
export function sourceUser(source: string): string {
  return `system:serviceaccount:default:${source}`;
}
