import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { join } from 'node:path';
import { parsePrometheusText } from '../support/prometheus-text.js';
import { apply, connectNamespace, disconnectNamespace, getJson, kubectl, sandbox, uniqueName, waitFor } from './support.js';

/** One GET on c1's provider kubelet API with a bearer token; resolves with the status and body. */
function kubeletGet(path: string, token: string): Promise<{ status: number; body: string }> {
  return new Promise((res, rej) => {
    https
      .get(
        { host: '127.0.0.1', port: sandbox.ports('c1').kubelet, path, ca: readFileSync(join(sandbox.dir, 'pki', 'ca.crt')), headers: { Authorization: `Bearer ${token}` } },
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

  it('serves /metrics/resource and /stats/summary through the apiserver (nodes/<node>/proxy), without figures for a target that has no metrics API', async () => {
    const text = await kubectl('c1', 'get', '--raw', `/api/v1/nodes/${c2Node}/proxy/metrics/resource`);
    const { samples } = parsePrometheusText(text);
    expect(samples.filter((s) => s.name.startsWith('node_')).map((s) => [s.name, s.value])).to.deep.equal([
      ['node_cpu_usage_seconds_total', 0],
      ['node_memory_working_set_bytes', 0],
    ]);
    expect(samples.some((s) => s.labels.pod === 'web')).to.equal(false);
    const summary = JSON.parse(await kubectl('c1', 'get', '--raw', `/api/v1/nodes/${c2Node}/proxy/stats/summary`));
    expect(summary.node.nodeName).to.equal(c2Node);
    expect(summary.pods).to.deep.equal([]);
  });

  it("tells the Target once (MetricsUnavailable), however often it is scraped", async () => {
    for (let i = 0; i < 3; i++) await kubectl('c1', 'get', '--raw', `/api/v1/nodes/${c2Node}/proxy/metrics/resource`);
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
      await waitFor('the scraper allowed on nodes/metrics', 30_000, async () => (await kubeletGet(`/metrics/resource/${c2Node}`, token)).status === 200);
      const ok = await kubeletGet(`/metrics/resource/${c2Node}`, token);
      expect(parsePrometheusText(ok.body).types.get('container_cpu_usage_seconds_total')).to.equal('counter');
      const stats = await kubeletGet('/stats/summary', token);
      expect(stats).to.deep.equal({ status: 403, body: `Forbidden (user=system:serviceaccount:${ns}:${sa}, verb=get, resource=nodes, subresource(s)=[stats])` });
      expect((await kubeletGet('/metrics/resource/c1-node-0', token)).status).to.equal(404);
    } finally {
      await kubectl('c1', 'delete', 'clusterrole,clusterrolebinding', `${ns}-scraper`, '--ignore-not-found');
    }
  });
});
