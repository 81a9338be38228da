import type { V1Lease } from '@kubernetes/client-node';
import { expect } from 'chai';
import { FakeClock } from '../../../../provider/core/clock.js';
import { MEMBERSHIP_LABEL } from '../../../../provider/core/keys.js';
import { silentLogger } from '../../../../provider/core/logger.js';
import { isEarlierProcessOf, memberLeaseName, Membership } from '../../../../provider/sharding/membership.js';
import { FakeLeaseStore } from '../../../support/fake-lease-store.js';
import { advanceInSteps } from '../../../support/fake-time.js';
import { must } from '../../../support/must.js';

const NS = 'admiralty';
describe('Membership', () => {
  let clock: FakeClock;
  let store: FakeLeaseStore;
  let seen: Map<string, (readonly string[])[]>;
  let running: Membership[];

  beforeEach(() => {
    clock = new FakeClock(1_700_000_000_000);
    store = new FakeLeaseStore();
    seen = new Map();
    running = [];
  });
  afterEach(async () => {
    store.heal();
    for (const m of running) await m.stop().catch(() => {});
  });

  function member(identity: string, group = 'g1', isPredecessor?: (identity: string) => boolean): Membership {
    const m = new Membership({
      isPredecessor,
      coordination: store.client(identity),
      namespace: NS,
      group,
      identity,
      leaseDurationSeconds: 15,
      renewDeadlineSeconds: 10,
      retryPeriodSeconds: 2,
      clock,
      logger: silentLogger(),
      onChange: (members) => seen.set(identity, [...(seen.get(identity) ?? []), members]),
    });
    running.push(m);
    return m;
  }
  /** Moves the fake clock in half-second steps, letting the API calls each step starts finish. */
  const advance = (ms: number) => advanceInSteps(clock, ms);
  const last = (identity: string) => seen.get(identity)?.at(-1);

  it('creates its Lease, named by its identity hash and labelled with the group, and reports itself', async () => {
    const a = member('replica-a-1');
    await a.run();
    const lease = must(store.get(NS, memberLeaseName('replica-a-1')), 'the membership Lease');
    expect(lease.metadata?.name).to.match(/^admiralty-member-[0-9a-f]{16}$/);
    expect(lease.metadata?.labels?.[MEMBERSHIP_LABEL]).to.equal('g1');
    expect(lease.spec?.holderIdentity).to.equal('replica-a-1');
    expect(lease.spec?.leaseDurationSeconds).to.equal(15);
    expect(a.isMember()).to.equal(true);
    expect(seen.get('replica-a-1')).to.deep.equal([['replica-a-1']]);
  });

  it('reports the same sorted members on every replica, and only its own group', async () => {
    for (const id of ['c', 'a', 'b']) await member(id).run();
    await member('x', 'g2').run();
    await advance(2000);
    for (const id of ['a', 'b', 'c']) expect(last(id)).to.deep.equal(['a', 'b', 'c']);
    expect(last('x')).to.deep.equal(['x']);
  });

  it('writes its Lease once per renew period, whatever else it does: 11 writes in 20 s at a 2 s period', async () => {
    await member('a').run();
    await member('b').run();
    await advance(20_000);
    expect(store.writes.get('a')).to.equal(11);
    expect(store.writes.get('b')).to.equal(11);
  });

  it('keeps a peer that stopped renewing for its lease duration from when its last renewal was seen, and drops it at the next list after', async () => {
    await member('a').run();
    await member('b').run();
    await advance(2000);
    expect(last('a')).to.deep.equal(['a', 'b']);
    store.partition('b', 'fail'); // b's last renewal landed at 2 s; a's list saw it at 4 s at the latest
    await advance(16_500);
    expect(last('a')).to.deep.equal(['a', 'b']);
    await advance(2000);
    expect(last('a')).to.deep.equal(['a']);
  });

  it('leaves, when it cannot renew, at its renew deadline: before its peers drop it at the lease duration', async () => {
    const a = member('a');
    await a.run();
    await member('b').run();
    await advance(2000);
    store.partition('a', 'hang'); // calls never answer: each attempt is cut at its deadline
    await advance(9500);
    expect(a.isMember()).to.equal(true);
    await advance(1000);
    expect(a.isMember()).to.equal(false);
    expect(last('a')).to.deep.equal(['b']);
    await advance(4000);
    expect(last('b')).to.deep.equal(['a', 'b']);
    await advance(4000);
    expect(last('b')).to.deep.equal(['b']);
  });

  it('comes back when it can renew again', async () => {
    const a = member('a');
    await a.run();
    store.partition('a', 'fail');
    await advance(12_000);
    expect(a.isMember()).to.equal(false);
    store.heal();
    await advance(2000);
    expect(a.isMember()).to.equal(true);
    expect(seen.get('a')).to.deep.equal([['a'], [], ['a']]);
  });

  it('deletes its Lease on stop, so a peer drops it at its next list, long before expiry', async () => {
    const a = member('a');
    await a.run();
    await member('b').run();
    await advance(2000);
    await a.stop();
    expect(store.get(NS, memberLeaseName('a'))).to.equal(undefined);
    await advance(2000);
    expect(last('b')).to.deep.equal(['b']);
  });

  it('does not drop a live peer when its own wall clock steps an hour forward', async () => {
    await member('a').run();
    await member('b').run();
    await advance(2000);
    clock.stepWallClock(3_600_000);
    await advance(20_000);
    expect(last('a')).to.deep.equal(['a', 'b']);
  });

  it("counts an earlier process of its own pod dead at once, deletes its Lease, and still waits out another pod's", async () => {
    const stale = (holder: string) =>
      store.put({
        metadata: { name: memberLeaseName(holder), namespace: NS, labels: { [MEMBERSHIP_LABEL]: 'g1' } },
        spec: { holderIdentity: holder, leaseDurationSeconds: 15, renewTime: new Date(clock.now()) as never },
      });
    // Pod p-1 restarted: its process 100 was SIGKILLed, 200 is the new one; pod p-2's 300 stopped renewing too.
    stale('p-1-100');
    stale('p-2-300');
    const m = member('p-1-200', 'g1', isEarlierProcessOf('p-1', 200));
    await m.run();
    await advance(1000);
    expect(await m.isLive('p-1-100'), 'its predecessor').to.equal(false);
    expect(await m.isLive('p-2-300'), "another pod's process, first seen now").to.equal(true);
    expect(m.members()).to.deep.equal(['p-1-200', 'p-2-300']);
    expect(store.get(NS, memberLeaseName('p-1-100')), "the predecessor's Lease").to.equal(undefined);
  });

  it('takes as earlier processes of pod p-1 only identities p-1-<digits> other than its own', () => {
    const earlier = isEarlierProcessOf('p-1', 200);
    expect(['p-1-100', 'p-1-7'].map(earlier)).to.deep.equal([true, true]);
    expect(['p-1-200', 'p-1-2-100', 'p-10-100', 'p-1-', 'p-1-x1', 'p-100'].map(earlier)).to.deep.equal([false, false, false, false, false, false]);
  });

  it('deletes the Lease of a member dead for two lease durations, and never a renewing one', async () => {
    await member('a').run();
    await member('b').run();
    store.put({
      metadata: { name: memberLeaseName('dead'), namespace: NS, labels: { [MEMBERSHIP_LABEL]: 'g1' } },
      spec: { holderIdentity: 'dead', leaseDurationSeconds: 15, renewTime: new Date(0) as never },
    });
    await advance(31_000); // first seen at the 2 s list
    expect(store.get(NS, memberLeaseName('dead'))).to.not.equal(undefined);
    await advance(4000);
    expect(store.get(NS, memberLeaseName('dead'))).to.equal(undefined);
    expect(store.get(NS, memberLeaseName('b'))).to.not.equal(undefined);
    expect(last('a')).to.deep.equal(['a', 'b']);
  });

  it('isLive reads the Lease now: a peer created after its last list is live, an identity with no Lease is not', async () => {
    const a = member('a');
    await a.run();
    store.put({
      metadata: { name: memberLeaseName('late'), namespace: NS, labels: { [MEMBERSHIP_LABEL]: 'g1' } },
      spec: { holderIdentity: 'late', leaseDurationSeconds: 15, renewTime: new Date(clock.now()) as never },
    } satisfies V1Lease);
    expect(await a.isLive('late')).to.equal(true);
    expect(await a.isLive('nobody')).to.equal(false);
    expect(await a.isLive('a')).to.equal(true);
  });

  it('isLive keeps a peer whose Lease was deleted while live live until that Lease would have expired, while members drops it at once', async () => {
    const a = member('a');
    await a.run();
    store.put({
      metadata: { name: memberLeaseName('b'), namespace: NS, labels: { [MEMBERSHIP_LABEL]: 'g1' } },
      spec: { holderIdentity: 'b', leaseDurationSeconds: 15, renewTime: new Date(clock.now()) as never },
    });
    await advance(2000); // a's list sees b at 2 s
    expect(a.members()).to.deep.equal(['a', 'b']);
    store.leases.delete(`${NS}/${memberLeaseName('b')}`);
    await advance(2000);
    expect(a.members()).to.deep.equal(['a']);
    expect(await a.isLive('b')).to.equal(true);
    await advance(14_000);
    expect(await a.isLive('b')).to.equal(false);
  });
});
