import { expect } from 'chai';
import { assignedPodsSelector, MAX_SERVER_EXCLUDED_NODES } from '../../../../provider/wiring/summary.js';

describe('the summary wiring: assignedPodsSelector', () => {
  const assigned = 'spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed';

  it("is kube-scheduler's selection of assigned pods without virtual nodes", () => {
    expect(assignedPodsSelector(new Set())).to.equal(assigned);
  });

  it('leaves out the pods of each virtual node, in name order whatever the order they came in', () => {
    expect(assignedPodsSelector(new Set(['admiralty-b', 'admiralty-a']))).to.equal(`${assigned},spec.nodeName!=admiralty-a,spec.nodeName!=admiralty-b`);
  });

  it('leaves them to the informer past the most the URL should carry', () => {
    const many = new Set(Array.from({ length: MAX_SERVER_EXCLUDED_NODES + 1 }, (_, i) => `vn-${i}`));
    expect(assignedPodsSelector(many)).to.equal(assigned);
    many.delete('vn-0');
    expect(assignedPodsSelector(many).split(',')).to.have.length(3 + MAX_SERVER_EXCLUDED_NODES);
  });
});
