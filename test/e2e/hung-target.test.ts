import { expect } from 'chai';
import { FLAGS } from '../../provider/core/config.js';
import { metricByLabels } from '../bench/offload-report.js';
import { apply, connectNamespace, disconnectNamespace, getJson, kubectl, readyOf, sandbox, uniqueName, waitFor } from './support.js';

/** The sandbox providers' deadline of one API call (`--api-request-timeout-seconds`, default). */
const REQUEST_DEADLINE_MS = 30_000;
/** The sandbox providers' `--workers` (default): delegation may give all but one to one target. */
const WORKERS = Number(FLAGS.workers.default);

/** An elected pod that only the given target may run (virtual-node constraint). */
function pinnedPod(name: string, ns: string, target: string, labels: Record<string, string> = { pinned: target }): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: ns,
      labels,
      annotations: {
        'multicluster.admiralty.io/elect': '',
        'multicluster.admiralty.io/proxy-pod-scheduling-constraints': JSON.stringify({ nodeSelector: { 'multicluster.admiralty.io/target-name': target } }),
      },
    },
    spec: { containers: [{ name: 'c', image: 'busybox', resources: { requests: { cpu: '10m' } } }] },
  });
}

/** Services of the source that select a proxy in c2 that stays there: more than a controller's workers. */
const SERVICES = WORKERS + 4;
function service(name: string, ns: string, selector: Record<string, string>): object {
  return { apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: ns, labels: { group: 'hung' } }, spec: { selector, ports: [{ port: 80 }] } };
}

/**
 * Reconciles of `controller` by c1's provider that ended after more than 10 s (its histogram's
 * last bucket): a reconcile that waits on a call to the hung c2 ends only at that call's
 * deadline, so while this count has not moved, every such call is still hanging.
 */
async function slowReconciles(controller: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${sandbox.providerPorts('c1', 0).metrics}/metrics`)).text();
  const buckets = metricByLabels(text, 'admiralty_controller_reconcile_duration_seconds_bucket', ['controller', 'le'], ([c, le]) => `${c} ${le}`);
  return (buckets[`${controller} +Inf`] ?? 0) - (buckets[`${controller} 10`] ?? 0);
}

const phases = async (ns: string, selector: string): Promise<string[]> => (await getJson('c1', 'pods', '-n', ns, '-l', selector)).items.map((p: any) => p.status?.phase ?? '');

/**
 * A target that hangs (its apiserver frozen: connections are accepted and never answered, a
 * "tarpit") must not stall the work of the others. Deleting proxies that run in c2 makes the
 * delegation workers call c2, and each call hangs until its deadline; meanwhile new pods for c1
 * must still get their delegates' status, because one target holds at most
 * `--workers-per-target` of the workers. Once a probe has found c2 out of reach, the services
 * controller passes it over, so Services whose copies in c2 need a change hold none of its
 * workers; the change reaches c2 once it is back.
 */
describe('a hung target', function () {
  this.timeout(240_000);
  const ns = uniqueName('hung');
  let frozen = false;
  let c2Node = '';

  before(async () => {
    ({ c2Node } = await connectNamespace(ns));
  });
  after(async () => {
    if (frozen) sandbox.thaw('c2', 'kube-apiserver');
    await kubectl('c1', 'delete', 'pods,services', '-n', ns, '--all', '--wait=false');
    await disconnectNamespace(ns);
  });

  it("keeps the other targets' pods and Services flowing while every call to it hangs", async () => {
    const inC2 = WORKERS + 2;
    for (let i = 0; i < inC2; i++) await apply('c1', pinnedPod(`c2-${i}`, ns, 'c2'));
    await waitFor(`${inC2} proxies Running in c2`, 90_000, async () => (await phases(ns, 'pinned=c2')).filter((p) => p === 'Running').length === inC2);

    // Not deleted below: while it runs in c2, the Services' copies must stay there.
    await apply('c1', pinnedPod('kept', ns, 'c2', { kept: 'c2' }));
    await apply('c1', JSON.stringify({ apiVersion: 'v1', kind: 'List', items: Array.from({ length: SERVICES }, (_, i) => service(`web-${i}`, ns, { kept: 'c2' })) }));
    const copiesIn = async (cluster: string) => (await getJson(cluster, 'services', '-n', ns, '-l', 'group=hung')).items;
    await waitFor(`${SERVICES} Service copies in c2`, 60_000, async () => (await copiesIn('c2')).length === SERVICES);

    sandbox.freeze('c2', 'kube-apiserver');
    frozen = true;
    // Each deletion needs the delegate deleted in c2: more hung reconciles than workers.
    await kubectl('c1', 'delete', 'pods', '-n', ns, '-l', 'pinned=c2', '--wait=false');
    const slowDelegations = await slowReconciles('delegation');
    for (let i = 0; i < 3; i++) await apply('c1', pinnedPod(`c1-${i}`, ns, 'c1'));

    // Running (the delegate's status copied back by a delegation worker) before any call to c2
    // could have reached its deadline and given its worker back.
    await waitFor(
      "c1's pods Running while c2 hangs",
      REQUEST_DEADLINE_MS - 5_000,
      async () => (await phases(ns, 'pinned=c1')).every((p) => p === 'Running') && (await phases(ns, 'pinned=c1')).length === 3,
    );
    expect(await slowReconciles('delegation'), 'delegation reconciles that ended after waiting on c2').to.equal(slowDelegations);
    expect((await phases(ns, 'pinned=c2')).length, "c2's proxies wait for their delegates' deletion").to.equal(inC2);

    // Once the provider's probe has found c2 out of reach, the services controller passes it
    // over: more changed Services than its workers must not hold a new one back until their
    // calls to c2 reach their deadline.
    await waitFor('c2 found out of reach', 60_000, async () => readyOf(await getJson('c1', 'node', c2Node)) !== 'True');
    await kubectl('c1', 'label', 'services', '-n', ns, '-l', 'group=hung', 'tier=changed');
    const slowServices = await slowReconciles('services');
    await apply('c1', JSON.stringify(service('fresh', ns, { pinned: 'c1' })));
    await waitFor(
      'the new Service rerouted while c2 hangs',
      REQUEST_DEADLINE_MS - 5_000,
      async () => JSON.stringify((await getJson('c1', 'service', 'fresh', '-n', ns)).spec.selector) !== JSON.stringify({ pinned: 'c1' }),
    );
    expect(await slowReconciles('services'), 'services reconciles that ended after waiting on c2').to.equal(slowServices);

    sandbox.thaw('c2', 'kube-apiserver');
    frozen = false;
    // Their keys come back once a probe finds c2 again: the copies there take the change.
    await waitFor('the changed Services reach c2', 60_000, async () => (await copiesIn('c2')).filter((c: any) => c.metadata.labels?.tier === 'changed').length === SERVICES);
    // Once c2 answers again, the deletions complete: nothing is left behind there.
    await kubectl('c1', 'delete', 'pod', 'kept', '-n', ns, '--wait=false');
    await waitFor("c2's proxies gone", 120_000, async () => (await phases(ns, 'pinned=c2')).length + (await phases(ns, 'kept=c2')).length === 0);
    expect((await getJson('c2', 'pods', '-n', ns, '-l', 'multicluster.admiralty.io/parent-cluster-name=c1')).items).to.deep.equal([]);
  });
});
