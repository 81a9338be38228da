import { expect } from 'chai';
import type { V1Node } from '@kubernetes/client-node';
import type { TargetPlacement } from '../../../provider/model/target.js';
import { rankTargets, weightsDiffer, type PlacementPolicy, type ScoredTarget } from '../../../scheduler/score.js';
import { node, nodesOf, pod, runningOn } from './fixtures.js';

/** A target of two nodes of 4 cpu (8 in all); `cpuUsed` whole cpus split between them. */
function target(key: string, cpuUsed: number, extra: Partial<ScoredTarget> & { placement?: TargetPlacement } = {}, nodes: V1Node[] = [node('a'), node('b')]): ScoredTarget {
  const half = { cpu: `${cpuUsed * 500}m` };
  return { key, nodes: nodesOf(nodes, cpuUsed === 0 ? [] : [runningOn('a', half), runningOn('b', half)]), ...extra };
}

const spread: PlacementPolicy = { kind: 'spread' };
const pack: PlacementPolicy = { kind: 'pack' };
const burst: PlacementPolicy = { kind: 'burst' };
const p = pod('p', { cpu: '1' });

/** Scores by key, as a plain object for deep equality. */
function rank(policy: PlacementPolicy, targets: ScoredTarget[], of = p): Record<string, number> {
  return Object.fromEntries(rankTargets(policy, of, targets));
}

describe('scheduler: rankTargets', () => {
  const table: { name: string; policy: PlacementPolicy; targets: ScoredTarget[]; scores: Record<string, number> }[] = [
    { name: 'spread: most free cpu first', policy: spread, targets: [target('a', 6), target('b', 1), target('c', 3)], scores: { b: 10, c: 9, a: 8 } },
    { name: 'pack: least free cpu first', policy: pack, targets: [target('a', 6), target('b', 1), target('c', 3)], scores: { a: 10, c: 9, b: 8 } },
    { name: 'spread: equal targets tie (kube-scheduler picks at random)', policy: spread, targets: [target('a', 2), target('b', 2), target('c', 5)], scores: { a: 10, b: 10, c: 9 } },
    { name: 'pack: ties go to the first key, so one target fills first', policy: pack, targets: [target('b', 2), target('a', 2)], scores: { a: 10, b: 9 } },
    // 8 - 7 - 1 = 0 free after the pod, still ahead of a target with no usable node at all.
    { name: 'pack: a target without usable cpu last', policy: pack, targets: [target('full', 7), target('none', 0, {}, [node('x', { ready: false })])], scores: { full: 10, none: 9 } },
    { name: 'spread: a target without usable cpu last', policy: spread, targets: [target('full', 7), target('none', 0, {}, [])], scores: { full: 10, none: 9 } },
    {
      name: 'burst: lowest priority first, whatever the room',
      policy: burst,
      targets: [target('cloud', 0, { placement: { weight: 1, priority: 1 } }), target('local', 6, { placement: { weight: 1, priority: 0 } })],
      scores: { local: 10, cloud: 9 },
    },
    {
      name: 'burst: spread within a priority',
      policy: burst,
      targets: [target('x', 0, { placement: { weight: 1, priority: 5 } }), target('a', 4, { placement: { weight: 1, priority: 0 } }), target('b', 2, { placement: { weight: 1, priority: 0 } })],
      scores: { b: 10, a: 9, x: 8 },
    },
    {
      name: 'priority means nothing to spread',
      policy: spread,
      targets: [target('cloud', 0, { placement: { weight: 1, priority: 1 } }), target('local', 6, { placement: { weight: 1, priority: 0 } })],
      scores: { cloud: 10, local: 9 },
    },
    {
      name: 'weight 0 scores 0 under every policy',
      policy: pack,
      targets: [target('spare', 7, { placement: { weight: 0, priority: 0 } }), target('a', 0)],
      scores: { a: 10, spare: 0 },
    },
    {
      name: 'weight 0 scores 0 under burst, even at the lowest priority',
      policy: burst,
      targets: [target('spare', 0, { placement: { weight: 0, priority: -1 } }), target('a', 0, { placement: { weight: 1, priority: 3 } })],
      scores: { a: 10, spare: 0 },
    },
    {
      name: 'a long tail stays at 1',
      policy: spread,
      targets: Array.from({ length: 12 }, (_, i) => target(`t${String(i).padStart(2, '0')}`, i * 0.5)),
      scores: Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`t${String(i).padStart(2, '0')}`, Math.max(1, 10 - i)])),
    },
  ];
  for (const c of table) {
    it(c.name, () => expect(rank(c.policy, c.targets)).to.deep.equal(c.scores));
  }

  describe('preference first, then the policy', () => {
    const pref = (preference: number, placement?: TargetPlacement): Partial<ScoredTarget> => ({ preference, ...(placement ? { placement } : {}) });
    const cases: { name: string; policy: PlacementPolicy; targets: ScoredTarget[]; scores: Record<string, number> }[] = [
      {
        name: "spread: the preferred target first, though fuller (the default's tie-breaking loses)",
        policy: spread,
        targets: [target('eu', 6, pref(10)), target('us', 0)],
        scores: { eu: 10, us: 9 },
      },
      {
        name: 'spread: higher preference first, then most free cpu among equals',
        policy: spread,
        targets: [target('a', 1, pref(5)), target('b', 4, pref(50)), target('c', 3, pref(5))],
        scores: { b: 10, a: 9, c: 8 },
      },
      { name: 'pack still holds among equally preferred targets', policy: pack, targets: [target('roomy', 1, pref(50)), target('full', 6, pref(50))], scores: { full: 10, roomy: 9 } },
      { name: 'pack: preference over best-fit', policy: pack, targets: [target('roomy', 1, pref(50)), target('full', 6, pref(1))], scores: { roomy: 10, full: 9 } },
      {
        name: 'burst: priority holds among equally preferred targets',
        policy: burst,
        targets: [target('cloud', 0, pref(7, { weight: 1, priority: 1 })), target('local', 6, pref(7, { weight: 1, priority: 0 }))],
        scores: { local: 10, cloud: 9 },
      },
      {
        name: 'burst: a preferred target before a lower priority',
        policy: burst,
        targets: [target('cloud', 0, pref(7, { weight: 1, priority: 1 })), target('local', 6, pref(0, { weight: 1, priority: 0 }))],
        scores: { cloud: 10, local: 9 },
      },
      {
        name: 'weights share among equally preferred targets',
        policy: spread,
        targets: [target('big', 6, { ...pref(3, { weight: 3, priority: 0 }), groupPods: 1 }), target('small', 0, { ...pref(3, { weight: 1, priority: 0 }), groupPods: 1 })],
        scores: { big: 10, small: 9 },
      },
      {
        name: 'weight 0 scores 0, preferred or not',
        policy: spread,
        targets: [target('spare', 0, pref(100, { weight: 0, priority: 0 })), target('a', 4)],
        scores: { a: 10, spare: 0 },
      },
    ];
    for (const c of cases) {
      it(c.name, () => expect(rank(c.policy, c.targets)).to.deep.equal(c.scores));
    }
  });

  it('counts 100m for a pod that requests no cpu', () => {
    const eight = { cpu: '8', memory: '8Gi', pods: '110' };
    const a: ScoredTarget = { key: 'a', nodes: nodesOf([node('a', { allocatable: eight })], [runningOn('a', { cpu: '7970m' })]) };
    const b: ScoredTarget = { key: 'b', nodes: nodesOf([node('b', { allocatable: eight })], [runningOn('b', { cpu: '7940m' })]) };
    // 30m and 60m free: neither is left with any once the pod counts as 100m, so they tie.
    expect(rank(spread, [a, b], pod('p'))).to.deep.equal({ a: 10, b: 10 });
    expect(rank(spread, [a, b], pod('p', { cpu: '10m' }))).to.deep.equal({ b: 10, a: 9 });
  });

  it('takes off what was placed since the summary was written', () => {
    const assumed = new Map([['a', new Map([['cpu', 3_000_000_000n]])]]);
    expect(rank(spread, [target('x', 2), target('y', 0, { assumed })])).to.deep.equal({ x: 10, y: 9 });
  });

  describe('weights (spread)', () => {
    const w = (weight: number): { placement: TargetPlacement } => ({ placement: { weight, priority: 0 } });

    it('ignore the pods of the group while weights are equal', () => {
      expect(rank(spread, [target('a', 0, { ...w(2), groupPods: 9 }), target('b', 4, { ...w(2), groupPods: 0 })])).to.deep.equal({ a: 10, b: 9 });
    });

    it('3:1 gives three placements out of four to the first, whatever the room', () => {
      // Smooth weighted round robin: place 8 pods one after the other, counting each.
      const counts = { big: 0, small: 0 };
      const order: string[] = [];
      for (let i = 0; i < 8; i++) {
        const scores = rankTargets(spread, p, [target('big', 6, { ...w(3), groupPods: counts.big }), target('small', 0, { ...w(1), groupPods: counts.small })]);
        const best = [...scores].sort((x, y) => y[1] - x[1])[0]![0] as 'big' | 'small';
        counts[best]++;
        order.push(best);
      }
      expect(counts).to.deep.equal({ big: 6, small: 2 });
      // The tie at (2, 0) goes to the roomier target (small): free cpu breaks ties of shares.
      expect(order).to.deep.equal(['big', 'big', 'small', 'big', 'big', 'big', 'small', 'big']);
    });

    it('weightsDiffer looks at positive weights only, defaulting to 1', () => {
      expect(weightsDiffer([undefined, { weight: 1, priority: 4 }])).to.equal(false);
      expect(weightsDiffer([undefined, { weight: 0, priority: 0 }])).to.equal(false);
      expect(weightsDiffer([undefined, { weight: 3, priority: 0 }])).to.equal(true);
    });

    it('decide within a priority level under burst', () => {
      const t = (key: string, weight: number, priority: number, groupPods: number) => target(key, 0, { placement: { weight, priority }, groupPods });
      // Level 0: a (weight 3, 3 pods) vs b (weight 1, 0 pods): (3+1)/3 > (0+1)/1? 4/3 > 1: b first.
      expect(rank(burst, [t('a', 3, 0, 3), t('b', 1, 0, 0), t('c', 5, 1, 0)])).to.deep.equal({ b: 10, a: 9, c: 8 });
    });
  });
});
