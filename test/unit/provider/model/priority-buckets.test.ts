import type { V1Pod, V1PriorityClass } from '@kubernetes/client-node';
import { expect } from 'chai';
import { HIGHEST_USER_PRIORITY, heldByPriority, MAX_PRIORITY_BUCKETS, preemptibleHeld, summaryPriorityClassValues } from '../../../../provider/model/priority-buckets.js';
import { buildClusterSummary } from '../../../../provider/model/cluster-summary.js';
import type { ClusterSummary } from '../../../../provider/model/types.js';

function podAt(node: string, cpu: string, priority?: number, phase = 'Running'): V1Pod {
  return {
    metadata: { name: `p-${Math.random().toString(36).slice(2, 8)}`, namespace: 'default' },
    spec: { nodeName: node, containers: [{ name: 'c', resources: { requests: { cpu, memory: '1Gi' } } }], ...(priority !== undefined ? { priority } : {}) },
    status: { phase },
  };
}

describe('model: priority buckets', () => {
  describe('heldByPriority', () => {
    it('sums the requests and pod slots of each node by priority, lowest first, unset priority as 0', () => {
      const out = heldByPriority([podAt('n1', '2', 10), podAt('n1', '1', 10), podAt('n1', '500m'), podAt('n2', '3', 1000)]);
      expect(out.get('n1')).to.deep.equal([
        { priority: 0, requests: { cpu: '500m', memory: '1Gi', pods: '1' } },
        { priority: 10, requests: { cpu: '3', memory: '2Gi', pods: '2' } },
      ]);
      expect(out.get('n2')).to.deep.equal([{ priority: 1000, requests: { cpu: '3', memory: '1Gi', pods: '1' } }]);
    });

    it('leaves out finished pods, unbound pods, and pods at or above the highest user priority (no user pod preempts them)', () => {
      const unbound = podAt('n1', '1', 5);
      delete unbound.spec!.nodeName;
      const out = heldByPriority([podAt('n1', '1', 5, 'Succeeded'), podAt('n1', '1', 5, 'Failed'), unbound, podAt('n1', '1', HIGHEST_USER_PRIORITY), podAt('n1', '1', 2_000_001_000)]);
      expect(out.size).to.equal(0);
      expect(heldByPriority([podAt('n1', '1', HIGHEST_USER_PRIORITY - 1)]).get('n1')).to.have.length(1);
    });

    it(`merges the highest priorities of a node into its last bucket, labelled with the highest of them, past ${MAX_PRIORITY_BUCKETS} buckets`, () => {
      const pods = [1, 2, 3, 4, 5, 6].map((p) => podAt('n1', '1', p * 10));
      const out = heldByPriority(pods).get('n1')!;
      expect(out.map((b) => b.priority)).to.deep.equal([10, 20, 30, 60]);
      expect(out[3]!.requests).to.deep.equal({ cpu: '3', memory: '3Gi', pods: '3' });
    });

    it('is the same whatever the order of the pods', () => {
      const pods = [podAt('n1', '1', 7), podAt('n1', '2', 3), podAt('n1', '3', 9), podAt('n1', '4', 1), podAt('n1', '5', 5)];
      expect(heldByPriority([...pods].reverse())).to.deep.equal(heldByPriority(pods));
    });
  });

  describe('summaryPriorityClassValues', () => {
    it('keeps name and value, preemptionPolicy only when Never and globalDefault only when true, sorted by name', () => {
      const classes: V1PriorityClass[] = [
        { metadata: { name: 'urgent' }, value: 100000, preemptionPolicy: 'PreemptLowerPriority' },
        { metadata: { name: 'batch' }, value: 10, globalDefault: true },
        { metadata: { name: 'polite' }, value: 100000, preemptionPolicy: 'Never', globalDefault: false },
        { metadata: {}, value: 5 },
      ];
      expect(summaryPriorityClassValues(classes)).to.deep.equal([
        { name: 'batch', value: 10, globalDefault: true },
        { name: 'polite', value: 100000, preemptionPolicy: 'Never' },
        { name: 'urgent', value: 100000 },
      ]);
    });
  });

  describe('buildClusterSummary', () => {
    const node = { metadata: { name: 'n1', labels: {} }, status: { allocatable: { cpu: '4', memory: '8Gi', pods: '110' }, conditions: [{ type: 'Ready', status: 'True' }] } };

    const classes = [
      { metadata: { name: 'low' }, value: 10 },
      { metadata: { name: 'high' }, value: 1000 },
      { metadata: { name: 'system-node-critical' }, value: 2_000_001_000 },
    ];

    it("publishes each node's buckets below the highest user class, and the classes with values beside their names", () => {
      const s = buildClusterSummary([node], [podAt('n1', '3', 10), podAt('n1', '1', 1000)], undefined, undefined, { priority: classes });
      expect(s.nodePools![0]!.nodes[0]!.heldByPriority).to.deep.equal([{ priority: 10, requests: { cpu: '3', memory: '1Gi', pods: '1' } }]);
      expect(s.priorityClasses).to.deep.equal(['high', 'low', 'system-node-critical']);
      expect(s.priorityClassValues).to.deep.equal([
        { name: 'high', value: 1000 },
        { name: 'low', value: 10 },
        { name: 'system-node-critical', value: 2_000_001_000 },
      ]);
    });

    it('publishes no buckets without user classes, or when the classes are not known (nothing to preempt for anyone, or nobody to judge it)', () => {
      const pods = [podAt('n1', '1', 0), podAt('n1', '1', 5)];
      const systemOnly = buildClusterSummary([node], pods, undefined, undefined, { priority: [classes[2]!] });
      expect(systemOnly.nodePools![0]!.nodes[0]).to.not.have.property('heldByPriority');
      const unknown = buildClusterSummary([node], pods);
      expect(unknown.nodePools![0]!.nodes[0]).to.not.have.property('heldByPriority');
      expect(unknown).to.not.have.property('priorityClassValues');
    });
  });

  describe('preemptibleHeld', () => {
    const summary = (classes: { name: string; value: number }[] | undefined): ClusterSummary => ({
      metadata: { name: 'singleton' },
      ...(classes ? { priorityClassValues: classes } : {}),
      nodePools: [
        {
          labels: {},
          nodes: [
            {
              name: 'a',
              allocatable: {},
              free: {},
              heldByPriority: [
                { priority: 1, requests: { cpu: '2', pods: '1' } },
                { priority: 5, requests: { cpu: 'lots', pods: '2' } },
                { priority: 100, requests: { cpu: '1', pods: '1' } },
              ],
            },
            { name: 'b', allocatable: {}, free: {}, notReady: true, heldByPriority: [{ priority: 1, requests: { cpu: '8' } }] },
            { name: 'c', allocatable: {}, free: {}, unschedulable: true, heldByPriority: [{ priority: 1, requests: { cpu: '8' } }] },
          ],
        },
      ],
    });

    it("sums the buckets below the cluster's highest user class, of the nodes that take new pods, skipping quantities that do not parse", () => {
      expect(
        preemptibleHeld(
          summary([
            { name: 'x', value: 100 },
            { name: 'y', value: 3 },
          ]),
        ),
      ).to.deep.equal(
        new Map([
          ['cpu', 2_000_000_000n],
          ['pods', 3_000_000_000n],
        ]),
      );
      expect(preemptibleHeld(summary([{ name: 'x', value: 101 }])).get('pods')).to.equal(4_000_000_000n);
    });

    it('is nothing without user classes: system classes would make every bucket count', () => {
      expect(preemptibleHeld(summary([{ name: 'system-node-critical', value: 2_000_001_000 }])).size).to.equal(0);
      expect(preemptibleHeld(summary(undefined)).size).to.equal(0);
      expect(preemptibleHeld(undefined).size).to.equal(0);
    });
  });
});
