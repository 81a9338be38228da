import {
  AdmissionregistrationV1Api,
  AuthenticationV1Api,
  AuthorizationV1Api,
  CertificatesV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  RbacAuthorizationV1Api,
  type KubernetesListObject,
  type KubernetesObject,
  type CoreV1Event,
  type V1ConfigMap,
  type V1Namespace,
  type V1Node,
  type V1Pod,
  type V1Secret,
  type V1Service,
} from '@kubernetes/client-node';
import express from 'express';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { Server } from 'node:http';
import { Registry } from 'prom-client';
import { CertRotator } from '../certs/cert-rotator.js';
import { readCertificate } from '../certs/read-certificate.js';
import { createWebhookApp } from '../webhook/create-webhook-app.js';
import { createWebhookServer, type WebhookServer } from '../webhook/create-webhook-server.js';
import { WebhookCertificates } from '../webhook/webhook-certificates.js';
import { ProxySchedulerClientCertificate } from '../webhook/proxy-scheduler-client-certificate.js';
import { WebhookCertificateRotation } from '../webhook/webhook-certificate-rotation.js';
import { ClusterRegistry } from './clusters/cluster-registry.js';
import { withRequestDeadline } from './clusters/request-deadline.js';
import { ServerAddressPolicy } from './clusters/server-address-policy.js';
import type { TargetClient } from './clusters/target-client.js';
import { Controller } from './controller/controller.js';
import { Informer } from './controller/informer.js';
import { leaderController, Manager, type Runnable } from './controller/manager.js';
import type { WorkQueueShards } from './controller/workqueue.js';
import { realClock } from './core/clock.js';
import { configUsage, parseConfig, type ProviderConfig } from './core/config.js';
import { EventRecorder } from './core/events.js';
import { HAS_FINALIZER_LABEL, API_GROUP, API_VERSION, NAMESPACE_ENABLED_LABEL, NAMESPACE_ENABLED_VALUE, PARENT_CLUSTER_NAME_LABEL, VIRTUAL_KUBELET_PROVIDER_LABEL, VIRTUAL_KUBELET_PROVIDER_VALUE } from './core/keys.js';
import { LeaderElector } from './core/leader-election.js';
import { Lifecycle } from './core/lifecycle.js';
import { createLogger, errorFields, type Logger } from './core/logger.js';
import { createMetrics, type Metrics } from './core/metrics.js';
import { createKubeletAuthorizer } from './kubelet/auth.js';
import { readClusterClientCa } from './kubelet/client-ca.js';
import { createKubeletServer } from './kubelet/kubelet-server.js';
import { KubeletServingCertificate } from './kubelet/serving-certificate.js';
import { createProxyResolver } from './kubelet/proxy-resolver.js';
import { summaryPodFields } from './model/cluster-summary.js';
import { standbyMayCreateDelegates } from './model/outage.js';
import type { ClusterSource, Source, Target } from './model/types.js';
import { SelfTargetBindings } from './reconcilers/self-target-bindings.js';
import { SourcesReconciler } from './reconcilers/sources.js';
import { SummaryReconciler } from './reconcilers/summary.js';
import { TargetRegistryReconciler } from './reconcilers/target-registry.js';
import { AFTER_BINDING_MS, TargetsReconciler } from './reconcilers/targets.js';
import { Binder } from '../scheduler/bind.js';
import { createExtenderApp, EXTENDER_PATH_PREFIX } from '../scheduler/extender-server.js';
import { createExtenderClientGuard, PROXY_SCHEDULER_CLIENT_CN } from '../scheduler/extender-client-auth.js';
import { PlacementMemory } from '../scheduler/placement-memory.js';
import { nodesOfSummary } from '../scheduler/target-nodes.js';

/** Version reported in virtual nodes' nodeInfo. */
export const PROVIDER_VERSION = 'v0.1.0-admiralty-ts';

/** What every part of the wiring shares. */
interface Wiring {
  config: ProviderConfig;
  kc: KubeConfig;
  core: CoreV1Api;
  custom: CustomObjectsApi;
  clusters: ClusterRegistry;
  events: EventRecorder;
  logger: Logger;
  clock: typeof realClock;
  metrics: Metrics;
  registry: Registry;
  manager: Manager;
  newInformer: <T extends KubernetesObject>(name: string, cluster: string, kubeConfig: KubeConfig, path: string, list: () => Promise<KubernetesListObject<T>>, labelSelector?: string, fieldSelector?: string, transform?: (obj: T) => T) => Informer<T>;
  newController: (name: string, reconciler: { reconcile(key: string): Promise<{ requeueAfterMs?: number } | void> }, shards?: WorkQueueShards) => Controller;
}

/**
 * Runs the provider until SIGTERM/SIGINT. This is the only place that wires components
 * together; each server and controller can be switched off with `--enable`.
 *
 * Every replica serves (webhook, kubelet API, scheduler extender) from its own registry of
 * targets and caches; only the leader runs the controllers that write. The {@link Manager}
 * starts each part as it declares: see {@link wire}.
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
  const registry = new Registry();
  const metrics = createMetrics(registry);
  const clock = realClock;
  const lifecycle = new Lifecycle({ logger });

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
  withRequestDeadline(kc, config.apiRequestTimeoutSeconds * 1000);
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const coordination = kc.makeApiClient(CoordinationV1Api);

  const manager = new Manager({
    logger,
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

  // Health and metrics first, so probes answer while the rest starts. Ready means "can serve"
  // (servers listening, serving caches synced), on the leader and on a standby alike.
  const ops = express();
  ops.get('/metrics', async (_req, res) => {
    res.set('Content-Type', registry.contentType).send(await registry.metrics());
  });
  ops.get('/healthz', (_req, res) => {
    res.send('ok');
  });
  ops.get('/readyz', (_req, res) => {
    const r = manager.readiness();
    if (r.ready) res.send('ok');
    else res.status(503).send(r.reason);
  });
  // Which replica leads, for operators and the sandbox's tests (no secret in it).
  ops.get('/leaderz', (_req, res) => {
    res.status(manager.isLeader() ? 200 : 503).send(manager.isLeader() ? 'leader' : 'standby');
  });
  const opsServer: Server = await new Promise((res) => {
    const s = ops.listen(config.metricsPort, config.metricsBindAddress, () => res(s));
  });
  lifecycle.add('metrics server', () => new Promise<void>((res) => opsServer.close(() => res())));

  const w: Wiring = {
    config,
    kc,
    core,
    custom,
    clusters: new ClusterRegistry(),
    events: new EventRecorder({ core, component: 'admiralty', clock, logger }),
    logger,
    clock,
    metrics,
    registry,
    manager,
    newInformer: (name, cluster, kubeConfig, path, list, labelSelector, fieldSelector, transform) =>
      new Informer({ name, cluster, kubeConfig, path, list, labelSelector, fieldSelector, transform, logger, clock, metrics }),
    newController: (name, reconciler, shards) => new Controller({ name, reconciler, workers: config.workers, shards, clock, logger, metrics }),
  };
  await wire(w, coordination);
  await manager.start();
  lifecycle.add('manager', () => manager.stop(config.shutdownTimeoutSeconds * 1000));
  logger.info('provider started', { cluster: config.clusterName, components: config.enable, leaderElect: config.leaderElect });
  return lifecycle.waitForSignal(config.shutdownTimeoutSeconds * 1000);
}

/**
 * Adds every enabled part to the manager, in start order: servers first (every replica), then
 * the caches and controllers that fill the registry of targets (every replica), then the
 * writers (the leader).
 */
async function wire(w: Wiring, coordination: CoordinationV1Api): Promise<void> {
  const { config, kc, core, custom, manager } = w;
  const enabled = (c: string) => config.enable.includes(c);
  // The scheduler extender shares the webhook's server (and certificate); its routes are added
  // once the caches it reads are wired, below.
  const extenderRoutes = express.Router();
  if (enabled('webhook')) manager.add(webhookRunnable(w, extenderRoutes));
  // Kubelet API: serves logs/exec/attach/port-forward of proxies by bridging to delegates.
  if (enabled('kubelet')) manager.add(kubeletRunnable(w));

  /** An informer over one of our CRDs, all namespaces. */
  const crdInformer = <T extends KubernetesObject>(plural: string) =>
    w.newInformer<T>(plural, config.clusterName, kc, `/apis/${API_GROUP}/${API_VERSION}/${plural}`, () =>
      custom.listClusterCustomObject({ group: API_GROUP, version: API_VERSION, plural }) as Promise<KubernetesListObject<T>>,
    );

  // Summary and sources run in every cluster (target side).
  if (enabled('summary')) {
    const nodes = w.newInformer<V1Node>('nodes', config.clusterName, kc, '/api/v1/nodes', () => core.listNode());
    // Pods bound to a node and not finished, of every namespace (kube-scheduler's own selection
    // of assigned pods), cut down to what the summary reads.
    const assigned = 'spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed';
    const pods = w.newInformer<V1Pod>('assigned-pods', config.clusterName, kc, '/api/v1/pods', () => core.listPodForAllNamespaces({ fieldSelector: assigned }), undefined, assigned, summaryPodFields);
    const c = w.newController('summary', new SummaryReconciler({ custom, nodes, pods, clock: w.clock }));
    c.watch(nodes, () => [SummaryReconciler.KEY]);
    c.watch(pods, () => [SummaryReconciler.KEY]);
    c.enqueue(SummaryReconciler.KEY);
    manager.add(leaderController(c, [nodes, pods]));
  }
  if (enabled('sources')) {
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    const sources = crdInformer<Source & KubernetesObject>('sources');
    const clusterSources = crdInformer<ClusterSource & KubernetesObject>('clustersources');
    const c = w.newController('sources', new SourcesReconciler({ core, rbac, sources, clusterSources }));
    c.watch(sources, (o) => [SourcesReconciler.keyOf(o, 'Source')]);
    c.watch(clusterSources, (o) => [SourcesReconciler.keyOf(o, 'ClusterSource')]);
    manager.add(leaderController(c, [sources, clusterSources]));
  }

  // Source side: targets -> registry (every replica) and virtual nodes (the leader), proxies ->
  // delegates, follow, services. The proxies informer serves delegation, the binder and the
  // virtual nodes (what our proxies hold in each target).
  const proxies = enabled('delegation')
    ? w.newInformer<V1Pod>('proxies', config.clusterName, kc, '/api/v1/pods', () => core.listPodForAllNamespaces({ labelSelector: `${HAS_FINALIZER_LABEL}=true` }), `${HAS_FINALIZER_LABEL}=true`)
    : undefined;
  // Set once delegation is wired: the outage controller looks at a target after each probe.
  let afterProbe: ((targetKey: string) => void) | undefined;
  if (enabled('targets')) wireTargets(w, coordination, crdInformer, proxies, (key) => afterProbe?.(key));

  // Set below when the extender binds; follow keeps the copies of the proxies it is placing.
  let binder: Binder | undefined;
  const delegation = enabled('delegation') ? await wireDelegation(w, proxies!, (ns) => binder?.placing(ns) ?? []) : undefined;
  afterProbe = delegation?.outage.afterProbe;

  if (enabled('extender')) {
    const memory = new PlacementMemory();
    binder = delegation
      ? new Binder({
          sourceCore: core,
          registry: w.clusters,
          proxies: proxies!,
          namespaces: delegation.namespaces,
          delegates: delegation.delegates,
          follow: delegation.follow,
          memory,
          schedulerName: config.proxySchedulerName,
          sourceClusterName: config.clusterName,
          clock: w.clock,
          logger: w.logger,
          placeTimeoutMs: config.delegatePlacementTimeoutSeconds * 1000,
          // The leader fences a target that comes back before it creates delegates there; a
          // standby cannot know when that is done, so it keeps off a target recently unreachable.
          mayCreateDelegates: (key) =>
            w.manager.isLeader() ? delegation.outage.mayCreateDelegates(key) : standbyMayCreateDelegates(w.clusters.health(key), w.clock.now()),
        })
      : undefined;
    extenderRoutes.use(
      createExtenderApp({
        registry: w.clusters,
        targetState: (key) => {
          const read = w.clusters.summary(key);
          return read && { nodes: nodesOfSummary(read.summary), readAtMs: read.readAtMs };
        },
        policy: { kind: 'spread' },
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
    manager.add({ name: 'extender', caches: delegation ? [proxies!, delegation.namespaces] : [], start: () => undefined, stop: () => undefined });
  }
  if (delegation) for (const r of delegation.runnables) manager.add(r);
}

/**
 * Targets: the registry (clients, summaries, health) filled on every replica by the read side,
 * and the virtual nodes, their Leases and the Targets' status written by the leader.
 */
function wireTargets(w: Wiring, coordination: CoordinationV1Api, crdInformer: <T extends KubernetesObject>(plural: string) => Informer<T>, proxies: Informer<V1Pod> | undefined, afterProbe: (targetKey: string) => void): void {
  const { config, kc, core, custom, manager } = w;
  const targets = crdInformer<Target & KubernetesObject>('targets');
  const clusterTargets = crdInformer<Target & KubernetesObject>('clustertargets');
  const virtualNodes = w.newInformer<V1Node>('virtual-nodes', config.clusterName, kc, '/api/v1/nodes', () => core.listNode({ labelSelector: `${VIRTUAL_KUBELET_PROVIDER_LABEL}=${VIRTUAL_KUBELET_PROVIDER_VALUE}` }), `${VIRTUAL_KUBELET_PROVIDER_LABEL}=${VIRTUAL_KUBELET_PROVIDER_VALUE}`);
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

  writer = w.newController(
    'targets',
    new TargetsReconciler({
      sourceCore: core,
      sourceCustom: custom,
      sourceCoordination: coordination,
      targets,
      clusterTargets,
      registry: w.clusters,
      proxiesOn: (nodeName) => (proxies ? proxies.list().filter((p) => p.spec?.nodeName === nodeName) : []),
      selfBindings,
      kubelet: { address: config.kubeletAddress, port: config.kubeletPort },
      kubeletVersion: PROVIDER_VERSION,
      events: w.events,
      clock: w.clock,
      nodeStatusIntervalMs: config.nodeStatusIntervalSeconds * 1000,
      onBindingWritten: (key) => reader.enqueueAfter(key, AFTER_BINDING_MS),
    }),
  );
  writer.watch(targets, (o) => [TargetsReconciler.keyOf(o, 'Target')]);
  writer.watch(clusterTargets, (o) => [TargetsReconciler.keyOf(o, 'ClusterTarget')]);
  writer.watch(virtualNodes, (n) => TargetsReconciler.keyOfNode(n));
  manager.add(leaderController(writer, [targets, clusterTargets, virtualNodes, ...(proxies ? [proxies] : [])]));
}

/** The webhook (and the extender on its server): every replica serves it; the certificate lives in a Secret so replicas share it. */
function webhookRunnable(w: Wiring, extenderRoutes: express.Router): Runnable {
  const { config, kc, core, registry, metrics, logger } = w;
  let stop: () => Promise<void> = async () => undefined;
  const start = async () => {
    const admission = kc.makeApiClient(AdmissionregistrationV1Api);
    const dnsNames = config.webhookServiceName
      ? [config.webhookServiceName, `${config.webhookServiceName}.${config.namespace}`, `${config.webhookServiceName}.${config.namespace}.svc`, `${config.webhookServiceName}.${config.namespace}.svc.cluster.local`]
      : ['localhost'];
    const ipAddresses = config.webhookUrl ? [new URL(config.webhookUrl).hostname].filter((h) => /^[\d.]+$/.test(h)) : [];
    const certs = new WebhookCertificates({ core, admissionRegistration: admission, namespace: config.namespace, secretName: 'admiralty-webhook-cert', dnsNames, ipAddresses, clock: realClock });
    let server: WebhookServer | undefined;
    // Keeps the serving certificate, the webhook configuration's caBundle (no cert-manager needed)
    // and, when this process serves the extender, the proxy scheduler's client certificate: the
    // extender's routes answer only to it.
    const rotation = new WebhookCertificateRotation({
      certs,
      webhookConfigName: config.webhookConfigName,
      clientCertificate: config.enable.includes('extender')
        ? new ProxySchedulerClientCertificate({ core, namespace: config.namespace, secretName: 'admiralty-proxy-scheduler-client', commonName: PROXY_SCHEDULER_CLIENT_CN, clock: realClock })
        : undefined,
      serve: (pair, trustedCaPems) => {
        server?.swap(pair, trustedCaPems);
        logger.info('webhook certificate or trusted CAs rotated', { trustedCas: trustedCaPems.length });
      },
      clock: realClock,
      onError: (what, err) =>
        what === 'caBundle'
          ? logger.warn('could not update the webhook caBundle', { ...errorFields(err), config: config.webhookConfigName })
          : logger.warn(`${what === 'serving' ? 'webhook' : 'proxy scheduler client'} certificate renewal failed`, errorFields(err)),
      onIssued: (what, pair) => metrics.certificateExpiry.set({ certificate: what === 'serving' ? 'webhook' : 'proxy-scheduler-client' }, readCertificate(pair.certPem).notAfter.getTime() / 1000),
    });
    const first = await rotation.start();
    const app = createWebhookApp({ logger, registry, proxySchedulerName: config.proxySchedulerName });
    app.use(EXTENDER_PATH_PREFIX, createExtenderClientGuard({ logger, metricsRegistry: registry }));
    app.use(extenderRoutes);
    const listening = createWebhookServer({
      pair: first.pair,
      handler: app,
      clientCaPems: first.trustedCaPems,
      // At warn: with failurePolicy Fail, a connection closed just as the apiserver uses it is a
      // refused pod ("connection reset by peer"), and nothing else would say so.
      onClose: (reason) => {
        metrics.webhookConnectionsClosed.inc({ reason });
        logger.warn('webhook connection closed by the server', { reason });
      },
    });
    server = listening;
    // SIGHUP forces a renewal (and a new CA if the Secret was deleted), e.g. after a key leak.
    process.on('SIGHUP', () => void rotation.rotateNow().catch((err) => logger.warn('forced webhook certificate rotation failed', errorFields(err))));
    await new Promise<void>((res) => listening.server.listen(config.webhookPort, config.webhookBindAddress, () => res()));
    logger.info('webhook listening', { address: config.webhookBindAddress, port: config.webhookPort });
    stop = async () => {
      rotation.stop();
      await new Promise<void>((res) => listening.server.close(() => res()));
    };
  };
  return { name: 'webhook', start, stop: () => stop() };
}

/** The kubelet API of the virtual nodes: every replica serves it, from its own registry of targets. */
function kubeletRunnable(w: Wiring): Runnable {
  const { config, kc, core, clusters, registry, metrics, logger } = w;
  let stop: () => Promise<void> = async () => undefined;
  const start = async () => {
    const serving = new KubeletServingCertificate({
      certificates: kc.makeApiClient(CertificatesV1Api),
      nodeName: `admiralty-${config.clusterName}`,
      ipAddresses: [config.kubeletAddress],
      dnsNames: [],
      signerName: config.kubeletServingSigner,
      clock: realClock,
      logger,
    });
    const first = await serving.issue();
    let clientCaPem: string | undefined;
    if (config.kubeletClientCaFile) clientCaPem = readFileSync(config.kubeletClientCaFile, 'utf8');
    else {
      const ca = await readClusterClientCa(core);
      if ('pem' in ca) clientCaPem = ca.pem;
      // Fail closed: without a client CA only bearer tokens authenticate, and the apiserver
      // presents a certificate, so kubectl logs/exec on proxies are refused until this is fixed.
      else logger.warn('kubelet API: no client CA, so the apiserver cannot authenticate for kubectl logs/exec; set --kubelet-client-ca-file', { reason: ca.reason });
    }
    const server = createKubeletServer({
      host: config.kubeletBindAddress,
      port: config.kubeletPort,
      tls: first,
      clientCaPem,
      auth: createKubeletAuthorizer({ kubeConfig: kc }),
      logger,
      registry,
      resolver: createProxyResolver({ core, registry: clusters, sourceClusterName: config.clusterName }),
    });
    await server.listen();
    metrics.certificateExpiry.set({ certificate: 'kubelet' }, readCertificate(first.certPem).notAfter.getTime() / 1000);
    const rotator = new CertRotator({
      issue: () => serving.issue(),
      onRotate: (pair) => {
        server.setCertificate(pair.certPem, pair.keyPem);
        metrics.certificateExpiry.set({ certificate: 'kubelet' }, readCertificate(pair.certPem).notAfter.getTime() / 1000);
      },
      clock: realClock,
      onError: (err) => logger.warn('kubelet certificate renewal failed', errorFields(err)),
    });
    await rotator.start(first);
    process.on('SIGHUP', () => void rotator.rotateNow().catch((err) => logger.warn('forced kubelet certificate rotation failed', errorFields(err))));
    logger.info('kubelet API listening', { address: config.kubeletBindAddress, port: config.kubeletPort, selfSigned: first.selfSigned });
    stop = async () => {
      rotator.stop();
      await server.close();
    };
  };
  return { name: 'kubelet API', start, stop: () => stop() };
}

/**
 * Proxies -> delegates, follow and services. Source-side informers are static; each target
 * gets its own informers (delegates, copies) when it joins the registry and loses them when
 * it leaves, so a broken target never stalls the others. The per-target informers run on
 * every replica (the binder reads delegates; a new leader starts on warm caches); the
 * controllers run on the leader.
 */
async function wireDelegation(
  w: Wiring,
  proxies: Informer<V1Pod>,
  /** Proxies the extender is placing (see `Binder.placing`). */
  placing: (namespace: string) => Iterable<{ proxy: V1Pod; targetKey: string }>,
): Promise<{
  namespaces: Informer<V1Namespace>;
  delegates: (key: string) => Informer<V1Pod> | undefined;
  follow: { ensureCopies(proxy: V1Pod, target: TargetClient): Promise<void> };
  runnables: Runnable[];
  outage: { afterProbe(targetKey: string): void; mayCreateDelegates(targetKey: string): boolean };
}> {
  // Loaded only when delegation is enabled: target-only installs never load it.
  const [{ DelegationReconciler }, { FollowReconciler }, { ServiceReconciler }, { DelegateEventsReconciler }, { OutageReconciler }] = await Promise.all([
    import('./reconcilers/delegation.js'),
    import('./reconcilers/follow.js'),
    import('./reconcilers/services.js'),
    import('./reconcilers/delegate-events.js'),
    import('./reconcilers/outage.js'),
  ]);
  const { config, kc, core, clusters, events, clock, metrics } = w;
  const ours = `${PARENT_CLUSTER_NAME_LABEL}=${config.clusterName}`;
  const podEvents = 'involvedObject.kind=Pod';
  // No informer over the source's ConfigMaps and Secrets: follow reads those that proxies
  // reference by name (least privilege: no list/watch of every Secret in the cluster).
  const services = w.newInformer<V1Service>('services', config.clusterName, kc, '/api/v1/services', () => core.listServiceForAllNamespaces());
  // Opted-in namespaces only: the tenancy check needs no more, and a namespace whose label goes
  // away leaves the cache (a watch with a selector reports it as deleted).
  const enabledSelector = `${NAMESPACE_ENABLED_LABEL}=${NAMESPACE_ENABLED_VALUE}`;
  const namespaces = w.newInformer<V1Namespace>('namespaces', config.clusterName, kc, '/api/v1/namespaces', () => core.listNamespace({ labelSelector: enabledSelector }), enabledSelector);

  const perTarget = new Map<string, { delegates: Informer<V1Pod>; configMaps: Informer<V1ConfigMap>; secrets: Informer<V1Secret>; services: Informer<V1Service>; events: Informer<CoreV1Event> }>();

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
  });
  // Outages: proxies say their target is unreachable, fail over if asked, and a target that
  // comes back is fenced before delegation creates anything there.
  const outage = new OutageReconciler({ sourceCore: core, proxies, namespaces, registry: clusters, sourceClusterName: config.clusterName, events, clock, metrics });
  const outageController = w.newController('outage', outage);
  outageController.watch(proxies, (p) => OutageReconciler.keysOfProxy(clusters, p));
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
    delegates: (key: string) => perTarget.get(key)?.delegates,
  });
  const delegateEvents = new DelegateEventsReconciler({
    sourceCore: core,
    targetEvents: (key: string) => perTarget.get(key)?.events,
    delegates: (key: string) => perTarget.get(key)?.delegates,
    targetName: (key: string) => clusters.get(key)?.displayName,
    sourceClusterName: config.clusterName,
    clock,
    logger: w.logger,
  });
  // A proxy's key is grouped by its virtual node (one per target): a target whose calls hang
  // holds at most --workers-per-target workers, and the others keep flowing.
  const delegationController = w.newController('delegation', delegation, {
    of: (key) => {
      const [namespace, name] = key.split('/');
      return proxies.get(name, namespace)?.spec?.nodeName || undefined;
    },
    maxInFlight: config.workersPerTarget,
  });
  const eventsController = w.newController('delegate-events', delegateEvents);
  const followController = w.newController('follow', follow);
  const servicesController = w.newController('services', svc);
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
    const informer = <T extends KubernetesObject>(name: string, resource: string, fn: () => Promise<KubernetesListObject<T>>) =>
      w.newInformer<T>(name, t.displayName, t.kubeConfig, path(resource), fn, ours);
    const entry = {
      delegates: informer<V1Pod>('delegates', 'pods', () => (ns ? t.core.listNamespacedPod({ namespace: ns, labelSelector: ours }) : t.core.listPodForAllNamespaces({ labelSelector: ours }))),
      configMaps: informer<V1ConfigMap>('configmap-copies', 'configmaps', () =>
        ns ? t.core.listNamespacedConfigMap({ namespace: ns, labelSelector: ours }) : t.core.listConfigMapForAllNamespaces({ labelSelector: ours }),
      ),
      secrets: informer<V1Secret>('secret-copies', 'secrets', () => (ns ? t.core.listNamespacedSecret({ namespace: ns, labelSelector: ours }) : t.core.listSecretForAllNamespaces({ labelSelector: ours }))),
      services: informer<V1Service>('service-copies', 'services', () =>
        ns ? t.core.listNamespacedService({ namespace: ns, labelSelector: ours }) : t.core.listServiceForAllNamespaces({ labelSelector: ours }),
      ),
      // Events carry no labels of ours: take all pod events, keep those about our delegates.
      events: w.newInformer<CoreV1Event>('delegate-events', t.displayName, t.kubeConfig, path('events'), () =>
        ns ? t.core.listNamespacedEvent({ namespace: ns, fieldSelector: podEvents }) : t.core.listEventForAllNamespaces({ fieldSelector: podEvents }),
        undefined,
        podEvents,
      ),
    };
    perTarget.set(t.key, entry);
    delegationController.watch(entry.delegates, (p) => DelegationReconciler.delegateToProxyKey(p, config.clusterName));
    followController.watch(entry.configMaps, (o) => FollowReconciler.keysOfCopy('configmap', o));
    followController.watch(entry.secrets, (o) => FollowReconciler.keysOfCopy('secret', o));
    servicesController.watch(entry.services, (s) => ServiceReconciler.keysOfCopy(s));
    servicesController.watch(entry.delegates, (p) => svc.keysOfDelegate(p));
    eventsController.watch(entry.events, (ev) => DelegateEventsReconciler.keysOfEvent(t.key, ev));
    // Events can arrive before their delegate is cached: look at them again when it is.
    entry.delegates.on('add', (p) => {
      for (const k of DelegateEventsReconciler.keysOfDelegate(t.key, p, entry.events)) eventsController.enqueue(k);
    });
    for (const i of Object.values(entry)) i.start();
    // Proxies bound to this target may have been waiting for its clients.
    for (const p of proxies.list()) delegationController.enqueue(DelegationReconciler.proxyKey(p));
  };
  const removeTarget = (t: TargetClient) => {
    const entry = perTarget.get(t.key);
    if (!entry) return;
    perTarget.delete(t.key);
    for (const i of Object.values(entry)) i.stop();
  };
  // From the first probe on, whether or not this replica leads.
  clusters.on('added', addTarget);
  clusters.on('removed', removeTarget);

  // Delegates by target and phase, from the caches, every 15 s.
  const timer = setInterval(() => {
    metrics.delegates.reset();
    for (const [key, entry] of perTarget) {
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
      },
    },
    leaderController(delegationController, [proxies, namespaces]),
    leaderController(outageController, [proxies, namespaces]),
    leaderController(eventsController, []),
    leaderController(followController, [proxies, namespaces]),
    leaderController(servicesController, [services, proxies]),
  ];
  return {
    namespaces,
    delegates: (key) => perTarget.get(key)?.delegates,
    follow,
    runnables,
    outage: { afterProbe: (key) => outageController.enqueue(key), mayCreateDelegates: (key) => outage.mayCreateDelegates(key) },
  };
}
