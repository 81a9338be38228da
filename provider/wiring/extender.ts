import { PolicyV1Api, type V1Pod, type V1PodDisruptionBudget } from '@kubernetes/client-node';
import { budgetFields } from '../../scheduler/preempt.js';
import type { Route } from '../core/http-router.js';
import type { Informer } from '../controller/informer.js';
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
import type { DelegationWiring } from './delegation.js';
import type { TargetAuthorization } from '../reconcilers/target-authorization.js';
import type { TargetInformers } from './targets.js';
import type { Wiring } from './wiring.js';
import { namespacesCache, proxiesCache } from './caches.js';

/**
 * The scheduler extender (filter, prioritize and, with delegation, bind) on the webhook's
 * server, which every replica runs. The filter and the binder share `authorization` (which
 * namespaces a ClusterTarget's cluster lets us create pods in). Returns the binder, which follow asks for the proxies it is
 * placing, and the extender's `explain` (for `kubectl admiralty explain`). Both count what they
 * turn away in `refusals` (for `kubectl admiralty status`).
 */
export interface ExtenderWiringOptions {
  /** The webhook server's routes, which the extender's join. */
  routes: Route[];
  memory: PlacementMemory;
  refusals: RefusalLog;
  proxies: Informer<V1Pod> | undefined;
  delegation: DelegationWiring | undefined;
  targets: TargetInformers | undefined;
  authorization: TargetAuthorization | undefined;
}

// eslint-disable-next-line max-lines-per-function -- split pending
export function wireExtender(w: Wiring, options: ExtenderWiringOptions): { binder: Binder | undefined; explain: (pod: V1Pod) => TargetVerdict[] } {
  const { routes, memory, refusals, proxies, delegation, targets, authorization } = options;
  const targetOf = (key: string) => {
    const ref = parseTargetKey(key);
    return { ref, obj: ref.kind === 'Target' ? targets?.targets.get(ref.name, ref.namespace) : targets?.clusterTargets.get(ref.name) };
  };
  const targetPlacement = (key: string) => {
    const { obj } = targetOf(key);
    const parsed = obj && parseTargetPlacement(obj.spec);
    return parsed?.ok ? parsed.placement : undefined;
  };
  const binder = delegation
    ? new Binder({
        sourceCore: w.core,
        registry: w.clusters,
        proxies: proxies!,
        namespaces: delegation.namespaces,
        delegates: delegation.delegates,
        follow: delegation.follow,
        targetEvents: delegation.targetEvents,
        bursts: (key) => targetPlacement(key)?.burstCapacity !== undefined,
        runtimeClasses: (key) => {
          const read = w.clusters.summary(key);
          return read && runtimeClassesOfSummary(read.summary);
        },
        memory,
        refusals,
        authorization,
        events: w.events,
        lowerPriorityPods: (key, node, proxy) => {
          const read = w.clusters.summary(key);
          return read && lowerPriorityPodsOn(read.summary, node, schedulingPod(proxy).spec ?? { containers: [] });
        },
        schedulerName: w.config.proxySchedulerName,
        sourceClusterName: w.config.clusterName,
        clock: w.clock,
        logger: w.logger,
        placeTimeoutMs: w.config.delegatePlacementTimeoutSeconds * 1000,
        // The leader fences a target that comes back before it creates delegates there; a
        // standby cannot know when that is done, so it keeps off a target recently unreachable.
        mayCreateDelegates: (key) => (w.manager.isLeader() ? delegation.outage.mayCreateDelegates(key) : standbyMayCreateDelegates(w.clusters.health(key), w.clock.monotonicMs())),
      })
    : undefined;
  // A bind waiting for the target's scheduler goes on as soon as the delegate is placed; the
  // memory (made with toldOfDelegateChanges when delegation runs) looks again only at the
  // assumptions whose delegate changed. No assumption exists before the binder's first bind.
  if (binder) {
    delegation!.onDelegateChange((targetKey, delegate, verb) => {
      binder.delegateChanged(targetKey, delegate);
      const namespace = delegate.metadata?.namespace ?? '';
      const name = delegate.metadata?.name ?? '';
      memory.delegateChanged(targetKey, namespace, name);
      if (verb === 'delete') memory.delegateGone(targetKey, namespace, name);
    });
  }
  // Preemption spares the proxies a PodDisruptionBudget protects, as kube-scheduler does. Budgets
  // are few and small; only what upstream's check reads is kept.
  const policy = delegation && w.kc.makeApiClient(PolicyV1Api);
  const budgets = policy
    ? w.manager.caches().informer<V1PodDisruptionBudget>({
        name: 'disruption-budgets',
        resource: '/apis/policy/v1/poddisruptionbudgets',
        list: (page) => policy.listPodDisruptionBudgetForAllNamespaces(page),
        transform: budgetFields,
        everyReplica: true,
      })
    : undefined;
  // The routes go on the webhook's server; explain goes to the kubelet API.
  let extender: Extender;
  routes.push(
    ...(extender = createExtender({
      registry: w.clusters,
      targetState: (key) => {
        const read = w.clusters.summary(key);
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
        return virtualNodeLabels(ref, w.clusters.summary(key)?.summary.metadata?.labels, obj?.spec?.excludedLabelsRegexp);
      },
      delegate: delegation && ((key, namespace, name) => delegation.delegates(key)?.get(name, namespace)),
      waitingRequests: (key) => waitingRequests(delegation?.delegates(key)?.list() ?? [], binder?.placingOn(key) ?? [], w.config.clusterName),
      // Preemption weighs the proxies on a virtual node by where their delegates are. Rare (only
      // when no virtual node has room for a pod of higher priority): a scan of the proxies will do.
      proxiesOn: proxies && ((node) => proxies.list().filter((p) => p.spec?.nodeName === node)),
      disruptionBudgets: budgets && (() => budgets.list()),
      delegateOf: delegation && ((key, proxy) => delegation.delegates(key)?.get(delegateNameOf(proxy, { sourceClusterName: w.config.clusterName }), proxy.metadata?.namespace)),
      namespace: delegation && ((name) => delegation.namespaces.get(name)),
      authorization: authorization && ((key, namespace) => authorization.refuses(key, namespace)),
      groupPlacements:
        proxies &&
        ((pod) => {
          const namespace = pod.metadata?.namespace;
          return groupPlacements(pod, proxies.list(namespace), (node) => w.clusters.byNodeName(node)?.key, namespace && binder ? binder.placing(namespace) : []);
        }),
      // Topology counts the proxies bound to virtual nodes and those being bound: a scan of the
      // proxies, only for pods with topology spread or pod (anti-)affinity.
      placedProxies:
        proxies &&
        ((namespace) => {
          const out: { proxy: V1Pod; targetKey: string }[] = [];
          for (const p of proxies.list(namespace)) {
            const key = p.spec?.nodeName ? w.clusters.byNodeName(p.spec.nodeName)?.key : undefined;
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
            const key = p.spec?.nodeName ? w.clusters.byNodeName(p.spec.nodeName)?.key : undefined;
            if (key) out.push({ proxy: p, targetKey: key });
          }
          if (binder) for (const b of binder.placing()) if (mayHavePodTerms(b.proxy)) out.push(b);
          return out;
        }),
      // Every replica may warn about an unusable placement-policy annotation: the proxy
      // scheduler talks to one replica at a time, leader or not.
      events: w.events,
      memory,
      refusals,
      // Every replica binds: kube-scheduler keeps its connection to the extender, so through a
      // Service its binds go to one replica, leader or not. The binder's writes are safe from
      // any replica: the delegate's name is deterministic (AlreadyExists is adopted), the
      // Binding succeeds once, and the leader's follow keeps the copies of proxies not bound
      // yet (it does not see a standby's placements).
      binder,
      clock: w.clock,
      logger: w.logger,
      metricsRegistry: w.registry,
    })).routes,
  );
  // The binder reads proxies and namespaces, preemption the budgets: kept warm on every replica.
  if (delegation) {
    proxiesCache(w, { everyReplica: true });
    namespacesCache(w, { everyReplica: true });
  }
  return { binder, explain: extender.explain };
}
