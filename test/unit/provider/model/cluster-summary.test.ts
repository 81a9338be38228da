import { expect } from 'chai';
import type { V1Node } from '@kubernetes/client-node';
import { buildClusterSummary, summaryEquals } from '../../../../provider/model/cluster-summary.js';

function node(labels: Record<string, string>, capacity?: Record<string, string>, allocatable?: Record<string, string>): V1Node {
  return { metadata: { name: Object.values(labels)[0] ?? 'n', labels }, status: { capacity, allocatable } };
}

describe('buildClusterSummary', () => {
  const nodes = [
    node({ 'kubernetes.io/hostname': 'n1', zone: 'a', os: 'linux', gpu: 'yes' }, { cpu: '4', memory: '8039396Ki', pods: '110' }, { cpu: '3800m', memory: '7Gi', pods: '110' }),
    node({ 'kubernetes.io/hostname': 'n2', zone: 'b', os: 'linux' }, { cpu: '2', memory: '4Gi', pods: '110', 'nvidia.com/gpu': '1' }, { cpu: '1500m', memory: '3.5Gi', pods: '110' }),
    node({ 'virtual-kubelet.io/provider': 'admiralty', zone: 'z', os: 'windows' }, { cpu: '1000', memory: '1Ti', pods: '10000' }),
    node({ 'virtual-kubelet.io/provider': 'other' }, { cpu: '1000' }),
  ];
  const summary = buildClusterSummary(nodes);

  it('is the singleton ClusterSummary', () => {
    expect(summary.apiVersion).to.equal('multicluster.admiralty.io/v1alpha1');
    expect(summary.kind).to.equal('ClusterSummary');
    expect(summary.metadata.name).to.equal('singleton');
  });

  it('sums capacity over real nodes only, canonically', () => {
    expect(summary.capacity).to.deep.equal({ cpu: '6', memory: '12233700Ki', 'nvidia.com/gpu': '1', pods: '220' });
  });

  it('sums allocatable over real nodes only', () => {
    expect(summary.allocatable).to.deep.equal({ cpu: '5300m', memory: '10752Mi', pods: '220' });
  });

  it('keeps labels with a single value on every node that has them', () => {
    expect(summary.metadata.labels).to.deep.equal({ gpu: 'yes', os: 'linux' });
  });

  const edge: [string, V1Node[], Partial<ReturnType<typeof buildClusterSummary>>][] = [
    ['no nodes', [], { capacity: {}, allocatable: {} }],
    ['only virtual nodes', [nodes[2]], { capacity: {}, allocatable: {} }],
    ['a node without status', [{ metadata: { name: 'x', labels: { a: '1' } } }], { capacity: {}, allocatable: {} }],
    ['an unparsable quantity is skipped', [node({ a: '1' }, { cpu: 'lots', memory: '1Gi' })], { capacity: { memory: '1Gi' } }],
  ];
  for (const [why, list, want] of edge) {
    it(why, () => expect(buildClusterSummary(list)).to.deep.include(want));
  }

  it('does not depend on node order', () => {
    expect(buildClusterSummary([...nodes].reverse())).to.deep.equal(summary);
  });
});

describe('summaryEquals', () => {
  const base = buildClusterSummary([node({ a: '1' }, { cpu: '4', memory: '1Gi' })]);
  const cases: [string, Parameters<typeof summaryEquals>[1], boolean][] = [
    ['same', JSON.parse(JSON.stringify(base)), true],
    ['quantities equal by value', { ...base, capacity: { cpu: '4000m', memory: '1073741824' } }, true],
    ['capacity differs', { ...base, capacity: { cpu: '5', memory: '1Gi' } }, false],
    ['labels differ', { ...base, metadata: { ...base.metadata, labels: { a: '2' } } }, false],
    ['undefined', undefined, false],
  ];
  for (const [why, other, want] of cases) {
    it(why, () => expect(summaryEquals(base, other)).to.equal(want));
  }
});
