/**
 * Scheduler extender latency benchmark (a script, not a test): serves the extender's routes in
 * process over HTTP on 127.0.0.1, judging 100 targets of 100 real nodes each from their
 * ClusterSummaries (as the provider does, {@link buildClusterSummary} then
 * {@link nodesOfSummary}), next to a no-op route on the same server that reads and parses the
 * same bodies. For a few proxy shapes it fires `filter` and `prioritize` calls in the form the
 * proxy scheduler sends them (`nodeCacheCapable: true`: `NodeNames` only, every virtual node
 * and a few real ones) and prints p50/p99, requests/s and the ratio to the no-op, so the cost
 * of judging the targets shows apart from HTTP and JSON parsing.
 *
 * kube-scheduler calls an extender once per scheduling cycle and runs one cycle at a time, so
 * concurrency 1 is what it sees; higher concurrency measures throughput only. Plain HTTP: TLS
 * costs the same on both routes (webhook-latency measures it).
 *
 *   npx tsx test/bench/extender-latency.ts [requests=3000] [concurrency=1]
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { KubeConfig, type V1Node, type V1Pod, type V1PodSpec } from '@kubernetes/client-node';
import { ClusterRegistry } from '../../provider/clusters/cluster-registry.js';
import { createTargetClient } from '../../provider/clusters/target-client.js';
import { ELECT_ANNOTATION, HOSTNAME_LABEL } from '../../provider/core/keys.js';
import { silentLogger } from '../../provider/core/logger.js';
import { buildClusterSummary } from '../../provider/model/cluster-summary.js';
import { virtualNodeName } from '../../provider/model/names.js';
import type { TargetRef } from '../../provider/model/types.js';
import { createRouter, json } from '../../provider/core/http-router.js';
import { createExtenderRoutes, FILTER_PATH, PRIORITIZE_PATH, type ExtenderFilterResult, type HostPriority, type TargetState } from '../../scheduler/extender-server.js';
import { nodesOfSummary } from '../../scheduler/target-nodes.js';
import { mutatePod } from '../../webhook/mutate-pod.js';
import { prng } from '../support/prng.js';

const requests = Math.min(Math.max(Number(process.argv[2] ?? 3000) || 3000, 1), 100_000);
const concurrency = Math.min(Math.max(Number(process.argv[3] ?? 1) || 1, 1), 64);
const TARGETS = 100;
const NODES_PER_TARGET = 100;
/** Real (non-virtual) nodes of the source in each call: kept untouched by the extender. */
const REAL_NODES = 10;
/** Per measured run (noop, filter or prioritize of one shape): a run stops early past it. */
const runBudgetMs = 20_000;
const NOOP_PATH = '/noop';

/** Label pools of the real nodes: size and, for gpu, a taint that plain pods do not tolerate. */
const POOLS = [
  { pool: 'general', cpu: 8, memoryGi: 32 },
  { pool: 'compute', cpu: 32, memoryGi: 64 },
  { pool: 'memory', cpu: 16, memoryGi: 256 },
  { pool: 'gpu', cpu: 16, memoryGi: 128, taint: { key: 'nvidia.com/gpu', value: 'present', effect: 'NoSchedule' } },
] as const;

/** One target's nodes (4 pools, 3 zones, one cordoned, one not Ready) and pods using 20..80 % of each node's cpu. */
function fleet(t: number): { nodes: V1Node[]; pods: V1Pod[] } {
  const rnd = prng(t + 1);
  const nodes: V1Node[] = [];
  const pods: V1Pod[] = [];
  for (let i = 0; i < NODES_PER_TARGET; i++) {
    const p = POOLS[i % POOLS.length];
    const name = `t${t}-node-${i}`;
    nodes.push({
      metadata: { name, labels: { [HOSTNAME_LABEL]: name, pool: p!.pool, 'topology.kubernetes.io/zone': `zone-${i % 3}`, 'kubernetes.io/os': 'linux' } },
      spec: { unschedulable: i === 1 ? true : undefined, taints: 'taint' in p! ? [p.taint] : undefined },
      status: {
        allocatable: { cpu: String(p!.cpu), memory: `${p!.memoryGi}Gi`, pods: '110' },
        conditions: [{ type: 'Ready', status: i === 2 ? 'False' : 'True' }],
      },
    });
    const used = 0.2 + 0.6 * rnd();
    const count = 1 + Math.floor(rnd() * 4);
    for (let k = 0; k < count; k++) {
      const cpuMilli = Math.floor((p!.cpu * 1000 * used) / count);
      const memoryMi = Math.floor((p!.memoryGi * 1024 * used) / count);
      pods.push({
        metadata: { name: `${name}-pod-${k}`, namespace: 'apps' },
        spec: { nodeName: name, containers: [{ name: 'app', image: 'app', resources: { requests: { cpu: `${cpuMilli}m`, memory: `${memoryMi}Mi` } } }] },
        status: { phase: 'Running' },
      });
    }
  }
  return { nodes, pods };
}

/** The shapes of proxies measured, as the webhook makes them (exact mode, source manifest saved). */
const SHAPES: { name: string; spec: Partial<V1PodSpec>; cpu: string; memory: string }[] = [
  { name: 'plain', spec: {}, cpu: '250m', memory: '256Mi' },
  { name: 'selector', spec: { nodeSelector: { pool: 'compute' } }, cpu: '2', memory: '4Gi' },
  { name: 'nowhere', spec: {}, cpu: '64', memory: '1Gi' },
];

function proxy(shape: (typeof SHAPES)[number]): V1Pod {
  const source: V1Pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `bench-${shape.name}`, namespace: 'bench', uid: `uid-${shape.name}`, labels: { app: 'bench' }, annotations: { [ELECT_ANNOTATION]: '' } },
    spec: {
      containers: [{ name: 'app', image: 'nginx:1.27', resources: { requests: { cpu: shape.cpu, memory: shape.memory } } }],
      tolerations: [{ key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 }],
      ...shape.spec,
    },
  };
  return mutatePod(source, { namespace: 'bench', schedulerName: 'admiralty-proxy' }).pod;
}

function kubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:1' }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
    currentContext: 'ctx',
  });
  return kc;
}

function post(agent: http.Agent, port: number, path: string, body: string): Promise<{ ms: number; text: string }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = http.request({ host: '127.0.0.1', port, path, method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        if (res.statusCode === 200) resolve({ ms: performance.now() - started, text });
        else reject(new Error(`${path}: HTTP ${res.statusCode}: ${text.slice(0, 200)}`));
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

interface RunResult {
  latencies: number[];
  perSecond: number;
}

async function run(port: number, path: string, body: string, count: number, budgetMs: number): Promise<RunResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const latencies: number[] = [];
  const t0 = performance.now();
  const deadline = t0 + budgetMs;
  let next = 0;
  const worker = async () => {
    while (next < count && performance.now() < deadline) {
      next++;
      latencies.push((await post(agent, port, path, body)).ms);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const elapsedMs = performance.now() - t0;
  agent.destroy();
  return { latencies: latencies.sort((a, b) => a - b), perSecond: (latencies.length / elapsedMs) * 1000 };
}

function percentile(sorted: number[], p: number): number {
  const value = sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
  if (value === undefined) throw new Error('no percentile of no latencies');
  return value;
}

async function main(): Promise<void> {
  const t0 = performance.now();
  const registry = new ClusterRegistry();
  const states = new Map<string, TargetState>();
  const virtualNames: string[] = [];
  let realNodes = 0;
  for (let t = 0; t < TARGETS; t++) {
    const ref: TargetRef = { kind: 'ClusterTarget', namespace: '', name: `t${String(t).padStart(3, '0')}` };
    const client = createTargetClient(ref, kubeConfig(), 'fp', false);
    const name = virtualNodeName(ref);
    registry.set(client, name);
    registry.setHealth(client.key, { ready: true, reason: 'Ready', message: '', sinceMs: 0 });
    const { nodes, pods } = fleet(t);
    const nodesOfTarget = nodesOfSummary(buildClusterSummary(nodes, pods));
    realNodes += nodesOfTarget.length;
    states.set(client.key, { nodes: nodesOfTarget, readAtMs: Date.now() });
    virtualNames.push(name);
  }
  const nodeNames = [...virtualNames, ...Array.from({ length: REAL_NODES }, (_, i) => `c1-node-${i}`)];
  console.log(`fleet: ${TARGETS} targets, ${realNodes} real nodes in their summaries, built in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

  // The baseline: same router, body read and parse as the extender (JSON.parse), a small answer.
  const noop = {
    method: 'POST' as const,
    path: NOOP_PATH,
    maxBodyBytes: 64 * 2 ** 20,
    handle: ({ body }: { body: Buffer }) => {
      const parsed = JSON.parse(body.toString('utf8')) as { NodeNames?: string[] };
      return json(200, { NodeNames: parsed.NodeNames?.length ?? 0 });
    },
  };
  const routes = [noop, ...createExtenderRoutes({ registry, targetState: (key) => states.get(key), policy: { kind: 'spread' }, logger: silentLogger() })];
  const server = http.createServer(createRouter({ routes, logger: silentLogger() }));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;

  try {
    console.log(`requests=${requests} per run, concurrency=${concurrency} (HTTP, keep-alive, 127.0.0.1); NodeNames: ${virtualNames.length} virtual + ${REAL_NODES} real`);
    const row = (shape: string, verb: string, r: RunResult, base?: RunResult) =>
      [
        shape.padEnd(9),
        verb.padEnd(11),
        `n=${String(r.latencies.length).padStart(6)}`,
        `p50=${percentile(r.latencies, 50).toFixed(2).padStart(7)} ms`,
        `p99=${percentile(r.latencies, 99).toFixed(2).padStart(7)} ms`,
        `${r.perSecond.toFixed(0).padStart(6)} req/s`,
        base ? `x${(percentile(r.latencies, 50) / percentile(base.latencies, 50)).toFixed(1)} p50, x${(percentile(r.latencies, 99) / percentile(base.latencies, 99)).toFixed(1)} p99 of noop` : '',
      ].join('  ');
    const agent = new http.Agent({ keepAlive: true });
    for (const shape of SHAPES) {
      const body = JSON.stringify({ Pod: proxy(shape), NodeNames: nodeNames, Nodes: null });
      // What the extender answers, once: the figures are only worth something if it judged as meant.
      const filtered = JSON.parse((await post(agent, port, FILTER_PATH, body)).text) as ExtenderFilterResult;
      const kept = (filtered.NodeNames ?? []).filter((n) => virtualNames.includes(n)).length;
      const scores = JSON.parse((await post(agent, port, PRIORITIZE_PATH, body)).text) as HostPriority[];
      const anyReason = Object.values({ ...filtered.FailedNodes, ...filtered.FailedAndUnresolvableNodes })[0];
      console.log(
        `${shape.name}: body ${(body.length / 1024).toFixed(1)} KiB; filter keeps ${kept}/${virtualNames.length} virtual nodes` +
          `${anyReason ? ` (e.g. "${anyReason}")` : ''}; prioritize scores ${Math.min(...scores.map((s) => s.Score))}..${Math.max(...scores.map((s) => s.Score))}`,
      );
      // Warm-up: JIT, sockets.
      for (const path of [NOOP_PATH, FILTER_PATH, PRIORITIZE_PATH]) await run(port, path, body, Math.min(200, requests), runBudgetMs);
      const noop = await run(port, NOOP_PATH, body, requests, runBudgetMs);
      const filter = await run(port, FILTER_PATH, body, requests, runBudgetMs);
      const prioritize = await run(port, PRIORITIZE_PATH, body, requests, runBudgetMs);
      console.log(row(shape.name, 'noop', noop));
      console.log(row(shape.name, 'filter', filter, noop));
      console.log(row(shape.name, 'prioritize', prioritize, noop));
      for (const [verb, r] of [
        ['noop', noop],
        ['filter', filter],
        ['prioritize', prioritize],
      ] as const) {
        if (r.latencies.length < requests) console.log(`${shape.name} ${verb}: stopped early at ${r.latencies.length} requests (time budget ${runBudgetMs / 1000} s)`);
      }
    }
    agent.destroy();
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
