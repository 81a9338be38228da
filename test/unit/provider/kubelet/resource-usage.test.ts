import { expect } from 'chai';
import type { V1Pod } from '@kubernetes/client-node';
import type { TargetClient } from '../../../../provider/clusters/target-client.js';
import { FakeClock } from '../../../../provider/core/clock.js';
import { silentLogger } from '../../../../provider/core/logger.js';
import { ResourceUsage, type PodMetricsRead } from '../../../../provider/kubelet/resource-usage.js';
import { PARENT_CLUSTER_NAME_LABEL, PARENT_UID_LABEL } from '../../../../provider/core/keys.js';
import { delegatePodName } from '../../../../provider/model/names.js';
import { buildStatsSummary, type PodSample } from '../../../../provider/model/resource-metrics.js';
import { proxy as baseProxy } from '../../../support/pods.js';

const NODE = 'admiralty-namespace-default-c2';
const T0 = Date.UTC(2026, 10, 23, 10);
const target = { key: 'Target/default/c2', displayName: 'default/c2' } as TargetClient;

function proxy(name: string, uid: string, startedMs: number, namespace = 'default'): V1Pod {
  return baseProxy({
    name,
    namespace,
    uid,
    spec: { containers: [{ name: 'app' }] },
    nodeName: NODE,
    status: { startTime: new Date(startedMs), containerStatuses: [{ name: 'app', ready: true, restartCount: 0, image: 'i', imageID: '', state: { running: { startedAt: new Date(startedMs) } } }] },
  });
}
const sample = (timestampMs: number, cpuNanoCores: number, memory = 2 ** 20): PodSample => ({
  timestampMs,
  windowMs: 15_000,
  containers: [{ name: 'app', cpuNanoCores, memoryWorkingSetBytes: memory }],
});

function setup() {
  const clock = new FakeClock(T0);
  const proxies: V1Pod[] = [proxy('web-a', 'ua', T0 - 60_000)];
  /** Delegate name -> sample, per namespace; or a reason the metrics API is unavailable. */
  let metrics: Map<string, PodSample> | string = new Map();
  const calls = { list: [] as string[], read: [] as string[] };
  /** Proxies whose delegate the cache does not hold (not created yet, or refused). */
  const noDelegate = new Set<string>();
  const told: Array<[boolean, string]> = [];
  const usage = new ResourceUsage({
    // The proxies cache, which keeps no container statuses (see proxyFields).
    proxiesOn: (nodeName) => {
      calls.list.push(nodeName);
      return proxies.filter((p) => p.spec?.nodeName === nodeName).map((p) => ({ ...p, status: { startTime: p.status?.startTime } }));
    },
    // The delegates cache: the containers' start times are the delegate's (the proxy mirrors them).
    delegate: (targetKey, namespace, name) => {
      expect(targetKey).to.equal(target.key);
      const p = proxies.find((q) => q.metadata?.namespace === namespace && delegatePodName(q.metadata!.name!, 'c1', q.metadata!.uid!) === name);
      if (!p || noDelegate.has(p.metadata!.name!)) return undefined;
      return { metadata: { name, namespace, labels: { [PARENT_CLUSTER_NAME_LABEL]: 'c1', [PARENT_UID_LABEL]: p.metadata!.uid! } }, status: p.status };
    },
    registry: { byNodeName: (n: string) => (n === NODE ? target : undefined) },
    sourceClusterName: 'c1',
    clock,
    logger: silentLogger(),
    onAvailability: (_t, available, reason) => told.push([available, reason]),
    read: async (_t, ns, selector): Promise<PodMetricsRead> => {
      calls.read.push(`${ns}?${selector}`);
      return typeof metrics === 'string' ? { unavailable: metrics } : { samples: metrics };
    },
    ttlMs: 5_000,
  });
  const delegate = (name: string, uid: string) => delegatePodName(name, 'c1', uid);
  return { clock, proxies, calls, told, usage, delegate, noDelegate, setMetrics: (m: Map<string, PodSample> | string) => (metrics = m) };
}

describe('ResourceUsage', () => {
  it("reads the node's proxies once and each namespace's PodMetrics once per scrape, reused within the TTL", async () => {
    const s = setup();
    s.proxies.push(proxy('web-b', 'ub', T0 - 60_000), proxy('job', 'uj', T0 - 60_000, 'batch'));
    s.setMetrics(new Map([[s.delegate('web-a', 'ua'), sample(T0, 100_000_000)]]));
    const [a, b] = await Promise.all([s.usage.nodeUsage(NODE), s.usage.nodeUsage(NODE)]);
    expect(a).to.equal(b);
    expect(s.calls.list).to.deep.equal([NODE]);
    expect(s.calls.read).to.deep.equal(['default?multicluster.admiralty.io/parent-cluster-name=c1', 'batch?multicluster.admiralty.io/parent-cluster-name=c1']);
    s.clock.advance(4_999);
    await s.usage.nodeUsage(NODE);
    expect(s.calls.list.length).to.equal(1);
    s.clock.advance(1);
    await s.usage.nodeUsage(NODE);
    expect(s.calls.list.length).to.equal(2);
    expect(s.calls.read.length).to.equal(4);
  });

  it('counts only proxies with a delegate in the cache, and reads only their namespaces in the target', async () => {
    const s = setup();
    // Bound to the node from a namespace the target does not serve: refused, no delegate.
    s.proxies.push(proxy('intruder', 'ui', T0 - 60_000, 'elsewhere'));
    s.noDelegate.add('intruder');
    s.setMetrics(new Map([[s.delegate('web-a', 'ua'), sample(T0, 200_000_000)]]));
    const usage = (await s.usage.nodeUsage(NODE))!;
    expect(usage.pods.map((p) => p.name)).to.deep.equal(['web-a']);
    expect(s.calls.read).to.deep.equal(['default?multicluster.admiralty.io/parent-cluster-name=c1']);
  });

  it('answers null for a node that is not one of ours, without reading anything', async () => {
    const s = setup();
    expect(await s.usage.nodeUsage('kwok-node-0')).to.equal(null);
    expect(await s.usage.nodeUsage('kwok-node-0')).to.equal(null);
    expect(s.calls.list).to.deep.equal([]);
  });

  it("turns the target's CPU rates into counters that give metrics-server those rates back", async () => {
    const s = setup();
    s.setMetrics(new Map([[s.delegate('web-a', 'ua'), sample(T0, 200_000_000)]]));
    const first = (await s.usage.nodeUsage(NODE))!;
    // First seen: as if it had run at 200m since it started, 60 s ago.
    expect(first.pods[0]!.containers[0]).to.deep.include({ name: 'app', cpuCoreSeconds: 12, cpuNanoCores: 200_000_000, timestampMs: T0, startTimeMs: T0 - 60_000 });
    s.clock.advance(15_000);
    s.setMetrics(new Map([[s.delegate('web-a', 'ua'), sample(T0 + 15_000, 600_000_000)]]));
    const second = (await s.usage.nodeUsage(NODE))!.pods[0]!.containers[0]!;
    // (12 + 0.6 x 15 - 12) / 15 s = 600m, the rate the target measured.
    expect(second.cpuCoreSeconds).to.be.closeTo(21, 1e-9);
    expect((second.cpuCoreSeconds - 12) / 15).to.be.closeTo(0.6, 1e-9);
    // A sample no newer leaves the counter where it is.
    s.clock.advance(15_000);
    expect((await s.usage.nodeUsage(NODE))!.pods[0]!.containers[0]!.cpuCoreSeconds).to.be.closeTo(21, 1e-9);
  });

  it('sums the proxies into the node, whose CPU counter never goes back when a proxy goes', async () => {
    const s = setup();
    s.proxies.push(proxy('web-b', 'ub', T0 - 10_000));
    s.setMetrics(
      new Map([
        [s.delegate('web-a', 'ua'), sample(T0, 100_000_000, 2 ** 20)],
        [s.delegate('web-b', 'ub'), sample(T0, 300_000_000, 2 ** 21)],
        // A delegate of no proxy bound here (another source, or gone): not counted.
        ['stranger-x1', sample(T0, 900_000_000)],
      ]),
    );
    const first = (await s.usage.nodeUsage(NODE))!;
    expect(first.pods.map((p) => p.name)).to.deep.equal(['web-a', 'web-b']);
    expect(first).to.deep.include({ cpuNanoCores: 400_000_000, memoryWorkingSetBytes: 3 * 2 ** 20 });
    expect(first.cpuCoreSeconds).to.be.closeTo(0.1 * 60 + 0.3 * 10, 1e-9);
    s.proxies.splice(1, 1);
    s.clock.advance(10_000);
    const second = (await s.usage.nodeUsage(NODE))!;
    expect(second.pods.map((p) => p.name)).to.deep.equal(['web-a']);
    // The node advanced by its current rate (100m) over the 10 s, rather than dropping web-b's
    // share: metrics-server reads back the sum of the proxies it now has.
    expect(second.cpuCoreSeconds).to.be.closeTo(9 + 0.1 * 10, 1e-9);
    expect(second).to.deep.include({ cpuNanoCores: 100_000_000, memoryWorkingSetBytes: 2 ** 20, timestampMs: T0 + 10_000 });
  });

  it('tells once when the target has no metrics API and once when it is back; the node still answers meanwhile', async () => {
    const s = setup();
    s.setMetrics('the metrics.k8s.io API is not served (no metrics-server?)');
    const none = (await s.usage.nodeUsage(NODE))!;
    expect(none.pods).to.deep.equal([]);
    s.clock.advance(5_000);
    await s.usage.nodeUsage(NODE);
    expect(s.told).to.deep.equal([[false, 'the metrics.k8s.io API is not served (no metrics-server?)']]);
    s.setMetrics(new Map([[s.delegate('web-a', 'ua'), sample(T0 + 5_000, 1_000_000)]]));
    s.clock.advance(5_000);
    expect((await s.usage.nodeUsage(NODE))!.pods.length).to.equal(1);
    expect(s.told.map(([available]) => available)).to.deep.equal([false, true]);
  });

  it("takes a delegate's start time that is no time as unknown: no NaN in the node's counter, and /stats/summary answers", async () => {
    const s = setup();
    // The delegates cache holds what the target's server wrote, unchecked.
    const odd = proxy('web-b', 'ub', T0 - 10_000);
    odd.status!.containerStatuses![0]!.state!.running!.startedAt = 'yesterday' as unknown as Date;
    s.proxies.push(odd);
    s.setMetrics(
      new Map([
        [s.delegate('web-a', 'ua'), sample(T0, 100_000_000)],
        [s.delegate('web-b', 'ub'), sample(T0, 300_000_000)],
      ]),
    );
    const first = (await s.usage.nodeUsage(NODE))!;
    // Unknown start: as if it had run at its rate over the sample's window.
    expect(first.pods[1]!.containers[0]).to.deep.include({ startTimeMs: undefined, cpuCoreSeconds: 0.3 * 15 });
    expect(first.cpuCoreSeconds).to.be.closeTo(0.1 * 60 + 0.3 * 15, 1e-9);
    expect(() => buildStatsSummary(first)).not.to.throw();
    s.clock.advance(10_000);
    expect((await s.usage.nodeUsage(NODE))!.cpuCoreSeconds).to.be.closeTo(0.1 * 60 + 0.3 * 15 + 0.4 * 10, 1e-9);
  });
});
