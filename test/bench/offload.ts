/**
 * Benchmark (not a test): end-to-end offload of N elected pods (creation to all proxies
 * Running) next to the same N pods created directly in a target, as a ratio, with the source
 * provider's CPU seconds and peak RSS. Needs a running sandbox (`npm run sandbox -- up`).
 *
 *   npx tsx test/bench/offload.ts [N=1000] [concurrency=20]
 */
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { kubeConfigFor } from '../e2e/support.js';
import { Sandbox } from '../sandbox/sandbox.js';
import { cpuSeconds, peakRss, pool, providerPid, rssMiB, sleep } from './bench-support.js';

const N = Number(process.argv[2] ?? 1000);
const CONCURRENCY = Number(process.argv[3] ?? 20);
const sandbox = new Sandbox();
if (!sandbox.isUp() && !process.env.BENCH_PROVIDER_PID) {
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
  const list = await core.listNamespacedPod({ namespace });
  return list.items.filter((p) => p.status?.phase === 'Running').length;
}

/** Creates N pods and waits until all are Running; returns seconds. */
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

async function main(): Promise<void> {
  const suffix = Math.random().toString(36).slice(2, 7);
  const direct = `bench-direct-${suffix}`;
  const offload = 'default';
  await c2.createNamespace({ body: { metadata: { name: direct } } });
  try {
    console.log(`bench: ${N} pods, creation concurrency ${CONCURRENCY}`);
    const directSeconds = await timeRun(c2, direct, false);
    console.log(`bench: direct in c2: ${directSeconds.toFixed(1)} s`);
    // Free c2's capacity first: the virtual nodes advertise the targets' free room, and the
    // offloaded pods must not compete with the direct ones.
    await c2.deleteCollectionNamespacedPod({ namespace: direct, gracePeriodSeconds: 0 });
    for (let i = 0; (await c2.listNamespacedPod({ namespace: direct })).items.length > 0; i++) {
      if (i > 600) throw new Error(`the direct pods in c2 were not gone after 5 minutes`);
      await sleep(500);
    }

    const pid = providerPid(sandbox);
    const cpu0 = cpuSeconds(pid);
    const rss = peakRss(pid);
    const rssAtStart = rssMiB(pid);
    // Offloaded pods go to namespace default of c1, which the sandbox connected to c1 and c2.
    for (const p of (await c1.listNamespacedPod({ namespace: offload, labelSelector: 'app=bench' })).items) {
      throw new Error(`namespace default already has bench pods (${p.metadata?.name}); delete them first`);
    }
    const t0 = performance.now();
    await pool(
      Array.from({ length: N }, (_, i) => `bench-${suffix}-${i}`),
      CONCURRENCY,
      async (name) => {
        await c1.createNamespacedPod({ namespace: offload, body: pod(name, true) });
      },
    );
    const deadline = Date.now() + 15 * 60_000;
    for (;;) {
      const list = await c1.listNamespacedPod({ namespace: offload, labelSelector: 'app=bench' });
      if (list.items.filter((p) => p.status?.phase === 'Running').length >= N) break;
      if (Date.now() > deadline) throw new Error('not all proxies Running after 15 minutes');
      await sleep(500);
    }
    const offloadSeconds = (performance.now() - t0) / 1000;
    const cpu = cpuSeconds(pid) - cpu0;
    const peak = rss.stop();
    console.log(`bench: offloaded from c1 (proxies Running): ${offloadSeconds.toFixed(1)} s`);
    console.log(`bench: ratio offload/direct: ${(offloadSeconds / directSeconds).toFixed(2)}`);
    console.log(`bench: provider CPU ${cpu.toFixed(1)} s, peak RSS ${peak.toFixed(0)} MiB (${rssAtStart.toFixed(0)} MiB before)`);
  } finally {
    await c2.deleteNamespace({ name: direct }).catch(() => undefined);
    await c1.deleteCollectionNamespacedPod({ namespace: offload, labelSelector: 'app=bench' }).catch(() => undefined);
  }
}

main().catch((err) => {
  console.error(`bench: ${err instanceof Error ? err.message : err}`);
  process.exit(1);
});
