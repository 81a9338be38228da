import type { V1Pod } from '@kubernetes/client-node';
import type { TargetClient } from '../../provider/clusters/target-client.js';
import { delegateSpecOf, type ExtenderContext } from './context.js';
import { topologyOf } from './federation.js';
import { filter } from './filter.js';
import { judge, rankingWords } from './judge.js';
import { prioritize, type PrioritizeDetail } from './prioritize.js';
import type { TargetVerdict } from './types.js';

/**
 * `Extender.explain`: the filter and prioritize themselves, called as the proxy scheduler would
 * call them with every virtual node the pod's namespace may use: what explain says is what
 * placement does.
 */
export function explain(ctx: ExtenderContext, proxy: V1Pod): TargetVerdict[] {
  const { registry } = ctx;
  const namespace = proxy.metadata?.namespace ?? '';
  const usable: { target: TargetClient; node: string }[] = [];
  for (const target of registry.list()) {
    const node = registry.nodeNameOf(target.key);
    if (node && (target.ref.kind === 'ClusterTarget' || target.ref.namespace === namespace)) usable.push({ target, node });
  }
  if (usable.length === 0) return [];
  const filtered = filter(ctx, { Pod: proxy, NodeNames: usable.map((u) => u.node) }, false);
  const kept = filtered.NodeNames ?? [];
  const detail = { preference: new Map<string, number>(), weighted: false } as PrioritizeDetail;
  const scores = new Map(kept.length > 0 ? prioritize(ctx, { Pod: proxy, NodeNames: kept }, false, detail).map((h) => [h.Host, h.Score]) : []);
  // The words of each pass: the filter's own judgement again (it is pure), for its numbers.
  const pod = delegateSpecOf(proxy);
  const topology = topologyOf(ctx, proxy, pod);
  return usable.map(({ target, node }) => {
    const verdict: TargetVerdict = { targetKey: target.key, target: target.displayName, node, passes: kept.includes(node) };
    if (verdict.passes) {
      verdict.score = scores.get(node) ?? 0;
      const judged = judge(ctx, proxy, pod, target, topology);
      if (judged.kept) verdict.why = judged.why();
      verdict.ranking = rankingWords(detail.choice, detail.weighted, detail.preference.get(node));
    } else {
      const unresolvable = filtered.FailedAndUnresolvableNodes?.[node];
      verdict.reason = unresolvable ?? filtered.FailedNodes[node] ?? 'rejected';
      verdict.unresolvable = unresolvable !== undefined;
    }
    return verdict;
  });
}
