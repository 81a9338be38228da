import { expect } from 'chai';
import sinon from 'sinon';
import { ApiException, type V1Namespace, type V1Pod, type V1PodStatus } from '@kubernetes/client-node';
import { ClusterRegistry } from '../../../../provider/clusters/cluster-registry.js';
import { FakeClock } from '../../../../provider/core/clock.js';
import { CopyConflictError, NotDelegatedError, TerminalError } from '../../../../provider/core/errors.js';
import { PARENT_CLUSTER_NAME_LABEL, PARENT_NAME_ANNOTATION, PARENT_NAMESPACE_ANNOTATION, PARENT_UID_LABEL, PROXY_FINALIZER, SOURCE_POD_MANIFEST_ANNOTATION } from '../../../../provider/core/keys.js';
import { buildDelegatePod } from '../../../../provider/model/delegate-pod.js';
import { buildProxyStatus, proxyFields } from '../../../../provider/model/proxy-status.js';
import { DelegationReconciler } from '../../../../provider/reconcilers/delegation.js';
import type { EventSink } from '../../../../provider/core/event-sink.js';
import { MapCache } from './map-cache.js';
import { apiError, notFound } from '../../../support/api-errors.js';
import { coreStub } from '../../../support/stubs.js';
import { fakeTarget } from '../../../support/targets.js';
import { proxy as baseProxy } from '../../../support/pods.js';

const CLUSTER = 'c1';
const NODE = 'admiralty-cluster-t1';
const NS = 'apps';
const UID = 'proxy-uid-1';
const KEY = `${NS}/web-0`;
const T0 = Date.parse('2024-05-01T10:00:00.000Z');

/** Informer cache fake: objects by `<ns>/<name>`. */

function proxy(over: { status?: V1Pod['status']; nodeName?: string | null; deleting?: boolean; finalizers?: string[]; owner?: boolean } = {}): V1Pod {
  const manifest: V1Pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'web-0', namespace: NS, labels: { app: 'web' }, annotations: { 'multicluster.admiralty.io/elect': '' } },
    spec: { containers: [{ name: 'web', image: 'nginx', volumeMounts: [{ name: 'conf', mountPath: '/etc/web' }] }], volumes: [{ name: 'conf', configMap: { name: 'web-conf' } }] },
  };
  return baseProxy({
    typed: true,
    name: 'web-0',
    namespace: NS,
    uid: UID,
    resourceVersion: '10',
    labels: { app: 'web' },
    elected: { sourcePod: manifest },
    finalizers: over.finalizers ?? [PROXY_FINALIZER],
    ...(over.deleting ? { deletedAt: new Date(T0), deletionGracePeriodSeconds: 30 } : {}),
    owner: over.owner && { uid: 'rs-uid' },
    spec: manifest.spec,
    nodeName: over.nodeName === null ? undefined : (over.nodeName ?? NODE),
    status: over.status ?? { phase: 'Pending' },
  });
}

/** The delegate as the target would return it after create. */
function delegateOf(p: V1Pod, over: { status?: V1Pod['status']; annotations?: Record<string, string>; deleting?: boolean } = {}): V1Pod {
  const d = buildDelegatePod(p, { sourceClusterName: CLUSTER });
  d.metadata!.uid = 'delegate-uid-1';
  d.metadata!.resourceVersion = '5';
  if (over.annotations) d.metadata!.annotations = { ...d.metadata!.annotations, ...over.annotations };
  if (over.deleting) d.metadata!.deletionTimestamp = new Date(T0);
  d.status = over.status ?? { phase: 'Pending' };
  return d;
}

/** The Content-Type the call's header middleware would set (see setHeaderOptions). */
function contentType(options: unknown): string | undefined {
  const headers: Record<string, string> = {};
  const request = { setHeaderParam: (k: string, v: string) => (headers[k] = v) };
  for (const m of (options as { middleware?: { pre: (r: unknown) => unknown }[] })?.middleware ?? []) m.pre(request);
  return headers['Content-Type'];
}

interface Recorded {
  type: string;
  reason: string;
  message: string;
  name?: string;
}

function setup(
  opts: {
    proxies?: V1Pod[];
    delegates?: V1Pod[];
    noDelegateCache?: boolean;
    follow?: boolean;
    targetNamespace?: string;
    namespaces?: V1Namespace[];
    otherTargetDelegates?: V1Pod[];
    mayCreateDelegates?: (key: string) => boolean;
  } = {},
) {
  const source = coreStub();
  // Named plain 't1' even as a Target: the events' expected texts say so.
  const { target, core: targetCore } = fakeTarget('t1', { namespace: opts.targetNamespace, displayName: 't1' });
  const namespaces = new MapCache<V1Namespace>(...(opts.namespaces ?? [{ metadata: { name: NS, labels: { 'multicluster-scheduler': 'enabled' } } }]));
  const registry = new ClusterRegistry();
  registry.set(target, NODE);
  const proxies = new MapCache<V1Pod>(...(opts.proxies ?? []));
  const byProxy = DelegationReconciler.delegatesByProxy(CLUSTER);
  const delegates = new MapCache<V1Pod>(...(opts.delegates ?? [])).withIndex(DelegationReconciler.BY_PROXY_INDEX, byProxy);
  // A second target, t2, where the scheduler extender may have left a delegate behind.
  const { target: other, core: otherCore } = fakeTarget('t2');
  registry.set(other, 'admiralty-cluster-t2');
  otherCore.deleteNamespacedPod.resolves({});
  const otherDelegates = new MapCache<V1Pod>(...(opts.otherTargetDelegates ?? [])).withIndex(DelegationReconciler.BY_PROXY_INDEX, byProxy);
  // The target's delegates cache as the reconciler finds it: a test may swap it (a new informer).
  const current = { delegates };
  const events: Recorded[] = [];
  const sink: EventSink = { record: (obj, type, reason, message) => events.push({ type, reason, message, name: obj.metadata.name }) };
  const follow = { ensureCopies: sinon.stub().resolves() };
  // Defaults that behave like an empty target: reads miss, writes succeed.
  targetCore.readNamespacedPod.rejects(notFound());
  targetCore.createNamespacedPod.callsFake(async ({ body }) => body);
  targetCore.deleteNamespacedPod.resolves({});
  source.replaceNamespacedPodStatus.callsFake(async ({ body }) => body);
  source.patchNamespacedPod.resolves({});
  source.deleteNamespacedPod.resolves({});
  source.readNamespacedPod.rejects(notFound());
  source.readNode.rejects(notFound());
  const clock = new FakeClock(T0);
  const reconciler = new DelegationReconciler({
    sourceCore: source,
    proxies,
    namespaces,
    delegates: (key) => (key === other.key ? otherDelegates : opts.noDelegateCache || key !== target.key ? undefined : current.delegates),
    registry,
    sourceClusterName: CLUSTER,
    events: sink,
    clock,
    follow: opts.follow === false ? undefined : follow,
    mayCreateDelegates: opts.mayCreateDelegates,
  });
  return { reconciler, source, targetCore, otherCore, target, registry, proxies, delegates, current, events, follow, byProxy, clock };
}

describe('DelegationReconciler', () => {
  afterEach(() => sinon.restore());

  describe('key mappers', () => {
    it('maps a proxy to <namespace>/<name>', () => {
      expect(DelegationReconciler.proxyKey(proxy())).to.equal(KEY);
    });

    it('maps our delegate to its proxy through the parent annotations, and ignores others', () => {
      const d = delegateOf(proxy());
      expect(DelegationReconciler.delegateToProxyKey(d, CLUSTER)).to.deep.equal([KEY]);
      expect(DelegationReconciler.delegateToProxyKey(d, 'other-cluster')).to.deep.equal([]);
      const foreign: V1Pod = { metadata: { name: 'x', namespace: NS, annotations: { [PARENT_NAME_ANNOTATION]: 'web-0', [PARENT_NAMESPACE_ANNOTATION]: NS } } };
      expect(DelegationReconciler.delegateToProxyKey(foreign, CLUSTER)).to.deep.equal([]);
    });
  });

  describe('stray delegates', () => {
    it("deletes this proxy's delegate in another target once its own delegate exists", async () => {
      const p = proxy();
      const stray = delegateOf(p);
      stray.metadata!.uid = 'stray-uid';
      const foreign = { ...delegateOf(p), metadata: { ...delegateOf(p).metadata, labels: { ...delegateOf(p).metadata!.labels, [PARENT_UID_LABEL]: 'another-proxy' } } };
      let s = setup({ proxies: [p], delegates: [delegateOf(p)], otherTargetDelegates: [stray] });
      await s.reconciler.reconcile(KEY);
      sinon.assert.calledOnce(s.otherCore.deleteNamespacedPod);
      expect(s.otherCore.deleteNamespacedPod.firstCall.args[0].body).to.deep.include({ preconditions: { uid: 'stray-uid' } });
      expect(s.events.map((e) => e.reason)).to.include('StrayDelegateDeleted');
      // Not another proxy's pod of the same name.
      s = setup({ proxies: [p], delegates: [delegateOf(p)], otherTargetDelegates: [foreign] });
      await s.reconciler.reconcile(KEY);
      sinon.assert.notCalled(s.otherCore.deleteNamespacedPod);
    });
  });

  describe('creation', () => {
    it('creates nothing in a target its fencing gate keeps closed, and looks again soon', async () => {
      const p = proxy();
      const asked: string[] = [];
      let open = false;
      const s = setup({ proxies: [p], mayCreateDelegates: (key) => (asked.push(key), open) });
      expect(await s.reconciler.reconcile(KEY)).to.deep.equal({ requeueAfterMs: 1000 });
      sinon.assert.notCalled(s.targetCore.createNamespacedPod);
      sinon.assert.notCalled(s.follow.ensureCopies);
      expect(asked).to.deep.equal([s.target.key]);
      open = true;
      await s.reconciler.reconcile(KEY);
      sinon.assert.calledOnce(s.targetCore.createNamespacedPod);
    });

    it('copies what the delegate references, then creates the delegate in the bound target', async () => {
      const p = proxy();
      const { reconciler, targetCore, follow, events, target } = setup({ proxies: [p] });
      await reconciler.reconcile(KEY);
      sinon.assert.calledOnceWithExactly(follow.ensureCopies, p, target);
      sinon.assert.calledOnce(targetCore.createNamespacedPod);
      sinon.assert.callOrder(follow.ensureCopies, targetCore.createNamespacedPod);
      const { namespace, body } = targetCore.createNamespacedPod.firstCall.args[0];
      expect(namespace).to.equal(NS);
      expect(body.metadata?.labels).to.include({ [PARENT_UID_LABEL]: UID, [PARENT_CLUSTER_NAME_LABEL]: CLUSTER, 'multicluster.admiralty.io/app': 'web' });
      expect(body.metadata?.annotations).to.include({ [PARENT_NAME_ANNOTATION]: 'web-0', [PARENT_NAMESPACE_ANNOTATION]: NS });
      expect(events.map((e) => [e.type, e.reason])).to.deep.equal([['Normal', 'DelegateCreated']]);
      expect(events[0]!.message).to.contain('t1');
    });

    it('is idempotent: AlreadyExists (a lagging cache) is not an error and asks for a requeue', async () => {
      const { reconciler, targetCore, events } = setup({ proxies: [proxy()] });
      targetCore.createNamespacedPod.rejects(apiError(409, 'AlreadyExists'));
      const result = await reconciler.reconcile(KEY);
      expect(result).to.deep.equal({ requeueAfterMs: 1000 });
      expect(events).to.deep.equal([]);
    });

    it('creates without reading the target first when the proxy never had a delegate (AlreadyExists covers a lagging cache)', async () => {
      const p = proxy();
      const { reconciler, targetCore } = setup({ proxies: [p] });
      targetCore.createNamespacedPod.rejects(apiError(409, 'AlreadyExists'));
      expect(await reconciler.reconcile(KEY)).to.deep.equal({ requeueAfterMs: 1000 });
      sinon.assert.notCalled(targetCore.readNamespacedPod);
      sinon.assert.calledOnce(targetCore.createNamespacedPod);
    });

    it('finds the delegate of a proxy that had one with a direct read when the cache has not seen it, and neither replaces nor recreates it', async () => {
      const p = { ...proxy(), status: { phase: 'Running', startTime: new Date(0) } };
      const { reconciler, targetCore, source: sourceCore } = setup({ proxies: [p] });
      targetCore.readNamespacedPod.resolves(delegateOf(p));
      await reconciler.reconcile(KEY);
      sinon.assert.calledOnce(targetCore.readNamespacedPod);
      sinon.assert.notCalled(targetCore.createNamespacedPod);
      sinon.assert.notCalled(sourceCore.deleteNamespacedPod);
    });

    it('reports a missing target namespace and retries', async () => {
      const { reconciler, targetCore, source: sourceCore, events } = setup({ proxies: [proxy()] });
      targetCore.createNamespacedPod.rejects(apiError(404, 'NotFound'));
      const err = await reconciler.reconcile(KEY).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(Error).and.not.instanceOf(TerminalError);
      expect((err as Error).cause).to.be.instanceOf(ApiException);
      expect(events.map((e) => e.reason)).to.deep.equal(['TargetNamespaceMissing']);
      // ...and a condition on the proxy, set once by a strategic merge of the status.
      sinon.assert.calledOnce(sourceCore.patchNamespacedPodStatus);
      const [{ body }, options] = sourceCore.patchNamespacedPodStatus.firstCall.args as unknown as [{ body: { status: { conditions: Record<string, unknown>[] } } }, unknown];
      expect(contentType(options)).to.equal('application/strategic-merge-patch+json');
      expect(body.status.conditions).to.have.length(1);
      expect(body.status.conditions[0]).to.include({ type: 'multicluster.admiralty.io/Delegated', status: 'False', reason: 'TargetNamespaceMissing', message: `namespace ${NS} does not exist in t1` });
    });

    it('does not rewrite a condition that already says why', async () => {
      const p = proxy({
        status: { phase: 'Pending', conditions: [{ type: 'multicluster.admiralty.io/Delegated', status: 'False', reason: 'TargetNamespaceMissing', message: `namespace ${NS} does not exist in t1` }] },
      });
      const { reconciler, targetCore, source: sourceCore } = setup({ proxies: [p] });
      targetCore.createNamespacedPod.rejects(apiError(404, 'NotFound'));
      await reconciler.reconcile(KEY).catch(() => undefined);
      sinon.assert.notCalled(sourceCore.patchNamespacedPodStatus);
    });

    it('reports a refusal of the target and retries', async () => {
      const { reconciler, targetCore, events } = setup({ proxies: [proxy()] });
      targetCore.createNamespacedPod.rejects(apiError(403, 'Forbidden'));
      const err = await reconciler.reconcile(KEY).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(Error).and.not.instanceOf(TerminalError);
      expect(events.map((e) => [e.type, e.reason])).to.deep.equal([['Warning', 'DelegateForbidden']]);
    });

    it('says which Source to create when the target has none for this source: Delegated=False SourceNotAuthorized, a Warning, and retries', async () => {
      const { reconciler, targetCore, target, events, source: sourceCore } = setup({ proxies: [proxy()], targetNamespace: NS });
      targetCore.createNamespacedPod.rejects(apiError(403, 'Forbidden'));
      const user = 'system:serviceaccount:default:c1';
      Object.assign(target, {
        authorization: { createSelfSubjectAccessReview: sinon.stub().resolves({ status: { allowed: false } }) },
        authentication: { createSelfSubjectReview: sinon.stub().resolves({ status: { userInfo: { username: user } } }) },
      });
      const err = await reconciler.reconcile(KEY).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(Error).and.not.instanceOf(TerminalError);
      const message = `the cluster of Target t1 does not authorize this source (user "${user}") to create pods in namespace ${NS}: create a Source in namespace ${NS} of that cluster with spec.userName "${user}"`;
      expect(events.map((e) => [e.type, e.reason, e.message])).to.deep.equal([['Warning', 'SourceNotAuthorized', message]]);
      const [{ body }] = sourceCore.patchNamespacedPodStatus.firstCall.args as unknown as [{ body: { status: { conditions: Record<string, unknown>[] } } }];
      expect(body.status.conditions[0]).to.include({ type: 'multicluster.admiralty.io/Delegated', status: 'False', reason: 'SourceNotAuthorized', message });
    });

    it('makes no delegate when the target refuses a copy: Delegated=False with the reason the follow reconciler gave', async () => {
      const { reconciler, targetCore, follow, source: sourceCore } = setup({ proxies: [proxy()] });
      follow.ensureCopies.rejects(new NotDelegatedError('SourceNotAuthorized', 'the cluster of ClusterTarget t1 does not authorize this source'));
      const err = await reconciler.reconcile(KEY).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(NotDelegatedError).and.not.instanceOf(TerminalError);
      sinon.assert.notCalled(targetCore.createNamespacedPod);
      const [{ body }] = sourceCore.patchNamespacedPodStatus.firstCall.args as unknown as [{ body: { status: { conditions: Record<string, unknown>[] } } }];
      expect(body.status.conditions[0]).to.include({ status: 'False', reason: 'SourceNotAuthorized', message: 'the cluster of ClusterTarget t1 does not authorize this source' });
    });

    it("names the copies the follow reconciler made in the delegate's spec", async () => {
      const p = proxy();
      p.spec!.containers[0]!.envFrom = [{ configMapRef: { name: 'settings' } }, { configMapRef: { name: 'target-own' } }];
      const { reconciler, targetCore, follow } = setup({ proxies: [p] });
      follow.ensureCopies.resolves({ configmap: new Map([['settings', 'settings-0123456789']]), secret: new Map() });
      await reconciler.reconcile(KEY);
      const { body } = targetCore.createNamespacedPod.firstCall.args[0];
      expect(body.metadata?.name).to.equal(delegateOf(p).metadata!.name);
      expect(body.spec!.containers[0]!.envFrom).to.deep.equal([{ configMapRef: { name: 'settings-0123456789' } }, { configMapRef: { name: 'target-own' } }]);
    });

    it('makes no delegate while a copy name is taken by an object that is not that copy: Delegated=False CopyConflict, and retries', async () => {
      const { reconciler, targetCore, follow, source: sourceCore } = setup({ proxies: [proxy()] });
      follow.ensureCopies.rejects(new CopyConflictError('configmap apps/settings-0123456789 in t1 is taken'));
      const err = await reconciler.reconcile(KEY).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(CopyConflictError).and.not.instanceOf(TerminalError);
      sinon.assert.notCalled(targetCore.createNamespacedPod);
      const [{ body }] = sourceCore.patchNamespacedPodStatus.firstCall.args as unknown as [{ body: { status: { conditions: Record<string, unknown>[] } } }];
      expect(body.status.conditions[0]).to.include({ type: 'multicluster.admiralty.io/Delegated', status: 'False', reason: 'CopyConflict' });
    });

    it('works without a follow reconciler', async () => {
      const { reconciler, targetCore } = setup({ proxies: [proxy()], follow: false });
      await reconciler.reconcile(KEY);
      sinon.assert.calledOnce(targetCore.createNamespacedPod);
    });

    it('waits for the target caches before deciding anything', async () => {
      const { reconciler, targetCore } = setup({ proxies: [proxy()], noDelegateCache: true });
      expect(await reconciler.reconcile(KEY)).to.deep.equal({ requeueAfterMs: 2000 });
      sinon.assert.notCalled(targetCore.createNamespacedPod);
    });

    describe('refuses to act for a pod that may not use the target', () => {
      const refusals: [string, Parameters<typeof setup>[0], string][] = [
        ["a proxy of namespace apps on another namespace's Target", { targetNamespace: 'other' }, 'TargetNotAllowed'],
        ['a proxy of a namespace that is not enabled', { namespaces: [] }, 'NamespaceNotEnabled'],
      ];
      for (const [why, opts, reason] of refusals) {
        it(`${why}: no copies, no delegate, a Warning and Delegated=False ${reason}`, async () => {
          const { reconciler, targetCore, follow, events, source: sourceCore } = setup({ proxies: [proxy()], ...opts });
          const err = await reconciler.reconcile(KEY).then(
            () => undefined,
            (e: unknown) => e,
          );
          expect(err).to.be.instanceOf(TerminalError);
          sinon.assert.notCalled(targetCore.createNamespacedPod);
          sinon.assert.notCalled(follow.ensureCopies);
          expect(events.map((e) => [e.type, e.reason])).to.deep.equal([['Warning', reason]]);
          sinon.assert.calledOnce(sourceCore.patchNamespacedPodStatus);
          const { body } = sourceCore.patchNamespacedPodStatus.firstCall.args[0] as unknown as { body: { status: { conditions: Record<string, unknown>[] } } };
          expect(body.status.conditions[0]).to.include({ type: 'multicluster.admiralty.io/Delegated', status: 'False', reason });
        });
      }

      it('a pod bound to the virtual node that was never elected (label and manifest set by its creator)', async () => {
        const p = proxy();
        delete p.metadata!.annotations!['multicluster.admiralty.io/elect'];
        const { reconciler, targetCore, events } = setup({ proxies: [p] });
        await reconciler.reconcile(KEY).catch(() => undefined);
        sinon.assert.notCalled(targetCore.createNamespacedPod);
        expect(events.map((e) => e.reason)).to.deep.equal(['NotAProxy']);
      });

      it("allows a proxy on its own namespace's Target", async () => {
        const { reconciler, targetCore } = setup({ proxies: [proxy()], targetNamespace: NS });
        await reconciler.reconcile(KEY);
        sinon.assert.calledOnce(targetCore.createNamespacedPod);
      });
    });

    it('marks an unreadable manifest with an event and drops the key', async () => {
      const p = proxy();
      p.metadata!.annotations![SOURCE_POD_MANIFEST_ANNOTATION] = '[1]';
      const { reconciler, targetCore, events } = setup({ proxies: [p] });
      const err = await reconciler.reconcile(KEY).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(TerminalError);
      expect(events.map((e) => e.reason)).to.deep.equal(['InvalidProxy']);
      sinon.assert.notCalled(targetCore.createNamespacedPod);
    });

    it('refuses an unreadable manifest on a proxy whose delegate exists too (a lookup checks what a create would)', async () => {
      const p = proxy({ status: { phase: 'Pending' } });
      const d = delegateOf(p, { status: { phase: 'Running' } });
      p.metadata!.annotations![SOURCE_POD_MANIFEST_ANNOTATION] = '[1]';
      const { reconciler, source, events } = setup({ proxies: [p], delegates: [d] });
      const err = await reconciler.reconcile(KEY).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(TerminalError);
      expect(events.map((e) => e.reason)).to.deep.equal(['InvalidProxy']);
      sinon.assert.notCalled(source.patchNamespacedPodStatus);
    });
  });

  describe('nothing to do', () => {
    it('ignores a pod without a source manifest, a pending proxy and a missing proxy without delegates', async () => {
      const notProxy = proxy();
      delete notProxy.metadata!.annotations![SOURCE_POD_MANIFEST_ANNOTATION];
      for (const p of [notProxy, proxy({ nodeName: null })]) {
        const { reconciler, source, targetCore } = setup({ proxies: [p] });
        expect(await reconciler.reconcile(KEY)).to.equal(undefined);
        sinon.assert.notCalled(targetCore.createNamespacedPod);
        sinon.assert.notCalled(source.patchNamespacedPod);
        sinon.assert.notCalled(source.replaceNamespacedPodStatus);
      }
    });

    it('waits while the virtual node exists but its target is not loaded', async () => {
      const { reconciler, source, targetCore } = setup({ proxies: [proxy({ nodeName: 'admiralty-cluster-unknown' })] });
      source.readNode.resolves({ metadata: { name: 'admiralty-cluster-unknown' } });
      expect(await reconciler.reconcile(KEY)).to.deep.equal({ requeueAfterMs: 5000 });
      sinon.assert.notCalled(targetCore.createNamespacedPod);
      sinon.assert.notCalled(source.patchNamespacedPod);
    });

    it('reads such a node once per recheck period for all its proxies, and releases a terminating one once it is gone', async () => {
      const named = (name: string, deleting = false): V1Pod => {
        const p = proxy({ nodeName: 'admiralty-cluster-unknown', deleting });
        return { ...p, metadata: { ...p.metadata, name, uid: `${name}-uid` } };
      };
      const names = ['web-0', 'web-1', 'web-2'];
      const { reconciler, source, clock, proxies } = setup({ proxies: names.map((n) => named(n)) });
      source.readNode.resolves({ metadata: { name: 'admiralty-cluster-unknown' } });
      for (const n of names) expect(await reconciler.reconcile(`${NS}/${n}`)).to.deep.equal({ requeueAfterMs: 5000 });
      sinon.assert.calledOnce(source.readNode);
      clock.advance(5000);
      source.readNode.rejects(notFound());
      proxies.put(named('web-0', true));
      expect(await reconciler.reconcile(`${NS}/web-0`)).to.equal(undefined);
      sinon.assert.calledTwice(source.readNode);
      // Released: its finalizer removed, since its delegate went with the target.
      sinon.assert.calledOnce(source.patchNamespacedPod);
    });

    it('reads such a node again after the recheck period even when the wall clock was set back meanwhile', async () => {
      const p = proxy({ nodeName: 'admiralty-cluster-unknown' });
      const { reconciler, source, clock } = setup({ proxies: [p] });
      source.readNode.resolves({ metadata: { name: 'admiralty-cluster-unknown' } });
      await reconciler.reconcile(`${NS}/${p.metadata!.name}`);
      clock.stepWallClock(-3_600_000);
      clock.advance(5000);
      await reconciler.reconcile(`${NS}/${p.metadata!.name}`);
      sinon.assert.calledTwice(source.readNode);
    });
  });

  describe('feedback', () => {
    it("merge-patches the delegate's status onto the proxy, as the cache keeps it, only when it changed", async () => {
      const p = proxyFields(proxy({ status: { phase: 'Pending', qosClass: 'BestEffort', nominatedNodeName: 'n1' } }));
      const running: V1PodStatus = {
        phase: 'Running',
        podIP: '10.0.0.7',
        startTime: new Date(T0),
        conditions: [{ type: 'Ready', status: 'True' }],
        containerStatuses: [{ name: 'web', image: 'nginx', imageID: '', ready: true, restartCount: 0, state: { running: { startedAt: new Date(T0) } } }],
      };
      const d = delegateOf(p, { status: running });
      const { reconciler, source, proxies } = setup({ proxies: [p], delegates: [d] });

      await reconciler.reconcile(KEY);
      sinon.assert.notCalled(source.replaceNamespacedPodStatus);
      sinon.assert.calledOnce(source.patchNamespacedPodStatus);
      const [{ name, namespace, body }, options] = source.patchNamespacedPodStatus.firstCall.args;
      expect([namespace, name]).to.deep.equal([NS, 'web-0']);
      expect(contentType(options)).to.equal('application/merge-patch+json');
      // The cached resourceVersion, the whole status, and null for what the proxy has and the status has not.
      expect(body).to.deep.equal({
        metadata: { resourceVersion: '10' },
        status: { ...buildProxyStatus(p, d), nominatedNodeName: null, initContainerStatuses: null, hostIP: null, hostIPs: null, podIPs: null },
      });

      // The proxy now carries that status (as the informer would cache it): no second write.
      proxies.put(proxyFields({ ...p, status: JSON.parse(JSON.stringify(buildProxyStatus(p, d))) }));
      await reconciler.reconcile(KEY);
      sinon.assert.calledOnce(source.patchNamespacedPodStatus);
      sinon.assert.notCalled(source.patchNamespacedPod);

      // A change of a field the cache does not keep is still seen (by the digest) and written.
      const restarted = delegateOf(p, { status: { ...running, containerStatuses: [{ ...running.containerStatuses![0]!, restartCount: 1 }] } });
      const again = setup({ proxies: [proxies.get('web-0', NS)!], delegates: [restarted] });
      await again.reconciler.reconcile(KEY);
      sinon.assert.calledOnce(again.source.patchNamespacedPodStatus);
      expect(again.source.patchNamespacedPodStatus.firstCall.args[0].body.status.containerStatuses).to.deep.equal(restarted.status!.containerStatuses);
    });

    it('a conflict on the status write is retried, with the cause kept', async () => {
      const p = proxy();
      const { reconciler, source } = setup({ proxies: [p], delegates: [delegateOf(p, { status: { phase: 'Running' } })] });
      source.patchNamespacedPodStatus.rejects(apiError(409, 'Conflict'));
      const err = await reconciler.reconcile(KEY).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(Error).and.not.instanceOf(TerminalError);
      expect((err as Error).cause).to.be.instanceOf(ApiException);
    });

    it("merge-patches the delegate's annotations onto the proxy", async () => {
      const p = proxy();
      const d = delegateOf(p, { annotations: { 'workflows.argoproj.io/outputs': '{"x":1}' } });
      const { reconciler, source } = setup({ proxies: [{ ...p, status: buildProxyStatus(p, d) }], delegates: [d] });
      await reconciler.reconcile(KEY);
      sinon.assert.notCalled(source.replaceNamespacedPodStatus);
      sinon.assert.calledOnce(source.patchNamespacedPod);
      const [args, options] = source.patchNamespacedPod.firstCall.args;
      expect(args.body).to.deep.equal({ metadata: { annotations: { 'workflows.argoproj.io/outputs': '{"x":1}' } } });
      expect(contentType(options)).to.equal('application/merge-patch+json');
    });
  });

  describe('conflicts', () => {
    it('never touches a same-name pod that is not ours', async () => {
      const p = proxy();
      const foreign = delegateOf(p);
      foreign.metadata!.labels = { app: 'someone-else' };
      const { reconciler, source, targetCore, events } = setup({ proxies: [p], delegates: [foreign] });
      const err = await reconciler.reconcile(KEY).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(TerminalError);
      expect(events.map((e) => [e.type, e.reason])).to.deep.equal([['Warning', 'DelegateNameConflict']]);
      sinon.assert.notCalled(targetCore.deleteNamespacedPod);
      sinon.assert.notCalled(targetCore.createNamespacedPod);
      sinon.assert.notCalled(source.replaceNamespacedPodStatus);
    });

    it("a terminating proxy is released even when a foreign pod has its delegate's name", async () => {
      const p = proxy({ deleting: true });
      const foreign = delegateOf(p);
      foreign.metadata!.labels = { [PARENT_UID_LABEL]: 'someone-else', [PARENT_CLUSTER_NAME_LABEL]: CLUSTER };
      const { reconciler, source, targetCore } = setup({ proxies: [p], delegates: [foreign] });
      await reconciler.reconcile(KEY);
      sinon.assert.notCalled(targetCore.deleteNamespacedPod);
      sinon.assert.calledOnce(source.patchNamespacedPod);
      sinon.assert.calledOnce(source.deleteNamespacedPod);
    });
  });

  describe('deletion of the proxy', () => {
    it('deletes the delegate, then releases the finalizer, then removes the proxy for good', async () => {
      const p = proxy({ deleting: true, finalizers: ['example.com/keep-me', PROXY_FINALIZER] });
      const d = delegateOf(p, { status: { phase: 'Running' } });
      const { reconciler, source, targetCore, delegates, proxies } = setup({ proxies: [p], delegates: [d] });

      // 1. The delegate goes first, with the proxy's grace period and a UID precondition; the
      // delegate's changes wake the proxy, the requeue is a slow safety net.
      expect(await reconciler.reconcile(KEY)).to.deep.equal({ requeueAfterMs: 10_000 });
      sinon.assert.calledOnce(targetCore.deleteNamespacedPod);
      expect(targetCore.deleteNamespacedPod.firstCall.args[0]).to.deep.include({ name: d.metadata!.name, namespace: NS, gracePeriodSeconds: 30, body: { preconditions: { uid: 'delegate-uid-1' } } });
      sinon.assert.notCalled(source.patchNamespacedPod);

      // 2. While it terminates: wait, without deleting it again.
      delegates.put({ ...d, metadata: { ...d.metadata, deletionTimestamp: new Date(T0) } });
      expect(await reconciler.reconcile(KEY)).to.deep.equal({ requeueAfterMs: 10_000 });
      sinon.assert.calledOnce(targetCore.deleteNamespacedPod);

      // 3. Gone from the cache that showed it (no read needed): our finalizer only is removed, with a test of the list.
      delegates.remove(d);
      await reconciler.reconcile(KEY);
      sinon.assert.calledOnce(source.patchNamespacedPod);
      const [args, options] = source.patchNamespacedPod.firstCall.args;
      expect(args.body).to.deep.equal([
        { op: 'test', path: '/metadata/finalizers', value: ['example.com/keep-me', PROXY_FINALIZER] },
        { op: 'replace', path: '/metadata/finalizers', value: ['example.com/keep-me'] },
      ]);
      expect(contentType(options)).to.equal('application/json-patch+json');
      // Someone else's finalizer remains: the pod is not force-deleted yet.
      sinon.assert.notCalled(source.deleteNamespacedPod);

      // 4. Last finalizer gone: we play the kubelet and remove the pod, exactly this one.
      proxies.put({ ...p, metadata: { ...p.metadata, finalizers: [] } });
      await reconciler.reconcile(KEY);
      sinon.assert.calledOnce(source.patchNamespacedPod);
      sinon.assert.calledOnce(source.deleteNamespacedPod);
      expect(source.deleteNamespacedPod.firstCall.args[0]).to.deep.include({ name: 'web-0', namespace: NS, gracePeriodSeconds: 0, body: { gracePeriodSeconds: 0, preconditions: { uid: UID } } });
    });

    it('finds the delegate of a deleted proxy by name, without reading its saved manifest, and releases one whose manifest is unreadable', async () => {
      const p = proxy({ deleting: true });
      const d = delegateOf(p, { status: { phase: 'Running' } });
      p.metadata!.annotations![SOURCE_POD_MANIFEST_ANNOTATION] = '[1]';
      const s = setup({ proxies: [p], delegates: [d] });
      expect(await s.reconciler.reconcile(KEY)).to.deep.equal({ requeueAfterMs: 10_000 });
      expect(s.targetCore.deleteNamespacedPod.firstCall.args[0]).to.deep.include({ name: d.metadata!.name, namespace: NS });
      s.delegates.remove(d);
      await s.reconciler.reconcile(KEY);
      // The cache showed the delegate and then saw it go: no read of the target to confirm.
      sinon.assert.notCalled(s.targetCore.readNamespacedPod);
      sinon.assert.callOrder(s.source.deleteNamespacedPod, s.source.patchNamespacedPod);
      // A quick deletion costs no event.
      expect(s.events).to.deep.equal([]);
    });

    it('says once, with a Warning, that a delegate still there a minute past its deletion deadline keeps the proxy Terminating', async () => {
      const p = proxy({ deleting: true });
      const d = delegateOf(p, { status: { phase: 'Running' } });
      const s = setup({ proxies: [p], delegates: [{ ...d, metadata: { ...d.metadata, deletionTimestamp: new Date(T0 + 5_000), finalizers: ['example.com/a', 'example.com/b'] } }] });
      // Within its grace period, and a little past it (a loaded target is late): nothing to say.
      await s.reconciler.reconcile(KEY);
      s.delegates.put({ ...d, metadata: { ...d.metadata, deletionTimestamp: new Date(T0 - 60_000), finalizers: ['example.com/a', 'example.com/b'] } });
      await s.reconciler.reconcile(KEY);
      expect(s.events).to.deep.equal([]);
      s.delegates.put({ ...d, metadata: { ...d.metadata, deletionTimestamp: new Date(T0 - 60_001), finalizers: ['example.com/a', 'example.com/b'] } });
      await s.reconciler.reconcile(KEY);
      await s.reconciler.reconcile(KEY);
      expect(s.events.map((e) => [e.type, e.reason])).to.deep.equal([['Warning', 'DelegateStuckTerminating']]);
      expect(s.events[0]!.message).to.equal(
        `delegate ${d.metadata!.name} in t1 is still there more than 60 s past its deletion deadline 2024-05-01T09:58:59.999Z: its finalizers example.com/a, example.com/b hold it; this pod stays Terminating until it goes`,
      );
      sinon.assert.notCalled(s.targetCore.deleteNamespacedPod);
      sinon.assert.notCalled(s.source.patchNamespacedPod);
    });

    it('reads the target before releasing when the cache never showed the delegate, or is a new cache', async () => {
      const p = proxy({ deleting: true });
      const d = delegateOf(p, { status: { phase: 'Running' } });
      // Not cached (the cache lags): the read finds it, and it is deleted, not left behind.
      const s = setup({ proxies: [p] });
      s.targetCore.readNamespacedPod.resolves(d);
      expect(await s.reconciler.reconcile(KEY)).to.deep.equal({ requeueAfterMs: 10_000 });
      sinon.assert.calledOnce(s.targetCore.deleteNamespacedPod);
      sinon.assert.notCalled(s.source.patchNamespacedPod);

      // Cached, deleted, then the target's informer is replaced (the Target was reloaded): the
      // new cache, maybe not synced, has not seen the delegate go, so the read decides.
      const t = setup({ proxies: [p], delegates: [d] });
      await t.reconciler.reconcile(KEY);
      t.current.delegates = new MapCache<V1Pod>().withIndex(DelegationReconciler.BY_PROXY_INDEX, t.byProxy);
      t.targetCore.readNamespacedPod.resolves({ ...d, metadata: { ...d.metadata, deletionTimestamp: new Date(T0) } });
      expect(await t.reconciler.reconcile(KEY)).to.deep.equal({ requeueAfterMs: 10_000 });
      sinon.assert.calledOnce(t.targetCore.readNamespacedPod);
      sinon.assert.notCalled(t.source.patchNamespacedPod);
      t.targetCore.readNamespacedPod.rejects(notFound());
      await t.reconciler.reconcile(KEY);
      sinon.assert.callOrder(t.source.deleteNamespacedPod, t.source.patchNamespacedPod);
    });

    it('releases and removes in one pass when there is no delegate', async () => {
      const { reconciler, source } = setup({ proxies: [proxy({ deleting: true })] });
      await reconciler.reconcile(KEY);
      sinon.assert.callOrder(source.deleteNamespacedPod, source.patchNamespacedPod);
      expect(source.patchNamespacedPod.firstCall.args[0].body).to.deep.include({ op: 'replace', path: '/metadata/finalizers', value: [] });
    });

    it('does nothing more for a proxy it released while the cache still shows it; a new pod of the same name is handled', async () => {
      const p = proxy({ deleting: true });
      const s = setup({ proxies: [p] });
      await s.reconciler.reconcile(KEY);
      // No delegate cached: read once (404), then released and removed.
      sinon.assert.calledOnce(s.targetCore.readNamespacedPod);
      sinon.assert.calledOnce(s.source.patchNamespacedPod);
      sinon.assert.calledOnce(s.source.deleteNamespacedPod);
      // Our finalizer patch comes back before the removal does: no read, no second removal.
      s.proxies.put({ ...p, metadata: { ...p.metadata, finalizers: [] } });
      await s.reconciler.reconcile(KEY);
      sinon.assert.calledOnce(s.source.deleteNamespacedPod);
      sinon.assert.calledOnce(s.targetCore.readNamespacedPod);
      // Gone; then a new pod takes the name and is deleted in turn.
      s.proxies.remove(p);
      await s.reconciler.reconcile(KEY);
      const next = proxy({ deleting: true });
      next.metadata!.uid = 'uid-2';
      s.proxies.put(next);
      await s.reconciler.reconcile(KEY);
      sinon.assert.calledTwice(s.source.deleteNamespacedPod);
      expect(s.source.deleteNamespacedPod.secondCall.args[0]).to.deep.include({ body: { gracePeriodSeconds: 0, preconditions: { uid: 'uid-2' } } });
    });

    it('a stale finalizer list fails the test op and is retried, without a second delete once the proxy shows grace 0', async () => {
      const p = proxy({ deleting: true });
      const { reconciler, source, proxies } = setup({ proxies: [p] });
      source.patchNamespacedPod.onFirstCall().rejects(apiError(422, 'Invalid'));
      const err = await reconciler.reconcile(KEY).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(Error);
      expect((err as Error).message).to.equal(`removing the finalizer of proxy ${NS}/web-0`);
      sinon.assert.calledOnce(source.deleteNamespacedPod);
      // The delete came back (grace 0, our finalizer still there): the retry only patches.
      proxies.put({ ...p, metadata: { ...p.metadata, deletionGracePeriodSeconds: 0 } });
      await reconciler.reconcile(KEY);
      sinon.assert.calledOnce(source.deleteNamespacedPod);
      sinon.assert.calledTwice(source.patchNamespacedPod);
    });

    it('removes a bound proxy for good with the grace-0 delete first, so that the finalizer patch removes it in the same write', async () => {
      const { reconciler, source } = setup({ proxies: [proxy({ deleting: true })] });
      await reconciler.reconcile(KEY);
      sinon.assert.callOrder(source.deleteNamespacedPod, source.patchNamespacedPod);
      expect(source.deleteNamespacedPod.firstCall.args[0]).to.deep.include({ name: 'web-0', namespace: NS, gracePeriodSeconds: 0, body: { gracePeriodSeconds: 0, preconditions: { uid: UID } } });
      expect(source.patchNamespacedPod.firstCall.args[0].body).to.deep.equal([
        { op: 'test', path: '/metadata/finalizers', value: [PROXY_FINALIZER] },
        { op: 'replace', path: '/metadata/finalizers', value: [] },
      ]);
    });

    for (const [code, reason] of [
      [404, 'NotFound'],
      [409, 'Conflict'],
    ] as const) {
      it(`leaves the finalizer alone when the delete finds the proxy gone or another pod under its name (${code})`, async () => {
        const { reconciler, source } = setup({ proxies: [proxy({ deleting: true })] });
        source.deleteNamespacedPod.rejects(apiError(code, reason));
        await reconciler.reconcile(KEY);
        sinon.assert.calledOnce(source.deleteNamespacedPod);
        sinon.assert.notCalled(source.patchNamespacedPod);
      });
    }

    it('fails the release, finalizer kept, when the grace-0 delete fails otherwise', async () => {
      const { reconciler, source } = setup({ proxies: [proxy({ deleting: true })] });
      source.deleteNamespacedPod.rejects(apiError(500, 'InternalError'));
      const err = await reconciler.reconcile(KEY).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect((err as Error).message).to.equal(`deleting proxy ${NS}/web-0 for good`);
      sinon.assert.notCalled(source.patchNamespacedPod);
    });

    it('releases a terminating proxy that was never scheduled, without deleting it', async () => {
      const { reconciler, source } = setup({ proxies: [proxy({ deleting: true, nodeName: null })] });
      await reconciler.reconcile(KEY);
      sinon.assert.calledOnce(source.patchNamespacedPod);
      sinon.assert.notCalled(source.deleteNamespacedPod);
    });

    it('releases a terminating proxy whose virtual node is gone', async () => {
      const { reconciler, source } = setup({ proxies: [proxy({ deleting: true, nodeName: 'admiralty-cluster-gone' })] });
      await reconciler.reconcile(KEY);
      sinon.assert.calledOnce(source.patchNamespacedPod);
      sinon.assert.calledOnce(source.deleteNamespacedPod);
    });

    it('deletes the orphan delegates of a proxy that is gone, with a UID precondition, and only ours', async () => {
      const p = proxy();
      const orphan = delegateOf(p);
      const otherSource = delegateOf(p);
      otherSource.metadata = { ...otherSource.metadata, name: 'web-0-other', uid: 'other-uid', labels: { ...otherSource.metadata!.labels, [PARENT_CLUSTER_NAME_LABEL]: 'c9' } };
      const otherProxy = delegateOf(p);
      otherProxy.metadata = { ...otherProxy.metadata, name: 'api-0-x', uid: 'api-uid', annotations: { [PARENT_NAME_ANNOTATION]: 'api-0', [PARENT_NAMESPACE_ANNOTATION]: NS } };
      // In another namespace of the target, naming this proxy: not a delegate of it.
      const elsewhere = delegateOf(p);
      elsewhere.metadata = { ...elsewhere.metadata, namespace: 'someone-else', uid: 'elsewhere-uid', annotations: { [PARENT_NAME_ANNOTATION]: 'web-0', [PARENT_NAMESPACE_ANNOTATION]: NS } };
      const { reconciler, source, targetCore } = setup({ proxies: [], delegates: [orphan, otherSource, otherProxy, elsewhere] });
      await reconciler.reconcile(KEY);
      sinon.assert.calledOnce(source.readNamespacedPod);
      sinon.assert.calledOnce(targetCore.deleteNamespacedPod);
      expect(targetCore.deleteNamespacedPod.firstCall.args[0]).to.deep.include({ name: orphan.metadata!.name, namespace: NS, body: { preconditions: { uid: 'delegate-uid-1' } } });
    });

    it('reads nothing for a proxy that is gone when no cache holds a delegate of it (the usual end of a deletion)', async () => {
      const p = proxy();
      const other = delegateOf(p);
      other.metadata = { ...other.metadata, name: 'api-0-x', uid: 'api-uid', annotations: { [PARENT_NAME_ANNOTATION]: 'api-0', [PARENT_NAMESPACE_ANNOTATION]: NS } };
      const { reconciler, source, targetCore } = setup({ proxies: [], delegates: [other] });
      await reconciler.reconcile(KEY);
      sinon.assert.notCalled(source.readNamespacedPod);
      sinon.assert.notCalled(targetCore.deleteNamespacedPod);
    });

    it('leaves the orphans of an unreachable target to its fencing (no call that cannot succeed)', async () => {
      const p = proxy();
      const { reconciler, targetCore, registry, target } = setup({ proxies: [], delegates: [delegateOf(p)] });
      registry.setHealth(target.key, { ready: false, reason: 'TargetUnreachable', message: 'connection refused', sinceMs: T0 });
      await reconciler.reconcile(KEY);
      sinon.assert.notCalled(targetCore.deleteNamespacedPod);
      // Not ready for another reason (the API answers): deleted as usual.
      registry.setHealth(target.key, { ready: false, reason: 'ClusterSummaryMissing', message: 'no summary', sinceMs: T0 });
      await reconciler.reconcile(KEY);
      sinon.assert.calledOnce(targetCore.deleteNamespacedPod);
    });

    it('keeps the delegate when the proxy exists but the cache has not seen it yet', async () => {
      const p = proxy();
      const { reconciler, source, targetCore } = setup({ proxies: [], delegates: [delegateOf(p)] });
      source.readNamespacedPod.resolves(p);
      await reconciler.reconcile(KEY);
      sinon.assert.notCalled(targetCore.deleteNamespacedPod);
    });
  });

  describe('the delegate disappears', () => {
    const running = {
      phase: 'Running',
      startTime: new Date(T0),
      containerStatuses: [{ name: 'web', image: 'nginx', imageID: '', ready: true, restartCount: 0, started: true, state: { running: { startedAt: new Date(T0) } } }],
      conditions: [{ type: 'Ready', status: 'True' }],
    };

    it('deletes a controlled proxy (its owner replaces it) and does not recreate the delegate', async () => {
      const { reconciler, source, targetCore, events } = setup({ proxies: [proxy({ owner: true, status: running })] });
      await reconciler.reconcile(KEY);
      sinon.assert.notCalled(targetCore.createNamespacedPod);
      sinon.assert.calledOnce(source.deleteNamespacedPod);
      expect(source.deleteNamespacedPod.firstCall.args[0]).to.deep.include({ name: 'web-0', namespace: NS, body: { preconditions: { uid: UID } } });
      expect(events.map((e) => [e.type, e.reason])).to.deep.equal([['Warning', 'DelegateDeleted']]);
      expect(events[0]!.message).to.contain('ReplicaSet');
    });

    it('marks a bare proxy Failed, with terminated containers, from the proxy read (the cache keeps no container statuses)', async () => {
      const live = proxy({ status: running });
      const { reconciler, source, targetCore, events } = setup({ proxies: [proxyFields(structuredClone(live))] });
      source.readNamespacedPod.resolves(live);
      await reconciler.reconcile(KEY);
      expect(source.readNamespacedPod.firstCall.args[0]).to.deep.equal({ name: 'web-0', namespace: NS });
      sinon.assert.notCalled(targetCore.createNamespacedPod);
      sinon.assert.notCalled(source.deleteNamespacedPod);
      sinon.assert.calledOnce(source.replaceNamespacedPodStatus);
      const status = source.replaceNamespacedPodStatus.firstCall.args[0].body.status!;
      expect(status).to.include({ phase: 'Failed', reason: 'DelegateDeleted' });
      expect(status.message).to.contain('t1');
      expect(status.containerStatuses![0]!.state?.terminated).to.include({ reason: 'DelegateDeleted', exitCode: 137 });
      expect(status.containerStatuses![0]!.state?.terminated?.finishedAt).to.deep.equal(new Date(T0));
      expect(status.conditions).to.deep.equal([{ type: 'Ready', status: 'False', reason: 'DelegateDeleted', lastTransitionTime: new Date(T0) }]);
      expect(events.map((e) => [e.type, e.reason])).to.deep.equal([['Warning', 'DelegateDeleted']]);
    });

    it('leaves a finished proxy alone', async () => {
      const { reconciler, source, targetCore } = setup({ proxies: [proxy({ owner: true, status: { phase: 'Succeeded', startTime: new Date(T0) } })] });
      await reconciler.reconcile(KEY);
      sinon.assert.notCalled(targetCore.createNamespacedPod);
      sinon.assert.notCalled(source.deleteNamespacedPod);
      sinon.assert.notCalled(source.replaceNamespacedPodStatus);
    });
  });
});
