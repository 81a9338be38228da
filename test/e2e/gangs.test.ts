import { expect } from 'chai';
import { apply, connectNamespace, disconnectNamespace, freeCpu, getJson, kubectl, sandbox, squeeze, uniqueName, waitFor } from './support.js';

/**
 * Gangs across clusters (issue 56): elected Jobs whose pods name a PodGroup with
 * `schedulingPolicy.gang.minCount: 8` are placed all or nothing by the extender, over the
 * sandbox's Kubernetes gang scheduling alpha (on in the e2e suite; SANDBOX_GANGS=0 turns it off,
 * and these tests are then skipped). Room is set with hog pods that keep a known amount of cpu
 * free on each real node (`squeeze`): each node of 32 cpu keeps 24 free, so two pods of 12 cpu
 * fit on a node and four in a cluster.
 */
describe('gangs: PodGroups placed all or nothing across targets', function () {
  let ns = '';
  let nodes: { c1Node: string; c2Node: string };

  before(function () {
    if (!sandbox.state()?.gangs) {
      console.log('    skipped: this sandbox runs without gang scheduling; start it with `sandbox up --gangs`, or run the suite without SANDBOX_GANGS=0');
      this.skip();
    }
  });

  beforeEach(async () => {
    ns = uniqueName('gangs');
    nodes = await connectNamespace(ns);
  });

  afterEach(async () => {
    await kubectl('c2', 'delete', 'pods', '-n', ns, '-l', 'role=hog', '--wait=false', '--ignore-not-found').catch(() => '');
    await kubectl('c1', 'delete', 'pods', '-n', ns, '-l', 'role=hog', '--wait=false', '--ignore-not-found').catch(() => '');
    await disconnectNamespace(ns);
  });

  /** A PodGroup of 8 (kept in one target when `oneTarget`) and an elected Job of 8 pods of `cpu` in it. */
  async function gangJob(name: string, cpu: string, oneTarget: boolean): Promise<void> {
    const constraints = oneTarget ? `\n  schedulingConstraints: {topology: [{key: multicluster.admiralty.io/target-name}]}` : '';
    await apply(
      'c1',
      `apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata: {name: ${name}, namespace: ${ns}}
spec:
  schedulingPolicy: {gang: {minCount: 8}}${constraints}
---
apiVersion: batch/v1
kind: Job
metadata: {name: ${name}, namespace: ${ns}}
spec:
  parallelism: 8
  completions: 8
  template:
    metadata: {labels: {app: ${name}}, annotations: {multicluster.admiralty.io/elect: ""}}
    spec:
      schedulingGroup: {podGroupName: ${name}}
      restartPolicy: Never
      terminationGracePeriodSeconds: 0
      containers: [{name: main, image: busybox, resources: {requests: {cpu: "${cpu}"}}}]
`,
    );
  }

  /** The Job's proxies in c1. */
  const proxies = async (name: string): Promise<any[]> => (await getJson('c1', 'pods', '-n', ns, '-l', `app=${name}`)).items;
  /** Our delegates of the Job in a cluster (c1 is a target of itself too). */
  const delegates = async (cluster: string, name: string): Promise<any[]> =>
    (await getJson(cluster, 'pods', '-n', ns, '-l', `multicluster.admiralty.io/app=${name}`)).items.filter((p: any) => p.metadata.labels?.['multicluster.admiralty.io/parent-uid']);

  /** Waits until the Job's 8 pods succeeded; resolves with how many proxies ran on each virtual node. */
  async function succeeded(name: string, timeoutMs = 120_000): Promise<Map<string, number>> {
    await waitFor(`Job ${name} 8 of 8 succeeded`, timeoutMs, async () => (await getJson('c1', 'job', name, '-n', ns)).status?.succeeded === 8);
    const where = new Map<string, number>();
    for (const p of await proxies(name)) where.set(p.spec.nodeName, (where.get(p.spec.nodeName) ?? 0) + 1);
    console.log(`      ${name}: ${[...where].map(([n, k]) => `${k} on ${n}`).join(', ')}`);
    return where;
  }

  it('a gang of 8 kept in one target runs all 8 in c2 when only c2 has room for 8 (c1 for none), and no delegate in c1', async () => {
    await squeeze('c1', ns, 1000);
    await squeeze('c2', ns, 28_000);
    await gangJob('one', '7', true);
    const where = await succeeded('one');
    expect(Object.fromEntries(where)).to.deep.equal({ [nodes.c2Node]: 8 });
    expect(await delegates('c1', 'one')).to.have.length(0);
  });

  it('a gang of 8 kept in one target, when c1 and c2 each have room for 4 only, binds no proxy, creates no delegate, and each proxy and the PodGroup say why', async () => {
    await squeeze('c1', ns, 24_000);
    await squeeze('c2', ns, 24_000);
    await gangJob('whole', '12', true);
    const reason = 'no single target has room for 8';
    await waitFor('every proxy of the gang to say why it waits', 60_000, async () => {
      const pods = await proxies('whole');
      return pods.length === 8 && pods.every((p: any) => p.status?.conditions?.find((c: any) => c.type === 'PodScheduled')?.message?.includes(reason));
    });
    const pods = await proxies('whole');
    console.log(`      ${pods[0].status.conditions.find((c: any) => c.type === 'PodScheduled').message}`);
    // The reason is on every proxy: the extender has refused each at least once, and kept on
    // refusing (a plan would have bound them in that time).
    expect(pods.filter((p: any) => p.spec.nodeName)).to.have.length(0);
    expect(await delegates('c1', 'whole')).to.have.length(0);
    expect(await delegates('c2', 'whole')).to.have.length(0);
    const events = (await getJson('c1', 'events', '-n', ns, '--field-selector', 'involvedObject.kind=PodGroup,involvedObject.name=whole')).items;
    expect(
      events.map((e: any) => e.reason),
      'the PodGroup says why it waits',
    ).to.include('GangWaiting');
  });

  it('a gang of 8 free to span targets, when c1 and c2 each have room for 4 only, runs 4 in c1 and 4 in c2, each share a PodGroup of 4 in its target, gone with the Job', async () => {
    await squeeze('c1', ns, 24_000);
    await squeeze('c2', ns, 24_000);
    await gangJob('span', '12', false);
    const where = await succeeded('span');
    expect(Object.fromEntries(where)).to.deep.equal({ [nodes.c1Node]: 4, [nodes.c2Node]: 4 });
    for (const cluster of ['c1', 'c2']) {
      const groups = (await getJson(cluster, 'podgroups', '-n', ns)).items.filter((g: any) => g.metadata.labels?.['multicluster.admiralty.io/parent-cluster-name']);
      expect(
        groups.map((g: any) => g.spec.schedulingPolicy.gang.minCount),
        `our PodGroups in ${cluster}`,
      ).to.deep.equal([4]);
      const members = (await delegates(cluster, 'span')).map((p: any) => p.spec.schedulingGroup?.podGroupName);
      expect(members, `the delegates in ${cluster} name it`).to.deep.equal(Array(4).fill(groups[0].metadata.name));
    }
    // Its delegates own it: the Job deleted, the targets' garbage collectors take it with them.
    await kubectl('c1', 'delete', 'job', 'span', '-n', ns, '--wait=false');
    await waitFor("our PodGroups gone from c1 and c2 with the Job's delegates", 90_000, async () => {
      for (const cluster of ['c1', 'c2']) {
        const left = (await getJson(cluster, 'podgroups', '-n', ns)).items.filter((g: any) => g.metadata.labels?.['multicluster.admiralty.io/parent-cluster-name']);
        if (left.length > 0) return false;
      }
      return true;
    });
  });

  it('a gang of 8 waiting for room in c2 holds c2, so a smaller pod created meanwhile is not bound there, and runs all 8 in c2 once the room frees', async () => {
    // Pods of 6 cpu: c2's nodes of 32 hold 5 each when free, so the gang of 8 (4 a node) has
    // room to spare there whatever other namespaces leave behind; with 14 cpu free a node they
    // hold 2 each, 4 in all, and c1 none.
    await squeeze('c1', ns, 1000);
    await squeeze('c2', ns, 14_000);
    await gangJob('held', '6', true);
    await waitFor('the gang to wait, holding c2', 60_000, async () =>
      (await proxies('held')).some((p: any) => p.status?.conditions?.find((c: any) => c.type === 'PodScheduled')?.message?.includes('it holds ')),
    );
    await apply(
      'c1',
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'loner', namespace: ns, annotations: { 'multicluster.admiralty.io/elect': '' } },
        spec: { terminationGracePeriodSeconds: 0, containers: [{ name: 'c', image: 'busybox', resources: { requests: { cpu: '6' } } }] },
      }),
    );
    await waitFor('the small pod to be refused', 60_000, async () =>
      (await getJson('c1', 'pod', 'loner', '-n', ns)).status?.conditions?.some((c: any) => c.type === 'PodScheduled' && c.status === 'False'),
    );
    expect((await getJson('c1', 'pod', 'loner', '-n', ns)).spec.nodeName, 'the small pod, while the gang holds c2').to.equal(undefined);
    // Gone for good before the gang's next try: deleted at once, and c2's summary shows the room.
    await kubectl('c2', 'delete', 'pods', '-n', ns, '-l', 'role=hog', '--grace-period=0', '--force', '--wait=true');
    await waitFor("c2's summary to show room for 4 of the gang on each node", 60_000, async () => [...(await freeCpu('c2')).values()].every((m) => m >= 24_000));
    const where = await succeeded('held', 180_000);
    expect(Object.fromEntries(where)).to.deep.equal({ [nodes.c2Node]: 8 });
  });
});
