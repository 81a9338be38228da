import { expect } from 'chai';
import { apply, connectNamespace, disconnectNamespace, electedDeployment, followedFree, freeCpu, getJson, kubectl, running, settleTeardowns, squeeze, uniqueName, waitFor } from './support.js';

const REGION = 'topology.kubernetes.io/region';
const ZONE = 'topology.kubernetes.io/zone';
const CONSTRAINTS = 'multicluster.admiralty.io/proxy-pod-scheduling-constraints';
const POLICY = 'multicluster.admiralty.io/placement-policy';

/** A node-affinity preference of `weight` for nodes whose label `key` is one of `values`. */
const prefer = (weight: number, key: string, values: string[]) => ({ weight, preference: { matchExpressions: [{ key, operator: 'In', values }] } });

/** A pod template's affinity made of preferred node-affinity terms. */
const preferring = (...terms: ReturnType<typeof prefer>[]) => ({ affinity: { nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: terms } } });

/** How many pods asking for `milli` cpu a cluster's nodes have room for, by its own ClusterSummary. */
async function roomFor(cluster: string, milli: number): Promise<number> {
  return [...(await freeCpu(cluster)).values()].reduce((sum, free) => sum + Math.floor(free / milli), 0);
}

/**
 * Preferred node affinity across targets, with the real proxy scheduler. The sandbox's fake nodes
 * have 32 cpu each, two per cluster: c1's in region us (zones us-a, us-b), c2's in region eu
 * (zones eu-a, eu-b). Each test squeezes c2 to 12 cpu free per node, room for two pods of 10,
 * while c1 keeps its 64: under the default policy (`spread`, the most free cpu first) every pod
 * would go to c1, so a pod in c2 is there because of what it prefers, or because of its policy.
 */
describe('preferred node affinity across targets', function () {
  this.timeout(240_000);
  let ns: string;
  let nodes: { c1Node: string; c2Node: string };

  beforeEach(async () => {
    // Earlier files' delegates still leaving c2 would free room in the middle of a test that counts it.
    await settleTeardowns();
    ns = uniqueName('prefer');
    nodes = await connectNamespace(ns);
  });

  afterEach(async () => {
    await kubectl('c1', 'delete', 'deployments,pods', '-n', ns, '--all', '--wait=false');
    for (const cluster of ['c1', 'c2']) await kubectl(cluster, 'delete', 'pods', '-n', ns, '-l', 'role=hog', '--grace-period=0', '--force');
    await disconnectNamespace(ns);
  });

  /** Squeezes c2 to room for two pods of 10 cpu, waits until c1 sees it, and returns that room. */
  async function c2RoomForTwo(): Promise<number> {
    const labels = (await getJson('c2', 'nodes', '-l', 'type=kwok')).items.map((n: any) => n.metadata.labels[REGION]);
    expect(labels, "c2's real nodes' region").to.deep.equal(['eu', 'eu']);
    await squeeze('c2', ns, 12_000);
    expect(await followedFree('c2', nodes.c2Node), "what c1's view of c2 offers").to.be.at.most(24_000);
    await followedFree('c1', nodes.c1Node);
    const room = await roomFor('c2', 10_000);
    expect(room, 'pods of 10 cpu c2 has room for').to.equal(2);
    return room;
  }

  /**
   * Runs `replicas` pods of 10 cpu and checks that c2 took all it had room for and c1 only the
   * overflow: c1 got a pod only because c2 could not take it.
   */
  async function c2ThenOverflow(app: string, room: number, template: Parameters<typeof electedDeployment>[4]): Promise<void> {
    const replicas = room + 2;
    await apply('c1', electedDeployment(app, ns, replicas, '10', template));
    const where = await running(ns, app, replicas, 120_000);
    const inC2 = where.get(nodes.c2Node) ?? 0;
    const inC1 = where.get(nodes.c1Node) ?? 0;
    expect(inC1 + inC2, 'pods on the two virtual nodes').to.equal(replicas);
    expect(inC2, 'pods in c2, the preferred').to.be.at.least(room);
    expect(inC1, 'pods in c1, the overflow').to.be.at.least(1);
    await waitFor('c2 full', 15_000, async () => (await roomFor('c2', 10_000)) === 0);
  }

  it('a Deployment preferring region eu runs on c2 (whose real nodes are in eu) while c2 has room, then overflows to c1', async () => {
    const room = await c2RoomForTwo();
    await c2ThenOverflow('eu-first', room, { spec: preferring(prefer(50, REGION, ['eu'])) });
  });

  it('the same preference in proxy-pod-scheduling-constraints, on target-name In [c2], runs on c2 while it has room, then overflows to c1', async () => {
    const room = await c2RoomForTwo();
    const constraints = JSON.stringify(preferring(prefer(50, 'multicluster.admiralty.io/target-name', ['c2'])));
    await c2ThenOverflow('c2-first', room, { annotations: { [CONSTRAINTS]: constraints } });
  });

  it('burst still orders targets the pod prefers alike: c2 (priority 0) before c1 (priority 1), though a term prefers region us', async () => {
    await kubectl('c1', 'patch', 'target', 'c1', '-n', ns, '--type=merge', '-p', '{"spec":{"placement":{"priority":1}}}');
    const room = await c2RoomForTwo();
    // 20 for region us (c1's nodes, and c1's virtual node), 20 for zones eu-a and eu-b (c2's
    // nodes, one each; not on c2's virtual node, which carries only what all of c2's nodes
    // share): c1 and c2 are preferred alike only when the zone term is judged per real node.
    const template = { annotations: { [POLICY]: 'burst' }, spec: preferring(prefer(20, REGION, ['us']), prefer(20, ZONE, ['eu-a', 'eu-b'])) };
    await c2ThenOverflow('alike', room, template);
  });
});
