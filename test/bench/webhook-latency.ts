/**
 * Webhook latency benchmark (a script, not a test): serves the webhook's routes with the
 * webhook's server (HTTPS, here over HTTP/1.1) on 127.0.0.1 with a certificate from certs/, next to a no-op route on the same server, fires
 * AdmissionReviews at both and prints p50/p99 and their ratio, so the cost of the mutation
 * itself is visible apart from TLS, HTTP and JSON parsing.
 *
 *   npx tsx test/bench/webhook-latency.ts [requests=2000] [concurrency=16]
 */
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Registry } from 'prom-client';
import { createCA } from '../../certs/create-ca.js';
import { createServingCert } from '../../certs/create-serving-cert.js';
import { ELECT_ANNOTATION } from '../../provider/core/keys.js';
import { silentLogger } from '../../provider/core/logger.js';
import { createRouter, json } from '../../provider/core/http-router.js';
import { createWebhookRoutes } from '../../webhook/create-webhook-routes.js';
import { createWebhookServer } from '../../webhook/create-webhook-server.js';

const requests = Math.min(Math.max(Number(process.argv[2] ?? 2000) || 2000, 1), 100_000);
const concurrency = Math.min(Math.max(Number(process.argv[3] ?? 16) || 16, 1), 256);
const budgetMs = 25_000;

function review(i: number): string {
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: `bench-${i}`,
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      namespace: 'bench',
      operation: 'CREATE',
      object: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { generateName: 'web-', namespace: 'bench', labels: { app: 'web' }, annotations: { [ELECT_ANNOTATION]: '' } },
        spec: {
          containers: [{ name: 'web', image: 'nginx:1.27', resources: { requests: { cpu: '100m', memory: '64Mi' } } }],
          tolerations: [{ key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 }],
          affinity: { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [{ topologyKey: 'kubernetes.io/hostname' }] } },
        },
      },
    },
  });
}

function post(agent: https.Agent, port: number, caPem: string, path: string, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = https.request({ host: '127.0.0.1', port, path, method: 'POST', agent, ca: caPem, servername: 'localhost', headers: { 'content-type': 'application/json' } }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve(performance.now() - started) : reject(new Error(`${path}: HTTP ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function run(label: string, path: string, port: number, caPem: string, count: number, deadline: number): Promise<number[]> {
  const agent = new https.Agent({ keepAlive: true, maxSockets: concurrency });
  const latencies: number[] = [];
  let next = 0;
  const worker = async () => {
    while (next < count && performance.now() < deadline) {
      const i = next++;
      latencies.push(await post(agent, port, caPem, path, review(i)));
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  agent.destroy();
  if (latencies.length < count) console.log(`${label}: stopped early at ${latencies.length} requests (time budget)`);
  return latencies;
}

function percentile(sorted: number[], p: number): number {
  const value = sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
  if (value === undefined) throw new Error('no percentile of no latencies');
  return value;
}

async function main(): Promise<void> {
  const ca = createCA({ commonName: 'bench-ca' });
  const pair = createServingCert({ ca, commonName: 'localhost', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
  // Same body handling cost as the webhook: read, parse, answer.
  const noop = {
    method: 'POST' as const,
    path: '/noop',
    handle: ({ body }: { body: Buffer }) => {
      const parsed = JSON.parse(body.toString('utf8')) as { request: { uid: string } };
      return json(200, { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: parsed.request.uid, allowed: true } });
    },
  };
  const handler = createRouter({ routes: [noop, ...createWebhookRoutes({ logger: silentLogger(), registry: new Registry() })], logger: silentLogger() });
  const webhook = createWebhookServer({ pair, handler });
  const { server } = webhook;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  try {
    const deadline = performance.now() + budgetMs;
    // Warm-up: JIT, TLS sessions.
    await run('warm-up', '/noop', port, ca.certPem, Math.min(200, requests), deadline);
    await run('warm-up', '/mutate', port, ca.certPem, Math.min(200, requests), deadline);
    const half = (deadline - performance.now()) / 2;
    const noop = (await run('noop', '/noop', port, ca.certPem, requests, performance.now() + half)).sort((a, b) => a - b);
    const mutate = (await run('mutate', '/mutate', port, ca.certPem, requests, deadline)).sort((a, b) => a - b);
    const row = (name: string, l: number[]) => `${name.padEnd(8)} n=${String(l.length).padStart(6)}  p50=${percentile(l, 50).toFixed(2)} ms  p99=${percentile(l, 99).toFixed(2)} ms`;
    console.log(`requests=${requests} concurrency=${concurrency} (HTTPS, keep-alive, 127.0.0.1)`);
    console.log(row('noop', noop));
    console.log(row('mutate', mutate));
    console.log(`ratio mutate/noop: p50 x${(percentile(mutate, 50) / percentile(noop, 50)).toFixed(2)}  p99 x${(percentile(mutate, 99) / percentile(noop, 99)).toFixed(2)}`);
  } finally {
    await webhook.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
