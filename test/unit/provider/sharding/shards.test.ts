import { expect } from 'chai';
import { FakeClock } from '../../../../provider/core/clock.js';
import { silentLogger } from '../../../../provider/core/logger.js';
import { fenceLeaseName } from '../../../../provider/sharding/ownership.js';
import { ownerOf } from '../../../../provider/sharding/rendezvous.js';
import { CLUSTER_SHARD, Shards, type TargetSet } from '../../../../provider/sharding/shards.js';
import { FakeLeaseStore } from '../../../support/fake-lease-store.js';
import { advanceInSteps } from '../../../support/fake-time.js';

const NS = 'admiralty';
/** One replica: its shards, whether the manager started its writers, and what its one gated controller was asked. */
interface Replica {
  identity: string;
  shards: Shards;
  leading: boolean;
  resyncs: number;
}

describe('Shards', () => {
  let clock: FakeClock;
  let store: FakeLeaseStore;
  let replicas: Replica[];
  let log: string[];
  let synced: boolean;
  const keys = Array.from({ length: 30 }, (_, i) => `Target/ns${i}/t`);
  const targets: TargetSet = { keys: () => keys, has: (k) => keys.includes(k), hasSynced: () => synced };
  const holder = (key: string) => store.get(NS, fenceLeaseName(key))?.spec?.holderIdentity || 'nobody';

  beforeEach(() => {
    clock = new FakeClock(1_700_000_000_000);
    store = new FakeLeaseStore();
    replicas = [];
    log = [];
    synced = true;
  });
  afterEach(async () => {
    store.heal();
    for (const r of replicas)
      await r.shards
        .elector({ onStartedLeading() {}, onStoppedLeading() {} })
        .release()
        .catch(() => {});
  });

  async function replica(identity: string): Promise<Replica> {
    const shards = new Shards({
      coordination: store.client(identity),
      namespace: NS,
      group: 'g1',
      identity,
      leaseDurationSeconds: 15,
      renewDeadlineSeconds: 10,
      retryPeriodSeconds: 2,
      clock,
      logger: silentLogger(),
    });
    const r: Replica = { identity, shards, leading: false, resyncs: 0 };
    shards.register({
      resync: () => void r.resyncs++,
      quiesce: async (shard) => void log.push(`${identity} quiesced ${shard ?? CLUSTER_SHARD} while the fence named ${holder(shard ?? CLUSTER_SHARD)}`),
    });
    shards.track(targets);
    const elector = shards.elector({ onStartedLeading: () => (r.leading = true), onStoppedLeading: () => (r.leading = false) });
    await elector.run();
    replicas.push(r);
    return r;
  }
  const advance = (ms: number) => advanceInSteps(clock, ms, 500, 30);
  const owners = (shard: string) => replicas.filter((r) => r.shards.owns(shard === CLUSTER_SHARD ? undefined : shard)).map((r) => r.identity);

  it('gives each of 31 shards (30 targets and the cluster-wide one) to exactly the replica rendezvous hashing names, among 3 members', async () => {
    for (const id of ['a', 'b', 'c']) await replica(id);
    await advance(6000);
    for (const r of replicas) expect(r.leading, `${r.identity} is a member and runs its writers`).to.equal(true);
    for (const shard of [CLUSTER_SHARD, ...keys]) {
      expect(owners(shard), shard).to.deep.equal([ownerOf(shard, ['a', 'b', 'c'])]);
      expect(holder(shard), `${shard}'s fence`).to.equal(ownerOf(shard, ['a', 'b', 'c']));
    }
    const counts = replicas.map((r) => r.shards.owned().length);
    expect(counts.reduce((x, y) => x + y)).to.equal(31);
    for (const r of replicas) expect(r.resyncs, `${r.identity} resynced its controllers on claiming`).to.be.greaterThan(0);
  });

  it("hands a leaver's shards to the others on release: each quiesced on the leaver while its fence still named it, then owned by its runner-up", async () => {
    for (const id of ['a', 'b', 'c']) await replica(id);
    await advance(6000);
    const c = replicas[2]!;
    const theirs = c.shards.owned();
    expect(theirs.length).to.be.greaterThan(0);
    await c.shards.elector({ onStartedLeading() {}, onStoppedLeading() {} }).release();
    replicas.pop();
    for (const shard of theirs) expect(log).to.include(`c quiesced ${shard} while the fence named c`);
    await advance(4000);
    for (const shard of [CLUSTER_SHARD, ...keys]) expect(owners(shard), shard).to.deep.equal([ownerOf(shard, ['a', 'b'])]);
  });

  it("takes a dead replica's shards only after its membership Lease expired by the survivors' clocks, and then all of them", async () => {
    for (const id of ['a', 'b', 'c']) await replica(id);
    await advance(6000);
    const theirs = replicas[2]!.shards.owned();
    // SIGKILL: c's calls never answer again.
    store.partition('c', 'hang');
    await advance(12_000);
    expect(replicas[2]!.shards.owns(theirs[0] === CLUSTER_SHARD ? undefined : theirs[0]), 'c past its renew deadline').to.equal(false);
    for (const shard of theirs) expect(owners(shard), `${shard} before c's Lease expired`).to.deep.equal([]);
    await advance(8000);
    for (const shard of theirs) expect(owners(shard), `${shard} after`).to.deep.equal([ownerOf(shard, ['a', 'b'])]);
    replicas.pop();
  });

  it('owns nothing and claims no fence before the targets are listed', async () => {
    synced = false;
    const a = await replica('a');
    await advance(4000);
    expect(a.leading).to.equal(true);
    expect(a.shards.owned()).to.deep.equal([]);
    expect(a.shards.owns(undefined)).to.equal(false);
    expect(holder(CLUSTER_SHARD)).to.equal('nobody');
    synced = true;
    await advance(4000);
    expect(a.shards.owned().length).to.equal(31);
  });
});
