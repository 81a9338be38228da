import { expect } from 'chai';
import sinon from 'sinon';
import type { V1ConfigMap, V1Namespace, V1Pod, V1Secret } from '@kubernetes/client-node';
import { ClusterRegistry } from '../../../../provider/clusters/cluster-registry.js';
import type { TargetClient } from '../../../../provider/clusters/target-client.js';
import { FakeClock } from '../../../../provider/core/clock.js';
import { CopyConflictError, NotDelegatedError, TerminalError } from '../../../../provider/core/errors.js';
import { PARENT_CLUSTER_NAME_LABEL, PARENT_NAME_ANNOTATION, PARENT_NAMESPACE_ANNOTATION, PARENT_UID_LABEL, PROXY_FINALIZER, SOURCE_POD_MANIFEST_ANNOTATION } from '../../../../provider/core/keys.js';
import { buildConfigMapCopy, buildSecretCopy } from '../../../../provider/model/follow.js';
import { copyName } from '../../../../provider/model/names.js';
import { DelegationReconciler } from '../../../../provider/reconcilers/delegation.js';
import type { EventSink } from '../../../../provider/core/event-sink.js';
import { FollowReconciler } from '../../../../provider/reconcilers/follow.js';
import { MapCache } from './map-cache.js';
import { apiError, alreadyExists, notFound } from '../../../support/api-errors.js';
import { coreStub, emptyCluster, type CoreStub } from '../../../support/stubs.js';
import { fakeTarget } from '../../../support/targets.js';
import { proxy as baseProxy } from '../../../support/pods.js';

const CLUSTER = 'c1';
const NS = 'apps';

/** This source's copy name for `name`. */
const copy = (name: string) => copyName(name, CLUSTER);

/** A target whose API behaves like an empty cluster for the copies and the delegate: reads miss, writes succeed. */
function copyTarget(name: string, o: { self?: boolean; namespace?: string } = {}): { target: TargetClient; core: CoreStub } {
  const core = emptyCluster(coreStub(), ['ConfigMap', 'Secret']);
  core.readNamespacedPod.rejects(notFound());
  core.createNamespacedPod.callsFake(async ({ body }) => body);
  // Named plain `name` even as a Target: the events' expected texts say so.
  return fakeTarget(name, { ...o, core, displayName: name });
}

const nodeOf = (t: string) => `admiralty-cluster-${t}`;

function proxy(name: string, nodeName: string | undefined, uses: { configMap?: string; secret?: string }): V1Pod {
  const manifest: V1Pod = {
    metadata: { name, namespace: NS },
    spec: {
      containers: [
        {
          name: 'app',
          image: 'busybox',
          env: uses.secret ? [{ name: 'PASSWORD', valueFrom: { secretKeyRef: { name: uses.secret, key: 'password' } } }] : undefined,
          envFrom: uses.configMap ? [{ configMapRef: { name: uses.configMap } }] : undefined,
        },
      ],
    },
  };
  return baseProxy({
    name,
    namespace: NS,
    uid: `${name}-uid`,
    finalizers: [PROXY_FINALIZER],
    elected: { sourcePod: manifest },
    // A real proxy keeps the containers of its manifest (the webhook changes scheduling fields only).
    spec: { ...manifest.spec!, nodeName },
    phase: 'Pending',
  });
}

const configMap = (name: string, data: Record<string, string> = { mode: 'prod' }): V1ConfigMap => ({ metadata: { name, namespace: NS, uid: `${name}-uid`, resourceVersion: '1' }, data });
const secret = (name: string): V1Secret => ({ metadata: { name, namespace: NS, uid: `${name}-uid`, resourceVersion: '1' }, type: 'Opaque', data: { password: 'czNjcjN0' } });

/** Our copy as the target would return it (`name`: an earlier version's, under the original's name). */
function copyOf<T extends V1ConfigMap | V1Secret>(src: T, over: Partial<T> = {}, name = copy(src.metadata!.name!)): T {
  const opts = { sourceClusterName: CLUSTER, name };
  const built = ('type' in src ? buildSecretCopy(src as V1Secret, opts) : buildConfigMapCopy(src as V1ConfigMap, opts)) as T;
  return { ...built, ...over, metadata: { ...built.metadata, uid: `copy-of-${src.metadata!.name}`, resourceVersion: '7', ...over.metadata } };
}

/** The copy an earlier version made: the original's own name. */
const earlierCopyOf = <T extends V1ConfigMap | V1Secret>(src: T, over: Partial<T> = {}): T => ({
  ...copyOf(src, over, src.metadata!.name!),
  metadata: { ...copyOf(src, over, src.metadata!.name!).metadata, uid: `earlier-copy-of-${src.metadata!.name}` },
});

/** One of our delegates in a target, made by an earlier version: it names the original `configMap`. */
const earlierDelegate = (name: string, configMap: string, cluster = CLUSTER): V1Pod => ({
  metadata: { name, namespace: NS, labels: { [PARENT_UID_LABEL]: `${name}-proxy-uid`, [PARENT_CLUSTER_NAME_LABEL]: cluster } },
  spec: { containers: [{ name: 'app', envFrom: [{ configMapRef: { name: configMap } }] }] },
});

function setup(
  opts: {
    proxies?: V1Pod[];
    configMaps?: V1ConfigMap[];
    secrets?: V1Secret[];
    t1ConfigMaps?: V1ConfigMap[];
    t1Secrets?: V1Secret[];
    t1Delegates?: V1Pod[] | 'not cached';
    t2ConfigMaps?: V1ConfigMap[];
    t2Namespace?: string;
    namespaces?: V1Namespace[];
    placing?: { proxy: V1Pod; targetKey: string }[];
  } = {},
) {
  // The originals live in the source's API, read by name (the reconciler caches none of them).
  const source = coreStub();
  const originals = { configMaps: new MapCache<V1ConfigMap>(...(opts.configMaps ?? [])), secrets: new MapCache<V1Secret>(...(opts.secrets ?? [])) };
  source.readNamespacedConfigMap.callsFake(async ({ name, namespace }) => originals.configMaps.get(name, namespace) ?? Promise.reject(notFound()));
  source.readNamespacedSecret.callsFake(async ({ name, namespace }) => originals.secrets.get(name, namespace) ?? Promise.reject(notFound()));
  const t1 = copyTarget('t1');
  const t2 = copyTarget('t2', { namespace: opts.t2Namespace });
  const self = copyTarget('home', { self: true });
  const registry = new ClusterRegistry();
  registry.set(t1.target, nodeOf('t1'));
  registry.set(t2.target, nodeOf('t2'));
  registry.set(self.target, nodeOf('home'));
  const caches = {
    t1: {
      configMaps: new MapCache<V1ConfigMap>(...(opts.t1ConfigMaps ?? [])),
      secrets: new MapCache<V1Secret>(...(opts.t1Secrets ?? [])),
      delegates: opts.t1Delegates === 'not cached' ? undefined : new MapCache<V1Pod>(...(opts.t1Delegates ?? [])),
    },
    t2: { configMaps: new MapCache<V1ConfigMap>(...(opts.t2ConfigMaps ?? [])), secrets: new MapCache<V1Secret>(), delegates: new MapCache<V1Pod>() },
    home: { configMaps: new MapCache<V1ConfigMap>(), secrets: new MapCache<V1Secret>(), delegates: new MapCache<V1Pod>() },
  };
  const byKey = (key: string) => caches[key.split('/')[1] as keyof typeof caches];
  const events: { type: string; reason: string; message: string }[] = [];
  const sink: EventSink = { record: (_obj, type, reason, message) => events.push({ type, reason, message }) };
  const proxies = new MapCache<V1Pod>(...(opts.proxies ?? []));
  const follow = new FollowReconciler({
    sourceCore: source,
    proxies,
    namespaces: new MapCache<V1Namespace>(...(opts.namespaces ?? [{ metadata: { name: NS, labels: { 'multicluster-scheduler': 'enabled' } } }])),
    registry,
    sourceClusterName: CLUSTER,
    events: sink,
    targetConfigMaps: (key) => byKey(key)?.configMaps,
    targetSecrets: (key) => byKey(key)?.secrets,
    delegates: (key) => byKey(key)?.delegates,
    placing: (ns) => (opts.placing ?? []).filter((p) => p.proxy.metadata?.namespace === ns),
  });
  return { follow, source, originals, t1, t2, self, registry, proxies, events };
}

describe('FollowReconciler', () => {
  afterEach(() => sinon.restore());

  describe('key mappers', () => {
    it('maps copies and proxies to configmap/<ns>/<name> and secret/<ns>/<name>', () => {
      expect(FollowReconciler.keysOfCopy('secret', copyOf(secret('pw')))).to.deep.equal([`secret/${NS}/pw`]);
      expect(FollowReconciler.keysOfCopy('configmap', configMap('not-a-copy'))).to.deep.equal([]);
      // A copy lives in its original's namespace: annotations that name another are the target's word.
      const forged = copyOf(secret('pw'));
      forged.metadata!.annotations = { ...forged.metadata!.annotations, [PARENT_NAMESPACE_ANNOTATION]: 'kube-system' };
      expect(FollowReconciler.keysOfCopy('secret', forged)).to.deep.equal([]);
      expect(FollowReconciler.keysOfProxy(proxy('p', nodeOf('t1'), { configMap: 'conf', secret: 'pw' }))).to.deep.equal([`configmap/${NS}/conf`, `secret/${NS}/pw`]);
      expect(FollowReconciler.keysOfProxy({ metadata: { name: 'x', namespace: NS } })).to.deep.equal([]);
    });

    it('maps a proxy from its own spec, without reading the saved manifest (its scheduling fields reference nothing)', () => {
      const p = proxy('p', nodeOf('t1'), { configMap: 'conf', secret: 'pw' });
      p.metadata!.annotations![SOURCE_POD_MANIFEST_ANNOTATION] = 'not a manifest';
      expect(FollowReconciler.keysOfProxy(p)).to.deep.equal([`configmap/${NS}/conf`, `secret/${NS}/pw`]);
    });
  });

  describe('ensureCopies', () => {
    it('creates the copies before the delegation reconciler creates the delegate', async () => {
      const p = proxy('p', nodeOf('t1'), { configMap: 'conf', secret: 'pw' });
      const { follow, source, t1, registry, events } = setup({ proxies: [p], configMaps: [configMap('conf')], secrets: [] });
      source.readNamespacedSecret.resolves(secret('pw'));
      const delegation = new DelegationReconciler({
        sourceCore: source,
        proxies: new MapCache<V1Pod>(p),
        namespaces: new MapCache<V1Namespace>({ metadata: { name: NS, labels: { 'multicluster-scheduler': 'enabled' } } }),
        delegates: () => new MapCache<V1Pod>(),
        registry,
        sourceClusterName: CLUSTER,
        events: { record: () => {} },
        clock: new FakeClock(0),
        follow,
      });
      await delegation.reconcile(`${NS}/p`);
      sinon.assert.calledOnce(t1.core.createNamespacedConfigMap);
      sinon.assert.calledOnce(t1.core.createNamespacedSecret);
      sinon.assert.calledOnce(t1.core.createNamespacedPod);
      sinon.assert.callOrder(t1.core.createNamespacedConfigMap, t1.core.createNamespacedSecret, t1.core.createNamespacedPod);
      const cm = t1.core.createNamespacedConfigMap.firstCall.args[0].body;
      expect(cm.metadata?.name).to.equal(copy('conf'));
      expect(t1.core.createNamespacedSecret.firstCall.args[0].body.metadata?.name).to.equal(copy('pw'));
      // The delegate reads this source's copies, under their names.
      const delegate = t1.core.createNamespacedPod.firstCall.args[0].body;
      expect(delegate.spec!.containers[0]!.envFrom).to.deep.equal([{ configMapRef: { name: copy('conf') } }]);
      expect(delegate.spec!.containers[0]!.env![0]!.valueFrom!.secretKeyRef).to.deep.equal({ name: copy('pw'), key: 'password' });
      expect(cm.metadata?.labels).to.include({ [PARENT_UID_LABEL]: 'conf-uid', [PARENT_CLUSTER_NAME_LABEL]: CLUSTER });
      expect(cm.metadata?.annotations).to.include({ [PARENT_NAME_ANNOTATION]: 'conf', [PARENT_NAMESPACE_ANNOTATION]: NS });
      expect(cm.data).to.deep.equal({ mode: 'prod' });
      expect(t1.core.createNamespacedSecret.firstCall.args[0].body.data).to.deep.equal({ password: 'czNjcjN0' });
      expect(events).to.deep.equal([]);
    });

    it("returns the names of this source's copies, and leaves a same-name object of the target, or of another source, alone", async () => {
      const p = proxy('p', nodeOf('t1'), { configMap: 'conf', secret: 'pw' });
      const theirs: V1ConfigMap = { metadata: { name: 'conf', namespace: NS, uid: 'theirs', labels: { team: 'x' } }, data: { mode: 'dev' } };
      const otherSource = {
        ...copyOf(configMap('conf', { mode: 'c9' })),
        metadata: { ...copyOf(configMap('conf')).metadata, name: copyName('conf', 'c9'), labels: { [PARENT_UID_LABEL]: 'x', [PARENT_CLUSTER_NAME_LABEL]: 'c9' } },
      };
      const { follow, t1, events } = setup({ proxies: [p], configMaps: [configMap('conf')], secrets: [secret('pw')], t1ConfigMaps: [theirs, otherSource] });
      const names = await follow.ensureCopies(p, t1.target);
      expect(names).to.deep.equal({ configmap: new Map([['conf', copy('conf')]]), secret: new Map([['pw', copy('pw')]]) });
      sinon.assert.calledOnce(t1.core.createNamespacedConfigMap);
      expect(t1.core.createNamespacedConfigMap.firstCall.args[0].body.metadata?.name).to.equal(copy('conf'));
      sinon.assert.notCalled(t1.core.replaceNamespacedConfigMap);
      sinon.assert.notCalled(t1.core.deleteNamespacedConfigMap);
      expect(events).to.deep.equal([]);
    });

    const squatters: [string, V1ConfigMap][] = [
      ['an object that is not ours', { metadata: { name: copy('conf'), namespace: NS, uid: 'theirs' }, data: { mode: 'planted' } }],
      ['a copy of ours of another object', { ...copyOf(configMap('other')), metadata: { ...copyOf(configMap('other')).metadata, name: copy('conf') } }],
    ];
    for (const [why, squatter] of squatters) {
      it(`refuses a copy name taken by ${why}, never touching it, and says so on the proxy`, async () => {
        const p = proxy('p', nodeOf('t1'), { configMap: 'conf' });
        const { follow, t1, events } = setup({ proxies: [p], configMaps: [configMap('conf')], t1ConfigMaps: [squatter] });
        const err = await follow.ensureCopies(p, t1.target).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err).to.be.instanceOf(CopyConflictError);
        sinon.assert.notCalled(t1.core.createNamespacedConfigMap);
        sinon.assert.notCalled(t1.core.replaceNamespacedConfigMap);
        sinon.assert.notCalled(t1.core.deleteNamespacedConfigMap);
        expect(events.map((e) => [e.type, e.reason])).to.deep.equal([['Warning', 'CopyConflict']]);
        expect(events[0]!.message).to.contain(copy('conf'));
      });
    }

    it('refuses to send a ServiceAccount token of this cluster anywhere: CopyRefused, with a Warning on the proxy, and no copy', async () => {
      const token: V1Secret = { ...secret('ci-admin-token'), type: 'kubernetes.io/service-account-token', data: { token: 'ZXlKLi4u' } };
      const p = proxy('p', nodeOf('t1'), { secret: 'ci-admin-token' });
      const { follow, t1, events } = setup({ proxies: [p], secrets: [token] });
      const err = await follow.ensureCopies(p, t1.target).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(NotDelegatedError).and.include({ reason: 'CopyRefused' });
      sinon.assert.notCalled(t1.core.createNamespacedSecret);
      sinon.assert.notCalled(t1.core.replaceNamespacedSecret);
      expect(events.map((e) => [e.type, e.reason])).to.deep.equal([['Warning', 'CopyRefused']]);
      expect(events[0]!.message).to.contain(`secret ${NS}/ci-admin-token is of type kubernetes.io/service-account-token`);

      // A copy an earlier version made (as Opaque) goes, though a bound proxy still names it.
      const made = { ...copyOf(secret('ci-admin-token')), metadata: { ...copyOf(secret('ci-admin-token')).metadata, uid: 'old-copy' } };
      const again = setup({ proxies: [p], secrets: [token], t1Secrets: [made] });
      await again.follow.reconcile(`secret/${NS}/ci-admin-token`);
      sinon.assert.notCalled(again.t1.core.createNamespacedSecret);
      sinon.assert.notCalled(again.t1.core.replaceNamespacedSecret);
      sinon.assert.calledOnce(again.t1.core.deleteNamespacedSecret);
      expect(again.t1.core.deleteNamespacedSecret.firstCall.args[0]).to.deep.include({ body: { preconditions: { uid: 'old-copy' } } });
    });

    it("turns a target's refusal of a copy into the pod's reason, with a Warning on the proxy: no Source there for this source", async () => {
      const p = proxy('p', nodeOf('t2'), { secret: 'pw' });
      const { follow, t2, events } = setup({ proxies: [p], secrets: [secret('pw')], t2Namespace: NS });
      // No rights in that namespace: even the read of the copy is refused.
      t2.core.readNamespacedSecret.rejects(apiError(403, 'Forbidden'));
      const createSelfSubjectAccessReview = sinon.stub().resolves({ status: { allowed: false } });
      Object.assign(t2.target, { authorization: { createSelfSubjectAccessReview }, authentication: { createSelfSubjectReview: sinon.stub().resolves({ status: { userInfo: { username: 'c1' } } }) } });
      const err = await follow.ensureCopies(p, t2.target).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(NotDelegatedError).and.include({ reason: 'SourceNotAuthorized' });
      expect(createSelfSubjectAccessReview.firstCall.args[0].body.spec.resourceAttributes).to.deep.equal({ verb: 'create', resource: 'secrets', namespace: NS });
      sinon.assert.notCalled(t2.core.createNamespacedSecret);
      expect(events).to.deep.equal([
        {
          type: 'Warning',
          reason: 'SourceNotAuthorized',
          message: `the cluster of Target t2 does not authorize this source (user "c1") to create secrets in namespace ${NS}: create a Source in namespace ${NS} of that cluster with spec.userName "c1"`,
        },
      ]);
    });

    it('finds an object the copies cache has not seen with a direct read, and one made between its read and its create', async () => {
      const p = proxy('p', nodeOf('t1'), { configMap: 'conf' });
      const planted: V1ConfigMap = { metadata: { name: copy('conf'), namespace: NS, uid: 'theirs' } };
      const read = setup({ proxies: [p], configMaps: [configMap('conf')] });
      read.t1.core.readNamespacedConfigMap.resolves(planted);
      expect(
        await read.follow.ensureCopies(p, read.t1.target).then(
          () => undefined,
          (e: unknown) => e,
        ),
      ).to.be.instanceOf(CopyConflictError);
      sinon.assert.notCalled(read.t1.core.createNamespacedConfigMap);
      // Made after our read: the create says AlreadyExists, and a second read says whose it is.
      for (const [made, conflict] of [
        [planted, true],
        [copyOf(configMap('conf')), false],
      ] as const) {
        const race = setup({ proxies: [p], configMaps: [configMap('conf')] });
        race.t1.core.readNamespacedConfigMap.onFirstCall().rejects(notFound()).onSecondCall().resolves(made);
        race.t1.core.createNamespacedConfigMap.rejects(alreadyExists());
        const err = await race.follow.ensureCopies(p, race.t1.target).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err instanceof CopyConflictError, made.metadata!.uid).to.equal(conflict);
      }
    });

    it("maps nothing for an original that does not exist here, so the delegate names the target's own, and says so", async () => {
      const p = proxy('p', nodeOf('t1'), { configMap: 'conf', secret: 'cluster-local' });
      const { follow, t1, events } = setup({ proxies: [p], configMaps: [configMap('conf')] });
      const names = await follow.ensureCopies(p, t1.target);
      expect(names).to.deep.equal({ configmap: new Map([['conf', copy('conf')]]), secret: new Map() });
      sinon.assert.notCalled(t1.core.createNamespacedSecret);
      expect(events.map((e) => [e.type, e.reason])).to.deep.equal([['Normal', 'CopySourceMissing']]);
    });

    const othersCopies: [string, V1ConfigMap][] = [
      [
        'a copy made for another source',
        {
          metadata: {
            name: copyName('conf', 'c9'),
            namespace: NS,
            uid: 'c9-copy',
            labels: { [PARENT_UID_LABEL]: 'x', [PARENT_CLUSTER_NAME_LABEL]: 'c9' },
            annotations: { [PARENT_NAME_ANNOTATION]: 'conf' },
          },
          data: { mode: 'c9' },
        },
      ],
      [
        'an Admiralty copy of a source with no cluster name',
        { metadata: { name: copyName('conf', 'c9'), namespace: NS, uid: 'adm', labels: { [PARENT_UID_LABEL]: 'x', [PARENT_CLUSTER_NAME_LABEL]: '' } } },
      ],
      ['an older Admiralty copy (parent-uid as an annotation)', { metadata: { name: copyName('conf', 'c9'), namespace: NS, uid: 'old', annotations: { [PARENT_UID_LABEL]: 'x' } } }],
    ];
    for (const [why, theirs] of othersCopies) {
      it(`refuses a reference to an object absent here that names ${why} in the target: CopyConflict, a Warning naming it, no copy`, async () => {
        const p = proxy('p', nodeOf('t1'), { configMap: copyName('conf', 'c9') });
        const { follow, t1, events } = setup({ proxies: [p] });
        t1.core.readNamespacedConfigMap.resolves(theirs);
        const err = await follow.ensureCopies(p, t1.target).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err).to.be.instanceOf(CopyConflictError).and.include({ reason: 'CopyConflict' });
        sinon.assert.notCalled(t1.core.createNamespacedConfigMap);
        expect(events.map((e) => [e.type, e.reason])).to.deep.equal([['Warning', 'CopyConflict']]);
        expect(events[0]!.message)
          .to.contain(`configmap ${NS}/${copyName('conf', 'c9')}`)
          .and.contain('belongs to another source')
          .and.not.contain('c9"');
      });
    }

    it("names as it is an object absent here that the target owns, or that is this source's, with CopySourceMissing", async () => {
      const own: V1ConfigMap = { metadata: { name: 'local', namespace: NS, uid: 'own', labels: { team: 'x' } } };
      const ours = copyOf(configMap('conf'));
      const p = proxy('p', nodeOf('t1'), { configMap: 'local', secret: 'pull' });
      const withOurs = proxy('q', nodeOf('t1'), { configMap: copy('conf') });
      const { follow, t1, events } = setup({ proxies: [p, withOurs], t1ConfigMaps: [ours] });
      t1.core.readNamespacedConfigMap.resolves(own);
      expect(await follow.ensureCopies(p, t1.target)).to.deep.equal({ configmap: new Map(), secret: new Map() });
      t1.core.readNamespacedConfigMap.resetHistory();
      expect(await follow.ensureCopies(withOurs, t1.target)).to.deep.equal({ configmap: new Map(), secret: new Map() });
      // This source's copies are in the copies cache: no read.
      sinon.assert.notCalled(t1.core.readNamespacedConfigMap);
      expect(events.map((e) => [e.type, e.reason])).to.deep.equal([
        ['Normal', 'CopySourceMissing'],
        ['Normal', 'CopySourceMissing'],
        ['Normal', 'CopySourceMissing'],
      ]);
    });

    it('updates an outdated copy of ours, with its resourceVersion', async () => {
      const p = proxy('p', nodeOf('t1'), { configMap: 'conf' });
      const { follow, t1 } = setup({ proxies: [p], configMaps: [configMap('conf', { mode: 'new' })], t1ConfigMaps: [copyOf(configMap('conf', { mode: 'old' }))] });
      await follow.ensureCopies(p, t1.target);
      sinon.assert.calledOnce(t1.core.replaceNamespacedConfigMap);
      const { body } = t1.core.replaceNamespacedConfigMap.firstCall.args[0];
      expect(body.data).to.deep.equal({ mode: 'new' });
      expect(body.metadata?.resourceVersion).to.equal('7');
    });

    it('recreates an immutable copy whose content changed: delete (UID precondition), then create, once', async () => {
      const p = proxy('p', nodeOf('t1'), { configMap: 'conf' });
      const src = { ...configMap('conf', { mode: 'new' }), immutable: true };
      const old = copyOf({ ...configMap('conf', { mode: 'old' }), immutable: true });
      const { follow, t1 } = setup({ proxies: [p], configMaps: [src], t1ConfigMaps: [old] });
      await follow.ensureCopies(p, t1.target);
      sinon.assert.calledOnce(t1.core.deleteNamespacedConfigMap);
      expect(t1.core.deleteNamespacedConfigMap.firstCall.args[0]).to.deep.include({ name: copy('conf'), namespace: NS, body: { preconditions: { uid: 'copy-of-conf' } } });
      sinon.assert.calledOnce(t1.core.createNamespacedConfigMap);
      sinon.assert.callOrder(t1.core.deleteNamespacedConfigMap, t1.core.createNamespacedConfigMap);
      sinon.assert.notCalled(t1.core.replaceNamespacedConfigMap);
    });

    it('leaves an up-to-date copy alone, skips missing sources and never copies into a self target', async () => {
      const p = proxy('p', nodeOf('t1'), { configMap: 'conf', secret: 'missing' });
      const { follow, t1, self } = setup({ proxies: [p], configMaps: [configMap('conf')], t1ConfigMaps: [copyOf(configMap('conf'))] });
      await follow.ensureCopies(p, t1.target);
      await follow.ensureCopies(p, self.target);
      for (const core of [t1.core, self.core]) {
        sinon.assert.notCalled(core.createNamespacedConfigMap);
        sinon.assert.notCalled(core.replaceNamespacedConfigMap);
        sinon.assert.notCalled(core.createNamespacedSecret);
      }
    });
  });

  describe('reconcile', () => {
    it('deletes copies no bound proxy references any more, with a UID precondition, and keeps the used ones', async () => {
      const conf = configMap('conf');
      // p1 on t1 uses conf; nothing on t2 does: t2's copy goes, t1's stays.
      const { follow, t1, t2 } = setup({
        proxies: [proxy('p1', nodeOf('t1'), { configMap: 'conf' }), proxy('p2', nodeOf('t2'), {})],
        configMaps: [conf],
        t1ConfigMaps: [copyOf(conf)],
        t2ConfigMaps: [copyOf(conf)],
      });
      await follow.reconcile(`configmap/${NS}/conf`);
      sinon.assert.notCalled(t1.core.deleteNamespacedConfigMap);
      sinon.assert.notCalled(t1.core.replaceNamespacedConfigMap);
      sinon.assert.calledOnce(t2.core.deleteNamespacedConfigMap);
      expect(t2.core.deleteNamespacedConfigMap.firstCall.args[0]).to.deep.include({ name: copy('conf'), namespace: NS, body: { preconditions: { uid: 'copy-of-conf' } } });
    });

    it('keeps the copies of a proxy the extender is placing on a target, before it is bound there', async () => {
      const conf = configMap('conf');
      const placing = proxy('p1', undefined, { configMap: 'conf' });
      const { follow, t1, t2 } = setup({
        proxies: [placing],
        configMaps: [conf],
        t1ConfigMaps: [copyOf(conf)],
        t2ConfigMaps: [copyOf(conf)],
        placing: [{ proxy: placing, targetKey: 'ClusterTarget/t1' }],
      });
      await follow.reconcile(`configmap/${NS}/conf`);
      sinon.assert.notCalled(t1.core.deleteNamespacedConfigMap);
      // Not bound yet: another replica's extender may be placing it on t2.
      sinon.assert.notCalled(t2.core.deleteNamespacedConfigMap);
    });

    it("keeps existing copies of a proxy not bound yet in every target, making none, as another replica's extender may be placing it; collects them once it is bound", async () => {
      const conf = configMap('conf');
      const pending = proxy('p1', undefined, { configMap: 'conf' });
      const before = setup({ proxies: [pending], configMaps: [conf], t1ConfigMaps: [copyOf(conf)] });
      expect(await before.follow.reconcile(`configmap/${NS}/conf`)).to.have.property('requeueAfterMs');
      sinon.assert.notCalled(before.t1.core.deleteNamespacedConfigMap);
      sinon.assert.notCalled(before.t2.core.createNamespacedConfigMap);
      // Bound to t2: the copy in t1 goes, one in t2 is made.
      const after = setup({ proxies: [proxy('p1', nodeOf('t2'), { configMap: 'conf' })], configMaps: [conf], t1ConfigMaps: [copyOf(conf)] });
      await after.follow.reconcile(`configmap/${NS}/conf`);
      sinon.assert.calledOnce(after.t1.core.deleteNamespacedConfigMap);
      sinon.assert.calledOnce(after.t2.core.createNamespacedConfigMap);
    });

    it('deletes every copy of a source object that is gone, but not objects of others', async () => {
      const conf = configMap('conf');
      const theirs: V1ConfigMap = { metadata: { name: 'conf', namespace: NS, uid: 'theirs', labels: { [PARENT_UID_LABEL]: 'x', [PARENT_CLUSTER_NAME_LABEL]: 'c9' } } };
      const { follow, t1, t2 } = setup({ proxies: [proxy('p1', nodeOf('t1'), { configMap: 'conf' })], t1ConfigMaps: [copyOf(conf)], t2ConfigMaps: [theirs] });
      await follow.reconcile(`configmap/${NS}/conf`);
      sinon.assert.calledOnce(t1.core.deleteNamespacedConfigMap);
      sinon.assert.notCalled(t2.core.deleteNamespacedConfigMap);
    });

    it('keeps a referenced copy in sync and creates it where a bound proxy needs it', async () => {
      const pw = secret('pw');
      const stale = copyOf(pw, { data: { password: 'b2xk' } });
      const { follow, t1, t2 } = setup({
        proxies: [proxy('p1', nodeOf('t1'), { secret: 'pw' }), proxy('p2', nodeOf('t2'), { secret: 'pw' }), proxy('pending', undefined, { secret: 'pw' })],
        secrets: [pw],
        t1Secrets: [stale],
      });
      await follow.reconcile(`secret/${NS}/pw`);
      sinon.assert.calledOnce(t1.core.replaceNamespacedSecret);
      expect(t1.core.replaceNamespacedSecret.firstCall.args[0].body.data).to.deep.equal({ password: 'czNjcjN0' });
      sinon.assert.calledOnce(t2.core.createNamespacedSecret);
    });

    it("makes no copy for a proxy bound to another namespace's Target, nor in a namespace not enabled", async () => {
      const pw = secret('pw');
      for (const opts of [{ t2Namespace: 'other' }, { namespaces: [] }]) {
        const { follow, t2 } = setup({ proxies: [proxy('p2', nodeOf('t2'), { secret: 'pw' })], secrets: [pw], ...opts });
        await follow.reconcile(`secret/${NS}/pw`);
        sinon.assert.notCalled(t2.core.createNamespacedSecret);
      }
    });

    it('reads the original by name on every pass and comes back while a copy is in use, so changes arrive without a watch on Secrets', async () => {
      const pw = secret('pw');
      const { follow, originals, source, t1 } = setup({ proxies: [proxy('p1', nodeOf('t1'), { secret: 'pw' })], secrets: [pw], t1Secrets: [copyOf(pw)] });
      const first = await follow.reconcile(`secret/${NS}/pw`);
      expect(first, 'a resync is scheduled while the copy is used').to.deep.equal({ requeueAfterMs: 60_000 });
      sinon.assert.notCalled(t1.core.replaceNamespacedSecret);
      // The original changes; no event tells the reconciler, the resync finds it.
      originals.secrets.put({ ...pw, data: { password: 'bmV3' }, metadata: { ...pw.metadata, resourceVersion: '2' } });
      await follow.reconcile(`secret/${NS}/pw`);
      sinon.assert.calledTwice(source.readNamespacedSecret);
      sinon.assert.calledOnce(t1.core.replaceNamespacedSecret);
      expect(t1.core.replaceNamespacedSecret.firstCall.args[0].body.data).to.deep.equal({ password: 'bmV3' });
    });

    describe('a target in an outage', () => {
      const unreachable = { ready: false, reason: 'TargetUnreachable', message: 'connect ETIMEDOUT', sinceMs: 0 };

      it('is passed over (no call there) while the others are kept right; the key comes back once a probe finds it reachable', async () => {
        const pw = secret('pw');
        const { follow, registry, t1, t2 } = setup({ proxies: [proxy('p1', nodeOf('t1'), { secret: 'pw' }), proxy('p2', nodeOf('t2'), { secret: 'pw' })], secrets: [pw] });
        registry.setHealth(t1.target.key, unreachable);
        expect(await follow.reconcile(`secret/${NS}/pw`)).to.deep.equal({ requeueAfterMs: 60_000 });
        // Without the outage, t1's copy (not in its cache) would be read there, then created.
        sinon.assert.notCalled(t1.core.readNamespacedSecret);
        sinon.assert.notCalled(t1.core.createNamespacedSecret);
        sinon.assert.calledOnce(t2.core.createNamespacedSecret);
        expect(follow.passes.wake(t1.target.key)).to.deep.equal([]);
        registry.setHealth(t1.target.key, { ready: true, reason: 'Ready', message: '', sinceMs: 1 });
        expect(follow.passes.wake(t1.target.key)).to.deep.equal([`secret/${NS}/pw`]);
        expect(follow.passes.wake(t1.target.key)).to.deep.equal([]);
        await follow.reconcile(`secret/${NS}/pw`);
        sinon.assert.calledOnce(t1.core.createNamespacedSecret);
      });

      it('keeps its copies of an original that is gone until it is back; a failing target does not keep the next from its pass', async () => {
        const conf = configMap('conf');
        const { follow, registry, t1, t2, events } = setup({ t1ConfigMaps: [copyOf(conf)], t2ConfigMaps: [copyOf(conf)] });
        registry.setHealth(t1.target.key, unreachable);
        await follow.reconcile(`configmap/${NS}/conf`);
        sinon.assert.notCalled(t1.core.deleteNamespacedConfigMap);
        sinon.assert.calledOnce(t2.core.deleteNamespacedConfigMap);
        expect(follow.passes.drop(t1.target.key)).to.deep.equal([`configmap/${NS}/conf`]);

        registry.setHealth(t1.target.key, { ready: true, reason: 'Ready', message: '', sinceMs: 1 });
        t1.core.deleteNamespacedConfigMap.rejects(apiError(500, 'InternalError'));
        t2.core.deleteNamespacedConfigMap.resetHistory();
        let thrown: unknown;
        await follow.reconcile(`configmap/${NS}/conf`).catch((err) => (thrown = err));
        expect(String((thrown as Error)?.message)).to.match(/deleting the copy of configmap/);
        sinon.assert.calledOnce(t2.core.deleteNamespacedConfigMap);
        expect(events).to.deep.equal([]);
      });
    });

    describe("an earlier version's copy, under the original's own name", () => {
      const conf = configMap('conf', { mode: 'new' });
      const earlier = earlierCopyOf(configMap('conf', { mode: 'old' }));

      it('is kept, in sync, while a delegate of ours there names it, beside the per-source copy new delegates use', async () => {
        const { follow, t1 } = setup({
          proxies: [proxy('p1', nodeOf('t1'), { configMap: 'conf' })],
          configMaps: [conf],
          t1ConfigMaps: [earlier],
          t1Delegates: [earlierDelegate('old-delegate', 'conf')],
        });
        expect(await follow.reconcile(`configmap/${NS}/conf`)).to.deep.equal({ requeueAfterMs: 60_000 });
        sinon.assert.notCalled(t1.core.deleteNamespacedConfigMap);
        sinon.assert.calledOnce(t1.core.replaceNamespacedConfigMap);
        expect(t1.core.replaceNamespacedConfigMap.firstCall.args[0]).to.deep.include({ name: 'conf' });
        expect(t1.core.replaceNamespacedConfigMap.firstCall.args[0].body.data).to.deep.equal({ mode: 'new' });
        sinon.assert.calledOnce(t1.core.createNamespacedConfigMap);
        expect(t1.core.createNamespacedConfigMap.firstCall.args[0].body.metadata?.name).to.equal(copy('conf'));
      });

      it("is kept, but never sent the original, when only the target's caches say a delegate names it", async () => {
        // No proxy bound to t1 uses conf: the "delegate" and the "earlier copy" are whatever t1's
        // server answered, and must not make the provider send t1 the original's data.
        for (const proxies of [[], [proxy('p2', nodeOf('t2'), { configMap: 'conf' })]]) {
          const { follow, t1 } = setup({ proxies, configMaps: [conf], t1ConfigMaps: [earlier], t1Delegates: [earlierDelegate('old-delegate', 'conf')] });
          expect(await follow.reconcile(`configmap/${NS}/conf`)).to.deep.equal({ requeueAfterMs: 60_000 });
          sinon.assert.notCalled(t1.core.replaceNamespacedConfigMap);
          sinon.assert.notCalled(t1.core.createNamespacedConfigMap);
          sinon.assert.notCalled(t1.core.deleteNamespacedConfigMap);
        }
      });

      it('is kept while the delegates are not known yet', async () => {
        const { follow, t1 } = setup({ proxies: [], configMaps: [conf], t1ConfigMaps: [earlier], t1Delegates: 'not cached' });
        expect(await follow.reconcile(`configmap/${NS}/conf`)).to.deep.equal({ requeueAfterMs: 60_000 });
        sinon.assert.notCalled(t1.core.deleteNamespacedConfigMap);
      });

      const gone: [string, Parameters<typeof setup>[0]][] = [
        [
          'no delegate names it any more (a proxy still uses the original)',
          { proxies: [proxy('p1', nodeOf('t1'), { configMap: 'conf' })], configMaps: [conf], t1ConfigMaps: [earlier], t1Delegates: [earlierDelegate('new-delegate', copy('conf'))] },
        ],
        ["only another source's delegate names it", { proxies: [], configMaps: [conf], t1ConfigMaps: [earlier], t1Delegates: [earlierDelegate('theirs', 'conf', 'c9')] }],
        ['the original is gone', { proxies: [], configMaps: [], t1ConfigMaps: [earlier], t1Delegates: [earlierDelegate('old-delegate', 'conf')] }],
      ];
      for (const [why, opts] of gone) {
        it(`is deleted (UID precondition) once ${why}`, async () => {
          const { follow, t1 } = setup(opts);
          await follow.reconcile(`configmap/${NS}/conf`);
          sinon.assert.calledOnce(t1.core.deleteNamespacedConfigMap);
          expect(t1.core.deleteNamespacedConfigMap.firstCall.args[0]).to.deep.include({ name: 'conf', namespace: NS, body: { preconditions: { uid: 'earlier-copy-of-conf' } } });
        });
      }

      it("is never mistaken for another object's copy, nor another object's copy for it", async () => {
        // Our per-source copy of "app" sits where an earlier copy of an original named like it would.
        const appCopy = copyOf(configMap('app'));
        const named = appCopy.metadata!.name!;
        const { follow, t1 } = setup({ proxies: [], configMaps: [configMap(named)], t1ConfigMaps: [appCopy] });
        await follow.reconcile(`configmap/${NS}/${named}`);
        sinon.assert.notCalled(t1.core.deleteNamespacedConfigMap);
        sinon.assert.notCalled(t1.core.replaceNamespacedConfigMap);
      });
    });

    it('schedules no resync for an original that no copy uses (or that only a self target uses)', async () => {
      const { follow } = setup({ proxies: [proxy('p1', nodeOf('home'), { configMap: 'conf' }), proxy('p2', nodeOf('t1'), {})], configMaps: [configMap('conf')] });
      expect(await follow.reconcile(`configmap/${NS}/conf`)).to.equal(undefined);
    });

    it('drops a malformed key', async () => {
      const { follow } = setup();
      const err = await follow.reconcile('pod/apps/x').then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(TerminalError);
    });
  });
});
