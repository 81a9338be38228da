import type { V1Pod } from '@kubernetes/client-node';
import type { TargetClient } from '../../provider/clusters/target-client.js';
import { errorFields } from '../../provider/core/logger.js';
import { controllerOf } from '../../provider/model/outage.js';
import { formatQuantity } from '../../provider/model/quantity.js';
import type { ResourceAmounts } from '../../provider/model/resources.js';
import { fitsTarget } from '../fit.js';
import type { PolicyChoice } from '../placement-policy.js';
import type { PlacementPolicy } from '../score.js';
import type { FitNode } from '../target-nodes.js';
import { assumedOn, judgedAs, type ExtenderContext } from './context.js';
import type { FilterRefusal, TargetState, TopologyJudge } from './types.js';

/** The filter's verdict on one target (see `judge`). */
export type Judgement = { kept: true; why: () => string } | { kept: false; code: FilterRefusal; reason: string; unresolvable: boolean };

/** What each placement policy ranks by, in words. */
export const POLICY_WORDS: Record<PlacementPolicy['kind'], string> = {
  spread: 'the most free cpu (share of allocatable, after the pod) first',
  pack: 'the least free cpu first, to fill one target before the next',
  burst: 'the lowest spec.placement.priority first, then the most free cpu',
};

/** What a pass's score ranks by, in words. Pure. */
export function rankingWords(choice: PolicyChoice | undefined, weighted: boolean, preference: number | undefined): string {
  const policy = choice?.policy.kind ?? 'spread';
  const from = choice?.from === 'pod' ? "the pod's annotation" : choice?.from === 'namespace' ? "its namespace's annotation" : 'the default';
  const parts = [`${policy} (${from}): ${POLICY_WORDS[policy]}`];
  if (weighted && policy !== 'pack') parts.push('target weights first (the fewest of its group per weight)');
  if (preference !== undefined) parts.push(`ranked by the pod's preferences before the policy: ${preference} for this target`);
  return parts.join('; ');
}

/**
 * Why a kept target passed, in words: the filter's own count of the nodes that fit, and the
 * most cpu and memory left on one of them, less what is assumed there (binds in flight,
 * placements the summary does not show yet). Pure.
 */
function passWords(
  fit: { reason: string; fittingNodes: readonly string[]; byBurst?: boolean; byPreemption?: boolean },
  state: TargetState,
  target: string,
  assumed: ReadonlyMap<string, ResourceAmounts>,
): string {
  if (fit.byBurst || fit.byPreemption) return fit.reason;
  const fitting = new Set(fit.fittingNodes);
  const most = new Map<string, bigint>();
  for (const n of state.nodes) {
    if (!fitting.has(n.name)) continue;
    for (const r of ['cpu', 'memory']) {
      const free = (n.free.get(r) ?? 0n) - (assumed.get(n.name)?.get(r) ?? 0n);
      if (free > (most.get(r) ?? -1n)) most.set(r, free);
    }
  }
  const room = [...most].map(([r, v]) => `${r} ${formatQuantity(v > 0n ? v : 0n, r)}`).join(', ');
  return `fits on ${fit.fittingNodes.length} of ${state.nodes.length} node(s) of ${target}${room ? `; the most free on one of them: ${room}` : ''}`;
}

/**
 * The filter's verdict on one target for a pod: kept, or rejected with a reason (unresolvable
 * when evicting pods could not help). `pod` is the delegate's view ({@link delegateSpecOf}).
 */
export function judge(ctx: ExtenderContext, proxy: V1Pod, pod: V1Pod, target: TargetClient, topology?: TopologyJudge): Judgement {
  const { opts, logger, registry, clock, memory } = ctx;
  const namespace = proxy.metadata?.namespace ?? '';
  const reject = (code: FilterRefusal, reason: string, unresolvable = false) => ({ kept: false as const, code, reason, unresolvable });
  const health = registry.health(target.key);
  if (health && !health.ready) return reject('TargetNotReady', `target ${target.displayName} is not ready: ${health.reason}${health.message ? `: ${health.message}` : ''}`, true);
  const unauthorized = opts.authorization?.(target.key, namespace);
  if (unauthorized) return reject('NotAuthorized', unauthorized, true);
  let state: TargetState | undefined;
  try {
    state = opts.targetState(target.key);
  } catch (err) {
    logger.error('scheduler extender: reading target state failed', { cluster: target.displayName, ...errorFields(err) });
    return reject('SummaryUnreadable', `state of target ${target.displayName} is unavailable`);
  }
  if (!state) return reject('NoSummary', `no ClusterSummary of target ${target.displayName} was read yet`);
  const refusal = memory.refusal(proxy.metadata?.uid, target.key, clock.now());
  if (refusal) return reject('KeptOffAfterRefusal', `refused ${Math.round((clock.now() - refusal.atMs) / 1000)} s ago: ${refusal.reason}`);
  const owner = controllerOf(proxy);
  const avoided = owner && memory.avoidance(owner.uid, target.key, clock.now());
  if (avoided)
    return reject('AvoidedAfterReplacement', `avoided for the pods of ${owner.kind} ${owner.name} until ${new Date(avoided.untilMs).toISOString()}, after a re-placement: ${avoided.reason}`);
  const capacity = opts.targetPlacement?.(target.key)?.burstCapacity;
  const assumed = assumedOn(ctx, target, state);
  const fit = fitsTarget(pod, state.nodes, {
    ...judgedAs(target, state),
    assumed,
    // As of that walk: the host ports of the same binds in flight and placements.
    assumedPorts: memory.assumedPortsOn(target.key),
    burst: capacity && { capacity, waiting: () => opts.waitingRequests?.(target.key) ?? new Map() },
  });
  if (!fit.fits) return reject('NoNodeFits', fit.reason, fit.unresolvable);
  if (topology) {
    // Among the nodes that fit; a target taken by its burst capacity alone has its current
    // nodes stand for those a scale-up adds.
    const fitting = new Set(fit.fittingNodes);
    const verdict = topology(target.key, fit.byBurst ? state.nodes : state.nodes.filter((n) => fitting.has(n.name)));
    // Unresolvable: preempting proxies for room would not move the pods it counts.
    if (!verdict.fits) return reject('TopologyNotMet', `no node in ${target.displayName} fits: ${verdict.reason}`, true);
  }
  // The words of a pass are made only when explain asks for them.
  return { kept: true, why: () => passWords(fit, state, target.displayName, assumed) };
}

/**
 * Why each target the pod's namespace may use, whose virtual node kube-scheduler did not offer
 * (its own plugins rejected it: most often the room the whole node advertises), cannot take
 * the pod, in the filter's words; `offered` are the names it did offer.
 */
export function leftOut(ctx: ExtenderContext, proxy: V1Pod, pod: V1Pod, offered: ReadonlySet<string>, topology?: TopologyJudge): string[] {
  const { registry } = ctx;
  const namespace = proxy.metadata?.namespace ?? '';
  const out: string[] = [];
  for (const target of registry.list()) {
    const node = registry.nodeNameOf(target.key);
    if (!node || offered.has(node) || (target.ref.kind === 'Target' && target.ref.namespace !== namespace)) continue;
    const verdict = judge(ctx, proxy, pod, target, topology);
    out.push(
      `${node} (not offered by the proxy scheduler): ${verdict.kept ? "its own checks of the virtual node (its room in all, taints, readiness, the proxy's constraints) rejected it" : verdict.reason}`,
    );
  }
  return out;
}

/** The real nodes of a target that fit the pod now, as the filter judges them (binds in flight counted). */
export function fittingNodesOf(ctx: ExtenderContext, pod: V1Pod, target: TargetClient, state: TargetState, assumed: ReadonlyMap<string, ResourceAmounts>): readonly FitNode[] {
  const { memory } = ctx;
  const fit = fitsTarget(pod, state.nodes, { ...judgedAs(target, state), assumed, assumedPorts: memory.assumedPortsOn(target.key) });
  const names = new Set(fit.fittingNodes);
  return state.nodes.filter((n) => names.has(n.name));
}
