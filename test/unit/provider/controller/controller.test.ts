import { expect } from 'chai';
import { Registry } from 'prom-client';
import { Controller } from '../../../../provider/controller/controller.js';
import { realClock } from '../../../../provider/core/clock.js';
import { TerminalError } from '../../../../provider/core/errors.js';
import { silentLogger } from '../../../../provider/core/logger.js';
import { createMetrics } from '../../../../provider/core/metrics.js';
import { listOnlyPodInformer } from './fixtures.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(what: string, cond: () => boolean, ms = 2000): Promise<void> {
  for (const end = Date.now() + ms; !cond(); await sleep(5)) if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
}

describe('Controller', () => {
  let controller: Controller | undefined;
  afterEach(async () => {
    await controller?.stop(100);
    controller = undefined;
  });

  function make(reconcile: (key: string) => Promise<{ requeueAfterMs?: number } | void>, workers = 2) {
    const registry = new Registry();
    const metrics = createMetrics(registry);
    controller = new Controller({ name: 'test', reconciler: { reconcile }, workers, clock: realClock, logger: silentLogger(), metrics });
    return { controller, registry };
  }

  it('maps informer events to keys and reconciles each', async () => {
    const seen: string[] = [];
    const { controller } = make(async (k) => void seen.push(k));
    const pods = listOnlyPodInformer(async () => ({ items: [{ metadata: { name: 'a', namespace: 'ns', resourceVersion: '1' } }], metadata: { resourceVersion: '1' } }), realClock);
    controller.watch(pods, (p) => [`ns/${p.metadata!.name}`, 'everything']);
    controller.start();
    pods.start();
    await until('two reconciles', () => seen.length === 2);
    expect(seen.sort()).to.deep.equal(['everything', 'ns/a']);
    pods.stop();
  });

  it('retries a failing key with backoff, and drops it on a TerminalError', async () => {
    const calls = new Map<string, number>();
    const { controller, registry } = make(async (k) => {
      const n = (calls.get(k) ?? 0) + 1;
      calls.set(k, n);
      if (k === 'flaky' && n < 3) throw new Error('transient');
      if (k === 'broken') throw new TerminalError('cannot ever work');
    });
    controller.start();
    controller.enqueue('flaky');
    controller.enqueue('broken');
    // Backoff 500 ms then 1 s (the queue's defaults): the third try succeeds.
    await until('the third try', () => calls.get('flaky') === 3, 4000);
    await sleep(200);
    expect(calls.get('broken')).to.equal(1);
    const text = await registry.metrics();
    expect(text).to.match(/admiralty_controller_reconcile_total\{controller="test",result="error"\} 2/);
    expect(text).to.match(/admiralty_controller_reconcile_total\{controller="test",result="terminal"\} 1/);
    expect(text).to.match(/admiralty_controller_reconcile_total\{controller="test",result="success"\} 1/);
  });

  it('honours requeueAfterMs', async () => {
    let n = 0;
    const { controller } = make(async () => (++n < 3 ? { requeueAfterMs: 20 } : undefined));
    controller.start();
    controller.enqueue('k');
    await until('three reconciles', () => n === 3);
    await sleep(60);
    expect(n).to.equal(3);
  });

  it('never runs one key twice at once, even with several workers', async () => {
    let running = 0;
    let most = 0;
    let total = 0;
    const { controller } = make(async () => {
      running++;
      most = Math.max(most, running);
      await sleep(20);
      running--;
      total++;
    }, 4);
    controller.start();
    for (let i = 0; i < 5; i++) {
      controller.enqueue('same');
      await sleep(5);
    }
    await until('the queue to settle', () => running === 0 && total >= 2);
    expect(most).to.equal(1);
  });

  it('stop waits for the reconcile in flight, up to the deadline', async () => {
    let finished = false;
    const { controller } = make(async () => {
      await sleep(50);
      finished = true;
    });
    controller.start();
    controller.enqueue('k');
    await sleep(5);
    await controller.stop(1000);
    expect(finished).to.equal(true);

    let never = false;
    const slow = new Controller({ name: 'slow', reconciler: { reconcile: () => new Promise(() => (never = true)) }, clock: realClock, logger: silentLogger() });
    slow.start();
    slow.enqueue('k');
    await sleep(5);
    // A stop() that waited for this reconcile would never return: the test's timeout catches
    // that. When the deadline fires is tested on a fake timer in controller-clock.test.ts.
    await slow.stop(50);
    expect(never).to.equal(true);
  });
});
