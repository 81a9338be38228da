import type { CoreV1Event, V1Namespace, V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import sinon from 'sinon';
import { ClusterRegistry } from '../../../provider/clusters/cluster-registry.js';
import { FakeClock, realClock, type Clock } from '../../../provider/core/clock.js';
import { CopyConflictError } from '../../../provider/core/errors.js';
import { ELECT_ANNOTATION, NAMESPACE_ENABLED_LABEL, PARENT_UID_LABEL } from '../../../provider/core/keys.js';
import { silentLogger } from '../../../provider/core/logger.js';
import { buildDelegatePod } from '../../../provider/model/delegate-pod.js';
import { Binder } from '../../../scheduler/bind.js';
import { PlacementMemory } from '../../../scheduler/placement-memory.js';
import { apiError } from '../../support/api-errors.js';
import { coreStub, type CoreStub } from '../../support/stubs.js';
import { fakeTarget } from '../../support/targets.js';
import { proxy as baseProxy } from '../../support/pods.js';

const NODE = 'admiralty-cluster-c2';
const KEY = 'ClusterTarget/c2';
const UID = 'proxy-uid';

function proxy(): V1Pod {
  const sourcePod = { metadata: { name: 'web', namespace: 'default', annotations: { [ELECT_ANNOTATION]: '' } }, spec: { containers: [{ name: 'web', image: 'nginx' }] } };
  return baseProxy({ name: 'web', uid: UID, elected: { sourcePod }, spec: { schedulerName: 'admiralty-proxy', containers: [{ name: 'web', image: 'nginx', resources: { requests: { cpu: '1' } } }] } });
}

/** A delegate cache the test plays the target's scheduler on. */
class DelegateCache {
  readonly pods = new Map<string, V1Pod>();
  synced = true;
  get(name: string, namespace?: string): V1Pod | undefined {
    return this.pods.get(`${namespace}/${name}`);
  }
  list(): V1Pod[] {
    return [...this.pods.values()];
  }
  hasSynced(): boolean {
    return this.synced;
  }
}

describe('scheduler: Binder', () => {
  let source: CoreStub;
  let targetCore: CoreStub;
  let cache: DelegateCache;
  let memory: PlacementMemory;
  let binder: Binder;
  let options: ConstructorParameters<typeof Binder>[0];
  /** What the target's scheduler does with a created delegate. */
  let decide: (d: V1Pod) => V1Pod | undefined;
  /** The source's proxies cache: empty unless a test puts a proxy in it. */
  let proxies: Map<string, V1Pod>;
  /** The clock the target's scheduler decides on: the real one unless a test runs the bind on a fake one. */
  let clock: Clock;

  /**
   * Runs a bind on a fake clock, moved 5 ms (a poll) at a time once everything that can move
   * without it has: returns the answer and how far the clock had to move for it. An answer
   * before the placement timeout (300 ms) came from what the target did, not from the deadline.
   */
  async function bindOnFakeClock(): Promise<{ answer: { Error: string }; movedMs: number }> {
    const fake = new FakeClock(Date.now());
    clock = fake;
    binder = new Binder({ ...options, clock: fake });
    let answer: { Error: string } | undefined;
    void binder.bind(args).then((a) => (answer = a));
    const start = fake.monotonicMs();
    for (;;) {
      for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
      if (answer) return { answer, movedMs: fake.monotonicMs() - start };
      fake.advance(5);
    }
  }

  beforeEach(() => {
    clock = realClock;
    source = coreStub();
    const { target, core } = fakeTarget('c2');
    targetCore = core;
    cache = new DelegateCache();
    proxies = new Map();
    memory = new PlacementMemory();
    const registry = new ClusterRegistry();
    registry.set(target, NODE);
    registry.setHealth(KEY, { ready: true, reason: 'TargetReady', message: '', sinceMs: 0 });
    const namespace: V1Namespace = { metadata: { name: 'default', labels: { [NAMESPACE_ENABLED_LABEL]: 'enabled' } } };
    source.readNamespacedPod.resolves(proxy());
    source.createNamespacedPodBinding.resolves({} as never);
    decide = (d) => ({ ...d, spec: { ...d.spec!, nodeName: 'c2-node-1' } });
    targetCore.createNamespacedPod.callsFake(async ({ body }) => {
      const created = { ...body, metadata: { ...body.metadata, uid: 'delegate-uid' } };
      // The target's scheduler decides a moment later.
      clock.setTimeout(() => {
        const next = decide(created);
        if (next) cache.pods.set(`${created.metadata!.namespace}/${created.metadata!.name}`, next);
      }, 5);
      cache.pods.set(`${created.metadata!.namespace}/${created.metadata!.name}`, created);
      return created;
    });
    targetCore.deleteNamespacedPod.resolves({} as never);
    options = {
      sourceCore: source,
      registry,
      proxies: { get: (name, ns) => proxies.get(`${ns}/${name}`), list: () => [...proxies.values()] },
      namespaces: { get: (n) => (n === 'default' ? namespace : undefined), list: () => [namespace] },
      delegates: () => cache,
      memory,
      schedulerName: 'admiralty-proxy',
      sourceClusterName: 'c1',
      clock: realClock,
      logger: silentLogger(),
      placeTimeoutMs: 300,
      pollMs: 5,
    };
    binder = new Binder(options);
  });

  const args = { PodName: 'web', PodNamespace: 'default', PodUID: UID, Node: NODE };

  it('creates the delegate, waits for the target to place it, then binds the proxy', async () => {
    expect(await binder.bind(args)).to.deep.equal({ Error: '' });
    const body = targetCore.createNamespacedPod.firstCall.args[0].body;
    expect(body.metadata!.name).to.equal(buildDelegatePod(proxy(), { sourceClusterName: 'c1' }).metadata!.name);
    expect(body.metadata!.labels![PARENT_UID_LABEL]).to.equal(UID);
    const binding = source.createNamespacedPodBinding.firstCall.args[0];
    expect(binding).to.deep.include({ name: 'web', namespace: 'default' });
    expect(binding.body.target).to.deep.include({ kind: 'Node', name: NODE });
    expect(binding.body.metadata!.uid).to.equal(UID);
    // Until the next summary, c2-node-1 holds the delegate's cpu and a pod slot.
    const assumed = memory.assumedOn(KEY, { readAtMs: Date.now() });
    expect(assumed.get('c2-node-1')!.get('cpu')).to.equal(1_000_000_000n);
    // It names the delegate: a summary that counts it (its pod version reached) ends it.
    const delegate: V1Pod = { ...body, spec: { ...body.spec!, nodeName: 'c2-node-1' }, metadata: { ...body.metadata, resourceVersion: '41' } };
    const lookup = (namespace: string, name: string) => (namespace === 'default' && name === body.metadata!.name ? delegate : undefined);
    expect(memory.assumedOn(KEY, { readAtMs: Date.now(), podsResourceVersion: '40' }, lookup).size).to.equal(1);
    expect(memory.assumedOn(KEY, { readAtMs: Date.now(), podsResourceVersion: '41' }, lookup).size).to.equal(0);
    expect(targetCore.deleteNamespacedPod.called).to.equal(false);
  });

  describe('the room of a bind in flight', () => {
    const read = { readAtMs: 0, podsResourceVersion: '1' };
    const lookup = (namespace: string, name: string) => cache.get(name, namespace);
    /** What the filter would count on each node, had it guessed c2-node-2 for a bind in flight. */
    const assumed = () => memory.assumedOn(KEY, read, lookup, () => 'c2-node-2');
    const cpuOn = (sums: Map<string, Map<string, bigint>>) => new Map([...sums].map(([node, r]) => [node, r.get('cpu')]));

    it('is taken from when the bind begins, then counted once, on the node the target chose', async () => {
      let during: Map<string, bigint | undefined> | undefined;
      decide = (d) => {
        during = cpuOn(assumed());
        return { ...d, spec: { ...d.spec!, nodeName: 'c2-node-1' } };
      };
      expect(await binder.bind(args)).to.deep.equal({ Error: '' });
      expect(during).to.deep.equal(new Map([['c2-node-2', 1_000_000_000n]]));
      expect(cpuOn(assumed())).to.deep.equal(new Map([['c2-node-1', 1_000_000_000n]]));
    });

    it("holds the delegate's host ports with its room: on the guessed node during the bind, then on the node the target chose", async () => {
      const withPort = proxy();
      withPort.spec!.containers[0]!.ports = [{ containerPort: 8080, hostPort: 18080 }];
      source.readNamespacedPod.resolves(withPort);
      let during: Map<string, unknown> | undefined;
      decide = (d) => {
        assumed();
        during = memory.assumedPortsOn(KEY);
        return { ...d, spec: { ...d.spec!, nodeName: 'c2-node-1' } };
      };
      expect(await binder.bind(args)).to.deep.equal({ Error: '' });
      expect(during).to.deep.equal(new Map([['c2-node-2', [{ port: 18080, protocol: 'TCP' }]]]));
      assumed();
      expect(memory.assumedPortsOn(KEY)).to.deep.equal(new Map([['c2-node-1', [{ port: 18080, protocol: 'TCP' }]]]));
    });

    it("takes the overhead of the pod's RuntimeClass in the target, once the target's summary publishes its classes", async () => {
      const sandboxed = proxy();
      sandboxed.spec!.runtimeClassName = 'gvisor';
      // Set by the source's class: says nothing of the target's.
      sandboxed.spec!.overhead = { cpu: '250m' };
      source.readNamespacedPod.resolves(sandboxed);
      const during: (bigint | undefined)[] = [];
      decide = (d) => {
        during.push(assumed().get('c2-node-2')?.get('cpu'));
        return { ...d, spec: { ...d.spec!, nodeName: 'c2-node-1' } };
      };
      expect(await binder.bind(args)).to.deep.equal({ Error: '' });
      // The same pod again, to a binder that knows c2's classes.
      cache.pods.clear();
      binder = new Binder({ ...options, memory: (memory = new PlacementMemory()), runtimeClasses: () => new Map([['gvisor', { overhead: new Map([['cpu', 2_000_000_000n]]), tolerations: [] }]]) });
      expect(await binder.bind(args)).to.deep.equal({ Error: '' });
      expect(during).to.deep.equal([1_250_000_000n, 3_000_000_000n]);
    });

    it('is given back as soon as the target refuses', async () => {
      let during: Map<string, bigint | undefined> | undefined;
      decide = (d) => {
        during = cpuOn(assumed());
        return { ...d, metadata: { ...d.metadata, deletionTimestamp: new Date() } };
      };
      expect((await binder.bind(args)).Error).to.equal('c2: the delegate is being deleted before it was placed');
      expect(during).to.deep.equal(new Map([['c2-node-2', 1_000_000_000n]]));
      // The delegate is still in the cache, on no node: the room is back all the same.
      expect(assumed().size).to.equal(0);
    });

    it('is given back when the proxy cannot be bound', async () => {
      source.createNamespacedPodBinding.rejects(apiError(409, 'Conflict'));
      source.readNamespacedPod.onSecondCall().rejects(apiError(404, 'NotFound'));
      expect((await binder.bind(args)).Error).to.not.equal('');
      expect(assumed().size).to.equal(0);
    });
  });

  it('reports the proxy as being placed on its target from before its copies until the proxies cache shows the bind', async () => {
    const seen: string[][] = [];
    targetCore.createNamespacedPod.callsFake(async ({ body }) => {
      seen.push(binder.placing('default').map((p) => `${p.proxy.metadata!.name}@${p.targetKey}`));
      const created = { ...body, metadata: { ...body.metadata, uid: 'delegate-uid' }, spec: { ...body.spec!, nodeName: 'c2-node-1' } };
      cache.pods.set(`default/${created.metadata.name}`, created);
      return created;
    });
    expect(await binder.bind(args)).to.deep.equal({ Error: '' });
    expect(seen).to.deep.equal([['web@ClusterTarget/c2']]);
    // Bound, but the proxies cache does not show it yet: still counted.
    expect(binder.placing('default')).to.have.length(1);
    expect(binder.placing('other')).to.have.length(0);
    proxies.set('default/web', { ...proxy(), spec: { ...proxy().spec!, nodeName: NODE } });
    expect(binder.placing('default')).to.have.length(0);
  });

  it('forgets a bound placement once the proxies cache shows it, even if nobody asks about its namespace', async () => {
    expect(await binder.bind(args)).to.deep.equal({ Error: '' });
    expect(binder.held).to.equal(1);
    proxies.set('default/web', { ...proxy(), spec: { ...proxy().spec!, nodeName: NODE } });
    // Another target's question (the extender's filter asks for every pod) is enough.
    expect(binder.placingOn('Target/elsewhere/t')).to.deep.equal([]);
    expect(binder.held).to.equal(0);
  });

  it('stops reporting a placement the target refused', async () => {
    decide = () => undefined;
    await binder.bind(args);
    expect(binder.placing('default')).to.have.length(0);
  });

  it("refuses with the target scheduler's reason, deletes the delegate and remembers the refusal", async () => {
    decide = (d) => ({ ...d, status: { conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: '0/2 nodes are available: 2 Insufficient cpu.' }] } });
    const r = await binder.bind(args);
    expect(r.Error).to.equal('c2: 0/2 nodes are available: 2 Insufficient cpu.');
    expect(source.createNamespacedPodBinding.called).to.equal(false);
    expect(targetCore.deleteNamespacedPod.firstCall.args[0]).to.deep.include({ namespace: 'default' });
    expect(targetCore.deleteNamespacedPod.firstCall.args[0].body).to.deep.include({ preconditions: { uid: 'delegate-uid' } });
    expect(memory.refusal(UID, KEY, Date.now())!.reason).to.equal(r.Error);
  });

  it('counts each bind a target did not take under the name of its reason: DelegateNotPlaced, or the Delegated reason of an apiserver refusal', async () => {
    const counted: [string, string, string][] = [];
    binder = new Binder({ ...options, refusals: { record: (key, source, reason) => void counted.push([key, source, reason]) } });
    decide = (d) => ({ ...d, status: { conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: '0/2 nodes are available: 2 Insufficient cpu.' }] } });
    await binder.bind(args);
    targetCore.createNamespacedPod.rejects(apiError(404, 'NotFound'));
    await binder.bind(args);
    expect(counted).to.deep.equal([
      [KEY, 'bind', 'DelegateNotPlaced'],
      [KEY, 'bind', 'TargetNamespaceMissing'],
    ]);
  });

  it('creates nothing in a target its fencing gate keeps closed, without remembering a refusal', async () => {
    const asked: string[] = [];
    binder = new Binder({ ...options, mayCreateDelegates: (key) => (asked.push(key), false) });
    const r = await binder.bind(args);
    expect(r.Error).to.match(/^target c2 is being fenced/);
    expect(asked).to.deep.equal([KEY]);
    expect(targetCore.createNamespacedPod.called).to.equal(false);
    expect(memory.refusal(UID, KEY, Date.now())).to.equal(undefined);
  });

  describe('in a target with burst capacity', () => {
    let events: CoreV1Event[];
    const unschedulable = (d: V1Pod): V1Pod => ({
      ...d,
      status: { phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: '0/2 nodes are available: 2 Insufficient cpu.' }] },
    });
    /** cluster-autoscaler's word on the delegate, a moment after the target's scheduler said Unschedulable. */
    const autoscalerSays = (reason: string, message: string) => (d: V1Pod) => {
      clock.setTimeout(
        () =>
          events.push({
            metadata: { name: `${d.metadata!.name}.1`, namespace: 'default' },
            involvedObject: { kind: 'Pod', name: d.metadata!.name, namespace: 'default', uid: 'delegate-uid' },
            reason,
            message,
            lastTimestamp: new Date(),
            source: { component: 'cluster-autoscaler' },
          }),
        20,
      );
      return unschedulable(d);
    };

    beforeEach(() => {
      events = [];
      binder = new Binder({ ...options, bursts: (key) => key === KEY, targetEvents: () => ({ get: () => undefined, list: () => events }) });
    });

    it('binds the proxy with its delegate still pending once cluster-autoscaler said TriggeredScaleUp, assuming no node', async () => {
      decide = autoscalerSays('TriggeredScaleUp', 'pod triggered scale-up: [{c2-burst 0->1 (max: 3)}]');
      expect(await binder.bind(args)).to.deep.equal({ Error: '' });
      expect(source.createNamespacedPodBinding.calledOnce).to.equal(true);
      expect(targetCore.deleteNamespacedPod.called).to.equal(false);
      // Its reservation gone: it holds no node, and counts against burst capacity instead.
      expect(memory.assumedOn(KEY, { readAtMs: Date.now() }, undefined, () => 'c2-node-1').size).to.equal(0);
    });

    it("refuses with cluster-autoscaler's reason when it said NotTriggerScaleUp, and deletes the delegate", async () => {
      decide = autoscalerSays('NotTriggerScaleUp', "pod didn't trigger scale-up: 1 max node group size reached");
      const r = await binder.bind(args);
      expect(r.Error).to.equal("c2: 0/2 nodes are available: 2 Insufficient cpu.; cluster-autoscaler: pod didn't trigger scale-up: 1 max node group size reached");
      expect(source.createNamespacedPodBinding.called).to.equal(false);
      expect(targetCore.deleteNamespacedPod.calledOnce).to.equal(true);
    });

    it('refuses when cluster-autoscaler says nothing in time', async () => {
      decide = unschedulable;
      const r = await binder.bind(args);
      expect(r.Error).to.equal('c2: 0/2 nodes are available: 2 Insufficient cpu.; its cluster-autoscaler said nothing within 0.3 s');
      expect(targetCore.deleteNamespacedPod.calledOnce).to.equal(true);
    });
  });

  describe('a delegate whose node the target nominated but has not bound yet (its volumes being bound)', () => {
    const nominated = (d: V1Pod): V1Pod => ({ ...d, status: { phase: 'Pending', nominatedNodeName: 'c2-node-2' } });

    it('binds the proxy at once, and holds the room and host ports on the nominated node', async () => {
      const withPort = proxy();
      withPort.spec!.containers[0]!.ports = [{ containerPort: 8080, hostPort: 18080 }];
      source.readNamespacedPod.resolves(withPort);
      decide = nominated;
      const { answer, movedMs } = await bindOnFakeClock();
      expect(answer).to.deep.equal({ Error: '' });
      expect(movedMs, 'ms of the fake clock: well before the placement timeout').to.be.below(100);
      expect(source.createNamespacedPodBinding.calledOnce).to.equal(true);
      expect(targetCore.deleteNamespacedPod.called).to.equal(false);
      const assumed = memory.assumedOn(KEY, { readAtMs: Date.now(), podsResourceVersion: '1' }, (namespace, name) => cache.get(name, namespace));
      expect(assumed.get('c2-node-2')!.get('cpu')).to.equal(1_000_000_000n);
      expect(memory.assumedPortsOn(KEY)).to.deep.equal(new Map([['c2-node-2', [{ port: 18080, protocol: 'TCP' }]]]));
    });

    it("binds one nominated by the target's preemption (Unschedulable while its victims go), holds its room on that node, and says so on the proxy with the count the summary gives", async () => {
      const recorded: { type: string; reason: string; message: string; name?: string }[] = [];
      binder = new Binder({
        ...options,
        events: { record: (obj, type, reason, message) => recorded.push({ type, reason, message, name: obj.metadata?.name }) },
        lowerPriorityPods: (key, node) => (key === KEY && node === 'c2-node-2' ? 3 : undefined),
      });
      decide = (d) => ({
        ...d,
        status: {
          phase: 'Pending',
          nominatedNodeName: 'c2-node-2',
          conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: '0/2 nodes are available: 2 Insufficient cpu.' }],
        },
      });
      expect(await binder.bind(args)).to.deep.equal({ Error: '' });
      expect(source.createNamespacedPodBinding.calledOnce).to.equal(true);
      expect(targetCore.deleteNamespacedPod.called).to.equal(false);
      const assumed = memory.assumedOn(KEY, { readAtMs: Date.now(), podsResourceVersion: '1' }, (namespace, name) => cache.get(name, namespace));
      expect(assumed.get('c2-node-2')!.get('cpu')).to.equal(1_000_000_000n);
      expect(recorded).to.deep.equal([
        {
          type: 'Normal',
          reason: 'PreemptingInTarget',
          name: 'web',
          message:
            'c2 preempts pods of lower priority on its node c2-node-2 for this pod (its summary counted 3 such pod(s) there; its scheduler evicts the fewest that make room); the delegate runs there once they are gone',
        },
      ]);
    });

    it('says nothing of preemption for a nomination without an Unschedulable condition (volumes being bound)', async () => {
      const recorded: string[] = [];
      binder = new Binder({ ...options, events: { record: (_o, _t, reason) => recorded.push(reason) } });
      decide = nominated;
      expect(await binder.bind(args)).to.deep.equal({ Error: '' });
      expect(recorded).to.deep.equal([]);
    });
  });

  describe('a delegate with a generic ephemeral volume', () => {
    const awaiting = (d: V1Pod, name = 'web-x-data'): V1Pod => ({
      ...d,
      status: {
        phase: 'Pending',
        conditions: [
          {
            type: 'PodScheduled',
            status: 'False',
            reason: 'Unschedulable',
            message: `0/2 nodes are available: waiting for ephemeral volume controller to create the persistentvolumeclaim "${name}".`,
          },
        ],
      },
    });
    beforeEach(() => {
      const withEphemeral = proxy();
      withEphemeral.spec!.volumes = [{ name: 'data', ephemeral: { volumeClaimTemplate: { spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } } } } }];
      source.readNamespacedPod.resolves(withEphemeral);
    });

    it("waits through the target's wait for the volume's claim, and binds once the target placed it", async () => {
      decide = (d) => {
        // The target's ephemeral-volume controller makes the claim a moment later; its scheduler then places the pod.
        setTimeout(() => cache.pods.set(`${d.metadata!.namespace}/${d.metadata!.name}`, { ...d, spec: { ...d.spec!, nodeName: 'c2-node-1' } }), 30);
        return awaiting(d);
      };
      expect(await binder.bind(args)).to.deep.equal({ Error: '' });
      expect(targetCore.deleteNamespacedPod.called).to.equal(false);
    });

    it('refuses when the claim never comes, once the placement timeout is out', async () => {
      decide = (d) => awaiting(d);
      expect((await binder.bind(args)).Error).to.equal('c2: its scheduler did not place the delegate within 0.3 s');
      expect(targetCore.deleteNamespacedPod.calledOnce).to.equal(true);
    });

    it("refuses at once on the target's next verdict", async () => {
      decide = (d) => {
        clock.setTimeout(
          () =>
            cache.pods.set(`${d.metadata!.namespace}/${d.metadata!.name}`, {
              ...d,
              status: {
                phase: 'Pending',
                conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: '0/2 nodes are available: 2 node(s) did not find available persistent volumes to bind.' }],
              },
            }),
          30,
        );
        return awaiting(d);
      };
      const { answer, movedMs } = await bindOnFakeClock();
      expect(answer.Error).to.equal('c2: 0/2 nodes are available: 2 node(s) did not find available persistent volumes to bind.');
      expect(movedMs, 'ms of the fake clock: the verdict came at 35, the placement timeout is 300').to.be.below(100);
    });
  });

  it("refuses at once when the target cannot make the delegate's ResourceClaim, with the target's words", async () => {
    const withClaim = proxy();
    withClaim.spec!.resourceClaims = [{ name: 'gpu', resourceClaimTemplateName: 'gpu' }];
    source.readNamespacedPod.resolves(withClaim);
    const events: CoreV1Event[] = [];
    options = { ...options, targetEvents: () => ({ get: () => undefined, list: () => events }) };
    // No word from the target's scheduler (the pod waits out of its queue); its claim controller says why.
    decide = (d) => {
      clock.setTimeout(
        () =>
          events.push({
            metadata: { name: `${d.metadata!.name}.1`, namespace: 'default' },
            involvedObject: { kind: 'Pod', name: d.metadata!.name, namespace: 'default', uid: 'delegate-uid' },
            reason: 'FailedResourceClaimCreation',
            type: 'Warning',
            message: 'PodResourceClaim gpu: resource claim template "gpu": not found',
          }),
        20,
      );
      // The delegates cache keeps no resourceClaims: the proxy says the delegate asks for them.
      return { ...d, spec: { ...d.spec!, resourceClaims: undefined } };
    };
    const { answer, movedMs } = await bindOnFakeClock();
    expect(answer.Error).to.equal('c2: PodResourceClaim gpu: resource claim template "gpu": not found');
    expect(movedMs, 'ms of the fake clock: the event came at 25, the placement timeout is 300').to.be.below(100);
    expect(targetCore.deleteNamespacedPod.calledOnce).to.equal(true);
  });

  it('refuses when the target does not decide in time', async () => {
    decide = () => undefined;
    const r = await binder.bind(args);
    expect(r.Error).to.equal('c2: its scheduler did not place the delegate within 0.3 s');
    expect(targetCore.deleteNamespacedPod.calledOnce).to.equal(true);
  });

  it('refuses when the namespace is missing in the target, without waiting', async () => {
    targetCore.createNamespacedPod.rejects(apiError(404, 'NotFound'));
    const r = await binder.bind(args);
    expect(r.Error).to.equal('namespace default does not exist in c2');
    expect(memory.refusal(UID, KEY, Date.now())).to.not.equal(undefined);
  });

  it('says on the pod which ClusterSource the target lacks, and refuses the target with the same words', async () => {
    targetCore.createNamespacedPod.rejects(apiError(403, 'Forbidden'));
    const target = options.registry.byNodeName(NODE)!;
    Object.assign(target, {
      authorization: { createSelfSubjectAccessReview: sinon.stub().resolves({ status: { allowed: false } }) },
      authentication: { createSelfSubjectReview: sinon.stub().resolves({ status: { userInfo: { username: 'system:serviceaccount:default:c1' } } }) },
    });
    const r = await binder.bind(args);
    const message =
      'the cluster of ClusterTarget c2 does not authorize this source (user "system:serviceaccount:default:c1") to create pods in namespace default: create a Source in namespace default of that cluster with spec.userName "system:serviceaccount:default:c1", or a ClusterSource for every namespace';
    expect(r.Error).to.equal(message);
    expect(memory.refusal(UID, KEY, Date.now())).to.not.equal(undefined);
    sinon.assert.calledOnce(source.patchNamespacedPodStatus);
    const [{ name, body }] = source.patchNamespacedPodStatus.firstCall.args as unknown as [{ name: string; body: { status: { conditions: Record<string, unknown>[] } } }];
    expect(name).to.equal('web');
    expect(body.status.conditions).to.have.length(1);
    expect(body.status.conditions[0]).to.include({ type: 'multicluster.admiralty.io/Delegated', status: 'False', reason: 'SourceNotAuthorized', message });
    sinon.assert.notCalled(source.createNamespacedPodBinding);
  });

  it("hands a refusal by the target's authorizer to the authorization cache instead of the doubling back-off, when the cache follows the target", async () => {
    targetCore.createNamespacedPod.rejects(apiError(403, 'Forbidden'));
    const target = options.registry.byNodeName(NODE)!;
    const access = sinon.stub().resolves({ status: { allowed: false } });
    Object.assign(target, { authorization: { createSelfSubjectAccessReview: access }, authentication: { createSelfSubjectReview: sinon.stub().rejects(new Error('no')) } });
    const refused: [string, string, string][] = [];
    const follows = { value: true };
    binder = new Binder({ ...options, authorization: { refused: (key, namespace, reason) => (refused.push([key, namespace, reason]), follows.value) } });
    const r = await binder.bind(args);
    expect(refused).to.deep.equal([[KEY, 'default', r.Error]]);
    expect(r.Error).to.match(/^the cluster of ClusterTarget c2 does not authorize this source/);
    expect(memory.refusal(UID, KEY, Date.now()), 'no back-off of its own').to.equal(undefined);

    // A cache that does not follow this target: the back-off, as before.
    follows.value = false;
    await binder.bind(args);
    expect(memory.refusal(UID, KEY, Date.now())).to.include({ count: 1 });

    // A 403 of admission (the authorizer allows us) is no authorization matter: the back-off.
    follows.value = true;
    access.resolves({ status: { allowed: true } });
    const admission = await binder.bind(args);
    expect(admission.Error).to.equal('c2 refused to create the delegate: Forbidden (test)');
    expect(refused).to.have.length(2);
    expect(memory.refusal(UID, KEY, Date.now())).to.include({ count: 2 });
  });

  it('creates the delegate after its copies, naming them as the follow reconciler says; a copy name taken by another object refuses the target', async () => {
    const withEnv = proxy();
    withEnv.spec!.containers[0]!.envFrom = [{ configMapRef: { name: 'settings' } }];
    source.readNamespacedPod.resolves(withEnv);
    const ensureCopies = sinon.stub().resolves({ configmap: new Map([['settings', 'settings-0123456789']]), secret: new Map() });
    binder = new Binder({ ...options, follow: { ensureCopies } });
    expect(await binder.bind(args)).to.deep.equal({ Error: '' });
    sinon.assert.callOrder(ensureCopies, targetCore.createNamespacedPod);
    expect(targetCore.createNamespacedPod.firstCall.args[0].body.spec!.containers[0]!.envFrom).to.deep.equal([{ configMapRef: { name: 'settings-0123456789' } }]);

    ensureCopies.rejects(new CopyConflictError('configmap default/settings-0123456789 in c2 is taken'));
    source.readNamespacedPod.resolves({ ...withEnv, metadata: { ...withEnv.metadata, uid: 'other-uid' } });
    const refused = await new Binder({ ...options, follow: { ensureCopies } }).bind({ ...args, PodUID: 'other-uid' });
    expect(refused.Error).to.equal('configmap default/settings-0123456789 in c2 is taken');
    sinon.assert.calledOnce(targetCore.createNamespacedPod);
    const [{ body }] = source.patchNamespacedPodStatus.firstCall.args as unknown as [{ body: { status: { conditions: Record<string, unknown>[] } } }];
    expect(body.status.conditions[0]).to.include({ type: 'multicluster.admiralty.io/Delegated', status: 'False', reason: 'CopyConflict' });
  });

  it('refuses a pod whose namespace is not opted in (tenancy), creating nothing', async () => {
    const r = await binder.bind({ ...args, PodNamespace: 'other' });
    expect(r.Error).to.match(/^c2 may not run this pod: /);
    expect(targetCore.createNamespacedPod.called).to.equal(false);
  });

  it('deletes the delegate when the proxy cannot be bound', async () => {
    source.createNamespacedPodBinding.rejects(apiError(409, 'Conflict'));
    const r = await binder.bind(args);
    expect(r.Error).to.match(/^c2: binding pod default\/web to admiralty-cluster-c2: /);
    expect(targetCore.deleteNamespacedPod.calledOnce).to.equal(true);
  });

  it('answers at once for a proxy already bound to that node, and refuses another node', async () => {
    source.readNamespacedPod.resolves({ ...proxy(), spec: { ...proxy().spec!, nodeName: NODE } });
    expect(await binder.bind(args)).to.deep.equal({ Error: '' });
    expect(await binder.bind({ ...args, Node: 'admiralty-cluster-c3' })).to.deep.equal({ Error: `pod default/web is already bound to ${NODE}` });
    expect(targetCore.createNamespacedPod.called).to.equal(false);
  });

  it("binds nothing but the proxy scheduler's pods (the port is reachable by more than kube-scheduler)", async () => {
    source.readNamespacedPod.resolves({ ...proxy(), spec: { ...proxy().spec!, schedulerName: 'default-scheduler' } });
    expect((await binder.bind(args)).Error).to.equal('the admiralty extender binds only pods of scheduler admiralty-proxy, not default/web (scheduler default-scheduler)');
    expect(targetCore.createNamespacedPod.called).to.equal(false);
    expect(source.createNamespacedPodBinding.called).to.equal(false);
  });

  it('refuses a replaced pod (another UID)', async () => {
    expect((await binder.bind({ ...args, PodUID: 'other' })).Error).to.match(/was replaced/);
  });

  it('joins a repeated call for the same pod and node', async () => {
    const [a, b] = await Promise.all([binder.bind(args), binder.bind(args)]);
    expect(a).to.deep.equal({ Error: '' });
    expect(b).to.deep.equal({ Error: '' });
    expect(targetCore.createNamespacedPod.calledOnce).to.equal(true);
  });

  it('goes on as soon as the delegate changes, not at its next look, and only for that delegate', async () => {
    // The clock never moves: only a reported change can end the wait.
    binder = new Binder({ ...options, clock: new FakeClock(Date.now()), pollMs: 60_000 });
    let placed: V1Pod | undefined;
    targetCore.createNamespacedPod.callsFake(async ({ body }) => {
      const created = { ...body, metadata: { ...body.metadata, uid: 'delegate-uid' } };
      cache.pods.set(`default/${created.metadata.name}`, created);
      placed = { ...created, spec: { ...created.spec!, nodeName: 'c2-node-1' } };
      return created;
    });
    let done = false;
    const result = binder.bind(args).finally(() => (done = true));
    while (!placed) await new Promise((r) => setImmediate(r));
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    cache.pods.set(`default/${placed.metadata!.name}`, placed);
    // Another delegate, or the same name in another target: the bind keeps waiting.
    binder.delegateChanged(KEY, { ...placed, metadata: { ...placed.metadata, name: 'other' } });
    binder.delegateChanged('ClusterTarget/c3', placed);
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    expect(done).to.equal(false);
    binder.delegateChanged(KEY, placed);
    expect(await result).to.deep.equal({ Error: '' });
    expect(source.createNamespacedPodBinding.calledOnce).to.equal(true);
  });

  it('reads the target when the delegate cache is not running', async () => {
    cache.synced = false;
    targetCore.readNamespacedPod.callsFake(async ({ name, namespace }) => {
      const p = cache.get(name, namespace);
      if (!p) throw apiError(404, 'NotFound');
      return p;
    });
    expect(await binder.bind(args)).to.deep.equal({ Error: '' });
    expect(targetCore.readNamespacedPod.called).to.equal(true);
  });
});
