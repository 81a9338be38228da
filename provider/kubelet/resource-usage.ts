import http from 'node:http';
import https from 'node:https';
import type { V1Pod } from '@kubernetes/client-node';
import type { ClusterRegistry } from '../clusters/cluster-registry.js';
import type { TargetClient } from '../clusters/target-client.js';
import type { Clock } from '../core/clock.js';
import { PARENT_CLUSTER_NAME_LABEL } from '../core/keys.js';
import { errorFields, type Logger } from '../core/logger.js';
import { delegatePodName } from '../model/names.js';
import { isOurDelegate } from '../model/delegate-pod.js';
import { parsePodMetricsList, type ContainerUsage, type NodeUsage, type PodSample, type PodUsage } from '../model/resource-metrics.js';

/** What the kubelet server asks for a node-scoped metrics or stats request. */
export interface NodeUsageSource {
  /** The usage of a virtual node's proxies; null when the name is not one of our virtual nodes. */
  nodeUsage(nodeName: string): Promise<NodeUsage | null>;
}

/** The outcome of reading one namespace's PodMetrics in a target. */
export type PodMetricsRead = { samples: Map<string, PodSample> } | { unavailable: string };

/** Reads `metrics.k8s.io` PodMetrics of one namespace in a target (injected in tests). */
export type PodMetricsReader = (target: TargetClient, namespace: string, labelSelector: string) => Promise<PodMetricsRead>;

/** Largest PodMetricsList body read from a target: about 2,000 delegates of one container. */
export const MAX_POD_METRICS_BYTES = 4 * 1024 * 1024;
/** How long a PodMetricsList request to a target may take. */
export const POD_METRICS_TIMEOUT_MS = 10_000;

/**
 * Reads PodMetrics through the target's KubeConfig, as a raw request so that the body is bounded
 * ({@link MAX_POD_METRICS_BYTES}) before it is parsed. A target without the metrics API (404),
 * with it unavailable (503: metrics-server down), or refusing us (403: the Source role predates
 * `pods.metrics.k8s.io`) answers `unavailable` with the reason; anything else throws.
 */
export const readTargetPodMetrics: PodMetricsReader = async (target, namespace, labelSelector) => {
  const cluster = target.kubeConfig.getCurrentCluster();
  if (!cluster) throw new Error('target kubeconfig has no current cluster');
  const url = new URL(`${cluster.server.replace(/\/+$/, '')}/apis/metrics.k8s.io/v1beta1/namespaces/${encodeURIComponent(namespace)}/pods`);
  url.searchParams.set('labelSelector', labelSelector);
  const opts: https.RequestOptions = { method: 'GET', headers: { Accept: 'application/json' } };
  await target.kubeConfig.applyToHTTPSOptions(opts);
  const mod = url.protocol === 'https:' ? https : http;
  const { status, body } = await new Promise<{ status: number; body: Buffer }>((resolve, reject) => {
    const req = mod.request(url, { ...opts, signal: AbortSignal.timeout(POD_METRICS_TIMEOUT_MS) }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_POD_METRICS_BYTES) {
          req.destroy(new Error(`PodMetricsList larger than ${MAX_POD_METRICS_BYTES} bytes`));
          return;
        }
        chunks.push(c);
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
  if (status === 404) return { unavailable: 'the metrics.k8s.io API is not served (no metrics-server?)' };
  if (status === 503) return { unavailable: 'the metrics.k8s.io API is unavailable (metrics-server not ready?)' };
  if (status === 403) return { unavailable: `forbidden to list pods.metrics.k8s.io in namespace ${namespace} (does the Source role grant it?)` };
  if (status !== 200) throw new Error(`PodMetricsList answered ${status}`);
  return { samples: parsePodMetricsList(JSON.parse(body.toString('utf8'))) };
};

/** Options of {@link ResourceUsage}. */
export interface ResourceUsageOptions {
  /**
   * The proxies bound to a virtual node, from the proxies cache: a scrape lists nothing in the
   * source (a list of every proxy of the node, parsed every few seconds, cost more than the rest).
   */
  proxiesOn: (nodeName: string) => V1Pod[];
  /**
   * A delegate as its target's cache has it: which proxies have usage (only those with a
   * delegate) and their containers' start times (the cached proxy keeps none).
   */
  delegate: (targetKey: string, namespace: string, name: string) => V1Pod | undefined;
  registry: Pick<ClusterRegistry, 'byNodeName'>;
  sourceClusterName: string;
  clock: Clock;
  logger: Logger;
  /** Told once per transition of a target's metrics API, with the reason when unavailable. */
  onAvailability: (target: TargetClient, available: boolean, reason: string) => void;
  read?: PodMetricsReader;
  /** How long one read of a node's proxies and their delegates' PodMetrics is reused. */
  ttlMs?: number;
}

/** metrics-server's default scrape interval is 15 s; half that keeps figures within one scrape. */
export const DEFAULT_USAGE_TTL_MS = 5_000;

interface Counter {
  coreSeconds: number;
  timestampMs: number;
}

/**
 * The usage behind each virtual node's `/metrics/resource` and `/stats/summary`: the proxies
 * bound to the node that have a delegate (both from the caches) and their delegates'
 * PodMetrics (one list per namespace in the target, selected by this source's
 * `parent-cluster-name`), reused for
 * {@link DEFAULT_USAGE_TTL_MS} and shared by concurrent requests, so a scrape never makes a
 * request per pod.
 *
 * The metrics API gives CPU as a rate; a kubelet gives a cumulative counter, and metrics-server
 * derives the rate back from two scrapes. So each container keeps a counter that advances by
 * rate x elapsed time whenever the target's sample moves forward (starting from the rate times
 * the time since the container started, as if it had run at that rate), and the node keeps one
 * that advances by the sum of its containers' rates: both never decrease, even as pods come and
 * go, and metrics-server reads back the rates the target measured.
 *
 * A target whose metrics API is missing, unavailable or refused is told once through
 * `onAvailability` (and again when it comes back); its pods simply have no figures meanwhile.
 */
export class ResourceUsage implements NodeUsageSource {
  private readonly ttlMs: number;
  private readonly read: PodMetricsReader;
  private readonly startedMs: number;
  private readonly cached = new Map<string, { atMs: number; usage: Promise<NodeUsage | null> }>();
  /** Per virtual node: a counter per container (`<proxy uid>/<container>`). */
  private readonly containers = new Map<string, Map<string, Counter>>();
  private readonly nodes = new Map<string, Counter>();
  private readonly unavailable = new Map<string, string>();

  constructor(private readonly o: ResourceUsageOptions) {
    this.ttlMs = o.ttlMs ?? DEFAULT_USAGE_TTL_MS;
    this.read = o.read ?? readTargetPodMetrics;
    this.startedMs = o.clock.now();
  }

  nodeUsage(nodeName: string): Promise<NodeUsage | null> {
    if (!this.o.registry.byNodeName(nodeName)) {
      // Names callers choose are never kept; a virtual node gone takes its state with it.
      this.cached.delete(nodeName);
      this.nodes.delete(nodeName);
      this.containers.delete(nodeName);
      return Promise.resolve(null);
    }
    const now = this.o.clock.now();
    const hit = this.cached.get(nodeName);
    if (hit && now - hit.atMs < this.ttlMs) return hit.usage;
    const usage = this.compute(nodeName, now);
    this.cached.set(nodeName, { atMs: now, usage });
    // A failed read is not reused.
    usage.catch(() => this.cached.delete(nodeName));
    return usage;
  }

  private async compute(nodeName: string, now: number): Promise<NodeUsage | null> {
    const target = this.o.registry.byNodeName(nodeName);
    // Removed between the check and now: as for any node not ours.
    if (!target) return null;
    // Only proxies with a delegate in the target's cache: one without (not created yet, or
    // refused: a pod bound here from a namespace the target does not serve) has no usage, and
    // its namespace is not one to read in the target, where we may have no rights.
    const delegates = new Map<string, V1Pod>();
    const proxies = this.o.proxiesOn(nodeName).filter((p) => {
      const { name, namespace, uid } = p.metadata ?? {};
      if (!name || !namespace || !uid || p.metadata?.deletionTimestamp) return false;
      const delegate = this.o.delegate(target.key, namespace, delegatePodName(name, this.o.sourceClusterName, uid));
      if (!delegate || !isOurDelegate(delegate, this.o.sourceClusterName, uid)) return false;
      delegates.set(uid, delegate);
      return true;
    });
    const namespaces = [...new Set(proxies.map((p) => p.metadata!.namespace!))];
    const selector = `${PARENT_CLUSTER_NAME_LABEL}=${this.o.sourceClusterName}`;
    const samples = new Map<string, Map<string, PodSample>>();
    let unavailable: string | undefined;
    for (const ns of namespaces) {
      let read: PodMetricsRead;
      try {
        read = await this.read(target, ns, selector);
      } catch (err) {
        unavailable = `reading PodMetrics failed: ${errorFields(err).error}`;
        continue;
      }
      if ('unavailable' in read) unavailable = read.unavailable;
      else samples.set(ns, read.samples);
    }
    this.tell(target, unavailable);

    const pods: PodUsage[] = [];
    const before = this.containers.get(nodeName) ?? new Map<string, Counter>();
    // Counters of proxies still bound are kept even while their sample is missing (a counter
    // started again would go backwards); those of proxies gone are dropped.
    const bound = new Set(proxies.map((p) => p.metadata!.uid!));
    const counters = new Map([...before].filter(([key]) => bound.has(key.slice(0, key.indexOf('/')))));
    this.containers.set(nodeName, counters);
    for (const proxy of proxies) {
      const { name, namespace, uid } = proxy.metadata as { name: string; namespace: string; uid: string };
      const sample = samples.get(namespace)?.get(delegatePodName(name, this.o.sourceClusterName, uid));
      if (!sample) continue;
      const started = containerStarts(delegates.get(uid)!);
      const containers: ContainerUsage[] = sample.containers.map((c) => {
        const startTimeMs = started.get(c.name);
        const counter = advance(counters, `${uid}/${c.name}`, c.cpuNanoCores, sample.timestampMs, startTimeMs === undefined ? sample.windowMs : sample.timestampMs - startTimeMs);
        return { name: c.name, startTimeMs, timestampMs: sample.timestampMs, cpuNanoCores: c.cpuNanoCores, cpuCoreSeconds: counter.coreSeconds, memoryWorkingSetBytes: c.memoryWorkingSetBytes };
      });
      const podStart = proxy.status?.startTime ? new Date(proxy.status.startTime).getTime() : undefined;
      pods.push({ namespace, name, uid, startTimeMs: podStart, containers });
    }
    const all = pods.flatMap((p) => p.containers);
    const rate = all.reduce((s, c) => s + c.cpuNanoCores, 0);
    const node = this.nodes.get(nodeName);
    const coreSeconds = node ? node.coreSeconds + (rate / 1e9) * (Math.max(0, now - node.timestampMs) / 1000) : all.reduce((s, c) => s + c.cpuCoreSeconds, 0);
    this.nodes.set(nodeName, { coreSeconds, timestampMs: now });
    return {
      nodeName,
      startTimeMs: this.startedMs,
      timestampMs: now,
      cpuNanoCores: rate,
      cpuCoreSeconds: coreSeconds,
      memoryWorkingSetBytes: all.reduce((s, c) => s + c.memoryWorkingSetBytes, 0),
      pods,
    };
  }

  private tell(target: TargetClient, reason: string | undefined): void {
    const was = this.unavailable.get(target.key);
    if (reason === undefined) {
      if (was === undefined) return;
      this.unavailable.delete(target.key);
      this.o.logger.info('target metrics API available again; its proxies have usage figures', { target: target.displayName });
      this.o.onAvailability(target, true, 'the metrics.k8s.io API answers');
      return;
    }
    if (was !== undefined) return;
    this.unavailable.set(target.key, reason);
    this.o.logger.warn('target metrics API unavailable; its proxies have no usage figures (kubectl top, HPA) until it answers', { target: target.displayName, reason });
    this.o.onAvailability(target, false, reason);
  }
}

/**
 * Moves a container's CPU counter to the target's latest sample: rate x time since the last
 * sample, or, for a container first seen, rate x `sinceStartMs`. A sample no newer than the
 * counter leaves it as it is.
 */
function advance(counters: Map<string, Counter>, key: string, nanoCores: number, timestampMs: number, sinceStartMs: number): Counter {
  const prev = counters.get(key);
  let next: Counter;
  if (!prev) next = { coreSeconds: (nanoCores / 1e9) * (Math.max(0, sinceStartMs) / 1000), timestampMs };
  else if (timestampMs > prev.timestampMs) next = { coreSeconds: prev.coreSeconds + (nanoCores / 1e9) * ((timestampMs - prev.timestampMs) / 1000), timestampMs };
  else next = prev;
  counters.set(key, next);
  return next;
}

/**
 * Start times of the delegate's running containers (the proxy's status mirrors them). The
 * delegates cache holds what the target's server wrote: a time that does not parse is left out
 * (unknown), or its NaN would stay in the node's counter for good and fail `/stats/summary`.
 */
function containerStarts(delegate: V1Pod): Map<string, number> {
  const out = new Map<string, number>();
  for (const s of delegate.status?.containerStatuses ?? []) {
    const at = s.state?.running?.startedAt;
    const ms = at ? new Date(at).getTime() : NaN;
    if (Number.isFinite(ms)) out.set(s.name, ms);
  }
  return out;
}
