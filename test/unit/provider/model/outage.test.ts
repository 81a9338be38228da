import { expect } from 'chai';
import type { V1Namespace, V1Pod } from '@kubernetes/client-node';
import {
  conditionDiffers,
  decideOutage,
  decideRecovered,
  failoverPolicy,
  fenceVerdict,
  isOutage,
  OUTAGE_NOTICE_MS,
  STANDBY_FENCE_GRACE_MS,
  standbyMayCreateDelegates,
} from '../../../../provider/model/outage.js';
import { proxy, type ProxyFixture } from '../../../support/pods.js';

const AFTER = 'multicluster.admiralty.io/failover-after';
const COND = 'multicluster.admiralty.io/TargetReachable';
const T0 = Date.parse('2026-01-01T10:00:00.000Z');

/** The proxy web-0, Running unless told; `deleting` since T0. */
const pod = ({ deleting, ...o }: ProxyFixture & { deleting?: boolean } = {}): V1Pod =>
  proxy({ name: 'web-0', namespace: 'apps', uid: 'u1', phase: 'Running', deletedAt: deleting ? new Date(T0) : undefined, ...o });
const ns = (annotations?: Record<string, string>): V1Namespace => ({ metadata: { name: 'apps', annotations } });

describe('isOutage', () => {
  const cases: [string, { ready: boolean; reason: string } | undefined, boolean][] = [
    ['unknown target', undefined, false],
    ['ready', { ready: true, reason: 'TargetReady' }, false],
    ['unreachable', { ready: false, reason: 'TargetUnreachable' }, true],
    ['refused credentials', { ready: false, reason: 'TargetForbidden' }, false],
    ['broken Secret', { ready: false, reason: 'SecretNotFound' }, false],
  ];
  for (const [name, health, want] of cases) it(`${name}: ${want}`, () => expect(isOutage(health)).to.equal(want));
});

describe('failoverPolicy', () => {
  const cases: [string, V1Pod, V1Namespace | undefined, ReturnType<typeof failoverPolicy>['kind'], number | undefined, string | undefined][] = [
    ['none anywhere', pod(), ns(), 'none', undefined, undefined],
    ['pod only', pod({ annotations: { [AFTER]: '20s' } }), ns(), 'after', 20_000, 'pod'],
    ['namespace only', pod(), ns({ [AFTER]: '2m' }), 'after', 120_000, 'namespace'],
    ['pod wins over namespace', pod({ annotations: { [AFTER]: '5s' } }), ns({ [AFTER]: '2m' }), 'after', 5_000, 'pod'],
    ['a bad pod value is not replaced by the namespace', pod({ annotations: { [AFTER]: 'soon' } }), ns({ [AFTER]: '2m' }), 'invalid', undefined, 'pod'],
    ['bad namespace value', pod(), ns({ [AFTER]: '-1m' }), 'invalid', undefined, 'namespace'],
    ['namespace not cached', pod(), undefined, 'none', undefined, undefined],
  ];
  for (const [name, p, n, kind, ms, from] of cases) {
    it(name, () => {
      const got = failoverPolicy(p, n);
      expect(got.kind).to.equal(kind);
      if (got.kind === 'after') expect(got.afterMs).to.equal(ms);
      if (got.kind !== 'none') expect(got.from).to.equal(from);
    });
  }
});

describe('decideOutage', () => {
  const since = T0;
  const at = (nowMs: number, p: V1Pod, n?: V1Namespace) => decideOutage({ proxy: p, namespace: n, targetName: 'c2', unreachableSinceMs: since, unreachableForMs: nowMs - since, nowMs });

  it('judges the deadline by how long the target has been unreachable, not by the wall clock', () => {
    const p = pod({ owner: true, annotations: { [AFTER]: '1m' } });
    // The wall clock was stepped an hour forward 25 s into the outage.
    const early = decideOutage({ proxy: p, namespace: undefined, targetName: 'c2', unreachableSinceMs: since, unreachableForMs: 25_000, nowMs: since + 3_625_000 });
    expect(early.failover).to.equal(false);
    expect(early.recheckAtMs).to.equal(since + 3_625_000 + 35_000);
    // The message keeps the deadline it said from the start (one write per transition).
    expect(early.condition!.message).to.match(/failover at 2026-01-01T10:01:00.000Z/);
    // Stepped an hour back: the deadline still comes a minute into the outage.
    const due = decideOutage({ proxy: p, namespace: undefined, targetName: 'c2', unreachableSinceMs: since, unreachableForMs: 60_000, nowMs: since - 3_540_000 });
    expect(due.failover).to.equal(true);
  });

  const cases: { name: string; pod: V1Pod; ns?: V1Namespace; nowMs: number; failover: boolean; condition: boolean; reason?: string; message?: RegExp; recheckAtMs?: number }[] = [
    {
      name: 'no policy: marked, stays',
      pod: pod({ owner: true }),
      nowMs: since + 3_600_000,
      failover: false,
      condition: true,
      reason: 'TargetUnreachable',
      message: /^target c2 unreachable since 2026-01-01T10:00:00.000Z; the pod stays bound to it/,
    },
    {
      name: 'before the deadline: marked, with when',
      pod: pod({ owner: true, annotations: { [AFTER]: '1m' } }),
      nowMs: since + 59_999,
      failover: false,
      condition: true,
      reason: 'TargetUnreachable',
      message: /failover at 2026-01-01T10:01:00.000Z/,
      recheckAtMs: since + 60_000,
    },
    { name: 'within the notice, no policy: nothing yet, a look at its end', pod: pod({ owner: true }), nowMs: since + 5_000, failover: false, condition: false, recheckAtMs: since + OUTAGE_NOTICE_MS },
    {
      name: 'within the notice, failover due later: nothing yet',
      pod: pod({ owner: true, annotations: { [AFTER]: '1m' } }),
      nowMs: since + 19_999,
      failover: false,
      condition: false,
      recheckAtMs: since + OUTAGE_NOTICE_MS,
    },
    {
      name: 'within the notice, a shorter failover-after: a look at its deadline',
      pod: pod({ owner: true, annotations: { [AFTER]: '8s' } }),
      nowMs: since + 5_000,
      failover: false,
      condition: false,
      recheckAtMs: since + 8_000,
    },
    { name: 'within the notice, failover due: fails over', pod: pod({ owner: true, annotations: { [AFTER]: '8s' } }), nowMs: since + 8_000, failover: true, condition: false, reason: 'FailingOver' },
    {
      name: 'at the deadline, controlled: fails over',
      pod: pod({ owner: true, annotations: { [AFTER]: '20s' } }),
      nowMs: since + 20_000,
      failover: true,
      condition: false,
      reason: 'FailingOver',
      message: /ReplicaSet web-abc recreates it/,
    },
    { name: 'namespace policy, controlled: fails over', pod: pod({ owner: true }), ns: ns({ [AFTER]: '1m' }), nowMs: since + 60_000, failover: true, condition: false, reason: 'FailingOver' },
    {
      name: 'past the deadline, bare: cannot move',
      pod: pod({ annotations: { [AFTER]: '20s' } }),
      nowMs: since + 25_000,
      failover: false,
      condition: true,
      reason: 'CannotFailOver',
      message: /no controller/,
    },
    {
      name: 'invalid value: marked, says why, stays',
      pod: pod({ owner: true, annotations: { [AFTER]: 'soon' } }),
      nowMs: since + 3_600_000,
      failover: false,
      condition: true,
      reason: 'InvalidFailoverAfter',
      message: /is invalid: "soon" is not a duration/,
    },
    { name: 'finished: left alone', pod: pod({ owner: true, phase: 'Succeeded', annotations: { [AFTER]: '1s' } }), nowMs: since + 3_600_000, failover: false, condition: false },
    { name: 'deleting, no policy: no condition', pod: pod({ owner: true, deleting: true }), nowMs: since + 3_600_000, failover: false, condition: false },
    {
      name: 'deleting, past the deadline: failover finishes (finalizer)',
      pod: pod({ owner: true, deleting: true, annotations: { [AFTER]: '1s' } }),
      nowMs: since + 2_000,
      failover: true,
      condition: false,
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const d = at(c.nowMs, c.pod, c.ns);
      expect(d.failover, 'failover').to.equal(c.failover);
      expect(!!d.condition, 'condition').to.equal(c.condition);
      if (d.condition) {
        expect(d.condition).to.include({ type: COND, status: 'False', reason: 'TargetUnreachable' });
        expect(new Date(d.condition.lastTransitionTime as Date).getTime(), 'transition time: when the outage began').to.equal(since);
        expect(d.event?.message).to.equal(d.condition.message);
      }
      if (c.reason) expect(d.event?.reason).to.equal(c.reason);
      if (c.message) expect(d.event?.message).to.match(c.message);
      expect(d.recheckAtMs).to.equal(c.recheckAtMs);
    });
  }

  it('is stable over an outage: the same condition at any time before the deadline (one write per transition)', () => {
    const p = pod({ owner: true, annotations: { [AFTER]: '1m' } });
    const first = at(since + OUTAGE_NOTICE_MS, p).condition!;
    const marked = pod({ owner: true, annotations: { [AFTER]: '1m' }, conditions: [first] });
    for (const t of [since + 21_000, since + 40_000, since + 59_000]) expect(conditionDiffers(marked, at(t, marked).condition!), `at +${t - since} ms`).to.equal(false);
  });
});

describe('decideRecovered', () => {
  const falseCond = { type: COND, status: 'False', reason: 'TargetUnreachable', message: 'x' };
  it('turns False into True, with an event', () => {
    const d = decideRecovered(pod({ conditions: [falseCond] }), 'c2', T0);
    expect(d.condition).to.include({ type: COND, status: 'True', reason: 'TargetReachable' });
    expect(d.event).to.include({ type: 'Normal', reason: 'TargetReachable' });
  });
  it('writes nothing for a proxy never marked, or already True', () => {
    expect(decideRecovered(pod(), 'c2', T0).condition).to.equal(undefined);
    expect(decideRecovered(pod({ conditions: [{ ...falseCond, status: 'True' }] }), 'c2', T0).condition).to.equal(undefined);
  });
});

describe('fenceVerdict', () => {
  const delegate = (labels: Record<string, string>, o: { deleting?: boolean; parentName?: string } = {}): V1Pod => ({
    metadata: {
      name: 'web-0-abc',
      namespace: 'apps',
      uid: 'd1',
      labels,
      annotations: o.parentName === undefined ? { 'multicluster.admiralty.io/parent-name': 'web-0', 'multicluster.admiralty.io/parent-namespace': 'apps' } : {},
      deletionTimestamp: o.deleting ? new Date(T0) : undefined,
    },
  });
  const ours = { 'multicluster.admiralty.io/parent-cluster-name': 'c1', 'multicluster.admiralty.io/parent-uid': 'u1' };
  const cases: [string, V1Pod, string | undefined, string][] = [
    ['its proxy lives', delegate(ours), 'u1', 'keep'],
    ['its proxy is gone', delegate(ours), undefined, 'delete'],
    ['another pod took the proxy name', delegate(ours), 'u2', 'delete'],
    ['another source cluster', delegate({ ...ours, 'multicluster.admiralty.io/parent-cluster-name': 'c9' }), undefined, 'notOurs'],
    ['no parent uid', delegate({ 'multicluster.admiralty.io/parent-cluster-name': 'c1' }), undefined, 'notOurs'],
    ['not a delegate at all', delegate({}), undefined, 'notOurs'],
    ['no parent name', delegate(ours, { parentName: '' }), undefined, 'notOurs'],
    ['already deleting', delegate(ours, { deleting: true }), undefined, 'keep'],
  ];
  for (const [name, d, live, want] of cases) it(`${name}: ${want}`, () => expect(fenceVerdict(d, 'c1', live)).to.equal(want));
});

describe('standbyMayCreateDelegates', () => {
  const ready = { ready: true, reason: 'Ready' };
  const cases: Array<{ name: string; health: Parameters<typeof standbyMayCreateDelegates>[0]; nowMs: number; may: boolean }> = [
    { name: 'a target never seen unreachable', health: ready, nowMs: 1_000_000, may: true },
    { name: 'a target not probed yet', health: undefined, nowMs: 1_000_000, may: true },
    { name: 'a target unreachable now', health: { ready: false, reason: 'TargetUnreachable', lastOutageMs: 1_000_000 }, nowMs: 1_000_000, may: false },
    { name: 'a target back for less than the grace', health: { ...ready, lastOutageMs: 1_000_000 }, nowMs: 1_000_000 + STANDBY_FENCE_GRACE_MS - 1, may: false },
    { name: 'a target back for the grace or more', health: { ...ready, lastOutageMs: 1_000_000 }, nowMs: 1_000_000 + STANDBY_FENCE_GRACE_MS, may: true },
    { name: 'a target refusing credentials (not an outage)', health: { ready: false, reason: 'TargetForbidden' }, nowMs: 1_000_000, may: true },
  ];
  for (const c of cases) {
    it(`${c.may ? 'allows' : 'refuses'} ${c.name}`, () => {
      expect(standbyMayCreateDelegates(c.health, c.nowMs)).to.equal(c.may);
    });
  }
});
