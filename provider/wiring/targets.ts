import { AuthenticationV1Api, AuthorizationV1Api, CoordinationV1Api, RbacAuthorizationV1Api, type KubernetesObject, type V1Pod } from '@kubernetes/client-node';
import { ServerAddressPolicy } from '../clusters/server-address-policy.js';
import { Controller } from '../controller/controller.js';
import type { Informer } from '../controller/informer.js';
import { leaderController } from '../controller/manager.js';
import { perObject } from '../core/per-object.js';
import { PROVIDER_VERSION } from '../core/version.js';
import { delegatePodName } from '../model/names.js';
import type { Target } from '../model/types.js';
import type { ObjectCache } from '../controller/object-cache.js';
import { SelfTargetBindings } from '../reconcilers/self-target-bindings.js';
import type { TargetAuthorization } from '../reconcilers/target-authorization.js';
import { TargetRegistryReconciler } from '../reconcilers/target-registry.js';
import { AFTER_BINDING_MS, TargetsReconciler } from '../reconcilers/targets.js';
import type { Wiring } from './wiring.js';
import { crdCache, virtualNodesCache } from './caches.js';

/** The caches of Targets and ClusterTargets, kept on every replica. */
export interface TargetInformers {
  targets: Informer<Target & KubernetesObject>;
  clusterTargets: Informer<Target & KubernetesObject>;
}

/**
 * Targets: the registry (clients, summaries, health) filled on every replica by the read side,
 * and the virtual nodes, their Leases and the Targets' status written by the leader. Returns
 * the Target caches (the extender reads `spec.placement` there). `delegates` is a target's
 * delegate cache once delegation runs: a virtual node offers back the room of the proxies whose
 * delegates the target's summary counts. `authorization` is asked again on each probe of a
 * ClusterTarget from a Secret (see `TargetRegistryReconciler`).
 */
export interface TargetsWiringOptions {
  coordination: CoordinationV1Api;
  proxies: Informer<V1Pod> | undefined;
  /** Called with a target's key after each of its probes. */
  afterProbe: (targetKey: string) => void;
  delegates: (targetKey: string) => ObjectCache<V1Pod> | undefined;
  authorization?: TargetAuthorization;
}

export function wireTargets(w: Wiring, options: TargetsWiringOptions): TargetInformers {
  const { config, kc, core, custom, manager } = w;
  const { coordination, proxies, afterProbe, delegates, authorization } = options;
  const targets = crdCache<Target & KubernetesObject>(w, 'targets');
  const clusterTargets = crdCache<Target & KubernetesObject>(w, 'clustertargets');
  const virtualNodes = virtualNodesCache(w);
  const selfBindings = new SelfTargetBindings({
    rbac: kc.makeApiClient(RbacAuthorizationV1Api),
    authentication: kc.makeApiClient(AuthenticationV1Api),
    authorization: kc.makeApiClient(AuthorizationV1Api),
  });
  // The writer is woken after every probe: the probe period is the node Lease period.
  let writer: Controller | undefined;
  const reader = w.newController(
    'target-registry',
    new TargetRegistryReconciler({
      sourceKubeConfig: kc,
      sourceCore: core,
      targets,
      clusterTargets,
      registry: w.clusters,
      serverPolicy: new ServerAddressPolicy({ allowLoopback: config.allowLoopbackTargets }),
      requestTimeoutMs: config.apiRequestTimeoutSeconds * 1000,
      selfBindings,
      authorization,
      clock: w.clock,
      leaseIntervalMs: config.nodeLeaseIntervalSeconds * 1000,
      onHealth: (target, isReady) => w.metrics.targetReady.set({ target }, isReady ? 1 : 0),
      onProbed: (key) => {
        writer?.enqueue(key);
        afterProbe(key);
      },
    }),
  );
  reader.watch(targets, (o) => [TargetsReconciler.keyOf(o, 'Target')]);
  reader.watch(clusterTargets, (o) => [TargetsReconciler.keyOf(o, 'ClusterTarget')]);
  manager.add({ name: 'target-registry', caches: [targets, clusterTargets], start: () => reader.start(), stop: (ms) => reader.stop(ms) });

  // A delegate's name hashes its proxy's UID: once per cached proxy, not once per proxy on every write of its node.
  const delegateNames = perObject((proxy: V1Pod) => delegatePodName(proxy.metadata?.name ?? '', config.clusterName, proxy.metadata?.uid ?? ''));
  writer = w.newController(
    'targets',
    new TargetsReconciler({
      sourceCore: core,
      sourceCustom: custom,
      sourceCoordination: coordination,
      targets,
      clusterTargets,
      virtualNodes,
      registry: w.clusters,
      proxiesOn: (nodeName) => (proxies ? proxies.list().filter((p) => p.spec?.nodeName === nodeName) : []),
      delegateOf: (key, proxy) => delegates(key)?.get(delegateNames(proxy), proxy.metadata?.namespace),
      selfBindings,
      kubelet: { address: config.kubeletAddress, port: config.kubeletPort },
      kubeletVersion: PROVIDER_VERSION,
      events: w.events,
      clock: w.clock,
      nodeStatusIntervalMs: config.nodeStatusIntervalSeconds * 1000,
      onBindingWritten: (key) => reader.enqueueAfter(key, AFTER_BINDING_MS),
      // The extender's filter judges preemption in targets only for the proxy scheduler's pods.
      advertisePreemptible: config.proxySchedulerName !== '',
    }),
  );
  writer.watch(targets, (o) => [TargetsReconciler.keyOf(o, 'Target')]);
  writer.watch(clusterTargets, (o) => [TargetsReconciler.keyOf(o, 'ClusterTarget')]);
  writer.watch(virtualNodes, (n) => TargetsReconciler.keyOfNode(n, { targets, clusterTargets }));
  manager.add(leaderController(writer, [targets, clusterTargets, virtualNodes, ...(proxies ? [proxies] : [])]));
  return { targets, clusterTargets };
}
