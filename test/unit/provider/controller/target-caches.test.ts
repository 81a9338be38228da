import { expect } from 'chai';
import { KubeConfig, type V1Pod } from '@kubernetes/client-node';
import type { Informer } from '../../../../provider/controller/informer.js';
import { TargetCaches, type EngagedTarget } from '../../../../provider/controller/target-caches.js';
import { realClock } from '../../../../provider/core/clock.js';
import { silentLogger } from '../../../../provider/core/logger.js';

describe('TargetCaches', () => {
  const target = (key: string): EngagedTarget => ({ key, displayName: key, kubeConfig: new KubeConfig() });
  const list = async () => ({ items: [] as V1Pod[] });
  /** Counts the informer's starts and stops instead of listing (there is no cluster). */
  const counted = (informer: Informer<V1Pod>, counts: { starts: number; stops: number }) => {
    informer.start = () => void counts.starts++;
    informer.stop = () => void counts.stops++;
    return informer;
  };

  it('gives two parts that ask a target for the same collection one informer, started once', () => {
    const registry = new TargetCaches<EngagedTarget>({ logger: silentLogger(), clock: realClock });
    const counts = { starts: 0, stops: 0 };
    const seen: Informer<V1Pod>[] = [];
    for (let i = 0; i < 2; i++) {
      registry.onEngage((_t, caches) => {
        const informer = caches.informer<V1Pod>({ name: 'delegates', resource: '/api/v1/pods', list, labelSelector: 'x=y' });
        if (seen.length === 0) counted(informer, counts);
        seen.push(informer);
      });
    }
    registry.engage(target('t1'));
    expect(seen[1]).to.equal(seen[0]);
    expect(counts).to.deep.equal({ starts: 1, stops: 0 });
  });

  it('aborts the signal and stops the caches when the target leaves, and forgets its per-target value', () => {
    const registry = new TargetCaches<EngagedTarget>({ logger: silentLogger(), clock: realClock });
    const counts = { starts: 0, stops: 0 };
    const aborted: string[] = [];
    const delegates = registry.perTarget((_t, caches) => counted(caches.informer<V1Pod>({ name: 'delegates', resource: '/api/v1/pods', list }), counts));
    registry.onEngage((t, _caches, signal) => signal.addEventListener('abort', () => aborted.push(t.key)));
    registry.engage(target('t1'));
    expect(delegates('t1')).to.not.equal(undefined);
    registry.disengage('t1');
    expect(aborted).to.deep.equal(['t1']);
    expect(counts).to.deep.equal({ starts: 1, stops: 1 });
    expect(delegates('t1')).to.equal(undefined);
    expect(registry.keys()).to.deep.equal([]);
  });

  it('makes new caches for a target engaged again, after the old ones left', () => {
    const registry = new TargetCaches<EngagedTarget>({ logger: silentLogger(), clock: realClock });
    const events: string[] = [];
    const delegates = registry.perTarget((_t, caches) => caches.informer<V1Pod>({ name: 'delegates', resource: '/api/v1/pods', list }));
    registry.onEngage((t, caches, signal) => {
      events.push(`engaged ${caches.all().length}`);
      for (const informer of caches.all()) counted(informer as unknown as Informer<V1Pod>, { starts: 0, stops: 0 });
      signal.addEventListener('abort', () => events.push(`left ${t.key}`));
    });
    registry.engage(target('t1'));
    const first = delegates('t1');
    registry.engage(target('t1'));
    expect(events).to.deep.equal(['engaged 1', 'left t1', 'engaged 1']);
    expect(delegates('t1')).to.not.equal(first);
  });

  it('disengages every target on close, and engages none after', () => {
    const registry = new TargetCaches<EngagedTarget>({ logger: silentLogger(), clock: realClock });
    const aborted: string[] = [];
    registry.onEngage((t, _caches, signal) => signal.addEventListener('abort', () => aborted.push(t.key)));
    registry.engage(target('t1'));
    registry.engage(target('t2'));
    registry.close();
    registry.engage(target('t3'));
    expect(aborted).to.deep.equal(['t1', 't2']);
    expect(registry.keys()).to.deep.equal([]);
  });
});
