import { AdmissionregistrationV1Api, CertificatesV1Api, type V1Pod } from '@kubernetes/client-node';
import express from 'express';
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { Registry } from 'prom-client';
import { CertRotator } from '../../certs/cert-rotator.js';
import { readCertificate } from '../../certs/read-certificate.js';
import { AdmissionPool } from '../../webhook/admission-pool.js';
import { createWebhookRoutes } from '../../webhook/create-webhook-routes.js';
import { createWebhookServer, type WebhookServer } from '../../webhook/create-webhook-server.js';
import { WebhookCertificates } from '../../webhook/webhook-certificates.js';
import { ProxySchedulerClientCertificate } from '../../webhook/proxy-scheduler-client-certificate.js';
import { WebhookCertificateRotation } from '../../webhook/webhook-certificate-rotation.js';
import type { Manager, Runnable } from '../controller/manager.js';
import { errorFields } from '../core/logger.js';
import { createKubeletAuthorizer } from '../kubelet/auth.js';
import { readClusterClientCa } from '../kubelet/client-ca.js';
import { createKubeletServer } from '../kubelet/kubelet-server.js';
import { KubeletServingCertificate } from '../kubelet/serving-certificate.js';
import { createProxyResolver } from '../kubelet/proxy-resolver.js';
import { ResourceUsage } from '../kubelet/resource-usage.js';
import type { TargetClient } from '../clusters/target-client.js';
import { API_GROUP, API_VERSION } from '../core/keys.js';
import { createRouter, type Route } from '../core/http-router.js';
import { createExtenderClientGuard, PROXY_SCHEDULER_CLIENT_CN } from '../../scheduler/extender-client-auth.js';
import { proxiesOnNode } from './caches.js';
import type { Wiring } from './wiring.js';
import { createOperatorViews } from './operator-views.js';
import type { TargetVerdict } from '../../scheduler/extender-server.js';
import type { RefusalLog } from '../../scheduler/refusal-log.js';
import type { Informer } from '../controller/informer.js';
import type { ObjectCache } from '../controller/object-cache.js';

/**
 * The webhook (and the extender's routes, on its server): every replica serves it; the
 * certificate lives in a Secret so replicas share it.
 */
export function setupWebhook(wiring: Wiring, options: { extenderRoutes: readonly Route[] }): void {
  wiring.manager.add(webhookRunnable(wiring, options.extenderRoutes));
}

function webhookRunnable(wiring: Wiring, extenderRoutes: readonly Route[]): Runnable {
  const { config, kc, core, registry, metrics, logger, clock, onHangup } = wiring;
  let stop: () => Promise<void> = async () => undefined;
  let drain = () => undefined as void;
  const start = async () => {
    const admission = kc.makeApiClient(AdmissionregistrationV1Api);
    const dnsNames = config.webhookServiceName
      ? [
          config.webhookServiceName,
          `${config.webhookServiceName}.${config.namespace}`,
          `${config.webhookServiceName}.${config.namespace}.svc`,
          `${config.webhookServiceName}.${config.namespace}.svc.cluster.local`,
        ]
      : ['localhost'];
    const ipAddresses = config.webhookUrl ? [new URL(config.webhookUrl).hostname].filter((h) => /^[\d.]+$/.test(h)) : [];
    const certs = new WebhookCertificates({ core, admissionRegistration: admission, namespace: config.namespace, secretName: 'admiralty-webhook-cert', dnsNames, ipAddresses, clock });
    let server: WebhookServer | undefined;
    // Keeps the serving certificate, the webhook configuration's caBundle (no cert-manager needed)
    // and, when this process serves the extender, the proxy scheduler's client certificate: the
    // extender's routes answer only to it.
    const rotation = new WebhookCertificateRotation({
      certs,
      webhookConfigName: config.webhookConfigName,
      clientCertificate: config.enable.includes('extender')
        ? new ProxySchedulerClientCertificate({ core, namespace: config.namespace, secretName: 'admiralty-proxy-scheduler-client', commonName: PROXY_SCHEDULER_CLIENT_CN, clock })
        : undefined,
      serve: (pair, trustedCaPems) => {
        server?.swap(pair, trustedCaPems);
        logger.info('webhook certificate or trusted CAs rotated', { trustedCas: trustedCaPems.length });
      },
      clock,
      onError: (what, err) =>
        what === 'caBundle'
          ? logger.warn('could not update the webhook caBundle', { ...errorFields(err), config: config.webhookConfigName })
          : logger.warn(`${what === 'serving' ? 'webhook' : 'proxy scheduler client'} certificate renewal failed`, errorFields(err)),
      onIssued: (what, pair) => metrics.certificateExpiry.set({ certificate: what === 'serving' ? 'webhook' : 'proxy-scheduler-client' }, readCertificate(pair.certPem).notAfter.getTime() / 1000),
    });
    const first = await rotation.start();
    // Reviews run in worker threads: a pod no one has thought of yet must not be able to hold
    // this loop, which renews the leader Lease and serves the extender and the kubelet API.
    const pool =
      config.admissionWorkers > 0
        ? new AdmissionPool({
            workers: config.admissionWorkers,
            deadlineMs: config.admissionDeadlineMs,
            workerData: { proxySchedulerName: config.proxySchedulerName },
            onAbandoned: (reason) => metrics.admissionReviewsAbandoned.inc({ reason }),
            onWorkerError: (err) => logger.warn('admission worker failed; it is replaced', errorFields(err)),
          })
        : undefined;
    const handler = createRouter({
      routes: [...createWebhookRoutes({ logger, registry, proxySchedulerName: config.proxySchedulerName, review: pool && ((raw) => pool.review(raw)) }), ...extenderRoutes],
      guards: [createExtenderClientGuard({ logger, metricsRegistry: registry })],
      // At warn for the budgets: with failurePolicy Fail, a 503 to the apiserver is a refused pod.
      onBodyRefused: (reason) => {
        metrics.webhookBodiesRefused.inc({ reason });
        if (reason !== 'too_large') logger.warn('webhook request refused: request bodies held at once are at their budget', { reason });
      },
      logger,
    });
    const listening = createWebhookServer({
      pair: first.pair,
      handler,
      clientCaPems: first.trustedCaPems,
      onConnection: (protocol) => metrics.webhookConnections.inc({ protocol }),
      // At warn: with failurePolicy Fail, a connection closed just as the apiserver uses it is a
      // refused pod ("connection reset by peer"), and nothing else would say so.
      onClose: (reason, address) => {
        metrics.webhookConnectionsClosed.inc({ reason });
        logger.warn('webhook connection closed by the server', { reason, ...(address === undefined ? {} : { address }) });
      },
    });
    server = listening;
    // SIGHUP forces a renewal (and a new CA if the Secret was deleted), e.g. after a key leak.
    const stopHearingHangups = onHangup(() => void rotation.rotateNow().catch((err) => logger.warn('forced webhook certificate rotation failed', errorFields(err))));
    await new Promise<void>((res) => listening.server.listen(config.webhookPort, config.webhookBindAddress, () => res()));
    logger.info('webhook listening', { address: config.webhookBindAddress, port: config.webhookPort });
    drain = () => listening.drain();
    stop = async () => {
      stopHearingHangups();
      rotation.stop();
      await listening.close();
      await pool?.close();
    };
  };
  return { name: 'webhook', start, drain: () => drain(), stop: () => stop() };
}

/** What the kubelet API reads (no caches without delegation, no extender's views without one). */
export interface KubeletReads {
  proxies: (ObjectCache<V1Pod> & Pick<Informer<V1Pod>, 'byIndex'>) | undefined;
  delegates: ((targetKey: string) => ObjectCache<V1Pod> | undefined) | undefined;
  /** The extender's judgement of a proxy, for `kubectl admiralty explain`; undefined without an extender. */
  explain: ((pod: V1Pod) => TargetVerdict[]) | undefined;
  /** What the extender and binder turned away lately, per target; undefined without an extender. */
  refusals: Pick<RefusalLog, 'recent'> | undefined;
}

/** The kubelet API of the virtual nodes: every replica serves it, from its own registry of targets. */
export function setupKubelet(wiring: Wiring, reads: KubeletReads): void {
  wiring.manager.add(kubeletRunnable(wiring, reads));
}

// eslint-disable-next-line max-lines-per-function -- the kubelet API's caches and backends, wired in one place
function kubeletRunnable(wiring: Wiring, reads: KubeletReads): Runnable {
  const { config, kc, core, custom, clusters, registry, metrics, logger, events, clock, onHangup } = wiring;
  let stop: () => Promise<void> = async () => undefined;
  let drain = () => undefined as void;
  /** Says on the Target (or ClusterTarget) when its metrics API stops or starts answering. */
  const tellMetricsAvailability = async (target: TargetClient, available: boolean, reason: string) => {
    const { ref } = target;
    const plural = ref.kind === 'Target' ? 'targets' : 'clustertargets';
    const obj = (await (
      ref.kind === 'Target'
        ? custom.getNamespacedCustomObject({ group: API_GROUP, version: API_VERSION, namespace: ref.namespace, plural, name: ref.name })
        : custom.getClusterCustomObject({ group: API_GROUP, version: API_VERSION, plural, name: ref.name })
    ).catch(() => undefined)) as { metadata?: { uid?: string } } | undefined;
    const involved = { kind: ref.kind, apiVersion: `${API_GROUP}/${API_VERSION}`, metadata: { name: ref.name, namespace: ref.kind === 'Target' ? ref.namespace : undefined, uid: obj?.metadata?.uid } };
    events.record(
      involved,
      available ? 'Normal' : 'Warning',
      available ? 'MetricsAvailable' : 'MetricsUnavailable',
      available ? reason : `no usage figures for proxies on this target (kubectl top, HorizontalPodAutoscalers): ${reason}`,
    );
  };
  const start = async () => {
    const serving = new KubeletServingCertificate({
      certificates: kc.makeApiClient(CertificatesV1Api),
      nodeName: `admiralty-${config.clusterName}`,
      ipAddresses: [config.kubeletAddress],
      dnsNames: [],
      signerName: config.kubeletServingSigner,
      clock,
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
      operatorViews: createOperatorViews({ core, registry: clusters, explain: () => reads.explain, refusals: () => reads.refusals, clock }),
      resolver: createProxyResolver({ core, registry: clusters, sourceClusterName: config.clusterName }),
      nodeUsage: new ResourceUsage({
        proxiesOn: reads.proxies ? proxiesOnNode(reads.proxies) : () => [],
        delegate: (targetKey, namespace, name) => reads.delegates?.(targetKey)?.get(name, namespace),
        registry: clusters,
        sourceClusterName: config.clusterName,
        clock,
        logger,
        onAvailability: (target, available, reason) => void tellMetricsAvailability(target, available, reason),
      }),
    });
    await server.listen();
    metrics.certificateExpiry.set({ certificate: 'kubelet' }, readCertificate(first.certPem).notAfter.getTime() / 1000);
    const rotator = new CertRotator({
      issue: () => serving.issue(),
      onRotate: (pair) => {
        server.setCertificate(pair.certPem, pair.keyPem);
        metrics.certificateExpiry.set({ certificate: 'kubelet' }, readCertificate(pair.certPem).notAfter.getTime() / 1000);
      },
      clock,
      onError: (err) => logger.warn('kubelet certificate renewal failed', errorFields(err)),
    });
    await rotator.start(first);
    // SIGHUP forces a renewal, as for the webhook's.
    const stopHearingHangups = onHangup(() => void rotator.rotateNow().catch((err) => logger.warn('forced kubelet certificate rotation failed', errorFields(err))));
    logger.info('kubelet API listening', { address: config.kubeletBindAddress, port: config.kubeletPort, selfSigned: first.selfSigned });
    drain = () => server.drain();
    stop = async () => {
      stopHearingHangups();
      rotator.stop();
      await server.close();
    };
  };
  return { name: 'kubelet API', start, drain: () => drain(), stop: () => stop() };
}

/**
 * Metrics and probes, plain HTTP. Ready means "can serve" (servers listening, serving caches
 * synced, not shutting down), on the leader and on a standby alike; `/leaderz` says which
 * replica leads, for operators and the sandbox's tests (no secret in it).
 */
export function opsRunnable(options: OpsOptions): Runnable {
  let server: Server | undefined;
  return {
    name: 'metrics server',
    start: async () => void (server = await startOpsServer(options)),
    stop: () => new Promise<void>((res) => (server ? server.close(() => res()) : res())),
  };
}

/** Where the ops server listens, what it exports, and whose readiness and leadership it says. */
export interface OpsOptions {
  port: number;
  host: string;
  registry: Registry;
  manager: Pick<Manager, 'readiness' | 'isLeader'>;
}

/** Health and metrics, first to start so that probes answer while the rest starts (and last to stop). */
export function setupOps(wiring: Wiring): void {
  const { config, registry, manager } = wiring;
  manager.add(opsRunnable({ port: config.metricsPort, host: config.metricsBindAddress, registry, manager }));
}

async function startOpsServer(options: OpsOptions): Promise<Server> {
  const { registry, manager } = options;
  const ops = express();
  // Scrapers do not revalidate: an ETag would only cost a SHA-1 of every scrape.
  ops.disable('etag');
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
  ops.get('/leaderz', (_req, res) => {
    const leading = manager.isLeader();
    res.status(leading ? 200 : 503).send(leading ? 'leader' : 'standby');
  });
  return new Promise((res) => {
    const s = ops.listen(options.port, options.host, () => res(s));
  });
}
