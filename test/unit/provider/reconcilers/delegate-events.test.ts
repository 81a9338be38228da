import type { CoreV1Api, CoreV1Event, V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import sinon from 'sinon';
import { FakeClock } from '../../../../provider/core/clock.js';
import { silentLogger } from '../../../../provider/core/logger.js';
import { proxyEventName } from '../../../../provider/model/proxy-event.js';
import { DelegateEventsReconciler, type IndexedEvents } from '../../../../provider/reconcilers/delegate-events.js';
import type { ObjectCache } from '../../../../provider/controller/object-cache.js';
import { bareApiError } from '../../../support/api-errors.js';

/** An in-memory cache keyed by namespace/name. */
function cache<T extends { metadata?: { name?: string; namespace?: string } }>(items: T[]): ObjectCache<T> & { items: T[] } {
  return {
    items,
    get: (name, namespace) => items.find((o) => o.metadata?.name === name && o.metadata?.namespace === namespace),
    list: (namespace) => items.filter((o) => namespace === undefined || o.metadata?.namespace === namespace),
  };
}

/** The events informer's index by pod, built over `items` with the reconciler's own index function. */
function indexedByPod(items: CoreV1Event[]): IndexedEvents {
  return {
    byIndex: (index, value) => {
      expect(index).to.equal(DelegateEventsReconciler.BY_POD_INDEX);
      return items.filter((ev) => DelegateEventsReconciler.eventsByPod(ev).includes(value));
    },
  };
}

const NOW = Date.parse('2026-11-22T12:00:00Z');
const delegate: V1Pod = {
  metadata: {
    name: 'web-abc',
    namespace: 'shop',
    uid: 'd-uid',
    labels: { 'multicluster.admiralty.io/parent-cluster-name': 'c1', 'multicluster.admiralty.io/parent-uid': 'p-uid' },
    annotations: { 'multicluster.admiralty.io/parent-name': 'web', 'multicluster.admiralty.io/parent-namespace': 'shop' },
  },
};
/** The delegate's proxy in the source, bound to the target's virtual node. */
const proxyOf = (over: Partial<V1Pod['metadata']> = {}, nodeName = 'admiralty-shop-eu'): V1Pod => ({
  metadata: { name: 'web', namespace: 'shop', uid: 'p-uid', ...over },
  spec: { containers: [], nodeName },
});

const scheduled = (over: Partial<CoreV1Event> = {}): CoreV1Event => ({
  metadata: { name: 'web-abc.1', namespace: 'shop', uid: 'e-uid' },
  involvedObject: { kind: 'Pod', name: 'web-abc', namespace: 'shop', uid: 'd-uid' },
  type: 'Warning',
  reason: 'FailedScheduling',
  message: '0/2 nodes are available',
  count: 1,
  lastTimestamp: new Date(NOW - 5_000),
  ...over,
});

describe('DelegateEventsReconciler', () => {
  let core: { createNamespacedEvent: sinon.SinonStub; readNamespacedEvent: sinon.SinonStub; replaceNamespacedEvent: sinon.SinonStub };
  let events: ReturnType<typeof cache<CoreV1Event>>;
  let delegates: ReturnType<typeof cache<V1Pod>>;
  let proxies: ReturnType<typeof cache<V1Pod>>;
  let r: DelegateEventsReconciler;
  const key = 'Target/shop/eu|shop|web-abc.1';

  beforeEach(() => {
    core = { createNamespacedEvent: sinon.stub().resolves({}), readNamespacedEvent: sinon.stub(), replaceNamespacedEvent: sinon.stub().resolves({}) };
    events = cache([scheduled()]);
    delegates = cache([delegate]);
    proxies = cache([proxyOf()]);
    r = new DelegateEventsReconciler({
      sourceCore: core as unknown as CoreV1Api,
      targetEvents: (k) => (k === 'Target/shop/eu' ? events : undefined),
      delegates: (k) => (k === 'Target/shop/eu' ? delegates : undefined),
      proxies,
      virtualNodeOf: (k) => (k === 'Target/shop/eu' ? 'admiralty-shop-eu' : undefined),
      targetName: () => 'shop/eu',
      sourceClusterName: 'c1',
      clock: new FakeClock(NOW),
      logger: silentLogger(),
      copies: 'warnings',
    });
  });

  it('keys only pod events, and finds the events already cached about a new delegate', () => {
    expect(r.keysOfEvent('Target/shop/eu', scheduled())).to.deep.equal([key]);
    expect(r.keysOfEvent('Target/shop/eu', scheduled({ involvedObject: { kind: 'Node', name: 'n' } }))).to.deep.equal([]);
    expect(r.keysOfDelegate('Target/shop/eu', delegate, indexedByPod(events.items))).to.deep.equal([key]);
  });

  it('keys and copies only what --delegate-events takes: warnings by default, all, or none', async () => {
    const normal = scheduled({ type: 'Normal', reason: 'Scheduled', message: 'Successfully assigned shop/web-abc to n1' });
    const options = (r as unknown as { o: ConstructorParameters<typeof DelegateEventsReconciler>[0] }).o;
    const all = new DelegateEventsReconciler({ ...options, copies: 'all' });
    const none = new DelegateEventsReconciler({ ...options, copies: 'none' });
    expect(r.keysOfEvent('Target/shop/eu', normal)).to.deep.equal([]);
    expect(all.keysOfEvent('Target/shop/eu', normal)).to.deep.equal([key]);
    expect(none.keysOfEvent('Target/shop/eu', scheduled())).to.deep.equal([]);
    expect(r.keysOfDelegate('Target/shop/eu', delegate, indexedByPod([normal]))).to.deep.equal([]);
    expect(all.keysOfDelegate('Target/shop/eu', delegate, indexedByPod([normal]))).to.deep.equal([key]);
    expect(none.keysOfDelegate('Target/shop/eu', delegate, indexedByPod(events.items))).to.deep.equal([]);

    // A key that names a Normal event (enqueued before, or by hand) writes nothing by default...
    events.items[0] = normal;
    await r.reconcile(key);
    expect(core.createNamespacedEvent.callCount).to.equal(0);
    // ...and its copy with all.
    await all.reconcile(key);
    expect(core.createNamespacedEvent.callCount).to.equal(1);
    expect(core.createNamespacedEvent.firstCall.args[0].body).to.deep.include({ type: 'Normal', reason: 'Scheduled', message: '[shop/eu] Successfully assigned shop/web-abc to n1' });
    // none writes not even a warning.
    events.items[0] = scheduled();
    await none.reconcile(key);
    expect(core.createNamespacedEvent.callCount).to.equal(1);
  });

  it('finds the events about a new delegate through the index by pod as a walk of its namespace does', () => {
    const items = [
      scheduled(),
      scheduled({ metadata: { name: 'web-abc.2', namespace: 'shop' } }),
      scheduled({ metadata: { name: 'web-abc.3', namespace: 'other' }, involvedObject: { kind: 'Pod', name: 'web-abc', namespace: 'other' } }),
      scheduled({ metadata: { name: 'web-xyz.1', namespace: 'shop' }, involvedObject: { kind: 'Pod', name: 'web-xyz', namespace: 'shop' } }),
      scheduled({ metadata: { name: 'node.1', namespace: 'shop' }, involvedObject: { kind: 'Node', name: 'web-abc' } }),
    ];
    // What keysOfDelegate found before the index: every event of the namespace, filtered.
    const walked = items
      .filter((ev) => ev.metadata?.namespace === 'shop' && ev.involvedObject?.kind === 'Pod' && ev.involvedObject.name === 'web-abc')
      .map((ev) => DelegateEventsReconciler.key('Target/shop/eu', ev));
    expect(walked).to.have.length(2);
    expect(r.keysOfDelegate('Target/shop/eu', delegate, indexedByPod(items)).sort()).to.deep.equal(walked.sort());
    expect(r.keysOfDelegate('Target/shop/eu', delegate, undefined)).to.deep.equal([]);
  });

  it('writes the copy on the proxy once, and again only when the event changed', async () => {
    await r.reconcile(key);
    expect(core.createNamespacedEvent.callCount).to.equal(1);
    const { namespace, body } = core.createNamespacedEvent.firstCall.args[0];
    expect(namespace).to.equal('shop');
    expect(body.metadata.name).to.equal(proxyEventName('web', 'e-uid'));
    expect(body.involvedObject).to.include({ name: 'web', uid: 'p-uid' });
    expect(body.message).to.equal('[shop/eu] 0/2 nodes are available');
    await r.reconcile(key);
    expect(core.createNamespacedEvent.callCount, 'unchanged: nothing written').to.equal(1);

    // The scheduler tried again: count 2. Our copy exists already: it is updated in place.
    events.items[0] = scheduled({ count: 2, lastTimestamp: new Date(NOW - 1_000) });
    core.createNamespacedEvent.rejects(bareApiError(409, 'AlreadyExists'));
    core.readNamespacedEvent.resolves({ ...body, metadata: { ...body.metadata, resourceVersion: '7' } });
    await r.reconcile(key);
    expect(core.replaceNamespacedEvent.callCount).to.equal(1);
    const replaced = core.replaceNamespacedEvent.firstCall.args[0].body;
    expect(replaced).to.deep.include({ count: 2, lastTimestamp: new Date(NOW - 1_000) });
    expect(replaced.metadata.resourceVersion).to.equal('7');
  });

  it('after a restart, leaves an up-to-date copy alone (409, same count and time)', async () => {
    await r.reconcile(key);
    const written = core.createNamespacedEvent.firstCall.args[0].body;
    const fresh = new DelegateEventsReconciler({ ...(r as unknown as { o: ConstructorParameters<typeof DelegateEventsReconciler>[0] }).o });
    core.createNamespacedEvent.rejects(bareApiError(409, 'AlreadyExists'));
    core.readNamespacedEvent.resolves(written);
    await fresh.reconcile(key);
    expect(core.replaceNamespacedEvent.callCount).to.equal(0);
  });

  it('skips old events, events of pods that are not our delegates, and vanished events', async () => {
    events.items[0] = scheduled({ lastTimestamp: new Date(NOW - 2 * 3600_000) });
    await r.reconcile(key);
    events.items[0] = scheduled({ involvedObject: { kind: 'Pod', name: 'not-a-delegate', namespace: 'shop' } });
    await r.reconcile(key);
    events.items.length = 0;
    await r.reconcile(key);
    await r.reconcile('Target/gone/x|shop|web-abc.1');
    expect(core.createNamespacedEvent.callCount).to.equal(0);
  });

  it("copies onto the delegate's own proxy only: one that exists, is bound to this target or not yet bound, in the delegate's namespace", async () => {
    // Not yet bound (the extender creates the delegate before the bind): copied.
    proxies.items[0] = proxyOf({}, '');
    await r.reconcile(key);
    expect(core.createNamespacedEvent.callCount).to.equal(1);
    const refused: [string, () => void][] = [
      ['no such proxy', () => (proxies.items.length = 0)],
      ['bound to another target', () => (proxies.items[0] = proxyOf({}, 'admiralty-shop-us'))],
      ['another pod of that name', () => (proxies.items[0] = proxyOf({ uid: 'other-uid' }))],
      [
        "a delegate naming a proxy of another namespace (the target's word)",
        () => {
          proxies.items[0] = proxyOf({ name: 'coredns', namespace: 'kube-system' });
          delegates.items[0] = {
            ...delegate,
            metadata: { ...delegate.metadata, annotations: { 'multicluster.admiralty.io/parent-name': 'coredns', 'multicluster.admiralty.io/parent-namespace': 'kube-system' } },
          };
        },
      ],
    ];
    for (const [why, arrange] of refused) {
      proxies.items.splice(0, proxies.items.length, proxyOf());
      delegates.items[0] = delegate;
      arrange();
      events.items[0] = scheduled({ count: core.createNamespacedEvent.callCount + 5 });
      await r.reconcile(key);
      expect(core.createNamespacedEvent.callCount, why).to.equal(1);
    }
  });

  it('gives up quietly when the proxy namespace is gone or terminating, and retries other failures', async () => {
    core.createNamespacedEvent.rejects(bareApiError(403, 'Forbidden'));
    await r.reconcile(key);
    core.createNamespacedEvent.rejects(bareApiError(404, 'NotFound'));
    await r.reconcile(key);
    core.createNamespacedEvent.rejects(bareApiError(500, 'InternalError'));
    const err = await r.reconcile(key).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).to.match(/copying event shop\/web-abc.1 of Target\/shop\/eu to proxy shop\/web/);
    // Not remembered as written: the retry writes.
    core.createNamespacedEvent.resolves({});
    await r.reconcile(key);
    expect(core.createNamespacedEvent.callCount).to.equal(4);
  });
});
