import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { connectNamespace, disconnectNamespace, sandbox, settleTeardowns, waitFor } from '../e2e/support.js';

/** GET on 127.0.0.1: the status code, or 0 when nothing answers. */
export async function status(port: number, path: string): Promise<number> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(1000) });
    await res.text();
    return res.status;
  } catch {
    return 0;
  }
}

/** The metrics (probes) port of one of c1's provider replicas. */
export const metricsPort = (replica: number): number => sandbox.providerPorts('c1', replica).metrics;

/** Waits until exactly one of c1's provider replicas leads; returns it. */
export async function theLeader(timeoutMs = 30_000): Promise<number> {
  const replicas = Array.from({ length: sandbox.providerReplicas('c1') }, (_, r) => r);
  let leader = -1;
  await waitFor('one replica leads', timeoutMs, async () => {
    const codes = await Promise.all(replicas.map((r) => status(metricsPort(r), '/leaderz')));
    leader = codes.indexOf(200);
    return codes.filter((c) => c === 200).length === 1;
  });
  return leader;
}

/** Lines of c1's apiserver log that say it could not call the webhook (refused, reset, timed out). */
export function failedWebhookCalls(): string[] {
  const log = join(sandbox.dir, 'logs', 'c1-kube-apiserver.log');
  if (!existsSync(log)) return [];
  return readFileSync(log, 'utf8')
    .split('\n')
    .filter((l) => l.includes('failed calling webhook'));
}

/**
 * An elected pod of the bursts, labelled app=burst; with `target`, one that only that Target's
 * virtual node may take (a virtual-node constraint on its target-name label).
 */
export function electedPod(ns: string, name: string, target?: string): string {
  const pin = target ? `, multicluster.admiralty.io/proxy-pod-scheduling-constraints: '{"nodeSelector":{"multicluster.admiralty.io/target-name":"${target}"}}'` : '';
  return `apiVersion: v1
kind: Pod
metadata:
  name: ${name}
  namespace: ${ns}
  labels: {app: burst}
  annotations: {multicluster.admiralty.io/elect: ""${pin}}
spec:
  containers:
  - name: c
    image: busybox
    resources: {requests: {cpu: 10m, memory: 8Mi}}
`;
}

/**
 * Mocha hooks of a scenario on two provider replicas: checks the sandbox runs two, connects
 * namespace `ns` first, and tears it down wholly after, before the next scenario stops
 * something a background teardown would need.
 */
export function withTwoReplicasAnd(ns: string): void {
  before(async () => {
    const replicas = sandbox.providerReplicas('c1');
    if (replicas < 2)
      throw new Error(`the sandbox runs ${replicas} provider replica in c1; this scenario needs 2: run it with npm run test:reliability, or start the sandbox with --provider-replicas 2`);
    await connectNamespace(ns);
  });
  after(async () => {
    await disconnectNamespace(ns);
    await settleTeardowns();
  });
}
