import { expect } from 'chai';
import { FakeClock } from '../../../../provider/core/clock.js';
import { WorkQueue } from '../../../../provider/controller/workqueue.js';

/** Takes every key that is ready now, without waiting. */
async function drain(q: WorkQueue): Promise<string[]> {
  const out: string[] = [];
  while (q.len() > 0) out.push((await q.get())!);
  return out;
}

describe('WorkQueue', () => {
  let clock: FakeClock;
  let q: WorkQueue;
  beforeEach(() => {
    clock = new FakeClock(0);
    q = new WorkQueue(clock, { baseDelayMs: 100, maxDelayMs: 1000, random: () => 0 });
  });

  it('hands keys out in order and holds a key added twice while queued only once', async () => {
    q.add('a');
    q.add('b');
    q.add('a');
    expect(await drain(q)).to.deep.equal(['a', 'b']);
  });

  it('never hands one key to two workers: a key added while processed comes back after done', async () => {
    q.add('a');
    const key = await q.get();
    q.add('a');
    expect(q.len(), 'not queued while processing').to.equal(0);
    q.done(key!);
    expect(await drain(q)).to.deep.equal(['a']);
    q.done('a');
    expect(q.len()).to.equal(0);
  });

  it('wakes a waiting worker directly', async () => {
    const waiting = q.get();
    q.add('x');
    expect(await waiting).to.equal('x');
  });

  it('delays adds by the clock, the earliest pending delay winning', async () => {
    q.addAfter('a', 500);
    q.addAfter('a', 200);
    q.addAfter('a', 900);
    clock.advance(199);
    expect(q.len()).to.equal(0);
    clock.advance(1);
    expect(await drain(q)).to.deep.equal(['a']);
    clock.advance(1000);
    expect(q.len(), 'the later delays were dropped').to.equal(0);
  });

  it('backs off per key, doubling up to the cap, until forget resets it', async () => {
    const delays: number[] = [];
    for (let i = 0; i < 6; i++) {
      q.addRateLimited('k');
      let waited = 0;
      while (q.len() === 0 && waited < 5000) {
        clock.advance(10);
        waited += 10;
      }
      delays.push(waited);
      q.done((await q.get())!);
    }
    expect(delays).to.deep.equal([100, 200, 400, 800, 1000, 1000]);
    expect(q.failuresOf('k')).to.equal(6);
    q.forget('k');
    expect(q.failuresOf('k')).to.equal(0);
  });

  it('adds up to 10 % jitter to a backoff', () => {
    const jittery = new WorkQueue(clock, { baseDelayMs: 100, random: () => 0.999 });
    jittery.addRateLimited('k');
    clock.advance(109);
    expect(jittery.len()).to.equal(0);
    clock.advance(1);
    expect(jittery.len()).to.equal(1);
  });

  it('on shut down, releases waiting workers, drops delayed keys and refuses new ones', async () => {
    const waiting = q.get();
    q.addAfter('later', 100);
    q.shutDown();
    expect(await waiting).to.equal(undefined);
    q.add('new');
    clock.advance(1000);
    expect(q.len()).to.equal(0);
    expect(await q.get()).to.equal(undefined);
    expect(clock.pending()).to.equal(0);
  });
});
