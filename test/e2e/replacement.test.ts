import { expect } from 'chai';
import { apply, connectNamespace, disconnectNamespace, electedDeployment, getJson, kubectl, liveProxies, running, uniqueName, waitFor } from './support.js';

const PARENT_UID = 'multicluster.admiralty.io/parent-uid';

/** A kwok node in c2 like the sandbox's own (region eu), with one more label, `e2e-replace=<value>`. */
function extraNode(name: string, value: string): string {
  return [
    'apiVersion: v1',
    'kind: Node',
    'metadata:',
    `  name: ${name}`,
    '  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}',
    `  labels: {type: kwok, kubernetes.io/hostname: ${name}, kubernetes.io/os: linux, kubernetes.io/arch: amd64, topology.kubernetes.io/region: eu, topology.kubernetes.io/zone: eu-c, e2e-replace: ${value}}`,
    'status:',
    '  capacity: {cpu: "64", memory: 256Gi, pods: "600"}',
    '  allocatable: {cpu: "64", memory: 256Gi, pods: "600"}',
  ].join('\n');
}

/** The live (not deleting) pods of `cluster` in `ns` that are delegates of the proxy with this UID. */
async function delegatesOf(cluster: string, ns: string, uid: string): Promise<any[]> {
  return (await getJson(cluster, 'pods', '-n', ns, '-l', `${PARENT_UID}=${uid}`)).items.filter((p: any) => !p.metadata.deletionTimestamp);
}

/**
 * Re-placement (`provider/reconcilers/replacement.ts`): a pod whose delegate is stuck in its
 * target is recreated by its controller on another target, and that target is avoided for the
 * controller's pods for a while. Here the stuck delegates are those of a node that c2 loses: the
 * sandbox's placement is exact, so a bound proxy never has an Unschedulable delegate (the bind
 * waits for the target's scheduler); that path is covered by the unit tests.
 */
describe('re-placement', function () {
  this.timeout(240_000);
  let ns: string;
  let node: string;
  let nodes: { c1Node: string; c2Node: string };

  beforeEach(async () => {
    ns = uniqueName('replace');
    node = `c2-extra-${ns.slice(-6)}`;
    nodes = await connectNamespace(ns);
  });

  afterEach(async () => {
    await kubectl('c2', 'delete', 'node', node, '--ignore-not-found', '--wait=false');
    await kubectl('c1', 'delete', 'deployments,pods', '-n', ns, '--all', '--wait=false');
    await disconnectNamespace(ns);
  });

  it('moves the replicas of a Deployment to c1 when the c2 node they ran on is gone, and keeps c2 off its pods for the cool-down', async () => {
    // c2 first (burst, c2 priority 0), and in c2 the extra node, preferred by the pods.
    await kubectl('c1', 'patch', 'target', 'c2', '-n', ns, '--type=merge', '-p', '{"spec":{"placement":{"priority":0}}}');
    await kubectl('c1', 'patch', 'target', 'c1', '-n', ns, '--type=merge', '-p', '{"spec":{"placement":{"priority":1}}}');
    await apply('c2', extraNode(node, ns));
    // Ready, and untainted: the node controller adds node.kubernetes.io/not-ready (NoSchedule) to
    // a new node and takes it off only on its next pass after Ready, late on a loaded machine;
    // meanwhile c2's scheduler puts the delegates elsewhere, whatever their affinity prefers.
    await waitFor(`${node} Ready and untainted`, 60_000, async () => {
      const n = await getJson('c2', 'node', node);
      return n.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True') && !(n.spec?.taints ?? []).some((t: any) => t.effect === 'NoSchedule' || t.effect === 'NoExecute');
    });
    // And seen so by c2's own scheduler, whose informers lag the API on a loaded machine: a probe
    // pod that fits only there gets bound to it (retried: the namespace's ServiceAccount may be new).
    const probe = `apiVersion: v1\nkind: Pod\nmetadata: {name: probe, namespace: ${ns}}\nspec: {nodeSelector: {e2e-replace: ${ns}}, containers: [{name: c, image: nginx}]}\n`;
    await waitFor(`c2's scheduler binding a probe to ${node}`, 60_000, async () => {
      const bound = await getJson('c2', 'pod', 'probe', '-n', ns).catch(() => undefined);
      if (!bound) await apply('c2', probe).catch(() => undefined);
      return bound?.spec?.nodeName === node;
    });
    await kubectl('c2', 'delete', 'pod', 'probe', '-n', ns, '--grace-period=0', '--force');
    const preferExtra = {
      nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 100, preference: { matchExpressions: [{ key: 'e2e-replace', operator: 'In', values: [ns] }] } }] },
    };
    await apply('c1', electedDeployment('web', ns, 3, '100m', { annotations: { 'multicluster.admiralty.io/placement-policy': 'burst' }, spec: { affinity: preferExtra } }));
    expect(Object.fromEntries(await running(ns, 'web', 3))).to.deep.equal({ [nodes.c2Node]: 3 });
    const before = await liveProxies(ns, 'web');
    for (const p of before) {
      const ds = await delegatesOf('c2', ns, p.metadata.uid);
      expect(
        ds.map((d) => d.spec.nodeName),
        `delegate of ${p.metadata.name}`,
      ).to.deep.equal([node]);
    }

    const oldNames = new Set(before.map((p) => p.metadata.name));
    const t0 = Date.now();
    await kubectl('c2', 'delete', 'node', node);
    await waitFor('3 replacements Running', 90_000, async () => {
      const live = await liveProxies(ns, 'web');
      return live.length === 3 && live.every((p) => !oldNames.has(p.metadata.name) && p.status.phase === 'Running');
    });
    console.log(`      3 replacements Running ${((Date.now() - t0) / 1000).toFixed(1)} s after the node was deleted`);
    expect(Object.fromEntries(await running(ns, 'web', 3))).to.deep.equal({ [nodes.c1Node]: 3 });

    // Each old proxy said where it went and why before it was deleted.
    const events = (await getJson('c1', 'events', '-n', ns, '--field-selector', 'reason=Replacing')).items.filter((e: any) => oldNames.has(e.involvedObject.name));
    expect(new Set(events.map((e: any) => e.involvedObject.name))).to.deep.equal(oldNames);
    for (const e of events) {
      expect(e.type).to.equal('Warning');
      expect(e.message).to.match(
        new RegExp(
          `^delegate \\S+ ran on node ${node}, which ${ns}/c2 no longer has: deleting the proxy and its delegate so that its ReplicaSet \\S+ recreates it on another target; ${ns}/c2 is avoided for the ReplicaSet's pods until \\S+$`,
        ),
      );
    }
    // No pod lost, none doubled: each live proxy has exactly one delegate, in c1; the old ones leave c2.
    for (const p of await liveProxies(ns, 'web')) {
      expect((await delegatesOf('c1', ns, p.metadata.uid)).length, `delegates of ${p.metadata.name} in c1`).to.equal(1);
      expect((await delegatesOf('c2', ns, p.metadata.uid)).length, `delegates of ${p.metadata.name} in c2`).to.equal(0);
    }
    await waitFor('the old delegates gone from c2', 60_000, async () => (await getJson('c2', 'pods', '-n', ns)).items.length === 0);

    // Within the cool-down, c2 (priority 0, with room on its other nodes) still gets none of the ReplicaSet's new pods.
    await kubectl('c1', 'scale', 'deployment', 'web', '-n', ns, '--replicas=5');
    expect(Object.fromEntries(await running(ns, 'web', 5))).to.deep.equal({ [nodes.c1Node]: 5 });
  });
});
