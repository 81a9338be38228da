import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { join } from 'node:path';
import { parsePrometheusText } from '../support/prometheus-text.js';
import { apply, connectNamespace, disconnectNamespace, electedDeployment, getJson, kubectl, liveProxies, milliCpu, sandbox, uniqueName, waitFor } from './support.js';

/** The APIService through which metrics-server serves a sandbox cluster's metrics API. */
const METRICS_API = 'v1beta1.metrics.k8s.io';

/** One GET on c1's provider kubelet API; resolves with the status and body. */
function kubeletGet(path: string, auth: { token: string } | 'apiserver', headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  const pki = join(sandbox.dir, 'pki');
  // As the apiserver calls kubelets: with its kubelet client certificate.
  const client = auth === 'apiserver' ? { cert: readFileSync(join(pki, 'kubelet-client.crt')), key: readFileSync(join(pki, 'kubelet-client.key')) } : {};
  return new Promise((res, rej) => {
    https
      .get(
        {
          host: '127.0.0.1',
          port: sandbox.ports('c1').kubelet,
          path,
          ca: readFileSync(join(pki, 'ca.crt')),
          ...client,
          headers: { ...headers, ...(auth === 'apiserver' ? {} : { Authorization: `Bearer ${auth.token}` }) },
        },
        (r) => {
          let body = '';
          r.on('data', (c) => (body += c));
          r.on('end', () => res({ status: r.statusCode ?? 0, body }));
        },
      )
      .on('error', rej);
  });
}

/**
 * What the apiserver's node proxy sends for `kubectl get --raw /api/v1/nodes/<node>/proxy<path>`.
 * The sandbox cannot go through it: its nodes are on 127.0.0.1, and the node proxy refuses
 * loopback addresses ("address not allowed").
 */
const viaNodeProxy = (node: string, path: string) => kubeletGet(path, 'apiserver', { 'X-Forwarded-Uri': `/api/v1/nodes/${node}/proxy${path}` });

/**
 * The resource metrics of virtual nodes, with c2's metrics API taken away (its APIService
 * deleted, as in a cluster without metrics-server, and put back afterwards): the routes, their
 * authorization and the node naming work, and a target without the metrics API is said once,
 * on the Target, while its virtual node keeps answering.
 */
describe('resource metrics of virtual nodes (a target without metrics-server)', function () {
  this.timeout(180_000);
  const ns = uniqueName('metrics');
  let c2Node = '';
  let metricsApi: any;

  before(async () => {
    metricsApi = await getJson('c2', 'apiservice', METRICS_API);
    await kubectl('c2', 'delete', 'apiservice', METRICS_API);
    ({ c2Node } = await connectNamespace(ns));
    await apply(
      'c1',
      `apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: ${ns}, annotations: {multicluster.admiralty.io/elect: ""}}\nspec:\n  nodeSelector: {topology.kubernetes.io/region: eu}\n  containers: [{name: app, image: nginx}]\n`,
    );
    await waitFor('proxy Running', 90_000, async () => (await getJson('c1', 'pod', 'web', '-n', ns)).status?.phase === 'Running');
  });
  after(async () => {
    await disconnectNamespace(ns);
    if (metricsApi) await apply('c2', JSON.stringify({ apiVersion: metricsApi.apiVersion, kind: metricsApi.kind, metadata: { name: METRICS_API }, spec: metricsApi.spec }));
  });

  it("points metrics-server at each virtual node's own path", async () => {
    const node = await getJson('c1', 'node', c2Node);
    expect(node.metadata.annotations['metrics.k8s.io/resource-metrics-path']).to.equal(`/metrics/resource/${c2Node}`);
  });

  it("serves /metrics/resource and /stats/summary as the apiserver's node proxy asks, without figures for a target that has no metrics API", async () => {
    const metrics = await viaNodeProxy(c2Node, '/metrics/resource');
    expect(metrics.status).to.equal(200);
    const { samples } = parsePrometheusText(metrics.body);
    expect(samples.filter((s) => s.name.startsWith('node_')).map((s) => [s.name, s.value])).to.deep.equal([
      ['node_cpu_usage_seconds_total', 0],
      ['node_memory_working_set_bytes', 0],
    ]);
    expect(samples.some((s) => s.labels.pod === 'web')).to.equal(false);
    const stats = await viaNodeProxy(c2Node, '/stats/summary');
    expect(stats.status).to.equal(200);
    const summary = JSON.parse(stats.body);
    expect(summary.node.nodeName).to.equal(c2Node);
    expect(summary.pods).to.deep.equal([]);
  });

  it('tells the Target once (MetricsUnavailable), however often it is scraped', async () => {
    // Three reads of the target (the usage is reused 5 s; the node's sample time says when it was read).
    const readAt = async () => parsePrometheusText((await viaNodeProxy(c2Node, '/metrics/resource')).body).samples.find((s) => s.name === 'node_cpu_usage_seconds_total')!.timestampMs;
    let last = await readAt();
    for (let i = 0; i < 2; i++) {
      const before = last;
      await waitFor('a fresh read of the target', 30_000, async () => (last = await readAt()) !== before);
    }
    let events: any[] = [];
    await waitFor('a MetricsUnavailable event on Target c2', 30_000, async () => {
      events = (await getJson('c1', 'events', '-n', ns, '--field-selector', 'involvedObject.kind=Target,involvedObject.name=c2,reason=MetricsUnavailable')).items;
      return events.length > 0;
    });
    expect(events).to.have.length(1);
    expect(events[0]).to.deep.include({ type: 'Warning', count: 1 });
    expect(events[0].message).to.include('metrics.k8s.io API is not served');
  });

  it('authorizes scrapers on nodes/metrics and nodes/stats of the node, as a kubelet does', async () => {
    const sa = 'scraper';
    await kubectl('c1', 'create', 'serviceaccount', sa, '-n', ns);
    // metrics-server's own rights on nodes: get nodes/metrics, not nodes/stats.
    await apply(
      'c1',
      [
        'apiVersion: rbac.authorization.k8s.io/v1',
        'kind: ClusterRole',
        `metadata: {name: ${ns}-scraper}`,
        'rules: [{apiGroups: [""], resources: [nodes/metrics], verbs: [get]}]',
        '---',
        'apiVersion: rbac.authorization.k8s.io/v1',
        'kind: ClusterRoleBinding',
        `metadata: {name: ${ns}-scraper}`,
        `roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ${ns}-scraper}`,
        `subjects: [{kind: ServiceAccount, name: ${sa}, namespace: ${ns}}]`,
      ].join('\n'),
    );
    try {
      const token = (await kubectl('c1', 'create', 'token', sa, '-n', ns)).trim();
      await waitFor('the scraper allowed on nodes/metrics', 30_000, async () => (await kubeletGet(`/metrics/resource/${c2Node}`, { token })).status === 200);
      const ok = await kubeletGet(`/metrics/resource/${c2Node}`, { token });
      expect(parsePrometheusText(ok.body).types.get('container_cpu_usage_seconds_total')).to.equal('counter');
      const denied = await kubeletGet('/stats/summary', { token }, { 'X-Forwarded-Uri': `/api/v1/nodes/${c2Node}/proxy/stats/summary` });
      expect(denied).to.deep.equal({ status: 403, body: `Forbidden (user=system:serviceaccount:${ns}:${sa}, verb=get, resource=nodes, subresource(s)=[stats])` });
      expect((await kubeletGet('/metrics/resource/c1-node-0', { token })).status).to.equal(404);
    } finally {
      await kubectl('c1', 'delete', 'clusterrole,clusterrolebinding', `${ns}-scraper`, '--ignore-not-found');
    }
  });
});

/** `kubectl top` of one pod or node: CPU in millicores and memory in MiB; undefined while metrics-server has no figures for it. */
async function top(cluster: string, kind: 'pod' | 'node', name: string, ...args: string[]): Promise<{ cpuMilli: number; memoryMi: number } | undefined> {
  const out = await kubectl(cluster, 'top', kind, name, '--no-headers', ...args).catch(() => '');
  // pod: NAME CPU MEMORY; node: NAME CPU CPU% MEMORY MEMORY%.
  const f = out.trim().split(/\s+/);
  const memory = f[kind === 'pod' ? 2 : 3];
  if (!memory?.endsWith('Mi')) return undefined;
  return { cpuMilli: milliCpu(f[1]), memoryMi: Number(memory.slice(0, -2)) };
}

/**
 * End to end through the real metrics-server that the sandbox runs in both clusters: kwok
 * simulates the delegates' usage in c2 (a ClusterResourceUsage of the test's namespace, and a
 * ResourceUsage for one delegate), c2's metrics-server scrapes kwok, c1's provider reads c2's
 * PodMetrics, c1's metrics-server scrapes the virtual node, and `kubectl top` and the HPA
 * controller of c1 read c1's metrics API.
 */
describe('kubectl top and HorizontalPodAutoscalers on offloaded pods (metrics-server in both clusters)', function () {
  this.timeout(180_000);
  const ns = uniqueName('top');
  const usage = `${ns}-usage`;
  let c1Node = '';
  let c2Node = '';
  /** Where c1's metrics-server log stood when this block began. */
  let logStart = 0;
  const msLog = () => readFileSync(join(sandbox.dir, 'logs', 'c1-metrics-server.log'));
  /** kwok's usage for the pods of `ns` in c2: `web` 150m and 20Mi, the containers `c` of Deployment `load` as given. */
  const setUsage = (loadCpu: string) =>
    apply(
      'c2',
      [
        'apiVersion: kwok.x-k8s.io/v1alpha1',
        'kind: ClusterResourceUsage',
        `metadata: {name: ${usage}}`,
        'spec:',
        `  selector: {matchNamespaces: [${ns}]}`,
        '  usages:',
        '  - usage: {cpu: {value: 150m}, memory: {value: 20Mi}}',
        '  - containers: [c]',
        `    usage: {cpu: {value: ${loadCpu}}, memory: {value: 10Mi}}`,
      ].join('\n'),
    );
  const delegateOf = async (proxy: string) => {
    const uid = (await getJson('c1', 'pod', proxy, '-n', ns)).metadata.uid;
    return (await getJson('c2', 'pods', '-n', ns, '-l', `multicluster.admiralty.io/parent-uid=${uid}`)).items[0]?.metadata.name as string | undefined;
  };

  before(async () => {
    logStart = msLog().length;
    ({ c1Node, c2Node } = await connectNamespace(ns));
    await setUsage('10m');
    const pod = (name: string) =>
      `apiVersion: v1\nkind: Pod\nmetadata: {name: ${name}, namespace: ${ns}, annotations: {multicluster.admiralty.io/elect: ""}}\nspec:\n  nodeSelector: {topology.kubernetes.io/region: eu}\n  containers: [{name: app, image: nginx, resources: {requests: {cpu: 100m}}}]\n`;
    await apply('c1', `${pod('web')}---\n${pod('api')}`);
    let api: string | undefined;
    await waitFor('delegate of api', 90_000, async () => (api = await delegateOf('api')) !== undefined);
    // A ResourceUsage of one pod comes before any ClusterResourceUsage in kwok.
    await apply('c2', `apiVersion: kwok.x-k8s.io/v1alpha1\nkind: ResourceUsage\nmetadata: {name: ${api}, namespace: ${ns}}\nspec:\n  usages: [{usage: {cpu: {value: 50m}, memory: {value: 10Mi}}}]\n`);
    await waitFor('proxies Running', 90_000, async () => (await getJson('c1', 'pods', '-n', ns)).items.filter((p: any) => p.status.phase === 'Running').length === 2);
  });
  after(async () => {
    await disconnectNamespace(ns);
    await kubectl('c2', 'delete', 'clusterresourceusage', usage, '--ignore-not-found');
  });

  it('kubectl top pod of a proxy in c1 prints what kwok simulates for its delegate in c2', async () => {
    const delegate = (await delegateOf('web'))!;
    let c1: Awaited<ReturnType<typeof top>>;
    // c2's metrics-server needs two scrapes for a rate, then c1's needs two of the virtual node.
    await waitFor('figures for web in c1', 120_000, async () => (c1 = await top('c1', 'pod', 'web', '-n', ns)) !== undefined);
    const c2 = await top('c2', 'pod', delegate, '-n', ns);
    console.log(`      top pod: c1 web ${JSON.stringify(c1)}, c2 ${delegate} ${JSON.stringify(c2)}`);
    // The simulated usage is constant, so any two scrapes agree (to the millicore: rates are
    // computed from counters sampled at slightly different times).
    expect(c2!.cpuMilli).to.be.closeTo(150, 1);
    expect(c1!.cpuMilli).to.be.closeTo(c2!.cpuMilli, 1);
    expect(c1!.memoryMi).to.equal(c2!.memoryMi).and.to.equal(20);
  });

  it('kubectl top node of the virtual node prints the sum over its proxies', async () => {
    let node: Awaited<ReturnType<typeof top>>;
    await waitFor(`figures for ${c2Node} with both pods`, 120_000, async () => (node = await top('c1', 'node', c2Node)) !== undefined && node.memoryMi === 30);
    const delegates = await Promise.all(['web', 'api'].map(async (p) => (await top('c2', 'pod', (await delegateOf(p))!, '-n', ns))!));
    console.log(`      top node ${c2Node}: ${JSON.stringify(node)}; delegates ${JSON.stringify(delegates)}`);
    expect(delegates.map((d) => d.cpuMilli)).to.satisfy((cpu: number[]) => Math.abs(cpu[0]! - 150) <= 1 && Math.abs(cpu[1]! - 50) <= 1);
    expect(node!.cpuMilli).to.be.closeTo(delegates[0]!.cpuMilli + delegates[1]!.cpuMilli, 2);
  });

  it('an autoscaling/v2 HPA on an elected Deployment scales out when its delegates use more CPU, and back in when they use less', async function () {
    this.timeout(420_000);
    await apply('c1', electedDeployment('load', ns, 1, '100m', { spec: { nodeSelector: { 'topology.kubernetes.io/region': 'eu' } } }));
    await apply(
      'c1',
      [
        'apiVersion: autoscaling/v2',
        'kind: HorizontalPodAutoscaler',
        `metadata: {name: load, namespace: ${ns}}`,
        'spec:',
        '  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: load}',
        '  minReplicas: 1',
        '  maxReplicas: 3',
        '  metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}}]',
        // Without the default 5 minutes of downscale stabilization.
        '  behavior: {scaleDown: {stabilizationWindowSeconds: 0}, scaleUp: {stabilizationWindowSeconds: 0}}',
      ].join('\n'),
    );
    const hpa = () => getJson('c1', 'hpa', 'load', '-n', ns);
    const utilization = (h: any): number | undefined => h.status?.currentMetrics?.[0]?.resource?.current?.averageUtilization;
    // 10m of 100m requested: 10%, under the target, one replica.
    await waitFor('the HPA reads a utilization', 150_000, async () => utilization(await hpa()) !== undefined);
    const low = await hpa();
    expect(utilization(low)).to.be.closeTo(10, 2);
    expect(low.status.desiredReplicas).to.equal(1);

    // 200m: 200%, four times the target, so as many replicas as allowed.
    await setUsage('200m');
    await waitFor('the Deployment scaled out to 3', 150_000, async () => (await getJson('c1', 'deployment', 'load', '-n', ns)).spec.replicas === 3);
    await waitFor('3 proxies Running, each with a delegate in c2', 90_000, async () => {
      const proxies = (await liveProxies(ns, 'load')).filter((p) => p.status.phase === 'Running');
      if (proxies.length !== 3) return false;
      return (await Promise.all(proxies.map((p) => delegateOf(p.metadata.name)))).every((d) => d !== undefined);
    });
    console.log(`      scaled out at ${utilization(await hpa())}% utilization`);

    // Back to 10m: the HPA waits for figures from every replica, then scales in.
    await setUsage('10m');
    await waitFor('the Deployment scaled back in to 1', 240_000, async () => (await getJson('c1', 'deployment', 'load', '-n', ns)).spec.replicas === 1);
    const events: string[] = (await getJson('c1', 'events', '-n', ns, '--field-selector', 'involvedObject.kind=HorizontalPodAutoscaler,reason=SuccessfulRescale')).items.map(
      (e: any) => e.message as string,
    );
    console.log(`      ${events.join('; ')}`);
    expect(events.some((m) => m.startsWith('New size: 3'))).to.equal(true);
    expect(events.some((m) => m.startsWith('New size: 1'))).to.equal(true);
  });

  it("leaves no scrape error of a virtual node in c1's metrics-server log", async () => {
    const defaults = await getJson('c1', 'targets', '-n', 'default');
    const nodes = [c1Node, c2Node, ...defaults.items.map((t: any) => t.status.virtualNodeName as string)];
    // The figures above prove it scraped them; klog prints `"Failed to scrape node" err=… node="<name>"`.
    const errors = msLog()
      .subarray(logStart)
      .toString('utf8')
      .split('\n')
      .filter((l) => l.includes('Failed to scrape node') && nodes.some((n) => l.includes(`node="${n}"`)));
    expect(errors).to.deep.equal([]);
  });
});
