import { expect } from 'chai';
import { capacityVerdict, checkPodSets, flavorTarget, MAX_PODS_PLACED } from '../../../../provider/model/kueue-capacity-check.js';
import type { ClusterSummary, TargetRef } from '../../../../provider/model/types.js';

const node = (name: string, cpu: string, memory = '64Gi', extra: { notReady?: boolean; unschedulable?: boolean } = {}) => ({
  name,
  allocatable: { cpu: '32', memory: '64Gi', pods: '110' },
  free: { cpu, memory, pods: '100' },
  ...extra,
});
const summary = (...nodes: ReturnType<typeof node>[]): ClusterSummary => ({ metadata: { name: 'singleton' }, nodePools: [{ labels: {}, nodes }] });
const podSet = (name: string, count: number, cpu: string, memory = '1Gi') => ({ name, count, template: { spec: { containers: [{ name: 'main', resources: { requests: { cpu, memory } } }] } } });

describe('kueue capacity check: the decision', () => {
  const c1: TargetRef = { kind: 'Target', namespace: 'team', name: 'c1' };
  const c2: TargetRef = { kind: 'Target', namespace: 'team', name: 'c2' };
  const gpu: TargetRef = { kind: 'ClusterTarget', namespace: '', name: 'gpu' };

  it("finds the target whose identity labels a flavor's nodeLabels carry, and none for a flavor of no target", () => {
    const labels = { 'virtual-kubelet.io/provider': 'admiralty', 'multicluster.admiralty.io/target-namespace': 'team', 'multicluster.admiralty.io/target-name': 'c2' };
    expect(flavorTarget(labels, [c1, c2, gpu])).to.equal(c2);
    expect(flavorTarget({ 'virtual-kubelet.io/provider': 'admiralty', 'multicluster.admiralty.io/cluster-target-name': 'gpu' }, [c1, gpu])).to.equal(gpu);
    expect(flavorTarget({ 'cloud.example.com/spot': 'true' }, [c1, c2])).to.equal(undefined);
    expect(flavorTarget(undefined, [c1])).to.equal(undefined);
  });

  it("reads each pod set's count and per-pod requests, a pod slot included", () => {
    const [set] = checkPodSets([podSet('main', 3, '500m')]);
    expect(set!.count).to.equal(3);
    expect(Object.fromEntries(set!.requests)).to.deep.equal({ cpu: 500_000_000n, memory: 1024n ** 3n * 1_000_000_000n, pods: 1_000_000_000n });
  });

  it('is Ready when every pod fits on some node that takes new pods, one after another', () => {
    const v = capacityVerdict('team/c2', summary(node('a', '2'), node('b', '2')), checkPodSets([podSet('main', 4, '1')]));
    expect(v).to.deep.equal({ state: 'Ready', message: 'all 4 pods fit in team/c2 now' });
  });

  it('is Retry, naming what is short, when the room is there in sum but not on one node', () => {
    const v = capacityVerdict('team/c2', summary(node('a', '1500m'), node('b', '1500m')), checkPodSets([podSet('main', 1, '2')]));
    expect(v.state).to.equal('Retry');
    expect(v.message).to.equal('0 of 1 pods fit in team/c2 now: no node has room for another pod of set main (the largest free node: cpu 2 (1500m free))');
  });

  it('is Retry when the last pods of a set find no room, saying how many fit', () => {
    const v = capacityVerdict('team/c2', summary(node('a', '2'), node('b', '1')), checkPodSets([podSet('main', 4, '1')]));
    expect(v.state).to.equal('Retry');
    expect(v.message).to.match(/^3 of 4 pods fit in team\/c2 now/);
  });

  it('leaves out nodes that are not Ready or are cordoned', () => {
    const v = capacityVerdict('team/c2', summary(node('a', '8', '64Gi', { notReady: true }), node('b', '8', '64Gi', { unschedulable: true })), checkPodSets([podSet('main', 1, '1')]));
    expect(v.state).to.equal('Retry');
  });

  it('places the largest pods first, so small ones do not take the room a large one needs', () => {
    const v = capacityVerdict('team/c2', summary(node('a', '4'), node('b', '1')), checkPodSets([podSet('small', 1, '1'), podSet('large', 1, '4')]));
    expect(v.state).to.equal('Ready');
  });

  it('is Retry while the target has no summary', () => {
    expect(capacityVerdict('team/c2', undefined, checkPodSets([podSet('main', 1, '1')]))).to.deep.equal({ state: 'Retry', message: 'no summary of target team/c2 yet: its room is unknown' });
  });

  it(`judges a Workload of more than ${MAX_PODS_PLACED} pods by the sums of free room`, () => {
    const many = checkPodSets([podSet('main', MAX_PODS_PLACED + 1, '1m', '1Mi')]);
    const nodes = Array.from({ length: 110 }, (_, i) => ({ ...node(`n${i}`, '32', '64Gi'), free: { cpu: '32', memory: '64Gi', pods: '100' } }));
    expect(capacityVerdict('team/c2', summary(...nodes), many).state).to.equal('Ready');
    expect(capacityVerdict('team/c2', summary(...nodes.slice(0, 10)), many)).to.deep.include({ state: 'Retry' });
  });
});
