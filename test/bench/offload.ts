/**
 * Benchmark (not a test): end-to-end offload of N elected pods (creation to all proxies
 * Running), placed two ways, next to the same N pods created directly in a target, as ratios,
 * with the source provider's CPU seconds and peak RSS for each way:
 *
 * * exact: the sandbox's c1 provider as it runs (the webhook gives proxies schedulerName
 *   admiralty-proxy; the proxy scheduler places them through the provider's extender);
 * * inexact: c1's provider restarted with `--proxy-scheduler-name=` (proxies keep their own
 *   scheduler: the stock default-scheduler places them on virtual node labels and capacity,
 *   without the extender). The sandbox's own provider is started again afterwards.
 *
 * Each offloaded run has a fresh namespace, connected as a user would (connectNamespace), and
 * the next run starts only once the previous namespace is gone from both clusters, so the runs
 * see the same clusters; both start from a freshly started provider. Needs a running sandbox (`npm run sandbox -- up`).
 *
 *   npx tsx test/bench/offload.ts [N=1000] [concurrency=20]
 */
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { connectNamespace, kubeConfigFor, kubectl, uniqueName } from '../e2e/support.js';
import { Sandbox } from '../sandbox/sandbox.js';
import { cpuSeconds, peakRss, pool, providerPid, rssMiB, sleep } from './bench-support.js';

const N = Number(process.argv[2] ?? 1000);
const CONCURRENCY = Number(process.argv[3] ?? 20);
/** The c1 provider's flag for the inexact run: proxies keep their scheduler (default-scheduler). */
const INEXACT_ARGS = ['--proxy-scheduler-name='];
const sandbox = new Sandbox();
if (!sandbox.isUp()) {
  console.error('bench: the sandbox is not up; run `npm run sandbox -- up` first');
  process.exit(2);
}
const c1 = kubeConfigFor('c1').makeApiClient(CoreV1Api);
const c2 = kubeConfigFor('c2').makeApiClient(CoreV1Api);

function pod(name: string, elect: boolean): V1Pod {
  return {
    metadata: { name, labels: { app: 'bench' }, annotations: elect ? { 'multicluster.admiralty.io/elect': '' } : {} },
    spec: { containers: [{ name: 'app', image: 'nginx', resources: { requests: { cpu: '1m', memory: '1Mi' } } }] },
  };
}

async function runningCount(core: CoreV1Api, namespace: string): Promise<number> {
  const list = await core.listNamespacedPod({ namespace, labelSelector: 'app=bench' });
  return list.items.filter((p) => p.status?.phase === 'Running').length;
}

/** Creates N pods (elected or not) in `namespace` and waits until all are Running; returns seconds. */
async function timeRun(core: CoreV1Api, namespace: string, elect: boolean): Promise<number> {
  const t0 = performance.now();
  await pool(
    Array.from({ length: N }, (_, i) => `p-${i}`),
    CONCURRENCY,
    async (name) => {
      await core.createNamespacedPod({ namespace, body: pod(name, elect) });
    },
  );
  const deadline = Date.now() + 15 * 60_000;
  while ((await runningCount(core, namespace)) < N) {
    if (Date.now() > deadline) throw new Error(`not all ${N} pods Running after 15 minutes in ${namespace}`);
    await sleep(500);
  }
  return (performance.now() - t0) / 1000;
}

/** Deletes a namespace from the given clusters, one after the other, waiting each time until it is gone. */
async function deleteNamespace(namespace: string, clusters: readonly string[]): Promise<void> {
  for (const c of clusters) {
    await kubectl(c, 'delete', 'namespace', namespace, '--wait=false', '--ignore-not-found');
    const deadline = Date.now() + 10 * 60_000;
    while ((await kubectl(c, 'get', 'namespace', namespace, '--ignore-not-found', '-o', 'name')).trim() !== '') {
      if (Date.now() > deadline) throw new Error(`namespace ${namespace} still in ${c} after 10 minutes`);
      await sleep(1000);
    }
  }
}

interface OffloadRun {
  seconds: number;
  /** How many proxies each scheduler placed (`spec.schedulerName`), to show which way ran. */
  schedulers: Record<string, number>;
  cpuSeconds: number;
  peakRssMiB: number;
  rssBeforeMiB: number;
}

/** N elected pods in a fresh namespace of c1, timed until all proxies are Running; the namespace is deleted (and gone) before it returns. */
async function timeOffload(label: string): Promise<OffloadRun> {
  const namespace = uniqueName(`bench-${label}`);
  await connectNamespace(namespace);
  try {
    const pid = providerPid(sandbox);
    const cpu0 = cpuSeconds(pid);
    const rss = peakRss(pid);
    const rssBeforeMiB = rssMiB(pid);
    const seconds = await timeRun(c1, namespace, true);
    const run = { cpuSeconds: cpuSeconds(pid) - cpu0, peakRssMiB: rss.stop(), rssBeforeMiB };
    const schedulers: Record<string, number> = {};
    for (const p of (await c1.listNamespacedPod({ namespace, labelSelector: 'app=bench' })).items) {
      const name = p.spec?.schedulerName ?? 'default-scheduler';
      schedulers[name] = (schedulers[name] ?? 0) + 1;
    }
    return { seconds, schedulers, ...run };
  } finally {
    // Proxies first, and every delegate gone, before the namespace: a proxy keeps its finalizer
    // until the provider has deleted its delegate, which needs the namespace's Target in c1 and
    // Source in c2; deleting the namespaces with the pods can leave proxies Terminating for
    // good (403 on their delegates).
    await c1.deleteCollectionNamespacedPod({ namespace, labelSelector: 'app=bench' });
    const deadline = Date.now() + 10 * 60_000;
    for (const core of [c1, c2]) {
      while ((await core.listNamespacedPod({ namespace })).items.length > 0) {
        if (Date.now() > deadline) throw new Error(`pods of ${namespace} still there after 10 minutes`);
        await sleep(1000);
      }
    }
    await deleteNamespace(namespace, ['c1', 'c2']);
  }
}

/** Restarts c1's provider with `extraArgs` (none: the sandbox's own flags) and waits until it is ready. */
async function restartProvider(extraArgs: readonly string[]): Promise<void> {
  await sandbox.stop('c1', 'provider');
  await sandbox.start('c1', 'provider', { extraArgs });
}

async function main(): Promise<void> {
  const direct = uniqueName('bench-direct');
  let inexactStarted = false;
  try {
    console.log(`bench: ${N} pods, creation concurrency ${CONCURRENCY}`);
    await c2.createNamespace({ body: { metadata: { name: direct } } });
    const directSeconds = await timeRun(c2, direct, false);
    console.log(`bench: direct in c2: ${directSeconds.toFixed(1)} s`);
    // Free c2's capacity first: the virtual nodes advertise the targets' free room, and the
    // offloaded pods must not compete with the direct ones.
    await deleteNamespace(direct, ['c2']);

    // Both offloaded runs start from a freshly started provider (empty caches, no memory of
    // earlier placements), so they differ only in how proxies are placed.
    await restartProvider([]);
    const exact = await timeOffload('exact');
    console.log(`bench: offloaded, exact (proxy scheduler + extender): ${exact.seconds.toFixed(1)} s`);

    inexactStarted = true;
    await restartProvider(INEXACT_ARGS);
    const inexact = await timeOffload('inexact');
    console.log(`bench: offloaded, inexact (default-scheduler, ${INEXACT_ARGS.join(' ')}): ${inexact.seconds.toFixed(1)} s`);

    const resources = (r: OffloadRun) =>
      `proxies placed by ${Object.entries(r.schedulers)
        .map(([name, n]) => `${name} (${n})`)
        .join(', ')}; provider CPU ${r.cpuSeconds.toFixed(1)} s, peak RSS ${r.peakRssMiB.toFixed(0)} MiB (${r.rssBeforeMiB.toFixed(0)} MiB before)`;
    console.log(`bench: ratio exact/direct: ${(exact.seconds / directSeconds).toFixed(2)}, inexact/direct: ${(inexact.seconds / directSeconds).toFixed(2)}`);
    console.log(`bench: ratio exact/inexact (the cost of the extender): ${(exact.seconds / inexact.seconds).toFixed(2)}`);
    console.log(`bench: exact: ${resources(exact)}`);
    console.log(`bench: inexact: ${resources(inexact)}`);
  } finally {
    await c2.deleteNamespace({ name: direct }).catch(() => undefined);
    if (inexactStarted) {
      await restartProvider([]);
      console.log("bench: c1's provider runs with the sandbox's own flags again");
    }
  }
}

main().catch((err) => {
  console.error(`bench: ${err instanceof Error ? err.message : err}`);
  process.exit(1);
});
