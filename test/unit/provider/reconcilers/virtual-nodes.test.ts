import { expect } from 'chai';
import sinon from 'sinon';
import {
  ApiException,
  AuthenticationV1Api,
  AuthorizationV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  HttpMethod,
  KubeConfig,
  RequestContext,
  type V1Lease,
  type V1Node,
  type V1Pod,
  type V1NodeCondition,
  type V1Secret,
} from '@kubernetes/client-node';
import { ClusterRegistry } from '../../../../provider/clusters/cluster-registry.js';
import { ServerAddressPolicy } from '../../../../provider/clusters/server-address-policy.js';
import { createTargetClient, type TargetClient } from '../../../../provider/clusters/target-client.js';
import { FakeClock } from '../../../../provider/core/clock.js';
import { TARGET_NAME_LABEL } from '../../../../provider/core/keys.js';
import type { EventSink } from '../../../../provider/core/event-sink.js';
import { TargetAuthorization } from '../../../../provider/reconcilers/target-authorization.js';
import { TargetRegistryReconciler } from '../../../../provider/reconcilers/target-registry.js';
import { VirtualNodeReconciler } from '../../../../provider/reconcilers/virtual-nodes.js';
import { buildVirtualNode } from '../../../../provider/model/virtual-node.js';
import type { ClusterSummary, Target, TargetRef } from '../../../../provider/model/types.js';
import { MapCache } from './map-cache.js';
import { alreadyExists, conflict, notFound } from '../../../support/api-errors.js';

const T0 = Date.parse('2024-05-01T10:00:00.000Z');
const NODE = 'admiralty-namespace-default-local';
const KEY = 'Target/default/local';
const P = 'multicluster.admiralty.io/';

/** Informer cache fake: objects by `<ns>/<name>`. */

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

/** A kubeconfig Secret written by hand, as a Target's writer could: `user` is a YAML flow-mapping body. */
function rawKubeconfigSecret(server: string, user: string): V1Secret {
  const yaml = `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "${server}"}}]\nusers: [{name: u, user: {${user}}}]\ncontexts: [{name: ctx, context: {cluster: c, user: u}}]\ncurrent-context: ctx\n`;
  return { metadata: { name: 'kc', namespace: 'default' }, data: { config: Buffer.from(yaml).toString('base64') } };
}

function kubeconfigSecret(server: string): V1Secret {
  const yaml = kubeConfig(server).exportConfig();
  return { metadata: { name: 'kc', namespace: 'default' }, data: { config: Buffer.from(yaml).toString('base64') } };
}

const SUMMARY: ClusterSummary = {
  apiVersion: 'multicluster.admiralty.io/v1alpha1',
  kind: 'ClusterSummary',
  metadata: { name: 'singleton', labels: { 'topology.kubernetes.io/region': 'eu' } },
  capacity: { cpu: '8', memory: '32Gi', pods: '110' },
  allocatable: { cpu: '7', memory: '30Gi', pods: '110' },
};

function selfTarget(over: Partial<Target['metadata']> = {}): Target {
  return { metadata: { name: 'local', namespace: 'default', uid: 'target-uid', generation: 1, ...over }, spec: { self: true } };
}

const clone = <T>(x: T): T => structuredClone(x);

/**
 * The source cluster as the reconciler sees it: stored nodes and leases behind sinon stubs that
 * behave like the apiserver (404 on missing, 409 on duplicate, status dropped on create, strategic
 * merge of conditions by type on the status subresource).
 */
function sourceCluster() {
  const nodes = new Map<string, V1Node>();
  const leases = new Map<string, V1Lease>();
  let leaseVersion = 0;
  const secrets = new Map<string, V1Secret>();
  let uid = 0;
  const core = {
    readNamespacedSecret: sinon.stub().callsFake(async ({ name, namespace }: { name: string; namespace: string }) => {
      const s = secrets.get(`${namespace}/${name}`);
      if (!s) throw notFound();
      return clone(s);
    }),
    readNode: sinon.stub().callsFake(async ({ name }: { name: string }) => {
      const n = nodes.get(name);
      if (!n) throw notFound();
      return clone(n);
    }),
    createNode: sinon.stub().callsFake(async ({ body }: { body: V1Node }) => {
      const name = body.metadata!.name!;
      if (nodes.has(name)) throw alreadyExists();
      const stored: V1Node = { ...clone(body), metadata: { ...clone(body.metadata), uid: `node-uid-${++uid}`, resourceVersion: '1' } };
      delete stored.status;
      nodes.set(name, stored);
      return clone(stored);
    }),
    patchNode: sinon.stub().callsFake(async ({ name, body }: { name: string; body: { metadata: { labels: Record<string, string | null> } } }) => {
      const n = nodes.get(name);
      if (!n) throw notFound();
      const labels = { ...n.metadata!.labels };
      for (const [k, v] of Object.entries(body.metadata.labels)) {
        if (v === null) delete labels[k];
        else labels[k] = v;
      }
      n.metadata!.labels = labels;
      return clone(n);
    }),
    patchNodeStatus: sinon.stub().callsFake(async ({ name, body }: { name: string; body: { status: Record<string, unknown> } }) => {
      const n = nodes.get(name);
      if (!n) throw notFound();
      const status = (n.status ??= {}) as Record<string, unknown>;
      for (const [k, v] of Object.entries(clone(body.status))) {
        if (k === 'conditions') {
          const byType = new Map(((status.conditions as V1NodeCondition[]) ?? []).map((c) => [c.type, c]));
          for (const c of v as V1NodeCondition[]) byType.set(c.type, c);
          status.conditions = [...byType.values()];
        } else if (k === 'capacity' || k === 'allocatable') {
          status[k] = Object.fromEntries(Object.entries(v as Record<string, string | null>).filter(([, q]) => q !== null));
        } else status[k] = v;
      }
      return clone(n);
    }),
    deleteNode: sinon.stub().callsFake(async ({ name }: { name: string }) => {
      if (!nodes.delete(name)) throw notFound();
      return {};
    }),
  };
  const coordination = {
    readNamespacedLease: sinon.stub().callsFake(async ({ name, namespace }: { name: string; namespace: string }) => {
      const l = leases.get(`${namespace}/${name}`);
      if (!l) throw notFound();
      return clone(l);
    }),
    createNamespacedLease: sinon.stub().callsFake(async ({ namespace, body }: { namespace: string; body: V1Lease }) => {
      const k = `${namespace}/${body.metadata!.name}`;
      if (leases.has(k)) throw alreadyExists();
      leases.set(k, { ...clone(body), metadata: { ...clone(body.metadata), resourceVersion: String(++leaseVersion) } });
      return clone(leases.get(k)!);
    }),
    // With the API server's optimistic concurrency: a stale resourceVersion is a conflict.
    replaceNamespacedLease: sinon.stub().callsFake(async ({ name, namespace, body }: { name: string; namespace: string; body: V1Lease }) => {
      const k = `${namespace}/${name}`;
      if (!leases.has(k)) throw notFound();
      if (body.metadata?.resourceVersion && body.metadata.resourceVersion !== leases.get(k)!.metadata?.resourceVersion) throw conflict();
      leases.set(k, { ...clone(body), metadata: { ...clone(body.metadata), resourceVersion: String(++leaseVersion) } });
      return clone(leases.get(k)!);
    }),
    deleteNamespacedLease: sinon.stub().callsFake(async ({ name, namespace }: { name: string; namespace: string }) => {
      if (!leases.delete(`${namespace}/${name}`)) throw notFound();
      return {};
    }),
  };
  const custom = {
    patchNamespacedCustomObjectStatus: sinon.stub().resolves({}),
    patchClusterCustomObjectStatus: sinon.stub().resolves({}),
  };
  return { nodes, leases, secrets, core, coordination, custom };
}

type Recorded = { type: 'Normal' | 'Warning'; reason: string; message: string; kind: string; name?: string; namespace?: string; uid?: string };

function setup(
  opts: {
    probe?: () => Promise<unknown>;
    podsProbe?: () => Promise<unknown>;
    proxies?: V1Pod[];
    delegateOf?: (targetKey: string, proxy: V1Pod) => V1Pod | undefined;
    authorization?: TargetAuthorization;
    virtualNodes?: MapCache<V1Node>;
  } = {},
) {
  const clock = new FakeClock(T0);
  const src = sourceCluster();
  const targets = new MapCache<Target>();
  const clusterTargets = new MapCache<Target>();
  const registry = new ClusterRegistry();
  const events: Recorded[] = [];
  const sink: EventSink = {
    record: (obj, type, reason, message) => events.push({ type, reason, message, kind: obj.kind, name: obj.metadata.name, namespace: obj.metadata.namespace, uid: obj.metadata.uid }),
  };
  // Every target client (self or from a Secret) is a real CustomObjectsApi: the probe goes to this stub.
  const probe = sinon.stub(CustomObjectsApi.prototype, 'getClusterCustomObject');
  probe.callsFake((opts.probe ?? (async () => clone(SUMMARY))) as never);
  // Targets from a Secret are also probed for the right to manage pods in their namespace.
  const podsProbe = sinon.stub(CoreV1Api.prototype, 'listNamespacedPod');
  podsProbe.callsFake((opts.podsProbe ?? (async () => ({ items: [] }))) as never);
  const health: [string, boolean][] = [];
  // The self binding is written and in force unless a test says otherwise.
  const selfBindings = { ensure: sinon.stub().resolves(false), remove: sinon.stub().resolves(), allowed: sinon.stub().resolves(true) };
  const bindingsWritten: string[] = [];
  const probed: string[] = [];
  const options = {
    sourceKubeConfig: kubeConfig('https://source.example:6443'),
    sourceCore: src.core as unknown as CoreV1Api,
    sourceCustom: src.custom as unknown as CustomObjectsApi,
    sourceCoordination: src.coordination as unknown as CoordinationV1Api,
    targets,
    clusterTargets,
    registry,
    serverPolicy: new ServerAddressPolicy({ allowLoopback: false, ownAddresses: [] }),
    selfBindings,
    kubelet: { address: '10.0.0.5', port: 10250 },
    kubeletVersion: 'v1.30.0-admiralty',
    events: sink,
    clock,
    nodeStatusIntervalMs: 60_000,
    leaseIntervalMs: 10_000,
    onHealth: (t: string, ready: boolean) => health.push([t, ready]),
    onBindingWritten: (key: string) => bindingsWritten.push(key),
    onProbed: (key: string) => probed.push(key),
    proxiesOn: (nodeName: string) => (opts.proxies ?? []).filter((p) => p.spec?.nodeName === nodeName),
    delegateOf: opts.delegateOf,
    authorization: opts.authorization,
    virtualNodes: opts.virtualNodes,
  };
  // The read side (every replica) and the write side (the leader), as main wires them: the
  // probe wakes the writer. One round here is one probe, then what the leader writes from it.
  const reader = new TargetRegistryReconciler(options);
  const writer = new VirtualNodeReconciler(options);
  const reconciler = {
    async reconcile(key: string) {
      const result = await reader.reconcile(key);
      await writer.reconcile(key);
      return result;
    },
  };
  return { clock, src, targets, clusterTargets, registry, events, probe, podsProbe, reconciler, reader, writer, health, selfBindings, bindingsWritten, probed };
}

/** What the informer would show after the status patch: the Target with the patched status. */
function applyStatusPatch(target: Target, patchArgs: { body: { status: Target['status'] } }): void {
  target.status = clone(patchArgs.body.status);
}

async function rejection(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (err) {
    expect(err).to.be.instanceOf(Error);
    return err as Error;
  }
  return expect.fail('expected a rejection');
}

function readyOf(node: V1Node | undefined): V1NodeCondition | undefined {
  return node?.status?.conditions?.find((c) => c.type === 'Ready');
}

describe('VirtualNodeReconciler.reconcile', () => {
  afterEach(() => sinon.restore());

  describe('a self Target whose node is missing', () => {
    it('creates the node, writes its status, creates the Lease, marks the Target Ready and says so', async () => {
      const w = setup();
      const target = selfTarget();
      w.targets.put(target);
      const added: TargetClient[] = [];
      w.registry.on('added', (c) => added.push(c));

      const result = await w.reconciler.reconcile(KEY);

      expect(result).to.deep.equal({ requeueAfterMs: 10_000 });

      // The probe read the singleton ClusterSummary through the target client.
      expect(w.probe.callCount).to.equal(1);
      expect(w.probe.firstCall.args[0]).to.deep.equal({ group: 'multicluster.admiralty.io', version: 'v1alpha1', plural: 'clustersummaries', name: 'singleton' });

      // Node created with the desired labels and taint.
      expect(w.src.core.createNode.callCount).to.equal(1);
      const created = w.src.core.createNode.firstCall.args[0].body as V1Node;
      expect(created.metadata!.name).to.equal(NODE);
      expect(created.metadata!.labels).to.deep.include({
        'virtual-kubelet.io/provider': 'admiralty',
        type: 'virtual-kubelet',
        'kubernetes.io/hostname': NODE,
        [`${P}target-namespace`]: 'default',
        [`${P}target-name`]: 'local',
        'topology.kubernetes.io/region': 'eu',
      });
      expect(created.spec!.taints).to.deep.equal([{ key: 'virtual-kubelet.io/provider', value: 'admiralty', effect: 'NoSchedule' }]);

      // Then the status through the status subresource, Ready True, capacity from the summary.
      expect(w.src.core.patchNodeStatus.callCount).to.equal(1);
      expect(w.src.core.patchNodeStatus.calledAfter(w.src.core.createNode)).to.equal(true);
      const statusArgs = w.src.core.patchNodeStatus.firstCall.args[0];
      expect(statusArgs.name).to.equal(NODE);
      const ready = (statusArgs.body.status.conditions as V1NodeCondition[]).find((c) => c.type === 'Ready')!;
      expect(ready).to.deep.include({ status: 'True', reason: 'TargetReady' });
      expect(new Date(ready.lastHeartbeatTime!).getTime()).to.equal(T0);
      expect(statusArgs.body.status.capacity).to.deep.equal({ cpu: '8', memory: '32Gi', pods: '110' });
      expect(statusArgs.body.status.daemonEndpoints).to.deep.equal({ kubeletEndpoint: { Port: 10250 } });
      expect(w.src.core.patchNode.called).to.equal(false);

      // Lease created, held by the node, owned by it.
      expect(w.src.coordination.createNamespacedLease.callCount).to.equal(1);
      const lease = w.src.coordination.createNamespacedLease.firstCall.args[0];
      expect(lease.namespace).to.equal('kube-node-lease');
      expect(lease.body.metadata).to.deep.include({ name: NODE, namespace: 'kube-node-lease' });
      expect(lease.body.metadata.ownerReferences).to.deep.equal([{ apiVersion: 'v1', kind: 'Node', name: NODE, uid: 'node-uid-1' }]);
      expect(lease.body.spec).to.deep.include({ holderIdentity: NODE, leaseDurationSeconds: 40 });
      expect(new Date(lease.body.spec.renewTime).getTime()).to.equal(T0);

      // Target status: Ready True, the virtual node's name, the observed generation.
      expect(w.src.custom.patchNamespacedCustomObjectStatus.callCount).to.equal(1);
      expect(w.src.custom.patchClusterCustomObjectStatus.called).to.equal(false);
      const patch = w.src.custom.patchNamespacedCustomObjectStatus.firstCall.args[0];
      expect(patch).to.deep.include({ group: 'multicluster.admiralty.io', version: 'v1alpha1', plural: 'targets', namespace: 'default', name: 'local' });
      expect(patch.body.status.virtualNodeName).to.equal(NODE);
      expect(patch.body.status.observedGeneration).to.equal(1);
      expect(patch.body.status.conditions).to.deep.equal([
        { type: 'Ready', status: 'True', reason: 'TargetReady', message: 'target reachable at https://source.example:6443', observedGeneration: 1, lastTransitionTime: new Date(T0).toISOString() },
      ]);

      // Events: the Target became Ready, the node was created.
      expect(w.events).to.deep.equal([
        { type: 'Normal', reason: 'TargetReady', message: 'target reachable at https://source.example:6443', kind: 'Target', name: 'local', namespace: 'default', uid: 'target-uid' },
        { type: 'Normal', reason: 'VirtualNodeCreated', message: 'virtual node for Target default/local', kind: 'Node', name: NODE, namespace: undefined, uid: 'node-uid-1' },
      ]);

      // Registry: the self client, under the node's name, healthy.
      const client = w.registry.get(KEY)!;
      expect(client).to.include({ key: KEY, self: true, fingerprint: 'self' });
      expect(w.registry.byNodeName(NODE)).to.equal(client);
      expect(added).to.deep.equal([client]);
      expect(w.registry.health(KEY)).to.deep.include({ ready: true, reason: 'TargetReady', sinceMs: T0 });
      expect(w.health).to.deep.equal([[KEY, true]]);
    });

    it('writes the node status heartbeat on time after the wall clock is set back', async () => {
      const w = setup();
      w.targets.put(selfTarget());
      await w.reconciler.reconcile(KEY);
      expect(w.src.core.patchNodeStatus.callCount).to.equal(1);
      w.clock.stepWallClock(-3_600_000);
      w.clock.advance(60_000);
      await w.reconciler.reconcile(KEY);
      expect(w.src.core.patchNodeStatus.callCount).to.equal(2);
    });

    it('then renews the Lease every round and writes the node status only when the interval has passed', async () => {
      const w = setup();
      const target = selfTarget();
      w.targets.put(target);
      await w.reconciler.reconcile(KEY);
      applyStatusPatch(target, w.src.custom.patchNamespacedCustomObjectStatus.firstCall.args[0]);
      const events = w.events.length;

      // 10 s later: nothing changed.
      w.clock.advance(10_000);
      expect(await w.reconciler.reconcile(KEY)).to.deep.equal({ requeueAfterMs: 10_000 });
      expect(w.src.core.createNode.callCount).to.equal(1);
      expect(w.src.core.patchNode.called).to.equal(false);
      expect(w.src.core.patchNodeStatus.callCount).to.equal(1, 'no node status write before nodeStatusIntervalMs');
      expect(w.src.custom.patchNamespacedCustomObjectStatus.callCount).to.equal(1, 'no Target status write when nothing changed');
      expect(w.src.coordination.createNamespacedLease.callCount).to.equal(1);
      expect(w.src.coordination.replaceNamespacedLease.callCount).to.equal(1);
      const renewed = w.src.coordination.replaceNamespacedLease.firstCall.args[0];
      expect(renewed).to.deep.include({ name: NODE, namespace: 'kube-node-lease' });
      expect(new Date(renewed.body.spec.renewTime).getTime()).to.equal(T0 + 10_000);
      expect(renewed.body.metadata.ownerReferences).to.deep.equal([{ apiVersion: 'v1', kind: 'Node', name: NODE, uid: 'node-uid-1' }]);
      expect(w.events.length).to.equal(events, 'no event when the health did not change');

      // 59.999 s after the last status write: still nothing.
      w.clock.advance(49_999);
      await w.reconciler.reconcile(KEY);
      expect(w.src.core.patchNodeStatus.callCount).to.equal(1);
      expect(w.src.coordination.replaceNamespacedLease.callCount).to.equal(2);

      // 60 s after the last status write: the heartbeat.
      w.clock.advance(1);
      await w.reconciler.reconcile(KEY);
      expect(w.src.core.patchNodeStatus.callCount).to.equal(2);
      const heartbeat = w.src.core.patchNodeStatus.secondCall.args[0].body.status;
      const ready = (heartbeat.conditions as V1NodeCondition[]).find((c) => c.type === 'Ready')!;
      expect(ready.status).to.equal('True');
      expect(new Date(ready.lastHeartbeatTime!).getTime()).to.equal(T0 + 60_000);
      expect(new Date(ready.lastTransitionTime!).getTime()).to.equal(T0, 'a heartbeat is not a transition');
      expect(w.src.coordination.replaceNamespacedLease.callCount).to.equal(3);
      expect(new Date(readyOf(w.src.nodes.get(NODE))!.lastHeartbeatTime!).getTime()).to.equal(T0 + 60_000);
      expect(w.src.custom.patchNamespacedCustomObjectStatus.callCount).to.equal(1);
      expect(w.src.core.createNode.callCount).to.equal(1);
    });

    it('takes the node from the virtual nodes cache when it is there, and reads it from the apiserver only when it is not', async () => {
      const virtualNodes = new MapCache<V1Node>();
      const w = setup({ virtualNodes });
      w.targets.put(selfTarget());
      await w.reconciler.reconcile(KEY); // not cached yet: read (404), created
      expect(w.src.core.readNode.callCount).to.equal(1);
      expect(w.src.core.createNode.callCount).to.equal(1);
      // The informer shows the node, with a label of ours changed by hand since.
      const cached = clone(w.src.nodes.get(NODE)!);
      cached.metadata!.labels = { ...cached.metadata!.labels, [TARGET_NAME_LABEL]: 'edited' };
      virtualNodes.put(cached);
      w.clock.advance(10_000);
      await w.reconciler.reconcile(KEY);
      expect(w.src.core.readNode.callCount, 'no read: the cache has it').to.equal(1);
      expect(w.src.core.patchNode.callCount, 'the patch is computed from the cached node').to.equal(1);
      expect(w.src.core.patchNode.firstCall.args[0].body.metadata.labels[TARGET_NAME_LABEL]).to.equal('local');
      // Gone from the cache (deleted): read again.
      virtualNodes.remove(cached);
      w.clock.advance(10_000);
      await w.reconciler.reconcile(KEY);
      expect(w.src.core.readNode.callCount).to.equal(2);
    });

    it('renews the Lease by writing back what its last write returned, reading it only after a conflict or once it is gone', async () => {
      const w = setup();
      w.targets.put(selfTarget());
      await w.reconciler.reconcile(KEY); // reads it (none yet) and creates the Lease
      expect(w.src.coordination.readNamespacedLease.callCount).to.equal(1);
      const lease = () => w.src.leases.get(`kube-node-lease/${NODE}`)!;
      for (let i = 1; i <= 3; i++) {
        w.clock.advance(10_000);
        await w.reconciler.reconcile(KEY);
      }
      expect(w.src.coordination.replaceNamespacedLease.callCount).to.equal(3);
      expect(w.src.coordination.readNamespacedLease.callCount, 'no read before a renewal').to.equal(1);
      expect(new Date(lease().spec!.renewTime!).getTime()).to.equal(T0 + 30_000);

      // Someone else writes it (a label): our write conflicts, we read it, keep their change and renew.
      w.src.leases.set(`kube-node-lease/${NODE}`, { ...lease(), metadata: { ...lease().metadata, labels: { by: 'someone' }, resourceVersion: '1000' } });
      w.clock.advance(10_000);
      await w.reconciler.reconcile(KEY);
      expect(w.src.coordination.readNamespacedLease.callCount).to.equal(2);
      expect(lease().metadata?.labels).to.deep.equal({ by: 'someone' });
      expect(new Date(lease().spec!.renewTime!).getTime()).to.equal(T0 + 40_000);
      expect(lease().spec!.acquireTime, 'acquired once').to.deep.equal(w.src.coordination.createNamespacedLease.firstCall.args[0].body.spec.acquireTime);

      // It is deleted: the write finds it gone, the read too, and it is created again.
      w.src.leases.delete(`kube-node-lease/${NODE}`);
      w.clock.advance(10_000);
      await w.reconciler.reconcile(KEY);
      expect(w.src.coordination.createNamespacedLease.callCount).to.equal(2);
      expect(new Date(lease().spec!.renewTime!).getTime()).to.equal(T0 + 50_000);
      w.clock.advance(10_000);
      await w.reconciler.reconcile(KEY);
      expect(w.src.coordination.readNamespacedLease.callCount, 'the created Lease is renewed without a read').to.equal(3);
      expect(new Date(lease().spec!.renewTime!).getTime()).to.equal(T0 + 60_000);
    });

    it('patches the node status at once when the health changes, and the Target status too', async () => {
      let up = true;
      const w = setup({ probe: async () => (up ? clone(SUMMARY) : Promise.reject(Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:6443'), { code: 'ECONNREFUSED' }))) });
      const target = selfTarget();
      w.targets.put(target);
      await w.reconciler.reconcile(KEY);
      applyStatusPatch(target, w.src.custom.patchNamespacedCustomObjectStatus.firstCall.args[0]);

      up = false;
      w.clock.advance(10_000);
      await w.reconciler.reconcile(KEY);
      expect(w.src.core.patchNodeStatus.callCount).to.equal(2);
      expect(readyOf(w.src.nodes.get(NODE))).to.deep.include({ status: 'False', reason: 'TargetUnreachable' });
      expect(new Date(readyOf(w.src.nodes.get(NODE))!.lastTransitionTime!).getTime()).to.equal(T0 + 10_000);
      expect(w.src.custom.patchNamespacedCustomObjectStatus.callCount).to.equal(2);
      const cond = w.src.custom.patchNamespacedCustomObjectStatus.secondCall.args[0].body.status.conditions[0];
      expect(cond).to.deep.include({ status: 'False', reason: 'TargetUnreachable', lastTransitionTime: new Date(T0 + 10_000).toISOString() });
      expect(w.events.at(-1)).to.deep.include({ type: 'Warning', reason: 'TargetUnreachable', kind: 'Target' });
      expect(w.registry.health(KEY)).to.deep.include({ ready: false, sinceMs: T0 + 10_000 });
      expect(w.health).to.deep.equal([
        [KEY, true],
        [KEY, false],
      ]);
    });
  });

  it('times an outage from its first unreachable probe, not from an earlier refusal of another kind', async () => {
    // Refused credentials for an hour (the delegates there keep running), then no answer: the
    // outage, which failover-after counts from, begins at the first probe that got none.
    let refuse = true;
    const w = setup({
      probe: async () =>
        Promise.reject(
          refuse
            ? new ApiException(403, 'Forbidden', '{"kind":"Status","reason":"Forbidden","message":"no"}', {})
            : Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:6443'), { code: 'ECONNREFUSED' }),
        ),
    });
    w.targets.put(selfTarget());
    await w.reconciler.reconcile(KEY);
    expect(w.registry.health(KEY)).to.deep.include({ ready: false, reason: 'TargetForbidden', sinceMs: T0 });
    refuse = false;
    w.clock.advance(3_600_000);
    await w.reconciler.reconcile(KEY);
    w.clock.advance(10_000);
    await w.reconciler.reconcile(KEY);
    // Ready has been False all along (the condition's transition time stays), the outage is new.
    expect(w.registry.health(KEY)).to.deep.include({ ready: false, reason: 'TargetUnreachable', sinceMs: T0, outageSinceMs: T0 + 3_600_000, outageSinceMonoMs: w.clock.monotonicMs() - 10_000 });
    // A refusal meanwhile (an apiserver starting) does not start the outage again; Ready ends it.
    refuse = true;
    w.clock.advance(10_000);
    await w.reconciler.reconcile(KEY);
    refuse = false;
    w.clock.advance(10_000);
    await w.reconciler.reconcile(KEY);
    expect(w.registry.health(KEY)).to.deep.include({ reason: 'TargetUnreachable', outageSinceMs: T0 + 3_600_000, outageSinceMonoMs: w.clock.monotonicMs() - 30_000 });
    w.probe.callsFake((async () => clone(SUMMARY)) as never);
    w.clock.advance(10_000);
    await w.reconciler.reconcile(KEY);
    expect(w.registry.health(KEY)).to.deep.include({ ready: true, outageSinceMs: undefined, outageSinceMonoMs: undefined });
  });

  it('writes a ClusterTarget status through the cluster-scoped status subresource', async () => {
    const w = setup();
    w.clusterTargets.put({ metadata: { name: 'local', uid: 'ct-uid', generation: 3 }, spec: { self: true } });
    await w.reconciler.reconcile('ClusterTarget/local');
    expect(w.src.core.createNode.firstCall.args[0].body.metadata.name).to.equal('admiralty-cluster-local');
    expect(w.src.core.createNode.firstCall.args[0].body.metadata.labels).to.deep.include({ [`${P}cluster-target-name`]: 'local' });
    expect(w.src.custom.patchNamespacedCustomObjectStatus.called).to.equal(false);
    const patch = w.src.custom.patchClusterCustomObjectStatus.firstCall.args[0];
    expect(patch).to.deep.include({ group: 'multicluster.admiralty.io', version: 'v1alpha1', plural: 'clustertargets', name: 'local' });
    expect(patch.body.status).to.deep.include({ virtualNodeName: 'admiralty-cluster-local', observedGeneration: 3 });
  });

  describe('unhealthy targets: a NotReady node, a Ready False Target, a Warning event', () => {
    const econnrefused = () => Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:6443'), { code: 'ECONNREFUSED' });
    const cases: { why: string; target: Target; secret?: V1Secret; probe?: () => Promise<unknown>; reason: string; message: RegExp; probed: boolean }[] = [
      {
        why: 'kubeconfig Secret missing',
        target: { metadata: { name: 'local', namespace: 'default', uid: 'target-uid', generation: 1 }, spec: { kubeconfigSecret: { name: 'kc' } } },
        reason: 'SecretNotFound',
        message: /^Secret default\/kc does not exist$/,
        probed: false,
      },
      {
        why: 'kubeconfig Secret without the key',
        target: { metadata: { name: 'local', namespace: 'default', uid: 'target-uid', generation: 1 }, spec: { kubeconfigSecret: { name: 'kc', key: 'other' } } },
        secret: kubeconfigSecret('https://remote.example:6443'),
        reason: 'SecretKeyMissing',
        message: /has no key "other" \(it has: config\)/,
        probed: false,
      },
      {
        why: 'invalid spec',
        target: { metadata: { name: 'local', namespace: 'default', uid: 'target-uid', generation: 1 }, spec: { self: true, kubeconfigSecret: { name: 'kc' } } },
        reason: 'InvalidSpec',
        message: /mutually exclusive/,
        probed: false,
      },
      {
        why: 'probe 404: no ClusterSummary in the target',
        target: selfTarget(),
        probe: async () => Promise.reject(notFound()),
        reason: 'ClusterSummaryMissing',
        message: /^the target at https:\/\/source.example:6443 has no ClusterSummary "singleton"/,
        probed: true,
      },
      {
        why: 'probe network error',
        target: selfTarget(),
        probe: async () => Promise.reject(econnrefused()),
        reason: 'TargetUnreachable',
        message: /^cannot reach the target at https:\/\/source.example:6443: connect ECONNREFUSED 10.0.0.1:6443$/,
        probed: true,
      },
      {
        why: 'probe 403',
        target: selfTarget(),
        probe: async () => Promise.reject(new ApiException(403, 'Forbidden', '{"kind":"Status","reason":"Forbidden","message":"no"}', {})),
        reason: 'TargetForbidden',
        message: /^the target refused our credentials at https:\/\/source.example:6443: no$/,
        probed: true,
      },
      {
        why: 'probe answers a ClusterSummary whose node pools are not a list',
        target: selfTarget(),
        probe: async () => ({ metadata: { name: 'singleton' }, nodePools: 'all of them' }),
        reason: 'ClusterSummaryInvalid',
        message: /^the target at https:\/\/source.example:6443 answered a ClusterSummary "singleton" that is not one: nodePools must be a list$/,
        probed: true,
      },
      {
        why: 'probe answers a ClusterSummary with a node of the wrong shape',
        target: selfTarget(),
        probe: async () => ({ metadata: { name: 'singleton' }, nodePools: [{ labels: {}, nodes: [{ name: 'n1', allocatable: { cpu: 4 }, free: {} }] }] }),
        reason: 'ClusterSummaryInvalid',
        message: /nodePools\[0\]\.nodes\[0\]\.allocatable and \.free must map resource names to quantity strings$/,
        probed: true,
      },
      {
        why: "kubeconfig that reads the provider's own service-account token",
        target: { metadata: { name: 'local', namespace: 'default', uid: 'target-uid', generation: 1 }, spec: { kubeconfigSecret: { name: 'kc' } } },
        secret: rawKubeconfigSecret('https://remote.example:6443', 'token-file: /var/run/secrets/kubernetes.io/serviceaccount/token'),
        reason: 'KubeconfigUnsupported',
        message: /user "u": field "token-file" reads a file of the provider's machine/,
        probed: false,
      },
      {
        why: 'kubeconfig whose server is the cloud metadata service',
        target: { metadata: { name: 'local', namespace: 'default', uid: 'target-uid', generation: 1 }, spec: { kubeconfigSecret: { name: 'kc' } } },
        secret: kubeconfigSecret('https://169.254.169.254'),
        reason: 'ServerNotAllowed',
        message: /server address 169\.254\.169\.254 is not allowed: it is link-local/,
        probed: false,
      },
      {
        why: "probe 500 whose Status message is the remote server's hostile text",
        target: selfTarget(),
        probe: async () => Promise.reject(new ApiException(500, 'x', JSON.stringify({ kind: 'Status', message: `line one\n\u001b[31mline two Bearer stolen ${'x'.repeat(1000)}` }), {})),
        reason: 'TargetUnreachable',
        // One line, no escape sequences, no credential, cut to 256 characters.
        message: /^cannot reach the target at https:\/\/source.example:6443: line one \[31mline two Bearer <redacted> x{215}…$/,
        probed: true,
      },
    ];
    for (const c of cases) {
      it(`${c.why} -> ${c.reason}`, async () => {
        const w = setup({ probe: c.probe });
        w.targets.put(c.target);
        if (c.secret) w.src.secrets.set('default/kc', c.secret);

        expect(await w.reconciler.reconcile(KEY)).to.deep.equal({ requeueAfterMs: 10_000 });

        expect(w.probe.called).to.equal(c.probed);
        const patch = w.src.custom.patchNamespacedCustomObjectStatus.firstCall.args[0];
        expect(patch.body.status.virtualNodeName).to.equal(NODE);
        const cond = patch.body.status.conditions[0];
        expect(cond).to.deep.include({ type: 'Ready', status: 'False', reason: c.reason });
        expect(cond.message, cond.message).to.match(c.message);

        const warnings = w.events.filter((e) => e.type === 'Warning');
        expect(warnings).to.have.length(1);
        expect(warnings[0]).to.deep.include({ reason: c.reason, kind: 'Target', name: 'local', namespace: 'default', uid: 'target-uid' });
        expect(warnings[0]!.message).to.match(c.message);

        // The node exists anyway, NotReady for the same reason, with zero capacity (no summary).
        expect(w.src.core.createNode.callCount).to.equal(1);
        const ready = readyOf(w.src.nodes.get(NODE))!;
        expect(ready).to.deep.include({ status: 'False', reason: c.reason });
        expect(w.src.nodes.get(NODE)!.status!.capacity).to.deep.equal({ cpu: '0', memory: '0', pods: '0' });
        expect(w.src.coordination.createNamespacedLease.callCount).to.equal(1);

        expect(w.registry.health(KEY)).to.deep.include({ ready: false, reason: c.reason });
        if (c.probed) expect(w.registry.get(KEY)).to.not.equal(undefined, 'a reachable-but-unhappy target keeps its client');
        else expect(w.registry.get(KEY)).to.equal(undefined, 'no client without usable credentials');
      });
    }

    it('reads the kubeconfig Secret of the Target namespace and probes the server it names', async () => {
      const w = setup();
      w.targets.put({ metadata: { name: 'local', namespace: 'default', uid: 'target-uid', generation: 1 }, spec: { kubeconfigSecret: { name: 'kc' } } });
      w.src.secrets.set('default/kc', kubeconfigSecret('https://remote.example:6443'));
      await w.reconciler.reconcile(KEY);
      expect(w.src.core.readNamespacedSecret.firstCall.args[0]).to.deep.equal({ name: 'kc', namespace: 'default' });
      const cond = w.src.custom.patchNamespacedCustomObjectStatus.firstCall.args[0].body.status.conditions[0];
      expect(cond).to.deep.include({ status: 'True', reason: 'TargetReady', message: 'target reachable at https://remote.example:6443' });
      const client = w.registry.get(KEY)!;
      expect(client.self).to.equal(false);
      expect(client.kubeConfig.getCurrentCluster()!.server).to.equal('https://remote.example:6443');
      // Every API call through it carries a deadline: a target that never answers cannot hold a worker.
      const context = new RequestContext('https://remote.example:6443/api/v1/pods', HttpMethod.GET);
      await client.kubeConfig.applySecurityAuthentication(context);
      expect(context.getSignal()).to.be.instanceOf(AbortSignal);
    });

    it('says TargetForbidden when our identity may not manage pods in the Target namespace of the target', async () => {
      const forbidden = Object.assign(new Error('forbidden'), { code: 403, body: JSON.stringify({ kind: 'Status', reason: 'Forbidden', message: 'pods is forbidden' }) });
      const w = setup({ podsProbe: async () => Promise.reject(forbidden) });
      w.targets.put({ metadata: { name: 'local', namespace: 'default', uid: 'target-uid', generation: 1 }, spec: { kubeconfigSecret: { name: 'kc' } } });
      w.src.secrets.set('default/kc', kubeconfigSecret('https://remote.example:6443'));
      await w.reconciler.reconcile(KEY);
      expect(w.podsProbe.firstCall.args[0]).to.deep.equal({ namespace: 'default', limit: 1 });
      const cond = w.src.custom.patchNamespacedCustomObjectStatus.firstCall.args[0].body.status.conditions[0];
      expect(cond).to.deep.include({ status: 'False', reason: 'TargetForbidden' });
      expect(cond.message).to.match(/create a Source/);
    });

    it('says CacheBudgetExceeded while an informer of a reachable target refuses what its server has, and TargetReady once a list fits', async () => {
      const w = setup();
      w.targets.put(selfTarget());
      w.registry.cacheBudget(KEY).refuse('delegates', 'the target holds too much');
      await w.reconciler.reconcile(KEY);
      const cond = w.src.custom.patchNamespacedCustomObjectStatus.lastCall.args[0].body.status.conditions[0];
      expect(cond).to.deep.include({ status: 'False', reason: 'CacheBudgetExceeded', message: 'the target holds too much' });
      expect(readyOf(w.src.nodes.get(NODE))).to.deep.include({ status: 'False', reason: 'CacheBudgetExceeded' });
      // Not an outage: nothing fails over for it.
      expect(w.registry.health(KEY)?.outageSinceMs).to.equal(undefined);

      w.registry.cacheBudget(KEY).clear('delegates');
      w.clock.advance(10_000);
      await w.reconciler.reconcile(KEY);
      expect(w.registry.health(KEY)).to.deep.include({ ready: true, reason: 'TargetReady' });
    });

    it('says ClusterSummaryStale once the summary has kept one version for three of its renew intervals and a probe period, and TargetReady at its next version', async () => {
      let summary: ClusterSummary = { ...clone(SUMMARY), metadata: { ...SUMMARY.metadata, resourceVersion: '41' }, renewIntervalSeconds: 20, renewTime: '2024-05-01T09:59:59.000Z' };
      const w = setup({ probe: async () => clone(summary) });
      w.targets.put(selfTarget());
      await w.reconciler.reconcile(KEY);
      expect(w.registry.health(KEY)).to.deep.include({ ready: true, reason: 'TargetReady' });
      // 3 x 20 s + 10 s: a probe just before a renewal sees it one period late.
      w.clock.advance(70_000);
      await w.reconciler.reconcile(KEY);
      expect(w.registry.health(KEY), 'at the bound, still fresh').to.deep.include({ ready: true });
      w.clock.advance(1_000);
      await w.reconciler.reconcile(KEY);
      const cond = w.src.custom.patchNamespacedCustomObjectStatus.lastCall.args[0].body.status.conditions[0];
      expect(cond).to.deep.include({ status: 'False', reason: 'ClusterSummaryStale' });
      expect(cond.message).to.equal(
        'the target at https://source.example:6443: its ClusterSummary has not changed for 71 s, though its writer rewrites it every 20 s at the longest (last written at 2024-05-01T09:59:59.000Z, by its clock): the provider there (its summary component) is down or cannot write, so what is free on its nodes is not known, and no new pod goes there until the summary is written again',
      );
      expect(readyOf(w.src.nodes.get(NODE))).to.deep.include({ status: 'False', reason: 'ClusterSummaryStale' });
      expect(w.events.filter((e) => e.type === 'Warning').map((e) => e.reason)).to.deep.equal(['ClusterSummaryStale']);
      // Not an outage: nothing fails over for it.
      expect(w.registry.health(KEY)?.outageSinceMs).to.equal(undefined);

      summary = { ...summary, metadata: { ...summary.metadata, resourceVersion: '97' } };
      w.clock.advance(10_000);
      await w.reconciler.reconcile(KEY);
      expect(w.registry.health(KEY)).to.deep.include({ ready: true, reason: 'TargetReady' });
    });

    it('counts staleness again from the first read after an outage: the writer there was down too, and gets three renew intervals to write', async () => {
      const summary = { ...clone(SUMMARY), metadata: { ...SUMMARY.metadata, resourceVersion: '41' }, renewIntervalSeconds: 20, renewTime: '2024-05-01T09:59:59.000Z' };
      let down = false;
      const w = setup({ probe: async () => (down ? Promise.reject(Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:6443'), { code: 'ECONNREFUSED' })) : clone(summary)) });
      w.targets.put(selfTarget());
      await w.reconciler.reconcile(KEY);
      down = true;
      w.clock.advance(60_000);
      await w.reconciler.reconcile(KEY);
      expect(w.registry.health(KEY)).to.deep.include({ ready: false, reason: 'TargetUnreachable' });
      w.clock.advance(300_000);
      down = false;
      await w.reconciler.reconcile(KEY);
      expect(w.registry.health(KEY), 'the same version as before the outage, read again').to.deep.include({ ready: true, reason: 'TargetReady' });
      w.clock.advance(71_000);
      await w.reconciler.reconcile(KEY);
      expect(w.registry.health(KEY)).to.deep.include({ ready: false, reason: 'ClusterSummaryStale' });
    });

    it('never calls a summary stale that promises no renewal (an earlier version, Admiralty), however long it stays the same', async () => {
      const w = setup({ probe: async () => ({ ...clone(SUMMARY), metadata: { ...SUMMARY.metadata, resourceVersion: '41' } }) });
      w.targets.put(selfTarget());
      for (let i = 0; i < 3; i++) {
        await w.reconciler.reconcile(KEY);
        w.clock.advance(3_600_000);
      }
      expect(w.registry.health(KEY)).to.deep.include({ ready: true, reason: 'TargetReady' });
    });

    it("forgets what it saw of a deleted Target's summary: a Target made again under its name starts afresh", async () => {
      const summary = { ...clone(SUMMARY), metadata: { ...SUMMARY.metadata, resourceVersion: '41' }, renewIntervalSeconds: 20, renewTime: '2024-05-01T09:59:59.000Z' };
      const w = setup({ probe: async () => clone(summary) });
      w.targets.put(selfTarget());
      await w.reconciler.reconcile(KEY);
      w.targets.remove(selfTarget());
      await w.reader.reconcile(KEY);
      w.clock.advance(600_000);
      w.targets.put(selfTarget());
      await w.reconciler.reconcile(KEY);
      expect(w.registry.health(KEY)).to.deep.include({ ready: true, reason: 'TargetReady' });
    });

    it('says on a ClusterTarget without a ClusterSource where a Source lets its pods go, and turns TargetReady once a ClusterSource does', async () => {
      const rights = new Map([
        ['', false],
        ['web', true],
        ['batch', false],
      ]);
      const reviews = sinon.stub(AuthorizationV1Api.prototype, 'createSelfSubjectAccessReview').callsFake((async ({ body }: { body: { spec: { resourceAttributes: { namespace?: string } } } }) => ({
        status: { allowed: rights.get(body.spec.resourceAttributes.namespace ?? '') },
      })) as never);
      sinon.stub(AuthenticationV1Api.prototype, 'createSelfSubjectReview').resolves({ status: { userInfo: { username: 'c1' } } } as never);
      const authorization = new TargetAuthorization({ clock: new FakeClock(T0), namespaces: () => ['web', 'batch'] });
      const w = setup({ authorization });
      const key = 'ClusterTarget/remote';
      w.clusterTargets.put({ metadata: { name: 'remote', uid: 'ct-uid', generation: 1 }, spec: { kubeconfigSecret: { name: 'kc', namespace: 'default' } } });
      w.src.secrets.set('default/kc', kubeconfigSecret('https://remote.example:6443'));
      const ready = () => w.src.custom.patchClusterCustomObjectStatus.lastCall.args[0].body.status.conditions[0];

      await w.reconciler.reconcile(key);
      expect(ready()).to.deep.include({
        status: 'True',
        reason: 'NoClusterSource',
        message:
          'target reachable at https://remote.example:6443; no ClusterSource there authorizes this source (user "c1") in every namespace, so only pods of the namespaces where a Source does are offered this target (web); not in batch',
      });
      expect(authorization.refuses(key, 'batch')).to.match(/create a Source in namespace batch of that cluster with spec.userName "c1", or a ClusterSource/);
      expect(authorization.refuses(key, 'web')).to.equal(undefined);

      rights.set('web', false);
      await w.reconciler.reconcile(key);
      expect(ready()).to.deep.include({ status: 'True', reason: 'SourceNotAuthorized' });

      rights.set('', true);
      reviews.resetHistory();
      await w.reconciler.reconcile(key);
      expect(ready()).to.deep.include({ status: 'True', reason: 'TargetReady', message: 'target reachable at https://remote.example:6443' });
      expect(authorization.refuses(key, 'batch')).to.equal(undefined);
      expect(reviews.callCount, 'one review, cluster-wide').to.equal(1);

      // Gone: forgotten.
      rights.set('', false);
      await w.reconciler.reconcile(key);
      expect(authorization.refuses(key, 'batch')).to.not.equal(undefined);
      w.clusterTargets.remove({ metadata: { name: 'remote' } } as Target);
      await w.reader.reconcile(key);
      expect(authorization.refuses(key, 'batch')).to.equal(undefined);
    });

    it("asks a Target's cluster, in the Target's namespace only, whether it may create pods: TargetForbidden naming the Source until it may, then TargetReady", async () => {
      const rights = new Map([
        ['', true],
        ['default', false],
      ]);
      const reviews = sinon.stub(AuthorizationV1Api.prototype, 'createSelfSubjectAccessReview').callsFake((async ({ body }: { body: { spec: { resourceAttributes: { namespace?: string } } } }) => ({
        status: { allowed: rights.get(body.spec.resourceAttributes.namespace ?? '') },
      })) as never);
      sinon.stub(AuthenticationV1Api.prototype, 'createSelfSubjectReview').resolves({ status: { userInfo: { username: 'c1' } } } as never);
      const authorization = new TargetAuthorization({ clock: new FakeClock(T0), namespaces: () => ['default', 'web'] });
      const w = setup({ authorization });
      w.targets.put({ metadata: { name: 'local', namespace: 'default', uid: 'target-uid', generation: 1 }, spec: { kubeconfigSecret: { name: 'kc' } } });
      w.src.secrets.set('default/kc', kubeconfigSecret('https://remote.example:6443'));
      const ready = () => w.src.custom.patchNamespacedCustomObjectStatus.lastCall.args[0].body.status.conditions[0];
      const advice =
        'the cluster of Target default/local does not authorize this source (user "c1") to create pods in namespace default: create a Source in namespace default of that cluster with spec.userName "c1"';

      // Listing pods there would work (a read-only grant, say): creating them would not.
      await w.reconciler.reconcile(KEY);
      expect(ready()).to.deep.include({ status: 'False', reason: 'TargetForbidden', message: `target reachable at https://remote.example:6443, but ${advice}` });
      expect(readyOf(w.src.nodes.get(NODE))).to.deep.include({ status: 'False', reason: 'TargetForbidden' });
      expect(reviews.callCount, 'one review per probe').to.equal(1);
      expect(reviews.firstCall.args[0].body.spec.resourceAttributes).to.deep.include({ verb: 'create', resource: 'pods', namespace: 'default' });
      expect(authorization.refuses(KEY, 'default')).to.equal(advice);
      // Followed: a refusal the bind meets keeps the namespace off until the next probe.
      expect(authorization.refused(KEY, 'default', 'refused at bind')).to.equal(true);

      // The Source is created: the next probe offers the target again.
      rights.set('default', true);
      await w.reconciler.reconcile(KEY);
      expect(ready()).to.deep.include({ status: 'True', reason: 'TargetReady', message: 'target reachable at https://remote.example:6443' });
      expect(reviews.callCount, 'one review per probe').to.equal(2);
      expect(w.podsProbe.callCount, 'and pods may still be listed there').to.equal(1);
      expect(authorization.refuses(KEY, 'default')).to.equal(undefined);
      expect(authorization.refused(KEY, 'default', 'refused at bind'), 'still followed').to.equal(true);

      // Self: never asked, and forgotten (the provider's own binding is checked instead).
      w.targets.put({ metadata: { name: 'local', namespace: 'default', uid: 'target-uid', generation: 2 }, spec: { self: true } });
      await w.reconciler.reconcile(KEY);
      expect(reviews.callCount).to.equal(2);
      expect(authorization.refused(KEY, 'default', 'refused at bind')).to.equal(false);
    });

    it('keeps the client while the Secret is unchanged, and replaces it when it changes', async () => {
      const w = setup();
      w.targets.put({ metadata: { name: 'local', namespace: 'default', uid: 'target-uid', generation: 1 }, spec: { kubeconfigSecret: { name: 'kc' } } });
      w.src.secrets.set('default/kc', kubeconfigSecret('https://remote.example:6443'));
      const seen: string[] = [];
      w.registry.on('added', (c) => seen.push(`added ${c.kubeConfig.getCurrentCluster()!.server}`));
      w.registry.on('removed', (c) => seen.push(`removed ${c.kubeConfig.getCurrentCluster()!.server}`));
      await w.reconciler.reconcile(KEY);
      const first = w.registry.get(KEY);
      w.clock.advance(10_000);
      await w.reconciler.reconcile(KEY);
      expect(w.registry.get(KEY)).to.equal(first);
      w.src.secrets.set('default/kc', kubeconfigSecret('https://moved.example:6443'));
      w.clock.advance(10_000);
      await w.reconciler.reconcile(KEY);
      expect(w.registry.get(KEY)!.kubeConfig.getCurrentCluster()!.server).to.equal('https://moved.example:6443');
      expect(seen).to.deep.equal(['added https://remote.example:6443', 'removed https://remote.example:6443', 'added https://moved.example:6443']);
    });

    it('heals when the missing Secret appears: Ready True, a Normal event', async () => {
      const w = setup();
      w.targets.put({ metadata: { name: 'local', namespace: 'default', uid: 'target-uid', generation: 1 }, spec: { kubeconfigSecret: { name: 'kc' } } });
      await w.reconciler.reconcile(KEY);
      w.src.secrets.set('default/kc', kubeconfigSecret('https://remote.example:6443'));
      w.clock.advance(10_000);
      await w.reconciler.reconcile(KEY);
      expect(readyOf(w.src.nodes.get(NODE))).to.deep.include({ status: 'True', reason: 'TargetReady' });
      expect(w.events.map((e) => [e.type, e.reason])).to.deep.equal([
        ['Warning', 'SecretNotFound'],
        ['Normal', 'VirtualNodeCreated'],
        ['Normal', 'TargetReady'],
      ]);
    });

    // BUG (targets.ts probe(), lines ~421/428): registry.delete() also drops the stored health, so
    // recordHealth() sees no previous health every round: a Warning event every 10 s and a health
    // `sinceMs` that restarts each round. Unskip once fixed.
    it('records the Warning once, not on every round, while the Secret stays missing', async () => {
      const w = setup();
      w.targets.put({ metadata: { name: 'local', namespace: 'default', uid: 'target-uid', generation: 1 }, spec: { kubeconfigSecret: { name: 'kc' } } });
      await w.reconciler.reconcile(KEY);
      w.clock.advance(10_000);
      await w.reconciler.reconcile(KEY);
      expect(w.events.filter((e) => e.type === 'Warning')).to.have.length(1);
      expect(w.registry.health(KEY)!.sinceMs).to.equal(T0);
    });
  });

  describe('the binding of the source role for a self target', () => {
    const REF: TargetRef = { kind: 'Target', namespace: 'default', name: 'local' };
    const remote = (): Target => ({ metadata: { name: 'local', namespace: 'default', uid: 'target-uid', generation: 1 }, spec: { kubeconfigSecret: { name: 'kc' } } });

    it('the leader binds; the read side registers the self client only once the binding is in force', async () => {
      const w = setup();
      w.targets.put(selfTarget());
      w.selfBindings.allowed.resolves(false);
      await w.reconciler.reconcile(KEY); // probe: not in force yet; then the leader binds
      expect(w.registry.get(KEY)).to.equal(undefined);
      sinon.assert.calledOnceWithExactly(w.selfBindings.ensure, REF, 'target-uid');
      w.selfBindings.allowed.resolves(true);
      const registeredWith: boolean[] = [];
      w.registry.on('added', () => registeredWith.push(w.selfBindings.allowed.callCount === 2));
      await w.reader.reconcile(KEY);
      sinon.assert.calledWithExactly(w.selfBindings.allowed, REF);
      expect(registeredWith).to.deep.equal([true]);
      sinon.assert.notCalled(w.selfBindings.remove);
    });

    it('the read side never writes: no binding, no node, no status, no event', async () => {
      const w = setup();
      w.targets.put(selfTarget());
      await w.reader.reconcile(KEY);
      expect(w.registry.get(KEY)?.self).to.equal(true);
      expect(w.registry.health(KEY)).to.deep.include({ ready: true, reason: 'TargetReady' });
      sinon.assert.notCalled(w.selfBindings.ensure);
      sinon.assert.notCalled(w.selfBindings.remove);
      for (const stub of [
        w.src.core.createNode,
        w.src.core.patchNode,
        w.src.core.patchNodeStatus,
        w.src.core.deleteNode,
        w.src.custom.patchNamespacedCustomObjectStatus,
        w.src.coordination.createNamespacedLease,
        w.src.coordination.replaceNamespacedLease,
      ]) {
        sinon.assert.notCalled(stub);
      }
      expect(w.events).to.deep.equal([]);
      // Gone from the cache: the read side forgets the clients, and still writes nothing.
      w.targets.items.clear();
      await w.reader.reconcile(KEY);
      expect(w.registry.get(KEY)).to.equal(undefined);
      sinon.assert.notCalled(w.src.core.deleteNode);
    });

    it('the read side wakes the writer after each probe, every lease interval, and not once the Target is gone', async () => {
      const w = setup();
      w.targets.put(selfTarget());
      expect(await w.reader.reconcile(KEY)).to.deep.equal({ requeueAfterMs: 10_000 });
      expect(w.probed).to.deep.equal([KEY]);
      w.targets.items.clear();
      expect(await w.reader.reconcile(KEY)).to.equal(undefined);
      expect(w.probed).to.deep.equal([KEY]);
    });

    it('the write side writes nothing for a target not probed yet', async () => {
      const w = setup();
      w.targets.put(selfTarget());
      await w.writer.reconcile(KEY);
      sinon.assert.notCalled(w.src.core.createNode);
      sinon.assert.notCalled(w.src.custom.patchNamespacedCustomObjectStatus);
    });

    it('says TargetForbidden and registers no client while the binding is not in force, looks again within a second after writing it, and heals', async () => {
      const w = setup();
      w.targets.put(selfTarget());
      w.selfBindings.ensure.resolves(true);
      w.selfBindings.allowed.resolves(false);
      await w.reconciler.reconcile(KEY);
      expect(w.bindingsWritten, 'the leader asks the read side to probe again soon').to.deep.equal([KEY]);
      expect(w.registry.get(KEY)).to.equal(undefined);
      const cond = w.src.custom.patchNamespacedCustomObjectStatus.firstCall.args[0].body.status.conditions[0];
      expect(cond).to.deep.include({ status: 'False', reason: 'TargetForbidden' });
      expect(cond.message).to.match(/may not create pods in namespace default/);
      expect(readyOf(w.src.nodes.get(NODE))?.status).to.equal('False');

      w.selfBindings.ensure.resolves(false);
      w.selfBindings.allowed.resolves(true);
      applyStatusPatch(w.targets.get('local', 'default')!, w.src.custom.patchNamespacedCustomObjectStatus.lastCall.args[0]);
      expect(await w.reconciler.reconcile(KEY)).to.deep.equal({ requeueAfterMs: 10_000 });
      expect(w.bindingsWritten).to.deep.equal([KEY]);
      expect(w.registry.get(KEY)?.self).to.equal(true);
      const healed = w.src.custom.patchNamespacedCustomObjectStatus.lastCall.args[0].body.status.conditions[0];
      expect(healed).to.deep.include({ status: 'True', reason: 'TargetReady' });
    });

    it('says TargetForbidden with the reason when the binding cannot be made', async () => {
      const w = setup();
      w.targets.put(selfTarget());
      w.selfBindings.ensure.rejects(new ApiException(403, 'Forbidden', '{"kind":"Status","reason":"Forbidden","message":"cannot bind clusterrole"}', {}));
      w.selfBindings.allowed.resolves(false);
      await w.reconciler.reconcile(KEY);
      const cond = w.src.custom.patchNamespacedCustomObjectStatus.firstCall.args[0].body.status.conditions[0];
      expect(cond).to.deep.include({ status: 'False', reason: 'TargetForbidden' });
      expect(cond.message).to.match(/cannot bind ClusterRole multicluster-scheduler-source .*cannot bind clusterrole/);
      expect(w.registry.get(KEY)).to.equal(undefined);
    });

    it('takes the binding back when the Target stops being self, reading it only once for a remote target', async () => {
      const w = setup();
      w.targets.put(remote());
      w.src.secrets.set('default/kc', kubeconfigSecret('https://remote.example:6443'));
      await w.reconciler.reconcile(KEY);
      await w.reconciler.reconcile(KEY);
      sinon.assert.calledOnceWithExactly(w.selfBindings.remove, REF);
      sinon.assert.notCalled(w.selfBindings.ensure);
      sinon.assert.notCalled(w.selfBindings.allowed);
      // Self, then remote again: removed again.
      w.targets.put(selfTarget());
      await w.reconciler.reconcile(KEY);
      w.targets.put(remote());
      await w.reconciler.reconcile(KEY);
      sinon.assert.calledTwice(w.selfBindings.remove);
    });

    it('takes the binding back only once the read side has dropped the self clients (their watches act with it)', async () => {
      const w = setup();
      w.targets.put(selfTarget());
      await w.reconciler.reconcile(KEY);
      expect(w.registry.get(KEY)?.self).to.equal(true);
      // The leader sees the Target go before its own read side has: the binding stays.
      w.targets.items.clear();
      expect(await w.writer.reconcile(KEY)).to.deep.equal({ requeueAfterMs: 500 });
      sinon.assert.notCalled(w.selfBindings.remove);
      await w.reader.reconcile(KEY);
      expect(w.registry.get(KEY)).to.equal(undefined);
      expect(await w.writer.reconcile(KEY)).to.equal(undefined);
      sinon.assert.calledOnceWithExactly(w.selfBindings.remove, REF);
    });

    it('takes the binding back from a Target no longer self only once the read side has swapped its clients', async () => {
      const v = setup();
      v.targets.put(selfTarget());
      await v.reconciler.reconcile(KEY);
      v.targets.put(remote());
      v.src.secrets.set('default/kc', kubeconfigSecret('https://remote.example:6443'));
      expect(await v.writer.reconcile(KEY)).to.deep.equal({ requeueAfterMs: 500 });
      sinon.assert.notCalled(v.selfBindings.remove);
      await v.reader.reconcile(KEY);
      expect(v.registry.get(KEY)?.self).to.equal(false);
      await v.writer.reconcile(KEY);
      sinon.assert.calledOnceWithExactly(v.selfBindings.remove, REF);
    });

    it('removes the binding with the Target, and that of a ClusterTarget too', async () => {
      const w = setup();
      await w.reconciler.reconcile(KEY);
      await w.reconciler.reconcile('ClusterTarget/everywhere');
      expect(w.selfBindings.remove.args).to.deep.equal([[REF], [{ kind: 'ClusterTarget', namespace: '', name: 'everywhere' }]]);
    });
  });

  describe('a Target deleted from the cache', () => {
    function withOurNode(w: ReturnType<typeof setup>, labels?: Record<string, string>) {
      const ref: TargetRef = { kind: 'Target', namespace: 'default', name: 'local' };
      const node = readyNodeOf(ref);
      node.metadata!.uid = 'node-uid-9';
      if (labels) node.metadata!.labels = labels;
      w.src.nodes.set(NODE, node);
      w.src.leases.set(`kube-node-lease/${NODE}`, { metadata: { name: NODE, namespace: 'kube-node-lease', uid: 'lease-uid' }, spec: { holderIdentity: NODE } });
      const client = createTargetClient(ref, kubeConfig('https://source.example:6443'), 'self', true);
      w.registry.set(client, NODE);
      w.registry.setHealth(KEY, { ready: true, reason: 'TargetReady', message: 'ok', sinceMs: T0 });
      return client;
    }

    it('deletes its virtual node with a UID precondition, its Lease, and its registry entry', async () => {
      const w = setup();
      const client = withOurNode(w);
      const removed: TargetClient[] = [];
      w.registry.on('removed', (c) => removed.push(c));

      expect(await w.reconciler.reconcile(KEY)).to.equal(undefined);

      expect(w.src.core.deleteNode.callCount).to.equal(1);
      expect(w.src.core.deleteNode.firstCall.args[0]).to.deep.equal({ name: NODE, body: { preconditions: { uid: 'node-uid-9' } } });
      expect(w.src.coordination.deleteNamespacedLease.firstCall.args[0]).to.deep.equal({ name: NODE, namespace: 'kube-node-lease', body: { preconditions: { uid: 'lease-uid' } } });
      expect(w.registry.get(KEY)).to.equal(undefined);
      expect(w.registry.byNodeName(NODE)).to.equal(undefined);
      expect(w.registry.health(KEY)).to.equal(undefined);
      expect(removed).to.deep.equal([client]);
      expect(w.probe.called).to.equal(false);
      expect(w.src.core.createNode.called).to.equal(false);
      expect(w.src.custom.patchNamespacedCustomObjectStatus.called).to.equal(false);
    });

    it('is done when the node and Lease are already gone', async () => {
      const w = setup();
      expect(await w.reconciler.reconcile(KEY)).to.equal(undefined);
      expect(w.src.core.deleteNode.called).to.equal(false);
      expect(w.src.coordination.deleteNamespacedLease.called).to.equal(false);
    });

    it('leaves a Lease of the same name held by someone else', async () => {
      const w = setup();
      w.src.leases.set(`kube-node-lease/${NODE}`, { metadata: { name: NODE, namespace: 'kube-node-lease', uid: 'x' }, spec: { holderIdentity: 'a-real-kubelet' } });
      await w.reconciler.reconcile(KEY);
      expect(w.src.coordination.deleteNamespacedLease.called).to.equal(false);
    });

    it('leaves a node of the same name that is not ours alone', async () => {
      const w = setup();
      withOurNode(w, { 'kubernetes.io/hostname': NODE });
      await w.reconciler.reconcile(KEY);
      expect(w.src.core.deleteNode.called).to.equal(false);
      expect(w.src.coordination.deleteNamespacedLease.called).to.equal(false);
      expect(w.src.nodes.has(NODE)).to.equal(true);
      expect(w.registry.get(KEY)).to.equal(undefined);
    });

    it('throws (to retry) when the node cannot be deleted', async () => {
      const w = setup();
      withOurNode(w);
      w.src.core.deleteNode.rejects(new ApiException(500, 'boom', '{}', {}));
      const err = await rejection(w.reconciler.reconcile(KEY));
      expect(err.message).to.equal(`deleting virtual node ${NODE}`);
      expect(w.registry.get(KEY)).to.equal(undefined);
    });
  });

  it('refuses to take over an existing node that is not ours: throws, never writes to it', async () => {
    const w = setup();
    w.targets.put(selfTarget());
    w.src.nodes.set(NODE, { metadata: { name: NODE, uid: 'real-node', labels: { 'kubernetes.io/hostname': NODE } }, status: {} });

    const error = await rejection(w.reconciler.reconcile(KEY));
    expect(error.message).to.equal(`node ${NODE} exists and is not a virtual node of ours; refusing to take it over`);
    expect(w.src.core.createNode.called).to.equal(false);
    expect(w.src.core.patchNode.called).to.equal(false);
    expect(w.src.core.patchNodeStatus.called).to.equal(false);
    expect(w.src.core.deleteNode.called).to.equal(false);
    expect(w.src.coordination.createNamespacedLease.called).to.equal(false);
    expect(w.src.coordination.replaceNamespacedLease.called).to.equal(false);
    expect(w.src.nodes.get(NODE)!.metadata!.labels).to.deep.equal({ 'kubernetes.io/hostname': NODE });
  });

  it('removes labels added by hand and restores ours with a merge patch', async () => {
    const w = setup();
    const target = selfTarget();
    w.targets.put(target);
    await w.reconciler.reconcile(KEY);
    w.src.nodes.get(NODE)!.metadata!.labels = { ...w.src.nodes.get(NODE)!.metadata!.labels, 'added-by': 'hand', type: 'tampered' };
    w.clock.advance(10_000);
    await w.reconciler.reconcile(KEY);
    expect(w.src.core.patchNode.callCount).to.equal(1);
    expect(w.src.core.patchNode.firstCall.args[0]).to.deep.equal({ name: NODE, body: { metadata: { labels: { 'added-by': null, type: 'virtual-kubelet' } } } });
  });

  it('recreates a node deleted by hand', async () => {
    const w = setup();
    w.targets.put(selfTarget());
    await w.reconciler.reconcile(KEY);
    w.src.nodes.delete(NODE);
    w.src.leases.delete(`kube-node-lease/${NODE}`);
    w.clock.advance(10_000);
    await w.reconciler.reconcile(KEY);
    expect(w.src.core.createNode.callCount).to.equal(2);
    expect(w.src.nodes.get(NODE)!.metadata!.uid).to.equal('node-uid-2');
    expect(w.src.leases.get(`kube-node-lease/${NODE}`)!.metadata!.ownerReferences![0]!.uid).to.equal('node-uid-2');
  });
});

/** The virtual node built for `ref`, Ready, as the reconciler would create it. */
function readyNodeOf(ref: TargetRef) {
  return buildVirtualNode({
    ref,
    health: { ready: true, reason: 'TargetReady', message: 'ok', lastTransitionTime: new Date(T0).toISOString() },
    kubelet: { address: '10.0.0.5', port: 10250 },
    nodeInfo: { kubeletVersion: 'v1' },
    now: new Date(T0).toISOString(),
  });
}

describe('VirtualNodeReconciler.keyOfNode', () => {
  const node = (labels: Record<string, string> | undefined): V1Node => ({ metadata: { name: 'n', labels } });
  const PROVIDER = { 'virtual-kubelet.io/provider': 'admiralty' };
  const cases: [string, V1Node, string[]][] = [
    ['a Target virtual node', node({ ...PROVIDER, [`${P}target-namespace`]: 'default', [`${P}target-name`]: 'c2' }), ['Target/default/c2']],
    ['a ClusterTarget virtual node', node({ ...PROVIDER, [`${P}cluster-target-name`]: 'c3' }), ['ClusterTarget/c3']],
    ['a real node', node({ 'kubernetes.io/hostname': 'worker-1' }), []],
    ['a node without labels', node(undefined), []],
    ['another provider', node({ 'virtual-kubelet.io/provider': 'other', [`${P}cluster-target-name`]: 'c3' }), []],
    ['ours without identity labels', node(PROVIDER), []],
    ['a Target name without its namespace', node({ ...PROVIDER, [`${P}target-name`]: 'c2' }), []],
  ];
  for (const [why, n, want] of cases) {
    it(`maps ${why} to ${JSON.stringify(want)}`, () => expect(VirtualNodeReconciler.keyOfNode(n)).to.deep.equal(want));
  }

  const refs: TargetRef[] = [
    { kind: 'Target', namespace: 'team-a', name: 'eu-west-1' },
    { kind: 'ClusterTarget', namespace: '', name: 'c3' },
  ];
  for (const ref of refs) {
    it(`maps the node built for ${ref.kind} ${ref.name} back to the key of its object`, () => {
      const built = readyNodeOf(ref);
      const obj: Target = { metadata: { name: ref.name, namespace: ref.kind === 'Target' ? ref.namespace : undefined }, spec: { self: true } };
      expect(VirtualNodeReconciler.keyOfNode(built)).to.deep.equal([VirtualNodeReconciler.keyOf(obj, ref.kind)]);
    });
  }

  // The identity labels carry labelValueFor(name), hashed beyond 63 characters: the Target
  // caches give the name back.
  for (const ref of [
    { kind: 'Target', namespace: 'default', name: 'a'.repeat(70) },
    { kind: 'ClusterTarget', namespace: '', name: 'b'.repeat(64) },
    { kind: 'Target', namespace: 'default', name: 'c'.repeat(63) },
  ] as TargetRef[]) {
    it(`maps the node of a ${ref.kind} whose name has ${ref.name.length} characters back to its key`, () => {
      const built = readyNodeOf(ref);
      const targets = new MapCache<Target>();
      const clusterTargets = new MapCache<Target>();
      // Another object in the same place, so the right one must be told apart.
      targets.put({ metadata: { name: 'a'.repeat(71), namespace: 'default' }, spec: { self: true } });
      clusterTargets.put({ metadata: { name: 'b'.repeat(65) }, spec: { self: true } });
      (ref.kind === 'Target' ? targets : clusterTargets).put({ metadata: { name: ref.name, namespace: ref.kind === 'Target' ? ref.namespace : undefined }, spec: { self: true } });
      const want = [`${ref.kind}/${ref.kind === 'Target' ? `${ref.namespace}/` : ''}${ref.name}`];
      expect(VirtualNodeReconciler.keyOfNode(built, { targets, clusterTargets })).to.deep.equal(want);
    });
  }
});

describe('VirtualNodeReconciler: what a virtual node offers', () => {
  afterEach(() => sinon.restore());

  it("advertises what is free in the target plus what this source's running proxies hold there", async () => {
    const proxy = (name: string, phase: string): V1Pod => ({
      metadata: { name, namespace: 'default' },
      spec: { nodeName: NODE, containers: [{ name: 'c', resources: { requests: { cpu: '1', memory: '1Gi' } } }] },
      status: { phase },
    });
    const w = setup({
      probe: async () => ({ ...clone(SUMMARY), free: { cpu: '2', memory: '8Gi', pods: '100' } }),
      // One running proxy (its delegate's room is gone from free), one pending (not yet: not added back).
      proxies: [proxy('running', 'Running'), proxy('pending', 'Pending')],
    });
    w.targets.put(selfTarget());
    await w.reconciler.reconcile(KEY);
    expect(w.src.nodes.get(NODE)!.status!.allocatable).to.deep.equal({ cpu: '3', memory: '9Gi', pods: '101' });
    expect(w.src.nodes.get(NODE)!.status!.capacity).to.deep.equal({ cpu: '8', memory: '32Gi', pods: '110' });
  });

  it('adds back the proxies whose delegates the summary counts (by pod version), Running or not, and only those', async () => {
    const proxy = (name: string, phase: string): V1Pod => ({
      metadata: { name, namespace: 'default', uid: `uid-${name}` },
      spec: { nodeName: NODE, containers: [{ name: 'c', resources: { requests: { cpu: '1', memory: '1Gi' } } }] },
      status: { phase },
    });
    const delegates: Record<string, V1Pod> = {
      // Bound at version 90: the summary (version 100) counts it, though its proxy is not Running yet.
      counted: { metadata: { name: 'd-counted', resourceVersion: '90' }, spec: { nodeName: 'c2-node-1', containers: [] }, status: { phase: 'Pending' } },
      // Running, but changed after what the summary reflects: its room may still be in free.
      late: { metadata: { name: 'd-late', resourceVersion: '120' }, spec: { nodeName: 'c2-node-1', containers: [] }, status: { phase: 'Running' } },
    };
    const asked: string[] = [];
    const w = setup({
      probe: async () => ({ ...clone(SUMMARY), free: { cpu: '2', memory: '8Gi', pods: '100' }, podsResourceVersion: '100' }),
      proxies: [proxy('counted', 'Pending'), proxy('late', 'Running'), proxy('uncached', 'Running')],
      delegateOf: (key, p) => {
        asked.push(key);
        return delegates[p.metadata!.name!];
      },
    });
    w.targets.put(selfTarget());
    await w.reconciler.reconcile(KEY);
    expect(w.src.nodes.get(NODE)!.status!.allocatable).to.deep.equal({ cpu: '3', memory: '9Gi', pods: '101' });
    expect(new Set(asked)).to.deep.equal(new Set([KEY]));
  });
});
