import type { V1Pod } from '@kubernetes/client-node';
import type { TargetClient } from '../../provider/clusters/target-client.js';
import { CLUSTER_TARGET_NAME_LABEL, TARGET_NAME_LABEL, TARGET_NAMESPACE_LABEL } from '../../provider/core/keys.js';
import { gangOf, groupKey, podGroupNameOf, type Gang, type PodGroupObject } from '../../provider/model/pod-group.js';
import { addInto, type ResourceAmounts } from '../../provider/model/resources.js';
import { delegateRequests } from '../bind.js';
import { likelyNode } from '../fit.js';
import { planGang, seatCount, type Domain, type GangMember, type GangPlans, type GangTarget } from '../gang.js';
import { assumedOn, delegateSpecOf, judgedAs, type ExtenderContext } from './context.js';
import { judge } from './judge.js';
import type { TargetState, TopologyJudge } from './types.js';

/** What the extender reads of gangs: the plans it shares with the binder, the source's PodGroups and their members. */
export interface GangSupport {
  plans: GangPlans;
  podGroup(namespace: string, name: string): PodGroupObject | undefined;
  /** The proxies that name the group (the proxies cache's `by-group` index). */
  members(namespace: string, name: string): readonly V1Pod[];
  delegateName(proxy: V1Pod): string;
}

/**
 * A topology key that names a target (a label every node of one virtual node's target has, and no
 * other's): a gang with it stays in one target.
 */
const TARGET_KEYS: ReadonlySet<string> = new Set([TARGET_NAME_LABEL, TARGET_NAMESPACE_LABEL, CLUSTER_TARGET_NAME_LABEL]);

/**
 * The most node checks one plan may make (members to seat times the nodes of the targets it
 * tries): a plan runs on the extender's event loop, and a gang of a thousand over a large
 * federation would hold it for seconds. Beyond, the gang is refused with that reason.
 */
export const MAX_PLAN_NODE_CHECKS = 2_000_000;

/** The filter's word on a gang's member: only its planned target's node, or an error for every node; undefined for a pod of no gang. */
export type GangVerdict = { only: string } | { error: string } | undefined;

/**
 * A fresh simulation of a target's nodes for a gang's plan, from what the filter counts there
 * now; `empty`: as if nothing ran there (every node's allocatable free), to tell a gang that
 * could fit once room frees from one that never could.
 */
function gangTarget(ctx: ExtenderContext, target: TargetClient, live: TargetState, empty = false): GangTarget {
  const state = empty ? { ...live, nodes: live.nodes.map((n) => ({ ...n, free: n.allocatable, usedPorts: undefined, heldByPriority: undefined })) } : live;
  const base = empty ? new Map<string, ResourceAmounts>() : assumedOn(ctx, target, state);
  const ports = empty ? new Map() : ctx.memory.assumedPortsOn(target.key);
  // A gang is planned on the room there is: not on what a preemption in the target would make.
  const fitAs = { ...judgedAs(target, state), priorityClassValues: undefined };
  return {
    key: target.key,
    name: target.displayName,
    seats(domain?: Domain) {
      const assumed = new Map<string, ResourceAmounts>([...base].map(([node, r]) => [node, new Map(r)]));
      const nodes = domain ? state.nodes.filter((n) => (n.labels[domain.key] ?? (domain.key === 'kubernetes.io/hostname' ? n.hostname : undefined)) === domain.value) : state.nodes;
      return (m: GangMember) => {
        const node = likelyNode(delegateSpecOf(m.proxy), nodes, { ...fitAs, assumed, assumedPorts: ports });
        if (node === undefined) return false;
        const on = assumed.get(node) ?? new Map<string, bigint>();
        addInto(on, delegateRequests(m.proxy, state.runtimeClasses));
        assumed.set(node, on);
        return true;
      };
    },
    *domainValues(key: string) {
      for (const n of state.nodes) {
        const v = n.labels[key] ?? (key === 'kubernetes.io/hostname' ? n.hostname : undefined);
        if (v !== undefined) yield v;
      }
    },
  };
}

/** The targets a gang's member may go to, as the filter judges them for it, with their state; and why the others may not. */
function candidateTargets(ctx: ExtenderContext, proxy: V1Pod, pod: V1Pod, offered: ReadonlyMap<string, TargetClient>, topology: TopologyJudge | undefined) {
  const targets: GangTarget[] = [];
  const states: [TargetClient, TargetState][] = [];
  const rejected: string[] = [];
  let nodes = 0;
  for (const target of new Set(offered.values())) {
    const verdict = judge(ctx, proxy, pod, target, topology);
    const state = verdict.kept ? ctx.opts.targetState(target.key) : undefined;
    if (!verdict.kept || !state) {
      rejected.push(`${target.displayName}: ${verdict.kept ? 'no summary' : verdict.reason}`);
      continue;
    }
    nodes += state.nodes.length;
    targets.push(gangTarget(ctx, target, state));
    states.push([target, state]);
  }
  return { targets, states, rejected, nodes };
}

/** Of the targets that would hold the whole gang empty, the one that seats the most of it now: the one a waiting gang kept in one target holds. */
function targetToHold(members: readonly GangMember[], need: number, live: readonly GangTarget[], empty: readonly GangTarget[]): string {
  let best: { key: string; seats: number } | undefined;
  for (const t of empty) {
    if (seatCount(t, members, need) < need) continue;
    const now = live.find((l) => l.key === t.key);
    const seats = now ? seatCount(now, members, need) : 0;
    if (!best || seats > best.seats) best = { key: t.key, seats };
  }
  return best!.key;
}

/** The group's members still to place, `proxy` first, and how many are bound already. */
function membersOf(support: GangSupport, proxy: V1Pod, namespace: string, name: string): { unbound: GangMember[]; bound: number } {
  const uid = proxy.metadata!.uid!;
  const live = (p: V1Pod) => !p.metadata?.deletionTimestamp && p.status?.phase !== 'Succeeded' && p.status?.phase !== 'Failed';
  const others = support.members(namespace, name).filter((p) => p.metadata?.uid !== uid && live(p));
  const bound = others.filter((p) => p.spec?.nodeName).length;
  const waiting = others.filter((p) => !p.spec?.nodeName).sort((a, b) => (a.metadata?.name ?? '').localeCompare(b.metadata?.name ?? ''));
  const unbound: GangMember[] = [];
  for (const p of [proxy, ...waiting]) {
    try {
      unbound.push({ uid: p.metadata!.uid!, proxy: p, delegateName: support.delegateName(p) });
    } catch {
      // A member whose delegate cannot be built is refused on its own filter, with its reason.
    }
  }
  return { unbound, bound };
}

/**
 * The filter's verdict on a pod of a gang (its PodGroup has `schedulingPolicy.gang`): the first
 * member filtered plans `minCount` less those bound, all at once, over the targets whose
 * virtual nodes kube-scheduler offered and the filter keeps for it ({@link planGang}), and takes
 * their room; each member then gets only its planned target's node. A gang that does not fit is
 * refused on every node, with what each target has room for. `offered` maps the offered
 * virtual nodes to their targets. `dryRun` (explain): what the filter would answer, with no plan
 * adopted, no wait counted and nothing held.
 */
export function gangVerdict(ctx: ExtenderContext, proxy: V1Pod, pod: V1Pod, offered: ReadonlyMap<string, TargetClient>, topology: TopologyJudge | undefined, dryRun = false): GangVerdict {
  const support = ctx.opts.gangs;
  const name = support && podGroupNameOf(proxy);
  const uid = proxy.metadata?.uid;
  if (!support || !name || !uid) return undefined;
  const namespace = proxy.metadata?.namespace ?? '';
  const pg = support.podGroup(namespace, name);
  if (!pg) return { error: `its PodGroup ${namespace}/${name} does not exist (yet)` };
  const parsed = gangOf(pg);
  if (!parsed) return undefined;
  if ('invalid' in parsed) return { error: parsed.invalid };
  const { gang } = parsed;
  const words = `pod group ${namespace}/${name} (minCount ${gang.minCount}${gang.topologyKey ? `, topology ${gang.topologyKey}` : ''})`;
  const nodeOf = (targetKey: string) => [...offered].find(([, t]) => t.key === targetKey)?.[0];
  const held = support.plans.current(groupKey(namespace, name));
  const mine = support.plans.assignmentOf(uid);
  if (held && mine) {
    const node = nodeOf(mine.targetKey);
    if (node) return { only: node };
    if (dryRun) return { error: `${words}: being placed; its plan puts this pod on a target whose virtual node is not offered` };
    support.plans.memberFailed(uid, `the proxy scheduler did not offer the virtual node of its planned target to ${proxy.metadata?.name}`);
  }
  const { unbound, bound } = membersOf(support, proxy, namespace, name);
  const need = gang.minCount - bound;
  if (need <= 0) return undefined;
  if (held && !held.failed) return { error: `${words}: being placed, and this pod is not in its plan; it is placed once the group is` };
  if (unbound.length < need) return { error: `${words}: ${bound + unbound.length} of its ${gang.minCount} pods exist; waiting for the rest` };
  const key = groupKey(namespace, name);
  const { targets, states, rejected, nodes } = candidateTargets(ctx, proxy, pod, offered, topology);
  if (2 * need * Math.max(nodes, 1) > MAX_PLAN_NODE_CHECKS) return { error: `${words}: too large to plan over ${nodes} nodes (at most ${MAX_PLAN_NODE_CHECKS} node checks a plan)` };
  const oneTarget = gang.topologyKey !== undefined && TARGET_KEYS.has(gang.topologyKey);
  const shape = { oneTarget, ...(gang.topologyKey !== undefined && !oneTarget ? { domainKey: gang.topologyKey } : {}) };
  const plan = planGang(unbound, need, targets, shape);
  const tell = (type: 'Normal' | 'Warning', reason: string, message: string) => {
    if (!dryRun && support.plans.news(key, `${reason} ${message}`))
      ctx.opts.events?.record({ kind: 'PodGroup', apiVersion: 'scheduling.k8s.io/v1alpha2', metadata: pg.metadata ?? {} }, type, reason, message);
  };
  if ('reason' in plan) {
    const verdict = waitVerdict(ctx, support, { gang, key, words, need, unbound, reason: plan.reason, rejected, states, targets, shape, proxy }, dryRun);
    tell('Warning', 'GangWaiting', verdict.error);
    return verdict;
  }
  if (!dryRun) support.plans.adopt(gang, plan, unbound);
  const names = new Map(states.map(([t]) => [t.key, t.displayName]));
  tell('Normal', 'GangPlanned', `placing ${need} pods at once: ${[...plan.shares].map(([k, n]) => `${n} in ${names.get(k) ?? k}`).join(', ')}`);
  const node = nodeOf(plan.assigned.get(uid) ?? '');
  return node ? { only: node } : { error: `${words}: placed without this pod; it is placed once the group is` };
}

/** What the filter says of a gang that does not fit now, and whether it holds its targets meanwhile (see `GangPlans.hold`). */
interface Wait {
  gang: Gang;
  key: string;
  words: string;
  need: number;
  unbound: GangMember[];
  reason: string;
  rejected: string[];
  states: [TargetClient, TargetState][];
  targets: GangTarget[];
  shape: { oneTarget: boolean; domainKey?: string };
  proxy: V1Pod;
}

function waitVerdict(ctx: ExtenderContext, support: GangSupport, w: Wait, dryRun: boolean): { error: string } {
  const { gang, key, need, unbound, states, targets, shape } = w;
  const why = `${w.words} needs room for ${need} pods at once: ${w.reason}${w.rejected.length ? `; ${w.rejected.join('; ')}` : ''}`;
  // A gang that would fit the targets empty waits for room; the one that waited longest holds
  // the targets it would take then, so that smaller pods do not take their room as it frees.
  const emptyTargets = states.map(([target, state]) => gangTarget(ctx, target, state, true));
  const empty = planGang(unbound, need, emptyTargets, shape);
  if ('reason' in empty) return { error: `${why}; it would not fit even if the targets ran nothing else` };
  const holdKeys = shape.oneTarget ? [targetToHold(unbound, need, targets, emptyTargets)] : [...empty.shares.keys()];
  if (dryRun || !support.plans.waited(key) || !support.plans.hold(gang, holdKeys, w.proxy.spec?.priority ?? 0)) return { error: why };
  const held = holdKeys.map((k) => states.find(([t]) => t.key === k)?.[0].displayName ?? k).join(', ');
  return { error: `${why}; as the gang that has waited longest, it holds ${held} against pods of no higher priority while it waits` };
}
