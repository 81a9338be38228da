import { CoordinationV1Api, CoreV1Api, CustomObjectsApi, KubeConfig, RbacAuthorizationV1Api, type KubernetesObject, type V1Pod } from '@kubernetes/client-node';
import { hostname } from 'node:os';
import { setFlagsFromString } from 'node:v8';
import { Registry } from 'prom-client';
import { apiCallsOverHttp2 } from './clusters/api-http2.js';
import { ClusterRegistry } from './clusters/cluster-registry.js';
import { reuseConnections } from './clusters/connection-reuse.js';
import { withRequestDeadline } from './clusters/request-deadline.js';
import { Controller } from './controller/controller.js';
import { Informer } from './controller/informer.js';
import { StringTable } from './controller/string-table.js';
import { SubtreeTable } from './controller/subtree-table.js';
import { leaderController, Manager } from './controller/manager.js';
import { realClock } from './core/clock.js';
import { configUsage, parseConfig } from './core/config.js';
import { EventRecorder } from './core/events.js';
import { limitHeapGrowth } from './core/heap-growth.js';
import { EVENT_COMPONENT } from './core/keys.js';
import { LeaderElector } from './core/leader-election.js';
import { createLogger, errorFields } from './core/logger.js';
import { createMetrics } from './core/metrics.js';
import type { ClusterSource, Source } from './model/types.js';
import { SourcesReconciler } from './reconcilers/sources.js';
import { Binder } from '../scheduler/bind.js';
import { PlacementMemory } from '../scheduler/placement-memory.js';
import { RefusalLog } from '../scheduler/refusal-log.js';
import type { TargetVerdict } from '../scheduler/extender-server.js';
import { wireDelegation, type DelegationWiring } from './wiring/delegation.js';
import { wireExtender } from './wiring/extender.js';
import type { Route } from './core/http-router.js';
import { kubeletRunnable, opsRunnable, webhookRunnable } from './wiring/servers.js';
import { wireSummary } from './wiring/summary.js';
import { wireTargets } from './wiring/targets.js';
import { crdCache, proxiesCache } from './wiring/caches.js';
import { TargetAuthorization } from './reconcilers/target-authorization.js';
import type { Wiring } from './wiring/wiring.js';

/**
 * Runs the provider until SIGTERM/SIGINT. This is the only place that wires components
 * together; each server and controller can be switched off with `--enable`.
 *
 * Every replica serves (webhook, kubelet API, scheduler extender) from its own registry of
 * targets and caches; only the leader runs the controllers that write. The {@link Manager}
 * starts each part as it declares: see {@link wire}.
 */
// eslint-disable-next-line max-lines-per-function -- split pending
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
  const registry = new Registry();
  const metrics = createMetrics(registry);
  const clock = realClock;

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
    return 2;
  }
  reuseConnections(kc);
  apiCallsOverHttp2(kc);
  withRequestDeadline(kc, config.apiRequestTimeoutSeconds * 1000);
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const coordination = kc.makeApiClient(CoordinationV1Api);

  // One table of repeated string values, and one of repeated parts of objects, for every
  // informer of the process (see StringTable, SubtreeTable).
  const strings = new StringTable();
  const subtrees = new SubtreeTable();
  const manager = new Manager({
    logger,
    clock,
    cluster: { name: config.clusterName, kubeConfig: kc },
    informers: { strings, subtrees, metrics },
    elector: config.leaderElect
      ? (callbacks) =>
          new LeaderElector({
            coordination,
            namespace: config.leaderElectionNamespace,
            name: 'admiralty-provider',
            identity: `${env.POD_NAME ?? hostname()}-${process.pid}`,
            leaseDurationSeconds: config.leaseDurationSeconds,
            renewDeadlineSeconds: config.renewDeadlineSeconds,
            retryPeriodSeconds: config.retryPeriodSeconds,
            clock,
            logger,
            ...callbacks,
          })
      : undefined,
    // The leader stepped down at its renew deadline; another replica may take the lease once
    // the lease duration has passed: the writers stop within the difference.
    stepDownDeadlineMs: (config.leaseDurationSeconds - config.renewDeadlineSeconds) * 1000,
    // The writers' controllers and per-target watches are built once: a fresh process starts
    // clean, as a standby (the Deployment restarts it), while the other replicas keep serving.
    onLostLeadership: () => {
      logger.warn('lost leadership; exiting so that a fresh process starts as a standby');
      process.exit(1);
    },
  });

  // Health and metrics first, so probes answer while the rest starts (and last to stop).
  manager.add(opsRunnable({ port: config.metricsPort, host: config.metricsBindAddress, registry, manager }));

  const w: Wiring = {
    config,
    kc,
    core,
    custom,
    clusters: new ClusterRegistry({ cacheBudgetBytes: config.targetCacheBudgetMib * 2 ** 20 }),
    events: new EventRecorder({ core, component: EVENT_COMPONENT, clock, logger }),
    logger,
    clock,
    metrics,
    registry,
    manager,
    onHangup: (listener) => {
      process.on('SIGHUP', listener);
      return () => void process.off('SIGHUP', listener);
    },
    newInformer: ({ share, ...spec }) => new Informer({ ...spec, strings, share: share && { table: subtrees, parts: share }, logger, clock, metrics }),
    newController: (name, reconciler, opts) => new Controller({ name, reconciler, workers: config.workers, shards: opts?.shards, maxBackoffMs: opts?.maxBackoffMs, clock, logger, metrics }),
  };
  await wire(w, coordination);
  await manager.start();
  logger.info('provider started', { cluster: config.clusterName, components: config.enable, leaderElect: config.leaderElect });
  const signal = await firstSignal(['SIGTERM', 'SIGINT']);
  logger.info('shutting down', { signal });
  // Not Ready and draining at once, the lease handed back, serving on through the delay while
  // endpoints move to the other replicas, then stopped (README, "High availability").
  await manager.shutdown(config.shutdownTimeoutSeconds * 1000, config.shutdownDelaySeconds * 1000);
  return 0;
}

/** Resolves with the first of `signals` this process receives; its listeners are removed then. */
function firstSignal(signals: NodeJS.Signals[]): Promise<NodeJS.Signals> {
  return new Promise((res) => {
    const listeners = signals.map((s) => [s, () => done(s)] as const);
    const done = (s: NodeJS.Signals) => {
      for (const [signal, listener] of listeners) process.off(signal, listener);
      res(s);
    };
    for (const [signal, listener] of listeners) process.once(signal, listener);
  });
}

/**
 * Adds every enabled part to the manager, in start order: servers first (every replica), then
 * the caches and controllers that fill the registry of targets (every replica), then the
 * writers (the leader).
 */
async function wire(w: Wiring, coordination: CoordinationV1Api): Promise<void> {
  const { config, kc, core, manager } = w;
  const enabled = (c: string) => config.enable.includes(c);
  // The scheduler extender shares the webhook's server (and certificate); its routes are added
  // once the caches it reads are wired, below (before the webhook's server starts).
  const extenderRoutes: Route[] = [];
  if (enabled('webhook')) manager.add(webhookRunnable(w, extenderRoutes));
  // Kubelet API: serves logs/exec/attach/port-forward of proxies by bridging to delegates.
  // Its caches are wired below; it reads them only when it serves a call.
  if (enabled('kubelet')) manager.add(kubeletRunnable(w, { proxies: () => proxies, delegates: (key) => delegation?.delegates(key), explain: () => explain, refusals: () => refusals }));

  // Summary and sources run in every cluster (target side).
  if (enabled('summary')) wireSummary(w);
  if (enabled('sources')) {
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    const sources = crdCache<Source & KubernetesObject>(w, 'sources');
    const clusterSources = crdCache<ClusterSource & KubernetesObject>(w, 'clustersources');
    const c = w.newController('sources', new SourcesReconciler({ core, rbac, sources, clusterSources, events: w.events }));
    c.watch(sources, (o) => [SourcesReconciler.keyOf(o, 'Source')]);
    c.watch(clusterSources, (o) => [SourcesReconciler.keyOf(o, 'ClusterSource')]);
    manager.add(leaderController(c, [sources, clusterSources]));
  }

  // Source side: targets -> registry (every replica) and virtual nodes (the leader), proxies ->
  // delegates, follow, services. The proxies cache serves delegation, the binder and the
  // virtual nodes (what our proxies hold in each target): see proxiesCache.
  const proxies = enabled('delegation') ? proxiesCache(w) : undefined;
  // Set once delegation is wired: the outage and replacement controllers look at a target after
  // each probe; the virtual nodes read the delegates' caches.
  let afterProbe: ((targetKey: string) => void) | undefined;
  let delegation: DelegationWiring | undefined;
  // Which namespaces each target's cluster (from a Secret) lets us create pods in, asked on its
  // probe: a Target's own namespace, or a ClusterTarget's opted-in namespaces (known once
  // delegation is wired). Read by the extender's filter.
  const authorization = enabled('targets')
    ? new TargetAuthorization({ clock: w.clock, namespaces: () => (delegation?.namespaces.list() ?? []).map((n) => n.metadata?.name ?? '').filter((n) => n !== '') })
    : undefined;
  const targetInformers = enabled('targets')
    ? wireTargets(w, { coordination, proxies, afterProbe: (key) => afterProbe?.(key), delegates: (key) => delegation?.delegates(key), authorization })
    : undefined;

  // Set below when the extender binds; follow keeps the copies of the proxies it is placing.
  let binder: Binder | undefined;
  // Set below with the extender: kubectl admiralty explain asks it through the kubelet API.
  let explain: ((pod: V1Pod) => TargetVerdict[]) | undefined;
  let refusals: RefusalLog | undefined;
  // What the extender learns from binds and re-placements (refusals, assumptions, avoided targets).
  // With delegation, wireExtender tells it of every delegate change in the targets' caches.
  const memory = enabled('extender') ? new PlacementMemory({ toldOfDelegateChanges: enabled('delegation') }) : undefined;
  // How often each target was refused pods lately, and why: the filter's rejections and the binds
  // a target did not take, for kubectl admiralty status.
  refusals = memory && new RefusalLog({ clock: w.clock });
  delegation = enabled('delegation')
    ? await wireDelegation(w, proxies!, (ns) => binder?.placing(ns) ?? [], memory && ((owner, target, reason, untilMs) => memory.avoid(owner, target, reason, untilMs)))
    : undefined;
  afterProbe = delegation?.afterProbe;

  if (memory) ({ binder, explain } = wireExtender(w, { routes: extenderRoutes, memory, refusals: refusals!, proxies, delegation, targets: targetInformers, authorization }));
  if (delegation) for (const r of delegation.runnables) manager.add(r);
}
