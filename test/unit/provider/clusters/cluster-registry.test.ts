import { expect } from 'chai';
import { KubeConfig } from '@kubernetes/client-node';
import { ClusterRegistry, type TargetHealth } from '../../../../provider/clusters/cluster-registry.js';
import { createTargetClient, type TargetClient } from '../../../../provider/clusters/target-client.js';
import type { TargetRef } from '../../../../provider/model/types.js';

function kubeConfig(server: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server, skipTLSVerify: false }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
    currentContext: 'ctx',
  });
  return kc;
}

const C2: TargetRef = { kind: 'Target', namespace: 'default', name: 'c2' };
const C3: TargetRef = { kind: 'ClusterTarget', namespace: '', name: 'c3' };

function client(ref: TargetRef, fingerprint: string): TargetClient {
  return createTargetClient(ref, kubeConfig(`https://${ref.name}.example:6443`), fingerprint, false);
}

/** A registry that records the events it emits, in order. */
function recorded(): { registry: ClusterRegistry; events: [string, TargetClient][] } {
  const registry = new ClusterRegistry();
  const events: [string, TargetClient][] = [];
  registry.on('added', (c) => events.push(['added', c]));
  registry.on('removed', (c) => events.push(['removed', c]));
  return { registry, events };
}

describe('ClusterRegistry', () => {
  it('stores a target and finds it by key and by virtual node name', () => {
    const { registry, events } = recorded();
    const a = client(C2, 'fp1');
    registry.set(a, 'admiralty-namespace-default-c2');
    expect(registry.get('Target/default/c2')).to.equal(a);
    expect(registry.byNodeName('admiralty-namespace-default-c2')).to.equal(a);
    expect(registry.nodeNameOf('Target/default/c2')).to.equal('admiralty-namespace-default-c2');
    expect(registry.list()).to.deep.equal([a]);
    expect(events).to.deep.equal([['added', a]]);
  });

  it('knows nothing of unknown keys and nodes', () => {
    const { registry } = recorded();
    registry.set(client(C2, 'fp1'), 'admiralty-namespace-default-c2');
    expect(registry.get('Target/default/other')).to.equal(undefined);
    expect(registry.byNodeName('worker-1')).to.equal(undefined);
    expect(registry.nodeNameOf('ClusterTarget/c3')).to.equal(undefined);
    expect(registry.health('Target/default/c2')).to.equal(undefined);
  });

  it('keeps the first client and emits nothing when set again with the same fingerprint', () => {
    const { registry, events } = recorded();
    const a = client(C2, 'fp1');
    const again = client(C2, 'fp1');
    registry.set(a, 'admiralty-namespace-default-c2');
    registry.set(again, 'admiralty-namespace-default-c2');
    expect(registry.get('Target/default/c2')).to.equal(a);
    expect(events).to.deep.equal([['added', a]]);
  });

  it('replaces a client with a different fingerprint: removed (old) then added (new)', () => {
    const { registry, events } = recorded();
    const a = client(C2, 'fp1');
    const b = client(C2, 'fp2');
    registry.set(a, 'admiralty-namespace-default-c2');
    registry.set(b, 'admiralty-namespace-default-c2');
    expect(registry.get('Target/default/c2')).to.equal(b);
    expect(registry.byNodeName('admiralty-namespace-default-c2')).to.equal(b);
    expect(registry.list()).to.deep.equal([b]);
    expect(events).to.deep.equal([
      ['added', a],
      ['removed', a],
      ['added', b],
    ]);
  });

  it('keeps targets independent', () => {
    const { registry, events } = recorded();
    const a = client(C2, 'fp1');
    const c = client(C3, 'fp1');
    registry.set(a, 'admiralty-namespace-default-c2');
    registry.set(c, 'admiralty-cluster-c3');
    registry.delete('Target/default/c2');
    expect(registry.get('ClusterTarget/c3')).to.equal(c);
    expect(registry.byNodeName('admiralty-cluster-c3')).to.equal(c);
    expect(registry.list()).to.deep.equal([c]);
    expect(events.map(([e, x]) => [e, x.key])).to.deep.equal([
      ['added', 'Target/default/c2'],
      ['added', 'ClusterTarget/c3'],
      ['removed', 'Target/default/c2'],
    ]);
  });

  it('delete removes the client, its node name and its health, and emits removed', () => {
    const { registry, events } = recorded();
    const a = client(C2, 'fp1');
    registry.set(a, 'admiralty-namespace-default-c2');
    registry.setHealth(a.key, { ready: true, reason: 'TargetReady', message: 'ok', sinceMs: 1 });
    registry.delete(a.key);
    expect(registry.get(a.key)).to.equal(undefined);
    expect(registry.byNodeName('admiralty-namespace-default-c2')).to.equal(undefined);
    expect(registry.nodeNameOf(a.key)).to.equal(undefined);
    expect(registry.health(a.key)).to.equal(undefined);
    expect(registry.list()).to.deep.equal([]);
    expect(events).to.deep.equal([
      ['added', a],
      ['removed', a],
    ]);
  });

  it('delete of an unknown key emits nothing', () => {
    const { registry, events } = recorded();
    registry.delete('Target/default/nope');
    expect(events).to.deep.equal([]);
  });

  it('stores health per target, replaced on each set, and kept across client replacement', () => {
    const { registry } = recorded();
    const down: TargetHealth = { ready: false, reason: 'TargetUnreachable', message: 'connect ECONNREFUSED', sinceMs: 1000 };
    const up: TargetHealth = { ready: true, reason: 'TargetReady', message: 'ok', sinceMs: 2000 };
    registry.setHealth('Target/default/c2', down);
    expect(registry.health('Target/default/c2')).to.deep.equal(down);
    expect(registry.health('ClusterTarget/c3')).to.equal(undefined);
    registry.setHealth('Target/default/c2', up);
    expect(registry.health('Target/default/c2')).to.deep.equal(up);
    registry.set(client(C2, 'fp1'), 'admiralty-namespace-default-c2');
    registry.set(client(C2, 'fp2'), 'admiralty-namespace-default-c2');
    expect(registry.health('Target/default/c2')).to.deep.equal(up);
  });
});
