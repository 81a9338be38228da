import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SHIPPED_NODE_OPTIONS } from '../../provider/core/heap-growth.js';
import { REPO_ROOT, shippedCli } from '../sandbox/sandbox.js';
import { apply, asPodContainer, chartObjects, connectNamespace, disconnectNamespace, getJson, kubectl, sandbox, uniqueName, waitFor } from './support.js';
import { must } from '../support/must.js';

/** The image's own environment: the ENV lines of the Dockerfile's last stage, which the container's env overrides. */
function imageEnv(): Record<string, string> {
  const lines = readFileSync(join(REPO_ROOT, 'manifests', 'image', 'Dockerfile'), 'utf8')
    .split('\n')
    .map((l) => l.trim());
  const runtime = lines.slice(lines.map((l) => l.startsWith('FROM ')).lastIndexOf(true));
  const env: Record<string, string> = {};
  for (const line of runtime) {
    const m = /^ENV (\w+)=(\S+)$/.exec(line);
    if (m) env[m[1]!] = m[2]!;
  }
  return env;
}

/**
 * The provider as the chart's Deployment runs it: the compiled command with the rendered
 * arguments and environment (over the image's), in-cluster credentials in the kubelet's files (a TokenRequest
 * token of ServiceAccount admiralty, the cluster CA, the namespace), `KUBERNETES_SERVICE_HOST`
 * and `_PORT` pointing at c1's apiserver. It stands in for the sandbox's own c1 provider, which
 * is stopped meanwhile. What differs from a pod, because the sandbox has no pod network nor
 * Service: the servers bind 127.0.0.1 and the sandbox's ports instead of 0.0.0.0:10250, 9443
 * and 8080; the apiserver calls the webhook at the sandbox's URL (`--webhook-url`); and target
 * c2 listens on loopback (`--allow-loopback-targets`).
 */
describe('in cluster: the provider as the chart deploys it', function () {
  this.timeout(180_000);
  let dir: string;
  let child: ChildProcess | undefined;
  let exited: Promise<number | null>;
  const ns = uniqueName('in-cluster');

  before(async function () {
    dir = mkdtempSync(join(tmpdir(), 'in-cluster-'));
    await sandbox.stop('c1', 'provider');
  });

  after(async function () {
    if (child?.exitCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
    await sandbox.start('c1', 'provider');
    // The tests after this one expect the sandbox's provider to lead again (ours handed the Lease back).
    await waitFor("the sandbox's c1 provider leading", 60_000, async () => (await fetch(`http://127.0.0.1:${sandbox.ports('c1').metrics}/leaderz`).catch(() => undefined))?.status === 200);
    await disconnectNamespace(ns);
  });

  it('loads in-cluster credentials, becomes Ready and leader, and runs a pod through target c2', async () => {
    const objs = await chartObjects('clusterName=c1');
    const deployment = objs.find((o) => o.kind === 'Deployment' && o.metadata.name === 'admiralty');
    const container = deployment.spec.template.spec.containers[0];
    const configMaps = new Map<string, Record<string, string>>(objs.filter((o) => o.kind === 'ConfigMap').map((o) => [o.metadata.name, o.data]));

    // The container's environment, resolved as the kubelet does.
    const fields: Record<string, string> = { 'metadata.namespace': 'admiralty', 'metadata.name': 'admiralty-in-cluster-test', 'status.podIP': '127.0.0.1' };
    const env: Record<string, string> = {};
    for (const e of container.env as { name: string; value?: string; valueFrom?: { configMapKeyRef?: { name: string; key: string }; fieldRef?: { fieldPath: string } } }[]) {
      const v = e.value ?? (e.valueFrom?.configMapKeyRef ? configMaps.get(e.valueFrom.configMapKeyRef.name)?.[e.valueFrom.configMapKeyRef.key] : fields[e.valueFrom?.fieldRef?.fieldPath ?? '']);
      if (v === undefined) throw new Error(`env ${e.name}: cannot resolve ${JSON.stringify(e)}`);
      env[e.name] = v;
    }
    expect(env).to.include({ CLUSTER_NAME: 'c1', POD_NAMESPACE: 'admiralty', POD_IP: '127.0.0.1' });
    const image = imageEnv();
    expect(image).to.include({ NODE_ENV: 'production', NODE_OPTIONS: SHIPPED_NODE_OPTIONS });

    // The arguments, $(VAR) expanded, and the sandbox's stand-ins for what a pod network gives.
    const ports = sandbox.ports('c1');
    const standIns: Record<string, string> = {
      '--kubelet-bind-address=0.0.0.0': '--kubelet-bind-address=127.0.0.1',
      '--kubelet-port=10250': `--kubelet-port=${ports.kubelet}`,
      '--webhook-bind-address=0.0.0.0': '--webhook-bind-address=127.0.0.1',
      '--webhook-port=9443': `--webhook-port=${ports.webhook}`,
      '--metrics-bind-address=0.0.0.0': '--metrics-bind-address=127.0.0.1',
      '--metrics-port=8080': `--metrics-port=${ports.metrics}`,
    };
    const rendered = (container.args as string[]).map((a) => a.replace(/\$\((\w+)\)/g, (_, v: string) => must(env[v], `the value of $(${v})`)));
    for (const a of Object.keys(standIns)) expect(rendered, a).to.include(a);
    const args = [...rendered.map((a) => standIns[a] ?? a), `--webhook-url=https://127.0.0.1:${ports.webhook}/mutate`, '--allow-loopback-targets'];

    const token = (await kubectl('c1', 'create', 'token', 'admiralty', '-n', 'admiralty', '--duration=1h')).trim();
    const cli = shippedCli();
    const pod = asPodContainer({ dir, token, ca: readFileSync(join(sandbox.dir, 'pki', 'ca.crt')), namespace: 'admiralty', apiserverPort: ports.apiserver, env: { ...image, ...env } }, cli.command, [
      ...cli.args,
      ...args,
    ]);
    const log = createWriteStream(join(sandbox.dir, 'logs', 'c1-provider-in-cluster.log'));
    child = spawn(pod.file, pod.args, { cwd: REPO_ROOT, env: pod.env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.pipe(log);
    child.stderr!.pipe(log);
    exited = new Promise((res) => child!.on('exit', (code) => res(code)));
    // Every wait gives up at once if the provider has exited.
    const running = () => {
      if (child!.exitCode !== null) throw new Error(`the provider exited (${child!.exitCode}); see ${join(sandbox.dir, 'logs', 'c1-provider-in-cluster.log')}`);
    };
    const answers200 = async (path: string) => {
      running();
      return (await fetch(`http://127.0.0.1:${ports.metrics}${path}`).catch(() => undefined))?.status === 200;
    };
    await waitFor('the in-cluster provider Ready', 60_000, () => answers200('/readyz'));
    await waitFor('the in-cluster provider leading', 60_000, () => answers200('/leaderz'));
    // It holds the Lease under the name from its environment (POD_NAME), with the only
    // credentials it has: the mounted token.
    const lease = await getJson('c1', 'lease', 'admiralty-provider', '-n', 'admiralty');
    expect(lease.spec.holderIdentity).to.match(/^admiralty-in-cluster-test-\d+$/);

    // A pod that only c2's nodes (region eu) can take.
    await connectNamespace(ns);
    await apply(
      'c1',
      `apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ${ns}, annotations: {multicluster.admiralty.io/elect: ""}}\nspec:\n  nodeSelector: {topology.kubernetes.io/region: eu}\n  containers: [{name: c, image: nginx}]\n`,
    );
    await waitFor('the proxy Running', 90_000, async () => {
      running();
      return (await getJson('c1', 'pod', 'p', '-n', ns)).status?.phase === 'Running';
    });
    const proxy = await getJson('c1', 'pod', 'p', '-n', ns);
    const delegates = await getJson('c2', 'pods', '-n', ns, '-l', `multicluster.admiralty.io/parent-uid=${proxy.metadata.uid}`);
    expect(delegates.items).to.have.length(1);
    expect(delegates.items[0].status.phase).to.equal('Running');
    const c2Node = (await getJson('c1', 'target', 'c2', '-n', ns)).status.virtualNodeName;
    expect(proxy.spec.nodeName).to.equal(c2Node);
  });
});
