import { expect } from 'chai';
import { apply, connectNamespace, disconnectNamespace, getJson, kubectl, readyOf, sandbox, uniqueName, waitFor } from './support.js';

const COND = 'multicluster.admiralty.io/TargetReachable';
const PARENT_UID = 'multicluster.admiralty.io/parent-uid';

const reachable = (p: any) => p.status?.conditions?.find((c: any) => c.type === COND);
const live = (pods: any[]) => pods.filter((p) => !p.metadata.deletionTimestamp);

function workloads(ns: string): string {
  const container = `      containers: [{name: c, image: nginx, resources: {requests: {cpu: 10m}}}]\n`;
  return `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ${ns}}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      annotations: {multicluster.admiralty.io/elect: "", multicluster.admiralty.io/failover-after: 20s}
    spec:
${container}---
apiVersion: v1
kind: Pod
metadata: {name: bare, namespace: ${ns}, labels: {app: bare}, annotations: {multicluster.admiralty.io/elect: ""}}
spec:
  containers: [{name: c, image: nginx, resources: {requests: {cpu: 10m}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: bare-asking, namespace: ${ns}, labels: {app: bare}, annotations: {multicluster.admiralty.io/elect: "", multicluster.admiralty.io/failover-after: 20s}}
spec:
  containers: [{name: c, image: nginx, resources: {requests: {cpu: 10m}}}]
`;
}

/** Target outage policy: say it, fail over what asks for it, fence when the target is back. */
describe('target outage', function () {
  this.timeout(300_000);
  const ns = uniqueName('outage');
  let nodes: { c1Node: string; c2Node: string };
  let c2Down = false;

  before(async () => {
    nodes = await connectNamespace(ns);
  });
  after(async () => {
    // Whatever happened above, the next test files get c2 back.
    if (c2Down) await sandbox.start('c2', 'kube-apiserver');
    await waitFor("default/c2's virtual node Ready", 90_000, async () => readyOf(await getJson('c1', 'node', 'admiralty-namespace-default-c2')) === 'True');
    await disconnectNamespace(ns);
    // c2's controller-manager reconnects to its apiserver with a backoff: wait until it serves a
    // new namespace again (its default ServiceAccount), as the test files after this one expect.
    const probe = `${ns}-back`;
    await kubectl('c2', 'create', 'namespace', probe);
    await waitFor(
      "c2's controller-manager serving new namespaces",
      120_000,
      async () => (await kubectl('c2', 'get', 'serviceaccount', 'default', '-n', probe, '-o', 'name').catch(() => '')).trim() !== '',
    );
    await kubectl('c2', 'delete', 'namespace', probe, '--wait=false');
  });

  const proxies = async (selector: string) => (await getJson('c1', 'pods', '-n', ns, '-l', selector)).items as any[];
  const delegates = async (cluster: string) => (await getJson(cluster, 'pods', '-n', ns, '-l', 'multicluster.admiralty.io/parent-cluster-name=c1')).items as any[];

  it('marks the proxies of an unreachable c2, moves the replicas that ask to c1 (one deleted meanwhile too), keeps bare pods, and fences c2 when it is back', async () => {
    // Everything on c2 first: the namespace's Target c1 goes for a while.
    await kubectl('c1', 'delete', 'target', 'c1', '-n', ns);
    await waitFor(`${nodes.c1Node} gone`, 60_000, async () => !(await kubectl('c1', 'get', 'nodes', '-o', 'name')).includes(nodes.c1Node));
    await apply('c1', workloads(ns));
    await waitFor('3 replicas and 2 bare pods Running on c2', 120_000, async () => {
      const all = [...(await proxies('app=web')), ...(await proxies('app=bare'))];
      return all.length === 5 && all.every((p) => p.status?.phase === 'Running' && p.spec.nodeName === nodes.c2Node);
    });
    const before = await proxies('app=web');
    const beforeUids = new Set(before.map((p) => p.metadata.uid));
    await apply('c1', `apiVersion: multicluster.admiralty.io/v1alpha1\nkind: Target\nmetadata: {name: c1, namespace: ${ns}}\nspec: {self: true}\n`);
    await waitFor(`${nodes.c1Node} Ready again`, 60_000, async () => readyOf(await getJson('c1', 'node', nodes.c1Node).catch(() => undefined)) === 'True');

    const stoppedMs = Date.now();
    c2Down = true;
    await sandbox.stop('c2', 'kube-apiserver');
    await waitFor(`${nodes.c2Node} NotReady`, 60_000, async () => readyOf(await getJson('c1', 'node', nodes.c2Node)) === 'False');
    const notReadyMs = Date.now();
    // One replica deleted meanwhile, with its grace period: no kubelet will end it, its delegate
    // cannot be reached; the failover removes it with the others.
    const deletedMeanwhile = before[0].metadata.name;
    await kubectl('c1', 'delete', 'pod', deletedMeanwhile, '-n', ns, '--wait=false');
    await waitFor('the bare pods marked TargetReachable=False', 60_000, async () => (await proxies('app=bare')).every((p) => reachable(p)?.status === 'False'));
    const markedMs = Date.now();
    const bare = await proxies('app=bare');
    for (const p of bare) {
      expect(reachable(p)).to.include({ reason: 'TargetUnreachable' });
      expect(reachable(p).message).to.match(new RegExp(`^target ${ns}/c2 unreachable since \\d{4}-`));
    }

    await waitFor('3 new replicas Running on c1, the old proxies gone', 120_000, async () => {
      const web = await proxies('app=web');
      return web.length === 3 && web.every((p) => !beforeUids.has(p.metadata.uid) && p.status?.phase === 'Running' && p.spec.nodeName === nodes.c1Node);
    });
    const failedOverMs = Date.now();
    expect(await kubectl('c1', 'get', 'pod', deletedMeanwhile, '-n', ns, '--ignore-not-found', '-o', 'name'), 'the replica deleted during the outage').to.equal('');
    await waitFor('the bare pod that asks for failover says it cannot move', 30_000, async () => reachable(await getJson('c1', 'pod', 'bare-asking', '-n', ns))?.message?.includes('cannot fail over'));
    const stay = await getJson('c1', 'pod', 'bare', '-n', ns);
    expect(stay.spec.nodeName).to.equal(nodes.c2Node);
    expect(reachable(stay).message).to.include('stays bound to it');
    const reasons = (await getJson('c1', 'events', '-n', ns)).items.map((e: any) => `${e.involvedObject.name}:${e.reason}`);
    expect(reasons).to.include.members(['bare:TargetUnreachable', 'bare-asking:CannotFailOver']);
    expect(
      reasons.some((r: string) => r.endsWith(':FailingOver')),
      `FailingOver events in ${reasons.join(', ')}`,
    ).to.equal(true);
    // One condition write per proxy per transition: the bare pod's event was not repeated.
    const unreachableEvents = (await getJson('c1', 'events', '-n', ns, '--field-selector', 'involvedObject.name=bare,reason=TargetUnreachable')).items;
    expect(unreachableEvents.map((e: any) => e.count ?? 1)).to.deep.equal([1]);

    await sandbox.start('c2', 'kube-apiserver');
    c2Down = false;
    const backMs = Date.now();
    // Fencing: the delegates of the failed-over proxies go; the bare pods' stay.
    const bareUids = new Set(bare.map((p) => p.metadata.uid));
    await waitFor('only the bare pods’ delegates left in c2', 90_000, async () => {
      const d = await delegates('c2');
      return d.length === 2 && d.every((x) => bareUids.has(x.metadata.labels[PARENT_UID]));
    });
    const fencedMs = Date.now();
    await waitFor('the bare pods marked TargetReachable=True', 60_000, async () => (await proxies('app=bare')).every((p) => reachable(p)?.status === 'True'));
    const fenced = (await getJson('c1', 'events', '-n', ns, '--field-selector', 'involvedObject.name=c2,reason=DelegatesFenced')).items;
    expect(fenced, 'a DelegatesFenced event on Target c2').to.have.length.greaterThan(0);

    // Nothing lost, nothing doubled: every proxy Running with exactly one live delegate.
    const all = [...(await proxies('app=web')), ...(await proxies('app=bare'))];
    expect(all).to.have.length(5);
    for (const p of all) expect(p.status.phase, p.metadata.name).to.equal('Running');
    const ds = live([...(await delegates('c1')), ...(await delegates('c2'))]);
    expect(ds.map((d) => d.metadata.labels[PARENT_UID]).sort()).to.deep.equal(all.map((p) => p.metadata.uid).sort());

    console.log(
      `      outage figures: NotReady ${((notReadyMs - stoppedMs) / 1000).toFixed(1)} s, proxies marked ${((markedMs - stoppedMs) / 1000).toFixed(1)} s, ` +
        `replicas Running on c1 ${((failedOverMs - stoppedMs) / 1000).toFixed(1)} s after the stop; orphans gone from c2 ${((fencedMs - backMs) / 1000).toFixed(1)} s after its apiserver was ready again`,
    );
  });
});
