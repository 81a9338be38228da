import type { CoreV1Event, V1ConfigMap, V1Namespace, V1Pod, V1Secret, V1Service } from '@kubernetes/client-node';
import type { TargetClient } from '../clusters/target-client.js';
import type { ClusterCaches } from '../controller/cluster-caches.js';
import type { Controller } from '../controller/controller.js';
import type { Informer } from '../controller/informer.js';
import { leaderController } from '../controller/manager.js';
import { isAutoscalerVerdict } from '../model/autoscaler.js';
import { virtualNodeName } from '../model/names.js';
import type { CopyNames } from '../model/pod-references.js';
import { copiesEvent, isAboutDelegateOf, targetEventsSelector } from '../model/proxy-event.js';
import type { BeingPlaced } from '../../scheduler/being-placed.js';
import { CLUSTER_WIDE, type Wiring } from './wiring.js';
import type { TargetIndex } from './targets.js';
import { delegatesCache, ownedBy, proxiesOnNode, targetScope } from './caches.js';

/** What delegation gives the rest of the wiring (the binder, the extender, the kubelet API), with the caches it was set up with. */
export interface Delegation extends DelegationOptions {
  delegates: (key: string) => Informer<V1Pod> | undefined;
  /** Pod events in a target (the binder reads cluster-autoscaler's word on a delegate there). */
  targetEvents: (key: string) => Informer<CoreV1Event> | undefined;
  /** Calls `listener` with the target's key for every delegate any target's informer adds, updates or deletes. */
  onDelegateChange(listener: (targetKey: string, delegate: V1Pod, verb: 'add' | 'update' | 'delete') => void): void;
  follow: { ensureCopies(proxy: V1Pod, target: TargetClient): Promise<CopyNames> };
  outage: { mayCreateDelegates(targetKey: string): boolean };
}

export interface DelegationOptions {
  proxies: Informer<V1Pod>;
  namespaces: Informer<V1Namespace>;
  /** What the binder is placing: follow keeps their copies (see `BeingPlaced`). */
  beingPlaced: BeingPlaced;
  /** The targets by virtual node: a proxy's shard is its target's (none without the targets part). */
  targetIndex: TargetIndex | undefined;
  /** Keeps a target off a controller's pods for a while (the extender's placement memory); absent without the extender. */
  avoid: ((ownerUid: string, targetKey: string, reason: string, untilMs: number) => void) | undefined;
}

/** The reconcilers, loaded only when delegation is enabled: target-only installs never load them. */
async function loadReconcilers() {
  const [{ DelegationReconciler }, { FollowReconciler }, { ServiceReconciler }, { DelegateEventsReconciler }, { OutageReconciler }, { ReplacementReconciler }] = await Promise.all([
    import('../reconcilers/delegation.js'),
    import('../reconcilers/follow.js'),
    import('../reconcilers/services.js'),
    import('../reconcilers/delegate-events.js'),
    import('../reconcilers/outage.js'),
    import('../reconcilers/replacement.js'),
  ]);
  return { DelegationReconciler, FollowReconciler, ServiceReconciler, DelegateEventsReconciler, OutageReconciler, ReplacementReconciler };
}
type Reconcilers = Awaited<ReturnType<typeof loadReconcilers>>;

/** What each target's caches hold for delegation's controllers. */
interface DelegationCaches {
  delegates: Informer<V1Pod>;
  configMaps: Informer<V1ConfigMap>;
  secrets: Informer<V1Secret>;
  services: Informer<V1Service>;
  events: Informer<CoreV1Event>;
}

/** What the per-controller setups share: the wiring, the loaded reconcilers, the caches of this cluster and of each target. */
interface DelegationParts {
  wiring: Wiring;
  reconcilers: Reconcilers;
  proxies: Informer<V1Pod>;
  targetIndex: TargetIndex | undefined;
  namespaces: Informer<V1Namespace>;
  /** A target's caches, while it is engaged. */
  perTarget: (key: string) => DelegationCaches | undefined;
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
  listedDelegates: (key: string, andEvents?: boolean) => Informer<V1Pod> | undefined;
}

/** A target's caches do not hold the controllers' start: each reconciler tells whether they have listed. */
const PER_TARGET_ONLY = { waitForSync: false };

/** Undoes `unwatchers` when `signal` is aborted (the target left). */
function untilAborted(signal: AbortSignal, ...unwatchers: Array<() => void>): void {
  signal.addEventListener('abort', () => unwatchers.forEach((unwatch) => unwatch()), { once: true });
}

/**
 * Proxies -> delegates, follow, services, delegate events, outages and re-placement: one setup
 * per controller. Source-side caches are the manager's; each target's (delegates, copies,
 * events) come with the target and go with it (see `Manager.onEngage`), so a broken target
 * never stalls the others. The per-target caches run on every replica (the binder reads
 * delegates; a new leader starts on warm caches); the controllers run on the leader.
 */
export async function setupDelegation(wiring: Wiring, options: DelegationOptions): Promise<Delegation> {
  const { proxies, namespaces } = options;
  const reconcilers = await loadReconcilers();
  const { perTarget, onDelegateChange } = setupDelegationCaches(wiring, proxies, reconcilers);
  const listedDelegates = (key: string, andEvents = false): Informer<V1Pod> | undefined => {
    const entry = perTarget(key);
    return entry?.delegates.hasSynced() && (!andEvents || entry.events.hasSynced()) ? entry.delegates : undefined;
  };
  const parts: DelegationParts = { wiring, reconcilers, proxies, namespaces, targetIndex: options.targetIndex, perTarget, listedDelegates };
  const follow = setupFollow(parts, options.beingPlaced);
  const outage = setupOutage(parts);
  const replacement = options.avoid && setupReplacement(parts, options.avoid);
  setupDelegationController(parts, { follow, mayCreateDelegates: (key) => outage.mayCreateDelegates(key) });
  setupServices(parts);
  setupDelegateEvents(parts, replacement);
  return {
    ...options,
    delegates: (key) => perTarget(key)?.delegates,
    targetEvents: (key) => perTarget(key)?.events,
    onDelegateChange,
    follow,
    outage: { mayCreateDelegates: (key) => outage.mayCreateDelegates(key) },
  };
}

/**
 * Each target's caches for delegation, asked for when it joins, and the metrics of what they
 * hold (delegates by target and phase, bytes cached per target) every 15 s.
 */
function setupDelegationCaches(wiring: Wiring, proxies: Informer<V1Pod>, { DelegationReconciler, DelegateEventsReconciler }: Reconcilers) {
  const { config, clusters, metrics, manager } = wiring;
  // Pod events that the events cache may keep (see targetEventsSelector): not ours, and not the
  // routine ones unless they are copied.
  const podEvents = targetEventsSelector(config.delegateEvents);
  // Events carry no labels of ours: take the pod events the selector lets through, keep those
  // about our delegates (all of them until the proxies are known, which tell ours), so the cache
  // grows with our delegates' events, not with the target's; of those, what is copied and what
  // cluster-autoscaler says about a pending delegate (the bind and re-placement read it). One
  // function for every target, so that the target's caches compare it as the same request's.
  const keepEvent = (ev: CoreV1Event) =>
    (copiesEvent(config.delegateEvents, ev) || isAutoscalerVerdict(ev)) &&
    (!proxies.hasSynced() ||
      isAboutDelegateOf(
        ev,
        config.clusterName,
        (name, namespace) => proxies.get(name, namespace),
        (namespace) => proxies.list(namespace),
      ));
  const byProxy = { [DelegationReconciler.BY_PROXY_INDEX]: DelegationReconciler.delegatesByProxy(config.clusterName) };
  const delegateListeners: Array<(targetKey: string, delegate: V1Pod, verb: 'add' | 'update' | 'delete') => void> = [];
  const perTarget = manager.perTarget((target, caches): DelegationCaches => {
    const copies = copyCaches(caches, target, config.clusterName);
    const { namespace, path } = targetScope(target);
    const entry: DelegationCaches = {
      delegates: delegatesCache(caches, target, config.clusterName, byProxy),
      ...copies,
      events: caches.informer<CoreV1Event>({
        name: 'delegate-events',
        resource: path('events'),
        list: (page) => (namespace ? target.core.listNamespacedEvent({ namespace, ...page }) : target.core.listEventForAllNamespaces(page)),
        fieldSelector: podEvents,
        keep: keepEvent,
        indexers: { [DelegateEventsReconciler.BY_POD_INDEX]: DelegateEventsReconciler.eventsByPod },
      }),
    };
    for (const verb of ['add', 'update', 'delete'] as const) {
      entry.delegates.on(verb, (p) => {
        for (const listener of delegateListeners) listener(target.key, p, verb);
      });
    }
    return entry;
  });
  let timer: ReturnType<typeof setInterval> | undefined;
  const report = () => {
    metrics.delegates.reset();
    metrics.targetCacheBytes.reset();
    for (const key of manager.engagedTargets()) {
      const entry = perTarget(key);
      if (!entry) continue;
      const target = clusters.get(key)?.displayName ?? key;
      metrics.targetCacheBytes.set({ target }, clusters.cacheBudget(key).usedBytes);
      const counts = new Map<string, number>();
      for (const p of entry.delegates.list()) counts.set(p.status?.phase ?? 'Unknown', (counts.get(p.status?.phase ?? 'Unknown') ?? 0) + 1);
      for (const [phase, n] of counts) metrics.delegates.set({ target, phase }, n);
    }
  };
  manager.add({
    name: 'delegate metrics',
    start: () => {
      timer = setInterval(report, 15_000);
      timer.unref();
    },
    stop: () => clearInterval(timer),
  });
  return { perTarget, onDelegateChange: (listener: (typeof delegateListeners)[number]) => void delegateListeners.push(listener) };
}

/** The copies of ConfigMaps, Secrets and Services we made in a target. */
function copyCaches(caches: ClusterCaches, target: TargetClient, sourceClusterName: string): Pick<DelegationCaches, 'configMaps' | 'secrets' | 'services'> {
  const { namespace, path } = targetScope(target);
  const core = target.core;
  const labelSelector = ownedBy(sourceClusterName);
  return {
    configMaps: caches.informer<V1ConfigMap>({
      name: 'configmap-copies',
      resource: path('configmaps'),
      labelSelector,
      list: (page) => (namespace ? core.listNamespacedConfigMap({ namespace, ...page }) : core.listConfigMapForAllNamespaces(page)),
    }),
    secrets: caches.informer<V1Secret>({
      name: 'secret-copies',
      resource: path('secrets'),
      labelSelector,
      list: (page) => (namespace ? core.listNamespacedSecret({ namespace, ...page }) : core.listSecretForAllNamespaces(page)),
    }),
    services: caches.informer<V1Service>({
      name: 'service-copies',
      resource: path('services'),
      labelSelector,
      list: (page) => (namespace ? core.listNamespacedService({ namespace, ...page }) : core.listServiceForAllNamespaces(page)),
    }),
  };
}

/**
 * A controller that passes over a target in an outage: its keys come back with the target's
 * next probe, and with its next clients (a pass with the clients there are now).
 */
function wakePasses(parts: DelegationParts, passes: { wake(targetKey: string): Iterable<string>; drop(targetKey: string): Iterable<string> }, controller: Controller): void {
  parts.wiring.clusters.on('probed', (key) => {
    for (const k of passes.wake(key)) controller.enqueue(k);
  });
  parts.wiring.manager.onEngage((target, _caches, signal) =>
    signal.addEventListener('abort', () => {
      for (const k of passes.drop(target.key)) controller.enqueue(k);
    }),
  );
}

/** Follow: the copies of the ConfigMaps and Secrets that proxies use, in their targets. */
function setupFollow(parts: DelegationParts, beingPlaced: BeingPlaced) {
  const { wiring, proxies, namespaces, perTarget } = parts;
  const { FollowReconciler } = parts.reconcilers;
  const follow = new FollowReconciler({
    placing: (namespace) => beingPlaced.placing(namespace),
    sourceCore: wiring.core,
    proxies,
    namespaces,
    registry: wiring.clusters,
    sourceClusterName: wiring.config.clusterName,
    events: wiring.events,
    targetConfigMaps: (key: string) => perTarget(key)?.configMaps,
    targetSecrets: (key: string) => perTarget(key)?.secrets,
    delegates: (key: string) => parts.listedDelegates(key),
  });
  // Its keys span targets: the cluster-wide shard's.
  const controller = wiring.newController('follow', follow, { shardOf: CLUSTER_WIDE });
  controller.watch(proxies, (p) => FollowReconciler.keysOfProxy(p));
  // Opting a namespace in or out changes what its proxies may do.
  controller.watch(namespaces, (n) => proxies.list(n.metadata?.name).flatMap((p) => FollowReconciler.keysOfProxy(p)));
  wiring.manager.onEngage((target, _caches, signal) => {
    const entry = perTarget(target.key)!;
    untilAborted(
      signal,
      controller.watch(entry.configMaps, (o) => FollowReconciler.keysOfCopy('configmap', o), PER_TARGET_ONLY),
      controller.watch(entry.secrets, (o) => FollowReconciler.keysOfCopy('secret', o), PER_TARGET_ONLY),
    );
  });
  wakePasses(parts, follow.passes, controller);
  wiring.manager.add(leaderController(controller, [proxies, namespaces]));
  return follow;
}

/**
 * Outages: proxies say their target is unreachable, fail over if asked, and a target that comes
 * back is fenced before delegation creates anything there. Looked at again after each probe.
 */
function setupOutage(parts: DelegationParts) {
  const { wiring, proxies, namespaces } = parts;
  const { OutageReconciler } = parts.reconcilers;
  const { core, clusters, config, events, clock, metrics } = wiring;
  const outage = new OutageReconciler({ sourceCore: core, proxies, proxiesOn: proxiesOnNode(proxies), namespaces, registry: clusters, sourceClusterName: config.clusterName, events, clock, metrics });
  const controller = wiring.newController('outage', outage, { shardOf: (key) => key });
  controller.watch(proxies, (p) => OutageReconciler.keysOfProxy(clusters, p));
  clusters.on('probed', (key) => controller.enqueue(key));
  wiring.manager.add(leaderController(controller, [proxies, namespaces]));
  return outage;
}

/**
 * Re-placement: pods whose delegate is stuck in a ready target go elsewhere (or say why not).
 * Only with the extender: its avoidance of the target is what sends the replacement elsewhere;
 * without it the controller's new pod could go back to wait in the same target. Returns the
 * controller, which cluster-autoscaler's word on a pending delegate wakes (see setupDelegateEvents).
 */
function setupReplacement(parts: DelegationParts, avoid: NonNullable<DelegationOptions['avoid']>): Controller {
  const { wiring, proxies, perTarget } = parts;
  const { ReplacementReconciler } = parts.reconcilers;
  const { core, clusters, config, events, clock, metrics } = wiring;
  const replacement = new ReplacementReconciler({
    sourceCore: core,
    proxies,
    delegates: (key: string) => parts.listedDelegates(key, true),
    targetEvents: (key: string) => perTarget(key)?.events,
    registry: clusters,
    sourceClusterName: config.clusterName,
    unschedulableAfterMs: config.replaceUnschedulableAfterMs,
    avoid,
    events,
    clock,
    metrics,
  });
  const controller = wiring.newController('replacement', replacement, { shardOf: (key) => key });
  clusters.on('probed', (key) => controller.enqueue(key));
  wiring.manager.add(leaderController(controller, [proxies]));
  return controller;
}

/** Delegation: a delegate in its target for each bound proxy, and the proxy's status from it. */
function setupDelegationController(parts: DelegationParts, options: { follow: InstanceType<Reconcilers['FollowReconciler']>; mayCreateDelegates: (key: string) => boolean }): void {
  const { wiring, proxies, namespaces, perTarget } = parts;
  const { DelegationReconciler } = parts.reconcilers;
  const { config } = wiring;
  const delegation = new DelegationReconciler({
    mayCreateDelegates: options.mayCreateDelegates,
    sourceCore: wiring.core,
    proxies,
    namespaces,
    delegates: (key: string) => perTarget(key)?.delegates,
    registry: wiring.clusters,
    sourceClusterName: config.clusterName,
    events: wiring.events,
    clock: wiring.clock,
    follow: options.follow,
  });
  // A proxy's shard is its target's; a proxy not bound (or gone) is the cluster-wide shard's.
  const shardOf = (key: string) => {
    const [namespace, name] = key.split('/');
    const nodeName = name === undefined ? undefined : proxies.get(name, namespace)?.spec?.nodeName;
    return nodeName ? parts.targetIndex?.keyOfNode(nodeName) : undefined;
  };
  // A proxy's key is grouped by its virtual node (one per target): a target whose calls hang
  // holds at most --workers-per-target workers, and the others keep flowing.
  const controller = wiring.newController('delegation', delegation, {
    shardOf,
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
  controller.watch(proxies, (p) => [DelegationReconciler.proxyKey(p)]);
  // Opting a namespace in or out changes what its proxies may do.
  controller.watch(namespaces, (n) => proxies.list(n.metadata?.name).map((p) => DelegationReconciler.proxyKey(p)));
  const onNode = proxiesOnNode(proxies);
  wiring.manager.onEngage((target, _caches, signal) => {
    const entry = perTarget(target.key)!;
    untilAborted(
      signal,
      controller.watch(entry.delegates, (p) => DelegationReconciler.delegateToProxyKey(p, config.clusterName), PER_TARGET_ONLY),
    );
    // Proxies bound to this target may have been waiting for its clients (those of its node: a
    // walk of every proxy for each target that joins cost targets times proxies at a start).
    const nodeName = wiring.clusters.nodeNameOf(target.key) ?? virtualNodeName(target.ref);
    for (const p of onNode(nodeName)) controller.enqueue(DelegationReconciler.proxyKey(p));
  });
  wiring.manager.add(leaderController(controller, [proxies, namespaces]));
}

/** Services: the copies of the Services that select proxies, in the proxies' targets. */
function setupServices(parts: DelegationParts): void {
  const { wiring, proxies, perTarget } = parts;
  const { ServiceReconciler } = parts.reconcilers;
  const { core, clusters, config, events } = wiring;
  // No informer over the source's ConfigMaps and Secrets: follow reads those that proxies
  // reference by name (least privilege: no list/watch of every Secret in the cluster).
  const services = wiring.manager.caches().informer<V1Service>({ name: 'services', resource: '/api/v1/services', list: (page) => core.listServiceForAllNamespaces(page) });
  const svc = new ServiceReconciler({
    sourceCore: core,
    services,
    proxies,
    registry: clusters,
    sourceClusterName: config.clusterName,
    events,
    targetServices: (key: string) => perTarget(key)?.services,
    delegates: (key: string) => parts.listedDelegates(key),
  });
  // Its keys span targets: the cluster-wide shard's.
  const controller = wiring.newController('services', svc, { shardOf: CLUSTER_WIDE });
  controller.watch(services, (s) => [ServiceReconciler.keyOf(s)]);
  controller.watch(proxies, (p) => svc.keysOfProxy(p));
  wiring.manager.onEngage((target, _caches, signal) => {
    const entry = perTarget(target.key)!;
    untilAborted(
      signal,
      controller.watch(entry.services, (s) => ServiceReconciler.keysOfCopy(s), PER_TARGET_ONLY),
      controller.watch(entry.delegates, (p) => svc.keysOfDelegate(p), PER_TARGET_ONLY),
    );
  });
  wakePasses(parts, svc.passes, controller);
  wiring.manager.add(leaderController(controller, [services, proxies]));
}

/**
 * Delegate events: a target's events about our delegates, copied onto their proxies. With
 * re-placement, cluster-autoscaler's word on a pending delegate may make it stuck (or not):
 * `replacement` looks at the target again.
 */
function setupDelegateEvents(parts: DelegationParts, replacement: Controller | undefined): void {
  const { wiring, proxies, perTarget } = parts;
  const { DelegateEventsReconciler } = parts.reconcilers;
  const { clusters, config } = wiring;
  const delegateEvents = new DelegateEventsReconciler({
    sourceCore: wiring.core,
    targetEvents: (key: string) => perTarget(key)?.events,
    delegates: (key: string) => perTarget(key)?.delegates,
    proxies,
    virtualNodeOf: (key: string) => clusters.nodeNameOf(key),
    targetName: (key: string) => clusters.get(key)?.displayName,
    sourceClusterName: config.clusterName,
    clock: wiring.clock,
    logger: wiring.logger,
    copies: config.delegateEvents,
  });
  const controller = wiring.newController('delegate-events', delegateEvents, { shardOf: (key) => key.split('|')[0] });
  wiring.manager.onEngage((target, _caches, signal) => {
    const entry = perTarget(target.key)!;
    untilAborted(
      signal,
      controller.watch(entry.events, (ev) => delegateEvents.keysOfEvent(target.key, ev), PER_TARGET_ONLY),
      ...(replacement ? [replacement.watch(entry.events, (ev) => (isAutoscalerVerdict(ev) ? [target.key] : []), PER_TARGET_ONLY)] : []),
    );
    // Events can arrive before their delegate is cached: look at them again when it is.
    entry.delegates.on('add', (p) => {
      for (const k of delegateEvents.keysOfDelegate(target.key, p, entry.events)) controller.enqueue(k);
    });
  });
  wiring.manager.add(leaderController(controller, []));
}
