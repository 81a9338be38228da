import type { V1Pod } from '@kubernetes/client-node';

/**
 * The proxies cache's index by the node a proxy is bound to (its target's virtual node): what a
 * target's writers and the kubelet API read per target. Walking every proxy per target made
 * each probe round, and each metrics-server scrape of the virtual nodes, cost targets times
 * proxies.
 */
export const PROXIES_BY_NODE_INDEX = 'by-node';

export function proxyNodeIndex(proxy: V1Pod): string[] {
  const node = proxy.spec?.nodeName;
  return node ? [node] : [];
}
