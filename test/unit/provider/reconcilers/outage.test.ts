import { expect } from 'chai';
import sinon from 'sinon';
import type { V1Namespace, V1Pod, V1PodCondition } from '@kubernetes/client-node';
import { ClusterRegistry } from '../../../../provider/clusters/cluster-registry.js';
import { FakeClock } from '../../../../provider/core/clock.js';
import type { EventSink } from '../../../../provider/core/event-sink.js';
import { Registry } from 'prom-client';
import { createMetrics } from '../../../../provider/core/metrics.js';
import { FENCE_HOLD_OFF_MS, FENCE_PASS_DEADLINE_MS, MAX_FENCE_DELEGATES, OutageReconciler } from '../../../../provider/reconcilers/outage.js';
import { OUTAGE_NOTICE_MS } from '../../../../provider/model/outage.js';
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
const AFTER = 'multicluster.admiralty.io/failover-after';
const COND = 'multicluster.admiralty.io/TargetReachable';
const FINALIZER = 'multicluster.admiralty.io/delegate';

/** A Running, Ready proxy on {@link NODE}, with our finalizer and another; `deleting` since T0 with a grace of `grace` s (0). */
const proxy = (name: string, { deleting, grace, conditions, ...o }: ProxyFixture & { deleting?: boolean; grace?: number } = {}): V1Pod =>
  baseProxy({
    name,
    namespace: NS,
    uid: `uid-${name}`,
    finalizers: [FINALIZER, 'example.com/keep'],
    spec: { containers: [{ name: 'c' }] },
    nodeName: NODE,
    phase: 'Running',
    conditions: [{ type: 'Ready', status: 'True' }, ...(conditions ?? [])],
    ...(deleting ? { deletedAt: new Date(T0), deletionGracePeriodSeconds: grace ?? 0 } : {}),
    ...o,
  });

function delegate(name: string, parent: string, parentUid: string, cluster = CLUSTER): V1Pod {
  return {
    metadata: {
      name,
      namespace: NS,
      uid: `d-${name}`,
      labels: { 'multicluster.admiralty.io/parent-cluster-name': cluster, 'multicluster.admiralty.io/parent-uid': parentUid },
      annotations: { 'multicluster.admiralty.io/parent-name': parent, 'multicluster.admiralty.io/parent-namespace': NS },
    },
  };
}

function setup(o: { proxies?: V1Pod[]; namespace?: V1Namespace; targetPods?: V1Pod[] } = {}) {
  const clock = new FakeClock(T0);
  const source = coreStub();
  const { target, core: targetCore } = fakeTarget('c2', { namespace: NS });
  const registry = new ClusterRegistry();
  registry.set(target, NODE);
  const proxies = new MapCache<V1Pod>(...(o.proxies ?? []));
  const namespaces = new MapCache<V1Namespace>(o.namespace ?? { metadata: { name: NS } });
  const events: { kind: string; name?: string; type: string; reason: string; message: string }[] = [];
  const sink: EventSink = { record: (obj, type, reason, message) => events.push({ kind: obj.kind, name: obj.metadata.name, type, reason, message }) };
  source.patchNamespacedPodStatus.resolves({});
  source.patchNamespacedPod.resolves({});
  source.deleteNamespacedPod.resolves({});
  source.readNamespacedPod.rejects(apiError(404, 'NotFound'));
  targetCore.listNamespacedPod.resolves({ items: o.targetPods ?? [] });
  targetCore.deleteNamespacedPod.resolves({});
  const metrics = createMetrics(new Registry());
  const reconciler = new OutageReconciler({ sourceCore: source, proxies, namespaces, registry, sourceClusterName: CLUSTER, events: sink, clock, metrics });
  const health = (ready: boolean, sinceMs = clock.now()) =>
    registry.setHealth(KEY, ready ? { ready, reason: 'TargetReady', message: 'ok', sinceMs } : { ready, reason: 'TargetUnreachable', message: 'connection refused', sinceMs });
  /** The proxy as the cache would see it after our condition patch. */
  const afterPatch = (p: V1Pod, call: number) => {
    const cond = (source.patchNamespacedPodStatus.getCall(call).args[0].body as { status: { conditions: V1PodCondition[] } }).status.conditions[0]!;
    const next = structuredClone(p);
    next.status!.conditions = [...next.status!.conditions!.filter((c) => c.type !== COND), cond];
    proxies.put(next);
    return next;
  };
  const counted = async (name: string) => (await metrics[name as 'outageFailovers'].get()).values.find((v) => v.labels.target === KEY)?.value ?? 0;
  return { clock, source, targetCore, registry, proxies, reconciler, events, health, afterPatch, counted };
}

const conditionOf = (call: sinon.SinonSpyCall) => (call.args[0].body as { status: { conditions: V1PodCondition[] } }).status.conditions[0]!;

describe('OutageReconciler', () => {
  afterEach(() => sinon.restore());

  it('marks each proxy of an unreachable target once: one status write and one event per proxy per transition', async () => {
    const a = proxy('a', { owner: true });
    const b = proxy('b');
    const elsewhere = proxy('x', { nodeName: 'admiralty-namespace-apps-c1' });
    const s = setup({ proxies: [a, b, elsewhere] });
    s.health(false);
    // Within the notice (one failed probe, say): nothing per proxy, a look at its end.
    s.clock.advance(10_000);
    expect(await s.reconciler.reconcile(KEY)).to.deep.equal({ requeueAfterMs: OUTAGE_NOTICE_MS - 10_000 });
    sinon.assert.notCalled(s.source.patchNamespacedPodStatus);
    expect(s.reconciler.mayCreateDelegates(KEY), 'the gate closes at once all the same').to.equal(false);
    s.clock.advance(OUTAGE_NOTICE_MS - 10_000);
    await s.reconciler.reconcile(KEY);
    sinon.assert.calledTwice(s.source.patchNamespacedPodStatus);
    const names = s.source.patchNamespacedPodStatus.getCalls().map((c) => c.args[0].name);
    expect(names).to.deep.equal(['a', 'b']);
    const cond = conditionOf(s.source.patchNamespacedPodStatus.firstCall);
    expect(cond).to.include({ type: COND, status: 'False', reason: 'TargetUnreachable' });
    expect(cond.message).to.match(/^target apps\/c2 unreachable since 2026-01-01T10:00:00.000Z/);
    expect(cond.lastTransitionTime).to.equal('2026-01-01T10:00:00.000Z');
    expect(s.events.map((e) => `${e.name}:${e.reason}`)).to.deep.equal(['a:TargetUnreachable', 'b:TargetUnreachable']);
    // The next probes find the condition in place: nothing more is written.
    s.afterPatch(a, 0);
    s.afterPatch(b, 1);
    s.clock.advance(10_000);
    await s.reconciler.reconcile(KEY);
    s.clock.advance(10_000);
    await s.reconciler.reconcile(KEY);
    sinon.assert.calledTwice(s.source.patchNamespacedPodStatus);
    expect(s.events).to.have.length(2);
    sinon.assert.notCalled(s.source.deleteNamespacedPod);
  });

  it('writes a condition once when the next pass starts before the cache shows it, and again if a newer proxy lost it', async () => {
    const a = { ...proxy('a'), metadata: { ...proxy('a').metadata, resourceVersion: '10' } };
    const s = setup({ proxies: [a] });
    s.health(false, s.clock.now() - OUTAGE_NOTICE_MS);
    await s.reconciler.reconcile(KEY);
    // Queued again by a probe before the watch brought the write back: the cache still has version 10.
    await s.reconciler.reconcile(KEY);
    sinon.assert.calledOnce(s.source.patchNamespacedPodStatus);
    expect(s.events.map((e) => e.reason)).to.deep.equal(['TargetUnreachable']);
    // A newer version without the condition (someone removed it) is trusted: written again.
    s.proxies.put({ ...a, metadata: { ...a.metadata, resourceVersion: '12' } });
    await s.reconciler.reconcile(KEY);
    sinon.assert.calledTwice(s.source.patchNamespacedPodStatus);
    expect(s.events).to.have.length(2);
  });

  it('fails over a controlled proxy once failover-after has elapsed: deleted with a UID precondition, its finalizer released', async () => {
    const p = proxy('web', { owner: true, annotations: { [AFTER]: '1m' } });
    const s = setup({ proxies: [p] });
    s.health(false);
    s.clock.advance(25_000);
    expect(await s.reconciler.reconcile(KEY)).to.deep.equal({ requeueAfterMs: 35_000 });
    expect(conditionOf(s.source.patchNamespacedPodStatus.firstCall).message).to.match(/failover at 2026-01-01T10:01:00.000Z/);
    sinon.assert.notCalled(s.source.deleteNamespacedPod);
    s.afterPatch(p, 0);
    s.clock.advance(35_000);
    await s.reconciler.reconcile(KEY);
    sinon.assert.calledOnce(s.source.deleteNamespacedPod);
    expect(s.source.deleteNamespacedPod.firstCall.args[0]).to.deep.include({ name: 'web', namespace: NS, gracePeriodSeconds: 0, body: { gracePeriodSeconds: 0, preconditions: { uid: 'uid-web' } } });
    sinon.assert.calledOnce(s.source.patchNamespacedPod);
    expect(s.source.patchNamespacedPod.firstCall.args[0].body).to.deep.equal([
      { op: 'test', path: '/metadata/uid', value: 'uid-web' },
      { op: 'test', path: '/metadata/finalizers', value: [FINALIZER, 'example.com/keep'] },
      { op: 'replace', path: '/metadata/finalizers', value: ['example.com/keep'] },
    ]);
    expect(s.events.map((e) => e.reason)).to.deep.equal(['TargetUnreachable', 'FailingOver']);
    expect(await s.counted('outageFailovers')).to.equal(1);
    // Deleting already with no grace (the finalizer release failed, say): only the release is done again.
    const deleting = proxy('web', { owner: true, annotations: { [AFTER]: '20s' }, deleting: true });
    s.proxies.put(deleting);
    await s.reconciler.reconcile(KEY);
    sinon.assert.calledOnce(s.source.deleteNamespacedPod);
    sinon.assert.calledTwice(s.source.patchNamespacedPod);
    expect(await s.counted('outageFailovers'), 'counted once').to.equal(1);
  });

  it('fails over a proxy deleted meanwhile with a grace period: deleted again with none before the release, so that it goes at once', async () => {
    const p = proxy('web', { owner: true, annotations: { [AFTER]: '20s' }, deleting: true, grace: 30 });
    const s = setup({ proxies: [p] });
    s.health(false);
    s.clock.advance(20_000);
    await s.reconciler.reconcile(KEY);
    sinon.assert.callOrder(s.source.deleteNamespacedPod, s.source.patchNamespacedPod);
    expect(s.source.deleteNamespacedPod.firstCall.args[0]).to.deep.include({ name: 'web', namespace: NS, gracePeriodSeconds: 0, body: { gracePeriodSeconds: 0, preconditions: { uid: 'uid-web' } } });
    // Deleted by someone else: no FailingOver event and not counted as a failover of ours.
    expect(s.events.map((e) => e.reason)).to.deep.equal([]);
    expect(await s.counted('outageFailovers')).to.equal(0);
  });

  it('counts failover-after from the start of the outage, not from when the target stopped being ready for another reason', async () => {
    const p = proxy('web', { owner: true, annotations: { [AFTER]: '30m' } });
    const s = setup({ proxies: [p] });
    // Not ready since an hour ago (refused credentials, say), unreachable since now.
    s.registry.setHealth(KEY, { ready: false, reason: 'TargetUnreachable', message: 'connection refused', sinceMs: T0 - 3_600_000, outageSinceMs: T0 });
    s.clock.advance(OUTAGE_NOTICE_MS);
    expect(await s.reconciler.reconcile(KEY)).to.deep.equal({ requeueAfterMs: 60_000 });
    sinon.assert.notCalled(s.source.deleteNamespacedPod);
    const cond = conditionOf(s.source.patchNamespacedPodStatus.firstCall);
    expect(cond.message).to.match(/^target apps\/c2 unreachable since 2026-01-01T10:00:00.000Z; failover at 2026-01-01T10:30:00.000Z/);
    expect(cond.lastTransitionTime).to.equal('2026-01-01T10:00:00.000Z');
  });

  it('moves no failover when the wall clock is stepped during the outage: failover-after is measured on the monotonic clock', async () => {
    const p = proxy('web', { owner: true, annotations: { [AFTER]: '1m' } });
    const s = setup({ proxies: [p] });
    s.registry.setHealth(KEY, { ready: false, reason: 'TargetUnreachable', message: 'connection refused', sinceMs: T0, outageSinceMs: T0, outageSinceMonoMs: s.clock.monotonicMs() });
    s.clock.advance(25_000);
    s.clock.stepWallClock(3_600_000); // NTP, or a resumed VM
    expect(await s.reconciler.reconcile(KEY)).to.deep.equal({ requeueAfterMs: 35_000 });
    sinon.assert.notCalled(s.source.deleteNamespacedPod);
    s.afterPatch(p, 0);
    s.clock.advance(35_000);
    await s.reconciler.reconcile(KEY);
    sinon.assert.calledOnce(s.source.deleteNamespacedPod);
  });

  it('looks again at a far deadline within a minute (a timer past 2^31 ms would fire at once)', async () => {
    const s = setup({ proxies: [proxy('web', { owner: true, annotations: { [AFTER]: '1000h' } })] });
    s.health(false, s.clock.now() - OUTAGE_NOTICE_MS);
    expect(await s.reconciler.reconcile(KEY)).to.deep.equal({ requeueAfterMs: 60_000 });
    sinon.assert.notCalled(s.source.deleteNamespacedPod);
  });

  it('leaves a bare proxy in place past its failover-after, and says it cannot be moved', async () => {
    const p = proxy('bare', { annotations: { [AFTER]: '30s' } });
    const s = setup({ proxies: [p] });
    s.health(false);
    s.clock.advance(OUTAGE_NOTICE_MS);
    await s.reconciler.reconcile(KEY);
    s.afterPatch(p, 0);
    s.clock.advance(10_000);
    await s.reconciler.reconcile(KEY);
    sinon.assert.notCalled(s.source.deleteNamespacedPod);
    sinon.assert.calledTwice(s.source.patchNamespacedPodStatus);
    expect(conditionOf(s.source.patchNamespacedPodStatus.secondCall).message).to.match(/cannot fail over after 30s: the pod has no controller/);
    expect(s.events.map((e) => e.reason)).to.deep.equal(['TargetUnreachable', 'CannotFailOver']);
  });

  it('takes failover-after from the namespace, and reports a bad value with an event', async () => {
    const p = proxy('web', { owner: true });
    let s = setup({ proxies: [p], namespace: { metadata: { name: NS, annotations: { [AFTER]: '1m' } } } });
    s.health(false);
    s.clock.advance(60_000);
    await s.reconciler.reconcile(KEY);
    sinon.assert.calledOnce(s.source.deleteNamespacedPod);
    s = setup({ proxies: [proxy('web', { owner: true, annotations: { [AFTER]: 'one minute' } })] });
    s.health(false);
    s.clock.advance(3_600_000);
    await s.reconciler.reconcile(KEY);
    sinon.assert.notCalled(s.source.deleteNamespacedPod);
    expect(s.events.map((e) => e.reason)).to.deep.equal(['InvalidFailoverAfter']);
    expect(s.events[0]!.message).to.match(/"one minute" is not a duration/);
  });

  it('does nothing to proxies for a target that is not ready for another reason than an outage', async () => {
    const s = setup({ proxies: [proxy('a', { owner: true, annotations: { [AFTER]: '1s' } })] });
    s.registry.setHealth(KEY, { ready: false, reason: 'TargetForbidden', message: 'no', sinceMs: T0 });
    s.clock.advance(60_000);
    await s.reconciler.reconcile(KEY);
    sinon.assert.notCalled(s.source.patchNamespacedPodStatus);
    sinon.assert.notCalled(s.source.deleteNamespacedPod);
    // Delegation tries, and reports the target's own refusal on the proxy, as without outages.
    expect(s.reconciler.mayCreateDelegates(KEY)).to.equal(true);
  });

  describe('fencing', () => {
    it('fences once at start without closing the gate, closes it in an outage, and opens it after the next pass', async () => {
      const s = setup();
      expect(s.reconciler.mayCreateDelegates(KEY), 'at start: nothing can have failed over').to.equal(true);
      s.health(true);
      await s.reconciler.reconcile(KEY);
      sinon.assert.calledOnce(s.targetCore.listNamespacedPod);
      expect(s.targetCore.listNamespacedPod.firstCall.args[0]).to.deep.equal({ namespace: NS, labelSelector: 'multicluster.admiralty.io/parent-cluster-name=c1', limit: 500, _continue: undefined });
      expect(s.reconciler.mayCreateDelegates(KEY)).to.equal(true);
      // Fenced once: later probes of a healthy target list nothing.
      await s.reconciler.reconcile(KEY);
      sinon.assert.calledOnce(s.targetCore.listNamespacedPod);
      s.health(false);
      await s.reconciler.reconcile(KEY);
      expect(s.reconciler.mayCreateDelegates(KEY), 'in an outage').to.equal(false);
      s.health(true);
      s.targetCore.listNamespacedPod.rejects(apiError(503, 'ServiceUnavailable'));
      let failed = false;
      await s.reconciler.reconcile(KEY).catch(() => (failed = true));
      expect(failed, 'a failed fence pass throws (retry)').to.equal(true);
      expect(s.reconciler.mayCreateDelegates(KEY), 'after a failed pass').to.equal(false);
      s.targetCore.listNamespacedPod.resolves({ items: [] });
      await s.reconciler.reconcile(KEY);
      expect(s.reconciler.mayCreateDelegates(KEY)).to.equal(true);
    });

    it('keeps the gate closed on a replica that takes over the lead after an outage it did not see as leader, until its first pass fences', async () => {
      // The old leader failed over the proxies of c2 during its outage, then lost the lead; this
      // replica probed c2 all along (the registry runs on every replica), and saw it unreachable.
      const s = setup({ targetPods: [delegate('gone-d', 'gone', 'uid-gone')] });
      s.registry.setHealth(KEY, { ready: true, reason: 'TargetReady', message: 'ok', sinceMs: s.clock.now(), lastOutageMs: s.clock.now() - 5_000 });
      expect(s.reconciler.mayCreateDelegates(KEY), 'not fenced yet since the outage').to.equal(false);
      await s.reconciler.reconcile(KEY);
      sinon.assert.calledOnce(s.targetCore.deleteNamespacedPod);
      expect(s.reconciler.mayCreateDelegates(KEY)).to.equal(true);
    });

    it("deletes only this source's delegates whose proxy is gone or replaced, each with a UID precondition", async () => {
      const live = proxy('live');
      const replaced = proxy('replaced');
      const s = setup({
        proxies: [live],
        targetPods: [
          delegate('live-d', 'live', 'uid-live'),
          delegate('gone-d', 'gone', 'uid-gone'),
          delegate('replaced-d', 'replaced', 'uid-old'),
          delegate('cached-late-d', 'late', 'uid-late'),
          delegate('foreign-d', 'gone', 'uid-gone', 'c9'),
        ],
      });
      // The source answers for proxies the cache has not (or no longer) the same.
      s.source.readNamespacedPod.callsFake(async ({ name }) => {
        if (name === 'replaced') return replaced; // same name, UID uid-replaced
        if (name === 'late') return proxy('late'); // uid-late: alive, the cache lags
        throw apiError(404, 'NotFound');
      });
      s.health(true);
      await s.reconciler.reconcile(KEY);
      const deleted = s.targetCore.deleteNamespacedPod.getCalls().map((c) => c.args[0]);
      expect(deleted.map((d) => d.name)).to.deep.equal(['gone-d', 'replaced-d']);
      expect(deleted[0]!.body).to.deep.equal({ preconditions: { uid: 'd-gone-d' } });
      expect(deleted[1]!.body).to.deep.equal({ preconditions: { uid: 'd-replaced-d' } });
      // A cached proxy with the right UID needs no read.
      expect(s.source.readNamespacedPod.getCalls().map((c) => c.args[0].name)).to.not.include('live');
      expect(s.events.map((e) => `${e.kind}:${e.reason}`)).to.deep.equal(['Target:DelegatesFenced']);
      expect(await s.counted('fencedDelegates')).to.equal(2);
      expect(s.events[0]!.message).to.include(`${NS}/gone-d`).and.include(`${NS}/replaced-d`);
    });

    it('lists the target a page at a time, each page fenced before the next is asked for, and a page too large again smaller', async () => {
      const pods = Array.from({ length: 1200 }, (_, i) => delegate(`d${i}`, `p${i}`, `uid-p${i}`));
      const s = setup();
      const asked: [number, string | undefined][] = [];
      s.targetCore.listNamespacedPod.callsFake((async ({ limit, _continue }: { limit: number; _continue?: string }) => {
        asked.push([limit, _continue]);
        // The target's transport refuses an answer of over 200 pods (as it does past 16 MiB).
        if (limit > 200) throw Object.assign(new Error('answer of /api/v1/namespaces/apps/pods larger than 16777216 bytes'), { type: 'max-size' });
        const start = Number(_continue ?? 0);
        const next = start + limit < pods.length ? String(start + limit) : undefined;
        return { items: pods.slice(start, start + limit), metadata: { _continue: next } };
      }) as never);
      let deletedBeforeSecondPage = -1;
      s.targetCore.deleteNamespacedPod.callsFake((async () => {
        if (asked.filter(([, c]) => c !== undefined).length === 0) deletedBeforeSecondPage++;
        return {};
      }) as never);
      s.source.listNamespacedPod.resolves({ items: [] });
      s.health(true);
      await s.reconciler.reconcile(KEY);
      expect(asked.slice(0, 3)).to.deep.equal([
        [500, undefined],
        [125, undefined],
        [250, '125'],
      ]);
      sinon.assert.callCount(s.targetCore.deleteNamespacedPod, 1200);
      expect(deletedBeforeSecondPage + 1, "the first page's delegates, before the second page").to.equal(125);
      // Each page's parents, past the first 20 read one by one, from one list of the proxies taken after that page.
      const pages = asked.filter(([limit]) => limit <= 200).length;
      sinon.assert.callCount(s.source.readNamespacedPod, 20 * pages);
      sinon.assert.callCount(s.source.listNamespacedPod, pages);
      expect(s.reconciler.mayCreateDelegates(KEY)).to.equal(true);
    });

    it("reads at most 20 parents of a page one by one, then answers for the rest with one list of the source's proxies", async () => {
      const alive = Array.from({ length: 30 }, (_, i) => proxy(`p${i}`));
      const s = setup({ targetPods: Array.from({ length: 60 }, (_, i) => delegate(`d${i}`, `p${i}`, `uid-p${i}`)) });
      s.source.readNamespacedPod.callsFake((async ({ name }: { name: string }) => {
        const p = alive.find((a) => a.metadata?.name === name);
        if (p) return p;
        throw apiError(404, 'NotFound');
      }) as never);
      s.source.listNamespacedPod.resolves({ items: alive });
      s.health(true);
      await s.reconciler.reconcile(KEY);
      sinon.assert.callCount(s.source.readNamespacedPod, 20);
      sinon.assert.calledOnce(s.source.listNamespacedPod);
      expect(s.source.listNamespacedPod.firstCall.args[0]).to.deep.include({ namespace: NS, labelSelector: 'multicluster.admiralty.io/has-finalizer=true' });
      // The 30 whose proxy lives stay; the other 30 go.
      expect(s.targetCore.deleteNamespacedPod.getCalls().map((c) => c.args[0].name)).to.deep.equal(Array.from({ length: 30 }, (_, i) => `d${30 + i}`));
    });

    it("leaves alone what a Target's server says is a delegate of another namespace, or whose parent is of another namespace", async () => {
      const elsewhere = delegate('elsewhere-d', 'gone', 'uid-gone');
      elsewhere.metadata!.namespace = 'other';
      const parentElsewhere = delegate('parent-elsewhere-d', 'gone', 'uid-gone');
      parentElsewhere.metadata!.annotations!['multicluster.admiralty.io/parent-namespace'] = 'kube-system';
      const s = setup({ targetPods: [elsewhere, parentElsewhere, delegate('gone-d', 'gone', 'uid-gone')] });
      s.health(true);
      await s.reconciler.reconcile(KEY);
      expect(s.targetCore.deleteNamespacedPod.getCalls().map((c) => c.args[0].name)).to.deep.equal(['gone-d']);
      expect(s.source.readNamespacedPod.getCalls().map((c) => c.args[0].namespace)).to.deep.equal([NS]);
    });

    it(`stops a pass past ${MAX_FENCE_DELEGATES} delegates (pages without end), says so on the Target, keeps the gate closed, and waits before the next`, async () => {
      // Delegates of live, cached proxies: each costs the source nothing, so the bound is all that ends the pass.
      const live = proxy('live');
      const page = Array.from({ length: 500 }, (_, i) => delegate(`d${i}`, 'live', 'uid-live'));
      const s = setup({ proxies: [live] });
      let pages = 0;
      s.targetCore.listNamespacedPod.callsFake((async () => {
        pages++;
        return { items: page, metadata: { _continue: `more-${pages}` } };
      }) as never);
      s.health(false);
      await s.reconciler.reconcile(KEY);
      s.health(true);
      const error = await s.reconciler.reconcile(KEY).then(
        () => undefined,
        (err: Error) => err,
      );
      expect(pages).to.equal(MAX_FENCE_DELEGATES / 500 + 1);
      const said = `fencing ${NS}/c2 stopped: the server offered more than ${MAX_FENCE_DELEGATES} delegates of this source in ${NS}/c2 (at most ${MAX_FENCE_DELEGATES} delegates, more pods than a cluster holds, and 10 min); no new delegate goes there until a pass ends, and the next pass starts in 5 min`;
      expect(error?.message).to.equal(said);
      expect(s.events.map((e) => `${e.kind}:${e.type}:${e.reason}`)).to.deep.equal(['Target:Warning:FenceStopped']);
      expect(s.events[0]!.message).to.equal(said);
      sinon.assert.notCalled(s.targetCore.deleteNamespacedPod);
      expect(s.reconciler.mayCreateDelegates(KEY)).to.equal(false);
      // Probes wake the key every 10 s: no pass until the hold-off is over.
      s.clock.advance(10_000);
      expect(await s.reconciler.reconcile(KEY)).to.deep.equal({ requeueAfterMs: FENCE_HOLD_OFF_MS - 10_000 });
      expect(pages).to.equal(MAX_FENCE_DELEGATES / 500 + 1);
      // Then a pass that ends opens the gate.
      s.clock.advance(FENCE_HOLD_OFF_MS - 10_000);
      s.targetCore.listNamespacedPod.resolves({ items: [] });
      await s.reconciler.reconcile(KEY);
      expect(s.reconciler.mayCreateDelegates(KEY)).to.equal(true);
    });

    it('stops a pass whose server answers so slowly that it passes its deadline, in the middle of a page too', async () => {
      const s = setup();
      // Two orphans a page, each page answered a minute later.
      let pages = 0;
      s.targetCore.listNamespacedPod.callsFake((async () => {
        pages++;
        s.clock.advance(60_000);
        return { items: [delegate(`d${pages}`, `gone${pages}`, `uid-gone${pages}`), delegate(`e${pages}`, `gone${pages}`, `uid-gone${pages}`)], metadata: { _continue: String(pages) } };
      }) as never);
      // The delete of the first of each page takes 30 s (its deadline).
      s.targetCore.deleteNamespacedPod.callsFake((async ({ name }: { name: string }) => {
        if (name.startsWith('d')) s.clock.advance(30_000);
        return {};
      }) as never);
      s.health(true);
      const error = await s.reconciler.reconcile(KEY).then(
        () => undefined,
        (err: Error) => err,
      );
      expect(error?.message).to.match(/^fencing apps\/c2 stopped: the pass did not end within 10 min \(.*\); delegation there goes on, and the next pass starts in 5 min$/);
      // 1.5 min a page: six end at 9 min; the seventh's first delete ends past the deadline, and its second is not made.
      expect(pages).to.equal(7);
      expect(s.targetCore.deleteNamespacedPod.callCount).to.equal(13);
      expect(FENCE_PASS_DEADLINE_MS).to.equal(600_000);
      expect(s.events.map((e) => e.reason)).to.deep.equal(['FenceStopped', 'DelegatesFenced']);
      // The first pass after start holds nothing back, stopped or not.
      expect(s.reconciler.mayCreateDelegates(KEY)).to.equal(true);
    });

    it('keeps the gate closed when a delete fails, and accepts a delegate gone meanwhile (404) or replaced (409)', async () => {
      const s = setup({ targetPods: [delegate('a-d', 'a', 'uid-a'), delegate('b-d', 'b', 'uid-b'), delegate('c-d', 'c', 'uid-c')] });
      s.targetCore.deleteNamespacedPod.onCall(0).rejects(apiError(404, 'NotFound'));
      s.targetCore.deleteNamespacedPod.onCall(1).rejects(apiError(409, 'Conflict'));
      s.targetCore.deleteNamespacedPod.onCall(2).rejects(apiError(500, 'InternalError'));
      s.health(false);
      await s.reconciler.reconcile(KEY);
      s.health(true);
      let failed = false;
      await s.reconciler.reconcile(KEY).catch(() => (failed = true));
      expect(failed).to.equal(true);
      expect(s.reconciler.mayCreateDelegates(KEY)).to.equal(false);
      sinon.assert.calledThrice(s.targetCore.deleteNamespacedPod);
      // The retry fences again, and opens the gate.
      s.targetCore.deleteNamespacedPod.resolves({});
      await s.reconciler.reconcile(KEY);
      expect(s.reconciler.mayCreateDelegates(KEY)).to.equal(true);
    });
  });

  it('turns the condition True on the proxies that carried False once the target is back', async () => {
    const marked = proxy('m', { conditions: [{ type: COND, status: 'False', reason: 'TargetUnreachable', message: 'x' }] });
    const never = proxy('n');
    const s = setup({ proxies: [marked, never] });
    s.health(true);
    await s.reconciler.reconcile(KEY);
    sinon.assert.calledOnce(s.source.patchNamespacedPodStatus);
    expect(s.source.patchNamespacedPodStatus.firstCall.args[0].name).to.equal('m');
    expect(conditionOf(s.source.patchNamespacedPodStatus.firstCall)).to.include({ type: COND, status: 'True', reason: 'TargetReachable' });
    expect(s.events.map((e) => `${e.name}:${e.reason}`)).to.deep.equal(['m:TargetReachable']);
  });

  it('maps a proxy to its target key only when that target is in an outage or the proxy still says it is', () => {
    const s = setup();
    const marked = proxy('m', { conditions: [{ type: COND, status: 'False', reason: 'TargetUnreachable', message: 'x' }] });
    s.health(true);
    expect(OutageReconciler.keysOfProxy(s.registry, proxy('a'))).to.deep.equal([]);
    expect(OutageReconciler.keysOfProxy(s.registry, marked)).to.deep.equal([KEY]);
    s.health(false);
    expect(OutageReconciler.keysOfProxy(s.registry, proxy('a'))).to.deep.equal([KEY]);
    expect(OutageReconciler.keysOfProxy(s.registry, proxy('x', { nodeName: 'elsewhere' }))).to.deep.equal([]);
  });
});
