/**
 * Resource usage of a virtual node's proxies, in the two shapes a kubelet serves it:
 * `/metrics/resource` (Prometheus text, what metrics-server scrapes) and `/stats/summary`
 * (the `stats/v1alpha1` JSON). The figures come from the delegates' PodMetrics in the target
 * (`metrics.k8s.io`); {@link parsePodMetricsList} reads those, bounded. Pure.
 */

/** One container of a delegate, as the target's metrics API last reported it. */
export interface ContainerSample {
  name: string;
  /** CPU rate over the sample's window, in nanocores. */
  cpuNanoCores: number;
  memoryWorkingSetBytes: number;
}

/** One delegate's PodMetrics. */
export interface PodSample {
  /** End of the window the target measured over, ms since the epoch. */
  timestampMs: number;
  windowMs: number;
  containers: ContainerSample[];
}

/** A container of a proxy, with its cumulative CPU (the counter metrics-server takes rates of). */
export interface ContainerUsage {
  name: string;
  /** From the proxy's (mirrored) container status; absent when not running. */
  startTimeMs?: number;
  timestampMs: number;
  cpuNanoCores: number;
  /** Cumulative CPU time in core-seconds: never decreases while the container runs. */
  cpuCoreSeconds: number;
  memoryWorkingSetBytes: number;
}

/** A proxy pod with usage figures. */
export interface PodUsage {
  namespace: string;
  name: string;
  uid: string;
  startTimeMs?: number;
  containers: ContainerUsage[];
}

/** What one virtual node answers: its proxies' usage and the node-level sums. */
export interface NodeUsage {
  nodeName: string;
  /** When the virtual node's kubelet API started (this process), ms since the epoch. */
  startTimeMs: number;
  timestampMs: number;
  cpuNanoCores: number;
  /** Cumulative CPU of the node in core-seconds: integrates the pods' rates, never decreases. */
  cpuCoreSeconds: number;
  memoryWorkingSetBytes: number;
  pods: PodUsage[];
}

/** Bounds on a PodMetricsList read from a target (hostile input). */
export const POD_METRICS_LIMITS = { maxItems: 5000, maxContainers: 64 } as const;

/** A DNS-1123 label or subdomain: every name we write into a label value or JSON key is one. */
const NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
/** The quantity forms metrics-server writes (`12345n`, `1m`, `1048576Ki`, `2`), short. */
const QUANTITY = /^([0-9]{1,19})(\.[0-9]{1,9})?(n|u|m|k|M|G|T|Ki|Mi|Gi|Ti)?$/;
const SCALE: Record<string, number> = { '': 1, n: 1e-9, u: 1e-6, m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40 };
/** Go durations as metrics-server writes windows: `15s`, `20.004s`, `1m0s`. */
const DURATION = /^(?:([0-9]{1,6})h)?(?:([0-9]{1,6})m)?(?:([0-9]{1,9}(?:\.[0-9]{1,9})?)s)?$/;

function quantity(value: unknown): number | undefined {
  if (typeof value !== 'string') return undefined;
  const m = QUANTITY.exec(value);
  if (!m) return undefined;
  const scale = SCALE[m[3] ?? ''];
  if (scale === undefined) return undefined;
  const n = Number(m[1] + (m[2] ?? '')) * scale;
  return Number.isFinite(n) ? n : undefined;
}

function durationMs(value: unknown): number | undefined {
  if (typeof value !== 'string' || value === '') return undefined;
  const m = DURATION.exec(value);
  if (!m) return undefined;
  return (Number(m[1] ?? 0) * 3600 + Number(m[2] ?? 0) * 60 + Number(m[3] ?? 0)) * 1000;
}

function object(v: unknown): Record<string, unknown> | undefined {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

/**
 * Reads a `metrics.k8s.io` PodMetricsList into samples by pod name. Items that are not
 * well-formed (a name that is not a DNS name, a timestamp that does not parse, a quantity
 * outside the forms metrics-server writes) are skipped, not trusted; at most
 * {@link POD_METRICS_LIMITS} items and containers per item are read. Pure.
 */
export function parsePodMetricsList(body: unknown): Map<string, PodSample> {
  const out = new Map<string, PodSample>();
  const items = object(body)?.items;
  if (!Array.isArray(items)) return out;
  for (const raw of items.slice(0, POD_METRICS_LIMITS.maxItems)) {
    const item = object(raw);
    const name = object(item?.metadata)?.name;
    if (typeof name !== 'string' || !NAME.test(name) || out.has(name)) continue;
    const timestampMs = typeof item?.timestamp === 'string' ? Date.parse(item.timestamp) : NaN;
    const windowMs = durationMs(item?.window);
    const containers = item?.containers;
    if (!Number.isFinite(timestampMs) || windowMs === undefined || !Array.isArray(containers)) continue;
    const samples: ContainerSample[] = [];
    let valid = containers.length <= POD_METRICS_LIMITS.maxContainers;
    for (const c of valid ? containers : []) {
      const container = object(c);
      const usage = object(container?.usage);
      const cpu = quantity(usage?.cpu);
      const memory = quantity(usage?.memory);
      if (typeof container?.name !== 'string' || !NAME.test(container.name) || cpu === undefined || memory === undefined) {
        valid = false;
        break;
      }
      samples.push({ name: container.name, cpuNanoCores: Math.round(cpu * 1e9), memoryWorkingSetBytes: Math.round(memory) });
    }
    if (valid) out.set(name, { timestampMs, windowMs, containers: samples });
  }
  return out;
}

/** A Prometheus sample value: Go's ParseFloat reads JavaScript's number text. */
function value(n: number): string {
  return Number.isFinite(n) ? String(n) : '0';
}

/** A label value, escaped as the text format requires (backslash, double quote, newline). */
function labelValue(s: string): string {
  return s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

/**
 * The `/metrics/resource` body (Prometheus text format 0.0.4) of one virtual node, with the
 * series and labels a kubelet writes and metrics-server reads: `node_cpu_usage_seconds_total`,
 * `node_memory_working_set_bytes`, `pod_cpu_usage_seconds_total`,
 * `pod_memory_working_set_bytes`, `container_cpu_usage_seconds_total`,
 * `container_memory_working_set_bytes`, `container_start_time_seconds` (labels `container`,
 * `namespace`, `pod`), each sample with its millisecond timestamp (metrics-server computes CPU
 * rates between two scrapes from these). One HELP and TYPE per family, families contiguous.
 * Pure.
 */
export function renderResourceMetrics(u: NodeUsage): string {
  const lines: string[] = [];
  const family = (name: string, type: 'counter' | 'gauge', help: string, samples: string[]) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, ...samples);
  };
  const ts = (ms: number) => String(Math.floor(ms));
  const podLabels = (p: PodUsage) => `namespace="${labelValue(p.namespace)}",pod="${labelValue(p.name)}"`;
  const containers = u.pods.flatMap((p) => p.containers.map((c) => ({ p, c, labels: `container="${labelValue(c.name)}",${podLabels(p)}` })));
  const podTime = (p: PodUsage) => Math.max(...p.containers.map((c) => c.timestampMs));
  const withContainers = u.pods.filter((p) => p.containers.length > 0);

  family(
    'container_cpu_usage_seconds_total',
    'counter',
    '[STABLE] Cumulative cpu time consumed by the container in core-seconds',
    containers.map(({ c, labels }) => `container_cpu_usage_seconds_total{${labels}} ${value(c.cpuCoreSeconds)} ${ts(c.timestampMs)}`),
  );
  family(
    'container_memory_working_set_bytes',
    'gauge',
    '[STABLE] Current working set of the container in bytes',
    containers.map(({ c, labels }) => `container_memory_working_set_bytes{${labels}} ${value(c.memoryWorkingSetBytes)} ${ts(c.timestampMs)}`),
  );
  family(
    'container_start_time_seconds',
    'gauge',
    '[STABLE] Start time of the container since unix epoch in seconds',
    containers.filter(({ c }) => c.startTimeMs !== undefined).map(({ c, labels }) => `container_start_time_seconds{${labels}} ${value(c.startTimeMs! / 1000)} ${ts(c.timestampMs)}`),
  );
  family('node_cpu_usage_seconds_total', 'counter', '[STABLE] Cumulative cpu time consumed by the node in core-seconds', [
    `node_cpu_usage_seconds_total ${value(u.cpuCoreSeconds)} ${ts(u.timestampMs)}`,
  ]);
  family('node_memory_working_set_bytes', 'gauge', '[STABLE] Current working set of the node in bytes', [`node_memory_working_set_bytes ${value(u.memoryWorkingSetBytes)} ${ts(u.timestampMs)}`]);
  family(
    'pod_cpu_usage_seconds_total',
    'counter',
    '[STABLE] Cumulative cpu time consumed by the pod in core-seconds',
    withContainers.map((p) => `pod_cpu_usage_seconds_total{${podLabels(p)}} ${value(p.containers.reduce((s, c) => s + c.cpuCoreSeconds, 0))} ${ts(podTime(p))}`),
  );
  family(
    'pod_memory_working_set_bytes',
    'gauge',
    '[STABLE] Current working set of the pod in bytes',
    withContainers.map((p) => `pod_memory_working_set_bytes{${podLabels(p)}} ${value(p.containers.reduce((s, c) => s + c.memoryWorkingSetBytes, 0))} ${ts(podTime(p))}`),
  );
  family('resource_scrape_error', 'gauge', '[STABLE] 1 if there was an error while getting container metrics, 0 otherwise', ['resource_scrape_error 0']);
  return lines.join('\n') + '\n';
}

/** A `uint64` as Go's encoding/json reads it: a non-negative integer, never in exponent form. */
function uint64(n: number): number {
  return Number.isFinite(n) && n > 0 ? Math.min(Math.round(n), Number.MAX_SAFE_INTEGER) : 0;
}

function rfc3339(ms: number): string {
  return new Date(ms).toISOString();
}

/**
 * The `/stats/summary` body (`stats/v1alpha1.Summary`) of one virtual node: the node and each
 * proxy with CPU (`usageNanoCores`, `usageCoreNanoSeconds`) and memory (`workingSetBytes`), each
 * with its `time`. What a virtual node does not have (network, filesystems, runtime, rlimits)
 * is left out: those fields are optional pointers upstream. Pure.
 */
export function buildStatsSummary(u: NodeUsage): object {
  const cpu = (time: number, nanoCores: number, coreSeconds: number) => ({ time: rfc3339(time), usageNanoCores: uint64(nanoCores), usageCoreNanoSeconds: uint64(coreSeconds * 1e9) });
  const memory = (time: number, bytes: number) => ({ time: rfc3339(time), workingSetBytes: uint64(bytes) });
  return {
    node: {
      nodeName: u.nodeName,
      startTime: rfc3339(u.startTimeMs),
      cpu: cpu(u.timestampMs, u.cpuNanoCores, u.cpuCoreSeconds),
      memory: memory(u.timestampMs, u.memoryWorkingSetBytes),
    },
    pods: u.pods.map((p) => {
      const time = p.containers.length ? Math.max(...p.containers.map((c) => c.timestampMs)) : u.timestampMs;
      const sum = (f: (c: ContainerUsage) => number) => p.containers.reduce((s, c) => s + f(c), 0);
      return {
        podRef: { name: p.name, namespace: p.namespace, uid: p.uid },
        startTime: rfc3339(p.startTimeMs ?? u.startTimeMs),
        containers: p.containers.map((c) => ({
          name: c.name,
          startTime: rfc3339(c.startTimeMs ?? p.startTimeMs ?? u.startTimeMs),
          cpu: cpu(c.timestampMs, c.cpuNanoCores, c.cpuCoreSeconds),
          memory: memory(c.timestampMs, c.memoryWorkingSetBytes),
        })),
        cpu: cpu(
          time,
          sum((c) => c.cpuNanoCores),
          sum((c) => c.cpuCoreSeconds),
        ),
        memory: memory(
          time,
          sum((c) => c.memoryWorkingSetBytes),
        ),
      };
    }),
  };
}
