import { expect } from 'chai';
import { parseQuantity } from '../../provider/model/quantity.js';
import { NODE_GROUP_LABEL, STAND_IN_CONFIGMAP, type NodeGroup } from '../sandbox/cluster-autoscaler-stand-in.js';
import { apply, connectNamespace, disconnectNamespace, electedDeployment, getJson, kubectl, liveProxies, running, sandbox, uniqueName, waitFor } from './support.js';

const PARENT_UID = 'multicluster.admiralty.io/parent-uid';

/** The delegates (not being deleted) in a cluster of the proxy with this UID. */
async function delegatesIn(cluster: string, ns: string, proxyUid: string): Promise<any[]> {
  return (await getJson(cluster, 'pods', '-n', ns, '-l', `${PARENT_UID}=${proxyUid}`)).items.filter((p: any) => !p.metadata.deletionTimestamp);
}

/** Gives c2's cluster-autoscaler stand-in (a test fixture) these node groups. */
async function nodeGroups(groups: NodeGroup[]): Promise<void> {
  await apply('c2', JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: STAND_IN_CONFIGMAP, namespace: 'kube-system' }, data: { 'node-groups': JSON.stringify(groups) } }));
}

/**
 * Bursting into an autoscaled target: c2's Target advertises `spec.placement.burstCapacity`, and
 * c2 runs the sandbox's cluster-autoscaler stand-in, which adds kwok nodes for Unschedulable pods
 * and says so with cluster-autoscaler's events.
 */
describe('bursting into an autoscaled target', function () {
  this.timeout(240_000);
  let ns: string;
  let group: string;
  let nodes: { c1Node: string; c2Node: string };
  const realNodes = ['c2-node-0', 'c2-node-1'];

  before(async () => {
    // The stand-in idles until its ConfigMap names groups: other suites never see it act.
    await nodeGroups([]);
    await sandbox.startAutoscaler('c2');
  });

  beforeEach(async () => {
    ns = uniqueName('burst');
    group = `e2e-${ns.slice(-6)}`;
    nodes = await connectNamespace(ns);
    await kubectl('c1', 'patch', 'target', 'c2', '-n', ns, '--type=merge', '-p', '{"spec":{"placement":{"burstCapacity":{"cpu":"64"}}}}');
  });

  afterEach(async () => {
    await nodeGroups([]);
    await kubectl('c2', 'uncordon', ...realNodes);
    await kubectl('c1', 'delete', 'deployments,pods', '-n', ns, '--all', '--wait=false');
    await disconnectNamespace(ns);
    await kubectl('c2', 'delete', 'nodes', '-l', `${NODE_GROUP_LABEL}=${group}`, '--wait=false');
  });

  it('scales c2 from zero for a pod that fits no current node anywhere, and runs it there', async () => {
    await nodeGroups([
      { name: group, minSize: 0, maxSize: 1, provisionDelaySeconds: 2, template: { allocatable: { cpu: '64', memory: '256Gi', pods: '110' }, labels: { 'topology.kubernetes.io/region': 'eu' } } },
    ]);
    const t0 = Date.now();
    // 40 cpu: every real node of c1 and c2 has 32.
    await apply('c1', electedDeployment('big', ns, 1, '40'));
    expect(Object.fromEntries(await running(ns, 'big', 1, 120_000))).to.deep.equal({ [nodes.c2Node]: 1 });
    console.log(`      Running in c2 on a new node ${((Date.now() - t0) / 1000).toFixed(1)} s after the Deployment was applied`);

    const [proxy] = await liveProxies(ns, 'big');
    const [delegate] = (await getJson('c2', 'pods', '-n', ns, '-l', `${PARENT_UID}=${proxy.metadata.uid}`)).items;
    const node = await getJson('c2', 'node', delegate.spec.nodeName);
    expect(node.metadata.labels[NODE_GROUP_LABEL]).to.equal(group);
    const said = (await getJson('c2', 'events', '-n', ns, '--field-selector', `involvedObject.name=${delegate.metadata.name}`)).items.filter((e: any) => e.source?.component === 'cluster-autoscaler');
    expect(said.map((e: any) => `${e.type} ${e.reason}: ${e.message}`)).to.deep.equal([`Normal TriggeredScaleUp: pod triggered scale-up: [{${group} 0->1 (max: 1)}]`]);
  });

  it("scales c2 up for a pod larger than all of c2's free room together: its virtual node offers the burst capacity", async () => {
    // 100 cpu: more than c2's two 32-cpu nodes together, so the proxy scheduler's own resource
    // check refuses c2's virtual node unless it offers the burst capacity as well.
    await kubectl('c1', 'patch', 'target', 'c2', '-n', ns, '--type=merge', '-p', '{"spec":{"placement":{"burstCapacity":{"cpu":"128"}}}}');
    await nodeGroups([{ name: group, minSize: 0, maxSize: 1, provisionDelaySeconds: 2, template: { allocatable: { cpu: '128', memory: '256Gi', pods: '110' } } }]);
    await waitFor("c2's virtual node offering the burst capacity", 30_000, async () => {
      const node = await getJson('c1', 'node', nodes.c2Node);
      return parseQuantity(node.status.allocatable.cpu) >= parseQuantity('128');
    });
    await apply('c1', electedDeployment('huge', ns, 1, '100'));
    expect(Object.fromEntries(await running(ns, 'huge', 1, 120_000))).to.deep.equal({ [nodes.c2Node]: 1 });
    const [proxy] = await liveProxies(ns, 'huge');
    const [delegate] = (await getJson('c2', 'pods', '-n', ns, '-l', `${PARENT_UID}=${proxy.metadata.uid}`)).items;
    expect((await getJson('c2', 'node', delegate.spec.nodeName)).metadata.labels[NODE_GROUP_LABEL]).to.equal(group);
  });

  it('places the pod in c1 when the autoscaler refuses (max size reached), though c2 comes first', async () => {
    await nodeGroups([{ name: group, minSize: 0, maxSize: 0, template: { allocatable: { cpu: '64', memory: '256Gi', pods: '110' } } }]);
    // c2 first under burst, and no room on its current nodes: only its burst capacity takes the pod.
    await kubectl('c1', 'patch', 'target', 'c2', '-n', ns, '--type=merge', '-p', '{"spec":{"placement":{"priority":0}}}');
    await kubectl('c1', 'patch', 'target', 'c1', '-n', ns, '--type=merge', '-p', '{"spec":{"placement":{"priority":1}}}');
    await kubectl('c2', 'cordon', ...realNodes);
    await apply('c1', electedDeployment('web', ns, 1, '1', { annotations: { 'multicluster.admiralty.io/placement-policy': 'burst' } }));
    expect(Object.fromEntries(await running(ns, 'web', 1))).to.deep.equal({ [nodes.c1Node]: 1 });

    // c2 was tried first, and refused with the autoscaler's word.
    const [proxy] = await liveProxies(ns, 'web');
    const failed = (await getJson('c1', 'events', '-n', ns, '--field-selector', `involvedObject.name=${proxy.metadata.name},reason=FailedScheduling`)).items.map((e: any) => e.message);
    expect(failed.join('\n')).to.include("cluster-autoscaler: pod didn't trigger scale-up: 1 max node group size reached");
    expect((await getJson('c2', 'pods', '-n', ns)).items.filter((p: any) => !p.metadata.deletionTimestamp)).to.have.length(0);
  });

  it('re-places a pod bound to c2 for a scale-up that then fails (the group backs off: NotTriggerScaleUp after TriggeredScaleUp), in c1', async () => {
    // The cloud never delivers: the stand-in gives the scale-up up after 3 s and backs off.
    await nodeGroups([{ name: group, minSize: 0, maxSize: 1, failProvisioning: true, maxNodeProvisionSeconds: 3, template: { allocatable: { cpu: '64', memory: '256Gi', pods: '110' } } }]);
    await kubectl('c1', 'patch', 'target', 'c2', '-n', ns, '--type=merge', '-p', '{"spec":{"placement":{"priority":0}}}');
    await kubectl('c1', 'patch', 'target', 'c1', '-n', ns, '--type=merge', '-p', '{"spec":{"placement":{"priority":1}}}');
    await kubectl('c2', 'cordon', ...realNodes);
    await apply('c1', electedDeployment('late', ns, 1, '1', { annotations: { 'multicluster.admiralty.io/placement-policy': 'burst' } }));

    // First bound to c2, its delegate waiting for the scale-up the autoscaler said it triggered.
    let first: any;
    await waitFor('the proxy bound to c2', 60_000, async () => {
      first = (await liveProxies(ns, 'late')).find((p) => p.spec.nodeName === nodes.c2Node);
      return first !== undefined;
    });
    // Then the scale-up fails: replaced, and the replacement runs in c1.
    expect(Object.fromEntries(await running(ns, 'late', 1, 120_000))).to.deep.equal({ [nodes.c1Node]: 1 });
    const [now] = await liveProxies(ns, 'late');
    expect(now.metadata.uid, 'a new pod').to.not.equal(first.metadata.uid);
    const replacing = (await getJson('c1', 'events', '-n', ns, '--field-selector', `involvedObject.name=${first.metadata.name},reason=Replacing`)).items.map((e: any) => e.message);
    expect(replacing.join('\n')).to.match(/cluster-autoscaler will not add a node for it \(NotTriggerScaleUp at \S+: pod didn't trigger scale-up: 1 in backoff after failed scale-up\)/);
    const said = (await getJson('c2', 'events', '-n', ns)).items.filter((e: any) => e.source?.component === 'cluster-autoscaler').map((e: any) => e.reason);
    expect(said).to.include.members(['TriggeredScaleUp', 'NotTriggerScaleUp']);
    expect(await delegatesIn('c2', ns, first.metadata.uid), 'the first delegate, gone from c2').to.have.length(0);
  });
});
