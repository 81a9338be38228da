import { expect } from 'chai';
import { apply, connectNamespace, disconnectNamespace, freeCpu, getJson, kubectl, milliCpu, offered, settleTeardowns, uniqueName, waitFor } from './support.js';

/** Held to c2 by its virtual-node constraints. */
const ONLY_C2 = { 'multicluster.admiralty.io/proxy-pod-scheduling-constraints': JSON.stringify({ nodeSelector: { 'multicluster.admiralty.io/target-name': 'c2' } }) };

function electedPod(name: string, ns: string, cpu: string, priorityClassName: string): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: ns, labels: { app: 'preemption' }, annotations: { 'multicluster.admiralty.io/elect': '', ...ONLY_C2 } },
    spec: { priorityClassName, terminationGracePeriodSeconds: 0, containers: [{ name: 'c', image: 'busybox', resources: { requests: { cpu } } }] },
  });
}

/**
 * Priority inside a target: c2 is full of its own low-priority pods (created in c2 directly, not
 * through Admiralty), and a high-priority pod held to c2 runs there once c2's own scheduler has
 * preempted one of them, as it would for the same pod created in c2. The classes exist in both
 * clusters with the same names; the delegate gets the value of c2's.
 */
describe('preemption inside a target', function () {
  this.timeout(240_000);
  let ns: string;
  let nodes: { c1Node: string; c2Node: string };
  let low: string;
  let high: string;
  let polite: string;

  beforeEach(async () => {
    await settleTeardowns();
    ns = uniqueName('preempt');
    nodes = await connectNamespace(ns);
    low = `${ns}-low`;
    high = `${ns}-high`;
    polite = `${ns}-polite`;
    for (const cluster of ['c1', 'c2']) {
      await apply(
        cluster,
        [
          `apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: ${low}}\nvalue: 10\n`,
          `apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: ${high}}\nvalue: 100000\n`,
          `apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: ${polite}}\nvalue: 100000\npreemptionPolicy: Never\n`,
        ].join('---\n'),
      );
    }
    // Fill every c2 node with one pod of c2's own, of low priority, that takes all its free cpu.
    for (const [node, milli] of await freeCpu('c2')) {
      if (milli <= 0) continue;
      await apply(
        'c2',
        `apiVersion: v1\nkind: Pod\nmetadata: {name: filler-${node}, namespace: ${ns}, labels: {role: filler}}\nspec:\n  nodeName: ${node}\n  priorityClassName: ${low}\n  terminationGracePeriodSeconds: 0\n  containers: [{name: c, image: busybox, resources: {requests: {cpu: ${milli}m}}}]\n`,
      );
    }
    await waitFor('every c2 node full', 30_000, async () => [...(await freeCpu('c2')).values()].every((m) => m === 0));
    // c1 reads c2's summary on its probe period: its virtual node then offers the fillers' room,
    // which some pod of high enough priority could have, though nothing is free there.
    await waitFor("c2's virtual node to offer what c2's low-priority pods hold", 45_000, async () => {
      const summary = await getJson('c2', 'clustersummary', 'singleton');
      return milliCpu(summary.free.cpu) === 0 && (await offered(nodes.c2Node)) >= 2_000;
    });
  });

  afterEach(async () => {
    await kubectl('c1', 'delete', 'pods', '-n', ns, '--all', '--wait=false');
    await kubectl('c2', 'delete', 'pods', '-n', ns, '-l', 'role=filler', '--grace-period=0', '--force', '--ignore-not-found');
    await disconnectNamespace(ns);
    for (const cluster of ['c1', 'c2']) await kubectl(cluster, 'delete', 'priorityclass', low, high, polite, '--ignore-not-found');
  });

  it('runs a high-priority pod held to a full c2 there after c2 preempts one of its own lower-priority pods, and says so on the proxy', async () => {
    const fillers = (await getJson('c2', 'pods', '-n', ns, '-l', 'role=filler')).items.map((p: any) => p.metadata.name).sort();
    expect(fillers.length, 'a filler on each c2 node').to.be.at.least(2);
    await apply('c1', electedPod('urgent', ns, '2', high));
    await waitFor('the high-priority pod Running', 120_000, async () => (await getJson('c1', 'pod', 'urgent', '-n', ns)).status.phase === 'Running');
    const proxy = await getJson('c1', 'pod', 'urgent', '-n', ns);
    expect(proxy.spec.nodeName).to.equal(nodes.c2Node);
    const [delegate] = (await getJson('c2', 'pods', '-n', ns, '-l', 'multicluster.admiralty.io/parent-cluster-name=c1')).items;
    // The delegate has c2's value of the class it names.
    expect(delegate.spec.priority).to.equal(100000);
    // c2's scheduler evicted the one filler on the node it chose, and no other pod.
    await waitFor('the preempted filler gone', 60_000, async () => (await getJson('c2', 'pods', '-n', ns, '-l', 'role=filler')).items.length === fillers.length - 1);
    const left = (await getJson('c2', 'pods', '-n', ns, '-l', 'role=filler')).items.map((p: any) => p.spec.nodeName);
    expect(left, 'the filler of the delegate node went').to.not.include(delegate.spec.nodeName);
    const told = (await getJson('c1', 'events', '-n', ns, '--field-selector', 'involvedObject.name=urgent,reason=PreemptingInTarget')).items.map((e: any) => e.message);
    expect(told).to.have.length(1);
    expect(told[0]).to.match(new RegExp(`^[\\w-]+/c2 preempts pods of lower priority on its node ${delegate.spec.nodeName} for this pod \\(its summary counted \\d+ such pod\\(s\\) there`));
  });

  it('keeps its preemptionPolicy: Never twin waiting, with a reason that says so, and preempts nothing', async () => {
    const before = (await getJson('c2', 'pods', '-n', ns, '-l', 'role=filler')).items.map((p: any) => p.metadata.uid).sort();
    await apply('c1', electedPod('polite', ns, '2', polite));
    let message = '';
    await waitFor("the twin's PodScheduled condition naming preemptionPolicy", 60_000, async () => {
      message = (await getJson('c1', 'pod', 'polite', '-n', ns)).status.conditions?.find((c: any) => c.type === 'PodScheduled')?.message ?? '';
      return message.includes('preemptionPolicy');
    });
    expect(message, message).to.match(
      /no node in [\w-]+\/c2 fits: \d+ Insufficient cpu \(largest free 0\); preempting pods of priority below 100000 would make room on \d+ node\(s\), but the pod's preemptionPolicy is Never/,
    );
    expect((await getJson('c1', 'pod', 'polite', '-n', ns)).spec.nodeName).to.equal(undefined);
    expect((await getJson('c2', 'pods', '-n', ns, '-l', 'multicluster.admiralty.io/parent-cluster-name=c1')).items, 'no delegate made').to.deep.equal([]);
    const after = (await getJson('c2', 'pods', '-n', ns, '-l', 'role=filler')).items
      .filter((p: any) => !p.metadata.deletionTimestamp)
      .map((p: any) => p.metadata.uid)
      .sort();
    expect(after, 'every filler still there').to.deep.equal(before);
  });
});
