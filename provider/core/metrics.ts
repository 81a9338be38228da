import { collectDefaultMetrics, Counter, Gauge, Histogram, type Registry } from 'prom-client';

/**
 * The provider's metrics, all on the injected registry (never the global one). Label values are
 * bounded: controller, target and informer names, phases and results; never pod names. The
 * webhook and kubelet servers register their own request histograms on the same registry.
 */
export function createMetrics(registry: Registry) {
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  return {
    reconcileTotal: new Counter({
      name: 'admiralty_controller_reconcile_total',
      help: 'Reconciles by controller and result (success, error, terminal).',
      labelNames: ['controller', 'result'],
      registers,
    }),
    reconcileDuration: new Histogram({
      name: 'admiralty_controller_reconcile_duration_seconds',
      help: 'Time spent in one reconcile.',
      labelNames: ['controller'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    workqueueDepth: new Gauge({ name: 'admiralty_workqueue_depth', help: 'Keys waiting in a controller queue.', labelNames: ['controller'], registers }),
    workqueueAdds: new Counter({ name: 'admiralty_workqueue_adds_total', help: 'Keys added to a controller queue.', labelNames: ['controller'], registers }),
    workqueueRetries: new Counter({ name: 'admiralty_workqueue_retries_total', help: 'Keys requeued with backoff after a failure.', labelNames: ['controller'], registers }),
    delegates: new Gauge({ name: 'admiralty_delegates', help: 'Delegate pods by target and phase.', labelNames: ['target', 'phase'], registers }),
    targetCacheBytes: new Gauge({
      name: 'admiralty_target_cache_bytes',
      help: "What a target's caches hold, in estimated bytes of heap (see --target-cache-budget-mib).",
      labelNames: ['target'],
      registers,
    }),
    shardsOwned: new Gauge({ name: 'admiralty_shards_owned', help: 'With --shard-targets: the shards (targets, and the cluster-wide one) this replica owns.', registers }),
    targetReady: new Gauge({ name: 'admiralty_target_ready', help: '1 when a target is reachable and usable, else 0.', labelNames: ['target'], registers }),
    outageFailovers: new Counter({
      name: 'admiralty_outage_failovers_total',
      help: 'Proxies deleted so that their controller recreates them elsewhere, their target being unreachable longer than their failover-after.',
      labelNames: ['target'],
      registers,
    }),
    replacements: new Counter({
      name: 'admiralty_replacements_total',
      help: 'Proxies deleted so that their controller recreates them on another target, their delegate stuck in this one (reason Unschedulable, NotTriggerScaleUp or NodeLost).',
      labelNames: ['target', 'reason'],
      registers,
    }),
    fencedDelegates: new Counter({
      name: 'admiralty_outage_fenced_delegates_total',
      help: 'Delegates deleted by fencing: their proxy went while their target was unreachable.',
      labelNames: ['target'],
      registers,
    }),
    certificateExpiry: new Gauge({ name: 'admiralty_certificate_expiry_timestamp_seconds', help: 'When a serving certificate expires (Unix time).', labelNames: ['certificate'], registers }),
    webhookConnectionsClosed: new Counter({
      name: 'admiralty_webhook_connections_closed_total',
      help: 'Connections the webhook server refused or closed on its own, by reason (connection_limit, connection_limit_per_address, first_request_timeout, request_timeout).',
      labelNames: ['reason'],
      registers,
    }),
    webhookConnections: new Counter({
      name: 'admiralty_webhook_connections_total',
      help: 'TLS connections the webhook server accepted (the scheduler extender shares it), by the protocol the client chose (h2, http/1.1).',
      labelNames: ['protocol'],
      registers,
    }),
    webhookBodiesRefused: new Counter({
      name: 'admiralty_webhook_bodies_refused_total',
      help: 'Request bodies the webhook server refused for their size (too_large, 413) or because the bodies it held at once were at their budget (connection_budget, server_budget; 503).',
      labelNames: ['reason'],
      registers,
    }),
    admissionReviewsAbandoned: new Counter({
      name: 'admiralty_webhook_reviews_abandoned_total',
      help: 'Admission reviews answered without their worker: deadline (denied, the worker replaced), worker_exit (denied), queue_full and closed (503).',
      labelNames: ['reason'],
      registers,
    }),
    informerRestarts: new Counter({ name: 'admiralty_informer_restarts_total', help: 'Informer restarts after a watch or list failure.', labelNames: ['informer'], registers }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
