import { expect } from 'chai';
import { FakeClock } from '../../../../provider/core/clock.js';
import { WorkQueue } from '../../../../provider/controller/workqueue.js';

/** Keys `<group>/<n>`: the group is what comes before the slash; keys without one have none. */
const groupOfKey = (key: string) => (key.includes('/') ? key.split('/')[0] : undefined);

/** Whether a promise has settled, after pending microtasks ran. */
async function settled<T>(p: Promise<T>): Promise<{ done: boolean; value?: T }> {
  let out: { done: boolean; value?: T } = { done: false };
  void p.then((value) => (out = { done: true, value }));
  await new Promise((res) => setImmediate(res));
  return out;
}

describe('WorkQueue with shards', () => {
  let q: WorkQueue;
  beforeEach(() => {
    q = new WorkQueue(new FakeClock(0), { shards: { of: groupOfKey, maxInFlight: 2 } });
  });

  it('holds back the keys of a group at its cap and hands out later keys of other groups', async () => {
    for (const k of ['slow/1', 'slow/2', 'slow/3', 'slow/4', 'ok/1', 'plain']) q.add(k);
    const taken = [await q.get(), await q.get(), await q.get(), await q.get()];
    expect(taken).to.deep.equal(['slow/1', 'slow/2', 'ok/1', 'plain']);
    expect(q.len(), 'the held-back keys stay queued').to.equal(2);
    // Nothing else may go: a fifth worker waits although keys are queued.
    expect((await settled(q.get())).done).to.equal(false);
  });

  it('hands a held-back key to a waiting worker as soon as a key of its group is done', async () => {
    for (const k of ['slow/1', 'slow/2', 'slow/3']) q.add(k);
    await q.get();
    await q.get();
    const waiting = q.get();
    expect((await settled(waiting)).done).to.equal(false);
    q.done('slow/1');
    expect(await waiting).to.equal('slow/3');
  });

  it('gives a key added while workers wait to one of them only if its group has room', async () => {
    q.add('slow/1');
    q.add('slow/2');
    await q.get();
    await q.get();
    const waiting = q.get();
    q.add('slow/3');
    expect((await settled(waiting)).done, 'slow is full').to.equal(false);
    q.add('ok/1');
    expect(await waiting).to.equal('ok/1');
    expect(q.len()).to.equal(1);
  });

  it('counts a key in the group it had when handed out, even if its group changes meanwhile', async () => {
    const groups = new Map([['k', 'a']]);
    const moving = new WorkQueue(new FakeClock(0), { shards: { of: (key) => groups.get(key) ?? groupOfKey(key), maxInFlight: 1 } });
    moving.add('k');
    expect(await moving.get()).to.equal('k');
    groups.set('k', 'b');
    moving.done('k');
    moving.add('a/1');
    expect(await moving.get(), 'group a was released').to.equal('a/1');
  });

  it('still never hands one key to two workers, and re-queues a key added while it was processed', async () => {
    q.add('slow/1');
    expect(await q.get()).to.equal('slow/1');
    q.add('slow/1');
    expect(q.len()).to.equal(0);
    q.done('slow/1');
    expect(await q.get()).to.equal('slow/1');
  });

  it('hands out the held-back keys of a group in their order, before its keys queued later', async () => {
    for (const k of ['slow/1', 'slow/2', 'slow/3', 'slow/4', 'ok/1']) q.add(k);
    expect([await q.get(), await q.get(), await q.get()]).to.deep.equal(['slow/1', 'slow/2', 'ok/1']);
    q.add('slow/5');
    q.done('slow/1');
    q.done('slow/2');
    expect([await q.get(), await q.get()]).to.deep.equal(['slow/3', 'slow/4']);
    q.done('slow/3');
    expect(await q.get()).to.equal('slow/5');
    expect(q.len()).to.equal(0);
  });

  it('asks a held-back key for its group again: one that moved goes as its new group allows', async () => {
    const groups = new Map<string, string>();
    const moving = new WorkQueue(new FakeClock(0), { shards: { of: (key) => groups.get(key) ?? groupOfKey(key), maxInFlight: 1 } });
    for (const k of ['a/1', 'a/2', 'b/1']) moving.add(k);
    groups.set('p', 'a');
    moving.add('p');
    expect([await moving.get(), await moving.get()]).to.deep.equal(['a/1', 'b/1']);
    // a/2 and p wait for a; p then moves to b, which is full, and waits there.
    const third = moving.get();
    expect((await settled(third)).done).to.equal(false);
    groups.set('p', 'b');
    moving.done('a/1');
    expect(await third).to.equal('a/2');
    const waiting = moving.get();
    expect((await settled(waiting)).done, 'b is full').to.equal(false);
    moving.done('b/1');
    expect(await waiting).to.equal('p');
    // A key whose group is gone (its proxy was deleted) is never held back.
    groups.set('q', 'a');
    moving.add('q');
    moving.add('r');
    groups.delete('q');
    moving.done('a/2');
    expect([await moving.get(), await moving.get()]).to.have.members(['q', 'r']);
  });

  it('looks at each held-back key a bounded number of times, however many wait', async () => {
    let asked = 0;
    const counting = new WorkQueue(new FakeClock(0), { shards: { of: (key) => (asked++, groupOfKey(key)), maxInFlight: 2 } });
    const n = 5000;
    for (let i = 0; i < n; i++) counting.add(`full/${i}`);
    for (let i = 0; i < n; i++) counting.add(`free/${i}`);
    // Two of the full group go, then every free key, one at a time, each done at once.
    expect([await counting.get(), await counting.get()]).to.deep.equal(['full/0', 'full/1']);
    for (let i = 0; i < n; i++) {
      const key = await counting.get();
      expect(key).to.equal(`free/${i}`);
      counting.done(key!);
    }
    // A scan of the queue on every hand-out would have asked about 5000 x 5000 times.
    expect(asked).to.be.below(4 * 2 * n);
    expect(counting.len()).to.equal(n - 2);
  });

  it('treats a cap below 1 as 1', async () => {
    const one = new WorkQueue(new FakeClock(0), { shards: { of: groupOfKey, maxInFlight: 0 } });
    one.add('g/1');
    one.add('g/2');
    expect(await one.get()).to.equal('g/1');
    expect((await settled(one.get())).done).to.equal(false);
  });
});
