import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { reuseConnections } from '../../provider/clusters/connection-reuse.js';
import { connectNamespace, disconnectNamespace, getJson, kubeConfigFor, kubectl, settleTeardowns, uniqueName, waitFor } from '../e2e/support.js';
import { account, record } from './report.js';
import { Tarpit } from './tarpit.js';

const PODS = Number(process.env.RELIABILITY_TARPIT_PODS ?? 60);

function electedPod(name: string, ns: string): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: ns, labels: { app: 'flow' }, annotations: { 'multicluster.admiralty.io/elect': '' } },
    spec: { containers: [{ name: 'c', image: 'busybox', resources: { requests: { cpu: '10m' } } }] },
  };
}

/**
 * Creates `n` elected pods and resolves with the seconds until all are Running with one delegate
 * each. Through one API client over kept-alive connections: a kubectl process per pod cost
 * about 0.3 CPU s each, most of the flow's time on two cores, and moved the ratio from 0.65 to
 * 2.21 between runs of the same build.
 */
async function flow(ns: string, prefix: string, n: number): Promise<number> {
  const core = reuseConnections(kubeConfigFor('c1')).makeApiClient(CoreV1Api);
  const t0 = Date.now();
  await Promise.all(Array.from({ length: n }, (_, i) => core.createNamespacedPod({ namespace: ns, body: electedPod(`${prefix}-${i}`, ns) })));
  await waitFor(`${n} pods Running`, 240_000, async () => (await account(ns)).running === n);
  return (Date.now() - t0) / 1000;
}

/**
 * A "tarpit" target beside c2: a Target whose server accepts connections and never answers.
 * The pods of the healthy targets keep flowing at their usual pace: the same burst takes about
 * as long with the tarpit as without it.
 */
describe('reliability: a tarpit target beside c2', function () {
  const ns = uniqueName('rel-tarpit');
  const tarpit = new Tarpit();
  before(async () => {
    await connectNamespace(ns);
    await tarpit.listen();
  });
  after(async () => {
    tarpit.close();
    await kubectl('c1', 'delete', 'pods', '--all', '-n', ns, '--wait=false');
    // Wholly, before the next scenario stops something a background teardown would need.
    await disconnectNamespace(ns);
    await settleTeardowns();
  });

  it("keeps c1's and c2's pods flowing at their usual pace", async () => {
    const baselineS = await flow(ns, 'before', PODS);
    await kubectl('c1', 'delete', 'pods', '--all', '-n', ns, '--wait=false');
    await waitFor('the first burst gone', 180_000, async () => (await account(ns)).proxies === 0 && (await getJson('c2', 'pods', '-n', ns)).items.length === 0);

    await tarpit.addTarget(ns);
    await waitFor('the tarpit dialled', 60_000, async () => tarpit.held.length > 0);

    const withTarpitS = await flow(ns, 'after', PODS);
    const last = await account(ns);
    const ratio = withTarpitS / baselineS;
    record({
      scenario: 'tarpit target beside c2',
      load: `${PODS} elected pods, twice`,
      faults: 'a Target whose server accepts and never answers',
      outcome: `all Running: ${baselineS.toFixed(1)} s without, ${withTarpitS.toFixed(1)} s with (ratio ${ratio.toFixed(2)})`,
      lost: last.lost.length,
      duplicates: last.duplicated.length + last.orphans.length,
    });
    console.log(`      tarpit: ${PODS} pods Running in ${baselineS.toFixed(1)} s without, ${withTarpitS.toFixed(1)} s with (ratio ${ratio.toFixed(2)})`);
    expect(last).to.deep.include({ proxies: PODS, running: PODS, lost: [], duplicated: [], orphans: [] });
  });
});
