import { expect } from 'chai';
import { FakeClock } from '../../../../provider/core/clock.js';
import { WorkQueue } from '../../../../provider/controller/workqueue.js';

describe('WorkQueue at shut down and between workers', () => {
  let clock: FakeClock;
  let q: WorkQueue;
  beforeEach(() => {
    clock = new FakeClock(0);
    q = new WorkQueue(clock, { baseDelayMs: 100, maxDelayMs: 1000, random: () => 0 });
  });

  it('hands out no key still queued once shut down', async () => {
    q.add('a');
    q.add('b');
    q.shutDown();
    expect(await q.get()).to.equal(undefined);
    expect(await q.get()).to.equal(undefined);
  });

  it('does not requeue a key that was re-added while processed if it shut down meanwhile', async () => {
    q.add('a');
    const key = (await q.get())!;
    q.add('a');
    q.shutDown();
    q.done(key);
    expect(q.len()).to.equal(0);
    expect(await q.get()).to.equal(undefined);
  });

  it('gives two waiting workers two different keys, never the same one', async () => {
    const w1 = q.get();
    const w2 = q.get();
    q.add('a');
    q.add('a');
    q.add('b');
    expect([await w1, await w2]).to.deep.equal(['a', 'b']);
    expect(q.len(), 'the second add of a waits for done').to.equal(0);
    q.done('a');
    expect(await q.get()).to.equal('a');
  });

  it('keeps backoff per key: one key failing does not slow another', async () => {
    for (let i = 0; i < 3; i++) {
      q.addRateLimited('slow');
      clock.advance(1000);
      q.done((await q.get())!);
    }
    q.addRateLimited('slow'); // fourth failure: 800 ms
    q.addRateLimited('fresh'); // first failure: 100 ms
    clock.advance(100);
    expect(await q.get()).to.equal('fresh');
    expect(q.len()).to.equal(0);
    clock.advance(700);
    expect(await q.get()).to.equal('slow');
  });

  it('reports depth and counts adds and retries through its hooks', async () => {
    const depths: number[] = [];
    let adds = 0;
    let retries = 0;
    const hooked = new WorkQueue(clock, { baseDelayMs: 100, random: () => 0, hooks: { onAdd: () => adds++, onRetry: () => retries++, onDepth: (d) => depths.push(d) } });
    hooked.add('a');
    hooked.add('b');
    await hooked.get();
    hooked.addRateLimited('c');
    clock.advance(100);
    expect({ adds, retries, depths }).to.deep.equal({ adds: 3, retries: 1, depths: [1, 2, 1, 2] });
  });
});
