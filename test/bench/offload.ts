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
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { reuseConnections } from '../../provider/clusters/connection-reuse.js';
import { ELECT_ANNOTATION, PARENT_NAME_ANNOTATION, PROXY_POD_SCHEDULING_CONSTRAINTS_ANNOTATION, TARGET_NAME_LABEL, TARGET_NAMESPACE_LABEL } from '../../provider/core/keys.js';
import { connectNamespace, kubeConfigFor, kubectl, uniqueName, waitFor } from '../e2e/support.js';
import { REPO_ROOT } from '../sandbox/sandbox.js';
import { pinClusters, pool, runBenchmark } from './bench-support.js';
import {
  DIRECT_MILESTONES,
  OFFLOAD_MILESTONES,
  orderedStages,
  OFFLOAD_USAGE,
  parseOffloadArgs,
  percentile,
  renderCpuFloor,
  renderGoals,
  renderRates,
  renderRequests,
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
  type OffloadArgs,
  type PodTimes,
  type RunFigures,
  type SizeResult,
} from './offload-report.js';
import { ApiserverSampler, ensureCapacity, MachineSampler, markPod, PodWatch, ProviderSampler, RunTimes, sandbox } from './sandbox-run.js';

const log = (line: string) => console.log(`bench: ${line}`);

/** How long one phase (all Running, all gone) may take before the run fails: generous, never a figure. */
const phaseTimeoutMs = (size: number) => 120_000 + size * 200;

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
  const watches = [new PodWatch(here, { namespace }, (type, pod, at) => markPod(times, pod.metadata!.name!, direct ? 'direct' : 'proxy', type, pod, at))];
  if (!direct) {
    watches.push(
      new PodWatch(c2, { namespace }, (type, pod, at) => {
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
      restores.push(await ensureCapacity(size, log));
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
  console.log(
    "steady rates, pods a second (the first second's burst left out): kube-scheduler's client sends 50 requests a second after a burst of 100 unless configured otherwise, and binds each pod with one:",
  );
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

runBenchmark('offload', OFFLOAD_USAGE, parseOffloadArgs, main);
