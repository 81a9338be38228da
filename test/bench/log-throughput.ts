/**
 * Benchmark (not a test): log-streaming throughput of `kubectl logs` through a proxy pod (the
 * apiserver of c1 -> our kubelet API -> c2's apiserver -> kwok) next to `kubectl logs` on the
 * delegate directly in c2, as a ratio. Needs a running sandbox.
 *
 *   npx tsx test/bench/log-throughput.ts [MiB=20] [rounds=3]
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { apply, getJson, kubectl } from '../e2e/support.js';
import { Sandbox, waitFor } from '../sandbox/sandbox.js';
import { cpuSeconds, median, providerPid } from './bench-support.js';

const MIB = Number(process.argv[2] ?? 20);
const ROUNDS = Number(process.argv[3] ?? 3);
const sandbox = new Sandbox();
if (!sandbox.isUp()) {
  console.error('bench: the sandbox is not up; run `npm run sandbox -- up` first');
  process.exit(2);
}

/** Runs kubectl logs and counts the bytes it prints; returns seconds and bytes. */
function timeLogs(cluster: string, pod: string): Promise<{ seconds: number; bytes: number }> {
  return new Promise((res, rej) => {
    const t0 = performance.now();
    let bytes = 0;
    const child = spawn(sandbox.kubectlPath, ['--kubeconfig', sandbox.kubeconfigPath, '--context', cluster, 'logs', pod, '-n', 'default']);
    child.stdout.on('data', (b: Buffer) => (bytes += b.length));
    child.on('error', rej);
    child.on('close', (code) => (code === 0 ? res({ seconds: (performance.now() - t0) / 1000, bytes }) : rej(new Error(`kubectl logs ${pod} on ${cluster} exited ${code}`))));
  });
}

async function main(): Promise<void> {
  // Every pod in namespace default of c2 logs the sandbox's default file: fill it for the run.
  const file = join(sandbox.dir, 'c2', 'fake-logs', 'default.log');
  const original = readFileSync(file, 'utf8');
  const line = `${new Date().toISOString()} stdout F ${'x'.repeat(100)}\n`;
  writeFileSync(file, line.repeat(Math.ceil((MIB * 1024 * 1024) / line.length)));
  const proxy = `bench-logs-${Math.random().toString(36).slice(2, 7)}`;
  try {
    await apply(
      'c1',
      `apiVersion: v1\nkind: Pod\nmetadata: {name: ${proxy}, namespace: default, annotations: {multicluster.admiralty.io/elect: ""}}\nspec:\n  nodeSelector: {topology.kubernetes.io/region: eu}\n  containers: [{name: app, image: nginx}]\n`,
    );
    await waitFor('proxy Running', 120_000, async () => (await getJson('c1', 'pod', proxy, '-n', 'default')).status?.phase === 'Running');
    const delegates = await getJson('c2', 'pods', '-n', 'default', '-l', `multicluster.admiralty.io/parent-uid=${(await getJson('c1', 'pod', proxy, '-n', 'default')).metadata.uid}`);
    const delegate = delegates.items[0].metadata.name as string;

    const direct: number[] = [];
    const through: number[] = [];
    const pid = providerPid(sandbox);
    const cpu0 = cpuSeconds(pid);
    let bytes = 0;
    for (let i = 0; i < ROUNDS; i++) {
      const d = await timeLogs('c2', delegate);
      const p = await timeLogs('c1', proxy);
      if (p.bytes !== d.bytes) throw new Error(`proxy returned ${p.bytes} bytes, delegate ${d.bytes}`);
      bytes = d.bytes;
      direct.push(d.bytes / d.seconds / 1024 / 1024);
      through.push(p.bytes / p.seconds / 1024 / 1024);
    }
    const cpu = cpuSeconds(pid) - cpu0;
    console.log(`bench: ${(bytes / 1024 / 1024).toFixed(1)} MiB of logs, ${ROUNDS} rounds, median throughput`);
    console.log(`bench: kubectl logs on the delegate in c2: ${median(direct).toFixed(1)} MiB/s`);
    console.log(`bench: kubectl logs on the proxy in c1:    ${median(through).toFixed(1)} MiB/s`);
    console.log(`bench: ratio proxy/direct: ${(median(through) / median(direct)).toFixed(2)}; provider CPU ${cpu.toFixed(2)} s for ${((ROUNDS * bytes) / 1024 / 1024).toFixed(1)} MiB`);
  } finally {
    writeFileSync(file, original);
    await kubectl('c1', 'delete', 'pod', proxy, '-n', 'default', '--wait=false', '--ignore-not-found');
  }
}

main().catch((err) => {
  console.error(`bench: ${err instanceof Error ? err.message : err}`);
  process.exit(1);
});
