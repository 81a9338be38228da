import type { V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { heldOnNode } from '../../../provider/model/resources.js';
import { victimsOnOneNode, type PreemptionCandidate } from '../../../scheduler/preempt.js';
import { node, nodesOf, pod, runningOn } from './fixtures.js';

const OPTS = { targetName: 'c2', targetLabels: {} };

/** A proxy of `priority` whose delegate holds `cpu` on `on`, and that delegate as the target's summary counts it. */
function victim(name: string, on: string, cpu: string, priority: number): { candidate: PreemptionCandidate; delegate: V1Pod } {
  const proxy = pod(name, { cpu }, { priority });
  proxy.metadata!.uid = `uid-${name}`;
  const delegate = runningOn(on, { cpu });
  return { candidate: { proxy, node: on, requests: heldOnNode(delegate) }, delegate };
}

/** Two 32-cpu nodes, each running two of these victims. */
function cluster(victims: ReturnType<typeof victim>[]) {
  const nodes = nodesOf([node('n0', { allocatable: { cpu: '32', pods: '110' } }), node('n1', { allocatable: { cpu: '32', pods: '110' } })], victims.map((v) => v.delegate));
  return { nodes, candidates: victims.map((v) => v.candidate) };
}

const names = (r: ReturnType<typeof victimsOnOneNode>) => r && { node: r.node, victims: r.victims.map((v) => v.metadata!.name).sort() };

describe('scheduler: victimsOnOneNode', () => {
  const four = () => [victim('a', 'n0', '14', 100), victim('b', 'n0', '14', 100), victim('c', 'n1', '14', 100), victim('d', 'n1', '14', 100)];

  it('takes the victims of one real node that make room there, not the fewest by the sum of all nodes', () => {
    // 4 cpu free on each node; 24 needs both victims of one node (one of each would do by the sum: 8 + 28).
    const { nodes, candidates } = cluster(four());
    expect(names(victimsOnOneNode(pod('high', { cpu: '24' }, { priority: 1000 }), nodes, candidates, OPTS))).to.deep.equal({ node: 'n0', victims: ['a', 'b'] });
  });

  it('takes as few as do, reprieving the highest priority first', () => {
    const { nodes, candidates } = cluster([victim('a', 'n0', '14', 100), victim('b', 'n0', '14', 500), victim('c', 'n1', '14', 100), victim('d', 'n1', '14', 100)]);
    // 18 fits beside one victim's room (4 + 14): on n0 the priority-500 one is spared; n1 needs one too, and its victim's priority is as low, so the first node by name wins.
    expect(names(victimsOnOneNode(pod('high', { cpu: '18' }, { priority: 1000 }), nodes, candidates, OPTS))).to.deep.equal({ node: 'n0', victims: ['a'] });
  });

  it('prefers the node whose victims have the lowest priority, at equal counts', () => {
    const { nodes, candidates } = cluster([victim('a', 'n0', '14', 300), victim('b', 'n0', '14', 300), victim('c', 'n1', '14', 100), victim('d', 'n1', '14', 200)]);
    expect(names(victimsOnOneNode(pod('high', { cpu: '18' }, { priority: 1000 }), nodes, candidates, OPTS))).to.deep.equal({ node: 'n1', victims: ['c'] });
  });

  it('preempts nothing when no node could hold the pod, whatever goes', () => {
    const { nodes, candidates } = cluster(four());
    expect(victimsOnOneNode(pod('high', { cpu: '40' }, { priority: 1000 }), nodes, candidates, OPTS)).to.equal(undefined);
  });

  it('never takes a proxy of equal or higher priority, nor one being deleted', () => {
    const vs = four();
    vs[0].candidate.proxy.spec!.priority = 1000;
    vs[1].candidate.proxy.metadata!.deletionTimestamp = new Date();
    vs[2].candidate.proxy.spec!.priority = 2000;
    const { nodes, candidates } = cluster(vs);
    // n0: only b could go, and it is going already; n1: only d, which frees 18, short of 24.
    expect(victimsOnOneNode(pod('high', { cpu: '24' }, { priority: 1000 }), nodes, candidates, OPTS)).to.equal(undefined);
    expect(names(victimsOnOneNode(pod('high', { cpu: '18' }, { priority: 1000 }), nodes, candidates, OPTS))).to.deep.equal({ node: 'n1', victims: ['d'] });
  });

  it("preempts nothing on a node that does not match the pod's other constraints", () => {
    const { nodes, candidates } = cluster(four());
    const picky = pod('high', { cpu: '24' }, { priority: 1000, nodeSelector: { 'kubernetes.io/hostname': 'n1' } });
    expect(names(victimsOnOneNode(picky, nodes, candidates, OPTS))).to.deep.equal({ node: 'n1', victims: ['c', 'd'] });
  });

  it('preempts nothing where the pod fits already', () => {
    const { nodes, candidates } = cluster(four());
    expect(victimsOnOneNode(pod('high', { cpu: '2' }, { priority: 1000 }), nodes, candidates, OPTS)).to.equal(undefined);
  });
});
