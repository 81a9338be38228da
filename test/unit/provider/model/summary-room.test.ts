import { expect } from 'chai';
import { summaryRoom } from '../../../../provider/model/summary-room.js';
import type { ClusterSummary } from '../../../../provider/model/types.js';

describe('model: summaryRoom', () => {
  const node = (name: string, free: Record<string, string>, extra: { notReady?: boolean; unschedulable?: boolean } = {}) => ({
    name,
    allocatable: { cpu: '8', memory: '16Gi', pods: '110' },
    free,
    ...extra,
  });

  it('takes the largest free amount of each resource on one node that takes pods, and their sum', () => {
    const summary: ClusterSummary = {
      metadata: { name: 'singleton' },
      nodePools: [
        { labels: { zone: 'a' }, nodes: [node('a1', { cpu: '3', memory: '1Gi', pods: '100' }), node('a2', { cpu: '500m', memory: '12Gi', pods: '10' })] },
        // Not counted: the scheduler would put nothing there.
        { labels: { zone: 'b' }, nodes: [node('b1', { cpu: '8', memory: '16Gi', pods: '110' }, { notReady: true }), node('b2', { cpu: '8', memory: '16Gi', pods: '110' }, { unschedulable: true })] },
      ],
    };
    expect(summaryRoom(summary)).to.deep.equal({
      largestFree: { cpu: '3', memory: '12Gi', pods: '100' },
      totalFree: { cpu: '3500m', memory: '13Gi', pods: '110' },
      nodes: 4,
      schedulableNodes: 2,
    });
  });

  it('reads the sums of a summary without node pools, and a largest of 0', () => {
    expect(summaryRoom({ metadata: {}, free: { cpu: '4', memory: '2Gi', pods: '5' } })).to.deep.equal({
      largestFree: { cpu: '0', memory: '0', pods: '0' },
      totalFree: { cpu: '4', memory: '2Gi', pods: '5' },
      nodes: 0,
      schedulableNodes: 0,
    });
  });
});
