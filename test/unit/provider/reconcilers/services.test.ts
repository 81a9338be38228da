import { expect } from 'chai';
import sinon from 'sinon';
import { ApiException, type V1Pod, type V1Service } from '@kubernetes/client-node';
import { ClusterRegistry } from '../../../../provider/clusters/cluster-registry.js';
import {
  CILIUM_GLOBAL_SERVICE_ANNOTATION,
  IS_DELEGATE_ANNOTATION,
  ORIGINAL_SELECTOR_ANNOTATION,
  PARENT_CLUSTER_NAME_LABEL,
  PARENT_NAME_ANNOTATION,
  PARENT_NAMESPACE_ANNOTATION,
  PARENT_UID_LABEL,
} from '../../../../provider/core/keys.js';
import { buildReroutedService, buildServiceCopy } from '../../../../provider/model/service.js';
import type { EventSink } from '../../../../provider/core/event-sink.js';
import { ServiceReconciler } from '../../../../provider/reconcilers/services.js';
import { MapCache } from './map-cache.js';
import { coreStub, emptyCluster } from '../../../support/stubs.js';
import { fakeTarget } from '../../../support/targets.js';
import { proxy as baseProxy } from '../../../support/pods.js';

const CLUSTER = 'c1';
const NS = 'apps';
const KEY = `${NS}/web`;

/** A ClusterTarget whose Services behave like an empty cluster's. */
const serviceTarget = (name: string, self = false) => fakeTarget(name, { self, core: emptyCluster(coreStub(), ['Service']) });

const nodeOf = (t: string) => `admiralty-cluster-${t}`;

const service = (over: Partial<V1Service['metadata']> = {}): V1Service => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name: 'web', namespace: NS, uid: 'svc-uid', resourceVersion: '3', ...over },
  spec: { selector: { app: 'web' }, ports: [{ port: 80, targetPort: 8080 }], clusterIP: '10.96.0.10', clusterIPs: ['10.96.0.10'] },
});

const proxy = (name: string, nodeName: string | undefined, labels: Record<string, string> = { app: 'web' }): V1Pod =>
  baseProxy({ name, namespace: NS, uid: `${name}-uid`, labels, spec: { containers: [{ name: 'app', image: 'nginx' }] }, nodeName });

const delegateOf = (p: V1Pod, cluster = CLUSTER): V1Pod => ({
  metadata: {
    name: `${p.metadata!.name}-abc`,
    namespace: NS,
    uid: `${p.metadata!.name}-delegate-uid`,
    labels: { [PARENT_UID_LABEL]: p.metadata!.uid!, [PARENT_CLUSTER_NAME_LABEL]: cluster, 'multicluster.admiralty.io/app': 'web' },
    annotations: { [PARENT_NAME_ANNOTATION]: p.metadata!.name!, [PARENT_NAMESPACE_ANNOTATION]: NS },
  },
});

/** Our copy as a target returns it (with what the target allocated). */
function copyOf(svc: V1Service, uid = 'copy-uid'): V1Service {
  const c = buildServiceCopy(svc, { sourceClusterName: CLUSTER });
  return { ...c, metadata: { ...c.metadata, uid, resourceVersion: '9' }, spec: { ...c.spec, clusterIP: '10.100.0.5', clusterIPs: ['10.100.0.5'] } };
}

function setup(opts: { services?: V1Service[]; proxies?: V1Pod[]; delegates?: Record<string, V1Pod[]>; copies?: Record<string, V1Service[]>; noCaches?: string[] } = {}) {
  const source = coreStub();
  source.replaceNamespacedService.callsFake(async ({ body }) => body);
  const targets = { t1: serviceTarget('t1'), t2: serviceTarget('t2'), home: serviceTarget('home', true) };
  const registry = new ClusterRegistry();
  for (const [name, t] of Object.entries(targets)) registry.set(t.target, nodeOf(name));
  const short = (key: string) => key.split('/')[1]!;
  const delegates = new Map(Object.keys(targets).map((n) => [n, new MapCache<V1Pod>(...(opts.delegates?.[n] ?? []))]));
  const copies = new Map(Object.keys(targets).map((n) => [n, new MapCache<V1Service>(...(opts.copies?.[n] ?? []))]));
  const events: { type: string; reason: string; message: string; on: string }[] = [];
  const sink: EventSink = { record: (o, type, reason, message) => events.push({ type, reason, message, on: `${o.kind} ${o.metadata.namespace}/${o.metadata.name}` }) };
  const reconciler = new ServiceReconciler({
    sourceCore: source,
    services: new MapCache<V1Service>(...(opts.services ?? [])),
    proxies: new MapCache<V1Pod>(...(opts.proxies ?? [])),
    registry,
    sourceClusterName: CLUSTER,
    events: sink,
    targetServices: (key) => (opts.noCaches?.includes(short(key)) ? undefined : copies.get(short(key))),
    delegates: (key) => (opts.noCaches?.includes(short(key)) ? undefined : delegates.get(short(key))),
  });
  return { reconciler, source, registry, ...targets, events };
}

describe('ServiceReconciler', () => {
  afterEach(() => sinon.restore());

  describe('key mappers', () => {
    it('maps services, copies and proxies to <ns>/<name> of the source Service', () => {
      const { reconciler } = setup({
        services: [service(), { ...service({ name: 'other' }), spec: { selector: { app: 'db' } } }, { ...service({ name: 'copy', annotations: { [IS_DELEGATE_ANNOTATION]: '' } }) }],
      });
      expect(ServiceReconciler.keyOf(service())).to.equal(KEY);
      expect(ServiceReconciler.keysOfCopy(copyOf(service()))).to.deep.equal([KEY]);
      expect(ServiceReconciler.keysOfCopy(service())).to.deep.equal([]);
      expect(reconciler.keysOfProxy(proxy('p', undefined))).to.deep.equal([KEY]);
    });

    it('matches a rerouted Service through its original selector', () => {
      const { reconciler } = setup({ services: [buildReroutedService(service())] });
      expect(reconciler.keysOfProxy(proxy('p', undefined))).to.deep.equal([KEY]);
    });
  });

  it('reroutes the Service, copies it where a matching delegate runs, and deletes copies elsewhere', async () => {
    const p1 = proxy('p1', nodeOf('t1'));
    const { reconciler, source, t1, t2, home } = setup({
      services: [service()],
      proxies: [p1, proxy('p2', nodeOf('home')), proxy('unrelated', nodeOf('t2'), { app: 'db' })],
      delegates: { t1: [delegateOf(p1)] },
      copies: { t2: [copyOf(service(), 'stale-copy-uid')] },
    });
    await reconciler.reconcile(KEY);

    sinon.assert.calledOnce(source.replaceNamespacedService);
    const rerouted = source.replaceNamespacedService.firstCall.args[0].body;
    expect(rerouted.spec?.selector).to.deep.equal({ 'multicluster.admiralty.io/app': 'web' });
    expect(rerouted.metadata?.annotations).to.include({ [ORIGINAL_SELECTOR_ANNOTATION]: 'app=web', [CILIUM_GLOBAL_SERVICE_ANNOTATION]: 'true' });
    expect(rerouted.metadata?.resourceVersion).to.equal('3');

    sinon.assert.calledOnce(t1.core.createNamespacedService);
    const copy = t1.core.createNamespacedService.firstCall.args[0].body;
    expect(copy.metadata?.annotations).to.include({ [IS_DELEGATE_ANNOTATION]: '', [PARENT_NAME_ANNOTATION]: 'web' });
    expect(copy.metadata?.labels).to.include({ [PARENT_UID_LABEL]: 'svc-uid', [PARENT_CLUSTER_NAME_LABEL]: CLUSTER });
    expect(copy.spec?.clusterIP).to.equal(undefined);

    sinon.assert.calledOnce(t2.core.deleteNamespacedService);
    expect(t2.core.deleteNamespacedService.firstCall.args[0]).to.deep.include({ name: 'web', namespace: NS, body: { preconditions: { uid: 'stale-copy-uid' } } });
    // No copy into the self target: the rerouted Service is already there.
    sinon.assert.notCalled(home.core.createNamespacedService);
  });

  it('is idempotent: a rerouted Service and an up-to-date copy cause no write', async () => {
    const p1 = proxy('p1', nodeOf('t1'));
    const rerouted = buildReroutedService(service());
    const { reconciler, source, t1, t2 } = setup({ services: [rerouted], proxies: [p1], delegates: { t1: [delegateOf(p1)] }, copies: { t1: [copyOf(rerouted)] } });
    await reconciler.reconcile(KEY);
    sinon.assert.notCalled(source.replaceNamespacedService);
    for (const core of [t1.core, t2.core]) {
      sinon.assert.notCalled(core.createNamespacedService);
      sinon.assert.notCalled(core.replaceNamespacedService);
      sinon.assert.notCalled(core.deleteNamespacedService);
    }
  });

  it('updates an outdated copy of ours, keeping what the target allocated', async () => {
    const p1 = proxy('p1', nodeOf('t1'));
    const old = copyOf(service());
    old.spec!.ports = [{ port: 81 }];
    const { reconciler, t1 } = setup({ services: [buildReroutedService(service())], proxies: [p1], delegates: { t1: [delegateOf(p1)] }, copies: { t1: [old] } });
    await reconciler.reconcile(KEY);
    sinon.assert.calledOnce(t1.core.replaceNamespacedService);
    const body = t1.core.replaceNamespacedService.firstCall.args[0].body;
    expect(body.spec?.ports).to.deep.equal([{ port: 80, targetPort: 8080 }]);
    expect(body.spec?.clusterIP).to.equal('10.100.0.5');
    expect(body.metadata?.resourceVersion).to.equal('9');
  });

  describe('what a copy leaves out', () => {
    /** A LoadBalancer Service with external IPs, as the source's apiserver stores it. */
    const exposed = (): V1Service => {
      const s = service({ annotations: { 'metallb.universe.tf/address-pool': 'public' } });
      s.spec = {
        ...s.spec,
        type: 'LoadBalancer',
        externalIPs: ['203.0.113.10'],
        externalTrafficPolicy: 'Cluster',
        allocateLoadBalancerNodePorts: true,
        ports: [{ port: 80, targetPort: 8080, nodePort: 30080 }],
      };
      return s;
    };
    const DROPS = 'type LoadBalancer, allocateLoadBalancerNodePorts, externalIPs, externalTrafficPolicy, ports[].nodePort, annotation metallb.universe.tf/address-pool';

    it('creates a ClusterIP copy without external IPs, node ports or load-balancer annotations, and says so in one Warning on the Service', async () => {
      const p1 = proxy('p1', nodeOf('t1'));
      const p2 = proxy('p2', nodeOf('t2'));
      const { reconciler, t1, t2, events } = setup({ services: [exposed()], proxies: [p1, p2], delegates: { t1: [delegateOf(p1)], t2: [delegateOf(p2)] } });
      await reconciler.reconcile(KEY);
      for (const t of [t1, t2]) {
        const copy = t.core.createNamespacedService.firstCall.args[0].body;
        expect(copy.spec).to.deep.equal({ type: 'ClusterIP', selector: { 'multicluster.admiralty.io/app': 'web' }, ports: [{ port: 80, targetPort: 8080 }] });
        expect(copy.metadata?.annotations).to.not.have.property('metallb.universe.tf/address-pool');
      }
      expect(events).to.deep.equal([{ type: 'Warning', reason: 'CopyFieldsDropped', message: `the copies in t1, t2 are ClusterIP Services without: ${DROPS}`, on: `Service ${KEY}` }]);
    });

    it('says nothing when no copy is written: a reconcile that finds the copies up to date records no event', async () => {
      const p1 = proxy('p1', nodeOf('t1'));
      const rerouted = buildReroutedService(exposed());
      const { reconciler, t1, events } = setup({ services: [rerouted], proxies: [p1], delegates: { t1: [delegateOf(p1)] }, copies: { t1: [copyOf(rerouted)] } });
      await reconciler.reconcile(KEY);
      await reconciler.reconcile(KEY);
      sinon.assert.notCalled(t1.core.createNamespacedService);
      sinon.assert.notCalled(t1.core.replaceNamespacedService);
      expect(events).to.deep.equal([]);
    });

    it('records no CopyFieldsDropped for a ClusterIP Service whose copy leaves nothing out', async () => {
      const p1 = proxy('p1', nodeOf('t1'));
      const { reconciler, t1, events } = setup({ services: [service()], proxies: [p1], delegates: { t1: [delegateOf(p1)] } });
      await reconciler.reconcile(KEY);
      sinon.assert.calledOnce(t1.core.createNamespacedService);
      expect(events).to.deep.equal([]);
    });

    it("rewrites an earlier version's copy that has external IPs and a LoadBalancer type into a ClusterIP one, keeping its cluster IP, and says so once", async () => {
      const p1 = proxy('p1', nodeOf('t1'));
      const rerouted = buildReroutedService(exposed());
      const old = copyOf(rerouted);
      old.metadata!.annotations = { ...old.metadata!.annotations, 'metallb.universe.tf/address-pool': 'public' };
      old.spec = {
        ...old.spec,
        type: 'LoadBalancer',
        externalIPs: ['203.0.113.10'],
        externalTrafficPolicy: 'Cluster',
        healthCheckNodePort: 30001,
        ports: [{ port: 80, targetPort: 8080, nodePort: 30080 }],
      };
      const { reconciler, t1, events } = setup({ services: [rerouted], proxies: [p1], delegates: { t1: [delegateOf(p1)] }, copies: { t1: [old] } });
      await reconciler.reconcile(KEY);
      sinon.assert.calledOnce(t1.core.replaceNamespacedService);
      const body = t1.core.replaceNamespacedService.firstCall.args[0].body;
      expect(body.spec).to.deep.equal({
        type: 'ClusterIP',
        selector: { 'multicluster.admiralty.io/app': 'web' },
        ports: [{ port: 80, targetPort: 8080 }],
        clusterIP: '10.100.0.5',
        clusterIPs: ['10.100.0.5'],
        ipFamilies: undefined,
      });
      expect(body.metadata?.annotations).to.not.have.property('metallb.universe.tf/address-pool');
      expect(body.metadata?.resourceVersion).to.equal('9');
      expect(events.map((e) => [e.reason, e.message])).to.deep.equal([['CopyFieldsDropped', `the copies in t1 are ClusterIP Services without: ${DROPS}`]]);
    });

    it('makes the copy again when the target refuses the rewrite as invalid: a delete with its UID, then a create', async () => {
      const p1 = proxy('p1', nodeOf('t1'));
      const rerouted = buildReroutedService(exposed());
      const old = copyOf(rerouted);
      old.spec = { ...old.spec, type: 'LoadBalancer', externalIPs: ['203.0.113.10'] };
      const { reconciler, t1, events } = setup({ services: [rerouted], proxies: [p1], delegates: { t1: [delegateOf(p1)] }, copies: { t1: [old] } });
      t1.core.replaceNamespacedService.rejects(new ApiException(422, 'Invalid', '{"kind":"Status","reason":"Invalid"}', {}));
      await reconciler.reconcile(KEY);
      sinon.assert.calledOnce(t1.core.deleteNamespacedService);
      expect(t1.core.deleteNamespacedService.firstCall.args[0]).to.deep.include({ name: 'web', namespace: NS, body: { preconditions: { uid: 'copy-uid' } } });
      sinon.assert.calledOnce(t1.core.createNamespacedService);
      sinon.assert.callOrder(t1.core.deleteNamespacedService, t1.core.createNamespacedService);
      expect(t1.core.createNamespacedService.firstCall.args[0].body.spec?.type).to.equal('ClusterIP');
      expect(events.map((e) => e.reason)).to.deep.equal(['CopyFieldsDropped']);
    });

    it('leaves a copy being deleted alone until it is gone (its deletion wakes the key)', async () => {
      const p1 = proxy('p1', nodeOf('t1'));
      const rerouted = buildReroutedService(exposed());
      const old = copyOf(rerouted);
      old.metadata!.deletionTimestamp = new Date(0);
      old.spec = { ...old.spec, externalIPs: ['203.0.113.10'] };
      const { reconciler, t1, events } = setup({ services: [rerouted], proxies: [p1], delegates: { t1: [delegateOf(p1)] }, copies: { t1: [old] } });
      await reconciler.reconcile(KEY);
      for (const m of ['createNamespacedService', 'replaceNamespacedService', 'deleteNamespacedService'] as const) sinon.assert.notCalled(t1.core[m]);
      expect(events).to.deep.equal([]);
    });

    it('says which copies were written even when another target fails', async () => {
      const p1 = proxy('p1', nodeOf('t1'));
      const p2 = proxy('p2', nodeOf('t2'));
      const { reconciler, t1, events } = setup({ services: [exposed()], proxies: [p1, p2], delegates: { t1: [delegateOf(p1)], t2: [delegateOf(p2)] } });
      t1.core.createNamespacedService.rejects(new ApiException(500, 'Internal', '{}', {}));
      let thrown: unknown;
      await reconciler.reconcile(KEY).catch((err) => (thrown = err));
      expect(thrown).to.be.instanceOf(Error);
      expect(events.map((e) => e.message)).to.deep.equal([`the copies in t2 are ClusterIP Services without: ${DROPS}`]);
    });

    it('never copies an ExternalName Service nor reroutes it, and deletes our copies of it (only ours)', async () => {
      const external: V1Service = { ...service(), spec: { type: 'ExternalName', externalName: 'db.example.com', selector: { app: 'web' } } };
      const p1 = proxy('p1', nodeOf('t1'));
      const p2 = proxy('p2', nodeOf('t2'));
      const theirs: V1Service = { metadata: { name: 'web', namespace: NS, uid: 'theirs' } };
      const { reconciler, source, t1, t2, events } = setup({
        services: [external],
        proxies: [p1, p2],
        delegates: { t1: [delegateOf(p1)], t2: [delegateOf(p2)] },
        copies: { t1: [copyOf(service())], t2: [theirs] },
      });
      await reconciler.reconcile(KEY);
      sinon.assert.notCalled(source.replaceNamespacedService);
      for (const t of [t1, t2]) {
        sinon.assert.notCalled(t.core.createNamespacedService);
        sinon.assert.notCalled(t.core.replaceNamespacedService);
      }
      sinon.assert.calledOnce(t1.core.deleteNamespacedService);
      expect(t1.core.deleteNamespacedService.firstCall.args[0]).to.deep.include({ body: { preconditions: { uid: 'copy-uid' } } });
      sinon.assert.notCalled(t2.core.deleteNamespacedService);
      expect(events).to.deep.equal([]);
    });
  });

  it('leaves a same-name Service that is not ours alone', async () => {
    const p1 = proxy('p1', nodeOf('t1'));
    const theirs: V1Service = { metadata: { name: 'web', namespace: NS, uid: 'theirs' }, spec: { selector: { app: 'x' } } };
    const { reconciler, t1, events } = setup({ services: [service()], proxies: [p1], delegates: { t1: [delegateOf(p1)] } });
    t1.core.readNamespacedService.resolves(theirs);
    await reconciler.reconcile(KEY);
    sinon.assert.notCalled(t1.core.createNamespacedService);
    sinon.assert.notCalled(t1.core.replaceNamespacedService);
    expect(events.map((e) => [e.type, e.reason])).to.deep.equal([['Warning', 'CopyConflict']]);
  });

  it('does not copy to a target until a delegate runs there, unless its caches are not running', async () => {
    const p1 = proxy('p1', nodeOf('t1'));
    const p2 = proxy('p2', nodeOf('t2'));
    const { reconciler, t1, t2 } = setup({ services: [service()], proxies: [p1, p2], delegates: { t1: [delegateOf(p1, 'other-cluster')] }, noCaches: ['t2'] });
    await reconciler.reconcile(KEY);
    sinon.assert.notCalled(t1.core.createNamespacedService);
    sinon.assert.calledOnce(t2.core.createNamespacedService);
  });

  describe('a target in an outage', () => {
    const unreachable = { ready: false, reason: 'TargetUnreachable', message: 'connect ETIMEDOUT', sinceMs: 0 };
    const untouched = (core: ReturnType<typeof fakeTarget>['core']) => {
      for (const m of ['readNamespacedService', 'createNamespacedService', 'replaceNamespacedService', 'deleteNamespacedService'] as const) sinon.assert.notCalled(core[m]);
    };

    it('is passed over, its caches not listed, while the others get their copies; the key comes back once a probe finds it reachable, once', async () => {
      const p1 = proxy('p1', nodeOf('t1'));
      const p2 = proxy('p2', nodeOf('t2'));
      // t1's caches never listed (a restart during the outage): without the outage, its copy would be read there.
      const { reconciler, registry, t1, t2 } = setup({ services: [service()], proxies: [p1, p2], delegates: { t2: [delegateOf(p2)] }, noCaches: ['t1'] });
      registry.setHealth(t1.target.key, unreachable);
      await reconciler.reconcile(KEY);
      untouched(t1.core);
      sinon.assert.calledOnce(t2.core.createNamespacedService);

      expect(reconciler.passes.wake(t1.target.key)).to.deep.equal([]);
      expect(reconciler.passes.wake(t2.target.key)).to.deep.equal([]);
      registry.setHealth(t1.target.key, { ready: true, reason: 'Ready', message: '', sinceMs: 1 });
      expect(reconciler.passes.wake(t1.target.key)).to.deep.equal([KEY]);
      expect(reconciler.passes.wake(t1.target.key)).to.deep.equal([]);
      await reconciler.reconcile(KEY);
      sinon.assert.calledOnce(t1.core.createNamespacedService);
    });

    it('keeps its copy of a deleted Service until it is back, and gives the key back when its clients go', async () => {
      const { reconciler, registry, t1, t2 } = setup({ copies: { t1: [copyOf(service())], t2: [copyOf(service(), 't2-copy')] } });
      registry.setHealth(t1.target.key, unreachable);
      await reconciler.reconcile(KEY);
      untouched(t1.core);
      sinon.assert.calledOnce(t2.core.deleteNamespacedService);
      expect(reconciler.passes.drop(t1.target.key)).to.deep.equal([KEY]);
      expect(reconciler.passes.drop(t1.target.key)).to.deep.equal([]);
    });

    it('a target whose call fails does not keep the next one from its pass; the error is thrown after', async () => {
      const p1 = proxy('p1', nodeOf('t1'));
      const p2 = proxy('p2', nodeOf('t2'));
      const { reconciler, t1, t2 } = setup({ services: [service()], proxies: [p1, p2], delegates: { t1: [delegateOf(p1)], t2: [delegateOf(p2)] } });
      t1.core.createNamespacedService.rejects(new ApiException(500, 'Internal', '{}', {}));
      let thrown: unknown;
      await reconciler.reconcile(KEY).catch((err) => (thrown = err));
      expect(String((thrown as Error)?.message)).to.match(/copying service apps\/web to t1/);
      sinon.assert.calledOnce(t2.core.createNamespacedService);
    });
  });

  it('deletes the copies of a deleted Service, only ours', async () => {
    const theirs: V1Service = { metadata: { name: 'web', namespace: NS, uid: 'theirs' } };
    const { reconciler, source, t1, t2 } = setup({ copies: { t1: [copyOf(service())], t2: [theirs] } });
    await reconciler.reconcile(KEY);
    sinon.assert.calledOnce(t1.core.deleteNamespacedService);
    expect(t1.core.deleteNamespacedService.firstCall.args[0]).to.deep.include({ body: { preconditions: { uid: 'copy-uid' } } });
    sinon.assert.notCalled(t2.core.deleteNamespacedService);
    sinon.assert.notCalled(source.replaceNamespacedService);
  });

  it('never follows a copy, nor a Service that selects no proxy', async () => {
    const copyInSource = { ...copyOf(service()), metadata: { ...copyOf(service()).metadata, annotations: { [IS_DELEGATE_ANNOTATION]: '' } } };
    for (const svc of [copyInSource, { ...service(), spec: { selector: { app: 'db' } } }]) {
      const { reconciler, source, t1 } = setup({ services: [svc], proxies: [proxy('p1', nodeOf('t1'))] });
      await reconciler.reconcile(KEY);
      sinon.assert.notCalled(source.replaceNamespacedService);
      sinon.assert.notCalled(t1.core.createNamespacedService);
    }
  });
});
