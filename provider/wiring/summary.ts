import { NodeV1Api, SchedulingV1Api, type KubernetesObject, type V1Node, type V1Pod, type V1PriorityClass, type V1RuntimeClass } from '@kubernetes/client-node';
import type { InformerOptions } from '../controller/informer.js';
import { leaderController } from '../controller/manager.js';
import { isVirtualNode, summaryPodFields, summaryPriorityClassFields, summaryRuntimeClassFields } from '../model/cluster-summary.js';
import { SummaryReconciler } from '../reconcilers/summary.js';
import { CLUSTER_WIDE, type Wiring } from './wiring.js';

/**
 * kube-scheduler's own selection of assigned pods: bound to a node and not finished, of every
 * namespace.
 */
const ASSIGNED = 'spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed';

/**
 * The most virtual nodes whose pods the server leaves out of the summary's watch; past it (a
 * source with that many targets) the selector would make a long URL on every list and watch,
 * and they are left out on our side only.
 */
export const MAX_SERVER_EXCLUDED_NODES = 64;

/**
 * The summary's field selector: {@link ASSIGNED}, and no pod of one of `virtualNodes` (sorted,
 * so that the same set always makes the same selector). Node names are DNS subdomains, which
 * hold none of a selector's special characters. Pure.
 */
export function assignedPodsSelector(virtualNodes: ReadonlySet<string>): string {
  if (virtualNodes.size === 0 || virtualNodes.size > MAX_SERVER_EXCLUDED_NODES) return ASSIGNED;
  return [ASSIGNED, ...[...virtualNodes].sort().map((n) => `spec.nodeName!=${n}`)].join(',');
}

/**
 * The ClusterSummary of this cluster (target side, every cluster): its nodes and the pods they
 * run, cut down to what the summary reads, leaving out virtual nodes and the pods bound to them
 * (in a source, its proxies, which the summary must not count).
 *
 * Those pods are left out by the server: the field selector names each virtual node, so that a
 * proxy's every event after its bind is not sent, parsed and dropped (in a source cluster, as
 * many events as the proxies informer's). The set follows the nodes cache, and a change lists
 * again with the new selector. The informer's own check stays, for the pods of a node not cached
 * yet and past {@link MAX_SERVER_EXCLUDED_NODES}. A pod can only be left out by being bound to
 * a virtual node, as before: no field a pod's writer sets elsewhere hides it from the summary.
 *
 * The RuntimeClasses and PriorityClasses are published as soon as their informers have listed
 * them; the controller does not wait for those, so a provider without the right to list them (a
 * role from an earlier version) still writes its summary, without them.
 */
export function setupSummary(wiring: Wiring): void {
  const { config, kc, core, custom, manager } = wiring;
  const caches = manager.caches();
  const nodes = caches.informer<V1Node>({ name: 'nodes', resource: '/api/v1/nodes', list: (page) => core.listNode(page) });
  const virtualNodes = new Set<string>();
  const onVirtualNode = (p: V1Pod) => {
    const node = nodes.get(p.spec?.nodeName ?? '');
    return !!node && isVirtualNode(node);
  };
  const pods = caches.informer<V1Pod>({
    name: 'assigned-pods',
    resource: '/api/v1/pods',
    list: (page) => core.listPodForAllNamespaces(page),
    fieldSelector: () => assignedPodsSelector(virtualNodes),
    transform: summaryPodFields,
    keep: (p) => !onVirtualNode(p),
  });
  const follow = (node: V1Node, present: boolean) => {
    const name = node.metadata?.name;
    if (!name) return;
    const virtual = present && isVirtualNode(node);
    if (virtual === virtualNodes.has(name)) return;
    if (virtual) virtualNodes.add(name);
    else virtualNodes.delete(name);
    pods.reselect();
  };
  /** A cluster-scoped informer over a class of objects whose fields `transform` keeps. */
  const classes = <T extends KubernetesObject>(name: string, path: string, list: InformerOptions<T>['list'], transform: (obj: T) => T) => caches.informer<T>({ name, resource: path, list, transform });
  const nodeApi = kc.makeApiClient(NodeV1Api);
  const schedulingApi = kc.makeApiClient(SchedulingV1Api);
  const runtimeClasses = classes<V1RuntimeClass>('runtime-classes', '/apis/node.k8s.io/v1/runtimeclasses', (page) => nodeApi.listRuntimeClass(page), summaryRuntimeClassFields);
  const priorityClasses = classes<V1PriorityClass>('priority-classes', '/apis/scheduling.k8s.io/v1/priorityclasses', (page) => schedulingApi.listPriorityClass(page), summaryPriorityClassFields);
  nodes.on('add', (n) => follow(n, true));
  nodes.on('update', (n) => follow(n, true));
  nodes.on('delete', (n) => follow(n, false));
  const renewIntervalMs = config.summaryRenewIntervalSeconds * 1000;
  // A failed write is tried again within the renew interval, not after minutes of backoff: after
  // its apiserver was down, a quiet cluster's summary must move again before sources take it
  // for stale (three intervals).
  const controller = wiring.newController(
    'summary',
    new SummaryReconciler({ custom, nodes, pods, runtimeClasses, priorityClasses, podsResourceVersion: () => pods.lastResourceVersion(), clock: wiring.clock, renewIntervalMs }),
    { maxBackoffMs: renewIntervalMs, shardOf: CLUSTER_WIDE },
  );
  controller.watch(nodes, () => [SummaryReconciler.KEY]);
  controller.watch(pods, () => [SummaryReconciler.KEY]);
  controller.watch(runtimeClasses, () => [SummaryReconciler.KEY], { waitForSync: false });
  controller.watch(priorityClasses, () => [SummaryReconciler.KEY], { waitForSync: false });
  controller.enqueue(SummaryReconciler.KEY);
  manager.add(leaderController(controller, [nodes, pods, runtimeClasses, priorityClasses]));
}
