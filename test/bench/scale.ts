/**
 * Benchmark (not a test): the cost of many targets. For each count T of `--targets`, T namespaces
 * of c1 each get one namespaced Target to c2 (its own Secret, its own Source in c2: a separate
 * target to the provider, with its own clients, caches, virtual node and Lease), and then:
 *
 * * idle: once every Target is Ready, the provider's RSS and CPU and both apiservers' requests a
 *   second for `--idle-seconds`, next to the same before any benchmark target existed (the
 *   baseline): what one more idle target costs;
 * * direct: `--pods` pods spread evenly over the T namespaces of c2, created there directly;
 * * offloaded: the same pods in the T namespaces of c1, elected and pinned each to its
 *   namespace's virtual node (so each delegate has a direct pod's spec), to all Running and to
 *   all gone.
 *
 * Per size it prints one line (`scale 100 targets, 10000 pods: direct …, offloaded …, ratio …`),
 * a table (times against direct, p99 start, deletion, provider CPU and peak RSS, idle cost per
 * target, apiserver requests per pod, the proxy scheduler's binds a second), where an offloaded
 * pod's time goes (with the extender's share), the goals of one replica, and writes
 * `.bench/scale-<time>.json` and `.svg`.
 *
 * Starts the sandbox when it is not up and stops it at the end only if it started it.
 *
 *   node --import tsx test/bench/scale.ts [--targets 10,50,100] [--pods 10000] [--concurrency 20] [--idle-seconds 30]
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { reuseConnections } from '../../provider/clusters/connection-reuse.js';
import { ELECT_ANNOTATION, PARENT_NAME_ANNOTATION, PROXY_POD_SCHEDULING_CONSTRAINTS_ANNOTATION, TARGET_NAME_LABEL, TARGET_NAMESPACE_LABEL } from '../../provider/core/keys.js';
import { connectMany, disconnectMany } from '../e2e/many-targets.js';
import { getJson, kubeConfigFor, waitFor } from '../e2e/support.js';
import { REPO_ROOT } from '../sandbox/sandbox.js';
import { cpuSeconds, pool, providerPid, rssMiB, runBenchmark, sleep } from './bench-support.js';
import { metricByLabel, OFFLOAD_MILESTONES, orderedStages, percentile, stageFigures, startLatencies, steadyRate, type PodTimes } from './offload-report.js';
import { ApiserverSampler, ensureCapacity, markPod, PodWatch, ProviderSampler, RunTimes, sandbox } from './sandbox-run.js';
import {
  parseScaleArgs,
  podsPerTarget,
  renderScaleGoals,
  renderScaleStages,
  renderScaleSvg,
  renderScaleTable,
  SCALE_USAGE,
  scaleGoals,
  scaleSummaryLine,
  type IdleFigures,
  type ScaleArgs,
  type ScaleResult,
  type ScaleRun,
} from './scale-report.js';

const log = (line: string) => console.log(`bench: ${line}`);
const LABEL = 'bench-scale';
const EXTENDER_SECONDS = 'admiralty_scheduler_extender_request_duration_seconds_sum';

/** How long one phase may take before the run fails: generous, never a figure. */
const phaseTimeoutMs = (pods: number, targets: number) => 180_000 + pods * 200 + targets * 2000;

/** The namespaces of one size: `bench-scale-<run>-<i>`. */
function namespaceNames(targets: number): string[] {
  const run = Math.random().toString(36).slice(2, 7);
  return Array.from({ length: targets }, (_, i) => `${LABEL}-${run}-${i}`);
}

/** The provider's metrics text, or '' when it does not answer. */
async function providerMetrics(): Promise<string> {
  try {
    const res = await fetch(`http://127.0.0.1:${sandbox.providerPorts('c1', 0).metrics}/metrics`, { signal: AbortSignal.timeout(2000) });
    return res.ok ? await res.text() : '';
  } catch {
    return '';
  }
}

/**
 * Waits until the virtual node of each namespace's Target advertises room for `pods` pods: the
 * summary of c2's raised capacity has to reach every one, or the proxy scheduler leaves some
 * proxies Pending for a while and the run measures that.
 */
async function virtualNodesAdvertise(names: readonly string[], pods: number): Promise<void> {
  const wanted = new Set(names);
  await waitFor(`${names.length} virtual nodes advertising ${pods} pods`, 180_000, async () => {
    const nodes = await getJson('c1', 'nodes', '-l', `${TARGET_NAME_LABEL}=c2`);
    return nodes.items.filter((n: any) => wanted.has(n.metadata.labels?.[TARGET_NAMESPACE_LABEL]) && Number(n.status?.allocatable?.pods ?? 0) >= pods).length === names.length;
  });
}

const sumOf = (r: Record<string, number>): number => Object.values(r).reduce((a, b) => a + b, 0);

/** The provider and both apiservers over `seconds` with nothing to do. */
async function measureIdle(seconds: number): Promise<IdleFigures> {
  const pid = providerPid(sandbox);
  const requests = await ApiserverSampler.start();
  const cpuBefore = cpuSeconds(pid);
  await sleep(seconds * 1000);
  const counted = await requests.since();
  return {
    seconds,
    providerRssMiB: rssMiB(pid),
    providerCpuSeconds: cpuSeconds(pid) - cpuBefore,
    requestsPerSecond: Object.fromEntries(Object.entries(counted.requests).map(([c, kinds]) => [c, sumOf(kinds) / seconds])),
  };
}

function scalePod(name: string, namespace: string, offload: boolean): V1Pod {
  const annotations: Record<string, string> = offload
    ? { [ELECT_ANNOTATION]: '', [PROXY_POD_SCHEDULING_CONSTRAINTS_ANNOTATION]: JSON.stringify({ nodeSelector: { [TARGET_NAMESPACE_LABEL]: namespace, [TARGET_NAME_LABEL]: 'c2' } }) }
    : {};
  return { metadata: { name, labels: { app: LABEL }, annotations }, spec: { containers: [{ name: 'app', image: 'nginx', resources: { requests: { cpu: '1m', memory: '1Mi' } } }] } };
}

/** One run: the pods spread over `names`, in c2 directly or offloaded from c1. */
async function run(names: readonly string[], pods: number, concurrency: number, direct: boolean): Promise<ScaleRun> {
  const spread = podsPerTarget(pods, names.length);
  const keys = names.flatMap((ns, i) => Array.from({ length: spread[i]! }, (_, j) => ({ ns, name: `p-${j}` })));
  const times = new RunTimes(keys.map((k) => `${k.ns}/${k.name}`));
  const c1 = kubeConfigFor('c1');
  const c2 = kubeConfigFor('c2');
  const core = reuseConnections(direct ? kubeConfigFor('c2') : kubeConfigFor('c1')).makeApiClient(CoreV1Api);
  const selector = { labelSelector: `app=${LABEL}` };
  const key = (pod: V1Pod, name = pod.metadata!.name!) => `${pod.metadata!.namespace}/${name}`;
  const watches = [new PodWatch(direct ? c2 : c1, selector, (type, pod, at) => markPod(times, key(pod), direct ? 'direct' : 'proxy', type, pod, at))];
  if (!direct) {
    // Every pod of c2: a delegate carries the proxy's labels prefixed, not `app` itself; only
    // the delegates of this run's proxies (by their parent's name) are marked.
    watches.push(
      new PodWatch(c2, {}, (type, pod, at) => {
        const parent = pod.metadata?.annotations?.[PARENT_NAME_ANNOTATION];
        if (parent) markPod(times, key(pod, parent), 'delegate', type, pod, at);
      }),
    );
  }
  try {
    for (const w of watches) await w.start();
    const sampler = await ProviderSampler.start();
    const requests = await ApiserverSampler.start();
    const extenderBefore = metricByLabel(await providerMetrics(), EXTENDER_SECONDS, 'verb');
    times.t0 = performance.now();
    await pool(keys, concurrency, async (k) => {
      const id = `${k.ns}/${k.name}`;
      times.mark(id, 'sent', performance.now());
      await core.createNamespacedPod({ namespace: k.ns, body: scalePod(k.name, k.ns, !direct) });
      times.mark(id, 'created', performance.now());
    });
    await waitFor(`${pods} pods Running over ${names.length} namespaces`, phaseTimeoutMs(pods, names.length), () => times.count('running') === pods);
    const allRunningSeconds = times.last('running') / 1000;
    const providerCpuSeconds = sampler.cpuSince();
    const started = await requests.since();
    const extenderAfter = metricByLabel(await providerMetrics(), EXTENDER_SECONDS, 'verb');
    log(`${direct ? 'direct' : 'offloaded'}, ${names.length} targets, ${pods} pods: all Running in ${allRunningSeconds.toFixed(1)} s; deleting`);

    const deleteStart = performance.now() - times.t0;
    await pool([...names], 4, (namespace) => core.deleteCollectionNamespacedPod({ namespace, labelSelector: `app=${LABEL}` }).then(() => undefined));
    await waitFor(`${pods} pods gone`, phaseTimeoutMs(pods, names.length), () => times.count('gone') === pods && (direct || times.count('proxyGone') === pods));
    const deletionSeconds = (times.last('gone') - deleteStart) / 1000;
    const { peakRssMiB } = sampler.finish();
    const podTimes: PodTimes[] = times.list();
    const latencies = startLatencies(podTimes);
    return {
      allRunningSeconds,
      deletionSeconds,
      startLatencyP50Ms: percentile(latencies, 50),
      startLatencyP99Ms: percentile(latencies, 99),
      providerCpuSeconds,
      providerPeakRssMiB: peakRssMiB,
      requestsPerPod: Object.fromEntries(Object.entries(started.requests).map(([c, kinds]) => [c, sumOf(kinds) / pods])),
      ...(direct
        ? {}
        : {
            proxiesBoundPerSecond: steadyRate(podTimes.map((p) => p.bound)),
            extenderSeconds: Object.fromEntries(Object.entries(extenderAfter).map(([verb, s]) => [verb, s - (extenderBefore[verb] ?? 0)])),
            stages: stageFigures(podTimes, orderedStages(podTimes, OFFLOAD_MILESTONES)),
          }),
    };
  } finally {
    for (const w of watches) w.stop();
    await pool([...names], 4, (namespace) =>
      core.deleteCollectionNamespacedPod({ namespace, labelSelector: `app=${LABEL}` }).then(
        () => undefined,
        () => undefined,
      ),
    );
  }
}

async function main(args: ScaleArgs): Promise<void> {
  let startedSandbox = false;
  if (!sandbox.isUp()) {
    startedSandbox = sandbox.state() === undefined;
    log('the sandbox is not up: starting it, its providers logging at info as the Deployment does');
    await sandbox.up({ log: (l) => log(`sandbox: ${l}`), providerLogLevel: 'info' });
  }
  const startedAt = new Date();
  const loadBefore = loadavg();
  const results: ScaleResult[] = [];
  let baseline: IdleFigures | undefined;
  const restores: (() => Promise<void>)[] = [];
  try {
    log(
      `targets ${args.targets.join(', ')}, ${args.pods} pods each size, creation concurrency ${args.concurrency}; ${cpus().length} CPUs, load average ${loadBefore.map((l) => l.toFixed(2)).join(' ')}`,
    );
    restores.push(await ensureCapacity(args.pods, log));
    log(`baseline: ${args.idleSeconds} s idle with no benchmark target`);
    baseline = await measureIdle(args.idleSeconds);
    for (const targets of args.targets) {
      const names = namespaceNames(targets);
      const connectStart = performance.now();
      try {
        log(`connecting ${targets} namespaced Targets`);
        await connectMany(names);
        const connectSeconds = (performance.now() - connectStart) / 1000;
        log(`${targets} Targets Ready in ${connectSeconds.toFixed(1)} s; ${args.idleSeconds} s idle`);
        const idle = await measureIdle(args.idleSeconds);
        await virtualNodesAdvertise(names, Math.max(...podsPerTarget(args.pods, targets)));
        const direct = await run(names, args.pods, args.concurrency, true);
        const offloaded = await run(names, args.pods, args.concurrency, false);
        results.push({ targets, pods: args.pods, connectSeconds, idle, direct, offloaded });
      } finally {
        log(`disconnecting the ${targets} namespaces`);
        await disconnectMany(names);
      }
    }
  } finally {
    for (const restore of restores.reverse()) await restore();
    if (startedSandbox) {
      log('stopping the sandbox it started');
      await sandbox.down();
    }
  }
  console.log('');
  console.log(renderScaleTable(baseline, results));
  console.log('');
  console.log("where an offloaded pod's time goes (p50/p99 s of each stage), and the extender's requests:");
  console.log(renderScaleStages(results));
  console.log('');
  const goals = renderScaleGoals(baseline, results);
  if (goals) {
    console.log('the goals of one replica (docs/performance.md), printed, never asserted:');
    console.log(goals);
    console.log('');
  }
  for (const r of results) console.log(scaleSummaryLine(r));
  const outDir = resolve(REPO_ROOT, args.outDir);
  mkdirSync(outDir, { recursive: true });
  const base = join(outDir, `scale-${startedAt.toISOString().replace(/[:.]/g, '-')}`);
  const json = {
    benchmark: 'scale',
    startedAt: startedAt.toISOString(),
    cpus: cpus().length,
    loadAverageBefore: loadBefore,
    loadAverageAfter: loadavg(),
    args,
    baseline,
    results,
    goals: scaleGoals(baseline, results),
  };
  writeFileSync(`${base}.json`, JSON.stringify(json, null, 1) + '\n');
  writeFileSync(`${base}.svg`, renderScaleSvg(results, `scale: cost against targets, ${args.pods} pods, ${startedAt.toISOString()}`));
  log(`wrote ${relative(process.cwd(), `${base}.json`)} and ${relative(process.cwd(), `${base}.svg`)}`);
}

runBenchmark('scale', SCALE_USAGE, parseScaleArgs, main);
