import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { isUnschedulable, nodeRoom, planScaleUp, templateRoom, triggeredMessage, type NodeGroup } from '../../../test/sandbox/cluster-autoscaler-stand-in.js';
import { pod as basePod } from '../../support/pods.js';

const group = (name: string, o: Partial<NodeGroup> = {}): NodeGroup => ({
  name,
  minSize: 0,
  maxSize: 2,
  template: { allocatable: { cpu: '64', memory: '256Gi', pods: '110' }, labels: { pool: name } },
  ...o,
});
/** A pending pod that kube-scheduler found no room for. */
const pod = (name: string, cpu: string, nodeSelector?: Record<string, string>): V1Pod =>
  basePod({
    name,
    uid: name,
    spec: { containers: [{ name: 'c', resources: { requests: { cpu } } }], nodeSelector },
    status: { phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable' }] },
  });
const names = (pods: V1Pod[]) => pods.map((p) => p.metadata!.name);

describe('sandbox: cluster-autoscaler stand-in (test fixture)', () => {
  it('scales a group up from zero for a pod a new node can hold, packing the next pods onto that node', () => {
    const plan = planScaleUp([pod('a', '40'), pod('b', '20'), pod('c', '20')], [group('burst')], new Map(), []);
    expect(plan.scaleUps).to.deep.equal([{ group: 'burst', currentSize: 0, newSize: 2, maxSize: 2 }]);
    expect(names(plan.triggered)).to.deep.equal(['a', 'c']);
    expect(plan.notTriggered).to.deep.equal([]);
    expect(triggeredMessage(plan.scaleUps)).to.equal('pod triggered scale-up: [{burst 0->2 (max: 2)}]');
  });

  it('says nothing for a pod that fits on a node already coming', () => {
    const plan = planScaleUp([pod('a', '40')], [group('burst')], new Map([['burst', 1]]), [templateRoom(group('burst'))]);
    expect(plan).to.deep.equal({ scaleUps: [], triggered: [], notTriggered: [] });
  });

  it('says nothing for a pod that fits on a Ready node with room, counting the pods bound there (the new node, before the scheduler binds the pod)', () => {
    const n: V1Node = { metadata: { name: 'n1', labels: { pool: 'burst' } }, spec: {}, status: { allocatable: { cpu: '64', pods: '110' }, conditions: [{ type: 'Ready', status: 'True' }] } };
    const busy = { ...pod('busy', '30'), spec: { containers: [{ name: 'c', resources: { requests: { cpu: '30' } } }], nodeName: 'n1' }, status: { phase: 'Running' } };
    const room = nodeRoom(n, [busy])!;
    expect(room.free.get('cpu')).to.equal(34_000_000_000n);
    expect(planScaleUp([pod('a', '30')], [group('burst', { maxSize: 1 })], new Map([['burst', 1]]), [room])).to.deep.equal({ scaleUps: [], triggered: [], notTriggered: [] });
    expect(planScaleUp([pod('a', '40')], [group('burst', { maxSize: 1 })], new Map([['burst', 1]]), [room]).notTriggered).to.have.length(1);
    expect(nodeRoom({ ...n, spec: { unschedulable: true } }, [])).to.equal(undefined);
    // Ready, but kube-controller-manager has not lifted its not-ready taint yet: still coming.
    expect(nodeRoom({ ...n, spec: { taints: [{ key: 'node.kubernetes.io/not-ready', effect: 'NoSchedule' }] } }, [])).to.equal(undefined);
  });

  it('says NotTriggerScaleUp, with the reasons of every group counted, when no group can or may grow', () => {
    const plan = planScaleUp(
      [pod('a', '40', { pool: 'burst' })],
      [group('burst', { maxSize: 1 }), group('small', { template: { allocatable: { cpu: '8', memory: '8Gi', pods: '110' }, labels: { pool: 'small' } } })],
      new Map([['burst', 1]]),
      [],
    );
    expect(plan.scaleUps).to.deep.equal([]);
    expect(plan.notTriggered.map((n) => n.message)).to.deep.equal(["pod didn't trigger scale-up: 1 max node group size reached, 1 node(s) didn't match Pod's node affinity/selector"]);
  });

  it('skips a group in backoff after a failed scale-up, in upstream words, and grows another that fits', () => {
    const backedOff = new Set(['burst']);
    expect(planScaleUp([pod('a', '40')], [group('burst')], new Map(), [], backedOff).notTriggered.map((n) => n.message)).to.deep.equal([
      "pod didn't trigger scale-up: 1 in backoff after failed scale-up",
    ]);
    const plan = planScaleUp([pod('a', '40')], [group('burst'), group('spare')], new Map(), [], backedOff);
    expect(plan.scaleUps).to.deep.equal([{ group: 'spare', currentSize: 0, newSize: 1, maxSize: 2 }]);
  });

  it('holds its NotTriggerScaleUp events in a loop that scaled up, as cluster-autoscaler does', () => {
    const plan = planScaleUp([pod('a', '40'), pod('huge', '100')], [group('burst')], new Map(), []);
    expect(names(plan.triggered)).to.deep.equal(['a']);
    expect(plan.notTriggered).to.deep.equal([]);
    expect(planScaleUp([pod('huge', '100')], [group('burst')], new Map(), []).notTriggered.map((n) => n.message)).to.deep.equal(["pod didn't trigger scale-up: 1 Insufficient cpu"]);
  });

  it('looks only at pods Pending, unbound and Unschedulable', () => {
    const bound = { ...pod('b', '1'), spec: { containers: [], nodeName: 'n1' } };
    const waiting = { ...pod('w', '1'), status: { phase: 'Pending' } };
    expect([pod('a', '1'), bound, waiting].map(isUnschedulable)).to.deep.equal([true, false, false]);
  });
});
