import { expect } from 'chai';
import { KubeConfig } from '@kubernetes/client-node';
import { silentLogger } from '../../../../provider/core/logger.js';
import { Controller } from '../../../../provider/controller/controller.js';
import type { Informer } from '../../../../provider/controller/informer.js';
import { leaderController, Manager, type Cache, type Runnable } from '../../../../provider/controller/manager.js';
import { FakeClock, realClock } from '../../../../provider/core/clock.js';

/** A cache that records its starts and stops in the shared log; `synced` is set by the test. */
function cache(name: string, log: string[]): Cache & { synced: boolean } {
  return {
    name,
    synced: false,
    start: () => log.push(`start cache ${name}`),
    stop: () => log.push(`stop cache ${name}`),
    hasSynced() {
      return this.synced;
    },
  };
}

function runnable(name: string, log: string[], o: { leader?: boolean; caches?: Cache[]; start?: () => Promise<void> } = {}): Runnable {
  return {
    name,
    needLeaderElection: o.leader,
    caches: o.caches,
    start: async () => {
      log.push(`start ${name}`);
      await o.start?.();
    },
    stop: () => {
      log.push(`stop ${name}`);
    },
  };
}

/** An elector the test drives: it leads when told to. */
function fakeElector(log: string[]) {
  const e = {
    callbacks: undefined as undefined | { onStartedLeading(): void; onStoppedLeading(): void },
    build: (cb: { onStartedLeading(): void; onStoppedLeading(): void }) => {
      e.callbacks = cb;
      return {
        run: async () => void log.push('elector run'),
        release: async () => void log.push('elector release'),
      };
    },
  };
  return e;
}

const settle = async () => {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
};

describe('Manager', () => {
  let log: string[];
  beforeEach(() => (log = []));

  function setup() {
    const targets = cache('targets', log);
    const proxies = cache('proxies', log);
    const virtualNodes = cache('virtual-nodes', log);
    const elector = fakeElector(log);
    let lost = 0;
    const m = new Manager({ logger: silentLogger(), clock: realClock, elector: elector.build, stepDownDeadlineMs: 1000, onLostLeadership: () => lost++ });
    m.add(runnable('webhook', log));
    m.add(runnable('target-registry', log, { caches: [targets] }));
    m.add(runnable('extender', log, { caches: [proxies] }));
    m.add(runnable('targets', log, { leader: true, caches: [targets, virtualNodes] }));
    m.add(runnable('delegation', log, { leader: true, caches: [proxies] }));
    return { m, elector, targets, proxies, virtualNodes, lost: () => lost };
  }

  it('starts what every replica runs, with its caches first, and no writer before election', async () => {
    const w = setup();
    await w.m.start();
    expect(log).to.deep.equal(['start webhook', 'start cache targets', 'start target-registry', 'start cache proxies', 'start extender', 'elector run']);
    expect(w.m.isLeader()).to.equal(false);
  });

  it('a standby is ready once its serving caches synced, without leading and whatever the writers’ caches say', async () => {
    const w = setup();
    expect(w.m.readiness()).to.deep.include({ ready: false });
    await w.m.start();
    expect(w.m.readiness()).to.deep.equal({ ready: false, reason: 'caches not synced: targets, proxies' });
    w.targets.synced = true;
    w.proxies.synced = true;
    expect(w.m.readiness()).to.deep.equal({ ready: true });
    expect(w.virtualNodes.synced).to.equal(false);
  });

  it('is not ready while an always-on runnable is still starting', async () => {
    let listen!: () => void;
    const m = new Manager({ logger: silentLogger(), clock: realClock, stepDownDeadlineMs: 1000 });
    m.add(runnable('webhook', log, { start: () => new Promise<void>((r) => (listen = r)) }));
    const started = m.start();
    await settle();
    expect(m.readiness()).to.deep.equal({ ready: false, reason: 'starting: webhook' });
    listen();
    await started;
    expect(m.readiness()).to.deep.equal({ ready: true });
  });

  it('on election starts the writers, each cache once', async () => {
    const w = setup();
    await w.m.start();
    log.length = 0;
    w.elector.callbacks!.onStartedLeading();
    await settle();
    expect(w.m.isLeader()).to.equal(true);
    expect(log).to.deep.equal(['start cache virtual-nodes', 'start targets', 'start delegation']);
  });

  it('on loss stops the writers and the caches only they read, keeps serving, then calls onLostLeadership', async () => {
    const w = setup();
    await w.m.start();
    w.targets.synced = w.proxies.synced = true;
    w.elector.callbacks!.onStartedLeading();
    await settle();
    log.length = 0;
    w.elector.callbacks!.onStoppedLeading();
    expect(w.m.isLeader(), 'at once').to.equal(false);
    await settle();
    expect(log).to.have.members(['stop delegation', 'stop targets', 'stop cache virtual-nodes']);
    expect(log).to.have.length(3);
    expect(w.lost()).to.equal(1);
    expect(w.m.readiness()).to.deep.equal({ ready: true });
  });

  it('a loss during the writers’ start waits for it, then stops what started, and starts no more', async () => {
    let release!: () => void;
    const e = fakeElector(log);
    const m2 = new Manager({ logger: silentLogger(), clock: realClock, elector: e.build, stepDownDeadlineMs: 1000 });
    m2.add(runnable('first', log, { leader: true, start: () => new Promise<void>((r) => (release = r)) }));
    m2.add(runnable('second', log, { leader: true }));
    await m2.start();
    e.callbacks!.onStartedLeading();
    await settle();
    e.callbacks!.onStoppedLeading();
    release();
    await settle();
    expect(log).to.deep.equal(['elector run', 'start first', 'stop first']);
  });

  it('without an elector the writers start at once', async () => {
    const m = new Manager({ logger: silentLogger(), clock: realClock, stepDownDeadlineMs: 1000 });
    m.add(runnable('webhook', log));
    m.add(runnable('targets', log, { leader: true }));
    await m.start();
    await settle();
    expect(log).to.deep.equal(['start webhook', 'start targets']);
    expect(m.isLeader()).to.equal(true);
  });

  it('stop: the writers first, then the lease is handed back, then the rest, newest first', async () => {
    const w = setup();
    await w.m.start();
    w.elector.callbacks!.onStartedLeading();
    await settle();
    log.length = 0;
    await w.m.stop(1000);
    expect(log.slice(0, 2)).to.have.members(['stop delegation', 'stop targets']);
    expect(log.slice(2)).to.deep.equal(['stop cache virtual-nodes', 'elector release', 'stop extender', 'stop cache proxies', 'stop target-registry', 'stop cache targets', 'stop webhook']);
    expect(w.lost(), 'a shutdown is not a loss').to.equal(0);
    expect(w.m.readiness().ready).to.equal(false);
  });

  it('a loss during a shutdown ends the process when a writer has not stopped by the step-down deadline, and not when it has', async () => {
    for (const hangs of [true, false]) {
      const e = fakeElector(log);
      let lost = 0;
      const m = new Manager({ logger: silentLogger(), clock: realClock, elector: e.build, stepDownDeadlineMs: 50, onLostLeadership: () => lost++ });
      let stopped!: () => void;
      // A writer whose stop waits for a call to the apiserver that hangs (or not).
      m.add({ name: 'writer', needLeaderElection: true, start: async () => undefined, stop: () => (hangs ? new Promise<void>((r) => (stopped = r)) : undefined) });
      await m.start();
      e.callbacks!.onStartedLeading();
      await settle();
      const shutdown = m.stop(10_000);
      await settle();
      // The lease's renewal fails meanwhile: another replica may lead 50 ms from now.
      e.callbacks!.onStoppedLeading();
      await new Promise((r) => setTimeout(r, 120));
      expect(lost, hangs ? 'the writer still at work: exit' : 'the writers stopped in time: a shutdown, not a loss').to.equal(hangs ? 1 : 0);
      if (hangs) stopped();
      await shutdown;
    }
  });

  it('stop with a drain: not Ready and draining at once, the lease handed back before the drain ends, the servers stopped after it', async () => {
    const clock = new FakeClock();
    const w = setup();
    const drained: string[] = [];
    const server: Runnable = { ...runnable('kubelet API', log), drain: () => void drained.push('kubelet API') };
    const m = new Manager({ logger: silentLogger(), clock, elector: w.elector.build, stepDownDeadlineMs: 1000 });
    m.add(server);
    m.add(runnable('delegation', log, { leader: true }));
    await m.start();
    w.elector.callbacks!.onStartedLeading();
    await settle();
    log.length = 0;
    const stopped = m.stop(1000, 5000);
    expect(m.readiness()).to.deep.equal({ ready: false, reason: 'shutting down' });
    expect(drained).to.deep.equal(['kubelet API']);
    await settle();
    expect(log, 'the writers stop and the lease is handed back while the servers still serve').to.deep.equal(['stop delegation', 'elector release']);
    clock.advance(4999);
    await settle();
    expect(log).to.not.include('stop kubelet API');
    clock.advance(1);
    await stopped;
    expect(log).to.deep.equal(['stop delegation', 'elector release', 'stop kubelet API']);
  });

  it('refuses runnables added after start', async () => {
    const m = new Manager({ logger: silentLogger(), clock: realClock, stepDownDeadlineMs: 1000 });
    await m.start();
    expect(() => m.add(runnable('late', log))).to.throw(/added after start/);
  });

  it('a target engaged after start gets the parts asked for on engage, and leaves at shutdown after every runnable stopped', async () => {
    const m = new Manager({ logger: silentLogger(), clock: realClock, stepDownDeadlineMs: 1000 });
    m.add(runnable('webhook', log));
    m.onEngage((target, _caches, signal) => {
      log.push(`engage ${target.key}`);
      signal.addEventListener('abort', () => log.push(`leave ${target.key}`));
    });
    await m.start();
    expect(() => m.onEngage(() => undefined)).to.throw(/onEngage after start/);
    m.engage({ key: 't1', displayName: 't1', kubeConfig: new KubeConfig() });
    expect(m.engagedTargets()).to.deep.equal(['t1']);
    await m.stop(1000);
    expect(log).to.deep.equal(['start webhook', 'engage t1', 'stop webhook', 'leave t1']);
    expect(m.engagedTargets()).to.deep.equal([]);
  });

  it('leaderController: a real controller reconciles nothing on a standby, the keys it queued meanwhile once elected, and stops on loss', async () => {
    const reconciled: string[] = [];
    const handlers: Array<(o: object) => void> = [];
    const informer = { name: 'targets', on: (_: string, h: (o: object) => void) => handlers.push(h), hasSynced: () => true, start: () => undefined, stop: () => undefined };
    const c = new Controller({ name: 'targets', reconciler: { reconcile: async (k) => void reconciled.push(k) }, clock: realClock, logger: silentLogger() });
    c.watch(informer as unknown as Informer<never>, (o) => [(o as { key: string }).key]);
    const e = fakeElector(log);
    const m = new Manager({ logger: silentLogger(), clock: realClock, elector: e.build, stepDownDeadlineMs: 1000 });
    m.add(leaderController(c, [informer]));
    await m.start();
    for (const h of handlers) h({ key: 'Target/a/b' });
    await new Promise((r) => setTimeout(r, 50));
    expect(reconciled, 'a standby writes nothing').to.deep.equal([]);
    e.callbacks!.onStartedLeading();
    for (let i = 0; i < 50 && reconciled.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(reconciled).to.deep.equal(['Target/a/b']);
    e.callbacks!.onStoppedLeading();
    await settle();
    for (const h of handlers) h({ key: 'Target/a/c' });
    await new Promise((r) => setTimeout(r, 50));
    expect(reconciled, 'nothing after the loss').to.deep.equal(['Target/a/b']);
  });
});
