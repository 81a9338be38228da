import { AuthenticationV1Api, AuthorizationV1Api, RbacAuthorizationV1Api, type KubernetesObject, type V1Pod } from '@kubernetes/client-node';
import { ServerAddressPolicy } from '../clusters/server-address-policy.js';
import type { Controller } from '../controller/controller.js';
import type { Informer } from '../controller/informer.js';
import { leaderController } from '../controller/manager.js';
import { parseTargetKey } from '../clusters/target-client.js';
import { perObject } from '../core/per-object.js';
import { PROVIDER_VERSION } from '../core/version.js';
import { delegatePodName, virtualNodeName } from '../model/names.js';
import type { TargetSet } from '../sharding/shards.js';
import type { Target } from '../model/types.js';
import { SelfTargetBindings } from '../reconcilers/self-target-bindings.js';
import type { TargetAuthorization } from '../reconcilers/target-authorization.js';
import { TargetRegistryReconciler } from '../reconcilers/target-registry.js';
import { AFTER_BINDING_MS, VirtualNodeReconciler } from '../reconcilers/virtual-nodes.js';
import type { Wiring } from './wiring.js';
import { crdCache, delegatesCache, proxiesOnNode, virtualNodesCache } from './caches.js';

/** The caches of Targets and ClusterTargets, kept on every replica. */
export interface TargetInformers {
  targets: Informer<Target & KubernetesObject>;
  clusterTargets: Informer<Target & KubernetesObject>;
}

/**
 * Targets: the registry (clients, summaries, health) filled on every replica by the read side,
 * and the virtual nodes, their Leases and the Targets' status written by the leader. Each
 * target in the registry is engaged in the manager (its caches come and go with it: see
 * `Manager.onEngage`), and each probe is said on the registry (`probed`), which wakes the
 * writer (the probe period is the node Lease period) and the parts that look at a target after
 * its probe. `proxies` is the proxies cache when delegation runs: a virtual node then offers
 * back the room of the proxies whose delegates the target's summary counts, read from the
 * target's delegates cache. `authorization` is asked again on each probe of a ClusterTarget
 * from a Secret (see `TargetRegistryReconciler`). Returns the Target caches (the extender
 * reads `spec.placement` there).
 */
export interface TargetsOptions {
  proxies: Informer<V1Pod> | undefined;
  authorization?: TargetAuthorization;
}

export function setupTargets(wiring: Wiring, options: TargetsOptions): TargetInformers {
  const { kc, manager, clusters } = wiring;
  const targets = targetCaches(wiring);
  const selfBindings = new SelfTargetBindings({
    rbac: kc.makeApiClient(RbacAuthorizationV1Api),
    authentication: kc.makeApiClient(AuthenticationV1Api),
    authorization: kc.makeApiClient(AuthorizationV1Api),
  });
  // From the first probe on, whether or not this replica leads.
  clusters.on('added', (target) => manager.engage(target, clusters.cacheBudget(target.key)));
  clusters.on('removed', (target) => manager.disengage(target.key));
  const reader = setupTargetRegistry(wiring, targets, selfBindings, options.authorization);
  setupVirtualNodes(wiring, { targets, selfBindings, proxies: options.proxies, reader });
  return targets;
}

/**
 * The Targets and ClusterTargets that exist, by key and by virtual node name, from their caches
 * alone: the same on every replica, whatever each one's probes found (a replica whose probe of
 * a target failed still maps the target's proxies to it). What the shards are made of, and how
 * a writer's key finds its shard.
 */
export class TargetIndex implements TargetSet {
  private readonly byNode = new Map<string, string>();

  constructor(private readonly informers: TargetInformers) {
    const nodeOf = (t: Target, kind: 'Target' | 'ClusterTarget') => virtualNodeName({ kind, namespace: kind === 'Target' ? (t.metadata.namespace ?? '') : '', name: t.metadata.name ?? '' });
    for (const [informer, kind] of [
      [informers.targets, 'Target'],
      [informers.clusterTargets, 'ClusterTarget'],
    ] as const) {
      informer.on('add', (t) => this.byNode.set(nodeOf(t, kind), VirtualNodeReconciler.keyOf(t, kind)));
      informer.on('delete', (t) => this.byNode.delete(nodeOf(t, kind)));
    }
  }

  keys(): string[] {
    return [...this.informers.targets.list().map((t) => VirtualNodeReconciler.keyOf(t, 'Target')), ...this.informers.clusterTargets.list().map((t) => VirtualNodeReconciler.keyOf(t, 'ClusterTarget'))];
  }

  has(key: string): boolean {
    let ref;
    try {
      ref = parseTargetKey(key);
    } catch {
      return false;
    }
    return ref.kind === 'Target' ? this.informers.targets.get(ref.name, ref.namespace) !== undefined : this.informers.clusterTargets.get(ref.name) !== undefined;
  }

  /** The key of the target whose virtual node is `nodeName`, if that target exists. */
  keyOfNode(nodeName: string): string | undefined {
    return this.byNode.get(nodeName);
  }

  hasSynced(): boolean {
    return this.informers.targets.hasSynced() && this.informers.clusterTargets.hasSynced();
  }
}

/**
 * The index of the targets; with sharding, the targets to shard, and a pass on each Target
 * that comes or goes.
 */
export function targetIndex(wiring: Wiring): TargetIndex {
  const informers = targetCaches(wiring);
  const index = new TargetIndex(informers);
  const { shards } = wiring;
  if (shards) {
    shards.track(index);
    informers.targets.on('add', () => shards.changed());
    informers.clusterTargets.on('add', () => shards.changed());
    informers.targets.on('delete', (t) => shards.removed(VirtualNodeReconciler.keyOf(t, 'Target')));
    informers.clusterTargets.on('delete', (t) => shards.removed(VirtualNodeReconciler.keyOf(t, 'ClusterTarget')));
  }
  return index;
}

/** The caches of Targets and ClusterTargets (this cluster's). */
export function targetCaches(wiring: Wiring): TargetInformers {
  return { targets: crdCache<Target & KubernetesObject>(wiring, 'targets'), clusterTargets: crdCache<Target & KubernetesObject>(wiring, 'clustertargets') };
}

/** The read side, on every replica: probes each target and records it in the registry. */
function setupTargetRegistry(wiring: Wiring, { targets, clusterTargets }: TargetInformers, selfBindings: SelfTargetBindings, authorization: TargetAuthorization | undefined): Controller {
  const { config, kc, core, manager, clusters } = wiring;
  const reader = wiring.newController(
    'target-registry',
    new TargetRegistryReconciler({
      sourceKubeConfig: kc,
      sourceCore: core,
      targets,
      clusterTargets,
      registry: clusters,
      serverPolicy: new ServerAddressPolicy({ allowLoopback: config.allowLoopbackTargets }),
      requestTimeoutMs: config.apiRequestTimeoutSeconds * 1000,
      selfBindings,
      authorization,
      clock: wiring.clock,
      leaseIntervalMs: config.nodeLeaseIntervalSeconds * 1000,
      onHealth: (target, isReady) => wiring.metrics.targetReady.set({ target }, isReady ? 1 : 0),
      onProbed: (key) => clusters.probed(key),
    }),
  );
  reader.watch(targets, (t) => [VirtualNodeReconciler.keyOf(t, 'Target')]);
  reader.watch(clusterTargets, (t) => [VirtualNodeReconciler.keyOf(t, 'ClusterTarget')]);
  manager.add({ name: 'target-registry', caches: [targets, clusterTargets], start: () => reader.start(), stop: (ms) => reader.stop(ms) });
  return reader;
}

/** The write side, on the leader: the virtual nodes, their Leases and the Targets' status. */
function setupVirtualNodes(wiring: Wiring, options: { targets: TargetInformers; selfBindings: SelfTargetBindings; proxies: Informer<V1Pod> | undefined; reader: Controller }): void {
  const { config, core, custom, manager, clusters } = wiring;
  const { targets, clusterTargets } = options.targets;
  const { proxies, reader } = options;
  const virtualNodes = virtualNodesCache(wiring);
  // What our proxies hold in each target: the delegates cache, shared with delegation's.
  const delegates = proxies && manager.perTarget((target, caches) => delegatesCache(caches, target, config.clusterName));
  // A delegate's name hashes its proxy's UID: once per cached proxy, not once per proxy on every write of its node.
  const delegateNames = perObject((proxy: V1Pod) => delegatePodName(proxy.metadata?.name ?? '', config.clusterName, proxy.metadata?.uid ?? ''));
  const writer = wiring.newController(
    'targets',
    new VirtualNodeReconciler({
      sourceCore: core,
      sourceCustom: custom,
      sourceCoordination: wiring.coordination,
      targets,
      clusterTargets,
      virtualNodes,
      registry: clusters,
      proxiesOn: proxies ? proxiesOnNode(proxies) : () => [],
      delegateOf: (key, proxy) => delegates?.(key)?.get(delegateNames(proxy), proxy.metadata?.namespace),
      selfBindings: options.selfBindings,
      kubelet: { address: config.kubeletAddress, port: config.kubeletPort },
      kubeletVersion: PROVIDER_VERSION,
      events: wiring.events,
      clock: wiring.clock,
      nodeStatusIntervalMs: config.nodeStatusIntervalSeconds * 1000,
      onBindingWritten: (key) => reader.enqueueAfter(key, AFTER_BINDING_MS),
      // The extender's filter judges preemption in targets only for the proxy scheduler's pods.
      advertisePreemptible: config.proxySchedulerName !== '',
    }),
    { shardOf: (key) => key },
  );
  writer.watch(targets, (t) => [VirtualNodeReconciler.keyOf(t, 'Target')]);
  writer.watch(clusterTargets, (t) => [VirtualNodeReconciler.keyOf(t, 'ClusterTarget')]);
  writer.watch(virtualNodes, (n) => VirtualNodeReconciler.keyOfNode(n, { targets, clusterTargets }));
  // Woken after every probe: the probe period is the node Lease period.
  clusters.on('probed', (key) => writer.enqueue(key));
  manager.add(leaderController(writer, [targets, clusterTargets, virtualNodes, ...(proxies ? [proxies] : [])]));
}
