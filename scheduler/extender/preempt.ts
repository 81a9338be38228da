import { heldOnNode, isTerminal } from '../../provider/model/resources.js';
import { victimsOnOneNode, type PreemptionCandidate } from '../preempt.js';
import { assumedOn, delegateSpecOf, judgedAs, MAX_REMEMBERED_PODS, podKey, type ExtenderContext } from './context.js';
import type { ExtenderPreemptionArgs, ExtenderPreemptionResult, MetaVictims } from './types.js';

/**
 * How long after its victims' grace period a pod that preempted is not let preempt again (see
 * `preempt`): above the time from a victim's delegate gone to a summary of its target that no
 * longer counts it, read by this source (a second for the target to write, a probe period, 10 s,
 * to read it), with room for a loaded machine.
 */
export const PREEMPTION_SETTLE_MS = 30_000;

/**
 * kube-scheduler's `preempt`: for each candidate virtual node, the proxies whose delegates free
 * one real node for the pod ({@link victimsOnOneNode}); a virtual node where none would is left
 * out (kube-scheduler then preempts nothing there). Other nodes keep kube-scheduler's victims.
 */
export function preempt(ctx: ExtenderContext, args: ExtenderPreemptionArgs): ExtenderPreemptionResult {
  const { opts, logger, registry, clock, memory, isVirtualNodeName, preempted } = ctx;
  const out: Record<string, MetaVictims> = {};
  const proposed: Record<string, MetaVictims> = { ...args.NodeNameToMetaVictims };
  for (const [node, v] of Object.entries(args.NodeNameToVictims ?? {})) {
    proposed[node] = { Pods: v.Pods.map((p) => ({ UID: p.metadata?.uid ?? '' })), NumPDBViolations: v.NumPDBViolations ?? 0 };
  }
  const pod = delegateSpecOf(args.Pod);
  const namespace = args.Pod.metadata?.namespace ?? '';
  const uid = args.Pod.metadata?.uid ?? '';
  // kube-scheduler lets a nominated pod preempt again once its victims are gone, but the
  // target's summary still counts their delegates for a while: the same room would be freed
  // again, from other proxies. The room freed for this pod comes first.
  const settling = preempted.get(uid);
  if (settling !== undefined && settling > clock.now()) {
    logger.info('scheduler extender: no preemption: the last one for this pod is still settling', { pod: podKey(args.Pod), untilMs: settling });
  }
  let graceMs = 0;
  for (const [nodeName, victims] of Object.entries(proposed)) {
    if (!isVirtualNodeName(nodeName)) {
      out[nodeName] = victims;
      continue;
    }
    if (settling !== undefined && settling > clock.now()) continue;
    const target = registry.byNodeName(nodeName);
    const state = target && opts.targetState(target.key);
    if (!target || !state || !opts.proxiesOn || !opts.delegateOf) continue;
    const health = registry.health(target.key);
    if ((health && !health.ready) || opts.authorization?.(target.key, namespace) || memory.refusal(args.Pod.metadata?.uid, target.key, clock.now())) continue;
    const candidates: PreemptionCandidate[] = [];
    for (const proxy of opts.proxiesOn(nodeName)) {
      const delegate = opts.delegateOf(target.key, proxy);
      const node = delegate?.spec?.nodeName;
      // A finished pod holds no room, and kube-scheduler would not know it as a victim.
      if (!node || !proxy.metadata?.uid || isTerminal(proxy) || isTerminal(delegate)) continue;
      candidates.push({ proxy, node, requests: heldOnNode(delegate) });
    }
    const fitOptions = { ...judgedAs(target, state), assumed: assumedOn(ctx, target, state), assumedPorts: memory.assumedPortsOn(target.key) };
    const chosen = victimsOnOneNode(pod, state.nodes, candidates, fitOptions, opts.disruptionBudgets?.() ?? []);
    if (!chosen) {
      logger.info('scheduler extender: no preemption on a virtual node: no real node of its target would have room', { pod: podKey(args.Pod), node: nodeName, proposed: victims.Pods.length });
      continue;
    }
    out[nodeName] = { Pods: chosen.victims.map((v) => ({ UID: v.metadata!.uid! })), NumPDBViolations: chosen.violations };
    for (const v of chosen.victims) graceMs = Math.max(graceMs, (v.spec?.terminationGracePeriodSeconds ?? 30) * 1000);
    logger.info('scheduler extender: preemption on a virtual node', {
      pod: podKey(args.Pod),
      node: nodeName,
      cluster: target.displayName,
      realNode: chosen.node,
      victims: chosen.victims.map(podKey),
      budgetViolations: chosen.violations,
    });
  }
  if (uid && Object.keys(out).some(isVirtualNodeName)) {
    preempted.delete(uid);
    preempted.set(uid, clock.now() + graceMs + PREEMPTION_SETTLE_MS);
    while (preempted.size > MAX_REMEMBERED_PODS) preempted.delete(preempted.keys().next().value!);
  }
  return { NodeNameToMetaVictims: out };
}
