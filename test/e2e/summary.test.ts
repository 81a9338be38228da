import { expect } from 'chai';
import { PROVIDER_USER } from '../sandbox/sandbox.js';
import { apply, connectNamespace, disconnectNamespace, getJson, kubectl, readyOf, sandbox, settleTeardowns, uniqueName, waitFor } from './support.js';

const milliCpu = (q: string | undefined): number => (q === undefined ? NaN : q.endsWith('m') ? Number(q.slice(0, -1)) : Number(q) * 1000);

/** Each cluster describes itself honestly: its nodes, and what is free on each. */
describe('ClusterSummary', function () {
  this.timeout(120_000);

  it("lists c2's real nodes with what is free on each; a pod of c2's own takes room off its node and off c2's virtual node in c1", async () => {
    // The earlier tests' namespaces go away in the background: their delegates leaving c2 and
    // their proxies leaving c1 move what c1's virtual node offers (free in c2, plus what the
    // proxies hold there), which this test reads exactly.
    await settleTeardowns();
    const summary = await getJson('c2', 'clustersummary', 'singleton');
    const nodes = summary.nodePools.flatMap((p: any) => p.nodes);
    const realNodes = (await getJson('c2', 'nodes')).items.map((n: any) => n.metadata.name).sort();
    expect(nodes.map((n: any) => n.name).sort()).to.deep.equal(realNodes);
    for (const n of nodes) {
      expect(n.allocatable.cpu, n.name).to.be.a('string');
      expect(milliCpu(n.free.cpu), n.name).to.be.at.most(milliCpu(n.allocatable.cpu));
    }
    expect(summary.free.cpu).to.be.a('string');

    // A pod that is not ours, pinned to the first node, asking for a visible amount of cpu.
    const target = nodes[0].name;
    const before = milliCpu(nodes[0].free.cpu);
    // What c1's virtual node for c2 offers its scheduler follows what is free in c2.
    const virtualNode = 'admiralty-namespace-default-c2';
    const offered = async () => milliCpu((await getJson('c1', 'node', virtualNode)).status.allocatable.cpu);
    // Steady: the same across a whole probe period (10 s), e.g. after a provider restart.
    let offeredBefore = await offered();
    await waitFor(`what ${virtualNode} offers, steady`, 60_000, async () => {
      await new Promise((r) => setTimeout(r, 11_000));
      const now = await offered();
      const steady = now === offeredBefore;
      offeredBefore = now;
      return steady;
    });
    const ns = uniqueName('summary');
    await kubectl('c2', 'create', 'namespace', ns);
    try {
      await apply(
        'c2',
        `apiVersion: v1\nkind: Pod\nmetadata: {name: hog, namespace: ${ns}}\nspec:\n  nodeName: ${target}\n  containers: [{name: c, image: busybox, resources: {requests: {cpu: 700m}}}]\n`,
      );
      const freeOn = async () => {
        const s = await getJson('c2', 'clustersummary', 'singleton');
        return milliCpu(s.nodePools.flatMap((p: any) => p.nodes).find((n: any) => n.name === target).free.cpu);
      };
      await waitFor(`700m less free on ${target}`, 30_000, async () => (await freeOn()) === before - 700);
      await waitFor(`700m less offered by ${virtualNode}`, 45_000, async () => (await offered()) === offeredBefore - 700);
      await kubectl('c2', 'delete', 'pod', 'hog', '-n', ns, '--grace-period=0', '--force');
      await waitFor(`the room back on ${target}`, 30_000, async () => (await freeOn()) === before);
      await waitFor(`the room offered again by ${virtualNode}`, 45_000, async () => (await offered()) === offeredBefore);
    } finally {
      await kubectl('c2', 'delete', 'namespace', ns, '--wait=false', '--ignore-not-found');
    }
  });

  it("leaves the pods of virtual nodes (in c1, its proxies) out at the server: c1's summary watch names each virtual node", async function () {
    const watches = sandbox.auditedWatches('c1', PROVIDER_USER);
    if (!watches) this.skip(); // a sandbox started before audit logging
    const virtualNodes = (await kubectl('c1', 'get', 'nodes', '-l', 'virtual-kubelet.io/provider=admiralty', '-o', 'name'))
      .split('\n')
      .filter(Boolean)
      .map((n) => n.replace('node/', ''));
    expect(virtualNodes.length).to.be.at.least(1);
    // The newest watch of all pods by c1's provider with the summary's selection of assigned pods.
    const newest = watches.filter((w) => w.path === '/api/v1/pods' && w.fieldSelector.startsWith('spec.nodeName!=,status.phase!=Succeeded')).at(-1)?.fieldSelector ?? '';
    expect(newest.split(','), 'the summary watch leaves out every virtual node').to.include.members(virtualNodes.map((n) => `spec.nodeName!=${n}`));
    // And c1's summary counts c1's real nodes only.
    const summary = await getJson('c1', 'clustersummary', 'singleton');
    const realNodes = (await getJson('c1', 'nodes')).items
      .filter((n: any) => !virtualNodes.includes(n.metadata.name))
      .map((n: any) => n.metadata.name)
      .sort();
    expect(
      summary.nodePools
        .flatMap((p: any) => p.nodes)
        .map((n: any) => n.name)
        .sort(),
    ).to.deep.equal(realNodes);
  });

  it("is renewed by c2's provider every renew interval; once it stops, c1 takes Target c2 out of placement (ClusterSummaryStale), and back once it writes again", async function () {
    this.timeout(300_000);
    const ns = uniqueName('stale');
    const { c2Node } = await connectNamespace(ns);
    const target = () => getJson('c1', 'target', 'c2', '-n', ns);
    const readyCondition = async () => (await target()).status?.conditions?.find((c: any) => c.type === 'Ready');
    // The provider as shipped, renewing every 3 s, so that three renewals are missed in 9 s.
    await sandbox.stop('c2', 'provider');
    await sandbox.start('c2', 'provider', { extraArgs: ['--summary-renew-interval-seconds=3'] });
    try {
      // A renew interval other than the stored one is written at once, then renewed.
      let first: any;
      await waitFor("c2's summary declaring a renewal every 3 s", 60_000, async () => (first = await getJson('c2', 'clustersummary', 'singleton')).renewIntervalSeconds === 3);
      expect(Date.parse(first.renewTime)).to.be.a('number').and.not.NaN;
      await waitFor("c2's summary renewed", 20_000, async () => {
        const now = await getJson('c2', 'clustersummary', 'singleton');
        return now.metadata.resourceVersion !== first.metadata.resourceVersion && Date.parse(now.renewTime) > Date.parse(first.renewTime);
      });
      await waitFor(`Target ${ns}/c2 Ready`, 60_000, async () => (await readyCondition())?.status === 'True');

      // The writer stops: c2 still answers, but its summary no longer moves.
      await sandbox.stop('c2', 'provider');
      const stoppedAt = Date.now();
      let condition: any;
      // 3 x 3 s + one probe period (10 s) unchanged, seen by a probe (every 10 s).
      await waitFor(`Target ${ns}/c2 not Ready for a stale summary`, 60_000, async () => (condition = await readyCondition())?.reason === 'ClusterSummaryStale');
      const tookS = (Date.now() - stoppedAt) / 1000;
      console.log(`      stale summary noticed ${tookS.toFixed(1)} s after the writer stopped`);
      expect(condition.status).to.equal('False');
      // Not before three renewals and a probe period were missed, by the provider's own count
      // (its monotonic clock, from when it first saw that version), not by the test's clock.
      const unchangedS = Number(/has not changed for (\d+) s/.exec(condition.message)?.[1]);
      expect(unchangedS, `seconds unchanged in: ${condition.message}`).to.be.at.least(3 * 3 + 10);
      expect(condition.message).to.match(
        /^the target at https:\/\/\S+: its ClusterSummary has not changed for \d+ s, though its writer rewrites it every 3 s at the longest \(last written at .*, by its clock\): the provider there \(its summary component\) is down or cannot write/,
      );
      const node = await getJson('c1', 'node', c2Node);
      expect(node.status.conditions.find((c: any) => c.type === 'Ready')).to.deep.include({ status: 'False', reason: 'ClusterSummaryStale' });
      // Its own cluster's Target keeps its summary, written by c1's provider.
      expect(readyOf(await getJson('c1', 'target', 'c1', '-n', ns))).to.equal('True');
    } finally {
      // The provider as shipped: its renew interval differs from the stored one, so it writes at once.
      await sandbox.start('c2', 'provider');
    }
    try {
      await waitFor(`Target ${ns}/c2 Ready again`, 60_000, async () => (await readyCondition())?.status === 'True');
      expect((await getJson('c2', 'clustersummary', 'singleton')).renewIntervalSeconds).to.equal(30);
    } finally {
      await disconnectNamespace(ns);
    }
  });
});
