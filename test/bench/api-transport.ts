/**
 * Benchmark (not a test): what an API call costs the client, by the way it is made. client-node's
 * generated API over its own HTTP/1.1 library (connections reused, calls given a deadline: the
 * baseline), the provider's way (the same, its calls over HTTP/2, as `provider/main.ts` sets up
 * its clients), then `https.request` on one keep-alive agent and one bare `http2` session, both
 * with a plain parse of the answer: N creates of a 3 kB ConfigMap (about a proxy's size) in c2,
 * C at a time, each way in a process of its own, in turn, `rounds` times. Prints the medians of
 * the client's CPU seconds, c2's apiserver's, and the wall time, and the client's CPU against the
 * baseline. Needs a running sandbox.
 *
 *   npx tsx test/bench/api-transport.ts [calls=2000] [concurrency=100] [rounds=3]
 */
import { spawn } from 'node:child_process';
import http2 from 'node:http2';
import https from 'node:https';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { apiCallsOverHttp2 } from '../../provider/clusters/api-http2.js';
import { reuseConnections } from '../../provider/clusters/connection-reuse.js';
import { withRequestDeadline } from '../../provider/clusters/request-deadline.js';
import { kubectl } from '../e2e/support.js';
import { Sandbox } from '../sandbox/sandbox.js';
import { median, sandboxCpuSeconds } from './bench-support.js';

const WAYS = ['client-node', 'provider', 'https', 'http2'] as const;
type Way = (typeof WAYS)[number];

/** What a child process reports of its calls. */
interface ChildFigures {
  clientCpuS: number;
  wallS: number;
}

const configMap = (namespace: string, i: number) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: `cm-${i}`, namespace },
  data: { payload: 'x'.repeat(3000) },
});

/** Runs `run(0..calls-1)`, `concurrency` at a time. */
async function inPool(calls: number, concurrency: number, run: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < calls) await run(next++);
    }),
  );
}

/** Reads a whole answer (`status` once it has come) and fails unless it is a 201 with a JSON body. */
function created(answer: Readable, status: () => number): Promise<void> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    answer.on('data', (c: Buffer) => chunks.push(c));
    answer.on('error', reject);
    answer.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      if (status() !== 201) return reject(new Error(`create answered ${status()}: ${body.slice(0, 200)}`));
      try {
        resolve(void JSON.parse(body));
      } catch (err) {
        reject(err);
      }
    });
  });
}

/** The child: makes the calls one way and prints its figures as one JSON line. */
async function child(way: Way, kubeconfig: string, namespace: string, calls: number, concurrency: number): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  const server = kc.getCurrentCluster()!.server;
  let run: (i: number) => Promise<void>;
  let close = () => {};
  if (way === 'client-node' || way === 'provider') {
    reuseConnections(kc);
    if (way === 'provider') apiCallsOverHttp2(kc);
    withRequestDeadline(kc, 30_000);
    const core = kc.makeApiClient(CoreV1Api);
    run = async (i) => void (await core.createNamespacedConfigMap({ namespace, body: configMap(namespace, i) }));
  } else {
    // The kubeconfig's TLS options and headers, as client-node would use them.
    const options: https.RequestOptions = {};
    await kc.applyToHTTPSOptions(options);
    const tlsOptions = (options.agent as https.Agent).options;
    const headers = { ...(options.headers as Record<string, string>), 'content-type': 'application/json', accept: 'application/json' };
    const path = `/api/v1/namespaces/${namespace}/configmaps`;
    if (way === 'https') {
      const agent = new https.Agent({ ...tlsOptions, keepAlive: true });
      close = () => agent.destroy();
      run = (i) =>
        new Promise((resolve, reject) => {
          const req = https.request(new URL(path, server), { method: 'POST', agent, headers }, (res) => {
            created(res, () => res.statusCode ?? 0).then(resolve, reject);
          });
          req.on('error', reject);
          req.end(JSON.stringify(configMap(namespace, i)));
        });
    } else {
      const session = http2.connect(server, tlsOptions as http2.SecureClientSessionOptions);
      session.on('error', () => {});
      close = () => session.close();
      run = (i) => {
        const req = session.request({ ':method': 'POST', ':path': path, ...headers });
        let status = 0;
        req.on('response', (h) => (status = Number(h[':status'])));
        req.end(JSON.stringify(configMap(namespace, i)));
        return created(req, () => status);
      };
    }
  }
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await inPool(calls, concurrency, run);
  const wallS = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  close();
  const figures: ChildFigures = { clientCpuS: (cpu.user + cpu.system) / 1e6, wallS };
  console.log(JSON.stringify(figures));
}

/** Runs one way in a process of its own; resolves with what it printed last. */
function runChild(way: Way, kubeconfig: string, namespace: string, calls: number, concurrency: number): Promise<ChildFigures> {
  return new Promise((resolve, reject) => {
    const self = fileURLToPath(import.meta.url);
    const p = spawn(process.execPath, ['--import', 'tsx', self, '--way', way, kubeconfig, namespace, String(calls), String(concurrency)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (err += d));
    p.on('error', reject);
    p.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`the ${way} run exited ${code}: ${err.trim().split('\n').slice(-3).join(' ')}`));
      resolve(JSON.parse(out.trim().split('\n').at(-1)!) as ChildFigures);
    });
  });
}

async function main(): Promise<void> {
  const calls = Number(process.argv[2] ?? 2000);
  const concurrency = Number(process.argv[3] ?? 100);
  const rounds = Number(process.argv[4] ?? 3);
  if (![calls, concurrency, rounds].every((n) => Number.isInteger(n) && n > 0)) {
    console.error('usage: api-transport [calls=2000] [concurrency=100] [rounds=3] (positive integers)');
    process.exit(2);
  }
  const sandbox = new Sandbox();
  if (!sandbox.isUp()) {
    console.error('bench: the sandbox is not up; run `npm run sandbox -- up` first');
    process.exit(2);
  }
  const kubeconfig = join(sandbox.dir, 'c2', 'admin.kubeconfig');
  const apiserverCpu = () => sandboxCpuSeconds(sandbox).get('c2-kube-apiserver') ?? NaN;
  const figures = new Map<Way, { client: number[]; apiserver: number[]; wall: number[] }>(WAYS.map((w) => [w, { client: [], apiserver: [], wall: [] }]));
  const prefix = `bench-transport-${Math.random().toString(36).slice(2, 7)}`;
  for (let round = 1; round <= rounds; round++) {
    for (const way of WAYS) {
      const namespace = `${prefix}-${way}-${round}`;
      await kubectl('c2', 'create', 'namespace', namespace);
      try {
        const before = apiserverCpu();
        const f = await runChild(way, kubeconfig, namespace, calls, concurrency);
        const fig = figures.get(way)!;
        fig.apiserver.push(apiserverCpu() - before);
        fig.client.push(f.clientCpuS);
        fig.wall.push(f.wallS);
      } finally {
        // Gone before the next run: the namespace controller's deletes would count as that run's.
        await kubectl('c2', 'delete', 'namespace', namespace, '--timeout=120s');
      }
    }
  }
  console.log(`api-transport: ${calls} creates of a 3 kB ConfigMap in c2, ${concurrency} at a time, each way in turn, ${rounds} round(s); medians`);
  const width = Math.max(...WAYS.map((w) => w.length));
  for (const way of WAYS) {
    const f = figures.get(way)!;
    const client = median(f.client);
    console.log(
      `api-transport: ${`${way}:`.padEnd(width + 1)} client CPU ${client.toFixed(2)} s (${((client / calls) * 1000).toFixed(3)} ms a call), c2's apiserver CPU ${median(f.apiserver).toFixed(2)} s, wall ${median(f.wall).toFixed(2)} s`,
    );
  }
  const base = median(figures.get('client-node')!.client);
  const ratio = (way: Way) => (median(figures.get(way)!.client) / base).toFixed(2);
  console.log(`api-transport ${calls} calls: client CPU against client-node: provider ${ratio('provider')}, https ${ratio('https')}, http2 ${ratio('http2')}`);
}

if (process.argv[2] === '--way') {
  const [, , , way, kubeconfig, namespace, calls, concurrency] = process.argv;
  child(way as Way, kubeconfig!, namespace!, Number(calls), Number(concurrency)).then(
    () => process.exit(0),
    (err) => {
      console.error(err instanceof Error ? err.message : err);
      process.exit(1);
    },
  );
} else {
  main().catch((err) => {
    console.error(`bench: ${err instanceof Error ? err.message : err}`);
    process.exit(1);
  });
}
