import type { GangSupport } from './gang-filter.js';
import type { V1Namespace, V1Node, V1Pod, V1PodDisruptionBudget } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import type { ClusterRegistry } from '../../provider/clusters/cluster-registry.js';
import type { Clock } from '../../provider/core/clock.js';
import type { EventRecorder } from '../../provider/core/events.js';
import type { Route } from '../../provider/core/http-router.js';
import type { Logger } from '../../provider/core/logger.js';
import type { TargetPlacement } from '../../provider/model/target.js';
import type { ResourceAmounts } from '../../provider/model/resources.js';
import type { ExtenderBindingArgs, ExtenderBindingResult } from '../bind.js';
import type { PlacementMemory } from '../placement-memory.js';
import type { TargetPriorityClasses } from '../preemption.js';
import type { RefusalLog } from '../refusal-log.js';
import type { PlacementPolicy } from '../score.js';
import type { RuntimeClasses } from '../target-classes.js';
import type { FitNode } from '../target-nodes.js';
import type { TopologyVerdict } from '../topology.js';

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
  /** Gang scheduling (the source serves PodGroups): the plans shared with the binder, the PodGroups and their members. Without it, every pod is placed on its own. */
  gangs?: GangSupport;
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

/** The topology verdict on one target of the pod being filtered (`topologyFilter`). */
export type TopologyJudge = (targetKey: string, nodes: readonly FitNode[]) => TopologyVerdict;

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
