import { expect } from 'chai';
import sinon from 'sinon';
import type { V1Pod, V1PodCondition } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { ClusterRegistry } from '../../../../provider/clusters/cluster-registry.js';
import { FakeClock } from '../../../../provider/core/clock.js';
import { createMetrics } from '../../../../provider/core/metrics.js';
import type { EventSink } from '../../../../provider/core/event-sink.js';
import { ReplacementReconciler } from '../../../../provider/reconcilers/replacement.js';
import { MapCache } from './map-cache.js';
import { apiError } from '../../../support/api-errors.js';
import { coreStub } from '../../../support/stubs.js';
import { fakeTarget } from '../../../support/targets.js';
import { proxy as baseProxy, type ProxyFixture } from '../../../support/pods.js';

const CLUSTER = 'c1';
const NS = 'apps';
const NODE = 'admiralty-namespace-apps-c2';
const KEY = `Target/${NS}/c2`;
const T0 = Date.parse('2026-01-01T10:00:00.000Z');
const AFTER = 60_000;
const COOL = 300_000;
const COND = 'multicluster.admiralty.io/Replaceable';

/** A Pending proxy, bound to {@link NODE} unless `nodeName` is null. */
const proxy = (name: string, { nodeName, ...o }: Omit<ProxyFixture, 'nodeName'> & { nodeName?: string | null } = {}): V1Pod =>
  baseProxy({ name, namespace: NS, uid: `uid-${name}`, spec: { containers: [{ name: 'c' }] }, nodeName: nodeName === null ? undefined : (nodeName ?? NODE), phase: 'Pending', ...o });

/** The delegate of `parent`, Unschedulable since `sinceMs`, or bound to `node`. */
function delegate(parent: string, o: { unschedulableSinceMs?: number; node?: string; cluster?: string } = {}): V1Pod {
  return {
    metadata: {
      name: `${parent}-x1`,
      namespace: NS,
      uid: `d-${parent}`,
      creationTimestamp: new Date(T0 - 3_600_000),
      labels: { 'multicluster.admiralty.io/parent-cluster-name': o.cluster ?? CLUSTER, 'multicluster.admiralty.io/parent-uid': `uid-${parent}` },
      annotations: { 'multicluster.admiralty.io/parent-name': parent, 'multicluster.admiralty.io/parent-namespace': NS },
    },
    spec: { containers: [{ name: 'c' }], nodeName: o.node },
    status:
      o.unschedulableSinceMs !== undefined
        ? { phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: 'no room', lastTransitionTime: new Date(o.unschedulableSinceMs) }] }
        : { phase: 'Running', conditions: [{ type: 'PodScheduled', status: 'True', lastTransitionTime: new Date(T0 - 3_600_000) }] },
  };
}

function setup(o: { proxies: V1Pod[]; delegates: V1Pod[]; ready?: boolean; summaryNodes?: string[]; podsResourceVersion?: string }) {
  const clock = new FakeClock(T0);
  const source = coreStub();
  const proxies = new MapCache<V1Pod>(...o.proxies);
  const delegates = new MapCache<V1Pod>(...o.delegates);
  // The target answers a read with what its cache shows, unless a test says otherwise.
  const { target, core: targetCore } = fakeTarget('c2', { namespace: NS });
  targetCore.readNamespacedPod.callsFake(async ({ name, namespace }: { name: string; namespace: string }) => {
    const d = delegates.get(name, namespace);
    if (!d) throw apiError(404, 'NotFound');
    return structuredClone(d);
  });
  const registry = new ClusterRegistry();
  registry.set(target, NODE);
  registry.setHealth(KEY, o.ready === false ? { ready: false, reason: 'TargetUnreachable', message: 'down', sinceMs: T0 } : { ready: true, reason: 'TargetReady', message: 'ok', sinceMs: T0 });
  const nodes = o.summaryNodes ?? ['c2-node-0', 'c2-node-1'];
  registry.setSummary(
    KEY,
    { metadata: { name: 'singleton' }, nodePools: [{ labels: {}, nodes: nodes.map((name) => ({ name, allocatable: {}, free: {} })) }], podsResourceVersion: o.podsResourceVersion },
    T0,
  );
  const events: { name?: string; type: string; reason: string; message: string }[] = [];
  const sink: EventSink = { record: (obj, type, reason, message) => events.push({ name: obj.metadata.name, type, reason, message }) };
  const avoided: [string, string, string, number][] = [];
  source.deleteNamespacedPod.resolves({});
  source.patchNamespacedPodStatus.resolves({});
  const metrics = createMetrics(new Registry());
  const reconciler = new ReplacementReconciler({
    sourceCore: source,
    proxies,
    delegates: (key) => (key === KEY ? delegates : undefined),
    registry,
    sourceClusterName: CLUSTER,
    unschedulableAfterMs: AFTER,
    coolDownMs: COOL,
    avoid: (...args) => avoided.push(args),
    events: sink,
    clock,
    metrics,
  });
  return { reconciler, source, targetCore, clock, events, avoided, metrics, proxies };
}

describe('ReplacementReconciler', () => {
  it('re-places a controlled pod whose delegate stayed Unschedulable too long: avoid first, say it, delete the proxy', async () => {
    const s = setup({ proxies: [proxy('web-0', { owner: true })], delegates: [delegate('web-0', { unschedulableSinceMs: T0 - AFTER })] });
    expect(await s.reconciler.reconcile(KEY)).to.equal(undefined);
    expect(s.avoided).to.have.length(1);
    expect(s.avoided[0]!.slice(0, 2)).to.deep.equal(['rs', KEY]);
    expect(s.avoided[0]![3]).to.equal(T0 + COOL);
    expect(s.events.map((e) => [e.name, e.type, e.reason])).to.deep.equal([['web-0', 'Warning', 'Replacing']]);
    expect(s.source.deleteNamespacedPod.calledOnce).to.equal(true);
    expect(s.source.deleteNamespacedPod.firstCall.args[0]).to.deep.equal({ name: 'web-0', namespace: NS, gracePeriodSeconds: 0, body: { gracePeriodSeconds: 0, preconditions: { uid: 'uid-web-0' } } });
    expect((await s.metrics.replacements.get()).values).to.deep.equal([{ value: 1, labels: { target: KEY, reason: 'Unschedulable' } }]);
  });

  it('looks again when the earliest Unschedulable delegate runs out of time, writing nothing before', async () => {
    const s = setup({
      proxies: [proxy('web-0', { owner: true }), proxy('web-1', { owner: true })],
      delegates: [delegate('web-0', { unschedulableSinceMs: T0 - 20_000 }), delegate('web-1', { unschedulableSinceMs: T0 - 45_000 })],
    });
    expect(await s.reconciler.reconcile(KEY)).to.deep.equal({ requeueAfterMs: 15_000 });
    expect(s.source.deleteNamespacedPod.called).to.equal(false);
    expect(s.events).to.deep.equal([]);
  });

  it('re-places a controlled pod whose delegate ran on a node the target no longer has', async () => {
    const s = setup({ proxies: [proxy('web-0', { owner: true })], delegates: [delegate('web-0', { node: 'c2-node-9' })] });
    await s.reconciler.reconcile(KEY);
    expect(s.source.deleteNamespacedPod.calledOnce).to.equal(true);
    expect(s.events[0]!.message).to.match(/^delegate web-0-x1 ran on node c2-node-9, which apps\/c2 no longer has: /);
    expect((await s.metrics.replacements.get()).values[0]!.labels).to.deep.equal({ target: KEY, reason: 'NodeLost' });
  });

  it('keeps a pod on a node missing from a summary that has not seen its delegate bound (the target stopped writing it)', async () => {
    const d = delegate('web-0', { node: 'c2-node-9' });
    d.metadata!.resourceVersion = '250';
    const s = setup({ proxies: [proxy('web-0', { owner: true })], delegates: [d], podsResourceVersion: '100' });
    await s.reconciler.reconcile(KEY);
    expect(s.source.deleteNamespacedPod.called).to.equal(false);
    expect(s.events).to.deep.equal([]);
  });

  it('reads the delegate before a re-placement: a cache that lags the target (just back from an outage) does not kill a pod placed meanwhile', async () => {
    // The cache still shows the delegate as it was before the target went out of reach.
    const stale = delegate('web-0', { unschedulableSinceMs: T0 - 10 * AFTER });
    const s = setup({ proxies: [proxy('web-0', { owner: true })], delegates: [stale] });
    // Its scheduler placed it meanwhile: the target says so.
    s.targetCore.readNamespacedPod.resolves({
      ...delegate('web-0', { node: 'c2-node-1' }),
      status: { phase: 'Running', conditions: [{ type: 'PodScheduled', status: 'True', lastTransitionTime: new Date(T0 - AFTER) }] },
    });
    await s.reconciler.reconcile(KEY);
    sinon.assert.calledOnceWithMatch(s.targetCore.readNamespacedPod, { name: 'web-0-x1', namespace: NS });
    expect(s.source.deleteNamespacedPod.called).to.equal(false);
    expect(s.avoided).to.deep.equal([]);
    expect(s.events).to.deep.equal([]);
    // Gone from the target: delegation's to handle (it replaces or fails the proxy), not re-placement's.
    s.targetCore.readNamespacedPod.rejects(apiError(404, 'NotFound'));
    await s.reconciler.reconcile(KEY);
    expect(s.source.deleteNamespacedPod.called).to.equal(false);
  });

  it('marks a bare pod once (condition and event), and deletes nothing', async () => {
    const s = setup({ proxies: [proxy('solo')], delegates: [delegate('solo', { unschedulableSinceMs: T0 - AFTER })] });
    await s.reconciler.reconcile(KEY);
    expect(s.source.deleteNamespacedPod.called).to.equal(false);
    expect(s.avoided).to.deep.equal([]);
    expect(s.source.patchNamespacedPodStatus.calledOnce).to.equal(true);
    const written = (s.source.patchNamespacedPodStatus.firstCall.args[0].body as { status: { conditions: V1PodCondition[] } }).status.conditions[0]!;
    expect(written).to.include({ type: COND, status: 'False', reason: 'CannotReplace' });
    expect(s.events.map((e) => e.reason)).to.deep.equal(['CannotReplace']);

    // The cache shows the condition: the next pass writes nothing.
    s.proxies.put(proxy('solo', { conditions: [{ ...written, lastTransitionTime: new Date(T0) }] }));
    s.clock.advance(10_000);
    await s.reconciler.reconcile(KEY);
    expect(s.source.patchNamespacedPodStatus.calledOnce).to.equal(true);
    expect(s.events).to.have.length(1);
  });

  it('marks a bare pod once when the next pass starts before the cache shows the condition', async () => {
    const solo = { ...proxy('solo'), metadata: { ...proxy('solo').metadata, resourceVersion: '7' } };
    const s = setup({ proxies: [solo], delegates: [delegate('solo', { unschedulableSinceMs: T0 - AFTER })] });
    await s.reconciler.reconcile(KEY);
    s.clock.advance(1_000);
    await s.reconciler.reconcile(KEY);
    expect(s.source.patchNamespacedPodStatus.calledOnce).to.equal(true);
    expect(s.events.map((e) => e.reason)).to.deep.equal(['CannotReplace']);
  });

  it("leaves alone delegates the binder is still placing (proxy unbound), other sources' pods, and proxies of other targets", async () => {
    const s = setup({
      proxies: [proxy('placing', { owner: true, nodeName: null }), proxy('theirs', { owner: true }), proxy('elsewhere', { owner: true, nodeName: 'admiralty-namespace-apps-c3' })],
      delegates: [
        delegate('placing', { unschedulableSinceMs: T0 - AFTER }),
        delegate('theirs', { unschedulableSinceMs: T0 - AFTER, cluster: 'c9' }),
        delegate('elsewhere', { unschedulableSinceMs: T0 - AFTER }),
      ],
    });
    await s.reconciler.reconcile(KEY);
    expect(s.source.deleteNamespacedPod.called).to.equal(false);
    expect(s.events).to.deep.equal([]);
  });

  it('decides nothing about a target that does not answer (outages are the outage reconciler’s)', async () => {
    const s = setup({ ready: false, proxies: [proxy('web-0', { owner: true })], delegates: [delegate('web-0', { node: 'c2-node-9' })] });
    await s.reconciler.reconcile(KEY);
    expect(s.source.deleteNamespacedPod.called).to.equal(false);
  });

  it('counts nothing when the proxy was gone already, and goes on with the others when one delete fails', async () => {
    const s = setup({
      proxies: [proxy('gone', { owner: true }), proxy('fails', { owner: true }), proxy('ok', { owner: true })],
      delegates: ['gone', 'fails', 'ok'].map((p) => delegate(p, { unschedulableSinceMs: T0 - AFTER })),
    });
    s.source.deleteNamespacedPod.withArgs(sinon.match({ name: 'gone' })).rejects(apiError(404, 'NotFound'));
    s.source.deleteNamespacedPod.withArgs(sinon.match({ name: 'fails' })).rejects(apiError(500, 'InternalError'));
    let thrown: Error | undefined;
    await s.reconciler.reconcile(KEY).catch((err: Error) => (thrown = err));
    expect(thrown?.message).to.equal('1 re-placement(s) in apps/c2 failed');
    expect(s.source.deleteNamespacedPod.callCount).to.equal(3);
    expect((await s.metrics.replacements.get()).values).to.deep.equal([{ value: 1, labels: { target: KEY, reason: 'Unschedulable' } }]);
  });
});
