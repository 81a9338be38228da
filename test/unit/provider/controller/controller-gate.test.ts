import { expect } from 'chai';
import { Controller, type ControllerGate } from '../../../../provider/controller/controller.js';
import { realClock } from '../../../../provider/core/clock.js';
import { silentLogger } from '../../../../provider/core/logger.js';
import { listOnlyPodInformer } from './fixtures.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(what: string, cond: () => boolean, ms = 2000): Promise<void> {
  for (const end = Date.now() + ms; !cond(); await sleep(5)) if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
}

/** Keys are `<shard>|<name>`; a key without a bar is the cluster-wide shard's (undefined). */
function gate(owned: Set<string | undefined>): ControllerGate {
  return { shardOf: (key) => (key.includes('|') ? key.split('|')[0] : undefined), owns: (shard) => owned.has(shard) };
}

describe('Controller with a shard gate', () => {
  let controller: Controller | undefined;
  afterEach(async () => {
    await controller?.stop(100);
    controller = undefined;
  });

  function make(owned: Set<string | undefined>, reconcile: (key: string) => Promise<void>) {
    controller = new Controller({ name: 'gated', reconciler: { reconcile }, workers: 2, gate: gate(owned), clock: realClock, logger: silentLogger() });
    return controller;
  }

  it('reconciles the keys of the shards it owns (the cluster-wide one included) and none of the others', async () => {
    const seen: string[] = [];
    const c = make(new Set(['t1', undefined]), async (k) => void seen.push(k));
    c.start();
    for (const k of ['t1|a', 't2|b', 'wide', 't1|c', 't3|d']) c.enqueue(k);
    c.enqueue('t1|z');
    await until('the owned keys', () => seen.length === 4);
    await sleep(50);
    expect(seen.sort()).to.deep.equal(['t1|a', 't1|c', 't1|z', 'wide']);
  });

  it('resync enqueues the keys of every object the watched informers hold: a key dropped before its shard was owned is reconciled after', async () => {
    const owned = new Set<string | undefined>();
    const seen: string[] = [];
    const c = make(owned, async (k) => void seen.push(k));
    const pods = listOnlyPodInformer(async () => ({ items: [{ metadata: { name: 'a', namespace: 't2', resourceVersion: '1' } }], metadata: { resourceVersion: '1' } }), realClock);
    c.watch(pods, (p) => [`${p.metadata!.namespace}|${p.metadata!.name}`]);
    pods.start();
    c.start();
    await until('the informer listed', () => pods.hasSynced());
    await sleep(50);
    expect(seen, 'shard t2 not owned yet').to.deep.equal([]);
    owned.add('t2');
    c.resync();
    await until('the resynced key', () => seen.length === 1);
    expect(seen).to.deep.equal(['t2|a']);
    pods.stop();
  });

  it("quiesce waits for its shard's reconcile in flight and not for another shard's", async () => {
    let endT1!: () => void;
    let endT2!: () => void;
    const running = new Set<string>();
    const c = make(new Set(['t1', 't2']), (k) => {
      running.add(k);
      return new Promise<void>((res) => {
        const end = () => {
          running.delete(k);
          res();
        };
        if (k.startsWith('t1')) endT1 = end;
        else endT2 = end;
      });
    });
    c.start();
    c.enqueue('t1|a');
    c.enqueue('t2|b');
    await until('both in flight', () => running.size === 2);
    let t2Quiet = false;
    let t1Quiet = false;
    void c.quiesce('t2').then(() => (t2Quiet = true));
    void c.quiesce('t1').then(() => (t1Quiet = true));
    endT1();
    await until('t1 quiet', () => t1Quiet);
    expect(t2Quiet, 't2 still in flight').to.equal(false);
    endT2();
    await until('t2 quiet', () => t2Quiet);
  });
});
