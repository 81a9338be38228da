import { PolicyV1Api, type KubernetesListObject, type V1Pod, type V1PodDisruptionBudget } from '@kubernetes/client-node';
import { statusMessage } from '../core/errors.js';
import { podHostPorts } from '../model/host-ports.js';
import { groupKey, POD_GROUP_GROUP, POD_GROUP_PLURAL, POD_GROUP_VERSION, PROXIES_BY_GROUP_INDEX, type PodGroupObject } from '../model/pod-group.js';
import { delegateRequests } from '../../scheduler/bind.js';
import { GangPlans, type GangMember } from '../../scheduler/gang.js';
import type { GangSupport } from '../../scheduler/extender/gang-filter.js';
import { budgetFields } from '../../scheduler/preempt.js';
import type { Route } from '../core/http-router.js';
import { standbyMayCreateDelegates } from '../model/outage.js';
import { Binder } from '../../scheduler/bind.js';
import { createExtender, type Extender, type TargetVerdict } from '../../scheduler/extender-server.js';
import type { PlacementMemory } from '../../scheduler/placement-memory.js';
import type { RefusalLog } from '../../scheduler/refusal-log.js';
import { nodesOfSummary } from '../../scheduler/target-nodes.js';
import { priorityClassesOfSummary, runtimeClassesOfSummary } from '../../scheduler/target-classes.js';
import { lowerPriorityPodsOn, priorityClassValuesOfSummary } from '../../scheduler/preemption.js';
import { schedulingPod, waitingRequests } from '../../scheduler/fit.js';
import { parseTargetKey } from '../clusters/target-client.js';
import { parseTargetPlacement } from '../model/target.js';
import { virtualNodeLabels } from '../model/virtual-node.js';
import { delegateNameOf } from '../model/delegate-pod.js';
import { groupPlacements } from '../../scheduler/placement-policy.js';
import { mayHavePodTerms, POD_AFFINITY_INDEX, POD_AFFINITY_INDEX_VALUE } from '../../scheduler/topology.js';
import type { Delegation } from './delegation.js';
import type { TargetAuthorization } from '../reconcilers/target-authorization.js';
import type { TargetInformers } from './targets.js';
import { namespacesCache, proxiesCache, proxiesOnNode } from './caches.js';
import type { Wiring } from './wiring.js';

/**
 * The scheduler extender (filter, prioritize and, with delegation, bind) on the webhook's
 * server, which every replica runs. The filter and the binder share `authorization` (which
 * namespaces a ClusterTarget's cluster lets us create pods in). Both count what they turn away
 * in `refusals` (for `kubectl admiralty status`). Returns the extender's routes (for the
 * webhook's server) and its `explain` (for `kubectl admiralty explain`, on the kubelet API).
 */
export interface ExtenderOptions {
  memory: PlacementMemory;
  refusals: RefusalLog;
  /** With delegation: its caches (proxies, opted-in namespaces, each target's delegates and events) and what the binder places. */
  delegation: Delegation | undefined;
  targets: TargetInformers | undefined;
  authorization: TargetAuthorization | undefined;
  /** Whether the source serves PodGroups (`servesPodGroups`): then, with delegation, gangs are placed whole. */
  gangs?: boolean;
}

/** How the extender reads a target's object and its `spec.placement`. */
function targetReaders(targets: TargetInformers | undefined) {
  const targetOf = (key: string) => {
    const ref = parseTargetKey(key);
    return { ref, obj: ref.kind === 'Target' ? targets?.targets.get(ref.name, ref.namespace) : targets?.clusterTargets.get(ref.name) };
  };
  const targetPlacement = (key: string) => {
    const { obj } = targetOf(key);
    const parsed = obj && parseTargetPlacement(obj.spec);
    return parsed?.ok ? parsed.placement : undefined;
  };
  return { targetOf, targetPlacement };
}

/** What the binder and the extender are made of: see {@link setupExtender}. */
type ExtenderParts = ExtenderOptions & ReturnType<typeof targetReaders> & { wiring: Wiring; gangSupport?: GangSupport };

export function setupExtender(wiring: Wiring, options: ExtenderOptions): { routes: Route[]; explain: (pod: V1Pod) => TargetVerdict[] } {
  const gangSupport = options.gangs && options.delegation ? newGangSupport(wiring, options.memory, options.delegation) : undefined;
  const parts: ExtenderParts = { ...options, ...targetReaders(options.targets), wiring, ...(gangSupport ? { gangSupport } : {}) };
  const binder = options.delegation && newBinder(parts, options.delegation);
  const extender = newExtender(parts, binder);
  // The binder reads proxies and namespaces, preemption the budgets: kept warm on every replica.
  if (options.delegation) {
    proxiesCache(wiring, { everyReplica: true });
    namespacesCache(wiring, { everyReplica: true });
  }
  return { routes: extender.routes, explain: extender.explain };
}

/**
 * The binder (the extender's bind, with delegation). A bind waiting for the target's scheduler
 * goes on as soon as the delegate is placed; the memory (made with toldOfDelegateChanges when
 * delegation runs) looks again only at the assumptions whose delegate changed. No assumption
 * exists before the binder's first bind.
 */
function newBinder(parts: ExtenderParts, delegation: Delegation): Binder {
  const { proxies, namespaces, beingPlaced } = delegation;
  const { wiring, memory, refusals, authorization, targetPlacement } = parts;
  const binder = new Binder({
    sourceCore: wiring.core,
    registry: wiring.clusters,
    proxies,
    beingPlaced,
    namespaces,
    delegates: delegation.delegates,
    follow: delegation.follow,
    targetEvents: delegation.targetEvents,
    bursts: (key) => targetPlacement(key)?.burstCapacity !== undefined,
    runtimeClasses: (key) => {
      const read = wiring.clusters.summary(key);
      return read && runtimeClassesOfSummary(read.summary);
    },
    memory,
    refusals,
    authorization,
    events: wiring.events,
    lowerPriorityPods: (key, node, proxy) => {
      const read = wiring.clusters.summary(key);
      return read && lowerPriorityPodsOn(read.summary, node, schedulingPod(proxy).spec ?? { containers: [] });
    },
    schedulerName: wiring.config.proxySchedulerName,
    sourceClusterName: wiring.config.clusterName,
    clock: wiring.clock,
    logger: wiring.logger,
    placeTimeoutMs: wiring.config.delegatePlacementTimeoutSeconds * 1000,
    ...(parts.gangSupport ? { gangs: parts.gangSupport.plans } : {}),
    // The target's writer (the leader, or its shard's owner) fences a target that comes back
    // before it creates delegates there; another replica cannot know when that is done, so it
    // keeps off a target recently unreachable.
    mayCreateDelegates: (key) => (wiring.writes(key) ? delegation.outage.mayCreateDelegates(key) : standbyMayCreateDelegates(wiring.clusters.health(key), wiring.clock.monotonicMs())),
  });
  delegation.onDelegateChange((targetKey, delegate, verb) => {
    binder.delegateChanged(targetKey, delegate);
    const namespace = delegate.metadata?.namespace ?? '';
    const name = delegate.metadata?.name ?? '';
    memory.delegateChanged(targetKey, namespace, name);
    if (verb === 'delete') memory.delegateGone(targetKey, namespace, name);
  });
  return binder;
}

/** The extender itself, over this replica's registry of targets and caches. */
function newExtender(parts: ExtenderParts, binder: Binder | undefined): Extender {
  const { wiring, memory, refusals, authorization, targetOf, targetPlacement, delegation, gangSupport } = parts;
  const proxies = delegation?.proxies;
  const namespaces = delegation?.namespaces;
  // Preemption spares the proxies a PodDisruptionBudget protects, as kube-scheduler does. Budgets
  // are few and small; only what upstream's check reads is kept.
  const policy = delegation && wiring.kc.makeApiClient(PolicyV1Api);
  const budgets = policy
    ? wiring.manager.caches().informer<V1PodDisruptionBudget>({
        name: 'disruption-budgets',
        resource: '/apis/policy/v1/poddisruptionbudgets',
        list: (page) => policy.listPodDisruptionBudgetForAllNamespaces(page),
        transform: budgetFields,
        everyReplica: true,
      })
    : undefined;
  return createExtender({
    registry: wiring.clusters,
    targetState: (key) => {
      const read = wiring.clusters.summary(key);
      return (
        read && {
          nodes: nodesOfSummary(read.summary),
          readAtMs: read.readAtMs,
          podsResourceVersion: read.summary.podsResourceVersion,
          runtimeClasses: runtimeClassesOfSummary(read.summary),
          priorityClasses: priorityClassesOfSummary(read.summary),
          priorityClassValues: priorityClassValuesOfSummary(read.summary),
        }
      );
    },
    policy: { kind: 'spread' },
    targetPlacement,
    // What the targets reconciler writes on the virtual node, worked out the same way: the
    // proxy scheduler sends node names only, and a standby has no cache of the virtual nodes.
    virtualNodeLabels: (key) => {
      const { ref, obj } = targetOf(key);
      return virtualNodeLabels(ref, wiring.clusters.summary(key)?.summary.metadata?.labels, obj?.spec?.excludedLabelsRegexp);
    },
    delegate: delegation && ((key, namespace, name) => delegation.delegates(key)?.get(name, namespace)),
    waitingRequests: (key) => waitingRequests(delegation?.delegates(key)?.list() ?? [], binder?.placingOn(key) ?? [], wiring.config.clusterName),
    // Preemption weighs the proxies on a virtual node by where their delegates are (only when no
    // virtual node has room for a pod of higher priority).
    proxiesOn: proxies && proxiesOnNode(proxies),
    disruptionBudgets: budgets && (() => budgets.list()),
    delegateOf: delegation && ((key, proxy) => delegation.delegates(key)?.get(delegateNameOf(proxy, { sourceClusterName: wiring.config.clusterName }), proxy.metadata?.namespace)),
    namespace: namespaces && ((name) => namespaces.get(name)),
    authorization: authorization && ((key, namespace) => authorization.refuses(key, namespace)),
    groupPlacements:
      proxies &&
      ((pod) => {
        const namespace = pod.metadata?.namespace;
        return groupPlacements(pod, proxies.list(namespace), (node) => wiring.clusters.byNodeName(node)?.key, namespace && binder ? binder.placing(namespace) : []);
      }),
    // Topology counts the proxies bound to virtual nodes and those being bound: a scan of the
    // proxies, only for pods with topology spread or pod (anti-)affinity.
    placedProxies:
      proxies &&
      ((namespace) => {
        const out: { proxy: V1Pod; targetKey: string }[] = [];
        for (const p of proxies.list(namespace)) {
          const key = p.spec?.nodeName ? wiring.clusters.byNodeName(p.spec.nodeName)?.key : undefined;
          if (key) out.push({ proxy: p, targetKey: key });
        }
        if (binder) out.push(...binder.placing(namespace));
        return out;
      }),
    // Those of every namespace whose own pod (anti-)affinity terms judge the pods placed after
    // them: read from the proxies cache's index, for every pod the extender places.
    affineProxies:
      proxies &&
      (() => {
        const out: { proxy: V1Pod; targetKey: string }[] = [];
        for (const p of proxies.byIndex(POD_AFFINITY_INDEX, POD_AFFINITY_INDEX_VALUE)) {
          const key = p.spec?.nodeName ? wiring.clusters.byNodeName(p.spec.nodeName)?.key : undefined;
          if (key) out.push({ proxy: p, targetKey: key });
        }
        if (binder) for (const b of binder.placing()) if (mayHavePodTerms(b.proxy)) out.push(b);
        return out;
      }),
    // Every replica may warn about an unusable placement-policy annotation: the proxy
    // scheduler talks to one replica at a time, leader or not.
    events: wiring.events,
    memory,
    refusals,
    // Every replica binds: kube-scheduler keeps its connection to the extender, so through a
    // Service its binds go to one replica, leader or not. The binder's writes are safe from
    // any replica: the delegate's name is deterministic (AlreadyExists is adopted), the
    // Binding succeeds once, and the leader's follow keeps the copies of proxies not bound
    // yet (it does not see a standby's placements).
    binder,
    ...(gangSupport ? { gangs: gangSupport } : {}),
    clock: wiring.clock,
    logger: wiring.logger,
    metricsRegistry: wiring.registry,
  });
}

/**
 * Whether the source serves PodGroups (`scheduling.k8s.io/v1alpha2`, gate `GenericWorkload`):
 * asked once at start. Without them no pod names a group (the apiserver drops the field), and
 * no cache of them is kept (one that never lists would keep the replica from being ready).
 */
export async function servesPodGroups(wiring: Wiring): Promise<boolean> {
  try {
    await wiring.custom.listClusterCustomObject({ group: POD_GROUP_GROUP, version: POD_GROUP_VERSION, plural: POD_GROUP_PLURAL, limit: 1 });
    return true;
  } catch (err) {
    wiring.logger.info('the source serves no PodGroups (scheduling.k8s.io/v1alpha2): pods are placed one by one, gangs included', { reason: statusMessage(err) });
    return false;
  }
}

/**
 * Gangs: the source's PodGroups (every replica: the extender reads them), their members from the
 * proxies cache's index, and the plans the filter makes and the binder follows, whose
 * reservations are the placement memory's.
 */
function newGangSupport(wiring: Wiring, memory: PlacementMemory, delegation: Delegation): GangSupport {
  const podGroups = wiring.manager.caches().informer<PodGroupObject>({
    name: 'pod-groups',
    resource: `/apis/${POD_GROUP_GROUP}/${POD_GROUP_VERSION}/${POD_GROUP_PLURAL}`,
    list: (page) => wiring.custom.listClusterCustomObject({ group: POD_GROUP_GROUP, version: POD_GROUP_VERSION, plural: POD_GROUP_PLURAL, ...page }) as Promise<KubernetesListObject<PodGroupObject>>,
    everyReplica: true,
  });
  const sourceClusterName = wiring.config.clusterName;
  const classes = (key: string) => {
    const read = wiring.clusters.summary(key);
    return read && runtimeClassesOfSummary(read.summary);
  };
  const delegateKey = (m: GangMember) => ({ namespace: m.proxy.metadata?.namespace ?? '', name: m.delegateName });
  const plans = new GangPlans({
    clock: wiring.clock,
    reserve: (key, m) => memory.reserve(key, m.proxy, delegateRequests(m.proxy, classes(key)), wiring.clock.now(), delegateKey(m), podHostPorts(m.proxy.spec)),
    release: (key, m) => memory.release(key, delegateKey(m)),
  });
  return {
    plans,
    podGroup: (namespace, name) => podGroups.get(name, namespace),
    members: (namespace, name) => delegation.proxies.byIndex(PROXIES_BY_GROUP_INDEX, groupKey(namespace, name)),
    delegateName: (proxy) => delegateNameOf(proxy, { sourceClusterName }),
  };
}
