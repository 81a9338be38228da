/**
 * What the benchmarks that run pods in the sandbox share: a watch that times each pod's changes,
 * the per-pod times of a run, and samplers of the c1 provider, of the machine and of both
 * apiservers over the phases of a run. Not a benchmark itself.
 */
import { CoreV1Api, KubeConfig, Watch, type V1Node, type V1Pod } from '@kubernetes/client-node';
import { kubeConfigFor, kubectl } from '../e2e/support.js';
import { Sandbox } from '../sandbox/sandbox.js';
import { cpuSeconds, machineCpu, peakRss, providerPid, rssMiB, sandboxCpuSeconds } from './bench-support.js';
import {
  counterDelta,
  memoryFigures,
  metricByLabel,
  podCapacityPlan,
  requestsByKind,
  watchesClosed,
  watchEventsSent,
  type MachineFigures,
  type MemoryFigures,
  type PodTimes,
  type QueueFigures,
  type RequestFigures,
} from './offload-report.js';

export const sandbox = new Sandbox();

/** Room left on c2's kwok nodes beyond the benchmark's pods (other pods may come and go meanwhile). */
export const CAPACITY_MARGIN = 100;

/** A pod's key in a watch: namespace/name. */
const keyOf = (pod: V1Pod): string => `${pod.metadata?.namespace}/${pod.metadata?.name}`;

/**
 * Follows the pods of one namespace: lists, then watches from the list's resourceVersion, and
 * calls `onEvent` with the time each change was seen (performance.now()). Reconnects when the
 * server ends the watch; lists again when its resourceVersion has expired, reporting a pod that
 * vanished meanwhile as DELETED with its last known state.
 */
export class PodWatch {
  private stopped = false;
  private abort?: AbortController;
  private resourceVersion = '';
  private readonly known = new Map<string, V1Pod>();

  /** `scope.namespace` undefined: the pods of every namespace; `scope.labelSelector`: only those it selects. */
  constructor(
    private readonly kc: KubeConfig,
    private readonly scope: { namespace?: string; labelSelector?: string },
    private readonly onEvent: (type: string, pod: V1Pod, atMs: number) => void,
  ) {}

  async start(): Promise<void> {
    await this.list();
    await this.watch();
  }

  stop(): void {
    this.stopped = true;
    this.abort?.abort();
  }

  private async list(): Promise<void> {
    const core = this.kc.makeApiClient(CoreV1Api);
    const { namespace, labelSelector } = this.scope;
    const list = namespace === undefined ? await core.listPodForAllNamespaces({ labelSelector }) : await core.listNamespacedPod({ namespace, labelSelector });
    const now = performance.now();
    const seen = new Set<string>();
    for (const pod of list.items) {
      seen.add(keyOf(pod));
      this.known.set(keyOf(pod), pod);
      this.onEvent('MODIFIED', pod, now);
    }
    for (const [name, pod] of this.known) {
      if (seen.has(name)) continue;
      this.known.delete(name);
      this.onEvent('DELETED', pod, now);
    }
    this.resourceVersion = list.metadata?.resourceVersion ?? '';
  }

  private async watch(): Promise<void> {
    if (this.stopped) return;
    let expired = false;
    this.abort = await new Watch(this.kc).watch(
      this.scope.namespace === undefined ? '/api/v1/pods' : `/api/v1/namespaces/${this.scope.namespace}/pods`,
      { resourceVersion: this.resourceVersion, allowWatchBookmarks: true, ...(this.scope.labelSelector ? { labelSelector: this.scope.labelSelector } : {}) },
      (type, obj) => {
        const now = performance.now();
        if (type === 'ERROR') {
          if ((obj as { code?: number }).code === 410) expired = true;
          return;
        }
        if (obj?.metadata?.resourceVersion) this.resourceVersion = obj.metadata.resourceVersion;
        if (type === 'BOOKMARK') return;
        if (type === 'DELETED') this.known.delete(keyOf(obj as V1Pod));
        else this.known.set(keyOf(obj as V1Pod), obj as V1Pod);
        this.onEvent(type, obj as V1Pod, now);
      },
      () => {
        if (this.stopped) return;
        // The apiserver ends watches after a while: go on from where this one stopped.
        void this.resume(expired);
      },
    );
  }

  private async resume(expired: boolean): Promise<void> {
    for (let attempt = 0; !this.stopped; attempt++) {
      try {
        if (expired || attempt > 0) await this.list();
        await this.watch();
        return;
      } catch {
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }
}

/** The observed times of each pod of one run, by the proxy's (or direct pod's) name, in ms since `t0`. */
export class RunTimes {
  readonly pods = new Map<string, PodTimes>();
  /** performance.now() of the run's first creation request. */
  t0 = 0;

  constructor(names: readonly string[]) {
    for (const n of names) this.pods.set(n, {});
  }

  /** Records `key` for pod `name` at `atMs` (performance.now()) unless already recorded. */
  mark(name: string, key: keyof PodTimes, atMs: number): void {
    const p = this.pods.get(name);
    if (p && p[key] === undefined) p[key] = atMs - this.t0;
  }

  count(key: keyof PodTimes): number {
    let n = 0;
    for (const p of this.pods.values()) if (p[key] !== undefined) n++;
    return n;
  }

  /** The latest `key` over all pods, in ms since t0. */
  last(key: keyof PodTimes): number {
    return Math.max(...[...this.pods.values()].map((p) => p[key] ?? NaN));
  }

  list(): PodTimes[] {
    return [...this.pods.values()];
  }
}

/** Which pod a watch sees: a pod created in c2 directly, a proxy in c1, or a delegate in c2. */
export type Role = 'direct' | 'proxy' | 'delegate';

/** Marks what one event shows of a pod's way: created (delegates), bound, Running, gone. */
export function markPod(times: RunTimes, name: string, role: Role, type: string, pod: V1Pod, atMs: number): void {
  if (type === 'DELETED') {
    times.mark(name, role === 'proxy' ? 'proxyGone' : 'gone', atMs);
    return;
  }
  const delegate = role === 'delegate';
  if (delegate) times.mark(name, 'delegateCreated', atMs);
  if (pod.spec?.nodeName) times.mark(name, delegate ? 'delegateBound' : 'bound', atMs);
  if (pod.status?.phase === 'Running') times.mark(name, delegate ? 'delegateRunning' : 'running', atMs);
}
/** The provider's metrics text, or '' when it does not answer (the figures are then missing, not wrong). */
export async function providerMetrics(): Promise<string> {
  try {
    const res = await fetch(`http://127.0.0.1:${sandbox.providerPorts('c1', 0).metrics}/metrics`, { signal: AbortSignal.timeout(2000) });
    return res.ok ? await res.text() : '';
  } catch {
    return '';
  }
}

const RECONCILES = 'admiralty_controller_reconcile_total';
const QUEUE_DEPTH = 'admiralty_workqueue_depth';
const WEBHOOK_CONNECTIONS = 'admiralty_webhook_connections_total';

/**
 * The c1 provider over a run: its process (CPU, peak RSS, restart) and its queues (the deepest
 * each controller's got, sampled every second, and the reconciles done). Each scrape of
 * `/metrics` costs the provider CPU that the run reports: once a second, not more.
 */
export class ProviderSampler {
  private readonly pid: number;
  private readonly rss: { stop(): number };
  readonly rssBeforeMiB: number;
  private lastCpu: number;
  private reconcilesBefore: Record<string, number> = {};
  private connectionsBefore: Record<string, number> = {};
  private peakQueueDepth: Record<string, number> = {};
  private memoryAtPeak?: MemoryFigures;
  private queueTimer?: NodeJS.Timeout;

  private constructor() {
    this.pid = providerPid(sandbox);
    this.rssBeforeMiB = rssMiB(this.pid);
    this.rss = peakRss(this.pid, 100);
    this.lastCpu = cpuSeconds(this.pid);
  }

  static async start(): Promise<ProviderSampler> {
    const s = new ProviderSampler();
    const text = await providerMetrics();
    s.reconcilesBefore = metricByLabel(text, RECONCILES, 'controller');
    s.connectionsBefore = metricByLabel(text, WEBHOOK_CONNECTIONS, 'protocol');
    let busy = false;
    s.queueTimer = setInterval(() => {
      if (busy) return;
      busy = true;
      void providerMetrics().then((text) => {
        busy = false;
        for (const [c, n] of Object.entries(metricByLabel(text, QUEUE_DEPTH, 'controller'))) s.peakQueueDepth[c] = Math.max(s.peakQueueDepth[c] ?? 0, n);
        s.readMemory(text);
      });
    }, 1000);
    return s;
  }

  /**
   * The deepest queues seen, the reconciles done by controller, and the webhook server's
   * connections by protocol, since the previous call (or the start); the next phase starts.
   */
  async queuesSince(): Promise<QueueFigures> {
    const text = await providerMetrics();
    this.readMemory(text);
    const since = (now: Record<string, number>, before: Record<string, number>) => Object.fromEntries(Object.entries(now).map(([k, n]) => [k, n - (before[k] ?? 0)]));
    const now = metricByLabel(text, RECONCILES, 'controller');
    const connections = metricByLabel(text, WEBHOOK_CONNECTIONS, 'protocol');
    const reconciles = since(now, this.reconcilesBefore);
    const webhookConnections = since(connections, this.connectionsBefore);
    const peakQueueDepth = this.peakQueueDepth;
    this.reconcilesBefore = now;
    this.connectionsBefore = connections;
    this.peakQueueDepth = {};
    return { peakQueueDepth, reconciles, webhookConnections };
  }

  /** Keeps the memory reading of `text` (a scrape) when its RSS is the highest yet. */
  private readMemory(text: string): void {
    const memory = memoryFigures(text);
    if (memory && memory.rssMiB > (this.memoryAtPeak?.rssMiB ?? -1)) this.memoryAtPeak = memory;
  }

  /** CPU seconds since the previous call (or the start); NaN when the process is gone. */
  cpuSince(): number {
    try {
      const now = cpuSeconds(this.pid);
      const d = now - this.lastCpu;
      this.lastCpu = now;
      return d;
    } catch {
      return NaN;
    }
  }

  finish(): { peakRssMiB: number; restarted: boolean; memoryAtPeak?: MemoryFigures } {
    clearInterval(this.queueTimer);
    const peakRssMiB = this.rss.stop();
    let restarted = true;
    try {
      restarted = providerPid(sandbox) !== this.pid;
    } catch {
      /* no provider right now: restarted */
    }
    return { peakRssMiB, restarted, memoryAtPeak: this.memoryAtPeak };
  }
}

/** The whole machine over the phases of a run: every sandbox process's CPU, the benchmark's own, how busy the cores were. */
export class MachineSampler {
  private processes = sandboxCpuSeconds(sandbox);
  private bench = process.cpuUsage();
  private machine = machineCpu();

  /** What the machine did since the previous call (or the start); the next phase starts. */
  since(): MachineFigures {
    const processes = sandboxCpuSeconds(sandbox);
    const bench = process.cpuUsage();
    const machine = machineCpu();
    const cpuSecondsByProcess: Record<string, number> = {};
    // A process that restarted in between counts from zero: its figure is then a lower bound.
    for (const [name, s] of processes) cpuSecondsByProcess[name] = s - Math.min(s, this.processes.get(name) ?? 0);
    const figures: MachineFigures = {
      cpuSecondsByProcess,
      benchCpuSeconds: (bench.user + bench.system - this.bench.user - this.bench.system) / 1e6,
      busy: (machine.busy - this.machine.busy) / Math.max(1, machine.total - this.machine.total),
      cores: machine.cores,
    };
    this.processes = processes;
    this.bench = bench;
    this.machine = machine;
    return figures;
  }
}

/**
 * The requests both clusters' apiservers served over the phases of a run, every client counted
 * (ours, the benchmark's, the schedulers', kwok's, the controller-managers'): what an offloaded
 * pod costs each control plane, next to a direct one; and the watches they closed because the
 * watcher fell behind.
 */
export class ApiserverSampler {
  private constructor(private before: Record<string, ApiserverCounters>) {}

  static async start(): Promise<ApiserverSampler> {
    return new ApiserverSampler(await ApiserverSampler.read());
  }

  /** By cluster, each of {@link ApiserverCounters} since the previous call (or the start); the next phase starts. */
  async since(): Promise<Record<keyof ApiserverCounters, RequestFigures>> {
    const now = await ApiserverSampler.read();
    const out: Record<keyof ApiserverCounters, RequestFigures> = { requests: {}, watchesClosed: {}, watchEvents: {}, watchBytes: {} };
    for (const [cluster, counts] of Object.entries(now)) {
      for (const k of Object.keys(out) as (keyof ApiserverCounters)[]) out[k][cluster] = counterDelta(this.before[cluster]?.[k] ?? {}, counts[k]);
    }
    this.before = now;
    return out;
  }

  private static async read(): Promise<Record<string, ApiserverCounters>> {
    const out: Record<string, ApiserverCounters> = {};
    for (const c of ['c1', 'c2']) {
      const text = await kubectl(c, 'get', '--raw', '/metrics');
      out[c] = { requests: requestsByKind(text), watchesClosed: watchesClosed(text), ...watchEventsSent(text) };
    }
    return out;
  }
}

/** An apiserver's counters, each by kind or resource (see `requestsByKind`, `watchesClosed`, `watchEventsSent`). */
export interface ApiserverCounters {
  requests: Record<string, number>;
  watchesClosed: Record<string, number>;
  watchEvents: Record<string, number>;
  watchBytes: Record<string, number>;
}

/** Pods that hold room on a node (not yet finished). */
export const holdsRoom = (p: V1Pod) => p.status?.phase !== 'Succeeded' && p.status?.phase !== 'Failed';

/**
 * Makes c2's kwok nodes hold `size` more pods than they run now, by raising their pod capacity
 * evenly (same nodes, so both runs see the same ones). kwok keeps a node's status capacity as
 * set. Resolves with a function that puts back what it changed.
 */
export async function ensureCapacity(size: number, log: (line: string) => void): Promise<() => Promise<void>> {
  const core = kubeConfigFor('c2').makeApiClient(CoreV1Api);
  const nodes = (await core.listNode({ labelSelector: 'type=kwok' })).items;
  const running = (await core.listPodForAllNamespaces()).items.filter((p) => p.spec?.nodeName && holdsRoom(p)).length;
  const plan = podCapacityPlan(
    nodes.map((n: V1Node) => Number(n.status?.allocatable?.pods ?? 0)),
    running,
    size,
    CAPACITY_MARGIN,
  );
  if (plan === undefined) return async () => undefined;
  const perNode = String(plan);
  log(`raising the pod capacity of c2's ${nodes.length} kwok nodes to ${perNode} each (${size} pods + ${running} running + ${CAPACITY_MARGIN})`);
  const before = nodes.map((n) => ({ name: n.metadata!.name!, capacity: n.status?.capacity?.pods ?? '0', allocatable: n.status?.allocatable?.pods ?? '0' }));
  const patch = (name: string, capacity: string, allocatableValue: string) =>
    kubectl('c2', 'patch', 'node', name, '--subresource=status', '--type=merge', '-p', JSON.stringify({ status: { capacity: { pods: capacity }, allocatable: { pods: allocatableValue } } }));
  for (const n of before) await patch(n.name, perNode, perNode);
  return async () => {
    for (const n of before) await patch(n.name, n.capacity, n.allocatable).catch(() => undefined);
    log("c2's kwok nodes have their pod capacity back");
  };
}
