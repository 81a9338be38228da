import { expect } from 'chai';
import {
  apply,
  connectNamespace,
  disconnectNamespace,
  electedDeployment,
  followedFree,
  freeCpu,
  getJson,
  kubectl,
  liveProxies,
  running,
  settleTeardowns,
  squeeze,
  uniqueName,
  waitFor,
} from './support.js';

const POLICY = 'multicluster.admiralty.io/placement-policy';

/** The policy annotation for a pod template. */
const policy = (name: string) => ({ annotations: { [POLICY]: name } });

/** How many pods asking for `milli` cpu a cluster's nodes have room for, by its own ClusterSummary. */
async function roomFor(cluster: string, milli: number): Promise<number> {
  return [...(await freeCpu(cluster)).values()].reduce((sum, free) => sum + Math.floor(free / milli), 0);
}

/**
 * Placement policies with the real proxy scheduler: the annotation
 * `multicluster.admiralty.io/placement-policy` (pod or namespace) and the Targets'
 * `spec.placement`. The sandbox's fake nodes have 32 cpu each (two per cluster), so pods of 10
 * cpu fill a cluster at six. Each test has its namespace and Targets `c1` (self) and `c2`.
 */
describe('placement policies', function () {
  this.timeout(240_000);
  let ns: string;
  let nodes: { c1Node: string; c2Node: string };

  beforeEach(async () => {
    // Earlier files' delegates still leaving c2 would free room in the middle of a test that counts it.
    await settleTeardowns();
    ns = uniqueName('policy');
    nodes = await connectNamespace(ns);
  });

  afterEach(async () => {
    await kubectl('c1', 'delete', 'deployments,pods', '-n', ns, '--all', '--wait=false');
    for (const cluster of ['c1', 'c2']) await kubectl(cluster, 'delete', 'pods', '-n', ns, '-l', 'role=hog', '--grace-period=0', '--force');
    await disconnectNamespace(ns);
  });

  it('spread takes the target with the most free cpu, pack the one with the least that fits; the pod wins over its namespace', async () => {
    // c2 keeps 12 cpu free per node (room for two pods of 10), c1 has its 64.
    await squeeze('c2', ns, 12_000);
    expect(await followedFree('c2', nodes.c2Node), "what c1's view of c2 offers").to.be.at.most(24_000);
    await followedFree('c1', nodes.c1Node);
    await kubectl('c1', 'annotate', 'namespace', ns, `${POLICY}=pack`);

    // The template says spread, over its namespace's pack: all three in c1, the roomier.
    await apply('c1', electedDeployment('wide', ns, 3, '10', policy('spread')));
    expect(Object.fromEntries(await running(ns, 'wide', 3))).to.deep.equal({ [nodes.c1Node]: 3 });
    await kubectl('c1', 'delete', 'deployment', 'wide', '-n', ns, '--wait=false');

    // No annotation on the template: the namespace's pack. c2 fills first (two fit), then c1.
    await apply('c1', electedDeployment('tight', ns, 4, '10'));
    const tight = await running(ns, 'tight', 4);
    const inC2 = tight.get(nodes.c2Node) ?? 0;
    expect(inC2, 'pods in c2, the fuller').to.be.at.least(1);
    expect(inC2 + (tight.get(nodes.c1Node) ?? 0)).to.equal(4);
    // c1 got a pod only because c2 could not take it.
    if (inC2 < 4) await waitFor('c2 full', 15_000, async () => (await roomFor('c2', 10_000)) === 0);

    // An unusable value: placed by spread all the same, and said on the pod.
    await apply('c1', electedDeployment('odd', ns, 1, '100m', policy('fill-first')));
    await running(ns, 'odd', 1);
    const [odd] = await liveProxies(ns, 'odd');
    const events = await getJson('c1', 'events', '-n', ns, '--field-selector', `involvedObject.name=${odd.metadata.name},reason=InvalidPlacementPolicy`);
    expect(events.items.map((e: any) => `${e.type}: ${e.message}`)).to.deep.equal([`Warning: ${POLICY} "fill-first" on the pod is not one of spread, pack, burst: placed by spread`]);
  });

  it('burst fills the priority-0 target first and sends only the overflow to the next; scaled down, nothing moves', async () => {
    await kubectl('c1', 'patch', 'target', 'c2', '-n', ns, '--type=merge', '-p', '{"spec":{"placement":{"priority":1}}}');
    const target = await getJson('c1', 'target', 'c2', '-n', ns);
    expect(target.spec.placement).to.deep.equal({ weight: 1, priority: 1 });
    expect((await getJson('c1', 'target', 'c1', '-n', ns)).spec.placement, 'defaulted by the CRD').to.deep.equal({ weight: 1, priority: 0 });
    // Count c1's room only once c1's view of itself has caught up: the last test's delegates may
    // have left c1 after its summary said so, and before the virtual node did.
    await followedFree('c1', nodes.c1Node);
    const room = await roomFor('c1', 10_000);
    const replicas = room + 2;
    await apply('c1', electedDeployment('bursty', ns, replicas, '10', policy('burst')));
    const where = await running(ns, 'bursty', replicas, 120_000);
    const inC1 = where.get(nodes.c1Node) ?? 0;
    const inC2 = where.get(nodes.c2Node) ?? 0;
    expect(inC1 + inC2).to.equal(replicas);
    // Everything c1 had room for went to c1 (more if other tests' pods left meanwhile) ...
    expect(inC1).to.be.at.least(room);
    // ... and c2 got a pod only because c1 could not take it.
    if (inC2 > 0) await waitFor('c1 full', 15_000, async () => (await roomFor('c1', 10_000)) === 0);

    const before = new Map((await liveProxies(ns, 'bursty')).map((p) => [p.metadata.uid, p.spec.nodeName]));
    await kubectl('c1', 'scale', 'deployment', 'bursty', '-n', ns, '--replicas=2');
    await waitFor('2 pods left', 60_000, async () => (await getJson('c1', 'pods', '-n', ns, '-l', 'app=bursty')).items.length === 2);
    for (const p of await liveProxies(ns, 'bursty')) {
      expect(before.get(p.metadata.uid), `${p.metadata.name} is one of the pods placed before`).to.equal(p.spec.nodeName);
    }
  });

  it('weights 3:1 give about three pods in four to the first target', async () => {
    await kubectl('c1', 'patch', 'target', 'c1', '-n', ns, '--type=merge', '-p', '{"spec":{"placement":{"weight":3}}}');
    await apply('c1', electedDeployment('shares', ns, 40, '100m'));
    const where = await running(ns, 'shares', 40, 120_000);
    // Smooth weighted round robin gives 30:10 when every choice is seen before the next; a
    // refused bind or a tie kube-scheduler breaks at random may move a few.
    expect(where.get(nodes.c1Node) ?? 0).to.be.within(27, 33);
    expect((where.get(nodes.c1Node) ?? 0) + (where.get(nodes.c2Node) ?? 0)).to.equal(40);
  });
});
