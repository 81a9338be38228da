import { expect } from 'chai';
import type { V1Pod } from '@kubernetes/client-node';
import { SCALE_UP_PATIENCE_MS } from '../../../../provider/model/autoscaler.js';
import { decideReplacement, NODE_LOST_GRACE_MS, type ReplacementInput } from '../../../../provider/model/replacement.js';
import { proxy as baseProxy, type ProxyFixture } from '../../../support/pods.js';

const COND = 'multicluster.admiralty.io/Replaceable';
const T0 = Date.parse('2026-01-01T10:00:00.000Z');
const AFTER = 60_000;
const COOL = 300_000;

/** web-0, bound to c2's virtual node, Pending unless told; `deleting` since T0, `owner` ReplicaSet web-abc of UID rs-uid. */
const proxy = ({ deleting, owner, ...o }: ProxyFixture & { deleting?: boolean; owner?: boolean } = {}): V1Pod =>
  baseProxy({
    name: 'web-0',
    namespace: 'apps',
    uid: 'u1',
    spec: { containers: [{ name: 'c' }] },
    nodeName: 'admiralty-namespace-apps-c2',
    phase: 'Pending',
    owner: owner && { uid: 'rs-uid' },
    deletedAt: deleting ? new Date(T0) : undefined,
    ...o,
  });

/** A delegate Unschedulable since `sinceMs`. */
function unschedulable(sinceMs: number): V1Pod {
  return {
    metadata: { name: 'web-0-x1', namespace: 'apps', creationTimestamp: new Date(sinceMs - 1000) },
    spec: { containers: [{ name: 'c' }] },
    status: {
      phase: 'Pending',
      conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: '0/2 nodes are available: 2 node(s) were unschedulable.', lastTransitionTime: new Date(sinceMs) }],
    },
  };
}

/** A delegate bound to `node` at `atMs`. */
function bound(node: string, atMs: number, deleting = false): V1Pod {
  return {
    metadata: { name: 'web-0-x1', namespace: 'apps', creationTimestamp: new Date(atMs - 1000), deletionTimestamp: deleting ? new Date(atMs) : undefined },
    spec: { containers: [{ name: 'c' }], nodeName: node },
    status: { phase: 'Running', conditions: [{ type: 'PodScheduled', status: 'True', lastTransitionTime: new Date(atMs) }] },
  };
}

const input = (p: V1Pod, d: V1Pod, o: Partial<ReplacementInput> = {}): ReplacementInput => ({
  proxy: p,
  delegate: d,
  targetName: 'apps/c2',
  summary: { nodeNames: new Set(['c2-node-0', 'c2-node-1']), readAtMs: T0 },
  unschedulableAfterMs: AFTER,
  coolDownMs: COOL,
  nowMs: T0,
  ...o,
});

describe('decideReplacement', () => {
  describe('a delegate Unschedulable in its target', () => {
    it('waits until --replace-unschedulable-after has passed, and says when to look again', () => {
      expect(decideReplacement(input(proxy({ owner: true }), unschedulable(T0 - 10_000)))).to.deep.equal({ recheckAtMs: T0 + 50_000 });
    });

    it('re-places a controlled pod once the time is up: the controller avoids the target for the cool-down', () => {
      const d = decideReplacement(input(proxy({ owner: true }), unschedulable(T0 - AFTER)));
      expect(d.replace).to.deep.equal({ ownerUid: 'rs-uid', avoidUntilMs: T0 + COOL, reason: 'Unschedulable' });
      expect(d.condition).to.equal(undefined);
      expect(d.event?.type).to.equal('Warning');
      expect(d.event?.reason).to.equal('Replacing');
      expect(d.event?.message).to.equal(
        'delegate web-0-x1 is Unschedulable in apps/c2 since 2026-01-01T09:59:00.000Z, longer than --replace-unschedulable-after (60 s): 0/2 nodes are available: 2 node(s) were unschedulable.: ' +
          "deleting the proxy and its delegate so that its ReplicaSet web-abc recreates it on another target; apps/c2 is avoided for the ReplicaSet's pods until 2026-01-01T10:05:00.000Z",
      );
    });

    it('marks a bare pod and deletes nothing; the condition is the same on the next pass', () => {
      const first = decideReplacement(input(proxy(), unschedulable(T0 - AFTER)));
      expect(first.replace).to.equal(undefined);
      expect(first.condition).to.include({ type: COND, status: 'False', reason: 'CannotReplace' });
      expect(first.condition?.message).to.match(
        /^delegate web-0-x1 is Unschedulable in apps\/c2 since 2026-01-01T09:59:00.000Z, .*the pod has no controller to recreate it on another target, so it stays$/,
      );
      expect(first.event).to.deep.include({ type: 'Warning', reason: 'CannotReplace' });
      const later = decideReplacement(input(proxy(), unschedulable(T0 - AFTER), { nowMs: T0 + 30_000 }));
      expect(later.condition?.message).to.equal(first.condition?.message);
    });

    it('is never re-placed with --replace-unschedulable-after=0', () => {
      expect(decideReplacement(input(proxy({ owner: true }), unschedulable(T0 - 3_600_000), { unschedulableAfterMs: 0 }))).to.deep.equal({ recheckAtMs: undefined });
    });

    it('leaves a pending delegate that is not (yet) Unschedulable alone', () => {
      const d = unschedulable(T0 - AFTER);
      d.status!.conditions = [];
      expect(decideReplacement(input(proxy({ owner: true }), d))).to.deep.equal({ recheckAtMs: undefined });
    });
  });

  describe('a delegate waiting in a target with cluster-autoscaler', () => {
    const triggered = (atMs: number) => ({ reason: 'TriggeredScaleUp' as const, message: 'pod triggered scale-up: [{c2-burst 0->1 (max: 3)}]', atMs });
    const refused = (atMs: number) => ({ reason: 'NotTriggerScaleUp' as const, message: "pod didn't trigger scale-up: 1 max node group size reached", atMs });

    it('is not re-placed while a scale-up it triggered is under way, past --replace-unschedulable-after', () => {
      const d = decideReplacement(input(proxy({ owner: true }), unschedulable(T0 - 5 * AFTER), { autoscaler: triggered(T0 - 4 * AFTER) }));
      expect(d).to.deep.equal({ recheckAtMs: T0 - 4 * AFTER + SCALE_UP_PATIENCE_MS });
    });

    it("is re-placed once no node came within cluster-autoscaler's provision time", () => {
      const d = decideReplacement(input(proxy({ owner: true }), unschedulable(T0 - SCALE_UP_PATIENCE_MS - 20_000), { autoscaler: triggered(T0 - SCALE_UP_PATIENCE_MS) }));
      expect(d.replace).to.deep.include({ reason: 'Unschedulable' });
      expect(d.event?.message).to.include("and no node came within 900 s of its cluster-autoscaler's TriggeredScaleUp");
    });

    it('is re-placed at once when the autoscaler says NotTriggerScaleUp, before --replace-unschedulable-after', () => {
      const d = decideReplacement(input(proxy({ owner: true }), unschedulable(T0 - 5_000), { autoscaler: refused(T0 - 1_000) }));
      expect(d.replace).to.deep.equal({ ownerUid: 'rs-uid', avoidUntilMs: T0 + COOL, reason: 'NotTriggerScaleUp' });
      expect(d.event?.message).to.equal(
        "delegate web-0-x1 is Unschedulable in apps/c2 and its cluster-autoscaler will not add a node for it (NotTriggerScaleUp at 2026-01-01T09:59:59.000Z: pod didn't trigger scale-up: 1 max node group size reached): " +
          "deleting the proxy and its delegate so that its ReplicaSet web-abc recreates it on another target; apps/c2 is avoided for the ReplicaSet's pods until 2026-01-01T10:05:00.000Z",
      );
    });

    it('a bare pod refused by the autoscaler is marked, not deleted', () => {
      const d = decideReplacement(input(proxy(), unschedulable(T0 - 5_000), { autoscaler: refused(T0 - 1_000) }));
      expect(d.replace).to.equal(undefined);
      expect(d.condition).to.include({ status: 'False', reason: 'CannotReplace' });
    });

    it('is not re-placed on NotTriggerScaleUp with --replace-unschedulable-after=0', () => {
      expect(decideReplacement(input(proxy({ owner: true }), unschedulable(T0 - 5_000), { autoscaler: refused(T0 - 1_000), unschedulableAfterMs: 0 }))).to.deep.equal({ recheckAtMs: undefined });
    });
  });

  describe('a delegate whose node is gone', () => {
    it('re-places a controlled pod when a summary read long enough after the bind lacks the node', () => {
      const d = decideReplacement(input(proxy({ owner: true, phase: 'Running' }), bound('c2-node-9', T0 - NODE_LOST_GRACE_MS)));
      expect(d.replace).to.deep.equal({ ownerUid: 'rs-uid', avoidUntilMs: T0 + COOL, reason: 'NodeLost' });
      expect(d.event?.message).to.match(/^delegate web-0-x1 ran on node c2-node-9, which apps\/c2 no longer has: deleting the proxy/);
    });

    it('trusts no summary read within the grace after the bind (the node may be newer than the summary)', () => {
      expect(decideReplacement(input(proxy({ owner: true, phase: 'Running' }), bound('c2-node-9', T0 - NODE_LOST_GRACE_MS + 1)))).to.deep.equal({ recheckAtMs: undefined });
    });

    it('trusts no summary that has not seen the delegate bound: its cluster stopped writing it before the node came', () => {
      // The target's summary writer stopped at pod version 100; a node was added since, and the
      // delegate (version 250) runs there. The summary lacks the node because it is stale.
      const d = { ...bound('c2-node-9', T0 - 3_600_000), metadata: { ...bound('c2-node-9', T0 - 3_600_000).metadata, resourceVersion: '250' } };
      const stale = { nodeNames: new Set(['c2-node-0', 'c2-node-1']), readAtMs: T0, podsResourceVersion: '100' };
      expect(decideReplacement(input(proxy({ owner: true, phase: 'Running' }), d, { summary: stale }))).to.deep.equal({ recheckAtMs: undefined });
      // One that has seen it bound there and lists no such node means the node is gone.
      const fresh = { ...stale, podsResourceVersion: '300' };
      expect(decideReplacement(input(proxy({ owner: true, phase: 'Running' }), d, { summary: fresh })).replace).to.include({ reason: 'NodeLost' });
    });

    it('decides nothing without a summary, or while the node is listed', () => {
      const p = proxy({ owner: true, phase: 'Running' });
      expect(decideReplacement(input(p, bound('c2-node-9', T0 - 3_600_000), { summary: undefined }))).to.deep.equal({ recheckAtMs: undefined });
      expect(decideReplacement(input(p, bound('c2-node-0', T0 - 3_600_000)))).to.deep.equal({ recheckAtMs: undefined });
    });

    it('marks a bare pod', () => {
      const d = decideReplacement(input(proxy({ phase: 'Running' }), bound('c2-node-9', T0 - 3_600_000)));
      expect(d.condition).to.include({
        type: COND,
        status: 'False',
        reason: 'CannotReplace',
        message: 'delegate web-0-x1 ran on node c2-node-9, which apps/c2 no longer has; the pod has no controller to recreate it on another target, so it stays',
      });
    });
  });

  it('leaves finished and deleting proxies, and deleting delegates, alone', () => {
    const stuck = bound('c2-node-9', T0 - 3_600_000);
    for (const p of [proxy({ owner: true, phase: 'Succeeded' }), proxy({ owner: true, phase: 'Failed' }), proxy({ owner: true, deleting: true })]) {
      expect(decideReplacement(input(p, stuck))).to.deep.equal({});
    }
    expect(decideReplacement(input(proxy({ owner: true }), bound('c2-node-9', T0 - 3_600_000, true)))).to.deep.equal({});
  });

  it('turns the condition True once a marked pod is no longer stuck, and writes nothing for one never marked', () => {
    const marked = proxy({ phase: 'Running', conditions: [{ type: COND, status: 'False', reason: 'CannotReplace', message: 'x' }] });
    const d = decideReplacement(input(marked, bound('c2-node-0', T0 - 3_600_000)));
    expect(d.condition).to.include({ type: COND, status: 'True', reason: 'DelegateNotStuck', message: 'delegate web-0-x1 is no longer stuck in apps/c2' });
    expect(d.event).to.deep.include({ type: 'Normal', reason: 'DelegateNotStuck' });
    expect(decideReplacement(input(proxy({ phase: 'Running' }), bound('c2-node-0', T0 - 3_600_000)))).to.deep.equal({ recheckAtMs: undefined });
  });
});
