import type { V1Pod } from '@kubernetes/client-node';
import type { ResourceAmounts } from '../provider/model/resources.js';
import { fitsTarget, type FitOptions } from './fit.js';
import type { FitNode } from './target-nodes.js';

/** A proxy on a virtual node that a pod may preempt: the real node its delegate is on, and what the delegate holds there (pod slot included). */
export interface PreemptionCandidate {
  proxy: V1Pod;
  node: string;
  requests: ResourceAmounts;
}

/** The proxies to preempt so that a pod fits on `node`, a real node of the virtual node's target. */
export interface NodeVictims {
  node: string;
  victims: V1Pod[];
}

const priorityOf = (pod: V1Pod): number => pod.spec?.priority ?? 0;

/**
 * The fewest proxies on a virtual node whose delegates, once gone, leave one real node of its
 * target where `pod` fits ({@link fitsTarget}, with `opts` as the filter gives them), or undefined
 * when none would. kube-scheduler chooses its victims on a virtual node by what the whole node
 * offers; which room frees up where is known only here: three victims, one on each of three
 * nodes, may still leave no node with room.
 *
 * Only candidates of lower priority than `pod` are taken, as kube-scheduler would. On each node,
 * all of them first; then, highest priority first (as kube-scheduler reprieves), each is kept if
 * the pod still fits without its room. The node that needs the fewest victims wins, then the one
 * whose highest victim priority is lowest, then the first by name. Freed room is the victims'
 * requests added to the node's free room: their host ports stay taken (a pod that needs a
 * victim's port is not offered that room).
 *
 * Pure.
 */
export function victimsOnOneNode(pod: V1Pod, nodes: readonly FitNode[], candidates: readonly PreemptionCandidate[], opts: FitOptions): NodeVictims | undefined {
  const priority = priorityOf(pod);
  const byNode = new Map<string, PreemptionCandidate[]>();
  for (const c of candidates) {
    if (priorityOf(c.proxy) >= priority || c.proxy.metadata?.deletionTimestamp) continue;
    const list = byNode.get(c.node);
    if (list) list.push(c);
    else byNode.set(c.node, [c]);
  }
  let best: { node: string; victims: PreemptionCandidate[]; top: number } | undefined;
  for (const node of nodes) {
    const here = byNode.get(node.name);
    if (!here) continue;
    // The node's free room with every victim's room added; a reprieve takes its room back out.
    // One fit test per candidate: a target could claim every delegate sits on one node.
    const free = new Map(node.free);
    const shift = (c: PreemptionCandidate, sign: bigint) => {
      for (const [r, amount] of c.requests) free.set(r, (free.get(r) ?? 0n) + sign * amount);
    };
    const fits = () => fitsTarget(pod, [{ ...node, free }], { ...opts, burst: undefined }).fits;
    for (const c of here) shift(c, 1n);
    if (!fits()) continue;
    const reprieved = new Set<PreemptionCandidate>();
    const reprieveOrder = [...here].sort((a, b) => priorityOf(b.proxy) - priorityOf(a.proxy) || name(a).localeCompare(name(b)));
    for (const c of reprieveOrder) {
      shift(c, -1n);
      if (fits()) reprieved.add(c);
      else shift(c, 1n);
    }
    const victims = here.filter((c) => !reprieved.has(c));
    // Room there already (kube-scheduler judged the whole node from an older view): nothing to preempt.
    if (victims.length === 0) continue;
    const top = victims.reduce((max, v) => Math.max(max, priorityOf(v.proxy)), -Infinity);
    if (!best || victims.length < best.victims.length || (victims.length === best.victims.length && top < best.top)) best = { node: node.name, victims, top };
  }
  return best && { node: best.node, victims: best.victims.map((v) => v.proxy) };
}

function name(c: PreemptionCandidate): string {
  return `${c.proxy.metadata?.namespace ?? ''}/${c.proxy.metadata?.name ?? ''}`;
}
