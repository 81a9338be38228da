import { expect } from 'chai';
import sinon from 'sinon';
import { ApiException, CustomObjectsApi, type V1Node, type V1Pod, type V1RuntimeClass } from '@kubernetes/client-node';
import { FakeClock } from '../../../../provider/core/clock.js';
import type { ObjectCache } from '../../../../provider/controller/object-cache.js';
import { SummaryReconciler } from '../../../../provider/reconcilers/summary.js';
import { buildClusterSummary } from '../../../../provider/model/cluster-summary.js';
import type { ClusterSummary } from '../../../../provider/model/types.js';
import { alreadyExists, conflict, notFound } from '../../../support/api-errors.js';

const API = { group: 'multicluster.admiralty.io', version: 'v1alpha1', plural: 'clustersummaries' };

function node(name: string, labels: Record<string, string>, capacity: Record<string, string>, allocatable = capacity): V1Node {
  return { metadata: { name, labels: { 'kubernetes.io/hostname': name, ...labels } }, status: { capacity, allocatable } };
}

const WORKER_1 = node('worker-1', { zone: 'a', 'kubernetes.io/os': 'linux' }, { cpu: '4', memory: '8Gi', pods: '110' }, { cpu: '3500m', memory: '7Gi', pods: '110' });
const WORKER_2 = node('worker-2', { zone: 'b', 'kubernetes.io/os': 'linux' }, { cpu: '2', memory: '4Gi', pods: '110' });
const VIRTUAL = node('admiralty-cluster-c3', { 'virtual-kubelet.io/provider': 'admiralty', 'kubernetes.io/os': 'windows' }, { cpu: '1000', memory: '1Ti', pods: '5000' });

function nodesCache(list: V1Node[]): ObjectCache<V1Node> {
  return { get: (name) => list.find((n) => n.metadata?.name === name), list: () => list };
}

/** The apiserver's singleton, behind stubs; `stored` is what a read returns. */
function customApi(stored: ClusterSummary | undefined) {
  const state = { stored };
  const api = {
    getClusterCustomObject: sinon.stub().callsFake(async () => {
      if (!state.stored) throw notFound();
      return structuredClone(state.stored);
    }),
    createClusterCustomObject: sinon.stub().callsFake(async ({ body }: { body: ClusterSummary }) => {
      state.stored = { ...structuredClone(body), metadata: { ...body.metadata, resourceVersion: '1' } };
      return state.stored;
    }),
    replaceClusterCustomObject: sinon.stub().callsFake(async ({ body }: { body: ClusterSummary }) => {
      state.stored = { ...structuredClone(body), metadata: { ...body.metadata, resourceVersion: String(Number(body.metadata.resourceVersion) + 1) } };
      return state.stored;
    }),
  };
  return { api, state };
}

function reconciler(custom: ReturnType<typeof customApi>['api'], nodes: V1Node[], renewIntervalMs?: number, pods: V1Pod[] = [], clock = new FakeClock(0)): SummaryReconciler {
  return new SummaryReconciler({ custom: custom as unknown as CustomObjectsApi, nodes: nodesCache(nodes), pods: { get: () => undefined, list: () => pods }, clock, renewIntervalMs });
}

describe('SummaryReconciler.reconcile', () => {
  it('creates the singleton when it is missing, summing the real nodes only', async () => {
    const { api } = customApi(undefined);
    expect(await reconciler(api, [WORKER_1, WORKER_2, VIRTUAL]).reconcile()).to.deep.equal({ requeueAfterMs: 30_000 });
    expect(api.getClusterCustomObject.firstCall.args[0]).to.deep.equal({ ...API, name: 'singleton' });
    expect(api.createClusterCustomObject.callCount).to.equal(1);
    expect(api.replaceClusterCustomObject.called).to.equal(false);
    expect(api.createClusterCustomObject.firstCall.args[0]).to.deep.equal({
      ...API,
      body: {
        apiVersion: 'multicluster.admiralty.io/v1alpha1',
        kind: 'ClusterSummary',
        metadata: { name: 'singleton', labels: { 'kubernetes.io/os': 'linux' } },
        capacity: { cpu: '6', memory: '12Gi', pods: '220' },
        allocatable: { cpu: '5500m', memory: '11Gi', pods: '220' },
        // Neither node reports Ready, so neither adds to what is free for new pods.
        free: {},
        nodePools: [
          {
            labels: { 'kubernetes.io/os': 'linux', zone: 'a' },
            nodes: [{ name: 'worker-1', allocatable: { cpu: '3500m', memory: '7Gi', pods: '110' }, free: { cpu: '3500m', memory: '7Gi', pods: '110' }, notReady: true }],
          },
          {
            labels: { 'kubernetes.io/os': 'linux', zone: 'b' },
            nodes: [{ name: 'worker-2', allocatable: { cpu: '2', memory: '4Gi', pods: '110' }, free: { cpu: '2', memory: '4Gi', pods: '110' }, notReady: true }],
          },
        ],
        renewIntervalSeconds: 30,
        renewTime: '1970-01-01T00:00:00.000Z',
      },
    });
  });

  it('renews a summary that has not changed for its renew interval, with a new renewTime, and not before', async () => {
    const { api, state } = customApi(undefined);
    const clock = new FakeClock(Date.parse('2026-11-29T10:00:00.000Z'));
    const r = reconciler(api, [WORKER_1], 20_000, [], clock);
    expect(await r.reconcile()).to.deep.equal({ requeueAfterMs: 20_000 });
    clock.advance(12_000);
    expect(await r.reconcile(), 'due 20 s after the write').to.deep.equal({ requeueAfterMs: 8_000 });
    expect(api.replaceClusterCustomObject.called).to.equal(false);
    clock.advance(8_000);
    await r.reconcile();
    expect(api.replaceClusterCustomObject.callCount).to.equal(1);
    expect(state.stored!.renewTime).to.equal('2026-11-29T10:00:20.000Z');
    expect(state.stored!.renewIntervalSeconds).to.equal(20);
    expect(state.stored!.metadata.resourceVersion, 'a new version, which is what readers go by').to.equal('2');
    clock.advance(19_000);
    expect(await r.reconcile(), 'counted from the renewal').to.deep.equal({ requeueAfterMs: 1_000 });
    expect(api.replaceClusterCustomObject.callCount).to.equal(1);
  });

  it('counts from its first read when it starts (or leads) over a summary another replica wrote: no write at start', async () => {
    const { api } = customApi(undefined);
    await reconciler(api, [WORKER_1]).reconcile();
    const clock = new FakeClock(5_000);
    const successor = reconciler(api, [WORKER_1], undefined, [], clock);
    expect(await successor.reconcile()).to.deep.equal({ requeueAfterMs: 30_000 });
    clock.advance(29_000);
    await successor.reconcile();
    expect(api.replaceClusterCustomObject.called).to.equal(false);
    clock.advance(1_000);
    await successor.reconcile();
    expect(api.replaceClusterCustomObject.callCount).to.equal(1);
  });

  const undeclared: [string, Partial<ClusterSummary>][] = [
    ['an earlier version wrote it (no renewTime)', { renewIntervalSeconds: 30, renewTime: undefined }],
    ['it declares another renew interval (the flag changed)', { renewIntervalSeconds: 60 }],
  ];
  for (const [why, fields] of undeclared) {
    it(`writes at once when ${why}`, async () => {
      const { api, state } = customApi(undefined);
      await reconciler(api, [WORKER_1]).reconcile();
      state.stored = { ...state.stored!, ...fields };
      await reconciler(api, [WORKER_1]).reconcile();
      expect(api.replaceClusterCustomObject.callCount).to.equal(1);
      expect(state.stored.renewIntervalSeconds).to.equal(30);
      expect(state.stored.renewTime).to.be.a('string');
    });
  }

  it('writes nothing when the singleton already says the same', async () => {
    const { api, state } = customApi(undefined);
    const r = reconciler(api, [WORKER_1, WORKER_2, VIRTUAL]);
    await r.reconcile();
    await r.reconcile();
    expect(api.createClusterCustomObject.callCount).to.equal(1);
    expect(api.replaceClusterCustomObject.called).to.equal(false);
    expect(state.stored!.metadata.resourceVersion).to.equal('1');
  });

  it('compares quantities by value, not by spelling', async () => {
    const { api } = customApi({
      ...buildClusterSummary([WORKER_1, WORKER_2]),
      metadata: { name: 'singleton', resourceVersion: '7', labels: { 'kubernetes.io/os': 'linux' } },
      capacity: { cpu: '6000m', memory: '12884901888', pods: '220' },
      allocatable: { cpu: '5.5', memory: '11264Mi', pods: '220' },
      renewIntervalSeconds: 30,
      renewTime: '1970-01-01T00:00:00.000Z',
    });
    await reconciler(api, [WORKER_1, WORKER_2]).reconcile();
    expect(api.createClusterCustomObject.called).to.equal(false);
    expect(api.replaceClusterCustomObject.called).to.equal(false);
  });

  const changes: [string, V1Node[], Partial<ClusterSummary>][] = [
    [
      'a node joins',
      [WORKER_1, WORKER_2, node('worker-3', { zone: 'c', 'kubernetes.io/os': 'linux' }, { cpu: '2', memory: '4Gi', pods: '110' })],
      { capacity: { cpu: '8', memory: '16Gi', pods: '330' } },
    ],
    ['a node leaves', [WORKER_1], { capacity: { cpu: '4', memory: '8Gi', pods: '110' }, allocatable: { cpu: '3500m', memory: '7Gi', pods: '110' } }],
    ['a shared label changes', [WORKER_1, node('worker-2', { zone: 'b', 'kubernetes.io/os': 'windows' }, { cpu: '2', memory: '4Gi', pods: '110' })], { metadata: { name: 'singleton', labels: {} } }],
    ['no real node is left', [VIRTUAL], { capacity: {}, allocatable: {} }],
  ];
  for (const [why, nodes, want] of changes) {
    it(`replaces the singleton, keeping its resourceVersion, when ${why}`, async () => {
      const { api } = customApi(undefined);
      await reconciler(api, [WORKER_1, WORKER_2]).reconcile();
      await reconciler(api, nodes).reconcile();
      expect(api.replaceClusterCustomObject.callCount).to.equal(1);
      const args = api.replaceClusterCustomObject.firstCall.args[0];
      expect(args).to.deep.include({ ...API, name: 'singleton' });
      expect(args.body.metadata.resourceVersion).to.equal('1', 'optimistic concurrency on the replace');
      expect(args.body.metadata.name).to.equal('singleton');
      expect(args.body.kind).to.equal('ClusterSummary');
      if (want.capacity) expect(args.body.capacity).to.deep.equal(want.capacity);
      if (want.allocatable) expect(args.body.allocatable).to.deep.equal(want.allocatable);
      if (want.metadata) expect(args.body.metadata.labels).to.deep.equal(want.metadata.labels);
    });
  }

  it('rewrites when pods take room on a node, at most once per second', async () => {
    const { api, state } = customApi(undefined);
    const clock = new FakeClock(0);
    const pods: V1Pod[] = [];
    const r = reconciler(api, [WORKER_1], undefined, pods, clock);
    await r.reconcile();
    pods.push({ metadata: { name: 'p', namespace: 'x' }, spec: { nodeName: 'worker-1', containers: [{ name: 'c', resources: { requests: { cpu: '1' } } }] }, status: { phase: 'Running' } });
    clock.advance(500);
    expect(await r.reconcile(), 'too soon after the last write').to.deep.equal({ requeueAfterMs: 500 });
    expect(api.replaceClusterCustomObject.called).to.equal(false);
    clock.advance(500);
    await r.reconcile();
    expect(api.replaceClusterCustomObject.callCount).to.equal(1);
    expect(state.stored!.nodePools![0]!.nodes[0]!.free).to.deep.equal({ cpu: '2500m', memory: '7Gi', pods: '109' });
  });

  it('keeps writing after the wall clock is set back: the last write is not taken to be in the future', async () => {
    const { api, state } = customApi(undefined);
    const clock = new FakeClock(Date.parse('2026-01-01T11:00:00.000Z'));
    let rv = '100';
    const r = new SummaryReconciler({
      custom: api as unknown as CustomObjectsApi,
      nodes: nodesCache([WORKER_1]),
      pods: { get: () => undefined, list: () => [] },
      podsResourceVersion: () => rv,
      clock,
    });
    await r.reconcile();
    // NTP steps the clock back an hour; a pod changes a second later.
    clock.stepWallClock(-3_600_000);
    clock.advance(1_000);
    rv = '105';
    const result = await r.reconcile();
    expect(state.stored!.podsResourceVersion, `not written (asked to wait ${result.requeueAfterMs} ms)`).to.equal('105');
  });

  it('records the pod version its cache reflects, and rewrites when only that moved (a source waits for it), at most once per second', async () => {
    const { api, state } = customApi(undefined);
    const clock = new FakeClock(0);
    let rv = '100';
    const r = new SummaryReconciler({
      custom: api as unknown as CustomObjectsApi,
      nodes: nodesCache([WORKER_1]),
      pods: { get: () => undefined, list: () => [] },
      podsResourceVersion: () => rv,
      clock,
    });
    await r.reconcile();
    expect(state.stored!.podsResourceVersion).to.equal('100');
    clock.advance(1000);
    await r.reconcile();
    expect(api.replaceClusterCustomObject.called, 'nothing moved').to.equal(false);
    rv = '105';
    clock.advance(1000);
    await r.reconcile();
    expect(api.replaceClusterCustomObject.callCount).to.equal(1);
    expect(state.stored!.podsResourceVersion).to.equal('105');
    expect(state.stored!.nodePools![0]!.nodes[0]!.free, 'nothing else changed').to.deep.equal({ cpu: '3500m', memory: '7Gi', pods: '110' });
  });

  it('publishes the RuntimeClasses once their cache has listed them, rewrites when one changes, and drops them when they cannot be read', async () => {
    const { api, state } = customApi(undefined);
    const clock = new FakeClock(0);
    const classes = { synced: false, list: [] as V1RuntimeClass[] };
    const r = new SummaryReconciler({
      custom: api as unknown as CustomObjectsApi,
      nodes: nodesCache([WORKER_1]),
      pods: { get: () => undefined, list: () => [] },
      runtimeClasses: { hasSynced: () => classes.synced, list: () => classes.list },
      clock,
    });
    // Not listed yet (or not allowed to): the summary is written all the same, without them.
    await r.reconcile();
    expect(state.stored).to.not.have.property('runtimeClasses');
    classes.synced = true;
    classes.list = [{ metadata: { name: 'gvisor' }, handler: 'runsc', overhead: { podFixed: { cpu: '250m' } } }];
    clock.advance(1000);
    await r.reconcile();
    expect(state.stored!.runtimeClasses).to.deep.equal([{ name: 'gvisor', overhead: { cpu: '250m' } }]);
    clock.advance(1000);
    await r.reconcile();
    expect(api.replaceClusterCustomObject.callCount, 'nothing moved').to.equal(1);
    classes.list = [];
    clock.advance(1000);
    await r.reconcile();
    expect(state.stored!.runtimeClasses).to.deep.equal([]);
    classes.synced = false;
    clock.advance(1000);
    await r.reconcile();
    expect(api.replaceClusterCustomObject.callCount).to.equal(3);
    expect(JSON.parse(JSON.stringify(state.stored)), 'a list it can no longer read is not left behind').to.not.have.property('runtimeClasses');
  });

  it('publishes the names of the PriorityClasses once their cache has listed them', async () => {
    const { api, state } = customApi(undefined);
    const clock = new FakeClock(0);
    let synced = false;
    const r = new SummaryReconciler({
      custom: api as unknown as CustomObjectsApi,
      nodes: nodesCache([WORKER_1]),
      pods: { get: () => undefined, list: () => [] },
      priorityClasses: { hasSynced: () => synced, list: () => [{ metadata: { name: 'urgent' }, value: 1000 }] },
      clock,
    });
    await r.reconcile();
    expect(state.stored).to.not.have.property('priorityClasses');
    synced = true;
    clock.advance(1000);
    await r.reconcile();
    expect(state.stored!.priorityClasses).to.deep.equal(['urgent']);
  });

  it('ignores virtual nodes entirely: adding one writes nothing', async () => {
    const { api } = customApi(undefined);
    await reconciler(api, [WORKER_1]).reconcile();
    await reconciler(api, [WORKER_1, VIRTUAL, node('other-vk', { 'virtual-kubelet.io/provider': 'other' }, { cpu: '64' })]).reconcile();
    expect(api.createClusterCustomObject.callCount).to.equal(1);
    expect(api.replaceClusterCustomObject.called).to.equal(false);
  });

  it('tolerates AlreadyExists on create (another replica won)', async () => {
    const { api } = customApi(undefined);
    api.createClusterCustomObject.rejects(alreadyExists());
    expect(await reconciler(api, [WORKER_1], 5_000).reconcile()).to.deep.equal({ requeueAfterMs: 5_000 });
  });

  const failures: [string, (api: ReturnType<typeof customApi>['api']) => void, string][] = [
    ['the read fails', (api) => api.getClusterCustomObject.rejects(new ApiException(500, 'boom', '{}', {})), 'reading the ClusterSummary'],
    ['the create fails', (api) => api.createClusterCustomObject.rejects(new ApiException(403, 'Forbidden', '{"reason":"Forbidden"}', {})), 'creating the ClusterSummary'],
  ];
  for (const [why, arrange, message] of failures) {
    it(`throws (to retry) when ${why}`, async () => {
      const { api } = customApi(undefined);
      arrange(api);
      let error: Error | undefined;
      try {
        await reconciler(api, [WORKER_1]).reconcile();
      } catch (err) {
        error = err as Error;
      }
      expect(error?.message).to.equal(message);
      expect(error?.cause).to.be.instanceOf(ApiException);
    });
  }

  it('lets a conflicting replace fail so the runner retries with a fresh read', async () => {
    const { api } = customApi({ metadata: { name: 'singleton', resourceVersion: '3', labels: {} }, capacity: {}, allocatable: {} });
    const stale = conflict();
    api.replaceClusterCustomObject.rejects(stale);
    let error: unknown;
    try {
      await reconciler(api, [WORKER_1]).reconcile();
    } catch (err) {
      error = err;
    }
    expect(error).to.equal(stale);
  });
});
