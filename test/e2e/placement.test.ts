import { expect } from 'chai';
import { apply, connectNamespace, disconnectNamespace, followedFree, freeCpu, getJson, kubectl, settleTeardowns, squeeze, uniqueName, waitFor } from './support.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function electedPod(name: string, ns: string, cpu: string, extra: { annotations?: Record<string, string>; nodeSelector?: Record<string, string>; hostPort?: number } = {}): string {
  const ports = extra.hostPort ? { ports: [{ containerPort: 8080, hostPort: extra.hostPort }] } : {};
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: ns, labels: { app: 'placement' }, annotations: { 'multicluster.admiralty.io/elect': '', ...extra.annotations } },
    spec: { containers: [{ name: 'c', image: 'busybox', resources: { requests: { cpu } }, ...ports }], ...(extra.nodeSelector ? { nodeSelector: extra.nodeSelector } : {}) },
  });
}

/** Held to c2 by its virtual-node constraints. */
const ONLY_C2 = { 'multicluster.admiralty.io/proxy-pod-scheduling-constraints': JSON.stringify({ nodeSelector: { 'multicluster.admiralty.io/target-name': 'c2' } }) };

/** The delegates in `cluster` of this namespace's proxies. */
async function delegatesIn(cluster: string, ns: string): Promise<any[]> {
  return (await getJson(cluster, 'pods', '-n', ns, '-l', 'multicluster.admiralty.io/parent-cluster-name=c1')).items;
}

/**
 * Exact placement: the proxy scheduler (a stock kube-scheduler) with the provider's extender
 * binds a proxy to a virtual node only when one real node of its target can take the pod, and
 * only once that target's own scheduler has placed the delegate. Each test has a namespace of
 * its own, connected with namespaced Targets, so the source works with the Source role's
 * rights alone in c2.
 */
describe('exact placement', function () {
  this.timeout(240_000);
  let ns: string;
  let nodes: { c1Node: string; c2Node: string };

  beforeEach(async () => {
    // The delegates of earlier files' namespaces still leaving c2 would free room on its nodes
    // in the middle of a test that counts that room.
    await settleTeardowns();
    ns = uniqueName('place');
    nodes = await connectNamespace(ns);
  });

  afterEach(async () => {
    await kubectl('c1', 'delete', 'pods', '-n', ns, '--all', '--wait=false');
    await kubectl('c2', 'delete', 'pods', '-n', ns, '-l', 'role=hog', '--grace-period=0', '--force');
    await kubectl('c1', 'delete', 'pods', '-n', ns, '-l', 'role=hog', '--grace-period=0', '--force');
    await disconnectNamespace(ns);
  });

  it('never binds to c2 a pod that only the sum of its nodes could hold; says why, and runs it in c1', async () => {
    await squeeze('c2', ns, 12_000);
    const freeTotal = await followedFree('c2', nodes.c2Node);
    expect(
      [...(await freeCpu('c2')).values()].every((m) => m <= 12_000),
      'every c2 node still at most 12 cpu free',
    ).to.equal(true);
    // c2 offers the sum of its free cpu (24 cpu over two nodes): enough for kube-scheduler's own
    // resource check, so only the extender's per-node judgement keeps the pod off c2.
    expect(freeTotal).to.be.at.least(16_000);
    // Held to c2 by its virtual-node constraints: it cannot run anywhere, and the event says why.
    await apply('c1', electedPod('only-c2', ns, '16', { annotations: ONLY_C2 }));
    let message = '';
    await waitFor('a FailedScheduling event', 60_000, async () => {
      const events = await getJson('c1', 'events', '-n', ns, '--field-selector', 'involvedObject.name=only-c2,reason=FailedScheduling');
      message = events.items.map((e: any) => e.message).join('\n');
      return message.includes('c2');
    });
    expect(message, message).to.match(/no node in [\w-]+\/c2 fits: 2 Insufficient cpu \(largest free 12\)/);
    expect((await getJson('c1', 'pod', 'only-c2', '-n', ns)).spec.nodeName).to.equal(undefined);
    // More than c2 has free in all, pinned by the pod's own nodeSelector (which the extender
    // judges): kube-scheduler's resource check leaves c2's virtual node out and offers only c1's,
    // which the extender rejects; its error, all the pod's condition says, still names c2 and why.
    await apply('c1', electedPod('too-big', ns, '30', { nodeSelector: { 'multicluster.admiralty.io/target-name': 'c2' } }));
    let condition = '';
    await waitFor("too-big's PodScheduled condition", 60_000, async () => {
      condition = (await getJson('c1', 'pod', 'too-big', '-n', ns)).status.conditions?.find((c: any) => c.type === 'PodScheduled')?.message ?? '';
      return condition.includes('c2');
    });
    expect(condition, condition).to.match(new RegExp(`${nodes.c2Node} \\(not offered by the proxy scheduler\\): no node in [\\w-]+/c2 fits: 2 Insufficient cpu \\(largest free 12\\)`));
    // Free to go anywhere, it runs in c1, where one node has room.
    await apply('c1', electedPod('anywhere', ns, '16'));
    await waitFor('the pod Running', 60_000, async () => (await getJson('c1', 'pod', 'anywhere', '-n', ns)).status.phase === 'Running');
    expect((await getJson('c1', 'pod', 'anywhere', '-n', ns)).spec.nodeName).to.equal(nodes.c1Node);
    expect(await delegatesIn('c2', ns)).to.deep.equal([]);
  });

  it('runs a pod whose nodeSelector only one c2 node matches on that node', async () => {
    const c2Nodes = [...(await freeCpu('c2')).keys()].sort();
    const gpuNode = c2Nodes[c2Nodes.length - 1];
    // Two values of one key: c2's virtual node carries neither (only what all nodes agree on).
    await kubectl('c2', 'label', 'node', gpuNode!, 'pool=gpu', '--overwrite');
    await kubectl('c2', 'label', 'node', c2Nodes[0]!, 'pool=cpu', '--overwrite');
    try {
      await waitFor("c2's summary to show the pool", 30_000, async () => (await getJson('c2', 'clustersummary', 'singleton')).nodePools.some((p: any) => p.labels.pool === 'gpu'));
      // The source reads summaries on its probe period (10 s in the sandbox).
      await sleep(12_000);
      // So no virtual node can match it: only a per-node judgement can place the pod.
      expect((await getJson('c1', 'node', nodes.c2Node)).metadata.labels.pool).to.equal(undefined);
      await apply('c1', electedPod('gpu', ns, '100m', { nodeSelector: { pool: 'gpu' } }));
      await waitFor('the pod Running', 60_000, async () => (await getJson('c1', 'pod', 'gpu', '-n', ns)).status.phase === 'Running');
      expect((await getJson('c1', 'pod', 'gpu', '-n', ns)).spec.nodeName).to.equal(nodes.c2Node);
      const [delegate] = await delegatesIn('c2', ns);
      expect(delegate.spec.nodeName).to.equal(gpuNode);
      expect(delegate.spec.nodeSelector).to.deep.equal({ pool: 'gpu' });
      expect(delegate.spec.schedulerName).to.equal('default-scheduler');
    } finally {
      for (const n of c2Nodes) await kubectl('c2', 'label', 'node', n, 'pool-');
    }
  });

  it("runs pods that ask for one host port on as many of c2's nodes as have it free, and says why the next waits", async () => {
    // The virtual node stands for c2's two nodes: the proxy scheduler must not take the port as
    // used on it once one proxy has it, and the extender judges the port per real node.
    const names = ['port-0', 'port-1', 'port-2'];
    for (const n of names) await apply('c1', electedPod(n, ns, '100m', { annotations: ONLY_C2, hostPort: 18080 }));
    const running = async () => (await getJson('c1', 'pods', '-n', ns, '-l', 'app=placement')).items.filter((p: any) => p.status.phase === 'Running');
    await waitFor('two pods Running', 90_000, async () => (await running()).length === 2);
    for (const p of await running()) expect(p.spec.nodeName, p.metadata.name).to.equal(nodes.c2Node);
    const delegates = await delegatesIn('c2', ns);
    expect(
      delegates.map((d) => d.spec.containers[0].ports),
      'the delegates keep the port',
    ).to.deep.equal([[{ containerPort: 8080, hostPort: 18080, protocol: 'TCP' }], [{ containerPort: 8080, hostPort: 18080, protocol: 'TCP' }]]);
    expect(new Set(delegates.map((d) => d.spec.nodeName)).size, 'one a node').to.equal(2);
    // The third: c2's summary shows the port used on both nodes, and the extender's filter says
    // so (a try made before the summary showed it is refused at bind by c2's own scheduler).
    const [waiting] = (await getJson('c1', 'pods', '-n', ns, '-l', 'app=placement')).items.filter((p: any) => !p.spec.nodeName);
    const filtered = /no node in [\w-]+\/c2 fits: 2 node\(s\) didn't have free ports for the requested pod ports/;
    let message = '';
    await waitFor("the extender's FailedScheduling event naming the ports", 90_000, async () => {
      const events = await getJson('c1', 'events', '-n', ns, '--field-selector', `involvedObject.name=${waiting.metadata.name},reason=FailedScheduling`);
      message = events.items.map((e: any) => e.message).join('\n');
      return filtered.test(message);
    });
    expect((await running()).length).to.equal(2);
  });

  it('sends new pods to c1 at once when every c2 node is cordoned, before the source has read the news', async () => {
    const c2Nodes = [...(await freeCpu('c2')).keys()];
    for (const n of c2Nodes) await kubectl('c2', 'cordon', n);
    try {
      // No wait for the summary: the pods that still go to c2 are refused by c2's scheduler at bind.
      const names = Array.from({ length: 6 }, (_, i) => `p${i}`);
      await Promise.all(names.map((n) => apply('c1', electedPod(n, ns, '100m'))));
      const started = Date.now();
      await waitFor(
        'every pod Running',
        90_000,
        async () => (await getJson('c1', 'pods', '-n', ns, '-l', 'app=placement')).items.filter((p: any) => p.status.phase === 'Running').length === names.length,
      );
      console.log(`      ${names.length} pods Running in ${((Date.now() - started) / 1000).toFixed(1)} s`);
      for (const p of (await getJson('c1', 'pods', '-n', ns, '-l', 'app=placement')).items) expect(p.spec.nodeName, p.metadata.name).to.equal(nodes.c1Node);
      expect(await delegatesIn('c2', ns)).to.deep.equal([]);
    } finally {
      for (const n of c2Nodes) await kubectl('c2', 'uncordon', n);
    }
  });

  it('judges a pod of a RuntimeClass as its target will admit it: the nodes the class selects, its overhead, a class the target lacks', async () => {
    // The source's admission wants the class too (and sets the source's overhead on the proxy);
    // c2's class runs on its last node only, with 2 cpu of overhead. A second class only c1 has.
    const rc = `${ns}-rc`;
    const onlyC1 = `${ns}-c1`;
    const c2Nodes = [...(await freeCpu('c2')).keys()].sort();
    const runtimeNode = c2Nodes[c2Nodes.length - 1];
    const runtimeClass = (name: string, extra: string) => `apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: ${name}}\nhandler: runsc\n${extra}`;
    await apply('c1', `${runtimeClass(rc, 'overhead: {podFixed: {cpu: 250m}}\n')}---\n${runtimeClass(onlyC1, '')}`);
    await apply('c2', runtimeClass(rc, `overhead: {podFixed: {cpu: "2"}}\nscheduling: {nodeSelector: {kubernetes.io/hostname: ${runtimeNode}}}\n`));
    try {
      await waitFor("c2's summary to publish its class", 30_000, async () => ((await getJson('c2', 'clustersummary', 'singleton')).runtimeClasses ?? []).some((c: any) => c.name === rc));
      // 3 cpu free on every c2 node: the pod's 2 fit any of them, its 2 + 2 of overhead none, and
      // only one is the class's. c1 reads summaries on its probe period.
      await squeeze('c2', ns, 3000);
      await followedFree('c2', nodes.c2Node);
      const ofClass = (name: string, runtimeClassName: string) => {
        const pod = JSON.parse(electedPod(name, ns, '2', { annotations: ONLY_C2 }));
        pod.spec.runtimeClassName = runtimeClassName;
        return JSON.stringify(pod);
      };
      await apply('c1', ofClass('sandboxed', rc));
      await apply('c1', ofClass('elsewhere', onlyC1));
      const messages = async (pod: string) =>
        (await getJson('c1', 'events', '-n', ns, '--field-selector', `involvedObject.name=${pod},reason=FailedScheduling`)).items.map((e: any) => e.message).join('\n');
      await waitFor('both FailedScheduling events', 60_000, async () => (await messages('sandboxed')).includes('c2 fits') && (await messages('elsewhere')).includes('c2 fits'));
      expect(await messages('sandboxed')).to.match(/no node in [\w-]+\/c2 fits: 1 Insufficient cpu \(largest free 3\), 1 node\(s\) didn't match Pod's node affinity\/selector/);
      expect(await messages('elsewhere')).to.match(new RegExp(`no node in [\\w-]+/c2 fits: [\\w-]+/c2 has no RuntimeClass ${onlyC1}`));
      // Judged before any delegate was made: c2's own words (its scheduler's, its admission's) never came.
      await sleep(12_000);
      expect(await delegatesIn('c2', ns)).to.deep.equal([]);
      expect(`${await messages('sandboxed')}\n${await messages('elsewhere')}`).not.to.match(/nodes are available|refused to create/);
      // Room on the class's node: the pod runs there, with c2's overhead.
      await kubectl('c2', 'delete', 'pod', '-n', ns, `hog-${runtimeNode}`, '--grace-period=0', '--force');
      await waitFor('the pod of the class Running', 90_000, async () => (await getJson('c1', 'pod', 'sandboxed', '-n', ns)).status.phase === 'Running');
      const [delegate] = await delegatesIn('c2', ns);
      expect(delegate.spec.nodeName).to.equal(runtimeNode);
      expect(delegate.spec.overhead).to.deep.equal({ cpu: '2' });
      expect((await getJson('c1', 'pod', 'sandboxed', '-n', ns)).spec.overhead).to.deep.equal({ cpu: '250m' });
    } finally {
      await kubectl('c1', 'delete', 'runtimeclass', rc, onlyC1, '--ignore-not-found');
      await kubectl('c2', 'delete', 'runtimeclass', rc, '--ignore-not-found');
    }
  });

  it('keeps a pod off a target without its PriorityClass before any delegate is made there, and runs it where the class is', async () => {
    const urgent = `${ns}-urgent`;
    await apply('c1', `apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: ${urgent}}\nvalue: 1000\n`);
    try {
      await waitFor("c1's summary to publish the class", 30_000, async () => ((await getJson('c1', 'clustersummary', 'singleton')).priorityClasses ?? []).includes(urgent));
      // c1 reads summaries on its probe period.
      await sleep(12_000);
      const ofClass = (name: string, nodeSelector?: Record<string, string>) => {
        const p = JSON.parse(electedPod(name, ns, '100m', { nodeSelector }));
        p.spec.priorityClassName = urgent;
        return JSON.stringify(p);
      };
      await apply('c1', ofClass('anywhere'));
      await apply('c1', ofClass('only-c2', { 'multicluster.admiralty.io/target-name': 'c2' }));
      await waitFor('the free pod Running', 60_000, async () => (await getJson('c1', 'pod', 'anywhere', '-n', ns)).status.phase === 'Running');
      expect((await getJson('c1', 'pod', 'anywhere', '-n', ns)).spec.nodeName).to.equal(nodes.c1Node);
      let message = '';
      await waitFor("only-c2's PodScheduled condition", 60_000, async () => {
        message = (await getJson('c1', 'pod', 'only-c2', '-n', ns)).status.conditions?.find((c: any) => c.type === 'PodScheduled')?.message ?? '';
        return message.includes('c2');
      });
      expect(message).to.match(new RegExp(`no node in [\\w-]+/c2 fits: [\\w-]+/c2 has no PriorityClass ${urgent}`));
      // c2's admission was never asked.
      const events = (await getJson('c1', 'events', '-n', ns, '--field-selector', 'reason=FailedScheduling')).items.map((e: any) => e.message).join('\n');
      expect(events).not.to.match(/refused to create/);
      expect(await delegatesIn('c2', ns)).to.deep.equal([]);
    } finally {
      await kubectl('c1', 'delete', 'priorityclass', urgent, '--ignore-not-found');
    }
  });

  describe('with priority', () => {
    // c2's two nodes have 32 cpu each: four low-priority pods of 14 cpu, held to c2, fill them to
    // 4 cpu free each. A higher-priority pod that c2's virtual node cannot take as a whole makes
    // the proxy scheduler preempt, and the extender says which proxies.
    const lows = ['low-0', 'low-1', 'low-2', 'low-3'];
    let low: string;
    let high: string;
    const withPriority = (name: string, cpu: string, priorityClassName: string) => {
      const pod = JSON.parse(electedPod(name, ns, cpu, { annotations: ONLY_C2 }));
      pod.spec.priorityClassName = priorityClassName;
      // A victim's delegate holds its room for its grace period (the proxy's): short, to keep the test short.
      pod.spec.terminationGracePeriodSeconds = 1;
      return JSON.stringify(pod);
    };
    /** The low-priority pods: name, UID and whether they are being deleted. */
    const lowPods = async (): Promise<string[]> =>
      (await getJson('c1', 'pods', '-n', ns, '-l', 'app=placement')).items
        .filter((p: any) => lows.includes(p.metadata.name))
        .map((p: any) => `${p.metadata.name}/${p.metadata.uid}/${p.metadata.deletionTimestamp ?? ''}`)
        .sort();

    beforeEach(async () => {
      low = `${ns}-low`;
      high = `${ns}-high`;
      for (const cluster of ['c1', 'c2']) {
        await apply(
          cluster,
          `apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: ${low}}\nvalue: 100\n---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: ${high}}\nvalue: 1000\n`,
        );
      }
      for (const n of lows) await apply('c1', withPriority(n, '14', low));
      await waitFor(
        'the four low-priority pods Running',
        90_000,
        async () => (await getJson('c1', 'pods', '-n', ns, '-l', 'app=placement')).items.filter((p: any) => p.status.phase === 'Running').length === 4,
      );
    });

    afterEach(async () => {
      await kubectl('c1', 'delete', 'pods', '-n', ns, '--all', '--wait=false');
      for (const cluster of ['c1', 'c2']) await kubectl(cluster, 'delete', 'priorityclass', low, high, '--ignore-not-found');
    });

    it('preempts nothing for a pod that no node of the target could run', async () => {
      // 40 cpu: by what c2's virtual node offers in all (64 cpu), evicting three would make room;
      // on a real node, nothing can. Before the extender judged preemption, kube-scheduler
      // deleted three of them in the first 30 s, then their replacements.
      const before = await lowPods();
      await apply('c1', withPriority('high', '40', high));
      await waitFor(
        "the high-priority pod's FailedScheduling",
        60_000,
        async () => (await getJson('c1', 'events', '-n', ns, '--field-selector', 'involvedObject.name=high,reason=FailedScheduling')).items.length > 0,
      );
      await sleep(20_000);
      expect(await lowPods(), 'the same four pods, none being deleted').to.deep.equal(before);
      const preempted = (await getJson('c1', 'events', '-n', ns, '--field-selector', 'reason=Preempted')).items;
      expect(preempted.map((e: any) => e.message)).to.deep.equal([]);
      expect((await getJson('c1', 'pod', 'high', '-n', ns)).spec.nodeName).to.equal(undefined);
    });

    it('preempts the two proxies of one c2 node that make room there, and runs the pod on that node', async () => {
      // 24 cpu: by the virtual node's sum, one victim of each node would do (8 + 28), but then no
      // node has 24; both of one node must go (4 + 28).
      const delegateNode = new Map<string, string>();
      for (const d of await delegatesIn('c2', ns)) delegateNode.set(d.metadata.annotations['multicluster.admiralty.io/parent-name'], d.spec.nodeName);
      await apply('c1', withPriority('high', '24', high));
      await waitFor('the high-priority pod Running', 120_000, async () => (await getJson('c1', 'pod', 'high', '-n', ns)).status.phase === 'Running');
      const preempted = (await getJson('c1', 'events', '-n', ns, '--field-selector', 'reason=Preempted')).items.map((e: any) => e.involvedObject.name).sort();
      expect(preempted).to.have.length(2);
      expect(new Set(preempted.map((n: string) => delegateNode.get(n))).size, `${preempted} were on one node`).to.equal(1);
      const [delegate] = (await delegatesIn('c2', ns)).filter((d: any) => d.metadata.annotations['multicluster.admiralty.io/parent-name'] === 'high');
      expect(delegate.spec.nodeName).to.equal(delegateNode.get(preempted[0]));
      // The other two stay (bare pods: the two preempted are gone for good).
      await waitFor('the preempted pods gone', 60_000, async () => (await lowPods()).length === 2);
      expect((await lowPods()).map((p: string) => p.split('/')[0])).to.deep.equal(lows.filter((n) => !preempted.includes(n)));
    });

    it("spares the proxies a PodDisruptionBudget protects: the other node's two go", async () => {
      // The two proxies whose delegates are on the first c2 node by name, the one an even choice
      // would take (the test above), are guarded by a budget that allows no disruption.
      const delegateNode = new Map<string, string>();
      for (const d of await delegatesIn('c2', ns)) delegateNode.set(d.metadata.annotations['multicluster.admiralty.io/parent-name'], d.spec.nodeName);
      const first = [...new Set(delegateNode.values())].sort()[0];
      const guarded = lows.filter((n) => delegateNode.get(n) === first);
      expect(guarded).to.have.length(2);
      for (const n of guarded) await kubectl('c1', 'label', 'pod', n, '-n', ns, 'guard=yes');
      await apply('c1', `apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: guard, namespace: ${ns}}\nspec: {minAvailable: 2, selector: {matchLabels: {guard: 'yes'}}}\n`);
      await waitFor("the source's disruption controller to count both guarded proxies healthy", 60_000, async () => {
        const pdb = await getJson('c1', 'pdb', 'guard', '-n', ns);
        return pdb.status?.currentHealthy === 2 && pdb.status?.disruptionsAllowed === 0 && pdb.status?.observedGeneration === pdb.metadata.generation;
      });
      await apply('c1', withPriority('high', '24', high));
      await waitFor('the high-priority pod Running', 120_000, async () => (await getJson('c1', 'pod', 'high', '-n', ns)).status.phase === 'Running');
      const preempted = (await getJson('c1', 'events', '-n', ns, '--field-selector', 'reason=Preempted')).items.map((e: any) => e.involvedObject.name).sort();
      expect(preempted).to.deep.equal(lows.filter((n) => !guarded.includes(n)));
      const [delegate] = (await delegatesIn('c2', ns)).filter((d: any) => d.metadata.annotations['multicluster.admiralty.io/parent-name'] === 'high');
      expect(delegate.spec.nodeName).to.not.equal(first);
      const guardedLeft = (await lowPods()).filter((p) => guarded.includes(p.split('/')[0]!));
      expect(
        guardedLeft.filter((p) => !p.endsWith('/')),
        'no guarded proxy being deleted',
      ).to.deep.equal([]);
      expect(guardedLeft).to.have.length(2);
    });
  });

  it('never leaves a delegate Pending for lack of room in two concurrent bursts, while another target has room', async () => {
    // 4 cpu free on every node of both clusters (16 in all), then two bursts of 7 pods of 1 cpu.
    await squeeze('c1', ns, 4_000);
    await squeeze('c2', ns, 4_000);
    for (const [cluster, node] of [
      ['c1', nodes.c1Node],
      ['c2', nodes.c2Node],
    ] as const) {
      expect(await followedFree(cluster, node), `what c1's view of ${cluster} offers`).to.be.at.most(8_000);
    }
    const burst = (tag: string) => Promise.all(Array.from({ length: 7 }, (_, i) => apply('c1', electedPod(`${tag}-${i}`, ns, '1'))));
    await Promise.all([burst('a'), burst('b')]);
    await waitFor('all 14 pods Running', 120_000, async () => (await getJson('c1', 'pods', '-n', ns, '-l', 'app=placement')).items.filter((p: any) => p.status.phase === 'Running').length === 14);
    const where = new Map<string, number>();
    for (const p of (await getJson('c1', 'pods', '-n', ns, '-l', 'app=placement')).items) where.set(p.spec.nodeName, (where.get(p.spec.nodeName) ?? 0) + 1);
    console.log(`      placed: ${[...where].map(([n, k]) => `${k} on ${n}`).join(', ')}`);
    for (const cluster of ['c1', 'c2']) {
      for (const d of await delegatesIn(cluster, ns)) expect(d.status.phase, `${cluster} ${d.metadata.name}`).to.equal('Running');
    }
  });
});
