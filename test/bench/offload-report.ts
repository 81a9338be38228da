/**
 * The pure half of the offload benchmark (test/bench/offload.ts): its arguments, the figures it
 * derives from the timestamps its watches observe, the line scripts read, the table, and the
 * SVG chart. No I/O and no clock here, so all of it is unit-tested (test/unit/bench/).
 */

import { atMost, mibToMB, OFFLOAD_GOALS, renderGoal, type GoalVerdict } from './goals.js';

/** What `offload` runs: pod counts, creation concurrency, where the JSON and SVG go, and whether each cluster gets cores of its own. */
export interface OffloadArgs {
  sizes: number[];
  concurrency: number;
  outDir: string;
  /** Each cluster's processes on their own cores (c1 on the first half, c2 on the second), as clusters on machines of their own. */
  pinClusters: boolean;
}

export const DEFAULT_SIZES: readonly number[] = [100, 1000];
export const DEFAULT_CONCURRENCY = 20;
export const DEFAULT_OUT_DIR = '.bench';

export const OFFLOAD_USAGE = '[--sizes 100,1000] [--concurrency 20] [--out .bench] [--pin-clusters]';

/**
 * Parses `offload`'s arguments (`--sizes 100,1000`, `--sizes=100,1000`, `--concurrency N`,
 * `--out DIR`, `--pin-clusters`). Sizes are whole numbers from 1, kept in the order given, duplicates dropped.
 *
 * @throws Error with a message for the user on an unknown flag or a bad value.
 */
export function parseOffloadArgs(argv: readonly string[]): OffloadArgs {
  const out: OffloadArgs = { sizes: [...DEFAULT_SIZES], concurrency: DEFAULT_CONCURRENCY, outDir: DEFAULT_OUT_DIR, pinClusters: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const eq = arg!.indexOf('=');
    const flag = arg!.startsWith('--') && eq > 0 ? arg!.slice(0, eq) : arg;
    const value = (): string => {
      if (flag !== arg) return arg!.slice(eq + 1);
      const v = argv[++i];
      if (v === undefined) throw new Error(`${flag} needs a value`);
      return v;
    };
    switch (flag) {
      case '--sizes': {
        const text = value();
        const sizes = text.split(',').map((s) => s.trim());
        if (sizes.some((s) => !/^[1-9]\d*$/.test(s))) throw new Error(`--sizes takes whole numbers from 1, separated by commas: ${JSON.stringify(text)}`);
        out.sizes = [...new Set(sizes.map(Number))];
        break;
      }
      case '--concurrency': {
        const text = value();
        if (!/^[1-9]\d*$/.test(text)) throw new Error(`--concurrency takes a whole number from 1: ${JSON.stringify(text)}`);
        out.concurrency = Number(text);
        break;
      }
      case '--out': {
        const text = value();
        if (text === '') throw new Error('--out takes a folder');
        out.outDir = text;
        break;
      }
      case '--pin-clusters':
        if (flag !== arg) throw new Error('--pin-clusters takes no value');
        out.pinClusters = true;
        break;
      default:
        throw new Error(`unknown argument ${JSON.stringify(arg)}; usage: offload ${OFFLOAD_USAGE}`);
    }
  }
  return out;
}

/**
 * The pod capacity to give each of the target's nodes so that they hold `size` more pods than the
 * `running` ones, with `margin` to spare, raised evenly; undefined when their allocatable pods
 * already suffice (nothing to change). Never lowers a node: the result is at least its largest
 * allocatable.
 */
export function podCapacityPlan(allocatablePods: readonly number[], running: number, size: number, margin: number): number | undefined {
  const needed = size + running + margin;
  const total = allocatablePods.reduce((a, b) => a + b, 0);
  if (allocatablePods.length === 0 || total >= needed) return undefined;
  return Math.max(Math.ceil(needed / allocatablePods.length), ...allocatablePods);
}

/**
 * The p-th percentile (0 < p <= 100) by nearest rank: the smallest value with at least p% of the
 * values at or below it. NaN for no values. Does not reorder `values`.
 */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  // Between 0 and length - 1: values is not empty.
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

/**
 * The moments of one pod's way that the benchmark observes, in ms since its run started (the
 * first creation request). `sent`: its creation request left; `created`: the apiserver
 * answered (admission, our webhook included, is before this); `bound`: spec.nodeName seen;
 * `running`: phase Running seen. For an offloaded pod these are the proxy's, and the `delegate*`
 * ones those of its delegate in the target. `gone`: its deletion seen in the target (the
 * delegate's, for an offloaded pod); `proxyGone`: the proxy's deletion seen in the source.
 */
export interface PodTimes {
  sent?: number;
  created?: number;
  bound?: number;
  delegateCreated?: number;
  delegateBound?: number;
  delegateRunning?: number;
  running?: number;
  gone?: number;
  proxyGone?: number;
}

/** One gap of a pod's way: from one observed moment to the next. */
export interface Stage {
  name: string;
  from: keyof PodTimes;
  to: keyof PodTimes;
}

/** One observed moment of a pod's way, and what to call it. */
export interface Milestone {
  key: keyof PodTimes;
  label: string;
}

/** The way of a pod created directly in the target. */
export const DIRECT_MILESTONES: readonly Milestone[] = [
  { key: 'sent', label: 'sent' },
  { key: 'created', label: 'created' },
  { key: 'bound', label: 'bound' },
  { key: 'running', label: 'Running' },
];

/**
 * The way of an offloaded pod: the proxy in the source, its delegate in the target. Their order
 * depends on the mode: with the proxy scheduler's extender, the provider creates the delegate and
 * waits for the target to place it before it binds the proxy; without, the proxy is bound first.
 * So the stages are put in the order observed (see {@link orderedStages}).
 */
export const OFFLOAD_MILESTONES: readonly Milestone[] = [
  { key: 'sent', label: 'sent' },
  { key: 'created', label: 'proxy created' },
  { key: 'bound', label: 'proxy bound' },
  { key: 'delegateCreated', label: 'delegate created' },
  { key: 'delegateBound', label: 'delegate bound' },
  { key: 'delegateRunning', label: 'delegate Running' },
  { key: 'running', label: 'proxy Running' },
];

/**
 * The stages between consecutive milestones, the milestones taken in the order of their median
 * time since the first one (`sent`), ties kept in the given order. Milestones nobody reached go
 * last. Pure; used with {@link stageFigures}.
 */
export function orderedStages(pods: readonly PodTimes[], milestones: readonly Milestone[]): Stage[] {
  const [first, ...rest] = milestones;
  const median = (m: Milestone): number => {
    const v = percentile(
      pods.flatMap((p) => (p[m.key] !== undefined && p[first!.key] !== undefined ? [p[m.key]! - p[first!.key]!] : [])),
      50,
    );
    return Number.isNaN(v) ? Infinity : v;
  };
  const order = [
    first,
    ...rest
      .map((m, i) => ({ m, i, at: median(m) }))
      .sort((a, b) => a.at - b.at || a.i - b.i)
      .map((x) => x.m),
  ];
  return order.slice(1).map((m, i) => ({ name: `${order[i]!.label} -> ${m!.label}`, from: order[i]!.key, to: m!.key }));
}

/** p50 and p99 of one stage's gap over the pods that were seen at both ends, in ms. */
export interface StageFigure {
  name: string;
  p50Ms: number;
  p99Ms: number;
  /** p50 of the stage's end since the pod's creation request was sent: where on the way it ends. */
  endP50Ms: number;
  /** How many pods were seen at both ends. */
  pods: number;
}

/**
 * Per stage, the percentiles of each pod's own gap (not the gap between two percentiles); a pod
 * missing either end is left out of that stage. A gap may be slightly negative when two watches
 * see one step in the other order.
 */
export function stageFigures(pods: readonly PodTimes[], stages: readonly Stage[]): StageFigure[] {
  return stages.map((s) => {
    const gaps = pods.flatMap((p) => (p[s.from] !== undefined && p[s.to] !== undefined ? [p[s.to]! - p[s.from]!] : []));
    const ends = pods.flatMap((p) => (p.sent !== undefined && p[s.to] !== undefined ? [p[s.to]! - p.sent] : []));
    return { name: s.name, p50Ms: percentile(gaps, 50), p99Ms: percentile(gaps, 99), endP50Ms: percentile(ends, 50), pods: gaps.length };
  });
}

/** Each pod's start latency (creation request sent -> Running seen) in ms, for pods seen at both ends. */
export function startLatencies(pods: readonly PodTimes[]): number[] {
  return pods.flatMap((p) => (p.sent !== undefined && p.running !== undefined ? [p.running - p.sent] : []));
}

/** The figures of one run (direct or offloaded) of one size. */
export interface RunFigures {
  /** First creation request sent -> last pod seen Running. */
  allRunningSeconds: number;
  startLatencyP50Ms: number;
  startLatencyP99Ms: number;
  /** Deletion requested -> last pod gone (for an offloaded run: the last delegate in the target). */
  deletionSeconds: number;
  /** Offloaded runs: deletion requested -> last proxy gone in the source. */
  proxiesGoneSeconds?: number;
  /** The source provider's CPU seconds from the first creation request to all Running. */
  providerCpuSeconds: number;
  /** The source provider's CPU seconds during the deletion. */
  providerDeletionCpuSeconds: number;
  providerPeakRssMiB: number;
  providerRssBeforeMiB: number;
  /** Whether the provider process changed during the run (a restart): its figures are then partial. */
  providerRestarted: boolean;
  stages: StageFigure[];
  /** The provider's queues while the pods started (first creation request -> all Running). */
  startQueues?: QueueFigures;
  /** The provider's queues during the deletion. */
  deletionQueues?: QueueFigures;
  /** The whole machine while the pods started. */
  startMachine?: MachineFigures;
  /** The whole machine during the deletion. */
  deletionMachine?: MachineFigures;
  /** Requests each cluster's apiserver served while the pods started, by cluster, then by `VERB resource[/subresource]`. */
  startRequests?: RequestFigures;
  /** Where the provider's memory was at the highest RSS its metrics showed over the run. */
  providerMemoryAtPeak?: MemoryFigures;
  /** The same during the deletion. */
  deletionRequests?: RequestFigures;
  /**
   * Watches each cluster's apiserver closed while the pods started, because their watcher fell
   * behind (`apiserver_terminated_watchers_total`), by cluster, then by resource.
   */
  startWatchesClosed?: RequestFigures;
  /** The same during the deletion. */
  deletionWatchesClosed?: RequestFigures;
  /**
   * Watch events each cluster's apiserver sent while the pods started, to all its watchers
   * (`apiserver_watch_events_total`), by cluster, then by resource; and their bytes
   * (`apiserver_watch_events_sizes_sum`).
   */
  startWatchEvents?: RequestFigures;
  startWatchBytes?: RequestFigures;
  /** The same during the deletion. */
  deletionWatchEvents?: RequestFigures;
  deletionWatchBytes?: RequestFigures;
}

/**
 * Requests served by each cluster's apiserver over one phase (`apiserver_request_total`, every
 * client and code counted): by cluster, then by `VERB resource[/subresource]`, e.g.
 * `{ c1: { 'POST pods': 1000, 'PATCH pods/status': 2000 } }`. WATCH and long-running calls are
 * counted when they start.
 */
export type RequestFigures = Record<string, Record<string, number>>;

/**
 * What the whole machine did over one phase of a run: every sandbox process shares its cores
 * with the others, so a run is bounded by the machine as soon as its cores are busy.
 */
export interface MachineFigures {
  /** CPU seconds by sandbox process (`c1-kube-apiserver`, `c2-etcd`, `c1-provider`, ...). */
  cpuSecondsByProcess: Record<string, number>;
  /** The benchmark's own client (its requests and watches). */
  benchCpuSeconds: number;
  /** Busy share of all the machine's cores over the phase (0 to 1), every process counted. */
  busy: number;
  cores: number;
}

/**
 * One reading of a process's memory, from its default metrics (prom-client's): the resident set,
 * what V8's heap has committed and uses, by space (`new`, `old`, `code`, `large_object`, ...),
 * and the memory outside the heap that V8 is told of (Buffers). All in MiB.
 */
export interface MemoryFigures {
  rssMiB: number;
  heapTotalMiB: number;
  heapUsedMiB: number;
  externalMiB: number;
  /** Committed size by heap space. */
  spacesMiB: Record<string, number>;
}

const MIB = 1024 * 1024;

/** A memory reading ({@link MemoryFigures}) from a process's metrics text, or undefined when it lacks the resident set. */
export function memoryFigures(text: string): MemoryFigures | undefined {
  const one = (metric: string): number | undefined => metricByLabels(text, metric, [], () => '')[''];
  const rss = one('process_resident_memory_bytes');
  if (rss === undefined) return undefined;
  const spacesMiB = Object.fromEntries(Object.entries(metricByLabel(text, 'nodejs_heap_space_size_total_bytes', 'space')).map(([space, bytes]) => [space, bytes / MIB]));
  return {
    rssMiB: rss / MIB,
    heapTotalMiB: (one('nodejs_heap_size_total_bytes') ?? NaN) / MIB,
    heapUsedMiB: (one('nodejs_heap_size_used_bytes') ?? NaN) / MIB,
    externalMiB: (one('nodejs_external_memory_bytes') ?? NaN) / MIB,
    spacesMiB,
  };
}

/** What the provider's metrics say of its controllers over one phase of a run. */
export interface QueueFigures {
  /** The deepest workqueue (`admiralty_workqueue_depth`) by controller, as sampled every second. */
  peakQueueDepth: Record<string, number>;
  /** Reconciles (`admiralty_controller_reconcile_total`, all results) by controller. */
  reconciles: Record<string, number>;
  /** Connections the webhook server (and the extender on it) accepted, by protocol (`h2`, `http/1.1`). */
  webhookConnections?: Record<string, number>;
}

/**
 * The samples of one metric in Prometheus text exposition, summed by the value of one label
 * (e.g. `admiralty_workqueue_depth` by `controller`). Samples without the label are summed under
 * ''. Comment lines and other metrics are skipped; so are values that are not numbers.
 */
export function metricByLabel(text: string, metric: string, label: string): Record<string, number> {
  return metricByLabels(text, metric, [label], ([value]) => value!);
}

/**
 * The samples of one metric summed by the values of several labels, joined by `join` (a label
 * a sample lacks counts as ''), e.g. `apiserver_request_total` by verb, resource and
 * subresource. Same parsing as {@link metricByLabel}.
 */
export function metricByLabels(text: string, metric: string, labels: readonly string[], join: (values: string[]) => string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const m = /^([A-Za-z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== metric) continue;
    const value = Number(m[3]);
    if (Number.isNaN(value)) continue;
    const found = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]));
    const key = join(labels.map((l) => found[l] ?? ''));
    out[key] = (out[key] ?? 0) + value;
  }
  return out;
}

/** An apiserver's requests by `VERB resource[/subresource]`, from its metrics text. */
export function requestsByKind(metricsText: string): Record<string, number> {
  return metricByLabels(metricsText, 'apiserver_request_total', ['verb', 'resource', 'subresource'], ([verb, resource, sub]) =>
    // A non-resource request (`/metrics`, `/healthz`) has its path where a subresource would be.
    resource ? `${verb} ${resource}${sub ? `/${sub}` : ''}` : `${verb} ${sub || '-'}`,
  );
}

/**
 * The watches an apiserver closed because their watcher fell behind, by resource, from its
 * metrics text (`apiserver_terminated_watchers_total`): its watch cache gives each watcher a
 * buffer, and closes the watch of one whose buffer stays full (a client, or the apiserver's own
 * goroutine serving it, that does not keep up). The watcher then watches again, or lists.
 */
export function watchesClosed(metricsText: string): Record<string, number> {
  return metricByLabel(metricsText, 'apiserver_terminated_watchers_total', 'resource');
}

/**
 * The watch events an apiserver sent to its watchers, every watcher counted, by resource, and
 * their bytes as encoded for each watcher, from its metrics text (`apiserver_watch_events_total`,
 * `apiserver_watch_events_sizes_sum`): what one object's change costs in fan-out.
 */
export function watchEventsSent(metricsText: string): { watchEvents: Record<string, number>; watchBytes: Record<string, number> } {
  return { watchEvents: metricByLabel(metricsText, 'apiserver_watch_events_total', 'resource'), watchBytes: metricByLabel(metricsText, 'apiserver_watch_events_sizes_sum', 'resource') };
}

/** `after - before` by key (counters; a key only in `after` counts from zero); zero differences are left out. */
export function counterDelta(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) {
    const d = v - (before[k] ?? 0);
    if (d > 0) out[k] = d;
  }
  return out;
}

// The apiserver labels requests with the HTTP method (LIST, WATCH and APPLY set apart).
const WRITE_VERBS = new Set(['POST', 'PUT', 'PATCH', 'APPLY', 'DELETE', 'DELETECOLLECTION']);

/** Whether a `VERB resource` key of {@link requestsByKind} is a write. */
export function isWrite(kind: string): boolean {
  return WRITE_VERBS.has(kind.split(' ')[0]!);
}

/**
 * One line per size, run, phase and cluster: the apiserver's requests per pod of the run, writes
 * per pod, and the busiest kinds per pod. Shows what an offloaded pod costs each control plane
 * next to a direct one.
 */
export function renderRequests(results: readonly SizeResult[], top = 6): string {
  return perRunPhase(results, (r, kind, phase) =>
    Object.entries(r[kind][phase === 'start' ? 'startRequests' : 'deletionRequests'] ?? {})
      .sort((a, b) => a[0].localeCompare(b[0]))
      .map(([cluster, counts]) => {
        const entries = Object.entries(counts).sort((a, b) => b[1] - a[1]);
        const all = entries.reduce((s, [, n]) => s + n, 0);
        const writes = entries.filter(([k]) => isWrite(k)).reduce((s, [, n]) => s + n, 0);
        const busiest = entries
          .slice(0, top)
          .map(([k, n]) => `${k} ${fmt(n / r.size, 2)}`)
          .join(', ');
        const closed = Object.entries(r[kind][phase === 'start' ? 'startWatchesClosed' : 'deletionWatchesClosed']?.[cluster] ?? {})
          .sort((a, b) => b[1] - a[1])
          .map(([resource, n]) => `${resource} ${n}`)
          .join(', ');
        const bytes = r[kind][phase === 'start' ? 'startWatchBytes' : 'deletionWatchBytes']?.[cluster] ?? {};
        const sent = Object.entries(r[kind][phase === 'start' ? 'startWatchEvents' : 'deletionWatchEvents']?.[cluster] ?? {})
          .sort((a, b) => b[1] - a[1])
          .slice(0, 3)
          .map(([resource, n]) => `${resource} ${fmt(n / r.size, 2)} (${fmt((bytes[resource] ?? 0) / 1024 / r.size, 1)} KiB)`)
          .join(', ');
        return `${r.size} ${kind}, ${phase}, ${cluster}: ${fmt(all / r.size, 2)} requests a pod, ${fmt(writes / r.size, 2)} writes (${busiest || '-'})${sent ? `; watch events sent a pod: ${sent}` : ''}${closed ? `; watches closed for falling behind: ${closed}` : ''}`;
      }),
  );
}

/** Both runs of one size. */
export interface SizeResult {
  size: number;
  direct: RunFigures;
  offloaded: RunFigures;
  /** Raw per-pod times (ms since each run's start), for the JSON and the latency CDF. */
  directPods?: PodTimes[];
  offloadedPods?: PodTimes[];
}

/**
 * The line scripts read, one per size, e.g.
 * `offload 1000 pods: direct 18.2 s, offloaded 21.0 s, ratio 1.15`.
 */
export function summaryLine(size: number, directSeconds: number, offloadedSeconds: number): string {
  return `offload ${size} pods: direct ${directSeconds.toFixed(1)} s, offloaded ${offloadedSeconds.toFixed(1)} s, ratio ${(offloadedSeconds / directSeconds).toFixed(2)}`;
}

/** Matches a {@link summaryLine}; groups: size, direct seconds, offloaded seconds, ratio. */
export const SUMMARY_LINE_PATTERN = /^offload (\d+) pods: direct (\d+\.\d) s, offloaded (\d+\.\d) s, ratio (\d+\.\d\d)$/;

const fmt = (n: number | undefined, digits: number): string => (n === undefined || !Number.isFinite(n) ? '-' : n.toFixed(digits));

/** Lays rows out in columns, the first left-aligned, the others right-aligned. */
function columns(rows: readonly string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  return rows
    .map((r) =>
      r
        .map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** The readable table of every size and run: times, latency percentiles, provider CPU and RSS, deletion. */
export function renderTable(results: readonly SizeResult[]): string {
  const header = ['run', 'all Running s', 'start p50 ms', 'start p99 ms', 'provider CPU s', 'peak RSS MiB', 'delete s', 'delete CPU s'];
  const rows = results.flatMap((r) =>
    (['direct', 'offloaded'] as const).map((kind) => {
      const f = r[kind];
      return [
        `${r.size} ${kind}${f.providerRestarted ? ' (provider restarted)' : ''}`,
        fmt(f.allRunningSeconds, 1),
        fmt(f.startLatencyP50Ms, 0),
        fmt(f.startLatencyP99Ms, 0),
        fmt(f.providerCpuSeconds, 1),
        fmt(f.providerPeakRssMiB, 0),
        fmt(f.deletionSeconds, 1) + (f.proxiesGoneSeconds === undefined ? '' : ` (proxies ${fmt(f.proxiesGoneSeconds, 1)})`),
        fmt(f.providerDeletionCpuSeconds, 1),
      ];
    }),
  );
  return columns([header, ...rows]);
}

/**
 * The lines of every size, run (direct, then offloaded) and phase (start, then deletion), in that
 * order: what each renderer below says of one run's phase, joined.
 */
function perRunPhase(results: readonly SizeResult[], line: (r: SizeResult, kind: 'direct' | 'offloaded', phase: 'start' | 'deletion') => string[]): string {
  return results.flatMap((r) => (['direct', 'offloaded'] as const).flatMap((kind) => (['start', 'deletion'] as const).flatMap((phase) => line(r, kind, phase)))).join('\n');
}

/** One line per run and phase on the provider: its deepest queues and its reconciles by controller, its webhook connections by protocol (non-zero ones). */
export function renderQueues(results: readonly SizeResult[]): string {
  const list = (r: Record<string, number> | undefined) =>
    Object.entries(r ?? {})
      .filter(([, n]) => n > 0)
      .sort((a, b) => b[1] - a[1])
      .map(([c, n]) => `${c} ${n}`)
      .join(', ') || '-';
  return perRunPhase(results, (r, kind, phase) => {
    const q = r[kind][phase === 'start' ? 'startQueues' : 'deletionQueues'];
    return [`${r.size} ${kind}, ${phase}: peak queue depth ${list(q?.peakQueueDepth)}; reconciles ${list(q?.reconciles)}; webhook connections ${list(q?.webhookConnections)}`];
  });
}

/**
 * One line per run and phase on the whole machine: how busy its cores were, the sandbox's CPU
 * seconds in all and its six busiest processes, and the benchmark client's own.
 */
export function renderMachine(results: readonly SizeResult[]): string {
  return perRunPhase(results, (r, kind, phase) => {
    const m = r[kind][phase === 'start' ? 'startMachine' : 'deletionMachine'];
    if (!m) return [];
    const byProcess = Object.entries(m.cpuSecondsByProcess).sort((a, b) => b[1] - a[1]);
    const total = byProcess.reduce((sum, [, s]) => sum + s, 0);
    const top = byProcess
      .slice(0, 6)
      .map(([name, s]) => `${name} ${fmt(s, 1)}`)
      .join(', ');
    return [`${r.size} ${kind}, ${phase}: cores ${fmt(m.busy * 100, 0)} % busy (of ${m.cores}); sandbox CPU ${fmt(total, 1)} s (${top || '-'}); benchmark client ${fmt(m.benchCpuSeconds, 1)} s`];
  });
}

/** Sandbox processes that are the providers (`c1-provider`, and the numbered replicas' `c1-provider-1`). */
const PROVIDER_PROCESS = /^c\d+-provider(-\d+)?$/;

/**
 * One line per size on what the machine allows: while the offloaded pods started, the CPU
 * seconds of everything but the providers (the apiservers, etcds, schedulers, kwok, the
 * benchmark's own client) over the cores they had is the shortest that start could have taken
 * with providers that cost nothing and made the same calls; against the direct run's time it
 * is the lowest ratio this machine allows. Sharing the cores, all of it counts over all of
 * them; with `--pin-clusters` (`pinned`), each cluster's processes over its half of the cores,
 * the busier cluster setting the floor (the benchmark's client, on no cluster's cores, left
 * out). Nothing for a size whose offloaded start has no figures.
 */
export function renderCpuFloor(results: readonly SizeResult[], pinned = false): string {
  return results
    .flatMap((r) => {
      const f = cpuFloor(r, pinned);
      if (!f) return [];
      return [
        `${r.size} offloaded, CPU floor: ${fmt(f.othersSeconds, 1)} CPU s outside the providers (theirs ${fmt(f.providersSeconds, 1)} s) ${f.where} take at least ${fmt(f.floorSeconds, 1)} s, ratio ${fmt(f.floorSeconds / r.direct.allRunningSeconds, 2)} with providers that cost nothing; measured ${fmt(r.offloaded.allRunningSeconds / r.direct.allRunningSeconds, 2)}`,
      ];
    })
    .join('\n');
}

/** The figures of {@link renderCpuFloor} for one size, or undefined without the offloaded start's machine figures. */
export function cpuFloor(r: SizeResult, pinned = false): { othersSeconds: number; providersSeconds: number; floorSeconds: number; where: string } | undefined {
  const m = r.offloaded.startMachine;
  if (!m) return undefined;
  const byCluster = new Map<string, { others: number; providers: number }>();
  for (const [name, seconds] of Object.entries(m.cpuSecondsByProcess)) {
    const cluster = name.split('-')[0];
    const c = byCluster.get(cluster!) ?? { others: 0, providers: 0 };
    if (PROVIDER_PROCESS.test(name)) c.providers += seconds;
    else c.others += seconds;
    byCluster.set(cluster!, c);
  }
  const clusters = [...byCluster.values()];
  const providersSeconds = clusters.reduce((sum, c) => sum + c.providers, 0);
  if (pinned) {
    const perCluster = m.cores / Math.max(1, byCluster.size);
    const [busiest, c] = [...byCluster].sort((a, b) => b[1].others - a[1].others)[0] ?? ['-', { others: 0 }];
    return { othersSeconds: c.others, providersSeconds, floorSeconds: c.others / perCluster, where: `in ${busiest}, the busier cluster, on its ${fmt(perCluster, 0)} of ${m.cores} cores` };
  }
  const othersSeconds = clusters.reduce((sum, c) => sum + c.others, 0) + m.benchCpuSeconds;
  return { othersSeconds, providersSeconds, floorSeconds: othersSeconds / m.cores, where: `on ${m.cores} cores` };
}

/**
 * c1's provider's CPU while the offloaded pods started, against two baselines of the same run.
 * First, the CPU seconds the whole sandbox spent starting the same pods directly (the same work
 * every run, none of it the provider's), measured a minute or two earlier. Second, the CPU
 * seconds every other process (both clusters' components, the other provider, the benchmark's
 * client) spent over the same seconds as the provider: the machine's speed moves from run to run
 * and within a run, and moves both alike, so this quotient moves least (0.211 to 0.222 over ten
 * runs of two builds, while one build's provider CPU moved from 7.6 to 11.6 s), and builds
 * compare by it. Nothing for a
 * size without the figures of its runs.
 */
export function renderProviderCpu(results: readonly SizeResult[]): string {
  return results
    .flatMap((r) => {
      const m = r.direct.startMachine;
      const sandbox = m ? Object.values(m.cpuSecondsByProcess).reduce((sum, s) => sum + s, 0) : 0;
      const alongside = cpuFloor(r)?.othersSeconds ?? 0;
      if (!r.offloaded.startMachine || alongside <= 0) return [];
      const provider = r.offloaded.providerCpuSeconds;
      return [
        ...(sandbox > 0
          ? [
              `${r.size} offloaded, provider CPU against the direct run: ${fmt(provider, 1)} s while starting, ${fmt(provider / sandbox, 2)} per CPU second the sandbox spent starting the pods directly (${fmt(sandbox, 1)} s)`,
            ]
          : []),
        `${r.size} offloaded, provider CPU against the rest of the run: ${fmt(provider / alongside, 3)} per CPU second the other processes spent while the pods started (${fmt(alongside, 1)} s)`,
      ];
    })
    .join('\n');
}

/**
 * The project's goals ({@link OFFLOAD_GOALS}) judged on each size's runs, at the sizes each goal
 * names: the offload ratio (with the CPU floor of this machine next to it, the lowest ratio it
 * allows whatever the provider costs), c1's provider's CPU per 1000 pods while they start, the
 * offloaded p99 start latency over the direct one, and the provider's peak RSS. A run in which
 * the provider restarted is not judged on the provider's CPU or memory (its figures are partial).
 */
export function goalVerdicts(results: readonly SizeResult[], pinned = false): GoalVerdict[] {
  const g = OFFLOAD_GOALS;
  return results.flatMap((r) => {
    const out: GoalVerdict[] = [];
    const { size, direct, offloaded } = r;
    const restarted = offloaded.providerRestarted ? 'the provider restarted during the run: its figures are partial' : undefined;
    const ratioLimit = g.ratioBySize[size];
    if (ratioLimit !== undefined) {
      const ratio = offloaded.allRunningSeconds / direct.allRunningSeconds;
      const floor = cpuFloor(r, pinned);
      out.push({
        size,
        goal: 'offload ratio',
        measured: `${fmt(ratio, 2)} (${fmt(offloaded.allRunningSeconds, 1)} s against ${fmt(direct.allRunningSeconds, 1)} s)`,
        limitText: String(ratioLimit),
        met: atMost(ratio, ratioLimit, 2),
        note: floor ? `the CPU floor of this machine alone: ${fmt(floor.floorSeconds / direct.allRunningSeconds, 2)}` : undefined,
      });
    }
    if (size >= g.providerCpuFromSize) {
      const perThousand = (offloaded.providerCpuSeconds * 1000) / size;
      out.push({
        size,
        goal: "c1's provider CPU while the pods start, per 1000 pods",
        measured: `${fmt(perThousand, 1)} s`,
        limitText: `${g.providerCpuSecondsPer1000} s`,
        met: restarted ? undefined : atMost(perThousand, g.providerCpuSecondsPer1000, 1),
        note: restarted,
      });
    }
    const p99 = offloaded.startLatencyP99Ms / direct.startLatencyP99Ms;
    out.push({
      size,
      goal: 'start p99, offloaded over direct',
      measured: `${fmt(p99, 2)} (${fmt(offloaded.startLatencyP99Ms / 1000, 1)} s against ${fmt(direct.startLatencyP99Ms / 1000, 1)} s)`,
      limitText: String(g.p99Factor),
      met: atMost(p99, g.p99Factor, 2),
    });
    if (size === g.peakRssAtSize) {
      const mb = mibToMB(offloaded.providerPeakRssMiB);
      out.push({
        size,
        goal: `c1's provider peak RSS with ${size} proxies`,
        measured: `${fmt(mb, 0)} MB (${fmt(offloaded.providerPeakRssMiB, 0)} MiB)`,
        limitText: `${g.peakRssMB} MB`,
        met: restarted ? undefined : atMost(mb, g.peakRssMB, 0),
        note: restarted,
      });
    }
    return out;
  });
}

/** The lines of {@link goalVerdicts}, one per goal judged. */
export function renderGoals(results: readonly SizeResult[], pinned = false): string {
  return goalVerdicts(results, pinned).map(renderGoal).join('\n');
}

/**
 * Where the provider's memory was at its highest sampled RSS, per run that has the reading: V8's
 * committed heap (with what it used, and its largest spaces), the external memory V8 is told of,
 * and the rest of the resident set (code, native allocations, stacks, freed memory not yet given
 * back). The samples come once a second, so their highest RSS may sit below the peak the table
 * shows (read ten times a second from the kernel).
 */
export function renderMemory(results: readonly SizeResult[]): string {
  return results
    .flatMap((r) =>
      (['direct', 'offloaded'] as const).flatMap((run) => {
        const m = r[run].providerMemoryAtPeak;
        if (!m) return [];
        const spaces = Object.entries(m.spacesMiB)
          .filter(([, mib]) => mib >= 0.5)
          .sort((a, b) => b[1] - a[1])
          .map(([space, mib]) => `${space} ${fmt(mib, 0)}`)
          .join(', ');
        const rest = m.rssMiB - m.heapTotalMiB - m.externalMiB;
        return [
          `${r.size} ${run}, provider memory at its highest sampled RSS: ${fmt(m.rssMiB, 0)} MiB = V8 heap ${fmt(m.heapTotalMiB, 0)} (${fmt(m.heapUsedMiB, 0)} used; ${spaces}) + external ${fmt(m.externalMiB, 0)} + the rest ${fmt(rest, 0)}`,
        ];
      }),
    )
    .join('\n');
}

/**
 * How many of `times` (ms) came each second after the first second since the earliest, or
 * undefined with fewer than two after it: the steady rate of a step once its first burst is
 * over (kube-scheduler's client, for one, takes a burst of 100 requests before its 50 a second).
 * Pure.
 */
export function steadyRate(times: readonly (number | undefined)[]): number | undefined {
  const t = times.filter((x): x is number => x !== undefined && Number.isFinite(x)).sort((a, b) => a - b);
  if (t.length === 0) return undefined;
  const from = t[0]! + 1000;
  const after = t.filter((x) => x >= from);
  if (after.length < 2) return undefined;
  const seconds = (after[after.length - 1]! - from) / 1000;
  return seconds > 0 ? after.length / seconds : undefined;
}

/**
 * The steady rate ({@link steadyRate}) of each step that can set a run's pace, per size, from the
 * raw pod times: pods created and bound a second, direct and offloaded (proxies and delegates).
 * The direct run's binds are c2's kube-scheduler's, paced by its client's rate limit; so are the
 * delegates'; the proxies are bound by the provider for the proxy scheduler. Nothing for a size
 * without its pods' times.
 */
export function renderRates(results: readonly SizeResult[]): string {
  return results
    .flatMap((r) => {
      if (!r.directPods?.length || !r.offloadedPods?.length) return [];
      const rate = (pods: readonly PodTimes[], key: keyof PodTimes) => fmt(steadyRate(pods.map((p) => p[key])), 1);
      const d = r.directPods;
      const o = r.offloadedPods;
      return [
        `${r.size} pods, a second after the first second: direct created ${rate(d, 'created')}, bound ${rate(d, 'bound')}; offloaded: proxies created ${rate(o, 'created')}, delegates created ${rate(o, 'delegateCreated')}, delegates bound ${rate(o, 'delegateBound')}, proxies bound ${rate(o, 'bound')}, proxies Running ${rate(o, 'running')}`,
      ];
    })
    .join('\n');
}

/**
 * The stage breakdown of each size's offloaded run, next to the direct run's: p50 and p99 of
 * each pod's gap, and the p50 of the stage's end since the creation request, in ms.
 */
export function renderStages(results: readonly SizeResult[]): string {
  const blocks = results.map((r) => {
    const rows = [
      ['stage', 'p50 ms', 'p99 ms', 'ends at p50 ms', 'pods'],
      ...r.offloaded.stages.map((s) => [`offloaded: ${s.name}`, fmt(s.p50Ms, 0), fmt(s.p99Ms, 0), fmt(s.endP50Ms, 0), String(s.pods)]),
      ...r.direct.stages.map((s) => [`direct: ${s.name}`, fmt(s.p50Ms, 0), fmt(s.p99Ms, 0), fmt(s.endP50Ms, 0), String(s.pods)]),
    ];
    return `${r.size} pods:\n${columns(rows)}`;
  });
  return blocks.join('\n\n');
}

const escapeXml = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

const DIRECT_COLOUR = '#4878a8';
const OFFLOADED_COLOUR = '#d8823a';

/**
 * A hand-written SVG of the results: per size, bars of direct and offloaded time to all Running
 * (each size on its own scale, since sizes differ tenfold), and the CDF of start latencies of
 * the largest size's two runs when its per-pod times are present. Standalone, valid XML.
 */
export function renderSvg(results: readonly SizeResult[], title: string): string {
  const width = 720;
  const left = 150;
  const barArea = width - left - 110;
  const rowHeight = 22;
  const parts: string[] = [];
  let y = 40;
  parts.push(`<text x="20" y="24" font-size="16" font-weight="bold">${escapeXml(title)}</text>`);
  for (const r of results) {
    const max = Math.max(r.direct.allRunningSeconds, r.offloaded.allRunningSeconds) || 1;
    parts.push(`<text x="20" y="${y + 15}" font-size="13" font-weight="bold">${r.size} pods</text>`);
    y += 22;
    for (const [kind, colour] of [
      ['direct', DIRECT_COLOUR],
      ['offloaded', OFFLOADED_COLOUR],
    ] as const) {
      const seconds = r[kind].allRunningSeconds;
      const w = Number.isFinite(seconds) ? Math.max(1, (seconds / max) * barArea) : 0;
      parts.push(`<text x="${left - 8}" y="${y + 14}" font-size="12" text-anchor="end">${kind}</text>`);
      parts.push(`<rect x="${left}" y="${y}" width="${w.toFixed(1)}" height="${rowHeight - 6}" fill="${colour}"/>`);
      parts.push(`<text x="${(left + w + 6).toFixed(1)}" y="${y + 14}" font-size="12">${escapeXml(fmt(seconds, 1))} s</text>`);
      y += rowHeight;
    }
    parts.push(
      `<text x="${left}" y="${y + 12}" font-size="11" fill="#555">ratio ${escapeXml(fmt(r.offloaded.allRunningSeconds / r.direct.allRunningSeconds, 2))}, start p50 ${escapeXml(fmt(r.direct.startLatencyP50Ms, 0))} / ${escapeXml(fmt(r.offloaded.startLatencyP50Ms, 0))} ms, p99 ${escapeXml(fmt(r.direct.startLatencyP99Ms, 0))} / ${escapeXml(fmt(r.offloaded.startLatencyP99Ms, 0))} ms</text>`,
    );
    y += 30;
  }
  const largest = [...results].sort((a, b) => b.size - a.size)[0];
  if (largest?.directPods && largest.offloadedPods) {
    const series = [
      { name: 'direct', colour: DIRECT_COLOUR, values: startLatencies(largest.directPods).sort((a, b) => a - b) },
      { name: 'offloaded', colour: OFFLOADED_COLOUR, values: startLatencies(largest.offloadedPods).sort((a, b) => a - b) },
    ].filter((s) => s.values.length > 0);
    if (series.length > 0) {
      const plotW = width - left - 40;
      const plotH = 180;
      const top = y + 24;
      const maxMs = Math.max(...series.map((s) => s.values[s.values.length - 1]!)) || 1;
      parts.push(`<text x="20" y="${y + 12}" font-size="13" font-weight="bold">start latency CDF, ${largest.size} pods (creation request sent -> Running seen)</text>`);
      parts.push(`<rect x="${left}" y="${top}" width="${plotW}" height="${plotH}" fill="none" stroke="#999"/>`);
      parts.push(`<text x="${left}" y="${top + plotH + 16}" font-size="11">0 s</text>`);
      parts.push(`<text x="${left + plotW}" y="${top + plotH + 16}" font-size="11" text-anchor="end">${escapeXml((maxMs / 1000).toFixed(1))} s</text>`);
      parts.push(`<text x="${left - 8}" y="${top + 10}" font-size="11" text-anchor="end">100%</text>`);
      parts.push(`<text x="${left - 8}" y="${top + plotH}" font-size="11" text-anchor="end">0%</text>`);
      series.forEach((s, i) => {
        // At most 200 points a line: enough for the eye, small for the file.
        const step = Math.max(1, Math.floor(s.values.length / 200));
        const points: string[] = [];
        for (let k = 0; k < s.values.length; k += step) points.push(point(s.values[k]!, (k + 1) / s.values.length));
        points.push(point(s.values[s.values.length - 1]!, 1));
        parts.push(`<polyline fill="none" stroke="${s.colour}" stroke-width="2" points="${points.join(' ')}"/>`);
        parts.push(`<text x="${left + 10}" y="${top + 18 + i * 16}" font-size="12" fill="${s.colour}">${s.name}</text>`);
      });
      y = top + plotH + 30;
      function point(ms: number, fraction: number): string {
        return `${(left + (ms / maxMs) * plotW).toFixed(1)},${(top + plotH - fraction * plotH).toFixed(1)}`;
      }
    }
  }
  const height = y + 10;
  return [
    `<?xml version="1.0" encoding="UTF-8"?>`,
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    ...parts,
    '</svg>',
    '',
  ].join('\n');
}
