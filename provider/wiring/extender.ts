import type { V1Pod } from '@kubernetes/client-node';
import type express from 'express';
import type { Informer } from '../controller/informer.js';
import { standbyMayCreateDelegates } from '../model/outage.js';
import { Binder } from '../../scheduler/bind.js';
import { createExtenderApp } from '../../scheduler/extender-server.js';
import { PlacementMemory } from '../../scheduler/placement-memory.js';
import { nodesOfSummary } from '../../scheduler/target-nodes.js';
import { parseTargetKey } from '../clusters/target-client.js';
import { parseTargetPlacement } from '../model/target.js';
import { placementGroup } from '../../scheduler/placement-policy.js';
import type { DelegationWiring } from './delegation.js';
import type { TargetInformers } from './targets.js';
import type { Wiring } from './wiring.js';

/**
 * The scheduler extender (filter, prioritize and, with delegation, bind) on the webhook's
 * server, which every replica runs. Returns the binder, which follow asks for the proxies it is
 * placing.
 */
export function wireExtender(w: Wiring, routes: express.Router, proxies: Informer<V1Pod> | undefined, delegation: DelegationWiring | undefined, targets: TargetInformers | undefined): Binder | undefined {
  const memory = new PlacementMemory();
  const binder = delegation
    ? new Binder({
        sourceCore: w.core,
        registry: w.clusters,
        proxies: proxies!,
        namespaces: delegation.namespaces,
        delegates: delegation.delegates,
        follow: delegation.follow,
        memory,
        schedulerName: w.config.proxySchedulerName,
        sourceClusterName: w.config.clusterName,
        clock: w.clock,
        logger: w.logger,
        placeTimeoutMs: w.config.delegatePlacementTimeoutSeconds * 1000,
        // The leader fences a target that comes back before it creates delegates there; a
        // standby cannot know when that is done, so it keeps off a target recently unreachable.
        mayCreateDelegates: (key) =>
          w.manager.isLeader() ? delegation.outage.mayCreateDelegates(key) : standbyMayCreateDelegates(w.clusters.health(key), w.clock.now()),
      })
    : undefined;
  // A bind waiting for the target's scheduler goes on as soon as the delegate is placed.
  if (binder) delegation!.onDelegateChange((targetKey, delegate) => binder.delegateChanged(targetKey, delegate));
  routes.use(
    createExtenderApp({
      registry: w.clusters,
      targetState: (key) => {
        const read = w.clusters.summary(key);
        return read && { nodes: nodesOfSummary(read.summary), readAtMs: read.readAtMs };
      },
      policy: { kind: 'spread' },
      targetPlacement: (key) => {
        const ref = parseTargetKey(key);
        const obj = ref.kind === 'Target' ? targets?.targets.get(ref.name, ref.namespace) : targets?.clusterTargets.get(ref.name);
        const parsed = obj && parseTargetPlacement(obj.spec);
        return parsed?.ok ? parsed.placement : undefined;
      },
      namespace: delegation && ((name) => delegation.namespaces.get(name)),
      groupPlacements: proxies && ((pod) => groupPlacements(pod, proxies, w, binder)),
      // Every replica may warn about an unusable placement-policy annotation: the proxy
      // scheduler talks to one replica at a time, leader or not.
      events: w.events,
      memory,
      // Every replica binds: kube-scheduler keeps its connection to the extender, so through a
      // Service its binds go to one replica, leader or not. The binder's writes are safe from
      // any replica: the delegate's name is deterministic (AlreadyExists is adopted), the
      // Binding succeeds once, and the leader's follow keeps the copies of proxies not bound
      // yet (it does not see a standby's placements).
      binder,
      clock: w.clock,
      logger: w.logger,
      metricsRegistry: w.registry,
    }),
  );
  // The binder reads proxies and namespaces: kept warm on every replica.
  w.manager.add({ name: 'extender', caches: delegation ? [proxies!, delegation.namespaces] : [], start: () => undefined, stop: () => undefined });
  return binder;
}

/**
 * The other pods of a pod's placement group and their target: those bound to a virtual node
 * (proxies cache) and those this replica's binder is placing. Finished and terminating pods do
 * not count: a Deployment scaled down gives their share back.
 */
function groupPlacements(pod: V1Pod, proxies: Informer<V1Pod>, w: Wiring, binder: Binder | undefined): Map<string, string> {
  const namespace = pod.metadata?.namespace;
  const group = placementGroup(pod);
  const out = new Map<string, string>();
  const counts = (p: V1Pod) => !p.metadata?.deletionTimestamp && p.status?.phase !== 'Succeeded' && p.status?.phase !== 'Failed' && placementGroup(p) === group;
  for (const p of proxies.list(namespace)) {
    const target = p.spec?.nodeName ? w.clusters.byNodeName(p.spec.nodeName) : undefined;
    if (target && p.metadata?.uid && counts(p)) out.set(p.metadata.uid, target.key);
  }
  for (const placing of namespace && binder ? binder.placing(namespace) : []) {
    const uid = placing.proxy.metadata?.uid;
    if (uid && !out.has(uid) && counts(placing.proxy)) out.set(uid, placing.targetKey);
  }
  return out;
}
