import type { V1Namespace, V1Node, V1Pod, V1PodDisruptionBudget } from '@kubernetes/client-node';
import { Histogram, Registry } from 'prom-client';
import type { ClusterRegistry } from '../provider/clusters/cluster-registry.js';
import type { TargetClient } from '../provider/clusters/target-client.js';
import { realClock, type Clock } from '../provider/core/clock.js';
import { VIRTUAL_KUBELET_PROVIDER_LABEL, VIRTUAL_KUBELET_PROVIDER_VALUE } from '../provider/core/keys.js';
import type { EventRecorder } from '../provider/core/events.js';
import { json, text, type Answer, type Route, type RouteCall } from '../provider/core/http-router.js';
import { errorFields, type Logger } from '../provider/core/logger.js';
import { parseUntrustedJson } from '../provider/core/untrusted-json.js';
import type { ExtenderBindingArgs, ExtenderBindingResult } from './bind.js';
import { fitsTarget, likelyNode, schedulingPod } from './fit.js';
import type { RuntimeClasses } from './target-classes.js';
import type { TargetPriorityClasses } from './preemption.js';
import { PlacementMemory } from './placement-memory.js';
import type { RefusalLog } from './refusal-log.js';
import { placementGroup, placementPolicyOf, type PolicyChoice } from './placement-policy.js';
import { formatQuantity } from '../provider/model/quantity.js';
import { controllerOf } from '../provider/model/outage.js';
import type { TargetPlacement } from '../provider/model/target.js';
import { heldOnNode, isTerminal, type ResourceAmounts } from '../provider/model/resources.js';
import { targetIdentityLabels } from '../provider/model/virtual-node.js';
import { victimsOnOneNode, type PreemptionCandidate } from './preempt.js';
import { podPreferences, preferenceScore } from './preference.js';
import { matchesNodeSelectorAndAffinity } from './node-match.js';
import {
  hasRequiredTopology,
  mayHavePodTerms,
  podTerms,
  podTopology,
  softTopologyScores,
  topologyFilter,
  unconstrainedTopology,
  type PlacedPod,
  type PodTerms,
  type PodTopology,
  type TopologyTarget,
  type TopologyVerdict,
} from './topology.js';
import { MAX_SCORE, rankTargets, weightsDiffer, type PlacementPolicy, type ScoredTarget } from './score.js';
import type { FitNode } from './target-nodes.js';

/** URL prefix of the extender (the `urlPrefix` of kube-scheduler's extender config ends with it). */
export const EXTENDER_PATH_PREFIX = '/scheduler';
/** `filterVerb: filter`. */
export const FILTER_PATH = `${EXTENDER_PATH_PREFIX}/filter`;
/** `prioritizeVerb: prioritize`. */
export const PRIORITIZE_PATH = `${EXTENDER_PATH_PREFIX}/prioritize`;
/** `bindVerb: bind`. */
export const BIND_PATH = `${EXTENDER_PATH_PREFIX}/bind`;
/** `preemptVerb: preempt`. */
export const PREEMPT_PATH = `${EXTENDER_PATH_PREFIX}/preempt`;

/**
 * How long the target prioritize ranked first counts as a pod's placement for weights: above
 * the time from kube-scheduler's choice to the end of its bind (at most the delegate placement
 * timeout, 20 s by default), after which the binder or the proxies cache say where it went.
 */
export const CHOSEN_TTL_MS = 30_000;
/** Pods remembered at most for {@link CHOSEN_TTL_MS} and for warnings. */
const MAX_REMEMBERED_PODS = 10_000;

/**
 * Most structural JSON tokens (`[`, `{`, `,`: see `UntrustedJsonLimits`) in an extender call.
 * Only the proxy scheduler reaches the parse (its client certificate is checked before the
 * body is read), so this is a backstop, sized for the 64 MiB body limit: Nodes with 20 labels
 * and 50 images have one token per 24 bytes, about 2.8 M in 64 MiB; 8 Mi leave room for
 * denser ones, and hold what 64 MiB could make `JSON.parse` build (43 M `[],`) to a fifth.
 */
export const EXTENDER_MAX_JSON_TOKENS = 8 * 2 ** 20;

/**
 * How long after its victims' grace period a pod that preempted is not let preempt again (see
 * `preempt`): above the time from a victim's delegate gone to a summary of its target that no
 * longer counts it, read by this source (a second for the target to write, a probe period, 10 s,
 * to read it), with room for a loaded machine.
 */
export const PREEMPTION_SETTLE_MS = 30_000;

/** Upstream `MaxExtenderPriority` (k8s.io/kube-scheduler/extender/v1): extender scores are 0..10. */
export const MAX_EXTENDER_PRIORITY = MAX_SCORE;

/**
 * What the extender knows of one target: the nodes of its last ClusterSummary (read from the
 * target by the targets reconciler; never a live call here, kube-scheduler waits on every answer).
 */
export interface TargetState {
  nodes: readonly FitNode[];
  /** When that summary was read (ms since the epoch), to tell which assumptions it covers. */
  readAtMs: number;
  /** The pod version that summary accounts for (`ClusterSummary.podsResourceVersion`), when it says. */
  podsResourceVersion?: string;
  /** The target's RuntimeClasses, when its summary publishes them (`runtimeClassesOfSummary`). */
  runtimeClasses?: RuntimeClasses;
  /** The names of its PriorityClasses, when its summary publishes them (`priorityClassesOfSummary`). */
  priorityClasses?: ReadonlySet<string>;
  /** Its PriorityClasses with their values, when its summary publishes them (`priorityClassValuesOfSummary`): preemption there is judged. */
  priorityClassValues?: TargetPriorityClasses;
}

/** Returns the cached state of a target by target key, or undefined while none was read. */
export type TargetStateSource = (targetKey: string) => TargetState | undefined;

export interface ExtenderRoutesOptions {
  /** Maps virtual node names to targets (`byNodeName`) and back (`nodeNameOf`), lists them (`list`) and reports their health (`health`). */
  registry: Pick<ClusterRegistry, 'byNodeName' | 'health' | 'list' | 'nodeNameOf'>;
  targetState: TargetStateSource;
  /**
   * The default placement policy, for pods whose annotation and namespace name none (or an
   * invalid one), or a function read on every prioritize call.
   */
  policy: PlacementPolicy | (() => PlacementPolicy);
  /** A target's `spec.placement` by target key; default weight 1, priority 0, no burst capacity. */
  targetPlacement?: (targetKey: string) => TargetPlacement | undefined;
  /**
   * What this source has waiting without a node in a target (`waitingRequests` of fit.ts), read by
   * filter for a target with burst capacity that no current node fits; default nothing.
   */
  waitingRequests?: (targetKey: string) => ResourceAmounts;
  /** A delegate in a target's cache, to tell which placements the target's summary counts already. */
  delegate?: (targetKey: string, namespace: string, name: string) => V1Pod | undefined;
  /**
   * The proxies bound to a virtual node, and a proxy's delegate in a target's cache: what
   * `preempt` weighs. Without both, `preempt` lets kube-scheduler preempt nothing.
   */
  proxiesOn?: (nodeName: string) => readonly V1Pod[];
  delegateOf?: (targetKey: string, proxy: V1Pod) => V1Pod | undefined;
  /** The source's PodDisruptionBudgets: `preempt` spares the proxies they protect first, and counts those it cannot. */
  disruptionBudgets?: () => readonly V1PodDisruptionBudget[];
  /** A source namespace (for its placement-policy annotation), if known. */
  namespace?: (name: string) => V1Namespace | undefined;
  /**
   * The other pods of a pod's placement group ({@link placementGroup}) that are bound to a
   * target or being bound there: pod UID to target key. Read for weights only.
   */
  groupPlacements?: (pod: V1Pod) => ReadonlyMap<string, string>;
  /**
   * Why a target's cluster does not let the pods of a namespace be placed there (no Source for
   * our identity in it, nor a ClusterSource), or undefined when it does or nobody knows: answers
   * cached by the provider (`TargetAuthorization`), never a call to the target.
   */
  authorization?: (targetKey: string, namespace: string) => string | undefined;
  /**
   * The labels of a target's virtual node (`virtualNodeLabels` of its summary and spec), by target
   * key, for prioritize to judge the proxy's own preferred node affinity against when the call
   * carries node names only (`nodeCacheCapable: true`); default its identity labels
   * (`targetIdentityLabels`).
   */
  virtualNodeLabels?: (targetKey: string) => Readonly<Record<string, string>> | undefined;
  /**
   * The proxies of a namespace (all namespaces when undefined) that are bound to a virtual node
   * or being bound by the binder, each with its target: the pods that topology spread and pod
   * (anti)-affinity count (`topologyFilter`). Without it, those count only the pods the extender
   * itself just ranked.
   */
  placedProxies?: (namespace: string | undefined) => readonly { proxy: V1Pod; targetKey: string }[];
  /**
   * The proxies of every namespace, bound or being bound, that may have pod (anti-)affinity terms
   * (`mayHavePodTerms`; an index of the proxies cache): the pods whose own terms judge every pod
   * placed after them (symmetry, `PlacedPod.terms`). Without it, only the pods `placedProxies`
   * lists for the pod's own topology, and those prioritize just ranked, do.
   */
  affineProxies?: () => readonly { proxy: V1Pod; targetKey: string }[];
  /** Where a Warning event goes when a pod's placement-policy annotation is unusable. */
  events?: Pick<EventRecorder, 'record'>;
  logger: Logger;
  /** Refusals and assumptions shared with the binder; default a fresh one. */
  memory?: PlacementMemory;
  /**
   * Where each virtual node the filter rejects for a pod is counted, with the reason's name
   * (see {@link FilterRefusal}), for `kubectl admiralty status`; explain's evaluations are not
   * counted.
   */
  refusals?: Pick<RefusalLog, 'record'>;
  /** Serves `bind` when given (see {@link Binder}); without it, `bind` answers 404. */
  binder?: { bind(args: ExtenderBindingArgs): Promise<ExtenderBindingResult> };
  clock?: Clock;
  /** Where the request histogram is registered; default a fresh registry owned by these routes. */
  metricsRegistry?: Registry;
  /** Largest accepted body in bytes; default 64 MiB (without `nodeCacheCapable`, every Node is sent on every call). */
  maxBodyBytes?: number;
  /**
   * Whether a node known only by name (kube-scheduler sends names when `nodeCacheCapable: true`)
   * is one of our virtual nodes. Default: the registry knows it, or its name has the virtual
   * node name form `admiralty-namespace-*` / `admiralty-cluster-*` (so a virtual node whose
   * Target was just deleted is still judged, and rejected, rather than passed through).
   */
  isVirtualNodeName?: (nodeName: string) => boolean;
}

/** `ExtenderArgs` of k8s.io/kube-scheduler/extender/v1 (Go field names, no JSON tags). */
export interface ExtenderArgs {
  Pod: V1Pod;
  Nodes?: { items: V1Node[] | null } | null;
  NodeNames?: string[] | null;
}

/** `ExtenderFilterResult`: nodes kept (in the form they came in) and nodes rejected with a reason. */
export interface ExtenderFilterResult {
  Nodes?: { items: V1Node[] } | null;
  NodeNames?: string[] | null;
  FailedNodes: Record<string, string>;
  FailedAndUnresolvableNodes?: Record<string, string>;
  Error: string;
}

/** `MetaVictims`: the pods (by UID) to preempt on one node. */
export interface MetaVictims {
  Pods: { UID: string }[];
  NumPDBViolations: number;
}

/** `ExtenderPreemptionArgs`: kube-scheduler's victims on each candidate node (UIDs only with `nodeCacheCapable`, else whole pods). */
export interface ExtenderPreemptionArgs {
  Pod: V1Pod;
  NodeNameToVictims?: Record<string, { Pods: V1Pod[]; NumPDBViolations?: number }> | null;
  NodeNameToMetaVictims?: Record<string, MetaVictims> | null;
}

/** `ExtenderPreemptionResult`: the nodes kept as candidates, each with the victims to preempt there. */
export interface ExtenderPreemptionResult {
  NodeNameToMetaVictims: Record<string, MetaVictims>;
}

/** One entry of `HostPriorityList`. */
export interface HostPriority {
  Host: string;
  Score: number;
}

/** A pod prioritize ranked first alone: by what topology and weights count it, until its bind shows. */
interface Chosen {
  group: string;
  targetKey: string;
  atMs: number;
  /** Its namespace and labels, not the pod: topology counts it by those. */
  namespace: string;
  labels: Readonly<Record<string, string>>;
  /** Its own pod (anti-)affinity terms, when it has some. */
  terms?: PodTerms;
}

/** The topology verdict on one target of the pod being filtered (`topologyFilter`). */
type TopologyJudge = (targetKey: string, nodes: readonly FitNode[]) => TopologyVerdict;

/** Thrown by {@link parseExtenderArgs}; answered with HTTP 400 and this message. */
export class MalformedExtenderArgsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MalformedExtenderArgsError';
  }
}

/**
 * The kube-scheduler extender's routes, for `createRouter`, with absolute paths: the provider
 * serves them on the webhook's server, behind the extender's client guard:
 *
 * * `POST /scheduler/filter`: `ExtenderArgs` in, `ExtenderFilterResult` out, in the form the
 *   nodes came in (`NodeNames` for `nodeCacheCapable: true`, else `Nodes`). Only our virtual nodes
 *   are judged, every other node is kept untouched. A virtual node is rejected when its target
 *   is unknown or not ready, or its cluster does not authorize us in the pod's namespace
 *   (`authorization`; all `FailedAndUnresolvableNodes`), when no summary of it was read yet or
 *   it refused this pod lately (`FailedNodes`), or when {@link fitsTarget} finds no real node for
 *   the delegate in its summary, less what was placed since (`FailedNodes` if some node lacked
 *   only resources, which preemption might free, else `FailedAndUnresolvableNodes`), unless the
 *   target's burst capacity, less what waits there already, can hold it; then by the pod's
 *   DoNotSchedule topology spread and required pod (anti-)affinity across targets
 *   (`topologyFilter`, unresolvable). The reason appears in the pod's FailedScheduling event.
 * * `POST /scheduler/prioritize`: `ExtenderArgs` in, `HostPriorityList` out: virtual nodes get
 *   {@link rankTargets} (0..10) by the pod's preferred node affinity first (`preferenceScore`:
 *   its own terms per fitting real node, the proxy's own against the virtual node's labels, from
 *   the call's Node or `virtualNodeLabels`; with its ScheduleAnyway spread and preferred pod
 *   (anti-)affinity added, `softTopologyScores`), then under the pod's policy ({@link placementPolicyOf}; an unusable
 *   annotation gets a Warning event `InvalidPlacementPolicy` on the pod, once per pod and
 *   replica); other nodes, and virtual nodes whose target is unknown, get 0. The target ranked
 *   first alone is remembered for the pod for {@link CHOSEN_TTL_MS}, so that weights count the
 *   pods kube-scheduler is about to bind there before their bind arrives.
 * * `POST /scheduler/preempt`: `ExtenderPreemptionArgs` in, `ExtenderPreemptionResult` out: on each
 *   candidate virtual node, the proxies whose delegates free one real node for the pod
 *   (`victimsOnOneNode`, with `proxiesOn` and `delegateOf`), or the node left out; other nodes
 *   keep kube-scheduler's victims.
 * * `POST /scheduler/bind` (with a `binder`): `ExtenderBindingArgs` in, `ExtenderBindingResult`
 *   out, answered once the target has placed the delegate or refused it (see `Binder`).
 *
 * A body that is not JSON, is JSON past the limits of `parseUntrustedJson` (nested deeper than
 * `DEFAULT_MAX_JSON_DEPTH`, more than {@link EXTENDER_MAX_JSON_TOKENS} tokens) or is not of the
 * expected shape gets HTTP 400 with the reason as text
 * (kube-scheduler then fails the call and tries the pod again later). Records
 * `admiralty_scheduler_extender_request_duration_seconds{verb,result}` (result: ok, refused,
 * bad_request, error) and logs malformed requests and internal errors once, here.
 */
export function createExtenderRoutes(opts: ExtenderRoutesOptions): Route[] {
  return createExtender(opts).routes;
}

/** One target's verdict on a pod, as the filter and prioritize judge it now (see {@link Extender.explain}). */
export interface TargetVerdict {
  /** The target's key in the registry. */
  targetKey: string;
  /** Its name for people (`TargetClient.displayName`). */
  target: string;
  /** Its virtual node. */
  node: string;
  /** Whether the filter keeps its virtual node for the pod. */
  passes: boolean;
  /** Why not, in the filter's words (what the pod's FailedScheduling event would say). */
  reason?: string;
  /** A rejection that evicting pods could not resolve (`FailedAndUnresolvableNodes`). */
  unresolvable?: boolean;
  /** Prioritize's score of a passing target, 0..{@link MAX_EXTENDER_PRIORITY}. */
  score?: number;
  /** Why a passing target passed: on how many of its nodes the pod fits and the most room left on one (or the burst capacity, or the preemption, that takes it). */
  why?: string;
  /** What a passing target's score ranks by: the pod's policy and where it comes from, and its preference for the target when it has any. */
  ranking?: string;
}

/** The name of a filter's reason to reject a target, as {@link RefusalLog} counts it. */
export type FilterRefusal = 'TargetNotReady' | 'NotAuthorized' | 'SummaryUnreadable' | 'NoSummary' | 'KeptOffAfterRefusal' | 'AvoidedAfterReplacement' | 'NoNodeFits' | 'TopologyNotMet';

/** The filter's verdict on one target (see `judge`). */
type Judgement = { kept: true; why: () => string } | { kept: false; code: FilterRefusal; reason: string; unresolvable: boolean };

const POLICY_WORDS: Record<PlacementPolicy['kind'], string> = {
  spread: 'the most free cpu (share of allocatable, after the pod) first',
  pack: 'the least free cpu first, to fill one target before the next',
  burst: 'the lowest spec.placement.priority first, then the most free cpu',
};

/** What a pass's score ranks by, in words. Pure. */
function rankingWords(choice: PolicyChoice | undefined, weighted: boolean, preference: number | undefined): string {
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

/** The extender's routes, and the same judgement on demand. */
export interface Extender {
  routes: Route[];
  /**
   * The filter's verdict and prioritize's score of every target the pod's namespace may use
   * (its namespace's Targets and every ClusterTarget), as a proxy scheduler's call with all
   * their virtual nodes would get them now. Binds nothing and remembers nothing: no placement
   * is assumed, no policy warning recorded, nothing counted in the request metrics. `pod` is the
   * proxy as stored (with its saved manifest). For `kubectl admiralty explain`.
   */
  explain(pod: V1Pod): TargetVerdict[];
}

/** {@link createExtenderRoutes}, with {@link Extender.explain} beside the routes. */
// eslint-disable-next-line max-lines-per-function -- split pending
export function createExtender(opts: ExtenderRoutesOptions): Extender {
  const { logger, registry } = opts;
  const clock = opts.clock ?? realClock;
  const memory = opts.memory ?? new PlacementMemory();
  const delegate = opts.delegate;
  /** What every fit test against a target's nodes is given: who it is, its runtime and priority classes. */
  const judgedAs = (target: TargetClient, state: TargetState) => ({
    targetName: target.displayName,
    targetLabels: targetIdentityLabels(target.ref),
    runtimeClasses: state.runtimeClasses,
    priorityClasses: state.priorityClasses,
    priorityClassValues: state.priorityClassValues,
  });
  // A bind in flight takes room on the node the target's scheduler most likely chooses, as the
  // filter judges nodes (see `PlacementMemory.reserve`).
  const assumedOn = (target: TargetClient, state: TargetState) =>
    memory.assumedOn(target.key, state, delegate && ((namespace, name) => delegate(target.key, namespace, name)), (pod, assumed, assumedPorts) =>
      likelyNode(pod, state.nodes, { ...judgedAs(target, state), assumed, assumedPorts }),
    );
  const policyOf = typeof opts.policy === 'function' ? opts.policy : () => opts.policy as PlacementPolicy;
  const isVirtualNodeName = opts.isVirtualNodeName ?? ((name: string) => registry.byNodeName(name) !== undefined || /^admiralty-(namespace|cluster)-/.test(name));
  const duration = new Histogram({
    name: 'admiralty_scheduler_extender_request_duration_seconds',
    help: 'Time to answer one scheduler extender call, by verb (filter, prioritize, bind, preempt) and result (ok, refused, bad_request, error).',
    labelNames: ['verb', 'result'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 2.5, 5, 10, 20],
    registers: [opts.metricsRegistry ?? new Registry()],
  });

  /** Each candidate with its Node object when the call carried objects. */
  const candidates = (args: ExtenderArgs): { name: string; node?: V1Node }[] => {
    if (args.NodeNames) {
      const byName = new Map((args.Nodes?.items ?? []).map((n) => [n.metadata!.name!, n]));
      return args.NodeNames.map((name) => ({ name, node: byName.get(name) }));
    }
    return (args.Nodes?.items ?? []).map((node) => ({ name: node.metadata!.name!, node }));
  };

  const isVirtual = (c: { name: string; node?: V1Node }): boolean =>
    c.node ? c.node.metadata?.labels?.[VIRTUAL_KUBELET_PROVIDER_LABEL] === VIRTUAL_KUBELET_PROVIDER_VALUE : isVirtualNodeName(c.name);

  /**
   * The filter's verdict on one target for a pod: kept, or rejected with a reason (unresolvable
   * when evicting pods could not help). `pod` is the delegate's view ({@link delegateSpecOf}).
   */
  const judge = (proxy: V1Pod, pod: V1Pod, target: TargetClient, topology?: TopologyJudge): Judgement => {
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
    const assumed = assumedOn(target, state);
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
  };

  /**
   * The pod's topology spread (DoNotSchedule) and required pod (anti-)affinity judged across the
   * federation ({@link topologyFilter}), with the counted proxies' own required anti-affinity
   * against it, worked out once per filter call; undefined when the pod has none and no proxy of
   * {@link affinePods} has required anti-affinity. Domains: the real nodes of every target with a summary (in scope: the targets the
   * pod's namespace may use whose virtual node the proxy's own node constraints admit); pods: the
   * source's proxies bound or being bound ({@link ExtenderRoutesOptions.placedProxies}) and those
   * prioritize just ranked first, on the real node of their delegate when the target's cache has it.
   */
  const topologyOf = (proxy: V1Pod, pod: V1Pod): TopologyJudge | undefined => {
    const own = podTopology(pod, namespaceLabels);
    const required = own !== undefined && hasRequiredTopology(own);
    // Existing pods' anti-affinity judges a pod without constraints of its own too.
    if (!required && !affinePods(proxy).some((p) => p.terms!.antiAffinity.length > 0)) return undefined;
    const topology = own ?? unconstrainedTopology(pod);
    const { targets, pods } = federationOf(proxy, topology);
    return topologyFilter(topology, targets, pods);
  };

  /**
   * The terms of a proxy's delegate ({@link podTerms}), worked out once per cached proxy object
   * and kept only for proxies that have some (a cached proxy is replaced, never changed, when it
   * changes): the memo holds what the index of {@link ExtenderRoutesOptions.affineProxies} holds.
   */
  const termsMemo = new WeakMap<V1Pod, PodTerms | null>();
  const termsOfProxy = (proxy: V1Pod): PodTerms | undefined => {
    if (!mayHavePodTerms(proxy)) return undefined;
    let terms = termsMemo.get(proxy);
    if (terms === undefined) termsMemo.set(proxy, (terms = podTerms(delegateSpecOf(proxy), namespaceLabels) ?? null));
    return terms ?? undefined;
  };

  /**
   * The pods whose own terms judge `proxy`: the proxies of {@link ExtenderRoutesOptions.affineProxies}
   * with terms, then those prioritize ranked first lately that have terms, but those whose UIDs
   * are `seen` already (which it adds to). Cost O(such pods).
   */
  const affinePods = (proxy: V1Pod, seen = new Set<string>()): PlacedPod[] => {
    const self = proxy.metadata?.uid;
    const out: PlacedPod[] = [];
    for (const { proxy: p, targetKey } of opts.affineProxies?.() ?? []) {
      const uid = p.metadata?.uid;
      const placed = uid && uid !== self && !seen.has(uid) && placedPod(p, targetKey);
      if (!placed || !placed.terms) continue;
      seen.add(uid);
      out.push(placed);
    }
    const now = clock.now();
    for (const [uid, c] of chosenWithTerms) {
      if (chosen.get(uid) !== c || now - c.atMs > CHOSEN_TTL_MS) chosenWithTerms.delete(uid);
      else if (uid !== self && !seen.has(uid) && !refusedSince(uid, c, now)) {
        seen.add(uid);
        out.push({ namespace: c.namespace, labels: c.labels, targetKey: c.targetKey, terms: c.terms });
      }
    }
    return out;
  };

  /** A live proxy on (or going to) a target as topology counts it, or undefined for one deleted or done. */
  const placedPod = (p: V1Pod, targetKey: string): PlacedPod | undefined => {
    if (p.metadata?.deletionTimestamp || isTerminal(p)) return undefined;
    const nodeName = opts.delegateOf?.(targetKey, p)?.spec?.nodeName;
    const terms = termsOfProxy(p);
    return { namespace: p.metadata?.namespace ?? '', labels: p.metadata?.labels ?? {}, targetKey, ...(nodeName ? { nodeName } : {}), ...(terms ? { terms } : {}) };
  };

  /** Whether a pod's own terms score the pods placed after it (preferred terms, required affinity). */
  const scoresOthers = (p: PlacedPod): boolean => !!p.terms && p.terms.preferred.length + p.terms.affinity.length > 0;

  /** Whether the bind of a pod prioritize chose was refused since it chose it. */
  const refusedSince = (uid: string, c: { targetKey: string; atMs: number }, now: number): boolean => {
    const refused = memory.refusal(uid, c.targetKey, now);
    return refused !== undefined && refused.atMs >= c.atMs;
  };

  const namespaceLabels = (name: string) => opts.namespace?.(name)?.metadata?.labels;

  /** The targets (every one with a summary, in scope or not) and the pods a topology counts. */
  const federationOf = (proxy: V1Pod, topology: PodTopology): { targets: TopologyTarget[]; pods: PlacedPod[] } => {
    const namespace = proxy.metadata?.namespace ?? '';
    const targets: TopologyTarget[] = [];
    for (const t of registry.list()) {
      let state: TargetState | undefined;
      try {
        state = opts.targetState(t.key);
      } catch (err) {
        logger.error('scheduler extender: reading target state failed', { cluster: t.displayName, ...errorFields(err) });
      }
      if (!state) continue;
      const identity = targetIdentityLabels(t.ref);
      const scoped = t.ref.kind !== 'Target' || t.ref.namespace === namespace;
      targets.push({ key: t.key, identity, nodes: state.nodes, inScope: scoped && admitsVirtualNode(proxy, t.key, identity) });
    }
    return { targets, pods: placedPods(proxy, topology) };
  };

  /** Whether the proxy's own nodeSelector and required node affinity admit a target's virtual node. */
  const admitsVirtualNode = (proxy: V1Pod, targetKey: string, identity: Readonly<Record<string, string>>): boolean => {
    let labels: Readonly<Record<string, string>> | undefined;
    try {
      labels = opts.virtualNodeLabels?.(targetKey);
    } catch {
      labels = undefined;
    }
    const name = registry.nodeNameOf(targetKey) ?? '';
    return matchesNodeSelectorAndAffinity(proxy.spec ?? { containers: [] }, { name, labels: labels ?? identity, hostname: name });
  };

  /**
   * The pods topology counts for `proxy`: when the pod has constraints of its own, the other live
   * proxies of its `namespaces` bound or being bound, then those prioritize ranked first within
   * {@link CHOSEN_TTL_MS} (kube-scheduler's cycle runs ahead of its binds) unless their bind was
   * refused since; in any case the pods whose own terms may judge it ({@link affinePods}). Each
   * carries its terms when it has some.
   */
  const placedPods = (proxy: V1Pod, topology: PodTopology): PlacedPod[] => {
    const self = proxy.metadata?.uid;
    const seen = new Set<string>();
    const out: PlacedPod[] = [];
    const own = topology.spread.length + topology.softSpread.length + topology.affinity.length + topology.antiAffinity.length + topology.preferred.length > 0;
    const namespaces = topology.namespaces;
    const lists = !own ? [] : namespaces === 'all' ? [opts.placedProxies?.(undefined) ?? []] : [...namespaces].map((n) => opts.placedProxies?.(n) ?? []);
    for (const list of lists) {
      for (const { proxy: p, targetKey } of list) {
        const uid = p.metadata?.uid;
        if (!uid || uid === self || seen.has(uid)) continue;
        const placed = placedPod(p, targetKey);
        if (!placed) continue;
        seen.add(uid);
        out.push(placed);
      }
    }
    const now = clock.now();
    if (own) {
      for (const [uid, c] of chosen) {
        if (uid === self || seen.has(uid) || now - c.atMs > CHOSEN_TTL_MS) continue;
        if (namespaces !== 'all' && !namespaces.has(c.namespace)) continue;
        if (refusedSince(uid, c, now)) continue;
        seen.add(uid);
        out.push({ namespace: c.namespace, labels: c.labels, targetKey: c.targetKey, ...(c.terms ? { terms: c.terms } : {}) });
      }
    }
    // Those with terms in other namespaces (those above are seen already).
    out.push(...affinePods(proxy, seen));
    return out;
  };

  /**
   * Why each target the pod's namespace may use, whose virtual node kube-scheduler did not offer
   * (its own plugins rejected it: most often the room the whole node advertises), cannot take
   * the pod, in the filter's words; `offered` are the names it did offer.
   */
  const leftOut = (proxy: V1Pod, pod: V1Pod, offered: ReadonlySet<string>, topology?: TopologyJudge): string[] => {
    const namespace = proxy.metadata?.namespace ?? '';
    const out: string[] = [];
    for (const target of registry.list()) {
      const node = registry.nodeNameOf(target.key);
      if (!node || offered.has(node) || (target.ref.kind === 'Target' && target.ref.namespace !== namespace)) continue;
      const verdict = judge(proxy, pod, target, topology);
      out.push(
        `${node} (not offered by the proxy scheduler): ${verdict.kept ? "its own checks of the virtual node (its room in all, taints, readiness, the proxy's constraints) rejected it" : verdict.reason}`,
      );
    }
    return out;
  };

  /** `remember: false` (explain): rejections are not counted in `refusals`. */
  const filter = (args: ExtenderArgs, remember = true): ExtenderFilterResult => {
    const pod = delegateSpecOf(args.Pod);
    const failed: Record<string, string> = {};
    const unresolvable: Record<string, string> = {};
    const kept = new Set<string>();
    const offered = candidates(args);
    const topology = topologyOf(args.Pod, pod);
    for (const c of offered) {
      if (!isVirtual(c)) {
        kept.add(c.name);
        continue;
      }
      const target = registry.byNodeName(c.name);
      if (!target) {
        unresolvable[c.name] = `virtual node ${c.name} has no known target`;
        continue;
      }
      const verdict = judge(args.Pod, pod, target, topology);
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
    if (remember && onlyTarget) rememberChoice(args.Pod, onlyTarget.key);
    const result: ExtenderFilterResult = { FailedNodes: failed, FailedAndUnresolvableNodes: unresolvable, Error: '' };
    if (kept.size === 0 && Object.keys(failed).length + Object.keys(unresolvable).length > 0) {
      // Nothing left: answer with an error rather than a plain rejection. kube-scheduler parks a
      // pod that its plugins and we rejected until a node event its plugins care about (labels,
      // taints) or a 5-minute flush, but what changed our verdict (a target's summary, a refusal
      // that lapsed) is no node event; after an error it retries within its backoff (10 s at most).
      // The error is all the pod's condition and event then say: the targets kube-scheduler left
      // out are named too.
      const reasons = Object.entries({ ...failed, ...unresolvable }).map(([node, why]) => `${node}: ${why}`);
      reasons.push(...leftOut(args.Pod, pod, new Set(offered.map((c) => c.name)), topology));
      result.Error = `no target can run this pod now (retried with backoff): ${reasons.join('; ')}`;
    }
    if (args.NodeNames) result.NodeNames = args.NodeNames.filter((n) => kept.has(n));
    if (args.Nodes) result.Nodes = { items: (args.Nodes.items ?? []).filter((n) => kept.has(n.metadata!.name!)) };
    return result;
  };

  /**
   * How much the pod prefers one target (`preferenceScore`): its own terms over the real nodes
   * that fit it now, judged as the filter judges them (binds in flight counted), the proxy's
   * own against the virtual node.
   */
  const preferenceOf = (
    prefs: NonNullable<ReturnType<typeof podPreferences>>,
    pod: V1Pod,
    c: { name: string; node?: V1Node },
    target: TargetClient,
    state: TargetState,
    assumed: ReadonlyMap<string, ResourceAmounts>,
  ): number => {
    const identity = targetIdentityLabels(target.ref);
    const fittingNodes = prefs.realNode.length > 0 ? fittingNodesOf(pod, target, state, assumed) : [];
    let labels = c.node?.metadata?.labels;
    if (!labels && prefs.virtualNode.length > 0) {
      try {
        labels = opts.virtualNodeLabels?.(target.key);
      } catch (err) {
        logger.error('scheduler extender: reading the labels of a virtual node failed', { cluster: target.displayName, ...errorFields(err) });
      }
    }
    return preferenceScore(prefs, { identity, virtualNode: { name: c.name, labels: labels ?? identity, hostname: c.name }, fittingNodes });
  };

  /** The real nodes of a target that fit the pod now, as the filter judges them (binds in flight counted). */
  const fittingNodesOf = (pod: V1Pod, target: TargetClient, state: TargetState, assumed: ReadonlyMap<string, ResourceAmounts>): readonly FitNode[] => {
    const fit = fitsTarget(pod, state.nodes, { ...judgedAs(target, state), assumed, assumedPorts: memory.assumedPortsOn(target.key) });
    const names = new Set(fit.fittingNodes);
    return state.nodes.filter((n) => names.has(n.name));
  };

  /**
   * Folds the pod's soft topology into each target's `preference`, as kube-scheduler's default
   * profile adds its scores up (NodeAffinity, PodTopologySpread and InterPodAffinity, weight 2
   * each): the preferred node-affinity weights normalized to 0..100 over the candidates (the most
   * preferred gets 100), plus `softTopologyScores` over the nodes of each that fit the pod now.
   * Only for pods with soft topology, or that counted pods' own terms score ({@link affinePods}):
   * the others keep their plain weights, which rank the same.
   */
  const withSoftTopology = (proxy: V1Pod, pod: V1Pod, topology: PodTopology, scored: (ScoredTarget & { target: TargetClient; state: TargetState })[]): void => {
    if (topology.softSpread.length === 0 && topology.preferred.length === 0 && !affinePods(proxy).some(scoresOthers)) return;
    const { targets, pods } = federationOf(proxy, topology);
    const candidates = scored.map((t) => ({ key: t.key, nodes: fittingNodesOf(pod, t.target, t.state, t.assumed ?? new Map()) }));
    const soft = softTopologyScores(topology, targets, pods, candidates);
    if (!soft) return;
    const most = Math.max(0, ...scored.map((t) => t.preference ?? 0));
    for (const t of scored) t.preference = (most > 0 ? Math.floor((100 * (t.preference ?? 0)) / most) : 0) + (soft.get(t.key) ?? 0);
  };

  /** Pod UID -> the target prioritize ranked first alone, until its bind shows in `groupPlacements`. */
  const chosen = new Map<string, Chosen>();
  /** The entries of `chosen` whose pods have terms (an entry no longer in `chosen` is dropped on read): {@link affinePods} reads only these. */
  const chosenWithTerms = new Map<string, Chosen & { terms: PodTerms }>();
  /** Pod UID -> until when a preemption it made is settling (see `preempt`); oldest forgotten first. */
  const preempted = new Map<string, number>();
  /** Pods already warned about an unusable policy annotation (bounded; oldest forgotten first). */
  const warned = new Set<string>();

  /**
   * Remembers that kube-scheduler is about to bind the pod to a target's virtual node: prioritize
   * ranked it first alone, or the filter kept no other (kube-scheduler then calls no prioritize,
   * and may filter the next pod before this one's bind begins). Read by topology and weights.
   */
  const rememberChoice = (proxy: V1Pod, targetKey: string): void => {
    const uid = proxy.metadata?.uid;
    if (!uid) return;
    chosen.delete(uid);
    // The pod's labels and namespace, not the pod: topology counts it by those.
    const c: Chosen = { group: placementGroup(proxy), targetKey, atMs: clock.now(), namespace: proxy.metadata?.namespace ?? '', labels: proxy.metadata?.labels ?? {} };
    const terms = termsOfProxy(proxy);
    chosen.set(uid, terms ? { ...c, terms } : c);
    chosenWithTerms.delete(uid);
    if (terms) chosenWithTerms.set(uid, chosen.get(uid) as Chosen & { terms: PodTerms });
    while (chosen.size > MAX_REMEMBERED_PODS) chosen.delete(chosen.keys().next().value!);
    while (chosenWithTerms.size > MAX_REMEMBERED_PODS) chosenWithTerms.delete(chosenWithTerms.keys().next().value!);
  };

  /** How many pods of the pod's group each target has, bound, being bound, or just chosen. */
  const groupCounts = (pod: V1Pod): Map<string, number> => {
    const uid = pod.metadata?.uid ?? '';
    const group = placementGroup(pod);
    const byPod = new Map(opts.groupPlacements?.(pod) ?? []);
    const now = clock.now();
    for (const [other, c] of chosen) {
      if (now - c.atMs > CHOSEN_TTL_MS) chosen.delete(other);
      else if (c.group === group && !byPod.has(other)) byPod.set(other, c.targetKey);
    }
    byPod.delete(uid);
    const counts = new Map<string, number>();
    for (const key of byPod.values()) counts.set(key, (counts.get(key) ?? 0) + 1);
    return counts;
  };

  /** `remember: false` (explain): no Warning event, and the pod's choice is not counted for weights. */
  const prioritize = (args: ExtenderArgs, remember = true, detail?: { choice?: PolicyChoice; preference: Map<string, number>; weighted: boolean }): HostPriority[] => {
    const choice = placementPolicyOf(args.Pod, args.Pod.metadata?.namespace ? opts.namespace?.(args.Pod.metadata.namespace) : undefined, policyOf());
    const uid = args.Pod.metadata?.uid;
    if (remember && choice.invalid && uid && !warned.has(uid)) {
      if (warned.size >= MAX_REMEMBERED_PODS) warned.delete(warned.values().next().value!);
      warned.add(uid);
      opts.events?.record({ kind: 'Pod', apiVersion: 'v1', metadata: args.Pod.metadata! }, 'Warning', 'InvalidPlacementPolicy', choice.invalid.message);
    }
    const pod = delegateSpecOf(args.Pod);
    const prefs = podPreferences(args.Pod, pod);
    const scored: (ScoredTarget & { host: string; target: TargetClient; state: TargetState })[] = [];
    const hosts = candidates(args).map((c) => {
      if (!isVirtual(c)) return { Host: c.name, Score: 0 };
      const target = registry.byNodeName(c.name);
      let state: TargetState | undefined;
      try {
        state = target ? opts.targetState(target.key) : undefined;
      } catch (err) {
        logger.error('scheduler extender: reading target state failed', { cluster: target?.displayName, ...errorFields(err) });
      }
      if (target && state) {
        const assumed = assumedOn(target, state);
        const t: (typeof scored)[number] = { host: c.name, key: target.key, nodes: state.nodes, assumed, placement: opts.targetPlacement?.(target.key), target, state };
        if (prefs) t.preference = preferenceOf(prefs, pod, c, target, state, assumed);
        scored.push(t);
      }
      return { Host: c.name, Score: 0 };
    });
    const topology = podTopology(pod, namespaceLabels);
    // Existing pods' terms score a pod without constraints of its own too.
    const scoredBy = topology ?? (affinePods(args.Pod).some(scoresOthers) ? unconstrainedTopology(pod) : undefined);
    if (scoredBy) withSoftTopology(args.Pod, pod, scoredBy, scored);
    const group = weightsDiffer(scored.map((t) => t.placement)) ? groupCounts(args.Pod) : undefined;
    if (detail) {
      detail.choice = choice;
      detail.weighted = group !== undefined;
      if (prefs || topology) for (const t of scored) detail.preference.set(t.host, t.preference ?? 0);
    }
    if (group) for (const t of scored) t.groupPods = group.get(t.key) ?? 0;
    const scores = rankTargets(choice.policy, pod, scored);
    let top = scored.filter((t) => scores.get(t.key) === MAX_SCORE);
    if (top.length > 1 && topology) {
      // The next pods' topology counts this one where it goes before its bind shows, and only a
      // target ranked first alone is known to be where it goes: the tie is broken here, by key,
      // rather than by kube-scheduler at random.
      top = [...top].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
      for (const t of top.slice(1)) scores.set(t.key, MAX_SCORE - 1);
      top = top.slice(0, 1);
    }
    const byHost = new Map(scored.map((t) => [t.host, scores.get(t.key) ?? 0]));
    const only = top.length === 1 ? top[0] : undefined;
    if (remember && only) rememberChoice(args.Pod, only.key);
    return hosts.map((h) => (byHost.has(h.Host) ? { Host: h.Host, Score: byHost.get(h.Host)! } : h));
  };

  /**
   * kube-scheduler's `preempt`: for each candidate virtual node, the proxies whose delegates free
   * one real node for the pod ({@link victimsOnOneNode}); a virtual node where none would is left
   * out (kube-scheduler then preempts nothing there). Other nodes keep kube-scheduler's victims.
   */
  const preempt = (args: ExtenderPreemptionArgs): ExtenderPreemptionResult => {
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
      const fitOptions = { ...judgedAs(target, state), assumed: assumedOn(target, state), assumedPorts: memory.assumedPortsOn(target.key) };
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
  };

  const handle =
    <A extends { Pod: V1Pod }>(verb: 'filter' | 'prioritize' | 'preempt', parse: (text: string) => A, answer: (args: A) => unknown) =>
    ({ body: raw }: RouteCall): Answer => {
      const end = duration.startTimer({ verb });
      let args: A;
      try {
        args = parse(raw.toString('utf8'));
      } catch (err) {
        end({ result: 'bad_request' });
        logger.warn(`scheduler extender: malformed ${verb} request`, errorFields(err));
        return text(400, (err as Error).message);
      }
      let body: unknown;
      try {
        body = answer(args);
      } catch (err) {
        end({ result: 'error' });
        logger.error(`scheduler extender: ${verb} failed`, { key: podKey(args.Pod), ...errorFields(err) });
        // kube-scheduler reads `Error` of a filter result into the pod's FailedScheduling event,
        // which the pod's owner reads: the exception's text stays in the provider's log.
        return json(500, verb === 'filter' ? { FailedNodes: {}, Error: 'internal error (see the provider log)' } : { Error: 'internal error' });
      }
      end({ result: 'ok' });
      return json(200, body);
    };

  const maxBodyBytes = opts.maxBodyBytes ?? 64 * 2 ** 20;
  const routes: Route[] = [
    { method: 'POST', path: FILTER_PATH, maxBodyBytes, handle: handle('filter', parseExtenderArgs, (args: ExtenderArgs) => filter(args)) },
    { method: 'POST', path: PRIORITIZE_PATH, maxBodyBytes, handle: handle('prioritize', parseExtenderArgs, (args: ExtenderArgs) => prioritize(args)) },
    { method: 'POST', path: PREEMPT_PATH, maxBodyBytes, handle: handle('preempt', parsePreemptionArgs, preempt) },
  ];
  const binder = opts.binder;
  if (binder) {
    routes.push({
      method: 'POST',
      path: BIND_PATH,
      maxBodyBytes,
      handle: async ({ body: raw }) => {
        const end = duration.startTimer({ verb: 'bind' });
        let args: ExtenderBindingArgs;
        try {
          args = parseBindingArgs(raw.toString('utf8'));
        } catch (err) {
          end({ result: 'bad_request' });
          logger.warn('scheduler extender: malformed bind request', errorFields(err));
          return text(400, (err as Error).message);
        }
        const result = await binder.bind(args);
        end({ result: result.Error ? 'refused' : 'ok' });
        return json(200, result);
      },
    });
  }
  // The filter and prioritize themselves, called as the proxy scheduler would call them with
  // every virtual node the pod's namespace may use: what explain says is what placement does.
  const explain = (proxy: V1Pod): TargetVerdict[] => {
    const namespace = proxy.metadata?.namespace ?? '';
    const usable: { target: TargetClient; node: string }[] = [];
    for (const target of registry.list()) {
      const node = registry.nodeNameOf(target.key);
      if (node && (target.ref.kind === 'ClusterTarget' || target.ref.namespace === namespace)) usable.push({ target, node });
    }
    if (usable.length === 0) return [];
    const filtered = filter({ Pod: proxy, NodeNames: usable.map((u) => u.node) }, false);
    const kept = filtered.NodeNames ?? [];
    const detail = { preference: new Map<string, number>(), weighted: false } as { choice?: PolicyChoice; preference: Map<string, number>; weighted: boolean };
    const scores = new Map(kept.length > 0 ? prioritize({ Pod: proxy, NodeNames: kept }, false, detail).map((h) => [h.Host, h.Score]) : []);
    // The words of each pass: the filter's own judgement again (it is pure), for its numbers.
    const pod = delegateSpecOf(proxy);
    const topology = topologyOf(proxy, pod);
    return usable.map(({ target, node }) => {
      const verdict: TargetVerdict = { targetKey: target.key, target: target.displayName, node, passes: kept.includes(node) };
      if (verdict.passes) {
        verdict.score = scores.get(node) ?? 0;
        const judged = judge(proxy, pod, target, topology);
        if (judged.kept) verdict.why = judged.why();
        verdict.ranking = rankingWords(detail.choice, detail.weighted, detail.preference.get(node));
      } else {
        const unresolvable = filtered.FailedAndUnresolvableNodes?.[node];
        verdict.reason = unresolvable ?? filtered.FailedNodes[node] ?? 'rejected';
        verdict.unresolvable = unresolvable !== undefined;
      }
      return verdict;
    });
  };
  return { routes, explain };
}

/**
 * Parses and checks an `ExtenderArgs` body: `Pod` must be an object with a `spec`; at least one
 * of `Nodes` (an object whose `items`, possibly null, is an array of Nodes with names) and
 * `NodeNames` (an array of strings) must be present.
 *
 * @throws MalformedExtenderArgsError with a reason fit for the caller.
 */
export function parseExtenderArgs(text: string): ExtenderArgs {
  const body = parseJsonObject(text, 'ExtenderArgs');
  const pod = body.Pod;
  if (!isObject(pod)) throw new MalformedExtenderArgsError('ExtenderArgs.Pod must be an object');
  if (!isObject(pod.spec)) throw new MalformedExtenderArgsError('ExtenderArgs.Pod.spec must be an object');
  const nodes = body.Nodes;
  const nodeNames = body.NodeNames;
  if ((nodes === undefined || nodes === null) && (nodeNames === undefined || nodeNames === null)) {
    throw new MalformedExtenderArgsError('ExtenderArgs must carry Nodes or NodeNames');
  }
  if (nodes !== undefined && nodes !== null) {
    if (!isObject(nodes)) throw new MalformedExtenderArgsError('ExtenderArgs.Nodes must be a NodeList object');
    const items = nodes.items;
    if (items !== undefined && items !== null && !Array.isArray(items)) throw new MalformedExtenderArgsError('ExtenderArgs.Nodes.items must be an array');
    (items ?? []).forEach((n: unknown, i: number) => {
      if (!isObject(n) || !isObject(n.metadata) || typeof n.metadata.name !== 'string' || n.metadata.name === '') {
        throw new MalformedExtenderArgsError(`ExtenderArgs.Nodes.items[${i}] must be a Node with metadata.name`);
      }
    });
  }
  if (nodeNames !== undefined && nodeNames !== null) {
    if (!Array.isArray(nodeNames) || nodeNames.some((n) => typeof n !== 'string' || n === '')) {
      throw new MalformedExtenderArgsError('ExtenderArgs.NodeNames must be an array of node names');
    }
  }
  return body as unknown as ExtenderArgs;
}

/**
 * Parses and checks an `ExtenderPreemptionArgs` body: `Pod` must be an object with a `spec`, and
 * `NodeNameToMetaVictims` (victims as `{UID}`) or `NodeNameToVictims` (victims as Pods with a UID)
 * an object of such victims by node name.
 *
 * @throws MalformedExtenderArgsError with a reason fit for the caller.
 */
export function parsePreemptionArgs(text: string): ExtenderPreemptionArgs {
  const body = parseJsonObject(text, 'ExtenderPreemptionArgs');
  if (!isObject(body.Pod) || !isObject(body.Pod.spec)) throw new MalformedExtenderArgsError('ExtenderPreemptionArgs.Pod must be a Pod with a spec');
  const meta = body.NodeNameToMetaVictims;
  const whole = body.NodeNameToVictims;
  if (!isObject(meta) && !isObject(whole)) throw new MalformedExtenderArgsError('ExtenderPreemptionArgs must carry NodeNameToMetaVictims or NodeNameToVictims');
  for (const [field, map] of [
    ['NodeNameToMetaVictims', meta],
    ['NodeNameToVictims', whole],
  ] as const) {
    if (map === undefined || map === null) continue;
    if (!isObject(map)) throw new MalformedExtenderArgsError(`ExtenderPreemptionArgs.${field} must be an object`);
    for (const [node, victims] of Object.entries(map)) {
      const uids = isObject(victims) && Array.isArray(victims.Pods) ? victims.Pods.map((p: unknown) => (field === 'NodeNameToMetaVictims' ? (p as any)?.UID : (p as any)?.metadata?.uid)) : undefined;
      if (node === '' || !uids || uids.some((u: unknown) => typeof u !== 'string' || u === '')) {
        throw new MalformedExtenderArgsError(`ExtenderPreemptionArgs.${field}[${JSON.stringify(node)}] must list its Pods with UIDs`);
      }
    }
  }
  return body as unknown as ExtenderPreemptionArgs;
}

/**
 * Parses and checks an `ExtenderBindingArgs` body: `PodName`, `PodNamespace`, `PodUID` and `Node`
 * must be non-empty strings.
 *
 * @throws MalformedExtenderArgsError with a reason fit for the caller.
 */
export function parseBindingArgs(text: string): ExtenderBindingArgs {
  const body = parseJsonObject(text, 'ExtenderBindingArgs');
  for (const field of ['PodName', 'PodNamespace', 'PodUID', 'Node'] as const) {
    if (typeof body[field] !== 'string' || body[field] === '') throw new MalformedExtenderArgsError(`ExtenderBindingArgs.${field} must be a non-empty string`);
  }
  return { PodName: body.PodName, PodNamespace: body.PodNamespace, PodUID: body.PodUID, Node: body.Node };
}

/**
 * The delegate's scheduling spec, worked out once per call rather than once per target (the
 * saved manifest is parsed each time). Unreadable: the pod as is, so that `fitsTarget` gives the
 * reason on every virtual node.
 */
function delegateSpecOf(pod: V1Pod): V1Pod {
  try {
    return schedulingPod(pod);
  } catch {
    return pod;
  }
}

/** The body as a JSON object within the limits of `parseUntrustedJson`, else MalformedExtenderArgsError naming `what` it should be. */
function parseJsonObject(text: string, what: string): Record<string, any> {
  let body: unknown;
  try {
    body = parseUntrustedJson(text, { maxTokens: EXTENDER_MAX_JSON_TOKENS });
  } catch (err) {
    throw new MalformedExtenderArgsError(`request body ${(err as Error).message}`);
  }
  if (!isObject(body)) throw new MalformedExtenderArgsError(`${what} must be a JSON object`);
  return body;
}

function isObject(v: unknown): v is Record<string, any> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function podKey(pod: V1Pod | undefined): string {
  return `${pod?.metadata?.namespace ?? ''}/${pod?.metadata?.name ?? ''}`;
}
