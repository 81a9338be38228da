import { expect } from 'chai';
import { VIRTUAL_KUBELET_PROVIDER_LABEL } from '../../../provider/core/keys.js';
import { scoreTarget, type PlacementPolicy, type ScoredTarget } from '../../../scheduler/score.js';
import type { V1Node } from '@kubernetes/client-node';
import { node, nodesOf, pod, runningOn } from './fixtures.js';

function target(key: string, cpuUsed: string, nodes: V1Node[] = [node('a'), node('b')], extra: Partial<ScoredTarget> = {}): ScoredTarget {
  // Two nodes of 4 cpu by default: 8 cpu in all; `cpuUsed` (whole cpus) is split between a and b.
  const half = { cpu: `${Number(cpuUsed) * 500}m` };
  return {
    key,
    displayName: key.split('/').slice(1).join('/'),
    nodes: nodesOf(nodes, cpuUsed === '0' ? [] : [runningOn('a', half), runningOn('b', half)]),
    ...extra,
  };
}

describe('scheduler: scoreTarget', () => {
  const p = pod('p', { cpu: '1' });
  const spread: PlacementPolicy = { kind: 'spread' };
  const pack: PlacementPolicy = { kind: 'pack' };

  const table: { name: string; policy: PlacementPolicy; t: ScoredTarget; score: number }[] = [
    // free after placing = 8 - 0 - 1 = 7 of 8 -> 87.5 -> 88
    { name: 'spread, empty target', policy: spread, t: target('ClusterTarget/c1', '0'), score: 88 },
    // 8 - 3 - 1 = 4 of 8 -> 50
    { name: 'spread, half used', policy: spread, t: target('ClusterTarget/c1', '3'), score: 50 },
    { name: 'pack, empty target', policy: pack, t: target('ClusterTarget/c1', '0'), score: 12 },
    { name: 'pack, half used', policy: pack, t: target('ClusterTarget/c1', '3'), score: 50 },
    // 8 - 8 - 1 < 0 -> no free cpu left
    { name: 'spread, full target', policy: spread, t: target('ClusterTarget/c1', '8'), score: 0 },
    { name: 'pack, full target', policy: pack, t: target('ClusterTarget/c1', '8'), score: 100 },
    { name: 'spread, no nodes', policy: spread, t: target('ClusterTarget/c1', '0', []), score: 0 },
    { name: 'pack, no nodes', policy: pack, t: target('ClusterTarget/c1', '0', []), score: 0 },
    {
      name: 'spread ignores NotReady, cordoned and virtual nodes',
      policy: spread,
      t: target('ClusterTarget/c1', '0', [node('a'), node('b', { ready: false }), node('c', { unschedulable: true }), node('v', { labels: { [VIRTUAL_KUBELET_PROVIDER_LABEL]: 'admiralty' } })]),
      score: 75, // 4 - 1 = 3 of 4
    },
    { name: 'weights by key', policy: { kind: 'weights', weights: { 'ClusterTarget/c1': 70 } }, t: target('ClusterTarget/c1', '0'), score: 70 },
    { name: 'weights by display name', policy: { kind: 'weights', weights: { 'ns/t1': 30 } }, t: target('Target/ns/t1', '0'), score: 30 },
    { name: 'weights default', policy: { kind: 'weights', weights: {}, defaultWeight: 5 }, t: target('ClusterTarget/c1', '0'), score: 5 },
    { name: 'weights default to 0', policy: { kind: 'weights', weights: {} }, t: target('ClusterTarget/c1', '0'), score: 0 },
    { name: 'weights are clamped', policy: { kind: 'weights', weights: { c1: 250 } }, t: target('ClusterTarget/c1', '0'), score: 100 },
  ];

  for (const c of table) {
    it(c.name, () => {
      expect(scoreTarget(c.policy, p, c.t)).to.equal(c.score);
    });
  }

  it('counts 100m for a pod that requests no cpu', () => {
    // 8 - 0 - 0.1 = 7.9 of 8 -> 98.75 -> 99
    expect(scoreTarget(spread, pod('p'), target('ClusterTarget/c1', '0'))).to.equal(99);
  });

  it('takes off what was placed since the summary was written', () => {
    // 8 - 3 (assumed on a) - 1 = 4 of 8 -> 50
    const assumed = new Map([['a', new Map([['cpu', 3_000_000_000n]])]]);
    expect(scoreTarget(spread, p, target('ClusterTarget/c1', '0', undefined, { assumed }))).to.equal(50);
  });

  it('gives equal targets equal scores (kube-scheduler breaks the tie at random)', () => {
    expect(scoreTarget(spread, p, target('ClusterTarget/c1', '2'))).to.equal(scoreTarget(spread, p, target('ClusterTarget/c2', '2')));
  });
});
