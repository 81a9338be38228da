import type { V1Pod } from '@kubernetes/client-node';
import { isTerminal } from './resources.js';
import type { ClusterSummary } from './types.js';

/** A resourceVersion that can be ordered: a positive decimal integer without leading zeros. */
const COMPARABLE = /^[1-9][0-9]{0,39}$/;

/**
 * Orders two resourceVersions of objects of the same resource, as Kubernetes allows since 1.35
 * (comparable resource versions): -1, 0 or 1, or undefined when either is not a positive
 * decimal integer without leading zeros (an apiserver that does not promise the order, or
 * something else than an apiserver wrote it).
 */
export function compareResourceVersions(a: string | undefined, b: string | undefined): -1 | 0 | 1 | undefined {
  if (a === undefined || b === undefined || !COMPARABLE.test(a) || !COMPARABLE.test(b)) return undefined;
  if (a.length !== b.length) return a.length < b.length ? -1 : 1;
  return a === b ? 0 : a < b ? -1 : 1;
}

/**
 * Whether a target's ClusterSummary already counts this delegate against its node: the delegate
 * is bound and not finished, and the summary was computed from a pod cache that had seen this
 * version of it (its `podsResourceVersion` is at least the delegate's resourceVersion; a pod
 * enters the summary's cache when it is bound, and watches deliver a resource's changes in
 * resourceVersion order).
 *
 * Returns undefined when the summary cannot tell: written by a provider that does not record
 * `podsResourceVersion`, or versions that do not compare. Callers then fall back on time.
 */
export function summaryCounts(summary: Pick<ClusterSummary, 'podsResourceVersion'> | undefined, delegate: V1Pod): boolean | undefined {
  const order = compareResourceVersions(delegate.metadata?.resourceVersion, summary?.podsResourceVersion);
  if (order === undefined) return undefined;
  return order <= 0 && !!delegate.spec?.nodeName && !isTerminal(delegate);
}

/**
 * The proxies on a virtual node whose room in the target the target's summary already took
 * away: kube-scheduler subtracts every proxy bound to the node from what the node offers, so
 * these must be added back to the summary's `free`, and only these. A proxy whose delegate the
 * summary does not count yet (just placed, or the summary was read before) must not be: its room
 * is still in `free`, and kube-scheduler's own subtraction is what keeps it from being offered
 * twice.
 *
 * `delegateOf` finds a proxy's delegate in the target's cache; a proxy whose delegate is not
 * there is left out (offering too little for a moment is safe, offering too much is not). When
 * the summary cannot tell ({@link summaryCounts}), or no delegate cache is wired, the Running
 * proxies are taken instead (a Running proxy's delegate was bound some time ago).
 */
export function proxiesCountedBy(proxies: readonly V1Pod[], summary: Pick<ClusterSummary, 'podsResourceVersion'> | undefined, delegateOf?: (proxy: V1Pod) => V1Pod | undefined): V1Pod[] {
  const exact = delegateOf !== undefined && summary?.podsResourceVersion !== undefined;
  return proxies.filter((proxy) => {
    if (isTerminal(proxy)) return false;
    const running = proxy.status?.phase === 'Running';
    if (!exact) return running;
    const delegate = delegateOf(proxy);
    // Not in the target's cache (not yet, or no more): nothing says the summary counts it.
    if (!delegate) return false;
    return summaryCounts(summary, delegate) ?? running;
  });
}
