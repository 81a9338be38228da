import { expect } from 'chai';
import { FakeClock } from '../../../../provider/core/clock.js';
import { TARGET_FENCE_LABEL, TARGET_KEY_ANNOTATION } from '../../../../provider/core/keys.js';
import { silentLogger } from '../../../../provider/core/logger.js';
import { Membership } from '../../../../provider/sharding/membership.js';
import { fenceLeaseName, TargetOwnership } from '../../../../provider/sharding/ownership.js';
import { FakeLeaseStore } from '../../../support/fake-lease-store.js';
import { advanceInSteps } from '../../../support/fake-time.js';
import { must } from '../../../support/must.js';

const NS = 'admiralty';
/** One replica: its membership, its ownership, and a log of the writers it stopped. */
interface Replica {
  membership: Membership;
  ownership: TargetOwnership;
}

describe('TargetOwnership', () => {
  let clock: FakeClock;
  let store: FakeLeaseStore;
  let events: string[];
  let replicas: Replica[];

  beforeEach(() => {
    clock = new FakeClock(1_700_000_000_000);
    store = new FakeLeaseStore();
    events = [];
    replicas = [];
  });
  afterEach(async () => {
    store.heal();
    for (const r of replicas) await r.membership.stop().catch(() => {});
  });

  async function replica(identity: string): Promise<Replica> {
    const common = { coordination: store.client(identity), namespace: NS, group: 'g1', identity, clock, logger: silentLogger() };
    const membership = new Membership({ ...common, leaseDurationSeconds: 15, renewDeadlineSeconds: 10, retryPeriodSeconds: 2, onChange: () => {} });
    const ownership = new TargetOwnership({
      ...common,
      membership,
      stopWriters: async (key) => {
        events.push(`${identity} stopped ${key} (fence held by ${store.get(NS, fenceLeaseName(key))?.spec?.holderIdentity || 'nobody'})`);
      },
    });
    await membership.run();
    const r = { membership, ownership };
    replicas.push(r);
    return r;
  }
  const advance = (ms: number) => advanceInSteps(clock, ms);
  const holder = (key: string) => store.get(NS, fenceLeaseName(key))?.spec?.holderIdentity;

  it('creates the fence Lease of an unclaimed target, held by the claimant, labelled with the group and annotated with the key', async () => {
    const a = await replica('a');
    expect(await a.ownership.claim('Target/ns1/t1')).to.equal(true);
    const lease = must(store.get(NS, fenceLeaseName('Target/ns1/t1')), 'the fence Lease');
    expect(lease.spec?.holderIdentity).to.equal('a');
    expect(lease.metadata?.labels?.[TARGET_FENCE_LABEL]).to.equal('g1');
    expect(lease.metadata?.annotations?.[TARGET_KEY_ANNOTATION]).to.equal('Target/ns1/t1');
    expect(a.ownership.isOwner('Target/ns1/t1')).to.equal(true);
    expect(a.ownership.isOwner('Target/ns1/t2')).to.equal(false);
  });

  it('lets exactly one of two replicas claiming 30 targets at once hold each, and the fence names that one', async () => {
    const a = await replica('a');
    const b = await replica('b');
    await advance(2000);
    const keys = Array.from({ length: 30 }, (_, i) => `Target/ns${i}/t`);
    // Half the fences exist already, unheld, so both the create race and the replace race are run.
    for (const k of keys.slice(0, 15)) {
      await a.ownership.claim(k);
      await a.ownership.release(k);
    }
    const results = await Promise.all(keys.flatMap((k) => [a.ownership.claim(k), b.ownership.claim(k)]));
    for (const [i, k] of keys.entries()) {
      expect([results[2 * i], results[2 * i + 1]].filter(Boolean)).to.have.length(1);
      expect([a.ownership.isOwner(k), b.ownership.isOwner(k)].filter(Boolean)).to.have.length(1);
      expect(holder(k)).to.equal(a.ownership.isOwner(k) ? 'a' : 'b');
    }
  });

  it('refuses a target a live peer holds, however often it tries within the peer’s lease', async () => {
    const a = await replica('a');
    const b = await replica('b');
    await a.ownership.claim('Target/ns/t');
    for (let i = 0; i < 10; i++) {
      await advance(2000);
      expect(await b.ownership.claim('Target/ns/t')).to.equal(false);
    }
    expect(holder('Target/ns/t')).to.equal('a');
  });

  it('on release stops the writers before it empties the fence, and the successor claims at once', async () => {
    const a = await replica('a');
    const b = await replica('b');
    await a.ownership.claim('Target/ns/t');
    expect(await a.ownership.release('Target/ns/t')).to.equal(true);
    expect(events).to.deep.equal(['a stopped Target/ns/t (fence held by a)']);
    expect(a.ownership.isOwner('Target/ns/t')).to.equal(false);
    expect(await b.ownership.claim('Target/ns/t')).to.equal(true);
    expect(holder('Target/ns/t')).to.equal('b');
  });

  it('keeps the fence when the writers cannot be stopped', async () => {
    const a = await replica('a');
    const stuck = new TargetOwnership({
      coordination: store.client('a'),
      namespace: NS,
      group: 'g1',
      identity: 'a',
      membership: a.membership,
      clock,
      logger: silentLogger(),
      stopWriters: () => Promise.reject(new Error('a worker did not drain')),
    });
    await stuck.claim('Target/ns/t');
    await stuck.release('Target/ns/t').catch(() => {});
    expect(holder('Target/ns/t')).to.equal('a');
  });

  it("takes a cut-off (as if SIGKILLed) owner's target only once its membership Lease has gone a lease duration unrenewed, after the owner stopped counting itself owner", async () => {
    const a = await replica('a');
    const b = await replica('b');
    await advance(2000);
    await a.ownership.claim('Target/ns/t');
    store.partition('a', 'hang'); // a's last renewal: 2 s; b saw it by its 2 s or its 4 s list
    await advance(9000); // 11 s
    expect(await b.ownership.claim('Target/ns/t')).to.equal(false);
    await advance(1000); // 12 s: a's renew deadline
    expect(a.ownership.isOwner('Target/ns/t')).to.equal(false);
    await advance(4500); // 16.5 s: less than a lease duration after b could have seen a's last renewal
    expect(await b.ownership.claim('Target/ns/t')).to.equal(false);
    await advance(3000); // 19.5 s: more than a lease duration after b saw it, however late
    expect(await b.ownership.claim('Target/ns/t')).to.equal(true);
    expect(holder('Target/ns/t')).to.equal('b');
  });

  it('when its membership lapses, owns nothing at once and sync stops every owned target without a write', async () => {
    const a = await replica('a');
    await a.ownership.sync(new Set(['Target/ns/t1', 'Target/ns/t2']));
    store.partition('a', 'fail');
    await advance(10_000);
    expect(a.ownership.isOwner('Target/ns/t1')).to.equal(false);
    const writes = store.writes.get('a');
    expect(await a.ownership.sync(new Set(['Target/ns/t1', 'Target/ns/t2']))).to.deep.equal({ owned: [], waiting: ['Target/ns/t1', 'Target/ns/t2'] });
    expect(events).to.deep.equal(['a stopped Target/ns/t1 (fence held by a)', 'a stopped Target/ns/t2 (fence held by a)']);
    expect(store.writes.get('a')).to.equal(writes);
  });

  it('sync claims the wanted targets, releases the rest, and reports the ones a live peer still holds as waiting', async () => {
    const a = await replica('a');
    const b = await replica('b');
    await a.ownership.sync(new Set(['Target/ns/t1', 'Target/ns/t2']));
    expect(await b.ownership.sync(new Set(['Target/ns/t2', 'Target/ns/t3']))).to.deep.equal({ owned: ['Target/ns/t3'], waiting: ['Target/ns/t2'] });
    expect(await a.ownership.sync(new Set(['Target/ns/t1']))).to.deep.equal({ owned: ['Target/ns/t1'], waiting: [] });
    expect(await b.ownership.sync(new Set(['Target/ns/t2', 'Target/ns/t3']))).to.deep.equal({ owned: ['Target/ns/t2', 'Target/ns/t3'], waiting: [] });
  });

  it('sync releases fences that name it but that it does not own in memory (a restart under the same identity), stopping their writers first', async () => {
    const a = await replica('a');
    await a.ownership.sync(new Set(['Target/ns/t1', 'Target/ns/t2']));
    const restarted = new TargetOwnership({
      coordination: store.client('a'),
      namespace: NS,
      group: 'g1',
      identity: 'a',
      membership: a.membership,
      clock,
      logger: silentLogger(),
      stopWriters: async (key) => void events.push(`restarted a stopped ${key}`),
    });
    expect(await restarted.sync(new Set(['Target/ns/t2']))).to.deep.equal({ owned: ['Target/ns/t2'], waiting: [] });
    expect(holder('Target/ns/t1')).to.equal('');
    expect(holder('Target/ns/t2')).to.equal('a');
    expect(events).to.deep.equal(['restarted a stopped Target/ns/t1']);
  });

  it('remove deletes a free or own fence, and leaves a live peer’s', async () => {
    const a = await replica('a');
    const b = await replica('b');
    await a.ownership.claim('Target/ns/t1');
    await b.ownership.claim('Target/ns/t2');
    await a.ownership.remove('Target/ns/t1');
    await a.ownership.remove('Target/ns/t2');
    expect(store.get(NS, fenceLeaseName('Target/ns/t1'))).to.equal(undefined);
    expect(holder('Target/ns/t2')).to.equal('b');
  });

  it('claims nothing before its membership is confirmed', async () => {
    store.partition('a', 'fail');
    const a = await replica('a');
    expect(await a.ownership.claim('Target/ns/t')).to.equal(false);
    expect(store.get(NS, fenceLeaseName('Target/ns/t'))).to.equal(undefined);
  });
});
