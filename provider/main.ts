import { CoordinationV1Api, CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { hostname } from 'node:os';
import { setFlagsFromString } from 'node:v8';
import { Registry } from 'prom-client';
import { apiCallsOverHttp2 } from './clusters/api-http2.js';
import { ClusterRegistry } from './clusters/cluster-registry.js';
import { reuseConnections } from './clusters/connection-reuse.js';
import { withRequestDeadline } from './clusters/request-deadline.js';
import type { TargetClient } from './clusters/target-client.js';
import { Controller } from './controller/controller.js';
import { StringTable } from './controller/string-table.js';
import { SubtreeTable } from './controller/subtree-table.js';
import { Manager } from './controller/manager.js';
import { realClock, type Clock } from './core/clock.js';
import { configUsage, parseConfig, type ProviderConfig } from './core/config.js';
import { EventRecorder } from './core/events.js';
import { limitHeapGrowth } from './core/heap-growth.js';
import { EVENT_COMPONENT } from './core/keys.js';
import { LeaderElector } from './core/leader-election.js';
import { createLogger, errorFields, type Logger } from './core/logger.js';
import { createMetrics } from './core/metrics.js';
import { TargetAuthorization } from './reconcilers/target-authorization.js';
import { isEarlierProcessOf } from './sharding/membership.js';
import { Shards } from './sharding/shards.js';
import { BeingPlaced } from '../scheduler/being-placed.js';
import { PlacementMemory } from '../scheduler/placement-memory.js';
import { RefusalLog } from '../scheduler/refusal-log.js';
import { namespacesCache, proxiesCache } from './wiring/caches.js';
import { setupDelegation } from './wiring/delegation.js';
import { servesPodGroups, setupExtender } from './wiring/extender.js';
import { setupKubelet, setupOps, setupWebhook } from './wiring/servers.js';
import { firstSignal } from './wiring/signals.js';
import { setupSources } from './wiring/sources.js';
import { setupSummary } from './wiring/summary.js';
import { setupTargets, targetCaches, targetIndex } from './wiring/targets.js';
import type { Wiring } from './wiring/wiring.js';

/**
 * Runs the provider until SIGTERM/SIGINT. This is the only place that wires components
 * together; each server and controller can be switched off with `--enable`.
 *
 * Every replica serves (webhook, kubelet API, scheduler extender) from its own registry of
 * targets and caches; only the leader runs the controllers that write. The {@link Manager}
 * starts each part as its setup declares: see {@link setupParts}.
 */
export async function runProvider(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const parsed = parseConfig(argv, env);
  if (!parsed.ok) {
    for (const e of parsed.errors) console.error(`config: ${e}`);
    console.error(configUsage());
    return 2;
  }
  const config = parsed.config;
  const logger = createLogger({ level: config.logLevel, format: config.logFormat });
  // Before any cache fills: the resident size should follow the live heap (see heap-growth.ts).
  const heapFlag = limitHeapGrowth(process.execArgv, setFlagsFromString);
  logger.debug('V8 heap growth', { flag: heapFlag ?? 'as given on the node command line' });
  const kc = loadKubeConfig(config, logger);
  if (!kc) return 2;
  const wiring = newWiring(config, kc, env, logger, realClock);
  await setupParts(wiring);
  await wiring.manager.start();
  logger.info('provider started', { cluster: config.clusterName, components: config.enable, leaderElect: config.leaderElect, shardTargets: config.shardTargets });
  const signal = await firstSignal(process, ['SIGTERM', 'SIGINT'], (again) => logger.info('already shutting down; signal ignored', { signal: again }));
  logger.info('shutting down', { signal });
  // Not Ready and draining at once, the lease handed back, serving on through the delay while
  // endpoints move to the other replicas, then stopped (README, "High availability").
  await wiring.manager.shutdown(config.shutdownTimeoutSeconds * 1000, config.shutdownDelaySeconds * 1000);
  return 0;
}

/** The kubeconfig of this cluster, its connections tuned; undefined (and logged) when it cannot be loaded. */
function loadKubeConfig(config: ProviderConfig, logger: Logger): KubeConfig | undefined {
  const kc = new KubeConfig();
  try {
    if (config.kubeconfig) {
      kc.loadFromFile(config.kubeconfig);
      if (config.context) kc.setCurrentContext(config.context);
    } else {
      kc.loadFromCluster();
    }
  } catch (err) {
    logger.error('cannot load the kubeconfig of this cluster', errorFields(err));
    return undefined;
  }
  reuseConnections(kc);
  apiCallsOverHttp2(kc);
  withRequestDeadline(kc, config.apiRequestTimeoutSeconds * 1000);
  return kc;
}

/** The manager and what every part's setup shares (see {@link Wiring}). */
function newWiring(config: ProviderConfig, kc: KubeConfig, env: NodeJS.ProcessEnv, logger: Logger, clock: Clock): Wiring {
  const registry = new Registry();
  const metrics = createMetrics(registry);
  const core = kc.makeApiClient(CoreV1Api);
  const coordination = kc.makeApiClient(CoordinationV1Api);
  const pod = env.POD_NAME ?? hostname();
  const identity = `${pod}-${process.pid}`;
  // Who this replica is and how its Leases are timed, for the leader election or the shards.
  const leases = {
    coordination,
    namespace: config.leaderElectionNamespace,
    identity,
    leaseDurationSeconds: config.leaseDurationSeconds,
    renewDeadlineSeconds: config.renewDeadlineSeconds,
    retryPeriodSeconds: config.retryPeriodSeconds,
    clock,
    logger,
  };
  // With --shard-targets: the group is this installation's (its namespace).
  const shards = config.shardTargets ? new Shards({ ...leases, group: 'admiralty-provider', onOwned: (n) => metrics.shardsOwned.set(n), isPredecessor: isEarlierProcessOf(pod) }) : undefined;
  const manager = new Manager<TargetClient>({
    logger,
    clock,
    cluster: { name: config.clusterName, kubeConfig: kc },
    // One table of repeated string values, and one of repeated parts of objects, for every
    // informer of the process (see StringTable, SubtreeTable).
    informers: { strings: new StringTable(), subtrees: new SubtreeTable(), metrics },
    elector: shards ? (callbacks) => shards.elector(callbacks) : config.leaderElect ? (callbacks) => new LeaderElector({ ...leases, name: 'admiralty-provider', ...callbacks }) : undefined,
    // The leader stepped down (or, sharded, left the group) at its renew deadline; another
    // replica may take the lease (or the shards) once the lease duration has passed: the
    // writers stop within the difference.
    stepDownDeadlineMs: (config.leaseDurationSeconds - config.renewDeadlineSeconds) * 1000,
    // The writers' controllers and per-target watches are built once: a fresh process starts
    // clean, as a standby (the Deployment restarts it), while the other replicas keep serving.
    onLostLeadership: () => {
      logger.warn('lost leadership; exiting so that a fresh process starts as a standby');
      process.exit(1);
    },
  });
  return {
    config,
    kc,
    core,
    custom: kc.makeApiClient(CustomObjectsApi),
    coordination,
    clusters: new ClusterRegistry({ cacheBudgetBytes: config.targetCacheBudgetMib * 2 ** 20 }),
    events: new EventRecorder({ core, component: EVENT_COMPONENT, clock, logger }),
    logger,
    clock,
    metrics,
    registry,
    manager,
    shards,
    writes: (targetKey) => (shards ? shards.owns(targetKey) : manager.isLeader()),
    onHangup: (listener) => {
      process.on('SIGHUP', listener);
      return () => void process.off('SIGHUP', listener);
    },
    newController: (name, reconciler, opts) => {
      const gate = shards && opts?.shardOf && shards.gate(opts.shardOf);
      const controller = new Controller({ name, reconciler, workers: config.workers, shards: opts?.shards, maxBackoffMs: opts?.maxBackoffMs, gate, clock, logger, metrics });
      if (gate) shards.register(controller);
      return controller;
    },
  };
}

/**
 * Every enabled part's setup. The manager starts the always-on parts in the order added: the
 * ops server first, then the servers (webhook, kubelet API), then the registry of targets; the
 * writers (the leader's) after them. What more than one part reads is made first, so that each
 * part is set up with what it reads.
 */
async function setupParts(wiring: Wiring): Promise<void> {
  const { config, clock } = wiring;
  const enabled = (part: string) => config.enable.includes(part);
  // Health and metrics first, so probes answer while the rest starts (and last to stop).
  setupOps(wiring);

  // Source side. The proxies and opted-in namespaces caches serve delegation, the extender and
  // the virtual nodes (see proxiesCache); what the binder is placing, follow keeps the copies of.
  const proxies = enabled('delegation') ? proxiesCache(wiring) : undefined;
  const namespaces = enabled('delegation') ? namespacesCache(wiring) : undefined;
  const beingPlaced = proxies && new BeingPlaced({ proxies, clock });
  // What the extender learns from binds and re-placements (refusals, assumptions, avoided
  // targets); with delegation, it is told of every delegate change in the targets' caches. How
  // often each target was refused pods lately, and why, for kubectl admiralty status.
  const memory = enabled('extender') ? new PlacementMemory({ toldOfDelegateChanges: enabled('delegation') }) : undefined;
  const refusals = memory && new RefusalLog({ clock });
  // Which namespaces each target's cluster (from a Secret) lets us create pods in, asked on its
  // probe: a Target's own namespace, or a ClusterTarget's opted-in namespaces. Read by the
  // extender's filter and the binder.
  const authorization = enabled('targets') ? new TargetAuthorization({ clock, namespaces: () => (namespaces?.list() ?? []).map((n) => n.metadata?.name ?? '').filter((n) => n !== '') }) : undefined;
  // The targets by key and virtual node, from their caches: with sharding, the shards. An
  // install without targets shards only the cluster-wide work.
  const index = enabled('targets') ? targetIndex(wiring) : undefined;
  if (!index) wiring.shards?.track({ keys: () => [], has: () => false, hasSynced: () => true });
  const delegation =
    proxies && namespaces && beingPlaced
      ? await setupDelegation(wiring, { proxies, namespaces, beingPlaced, targetIndex: index, avoid: memory && ((owner, target, reason, untilMs) => memory.avoid(owner, target, reason, untilMs)) })
      : undefined;
  const extender =
    memory && refusals
      ? setupExtender(wiring, {
          memory,
          refusals,
          delegation,
          targets: enabled('targets') ? targetCaches(wiring) : undefined,
          authorization,
          gangs: delegation !== undefined && (await servesPodGroups(wiring)),
        })
      : undefined;

  // The servers: every replica. The extender's routes go on the webhook's server.
  if (enabled('webhook')) setupWebhook(wiring, { extenderRoutes: extender?.routes ?? [] });
  if (enabled('kubelet')) setupKubelet(wiring, { proxies, delegates: delegation?.delegates, explain: extender?.explain, refusals });
  // Target side (every cluster): the summary, and the rights of sources.
  if (enabled('summary')) setupSummary(wiring);
  if (enabled('sources')) setupSources(wiring);
  // Targets -> registry (every replica) and virtual nodes (the leader).
  if (enabled('targets')) setupTargets(wiring, { proxies, authorization });
}
