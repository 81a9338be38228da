import type { V1Node, V1Pod, V1PriorityClass } from '@kubernetes/client-node';
import { expect } from 'chai';
import { buildClusterSummary } from '../../../provider/model/cluster-summary.js';
import { targetIdentityLabels } from '../../../provider/model/virtual-node.js';
import { fitsTarget, likelyNode } from '../../../scheduler/fit.js';
import { victimsOnOneNode } from '../../../scheduler/preempt.js';
import { delegatePriority, lowerPriorityPodsOn, nodesFreedByPreemption, preemptibleRoom, priorityClassValuesOfSummary, type TargetPriorityClasses } from '../../../scheduler/preemption.js';
import { priorityClassesOfSummary } from '../../../scheduler/target-classes.js';
import { nodesOfSummary } from '../../../scheduler/target-nodes.js';
import { node, pod } from './fixtures.js';

const CLASSES: V1PriorityClass[] = [
  { metadata: { name: 'low' }, value: 10 },
  { metadata: { name: 'mid' }, value: 1000 },
  { metadata: { name: 'urgent' }, value: 100000 },
  { metadata: { name: 'polite' }, value: 100000, preemptionPolicy: 'Never' },
];

/** A pod of the target itself on `nodeName`, of the given priority (as its admission set it). */
function targetPod(nodeName: string, cpu: string, priority: number): V1Pod {
  return {
    metadata: { name: `t-${nodeName}-${priority}-${cpu}`, namespace: 'batch' },
    spec: { nodeName, priority, containers: [{ name: 'c', resources: { requests: { cpu } } }] },
    status: { phase: 'Running' },
  };
}

/** c2: two 4-cpu nodes, full: n1 of priority-10 pods, n2 of a priority-10 and a priority-1000 pod. */
function fullTarget(classes: V1PriorityClass[] = CLASSES) {
  const nodes: V1Node[] = [node('n1'), node('n2')];
  const pods = [targetPod('n1', '3', 10), targetPod('n1', '1', 10), targetPod('n2', '1', 10), targetPod('n2', '3', 1000)];
  const summary = JSON.parse(JSON.stringify(buildClusterSummary(nodes, pods, undefined, undefined, { priority: classes })));
  return { summary, nodes: nodesOfSummary(summary), values: priorityClassValuesOfSummary(summary), names: priorityClassesOfSummary(summary) };
}

const opts = (t: ReturnType<typeof fullTarget>) => ({
  targetName: 'c2',
  targetLabels: targetIdentityLabels({ kind: 'ClusterTarget', namespace: '', name: 'c2' }),
  priorityClasses: t.names,
  priorityClassValues: t.values,
});

describe('scheduler: preemption inside targets', () => {
  describe('delegatePriority', () => {
    const classes: TargetPriorityClasses = {
      byName: new Map([
        ['low', { name: 'low', value: 10 }],
        ['never', { name: 'never', value: 500, preemptionPolicy: 'Never' }],
      ]),
    };

    it("is the value of the pod's class in the target, by name (not the source's value)", () => {
      expect(delegatePriority({ containers: [], priorityClassName: 'low', priority: 999999 }, classes, 'c2')).to.deep.equal({ priority: 10, preempts: true });
    });

    it("is the target's global default for a pod naming no class, else 0", () => {
      expect(delegatePriority({ containers: [] }, classes, 'c2')).to.deep.equal({ priority: 0, preempts: true });
      const withDefault = { ...classes, globalDefault: { name: 'base', value: 7, globalDefault: true as const } };
      expect(delegatePriority({ containers: [] }, withDefault, 'c2')).to.deep.equal({ priority: 7, preempts: true });
    });

    it("does not preempt when the pod's preemptionPolicy is Never, or its class's in the target", () => {
      expect(delegatePriority({ containers: [], priorityClassName: 'low', preemptionPolicy: 'Never' }, classes, 'c2')).to.deep.equal({
        priority: 10,
        preempts: false,
        why: "the pod's preemptionPolicy is Never",
      });
      expect(delegatePriority({ containers: [], priorityClassName: 'never' }, classes, 'c2')).to.deep.equal({
        priority: 500,
        preempts: false,
        why: 'its PriorityClass never in c2 has preemptionPolicy Never',
      });
    });

    it('is undefined when the classes are unknown, or the target lacks the class', () => {
      expect(delegatePriority({ containers: [], priorityClassName: 'low' }, undefined, 'c2')).to.equal(undefined);
      expect(delegatePriority({ containers: [], priorityClassName: 'gold' }, classes, 'c2')).to.equal(undefined);
    });
  });

  describe('priorityClassValuesOfSummary', () => {
    it('maps the classes by name, takes the lowest of two global defaults, and is undefined without values', () => {
      const s = {
        metadata: {},
        priorityClassValues: [
          { name: 'a', value: 5, globalDefault: true as const },
          { name: 'b', value: 3, globalDefault: true as const },
          { name: 'c', value: 1 },
        ],
      };
      const out = priorityClassValuesOfSummary(s)!;
      expect([...out.byName.keys()]).to.deep.equal(['a', 'b', 'c']);
      expect(out.globalDefault?.name).to.equal('b');
      expect(priorityClassValuesOfSummary(s)).to.equal(out);
      expect(priorityClassValuesOfSummary({ metadata: {}, priorityClasses: ['a'] })).to.equal(undefined);
    });
  });

  describe('preemptibleRoom and nodesFreedByPreemption', () => {
    it('frees the buckets strictly below the priority: equal priority is never a victim', () => {
      const [n1, n2] = fullTarget().nodes;
      expect(preemptibleRoom(n1!, 10).size).to.equal(0);
      expect(preemptibleRoom(n1!, 11).get('cpu')).to.equal(4_000_000_000n);
      expect(preemptibleRoom(n2!, 1000).get('cpu')).to.equal(1_000_000_000n);
      expect(preemptibleRoom(n2!, 1001).get('cpu')).to.equal(4_000_000_000n);
      expect(preemptibleRoom(n2!, 1001).get('pods')).to.equal(2_000_000_000n);
    });

    it('counts free room and preemptible room less what is assumed on the node', () => {
      const t = fullTarget();
      const requests = new Map([
        ['cpu', 3_000_000_000n],
        ['pods', 1_000_000_000n],
      ]);
      expect(nodesFreedByPreemption(requests, t.nodes, 1000)).to.deep.equal(['n1']);
      expect(nodesFreedByPreemption(requests, t.nodes, 100000)).to.deep.equal(['n1', 'n2']);
      const assumed = new Map([['n1', new Map([['cpu', 2_000_000_000n]])]]);
      expect(nodesFreedByPreemption(requests, t.nodes, 100000, assumed)).to.deep.equal(['n2']);
    });

    it('takes a merged bucket as preemptible only above the highest priority in it', () => {
      // Five priorities on one node: the last bucket merges 40 and 50, labelled 50.
      const pods = [10, 20, 30, 40, 50].map((p) => targetPod('n1', '800m', p));
      const [n1] = nodesOfSummary(buildClusterSummary([node('n1')], pods, undefined, undefined, { priority: CLASSES }));
      expect(preemptibleRoom(n1!, 45).get('cpu')).to.equal(2_400_000_000n);
      expect(preemptibleRoom(n1!, 51).get('cpu')).to.equal(4_000_000_000n);
    });
  });

  describe('fitsTarget', () => {
    it("passes a full target where preempting the target's lower-priority pods makes room on one node, on the nodes where it would", () => {
      const t = fullTarget();
      const r = fitsTarget(pod('p', { cpu: '3' }, { priorityClassName: 'mid' }), t.nodes, opts(t));
      expect(r).to.deep.include({ fits: true, byPreemption: true, fittingNodes: ['n1'], unresolvable: false });
      expect(r.reason).to.equal('no node in c2 fits now (2 Insufficient cpu (largest free 0)); preempting pods of priority below 1000 would make room on 1 node(s)');
    });

    it('keeps off a target where even preempting every lower-priority pod of one node leaves no room', () => {
      const t = fullTarget();
      // 3 cpu: n1 holds only priority-10 pods, and a priority-10 pod preempts none of them.
      const r = fitsTarget(pod('p', { cpu: '3' }, { priorityClassName: 'low' }), t.nodes, opts(t));
      expect(r).to.deep.include({ fits: false, unresolvable: false, reason: 'no node in c2 fits: 2 Insufficient cpu (largest free 0)' });
      // 5 cpu fits no 4-cpu node, however many pods go.
      expect(fitsTarget(pod('p', { cpu: '5' }, { priorityClassName: 'urgent' }), t.nodes, opts(t)).fits).to.equal(false);
    });

    it('says that preemption would make room but the pod may not preempt, for preemptionPolicy Never', () => {
      const t = fullTarget();
      const own = fitsTarget(pod('p', { cpu: '3' }, { priorityClassName: 'urgent', preemptionPolicy: 'Never' }), t.nodes, opts(t));
      expect(own).to.deep.include({
        fits: false,
        reason: "no node in c2 fits: 2 Insufficient cpu (largest free 0); preempting pods of priority below 100000 would make room on 2 node(s), but the pod's preemptionPolicy is Never",
      });
      const byClass = fitsTarget(pod('p', { cpu: '3' }, { priorityClassName: 'polite' }), t.nodes, opts(t));
      expect(byClass.reason).to.equal(
        'no node in c2 fits: 2 Insufficient cpu (largest free 0); preempting pods of priority below 100000 would make room on 2 node(s), but its PriorityClass polite in c2 has preemptionPolicy Never',
      );
    });

    it('judges no preemption where the summary publishes no class values (an earlier writer)', () => {
      const t = fullTarget();
      const r = fitsTarget(pod('p', { cpu: '3' }, { priorityClassName: 'urgent' }), t.nodes, { ...opts(t), priorityClassValues: undefined });
      expect(r).to.deep.include({ fits: false, reason: 'no node in c2 fits: 2 Insufficient cpu (largest free 0)' });
    });

    it('never counts preemption on a node the pod fails for anything but room', () => {
      const t = fullTarget();
      const r = fitsTarget(pod('p', { cpu: '3' }, { priorityClassName: 'urgent', nodeSelector: { 'kubernetes.io/hostname': 'n9' } }), t.nodes, opts(t));
      expect(r.fits).to.equal(false);
      expect(r.reason).to.not.include('preempting');
    });

    it('prefers free room: a node with room now fits without preemption', () => {
      const nodes = [node('n1'), node('n2')];
      const summary = buildClusterSummary(nodes, [targetPod('n1', '4', 10)], undefined, undefined, { priority: CLASSES });
      const r = fitsTarget(pod('p', { cpu: '3' }, { priorityClassName: 'urgent' }), nodesOfSummary(summary), { ...opts(fullTarget()), priorityClassValues: priorityClassValuesOfSummary(summary) });
      expect(r).to.deep.include({ fits: true, fittingNodes: ['n2'] });
      expect(r).to.not.have.property('byPreemption');
    });

    it('gives likelyNode a node where the target would preempt, so a bind in flight holds room there', () => {
      const t = fullTarget();
      expect(likelyNode(pod('p', { cpu: '3' }, { priorityClassName: 'mid' }), t.nodes, opts(t))).to.equal('n1');
    });
  });

  describe('victimsOnOneNode (preemption among proxies)', () => {
    it("frees room with proxies only, not with what the target's own preemption would", () => {
      // n1 holds a proxy's delegate (3 cpu) and a pod of the target (1 cpu), both of priority 10.
      const delegate = targetPod('n1', '3', 10);
      const summary = buildClusterSummary([node('n1')], [delegate, targetPod('n1', '1', 10)], undefined, undefined, { priority: CLASSES });
      const nodes = nodesOfSummary(summary);
      const proxy: V1Pod = { metadata: { name: 'low', namespace: 'default', uid: 'u1' }, spec: { priority: 10, containers: [] } };
      const candidates = [
        {
          proxy,
          node: 'n1',
          requests: new Map([
            ['cpu', 3_000_000_000n],
            ['pods', 1_000_000_000n],
          ]),
        },
      ];
      const t = { ...opts(fullTarget()), priorityClassValues: priorityClassValuesOfSummary(summary) };
      // Counting the target's own preemption, the pod would fit with no proxy gone, and none would be chosen.
      const chosen = victimsOnOneNode(pod('p', { cpu: '3' }, { priority: 100000, priorityClassName: 'urgent' }), nodes, candidates, t);
      expect(chosen?.victims).to.deep.equal([proxy]);
      expect(chosen?.node).to.equal('n1');
    });
  });

  describe('lowerPriorityPodsOn', () => {
    it('counts the pods of lower priority the summary shows on a node, and is undefined when it cannot say', () => {
      const { summary } = fullTarget();
      expect(lowerPriorityPodsOn(summary, 'n2', { containers: [], priorityClassName: 'urgent' })).to.equal(2);
      expect(lowerPriorityPodsOn(summary, 'n2', { containers: [], priorityClassName: 'mid' })).to.equal(1);
      expect(lowerPriorityPodsOn(summary, 'n9', { containers: [], priorityClassName: 'mid' })).to.equal(undefined);
      expect(lowerPriorityPodsOn({ metadata: {} }, 'n2', { containers: [] })).to.equal(undefined);
    });
  });
});
