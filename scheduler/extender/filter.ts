import { candidates, delegateSpecOf, isVirtual, rememberChoice, type ExtenderContext } from './context.js';
import { topologyOf } from './federation.js';
import { gangVerdict } from './gang-filter.js';
import { groupKey, podGroupNameOf } from '../../provider/model/pod-group.js';
import { judge, leftOut } from './judge.js';
import type { ExtenderArgs, ExtenderFilterResult, TopologyJudge } from './types.js';
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { TargetClient } from '../../provider/clusters/target-client.js';

/**
 * kube-scheduler's `filter` (see `createExtenderRoutes`).
 * `remember: false` (explain): rejections are not counted in `refusals`.
 */
export function filter(ctx: ExtenderContext, args: ExtenderArgs, remember = true): ExtenderFilterResult {
  const { opts, registry } = ctx;
  const pod = delegateSpecOf(args.Pod);
  const failed: Record<string, string> = {};
  const unresolvable: Record<string, string> = {};
  const kept = new Set<string>();
  const offered = candidates(args);
  const topology = topologyOf(ctx, args.Pod, pod);
  const gang = gangOf(ctx, args, pod, offered, topology, remember);
  for (const c of offered) {
    if (!isVirtual(ctx, c)) {
      kept.add(c.name);
      continue;
    }
    const target = registry.byNodeName(c.name);
    if (!target) {
      unresolvable[c.name] = `virtual node ${c.name} has no known target`;
      continue;
    }
    if (gang) {
      // The plan judged its target for this pod, and holds its room there: judging it again
      // would count that room as taken.
      if ('only' in gang && gang.only === c.name) kept.add(c.name);
      else failed[c.name] = 'error' in gang ? gang.error : `its pod group's plan puts this pod on ${gang.only}`;
      continue;
    }
    const held = heldFor(ctx, args.Pod, target.key);
    if (held) {
      failed[c.name] = held;
      continue;
    }
    const verdict = judge(ctx, args.Pod, pod, target, topology);
    if (verdict.kept) {
      kept.add(c.name);
      continue;
    }
    if (verdict.unresolvable) unresolvable[c.name] = verdict.reason;
    else failed[c.name] = verdict.reason;
    if (remember) opts.refusals?.record(target.key, 'filter', verdict.code, verdict.reason);
  }
  // One node left: kube-scheduler binds the pod there without asking prioritize.
  const [only, ...more] = kept;
  const onlyTarget = only !== undefined && more.length === 0 ? registry.byNodeName(only) : undefined;
  if (remember && onlyTarget) rememberChoice(ctx, args.Pod, onlyTarget.key);
  const result: ExtenderFilterResult = { FailedNodes: failed, FailedAndUnresolvableNodes: unresolvable, Error: '' };
  if (kept.size === 0 && Object.keys(failed).length + Object.keys(unresolvable).length > 0) {
    // Nothing left: answer with an error rather than a plain rejection. kube-scheduler parks a
    // pod that its plugins and we rejected until a node event its plugins care about (labels,
    // taints) or a 5-minute flush, but what changed our verdict (a target's summary, a refusal
    // that lapsed) is no node event; after an error it retries within its backoff (10 s at most).
    // The error is all the pod's condition and event then say: the targets kube-scheduler left
    // out are named too.
    // A gang's verdict is the same on every node: said once.
    const reasons = gang && 'error' in gang ? [gang.error] : Object.entries({ ...failed, ...unresolvable }).map(([node, why]) => `${node}: ${why}`);
    if (!gang) reasons.push(...leftOut(ctx, args.Pod, pod, new Set(offered.map((c) => c.name)), topology));
    result.Error = `no target can run this pod now (retried with backoff): ${reasons.join('; ')}`;
  }
  if (args.NodeNames) result.NodeNames = args.NodeNames.filter((n) => kept.has(n));
  if (args.Nodes) result.Nodes = { items: (args.Nodes.items ?? []).filter((n) => kept.has(n.metadata!.name!)) };
  return result;
}

/**
 * The gang verdict on the pod ({@link gangVerdict}), over the virtual nodes offered. `remember:
 * false` (explain): what it would be, with no plan adopted and nothing held.
 */
function gangOf(ctx: ExtenderContext, args: ExtenderArgs, pod: V1Pod, offered: readonly { name: string; node?: V1Node }[], topology: TopologyJudge | undefined, remember: boolean) {
  const gangs = ctx.opts.gangs;
  if (!gangs) return undefined;
  // The targets a waiting gang no longer tried, or whose pods are gone, held go back before any pod is judged.
  if (remember) gangs.plans.expire((namespace, name) => gangs.members(namespace, name).some((p) => !p.metadata?.deletionTimestamp && !p.spec?.nodeName));
  const targets = new Map<string, TargetClient>();
  for (const c of offered) {
    const target = isVirtual(ctx, c) ? ctx.registry.byNodeName(c.name) : undefined;
    if (target) targets.set(c.name, target);
  }
  return gangVerdict(ctx, args.Pod, pod, targets, topology, !remember);
}

/** Why a target is held off the pod by the gang that has waited longest for room there, if it is (see `GangPlans.hold`). */
function heldFor(ctx: ExtenderContext, pod: V1Pod, targetKey: string): string | undefined {
  const plans = ctx.opts.gangs?.plans;
  if (!plans) return undefined;
  const group = podGroupNameOf(pod);
  const hold = plans.heldFor(targetKey, group && groupKey(pod.metadata?.namespace ?? '', group), pod.spec?.priority ?? 0);
  return hold && `held for pod group ${hold.gang.namespace}/${hold.gang.name}, which has waited longest for room there (since ${new Date(hold.sinceMs).toISOString()})`;
}
