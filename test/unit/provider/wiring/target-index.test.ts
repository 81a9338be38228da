import { expect } from 'chai';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Informer } from '../../../../provider/controller/informer.js';
import { virtualNodeName } from '../../../../provider/model/names.js';
import type { Target } from '../../../../provider/model/types.js';
import { TargetIndex } from '../../../../provider/wiring/targets.js';

type T = Target & KubernetesObject;

/** An informer of what `put` and `remove` say, with the handlers TargetIndex registers. */
function fakeInformer() {
  const objects = new Map<string, T>();
  const handlers: Record<string, Array<(o: T) => void>> = { add: [], update: [], delete: [] };
  let synced = false;
  const key = (name: string, ns = '') => `${ns}/${name}`;
  const informer = {
    on: (verb: string, h: (o: T) => void) => void handlers[verb]!.push(h),
    list: () => [...objects.values()],
    get: (name: string, ns?: string) => objects.get(key(name, ns)),
    hasSynced: () => synced,
  } as unknown as Informer<T>;
  return {
    informer,
    put(name: string, namespace?: string) {
      const o = { metadata: { name, namespace }, spec: {} } as T;
      objects.set(key(name, namespace), o);
      for (const h of handlers.add!) h(o);
    },
    remove(name: string, namespace?: string) {
      const o = objects.get(key(name, namespace))!;
      objects.delete(key(name, namespace));
      for (const h of handlers.delete!) h(o);
    },
    sync: () => (synced = true),
  };
}

describe('TargetIndex', () => {
  it('knows each Target and ClusterTarget by key and by virtual node name, from the caches alone, and forgets one that is deleted', () => {
    const targets = fakeInformer();
    const clusterTargets = fakeInformer();
    const index = new TargetIndex({ targets: targets.informer, clusterTargets: clusterTargets.informer });
    targets.put('c2', 'team-a');
    clusterTargets.put('eu');
    expect(index.keys().sort()).to.deep.equal(['ClusterTarget/eu', 'Target/team-a/c2']);
    expect(index.has('Target/team-a/c2')).to.equal(true);
    expect(index.has('Target/team-b/c2')).to.equal(false);
    expect(index.has('not a key')).to.equal(false);
    expect(index.keyOfNode(virtualNodeName({ kind: 'Target', namespace: 'team-a', name: 'c2' }))).to.equal('Target/team-a/c2');
    expect(index.keyOfNode(virtualNodeName({ kind: 'ClusterTarget', namespace: '', name: 'eu' }))).to.equal('ClusterTarget/eu');
    targets.remove('c2', 'team-a');
    expect(index.has('Target/team-a/c2')).to.equal(false);
    expect(index.keyOfNode(virtualNodeName({ kind: 'Target', namespace: 'team-a', name: 'c2' }))).to.equal(undefined);
  });

  it('is complete only once both caches have listed', () => {
    const targets = fakeInformer();
    const clusterTargets = fakeInformer();
    const index = new TargetIndex({ targets: targets.informer, clusterTargets: clusterTargets.informer });
    targets.sync();
    expect(index.hasSynced()).to.equal(false);
    clusterTargets.sync();
    expect(index.hasSynced()).to.equal(true);
  });
});
