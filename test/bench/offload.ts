/**
 * Benchmark (not a test): N pods offloaded from c1 to c2, like for like next to the same N pods
 * created directly in c2, for each size given (default 100 and 1000).
 *
 * Like for like: the offloaded pods are pinned to c2's virtual node (the proxy-only
 * nodeSelector `multicluster.admiralty.io/target-name: c2` of the proxy-pod-scheduling-
 * constraints annotation), so their delegates carry exactly the direct pods' spec (same
 * requests, no selector) and land on the same kwok nodes of c2. Each run gets a fresh namespace
 * connected as the e2e suite connects one (connectNamespace), and starts only once the previous
 * run's namespace is gone from both clusters. When c2's kwok nodes cannot hold N more pods, their
 * pod capacity is raised (same nodes for both runs) and put back at the end.
 *
 * Per run: first creation request -> last pod seen Running; each pod's start latency (request
 * sent -> Running seen on a watch) p50/p99; c1's provider CPU seconds, peak RSS, deepest queue
 * and reconciles by controller (from its metrics); deletion of the N pods (for the offloaded run,
 * until every delegate is gone from c2). For the offloaded run, the gaps between the steps of
 * each pod's way (proxy created, bound, delegate created, bound, Running, proxy Running), in the
 * order observed. Prints one summary line per size (e.g.
 * `offload 1000 pods: direct 18.2 s, offloaded 21.0 s, ratio 1.15`), a table, the stages and
 * the queues, and writes `.bench/offload-<timestamp>.json` and `.svg`.
 *
 * Starts the sandbox when it is not up, and stops it at the end only if it started it.
 *
 *   node --import tsx test/bench/offload.ts [--sizes 100,1000] [--concurrency 20] [--out .bench]
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { CoreV1Api, KubeConfig, Watch, type V1Node, type V1Pod } from '@kubernetes/client-node';
import { reuseConnections } from '../../provider/clusters/connection-reuse.js';
import { ELECT_ANNOTATION, PARENT_NAME_ANNOTATION, PROXY_POD_SCHEDULING_CONSTRAINTS_ANNOTATION, TARGET_NAME_LABEL, TARGET_NAMESPACE_LABEL } from '../../provider/core/keys.js';
import { connectNamespace, kubeConfigFor, kubectl, uniqueName, waitFor } from '../e2e/support.js';
import { REPO_ROOT, Sandbox } from '../sandbox/sandbox.js';
import { cpuSeconds, machineCpu, peakRss, pinClusters, pool, providerPid, rssMiB, sandboxCpuSeconds } from './bench-support.js';
import {
  DIRECT_MILESTONES,
  counterDelta,
  memoryFigures,
  metricByLabel,
  renderRequests,
  requestsByKind,
  type RequestFigures,
  watchesClosed,
  watchEventsSent,
  OFFLOAD_MILESTONES,
  orderedStages,
  OFFLOAD_USAGE,
  parseOffloadArgs,
  percentile,
  podCapacityPlan,
  renderCpuFloor,
  renderGoals,
  renderRates,
  goalVerdicts,
  renderProviderCpu,
  renderMachine,
  renderMemory,
  renderQueues,
  renderStages,
  renderSvg,
  renderTable,
  startLatencies,
  stageFigures,
  summaryLine,
  type MachineFigures,
  type MemoryFigures,
  type OffloadArgs,
  type PodTimes,
  type QueueFigures,
  type RunFigures,
  type SizeResult,
} from './offload-report.js';

const log = (line: string) => console.log(`bench: ${line}`);
const sandbox = new Sandbox();

/** Room left on c2's kwok nodes beyond the benchmark's pods (other pods may come and go meanwhile). */
const CAPACITY_MARGIN = 100;

/** How long one phase (all Running, all gone) may take before the run fails: generous, never a figure. */
const phaseTimeoutMs = (size: number) => 120_000 + size * 200;

/**
 * Follows the pods of one namespace: lists, then watches from the list's resourceVersion, and
 * calls `onEvent` with the time each change was seen (performance.now()). Reconnects when the
 * server ends the watch; lists again when its resourceVersion has expired, reporting a pod that
 * vanished meanwhile as DELETED with its last known state.
 */
class PodWatch {
  private stopped = false;
  private abort?: AbortController;
  private resourceVersion = '';
  private readonly known = new Map<string, V1Pod>();

  constructor(
    private readonly kc: KubeConfig,
    private readonly namespace: string,
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
    const list = await this.kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: this.namespace });
    const now = performance.now();
    const seen = new Set<string>();
    for (const pod of list.items) {
      seen.add(pod.metadata!.name!);
      this.known.set(pod.metadata!.name!, pod);
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
      `/api/v1/namespaces/${this.namespace}/pods`,
      { resourceVersion: this.resourceVersion, allowWatchBookmarks: true },
      (type, obj) => {
        const now = performance.now();
        if (type === 'ERROR') {
          if ((obj as { code?: number }).code === 410) expired = true;
          return;
        }
        if (obj?.metadata?.resourceVersion) this.resourceVersion = obj.metadata.resourceVersion;
        if (type === 'BOOKMARK') return;
        if (type === 'DELETED') this.known.delete(obj.metadata.name);
        else this.known.set(obj.metadata.name, obj as V1Pod);
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
class RunTimes {
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
type Role = 'direct' | 'proxy' | 'delegate';

/** Marks what one event shows of a pod's way: created (delegates), bound, Running, gone. */
function markPod(times: RunTimes, name: string, role: Role, type: string, pod: V1Pod, atMs: number): void {
  if (type === 'DELETED') {
    times.mark(name, role === 'proxy' ? 'proxyGone' : 'gone', atMs);
    return;
  }
  const delegate = role === 'delegate';
  if (delegate) times.mark(name, 'delegateCreated', atMs);
  if (pod.spec?.nodeName) times.mark(name, delegate ? 'delegateBound' : 'bound', atMs);
  if (pod.status?.phase === 'Running') times.mark(name, delegate ? 'delegateRunning' : 'running', atMs);
}

function benchPod(name: string, namespace: string, offload: boolean): V1Pod {
  // The same pod both ways; offloaded, it is elected and pinned to c2's virtual node by a
  // proxy-only nodeSelector, so that its delegate has the direct pod's spec.
  const annotations: Record<string, string> = offload
    ? {
        [ELECT_ANNOTATION]: '',
        [PROXY_POD_SCHEDULING_CONSTRAINTS_ANNOTATION]: JSON.stringify({ nodeSelector: { [TARGET_NAMESPACE_LABEL]: namespace, [TARGET_NAME_LABEL]: 'c2' } }),
      }
    : {};
  return {
    metadata: { name, labels: { app: 'bench' }, annotations },
    spec: { containers: [{ name: 'app', image: 'nginx', resources: { requests: { cpu: '1m', memory: '1Mi' } } }] },
  };
}

/** The provider's metrics text, or '' when it does not answer (the figures are then missing, not wrong). */
async function providerMetrics(): Promise<string> {
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
class ProviderSampler {
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
class MachineSampler {
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
class ApiserverSampler {
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
interface ApiserverCounters {
  requests: Record<string, number>;
  watchesClosed: Record<string, number>;
  watchEvents: Record<string, number>;
  watchBytes: Record<string, number>;
}

/** Deletes a connected namespace as an operator should (source first, target once that is gone) and waits until it is gone from both. */
async function disconnect(namespace: string): Promise<void> {
  for (const c of ['c1', 'c2']) {
    await kubectl(c, 'delete', 'namespace', namespace, '--wait=false', '--ignore-not-found');
    await waitFor(`namespace ${namespace} gone from ${c}`, 10 * 60_000, async () => (await kubectl(c, 'get', 'namespace', namespace, '--ignore-not-found', '-o', 'name')).trim() === '');
  }
}

/**
 * One run of `size` pods: `direct` creates them in c2, otherwise in c1 (elected, pinned to c2).
 * Resolves with the figures and the per-pod times; the namespace is gone before it resolves.
 */
async function run(size: number, concurrency: number, direct: boolean): Promise<{ figures: RunFigures; pods: PodTimes[] }> {
  const namespace = uniqueName(direct ? 'bench-direct' : 'bench-offload');
  const { c2Node } = await connectNamespace(namespace);
  const c1 = kubeConfigFor('c1');
  const c2 = kubeConfigFor('c2');
  const here = direct ? c2 : c1;
  // Creation and deletion over kept-alive connections, as a controller creating pods would
  // make them: client-node's default opens a connection, with its own TLS handshake, per call,
  // which cost the cluster that received the pods about 1.4 CPU s per 1000 (measured in c1's
  // apiserver's profile), spent in whichever run was CPU-bound.
  const core = reuseConnections(direct ? kubeConfigFor('c2') : kubeConfigFor('c1')).makeApiClient(CoreV1Api);
  const names = Array.from({ length: size }, (_, i) => `p-${i}`);
  const times = new RunTimes(names);
  const watches = [new PodWatch(here, namespace, (type, pod, at) => markPod(times, pod.metadata!.name!, direct ? 'direct' : 'proxy', type, pod, at))];
  if (!direct) {
    watches.push(
      new PodWatch(c2, namespace, (type, pod, at) => {
        const parent = pod.metadata?.annotations?.[PARENT_NAME_ANNOTATION];
        if (parent) markPod(times, parent, 'delegate', type, pod, at);
      }),
    );
  }
  try {
    if (!direct) {
      // The virtual node must advertise room for every pod, or the proxy scheduler leaves some
      // Pending for a while: wait for the summary of c2's (perhaps just raised) capacity.
      const c1Core = c1.makeApiClient(CoreV1Api);
      await waitFor(`virtual node ${c2Node} advertising ${size} pods`, 120_000, async () => Number((await c1Core.readNode({ name: c2Node })).status?.allocatable?.pods ?? 0) >= size);
    }
    for (const w of watches) await w.start();
    const sampler = await ProviderSampler.start();
    const machine = new MachineSampler();
    const requests = await ApiserverSampler.start();
    // Created once the watches are up, so every step is seen; t0 is the first request.
    times.t0 = performance.now();
    await pool(names, concurrency, async (name) => {
      times.mark(name, 'sent', performance.now());
      await core.createNamespacedPod({ namespace, body: benchPod(name, namespace, !direct) });
      times.mark(name, 'created', performance.now());
    });
    await waitFor(`${size} pods Running in ${namespace}`, phaseTimeoutMs(size), () => times.count('running') === size);
    const allRunningSeconds = times.last('running') / 1000;
    const providerCpuSeconds = sampler.cpuSince();
    const startMachine = machine.since();
    const startQueues = await sampler.queuesSince();
    const { requests: startRequests, watchesClosed: startWatchesClosed, watchEvents: startWatchEvents, watchBytes: startWatchBytes } = await requests.since();
    if (!direct) {
      const proxies = await core.listNamespacedPod({ namespace, labelSelector: 'app=bench' });
      const elsewhere = proxies.items.filter((p) => p.spec?.nodeName !== c2Node).length;
      if (elsewhere > 0) throw new Error(`${elsewhere} proxies are not bound to ${c2Node}: the runs would not be like for like`);
    }
    log(`${direct ? 'direct' : 'offloaded'} ${size}: all Running in ${allRunningSeconds.toFixed(1)} s; deleting`);

    // Deletion of the same pods (the proxies, for the offloaded run) until every pod is gone from c2.
    const deleteStart = performance.now() - times.t0;
    await deleteAllBenchPods(core, namespace);
    await waitFor(`${size} pods gone from ${namespace}`, phaseTimeoutMs(size), () => times.count('gone') === size && (direct || times.count('proxyGone') === size));
    const deletionSeconds = (times.last('gone') - deleteStart) / 1000;
    const providerDeletionCpuSeconds = sampler.cpuSince();
    const deletionMachine = machine.since();
    const deletionQueues = await sampler.queuesSince();
    const { requests: deletionRequests, watchesClosed: deletionWatchesClosed, watchEvents: deletionWatchEvents, watchBytes: deletionWatchBytes } = await requests.since();
    const { peakRssMiB, restarted, memoryAtPeak } = sampler.finish();
    const pods = times.list();
    const latencies = startLatencies(pods);
    return {
      pods,
      figures: {
        allRunningSeconds,
        startLatencyP50Ms: percentile(latencies, 50),
        startLatencyP99Ms: percentile(latencies, 99),
        deletionSeconds,
        proxiesGoneSeconds: direct ? undefined : (times.last('proxyGone') - deleteStart) / 1000,
        providerCpuSeconds,
        providerDeletionCpuSeconds,
        providerPeakRssMiB: peakRssMiB,
        providerRssBeforeMiB: sampler.rssBeforeMiB,
        providerRestarted: restarted,
        providerMemoryAtPeak: memoryAtPeak,
        stages: stageFigures(pods, orderedStages(pods, direct ? DIRECT_MILESTONES : OFFLOAD_MILESTONES)),
        startQueues,
        deletionQueues,
        startMachine,
        deletionMachine,
        startRequests,
        deletionRequests,
        startWatchesClosed,
        deletionWatchesClosed,
        startWatchEvents,
        startWatchBytes,
        deletionWatchEvents,
        deletionWatchBytes,
      },
    };
  } finally {
    for (const w of watches) w.stop();
    // A failed run may leave pods: the proxies first (their finalizer waits for their delegates,
    // which needs the namespace's Target and Source), then the namespace, source side first.
    await core.deleteCollectionNamespacedPod({ namespace, labelSelector: 'app=bench' }).catch(() => undefined);
    await disconnect(namespace);
  }
}

/**
 * Deletes the run's pods with one delete-collection call, again if the call fails: with
 * thousands of pods it can outlive its connection on a loaded machine (a 5000-proxy run once
 * ended on "socket hang up"), and a second call deletes only what the first did not reach.
 */
async function deleteAllBenchPods(core: CoreV1Api, namespace: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await core.deleteCollectionNamespacedPod({ namespace, labelSelector: 'app=bench' });
      return;
    } catch (err) {
      if (attempt >= 3) throw err;
      log(`deleting the pods of ${namespace} failed (${(err as Error).message}); asking again`);
    }
  }
}

/** Pods that hold room on a node (not yet finished). */
const holdsRoom = (p: V1Pod) => p.status?.phase !== 'Succeeded' && p.status?.phase !== 'Failed';

/**
 * Makes c2's kwok nodes hold `size` more pods than they run now, by raising their pod capacity
 * evenly (same nodes, so both runs see the same ones). kwok keeps a node's status capacity as
 * set. Resolves with a function that puts back what it changed.
 */
async function ensureCapacity(size: number): Promise<() => Promise<void>> {
  const core = kubeConfigFor('c2').makeApiClient(CoreV1Api);
  const nodes = (await core.listNode({ labelSelector: 'type=kwok' })).items;
  const running = (await core.listPodForAllNamespaces()).items.filter((p) => p.spec?.nodeName && holdsRoom(p)).length;
  const plan = podCapacityPlan(nodes.map((n: V1Node) => Number(n.status?.allocatable?.pods ?? 0)), running, size, CAPACITY_MARGIN);
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

async function main(args: OffloadArgs): Promise<void> {
  let startedSandbox = false;
  if (!sandbox.isUp()) {
    // As the e2e hooks do: stop it at the end only if there was none at all.
    startedSandbox = sandbox.state() === undefined;
    log('the sandbox is not up: starting it, its providers logging at info as the Deployment does');
    await sandbox.up({ log: (l) => log(`sandbox: ${l}`), providerLogLevel: 'info' });
  }
  // Read now: a sandbox started here is gone (with its state) by the time the JSON is written.
  const providerLogLevel = sandbox.state()?.providerLogLevel ?? 'debug';
  if (!startedSandbox) log(`the sandbox is up: its providers log at ${providerLogLevel}`);
  const restores: (() => Promise<void>)[] = [];
  const results: SizeResult[] = [];
  const startedAt = new Date();
  const loadBefore = loadavg();
  let unpin: (() => void) | undefined;
  try {
    log(`sizes ${args.sizes.join(', ')}, creation concurrency ${args.concurrency}; ${cpus().length} CPUs, load average ${loadBefore.map((l) => l.toFixed(2)).join(' ')}`);
    if (args.pinClusters) {
      unpin = pinClusters(sandbox, ['c1', 'c2']);
      log('each cluster on cores of its own: c1 on the first half, c2 on the second');
    }
    for (const size of args.sizes) {
      restores.push(await ensureCapacity(size));
      const direct = await run(size, args.concurrency, true);
      const offloaded = await run(size, args.concurrency, false);
      results.push({ size, direct: direct.figures, offloaded: offloaded.figures, directPods: direct.pods, offloadedPods: offloaded.pods });
    }
  } finally {
    unpin?.();
    for (const restore of restores.reverse()) await restore();
    if (startedSandbox) {
      log('stopping the sandbox it started');
      await sandbox.down();
    }
  }
  const loadAfter = loadavg();
  console.log('');
  console.log(renderTable(results));
  console.log('');
  console.log("stages (p50/p99 of each pod's own gap, in the order observed):");
  console.log(renderStages(results));
  console.log('');
  console.log("steady rates, pods a second (the first second's burst left out): kube-scheduler's client sends 50 requests a second after a burst of 100 unless configured otherwise, and binds each pod with one:");
  console.log(renderRates(results));
  console.log('');
  console.log("c1's provider, while the pods started and while they were deleted:");
  console.log(renderQueues(results));
  console.log('');
  console.log('the machine (every sandbox process shares its cores), while the pods started and while they were deleted:');
  console.log(renderMachine(results));
  console.log(renderCpuFloor(results, args.pinClusters));
  console.log(renderProviderCpu(results));
  console.log(renderMemory(results));
  console.log('');
  console.log("each cluster's apiserver (every client counted), per pod of the run, while the pods started and while they were deleted:");
  console.log(renderRequests(results));
  console.log('');
  const goals = renderGoals(results, args.pinClusters);
  if (goals) {
    console.log("the project's goals (README, Performance), judged on these runs at the sizes each names; printed, never asserted:");
    console.log(goals);
    console.log('');
  }
  // Exactly one line per size in this form, for scripts; everything else starts otherwise.
  for (const r of results) console.log(summaryLine(r.size, r.direct.allRunningSeconds, r.offloaded.allRunningSeconds));

  const outDir = resolve(REPO_ROOT, args.outDir);
  mkdirSync(outDir, { recursive: true });
  const stamp = startedAt.toISOString().replace(/[:.]/g, '-');
  const base = join(outDir, `offload-${stamp}`);
  const json = {
    benchmark: 'offload',
    startedAt: startedAt.toISOString(),
    cpus: cpus().length,
    loadAverageBefore: loadBefore,
    loadAverageAfter: loadAfter,
    concurrency: args.concurrency,
    pinClusters: args.pinClusters,
    providerLogLevel,
    results,
    goals: goalVerdicts(results, args.pinClusters),
  };
  writeFileSync(`${base}.json`, JSON.stringify(json, null, 1) + '\n');
  writeFileSync(`${base}.svg`, renderSvg(results, `offload: direct vs offloaded, ${startedAt.toISOString()}`));
  log(`wrote ${relative(process.cwd(), `${base}.json`)} and ${relative(process.cwd(), `${base}.svg`)}`);
}

let parsed: OffloadArgs;
try {
  parsed = parseOffloadArgs(process.argv.slice(2));
} catch (err) {
  console.error(`bench: ${err instanceof Error ? err.message : err}`);
  console.error(`usage: offload ${OFFLOAD_USAGE}`);
  process.exit(2);
}
main(parsed).then(
  () => process.exit(0),
  (err) => {
    console.error(`bench: ${err instanceof Error ? (err.stack ?? err.message) : err}`);
    process.exit(1);
  },
);
