import { expect } from 'chai';
import sinon from 'sinon';
import type { V1Pod } from '@kubernetes/client-node';
import { Controller } from '../../../../provider/controller/controller.js';
import { FakeClock } from '../../../../provider/core/clock.js';
import { silentLogger } from '../../../../provider/core/logger.js';
import { listOnlyPodInformer } from './fixtures.js';

/** Lets every promise chain that can move without the clock move. */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
}

/** A reconcile the test finishes by hand. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { opened, open };
}

describe('Controller driven by a fake clock', () => {
  let clock: FakeClock;
  let controller: Controller;
  let calls: string[];

  function make(reconcile: (key: string) => Promise<{ requeueAfterMs?: number } | void>, workers = 2): Controller {
    controller = new Controller({ name: 'test', reconciler: { reconcile }, workers, clock, logger: silentLogger() });
    return controller;
  }
  /** Advances the clock `ms` at a time until `cond` holds; returns how long that took. */
  async function advanceUntil(cond: () => boolean, stepMs: number, maxMs: number): Promise<number> {
    let waited = 0;
    while (!cond() && waited < maxMs) {
      clock.advance(stepMs);
      waited += stepMs;
      await settle();
    }
    return waited;
  }

  beforeEach(() => {
    clock = new FakeClock(0);
    calls = [];
  });
  afterEach(async () => {
    await controller.stop(50);
  });

  it('retries a failing key after 500 ms, then 1 s, then 2 s (plus at most 10 % jitter)', async () => {
    make(async (k) => {
      calls.push(k);
      throw new Error('transient');
    });
    controller.start();
    controller.enqueue('k');
    await settle();
    expect(calls).to.have.length(1);
    const waits: number[] = [];
    for (let i = 0; i < 3; i++) {
      const before = calls.length;
      waits.push(await advanceUntil(() => calls.length > before, 10, 10_000));
    }
    [500, 1000, 2000].forEach((base, i) => expect(waits[i], `retry ${i + 1}`).to.be.within(base, base * 1.1 + 10));
  });

  it('caps the backoff at maxBackoffMs (the summary retries within its renew interval)', async () => {
    const reconcile = async (k: string) => {
      calls.push(k);
      throw new Error('down');
    };
    controller = new Controller({ name: 'test', reconciler: { reconcile }, workers: 1, clock, logger: silentLogger(), maxBackoffMs: 1500 });
    controller.start();
    controller.enqueue('k');
    await settle();
    const waits: number[] = [];
    for (let i = 0; i < 5; i++) {
      const before = calls.length;
      waits.push(await advanceUntil(() => calls.length > before, 10, 10_000));
    }
    // 500, 1000, then 1500 each time, where it would go on doubling.
    [500, 1000, 1500, 1500, 1500].forEach((base, i) => expect(waits[i], `retry ${i + 1}`).to.be.within(base, base * 1.1 + 10));
  });

  it('starts the backoff again from 500 ms once the key succeeds', async () => {
    let failing = 3;
    make(async (k) => {
      calls.push(k);
      if (failing-- > 0) throw new Error('transient');
    });
    controller.start();
    controller.enqueue('k');
    await settle();
    await advanceUntil(() => calls.length === 4, 10, 10_000);
    expect(calls).to.have.length(4);
    failing = 1;
    controller.enqueue('k');
    await settle();
    expect(calls).to.have.length(5);
    const wait = await advanceUntil(() => calls.length === 6, 10, 10_000);
    expect(wait).to.be.within(500, 560);
  });

  it('reconciles again after requeueAfterMs, not before', async () => {
    make(async (k) => {
      calls.push(k);
      return { requeueAfterMs: 30_000 };
    });
    controller.start();
    controller.enqueue('k');
    await settle();
    clock.advance(29_999);
    await settle();
    expect(calls).to.have.length(1);
    clock.advance(1);
    await settle();
    expect(calls).to.have.length(2);
  });

  it('an earlier enqueueAfter of the same key wins over a later one', async () => {
    make(async (k) => void calls.push(k));
    controller.start();
    controller.enqueueAfter('k', 5000);
    controller.enqueueAfter('k', 1000);
    clock.advance(1000);
    await settle();
    expect(calls).to.deep.equal(['k']);
    clock.advance(10_000);
    await settle();
    expect(calls).to.deep.equal(['k']);
  });

  it('a key mapper that throws loses only its own event', async () => {
    make(async (k) => void calls.push(k));
    const pods = listOnlyPodInformer(
      async () => ({
        items: [{ metadata: { name: 'bad', namespace: 'ns', resourceVersion: '1' } }, { metadata: { name: 'good', namespace: 'ns', resourceVersion: '1' } }],
        metadata: { resourceVersion: '1' },
      }),
      clock,
    );
    controller.watch(pods, (p) => {
      if (p.metadata!.name === 'bad') throw new Error('bug in a mapper');
      return [`ns/${p.metadata!.name}`];
    });
    pods.start();
    await settle();
    controller.start();
    await settle();
    expect(calls).to.deep.equal(['ns/good']);
    pods.stop();
  });

  it('reconciles nothing until the informers it watches hold their first list', async () => {
    make(async (k) => void calls.push(k));
    let answer: (list: { items: V1Pod[]; metadata: { resourceVersion: string } }) => void = () => undefined;
    const pods = listOnlyPodInformer(() => new Promise((r) => (answer = r)), clock);
    controller.watch(pods, (p) => [`ns/${p.metadata!.name}`]);
    pods.start();
    controller.start();
    // A key from elsewhere (another informer, a resync) waits too: the cache would say "absent".
    controller.enqueue('ns/early');
    clock.advance(1000);
    await settle();
    expect(calls, 'nothing before the first list').to.deep.equal([]);
    answer({ items: [{ metadata: { name: 'a', namespace: 'ns', resourceVersion: '1' } }], metadata: { resourceVersion: '1' } });
    await settle();
    clock.advance(100);
    await settle();
    expect([...calls].sort()).to.deep.equal(['ns/a', 'ns/early']);
    pods.stop();
  });

  it('does not wait for a cache watched with waitForSync false (a target that never answers), but maps its events', async () => {
    make(async (k) => void calls.push(k));
    let answer: (list: { items: V1Pod[]; metadata: { resourceVersion: string } }) => void = () => undefined;
    const target = listOnlyPodInformer(() => new Promise((r) => (answer = r)), clock);
    controller.watch(target, (p) => [`ns/${p.metadata!.name}`], { waitForSync: false });
    target.start();
    controller.start();
    controller.enqueue('ns/source');
    await settle();
    expect(calls, 'keys flow while the target has not listed').to.deep.equal(['ns/source']);
    answer({ items: [{ metadata: { name: 'delegate', namespace: 'ns', resourceVersion: '1' } }], metadata: { resourceVersion: '1' } });
    await settle();
    expect(calls).to.deep.equal(['ns/source', 'ns/delegate']);
    target.stop();
  });

  it('stops waiting for a cache once it is unwatched (a removed target), and hears no more of it', async () => {
    make(async (k) => void calls.push(k));
    const source = listOnlyPodInformer(async () => ({ items: [{ metadata: { name: 'proxy', namespace: 'ns', resourceVersion: '1' } }], metadata: { resourceVersion: '1' } }), clock);
    let answer: (list: { items: V1Pod[]; metadata: { resourceVersion: string } }) => void = () => undefined;
    const target = listOnlyPodInformer(() => new Promise((r) => (answer = r)), clock);
    controller.watch(source, (p) => [`ns/${p.metadata!.name}`]);
    const unwatch = controller.watch(target, (p) => [`ns/${p.metadata!.name}`]);
    source.start();
    target.start();
    controller.start();
    clock.advance(1000);
    await settle();
    expect(calls, 'held by the target cache that has not listed').to.deep.equal([]);
    unwatch();
    clock.advance(100);
    await settle();
    expect(calls).to.deep.equal(['ns/proxy']);
    // Its list, late: nothing of it reaches the controller any more.
    answer({ items: [{ metadata: { name: 'late', namespace: 'ns', resourceVersion: '1' } }], metadata: { resourceVersion: '1' } });
    await settle();
    expect(
      target.list().map((p) => p.metadata!.name),
      'the informer itself did list',
    ).to.deep.equal(['late']);
    expect(calls).to.deep.equal(['ns/proxy']);
    source.stop();
    target.stop();
  });

  it('stop() reconciles none of the keys still queued', async () => {
    const first = gate();
    make(async (k) => {
      calls.push(k);
      if (k === 'a') await first.opened;
    }, 1);
    controller.start();
    for (const k of ['a', 'b', 'c']) controller.enqueue(k);
    await settle();
    expect(calls).to.deep.equal(['a']);
    const stopped = controller.stop(1000);
    first.open();
    await stopped;
    await settle();
    expect(calls, 'b and c were queued, not in flight').to.deep.equal(['a']);
  });

  it('stop() right after a key was handed to an idle worker does not let that reconcile start after it', async () => {
    let running = 0;
    make(async (k) => {
      calls.push(k);
      running++;
      await settle();
      running--;
    }, 1);
    controller.start();
    await settle();
    controller.enqueue('k');
    await controller.stop(1000);
    expect(running, 'nothing runs once stop() has returned').to.equal(0);
    await settle();
    expect(calls, 'the key was dropped, not reconciled late').to.deep.equal([]);
  });

  it('stop() waits for a reconcile in flight, and gives up on it at the deadline', async () => {
    const g = gate();
    let finished = false;
    make(async () => {
      await g.opened;
      finished = true;
    }, 1);
    controller.start();
    controller.enqueue('k');
    await settle();
    let stopped = false;
    const stopping = controller.stop(10_000).then(() => (stopped = true));
    await settle();
    expect(stopped, 'still waiting for the reconcile').to.equal(false);
    g.open();
    await stopping;
    expect(finished).to.equal(true);

    const never = make(() => new Promise(() => {}), 1);
    never.start();
    never.enqueue('k');
    await settle();
    // stop()'s deadline is a timer of its own, not the injected clock's: faked here, so what is
    // asserted is that stop() gives up when that timer fires, and not a moment before.
    const timers = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      let gaveUp = false;
      const givingUp = never.stop(30).then(() => (gaveUp = true));
      timers.tick(29);
      await settle();
      expect(gaveUp, 'given up before the deadline').to.equal(false);
      timers.tick(1);
      await givingUp;
    } finally {
      timers.restore();
    }
  });
});
