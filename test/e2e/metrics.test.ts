import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { join } from 'node:path';
import { parsePrometheusText } from '../support/prometheus-text.js';
import { apply, connectNamespace, disconnectNamespace, getJson, kubectl, sandbox, uniqueName, waitFor } from './support.js';

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
 * The resource metrics of virtual nodes, in a sandbox whose clusters run no metrics-server: the
 * routes, their authorization and the node naming work, and a target without the metrics API
 * is said once, on the Target, while its virtual node keeps answering.
 */
describe('resource metrics of virtual nodes (targets without metrics-server)', function () {
  this.timeout(180_000);
  const ns = uniqueName('metrics');
  let c2Node = '';

  before(async () => {
    ({ c2Node } = await connectNamespace(ns));
    await apply(
      'c1',
      `apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: ${ns}, annotations: {multicluster.admiralty.io/elect: ""}}\nspec:\n  nodeSelector: {topology.kubernetes.io/region: eu}\n  containers: [{name: app, image: nginx}]\n`,
    );
    await waitFor('proxy Running', 90_000, async () => (await getJson('c1', 'pod', 'web', '-n', ns)).status?.phase === 'Running');
  });
  after(async () => {
    await disconnectNamespace(ns);
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

  it("tells the Target once (MetricsUnavailable), however often it is scraped", async () => {
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

  it("authorizes scrapers on nodes/metrics and nodes/stats of the node, as a kubelet does", async () => {
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
