import { expect } from 'chai';
import { apply, connectNamespace, disconnectNamespace, electedDeployment, followedFree, getJson, kubectl, liveProxies, running, settleTeardowns, uniqueName, waitFor } from './support.js';

const REGION = 'topology.kubernetes.io/region';
const POLICY = 'multicluster.admiralty.io/placement-policy';

/**
 * Topology across targets, with the real proxy scheduler: the extender judges topology spread
 * and pod anti-affinity over the real nodes of every target, counting the proxies. The sandbox's
 * c1 has its two nodes in region us, c2 its two in eu. Each test has its namespace and Targets
 * `c1` (self) and `c2`.
 */
describe('topology across targets', function () {
  this.timeout(240_000);
  let ns: string;
  let nodes: { c1Node: string; c2Node: string };

  beforeEach(async () => {
    await settleTeardowns();
    ns = uniqueName('topo');
    nodes = await connectNamespace(ns);
  });

  afterEach(async () => {
    await kubectl('c1', 'delete', 'deployments,pods', '-n', ns, '--all', '--wait=false');
    await disconnectNamespace(ns);
  });

  it('4 replicas spread with maxSkew 1 over region run 2 in c1 (us) and 2 in c2 (eu), though burst alone would put all 4 in c1', async () => {
    // Burst: c1 (priority 0) before c2 (priority 1); c1 has room for all four.
    await kubectl('c1', 'patch', 'target', 'c2', '-n', ns, '--type=merge', '-p', '{"spec":{"placement":{"priority":1}}}');
    expect(await followedFree('c1', nodes.c1Node), "c1's free cpu (millicores)").to.be.at.least(4 * 100);
    const spread = [{ maxSkew: 1, topologyKey: REGION, whenUnsatisfiable: 'DoNotSchedule', labelSelector: { matchLabels: { app: 'spread' } } }];
    await apply('c1', electedDeployment('spread', ns, 4, '100m', { annotations: { [POLICY]: 'burst' }, spec: { topologySpreadConstraints: spread } }));
    const where = await running(ns, 'spread', 4);
    expect(Object.fromEntries(where)).to.deep.equal({ [nodes.c1Node]: 2, [nodes.c2Node]: 2 });
  });

  it('4 replicas spread with ScheduleAnyway over region run 2 in c1 and 2 in c2 under burst too: soft spread ranks before the policy', async () => {
    await kubectl('c1', 'patch', 'target', 'c2', '-n', ns, '--type=merge', '-p', '{"spec":{"placement":{"priority":1}}}');
    expect(await followedFree('c1', nodes.c1Node), "c1's free cpu (millicores)").to.be.at.least(4 * 100);
    const spread = [{ maxSkew: 1, topologyKey: REGION, whenUnsatisfiable: 'ScheduleAnyway', labelSelector: { matchLabels: { app: 'soft' } } }];
    await apply('c1', electedDeployment('soft', ns, 4, '100m', { annotations: { [POLICY]: 'burst' }, spec: { topologySpreadConstraints: spread } }));
    const where = await running(ns, 'soft', 4);
    expect(Object.fromEntries(where)).to.deep.equal({ [nodes.c1Node]: 2, [nodes.c2Node]: 2 });
  });

  it("a pod's required anti-affinity on region keeps pods it selects, with no constraints of their own, out of its region: 2 replicas of them both run in the other", async () => {
    const anti = { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [{ topologyKey: REGION, labelSelector: { matchLabels: { app: 'loner' } } }] } };
    await apply('c1', electedDeployment('guard', ns, 1, '100m', { spec: { affinity: anti } }));
    const guarded = [...(await running(ns, 'guard', 1)).keys()][0];
    const other = guarded === nodes.c1Node ? nodes.c2Node : nodes.c1Node;
    // Under the default spread policy the two would go one to each target.
    await apply('c1', electedDeployment('loner', ns, 2, '100m'));
    expect(Object.fromEntries(await running(ns, 'loner', 2))).to.deep.equal({ [other]: 2 });
  });

  it('3 replicas with required pod anti-affinity on region run one per region; the third waits, and its FailedScheduling event says why', async () => {
    const anti = { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [{ topologyKey: REGION, labelSelector: { matchLabels: { app: 'solo' } } }] } };
    await apply('c1', electedDeployment('solo', ns, 3, '100m', { spec: { affinity: anti } }));
    await running(ns, 'solo', 2);
    const proxies = await liveProxies(ns, 'solo');
    const bound = proxies.filter((p) => p.spec.nodeName).map((p) => p.spec.nodeName);
    expect(bound.sort(), 'the virtual nodes of the bound proxies').to.deep.equal([nodes.c1Node, nodes.c2Node].sort());
    const waiting = proxies.filter((p) => !p.spec.nodeName);
    expect(waiting.length, 'proxies not bound').to.equal(1);
    const name = waiting[0].metadata.name;
    let message = '';
    await waitFor(`a FailedScheduling event of ${name} naming both targets`, 60_000, async () => {
      const events = await getJson('c1', 'events', '-n', ns, '--field-selector', `involvedObject.name=${name},reason=FailedScheduling`);
      message = events.items.map((e: any) => e.message).join('\n');
      return message.includes(`${ns}/c1`) && message.includes(`${ns}/c2`);
    });
    expect(message, message).to.include(`no node in ${ns}/c1 fits: 2 node(s) didn't match pod anti-affinity rules (${REGION}=us has 1 matching pod)`);
    expect(message, message).to.include(`no node in ${ns}/c2 fits: 2 node(s) didn't match pod anti-affinity rules (${REGION}=eu has 1 matching pod)`);
    expect((await getJson('c1', 'pod', name, '-n', ns)).status.phase).to.equal('Pending');
  });
});
