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

  it('treats a cap below 1 as 1', async () => {
    const one = new WorkQueue(new FakeClock(0), { shards: { of: groupOfKey, maxInFlight: 0 } });
    one.add('g/1');
    one.add('g/2');
    expect(await one.get()).to.equal('g/1');
    expect((await settled(one.get())).done).to.equal(false);
  });
});
