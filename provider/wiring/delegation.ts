import type { KubernetesObject, CoreV1Event, V1ConfigMap, V1Namespace, V1Pod, V1Secret, V1Service } from '@kubernetes/client-node';
import type { TargetClient } from '../clusters/target-client.js';
import type { Informer, InformerOptions } from '../controller/informer.js';
import { leaderController, type Runnable } from '../controller/manager.js';
import { PARENT_CLUSTER_NAME_LABEL } from '../core/keys.js';
import { isAutoscalerVerdict } from '../model/autoscaler.js';
import { delegateFields } from '../model/delegate-pod.js';
import type { CopyNames } from '../model/pod-references.js';
import { copiesEvent, isAboutDelegateOf, targetEventsSelector } from '../model/proxy-event.js';
import { sharePodParts } from '../model/shared-pod-parts.js';
import type { CachedObjects, Wiring } from './wiring.js';
import { namespacesCache } from './caches.js';

/** What delegation gives the rest of the wiring. */
export interface DelegationWiring {
  namespaces: Informer<V1Namespace>;
  delegates: (key: string) => Informer<V1Pod> | undefined;
  /** Pod events in a target (the binder reads cluster-autoscaler's word on a delegate there). */
  targetEvents: (key: string) => Informer<CoreV1Event> | undefined;
  /** Calls `listener` with the target's key for every delegate any target's informer adds, updates or deletes. */
  onDelegateChange(listener: (targetKey: string, delegate: V1Pod, verb: 'add' | 'update' | 'delete') => void): void;
  follow: { ensureCopies(proxy: V1Pod, target: TargetClient): Promise<CopyNames> };
  runnables: Runnable[];
  outage: { mayCreateDelegates(targetKey: string): boolean };
  /** Looks at a target again after its probe: its proxies in an outage, its stuck delegates. */
  afterProbe(targetKey: string): void;
}

/**
 * Proxies -> delegates, follow and services. Source-side informers are static; each target
 * gets its own informers (delegates, copies) when it joins the registry and loses them when
 * it leaves, so a broken target never stalls the others. The per-target informers run on
 * every replica (the binder reads delegates; a new leader starts on warm caches); the
 * controllers run on the leader.
 */
// eslint-disable-next-line max-lines-per-function -- split pending
export async function wireDelegation(
  w: Wiring,
  proxies: Informer<V1Pod>,
  /** Proxies the extender is placing (see `Binder.placing`). */
  placing: (namespace: string) => Iterable<{ proxy: V1Pod; targetKey: string }>,
  /** Keeps a target off a controller's pods for a while (the extender's placement memory); absent without the extender. */
  avoid: ((ownerUid: string, targetKey: string, reason: string, untilMs: number) => void) | undefined,
): Promise<DelegationWiring> {
  // Loaded only when delegation is enabled: target-only installs never load it.
  const [{ DelegationReconciler }, { FollowReconciler }, { ServiceReconciler }, { DelegateEventsReconciler }, { OutageReconciler }, { ReplacementReconciler }] = await Promise.all([
    import('../reconcilers/delegation.js'),
    import('../reconcilers/follow.js'),
    import('../reconcilers/services.js'),
    import('../reconcilers/delegate-events.js'),
    import('../reconcilers/outage.js'),
    import('../reconcilers/replacement.js'),
  ]);
  const { config, core, clusters, events, clock, metrics } = w;
  const ours = `${PARENT_CLUSTER_NAME_LABEL}=${config.clusterName}`;
  // Pod events that the events cache may keep (see targetEventsSelector): not ours, and not the
  // routine ones unless they are copied.
  const podEvents = targetEventsSelector(config.delegateEvents);
  // No informer over the source's ConfigMaps and Secrets: follow reads those that proxies
  // reference by name (least privilege: no list/watch of every Secret in the cluster).
  const services = w.manager.caches().informer<V1Service>({ name: 'services', resource: '/api/v1/services', list: (page) => core.listServiceForAllNamespaces(page) });
  const namespaces = namespacesCache(w);

  const delegateListeners: Array<(targetKey: string, delegate: V1Pod, verb: 'add' | 'update' | 'delete') => void> = [];
  type TargetCaches = { delegates: Informer<V1Pod>; configMaps: Informer<V1ConfigMap>; secrets: Informer<V1Secret>; services: Informer<V1Service>; events: Informer<CoreV1Event> };
  const perTarget = new Map<string, TargetCaches>();
  /** What undoes each target's watches by the controllers, for when the target goes. */
  const unwatchers = new Map<string, Array<() => void>>();
  /**
   * A target's delegates as the reconcilers that conclude from a delegate's absence see them:
   * only once the cache has listed (and, with `andEvents`, the target's events cache too). The
   * controllers do not wait for a target's caches before they start (one that never lists, of
   * a target out of reach, would hold every key of every target), and a cache that has not
   * listed yet shows no delegate: follow and services would delete the copies the delegates use,
   * and re-placement would miss cluster-autoscaler's word. Without a cache, each of them waits.
   * Delegation takes the cache as it is: it reads the target before it concludes anything from
   * an absence. A copies cache that has not listed yet is fine as it is too: a copy it has not
   * shown wakes its key when it does.
   */
  const listedDelegates = (key: string, andEvents = false): Informer<V1Pod> | undefined => {
    const entry = perTarget.get(key);
    return entry?.delegates.hasSynced() && (!andEvents || entry.events.hasSynced()) ? entry.delegates : undefined;
  };

  const follow = new FollowReconciler({
    placing,
    sourceCore: core,
    proxies,
    namespaces,
    registry: clusters,
    sourceClusterName: config.clusterName,
    events,
    targetConfigMaps: (key: string) => perTarget.get(key)?.configMaps,
    targetSecrets: (key: string) => perTarget.get(key)?.secrets,
    delegates: (key: string) => listedDelegates(key),
  });
  // Outages: proxies say their target is unreachable, fail over if asked, and a target that
  // comes back is fenced before delegation creates anything there.
  const outage = new OutageReconciler({ sourceCore: core, proxies, namespaces, registry: clusters, sourceClusterName: config.clusterName, events, clock, metrics });
  const outageController = w.newController('outage', outage);
  outageController.watch(proxies, (p) => OutageReconciler.keysOfProxy(clusters, p));
  // Re-placement: pods whose delegate is stuck in a ready target go elsewhere (or say why not).
  // Only with the extender: its avoidance of the target is what sends the replacement elsewhere;
  // without it the controller's new pod could go back to wait in the same target.
  const replacement =
    avoid &&
    new ReplacementReconciler({
      sourceCore: core,
      proxies,
      delegates: (key: string) => listedDelegates(key, true),
      targetEvents: (key: string) => perTarget.get(key)?.events,
      registry: clusters,
      sourceClusterName: config.clusterName,
      unschedulableAfterMs: config.replaceUnschedulableAfterMs,
      avoid,
      events,
      clock,
      metrics,
    });
  const replacementController = replacement && w.newController('replacement', replacement);
  const delegation = new DelegationReconciler({
    mayCreateDelegates: (key) => outage.mayCreateDelegates(key),
    sourceCore: core,
    proxies,
    namespaces,
    delegates: (key: string) => perTarget.get(key)?.delegates,
    registry: clusters,
    sourceClusterName: config.clusterName,
    events,
    clock,
    follow,
  });
  const svc = new ServiceReconciler({
    sourceCore: core,
    services,
    proxies,
    registry: clusters,
    sourceClusterName: config.clusterName,
    events,
    targetServices: (key: string) => perTarget.get(key)?.services,
    delegates: (key: string) => listedDelegates(key),
  });
  const delegateEvents = new DelegateEventsReconciler({
    sourceCore: core,
    targetEvents: (key: string) => perTarget.get(key)?.events,
    delegates: (key: string) => perTarget.get(key)?.delegates,
    proxies,
    virtualNodeOf: (key: string) => clusters.nodeNameOf(key),
    targetName: (key: string) => clusters.get(key)?.displayName,
    sourceClusterName: config.clusterName,
    clock,
    logger: w.logger,
    copies: config.delegateEvents,
  });
  // A proxy's key is grouped by its virtual node (one per target): a target whose calls hang
  // holds at most --workers-per-target workers, and the others keep flowing.
  const delegationController = w.newController('delegation', delegation, {
    shards: {
      of: (key) => {
        const [namespace, name] = key.split('/');
        // Not a namespace/name key: no proxy, so no group.
        if (name === undefined) return undefined;
        return proxies.get(name, namespace)?.spec?.nodeName || undefined;
      },
      maxInFlight: config.workersPerTarget,
    },
  });
  const eventsController = w.newController('delegate-events', delegateEvents);
  const followController = w.newController('follow', follow);
  const servicesController = w.newController('services', svc);
  /** The reconcilers that pass over a target in an outage, with their controllers. */
  const copyPasses = [
    [follow.passes, followController],
    [svc.passes, servicesController],
  ] as const;
  delegationController.watch(proxies, (p) => [DelegationReconciler.proxyKey(p)]);
  followController.watch(proxies, (p) => FollowReconciler.keysOfProxy(p));
  // Opting a namespace in or out changes what its proxies may do.
  delegationController.watch(namespaces, (n) => proxies.list(n.metadata?.name).map((p) => DelegationReconciler.proxyKey(p)));
  followController.watch(namespaces, (n) => proxies.list(n.metadata?.name).flatMap((p) => FollowReconciler.keysOfProxy(p)));
  servicesController.watch(services, (s) => [ServiceReconciler.keyOf(s)]);
  servicesController.watch(proxies, (p) => svc.keysOfProxy(p));

  const addTarget = (t: TargetClient) => {
    const existing = perTarget.get(t.key);
    if (existing) removeTarget(t);
    // A Target's Source grants rights in the Target's namespace only; a ClusterTarget's, everywhere.
    const ns = t.ref.kind === 'Target' ? t.ref.namespace : undefined;
    const path = (resource: string) => (ns ? `/api/v1/namespaces/${ns}/${resource}` : `/api/v1/${resource}`);
    // What the target's server can make its informers hold is bounded by one budget for all
    // of them (see CacheBudget); its refusal makes the target not Ready.
    const budget = clusters.cacheBudget(t.key);
    const informer = <T extends KubernetesObject>(name: string, resource: string, list: InformerOptions<T>['list'], cached?: CachedObjects<T>) =>
      w.newInformer<T>({ ...cached, name, cluster: t.displayName, kubeConfig: t.kubeConfig, path: path(resource), list, labelSelector: ours, budget });
    const entry = {
      delegates: informer<V1Pod>('delegates', 'pods', (page) => (ns ? t.core.listNamespacedPod({ namespace: ns, ...page }) : t.core.listPodForAllNamespaces(page)), {
        transform: delegateFields,
        indexers: { [DelegationReconciler.BY_PROXY_INDEX]: DelegationReconciler.delegatesByProxy(config.clusterName) },
        share: sharePodParts,
      }),
      configMaps: informer<V1ConfigMap>('configmap-copies', 'configmaps', (page) => (ns ? t.core.listNamespacedConfigMap({ namespace: ns, ...page }) : t.core.listConfigMapForAllNamespaces(page))),
      secrets: informer<V1Secret>('secret-copies', 'secrets', (page) => (ns ? t.core.listNamespacedSecret({ namespace: ns, ...page }) : t.core.listSecretForAllNamespaces(page))),
      services: informer<V1Service>('service-copies', 'services', (page) => (ns ? t.core.listNamespacedService({ namespace: ns, ...page }) : t.core.listServiceForAllNamespaces(page))),
      // Events carry no labels of ours: take the pod events the selector lets through, keep
      // those about our delegates (all of them until the proxies are known, which tell ours), so
      // the cache grows with our delegates' events, not with the target's; of those, what is
      // copied and what cluster-autoscaler says about a pending delegate (the bind and
      // re-placement read it).
      events: w.newInformer<CoreV1Event>({
        name: 'delegate-events',
        cluster: t.displayName,
        kubeConfig: t.kubeConfig,
        path: path('events'),
        list: (page) => (ns ? t.core.listNamespacedEvent({ namespace: ns, ...page }) : t.core.listEventForAllNamespaces(page)),
        fieldSelector: podEvents,
        keep: (ev) =>
          (copiesEvent(config.delegateEvents, ev) || isAutoscalerVerdict(ev)) &&
          (!proxies.hasSynced() ||
            isAboutDelegateOf(
              ev,
              config.clusterName,
              (name, namespace) => proxies.get(name, namespace),
              (namespace) => proxies.list(namespace),
            )),
        indexers: { [DelegateEventsReconciler.BY_POD_INDEX]: DelegateEventsReconciler.eventsByPod },
        budget,
      }),
    };
    perTarget.set(t.key, entry);
    const perTargetOnly = { waitForSync: false };
    unwatchers.set(t.key, [
      delegationController.watch(entry.delegates, (p) => DelegationReconciler.delegateToProxyKey(p, config.clusterName), perTargetOnly),
      followController.watch(entry.configMaps, (o) => FollowReconciler.keysOfCopy('configmap', o), perTargetOnly),
      followController.watch(entry.secrets, (o) => FollowReconciler.keysOfCopy('secret', o), perTargetOnly),
      servicesController.watch(entry.services, (s) => ServiceReconciler.keysOfCopy(s), perTargetOnly),
      servicesController.watch(entry.delegates, (p) => svc.keysOfDelegate(p), perTargetOnly),
      eventsController.watch(entry.events, (ev) => delegateEvents.keysOfEvent(t.key, ev), perTargetOnly),
      // cluster-autoscaler's word on a pending delegate may make it stuck (or not): look again.
      ...(replacementController ? [replacementController.watch(entry.events, (ev) => (isAutoscalerVerdict(ev) ? [t.key] : []), perTargetOnly)] : []),
    ]);
    for (const verb of ['add', 'update', 'delete'] as const) {
      entry.delegates.on(verb, (p) => {
        for (const listener of delegateListeners) listener(t.key, p, verb);
      });
    }
    // Events can arrive before their delegate is cached: look at them again when it is.
    entry.delegates.on('add', (p) => {
      for (const k of delegateEvents.keysOfDelegate(t.key, p, entry.events)) eventsController.enqueue(k);
    });
    for (const i of Object.values(entry)) i.start();
    // Proxies bound to this target may have been waiting for its clients.
    for (const p of proxies.list()) delegationController.enqueue(DelegationReconciler.proxyKey(p));
  };
  const removeTarget = (t: TargetClient) => {
    const entry = perTarget.get(t.key);
    if (!entry) return;
    perTarget.delete(t.key);
    for (const unwatch of unwatchers.get(t.key) ?? []) unwatch();
    unwatchers.delete(t.key);
    for (const i of Object.values(entry)) i.stop();
    // Keys that passed the target over in an outage: a pass with the clients there are now.
    for (const [passes, controller] of copyPasses) for (const k of passes.drop(t.key)) controller.enqueue(k);
  };
  // From the first probe on, whether or not this replica leads.
  clusters.on('added', addTarget);
  clusters.on('removed', removeTarget);

  // Delegates by target and phase, and what each target's caches hold, every 15 s.
  const timer = setInterval(() => {
    metrics.delegates.reset();
    metrics.targetCacheBytes.reset();
    for (const [key, entry] of perTarget) {
      metrics.targetCacheBytes.set({ target: clusters.get(key)?.displayName ?? key }, clusters.cacheBudget(key).usedBytes);
      const counts = new Map<string, number>();
      for (const p of entry.delegates.list()) counts.set(p.status?.phase ?? 'Unknown', (counts.get(p.status?.phase ?? 'Unknown') ?? 0) + 1);
      for (const [phase, n] of counts) metrics.delegates.set({ target: clusters.get(key)?.displayName ?? key, phase }, n);
    }
  }, 15_000);
  timer.unref();
  const runnables: Runnable[] = [
    {
      name: 'target caches',
      start: () => undefined,
      stop: () => {
        clearInterval(timer);
        for (const entry of perTarget.values()) for (const i of Object.values(entry)) i.stop();
        perTarget.clear();
        unwatchers.clear();
      },
    },
    leaderController(delegationController, [proxies, namespaces]),
    leaderController(outageController, [proxies, namespaces]),
    ...(replacementController ? [leaderController(replacementController, [proxies])] : []),
    leaderController(eventsController, []),
    leaderController(followController, [proxies, namespaces]),
    leaderController(servicesController, [services, proxies]),
  ];
  return {
    namespaces,
    delegates: (key) => perTarget.get(key)?.delegates,
    targetEvents: (key) => perTarget.get(key)?.events,
    onDelegateChange: (listener) => delegateListeners.push(listener),
    follow,
    runnables,
    outage: { mayCreateDelegates: (key) => outage.mayCreateDelegates(key) },
    afterProbe: (key) => {
      outageController.enqueue(key);
      replacementController?.enqueue(key);
      // Follow and services pass over a target in an outage: their keys come back with it.
      for (const [passes, controller] of copyPasses) for (const k of passes.wake(key)) controller.enqueue(k);
    },
  };
}
