import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type V1Namespace, type V1Node, type V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { Registry } from 'prom-client';
import { ClusterRegistry } from '../../../provider/clusters/cluster-registry.js';
import { createTargetClient } from '../../../provider/clusters/target-client.js';
import { realClock } from '../../../provider/core/clock.js';
import {
  ELECT_ANNOTATION,
  HAS_FINALIZER_LABEL,
  NAMESPACE_ENABLED_LABEL,
  PLACEMENT_POLICY_ANNOTATION,
  SOURCE_POD_MANIFEST_ANNOTATION,
  VIRTUAL_KUBELET_PROVIDER_LABEL,
} from '../../../provider/core/keys.js';
import { silentLogger } from '../../../provider/core/logger.js';
import { virtualNodeName } from '../../../provider/model/names.js';
import type { TargetPlacement } from '../../../provider/model/target.js';
import type { TargetRef } from '../../../provider/model/types.js';
import { createRouter, text } from '../../../provider/core/http-router.js';
import { createExtenderRoutes, EXTENDER_MAX_JSON_TOKENS, FILTER_PATH, PREEMPT_PATH, type ExtenderFilterResult, type HostPriority, type TargetState } from '../../../scheduler/extender-server.js';
import { mayHavePodTerms } from '../../../scheduler/topology.js';
import type { PlacementPolicy } from '../../../scheduler/score.js';
import { kubeConfig, node, nodesOf, pod, runningOn } from './fixtures.js';
import { PlacementMemory } from '../../../scheduler/placement-memory.js';
import { Binder, type ExtenderBindingArgs } from '../../../scheduler/bind.js';
import { coreStub } from '../../support/stubs.js';
import { fakeTarget } from '../../support/targets.js';

interface Reply {
  status: number;
  text: string;
  json?: unknown;
  etag?: string;
}

const ref = (name: string): TargetRef => ({ kind: 'ClusterTarget', namespace: '', name });
const ROOMY = ref('roomy'); // 2 nodes of 4 cpu, 1 cpu used
const BUSY = ref('busy'); // 1 node of 4 cpu, 3.5 cpu used
const DOWN = ref('down'); // unhealthy
const COLD = ref('cold'); // no state yet
const V = (r: TargetRef) => virtualNodeName(r);
const GONE = 'admiralty-cluster-gone';
const REAL = 'worker-1';

function virtualNode(name: string): V1Node {
  return node(name, { labels: { [VIRTUAL_KUBELET_PROVIDER_LABEL]: 'admiralty' }, taints: [{ key: VIRTUAL_KUBELET_PROVIDER_LABEL, value: 'admiralty', effect: 'NoSchedule' }] });
}

describe('scheduler: createExtenderRoutes', () => {
  let server: http.Server;
  let port: number;
  let metrics: Registry;
  let policy: PlacementPolicy = { kind: 'spread' };
  const placements: Record<string, TargetPlacement> = {};
  const namespaces: Record<string, V1Namespace> = {};
  let groupPlacements = new Map<string, string>();
  const events: { uid?: string; type: string; reason: string; message: string }[] = [];
  const memory = new PlacementMemory();
  const bindCalls: ExtenderBindingArgs[] = [];
  /** What the authorization cache says, by `<target key>|<namespace>`. */
  const unauthorized = new Map<string, string>();
  /** The one proxy on busy's virtual node (priority 100), and its delegate, which holds 3.5 of b1's 4 cpu. */
  const busyDelegate = runningOn('b1', { cpu: '3500m' });
  const lowProxy = pod('low', { cpu: '3500m' }, { priority: 100, nodeName: V(BUSY) });
  lowProxy.metadata!.uid = 'low-uid';

  before(async () => {
    const registry = new ClusterRegistry();
    for (const r of [ROOMY, BUSY, DOWN, COLD]) {
      const client = createTargetClient(r, kubeConfig(), 'fp', false);
      registry.set(client, V(r));
      registry.setHealth(client.key, { ready: r !== DOWN, reason: r === DOWN ? 'Unreachable' : 'Ready', message: r === DOWN ? 'connect ECONNREFUSED' : '', sinceMs: 0 });
    }
    const states: Record<string, TargetState> = {
      // Its summary publishes its RuntimeClasses: it has one, kata.
      'ClusterTarget/roomy': {
        nodes: nodesOf([node('r1'), node('r2')], [runningOn('r1', { cpu: '1' })]),
        readAtMs: 0,
        runtimeClasses: new Map([['kata', { overhead: new Map(), tolerations: [] }]]),
      },
      'ClusterTarget/busy': { nodes: nodesOf([node('b1')], [busyDelegate]), readAtMs: 0 },
      'ClusterTarget/down': { nodes: nodesOf([node('d1')]), readAtMs: 0 },
    };
    metrics = new Registry();
    const binder = {
      bind: async (args: ExtenderBindingArgs) => {
        bindCalls.push(args);
        return { Error: args.Node === V(BUSY) ? 'busy: 0/1 nodes are available: 1 Insufficient cpu.' : '' };
      },
    };
    const routes = createExtenderRoutes({
      registry,
      targetState: (key) => states[key],
      policy: () => policy,
      targetPlacement: (key) => placements[key],
      namespace: (name) => namespaces[name],
      authorization: (key, namespace) => {
        if (namespace === 'explodes') throw new Error('reading /etc/secret-token: abc123');
        return unauthorized.get(`${key}|${namespace}`);
      },
      groupPlacements: () => groupPlacements,
      proxiesOn: (name) => (name === V(BUSY) ? [lowProxy] : []),
      delegateOf: (key, p) => (key === 'ClusterTarget/busy' && p === lowProxy ? busyDelegate : undefined),
      events: { record: (obj, type, reason, message) => events.push({ uid: obj.metadata.uid, type, reason, message }) },
      logger: silentLogger(),
      metricsRegistry: metrics,
      memory,
      binder,
    });
    // Served with another route, as on the webhook's server.
    server = http.createServer(createRouter({ routes: [{ method: 'GET', path: '/healthz', handle: () => text(200, 'ok') }, ...routes], logger: silentLogger() }));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });

  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  function post(path: string, body: string | object): Promise<Reply> {
    const payload = typeof body === 'string' ? body : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, method: 'POST', path, headers: { 'content-type': 'application/json' } }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => {
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, text, json, etag: res.headers.etag });
        });
      });
      req.on('error', reject);
      req.end(payload);
    });
  }

  /** A proxy pod as the webhook leaves it: delegate spec in the manifest annotation. */
  function proxy(cpu: string) {
    const original = pod('web', { cpu });
    const p = pod('web', { cpu }, { nodeSelector: { [VIRTUAL_KUBELET_PROVIDER_LABEL]: 'admiralty' } });
    p.metadata!.annotations = { [SOURCE_POD_MANIFEST_ANNOTATION]: JSON.stringify(original) };
    return p;
  }

  const allNames = [V(ROOMY), V(BUSY), V(DOWN), V(COLD), GONE, REAL];

  it('filters NodeNames: keeps real nodes and fitting targets, explains every rejection', async () => {
    const r = await post('/scheduler/filter', { Pod: proxy('1'), NodeNames: allNames });
    expect(r.status).to.equal(200);
    // No ETag: kube-scheduler never revalidates, and hashing every answer costs CPU.
    expect(r.etag).to.equal(undefined);
    const result = r.json as ExtenderFilterResult;
    expect(result.NodeNames).to.deep.equal([V(ROOMY), REAL]);
    expect(result.Nodes).to.equal(undefined);
    expect(result.Error).to.equal('');
    expect(result.FailedNodes).to.deep.equal({
      [V(BUSY)]: 'no node in busy fits: 1 Insufficient cpu (largest free 500m)',
      [V(COLD)]: 'no ClusterSummary of target cold was read yet',
    });
    expect(result.FailedAndUnresolvableNodes).to.deep.equal({
      [V(DOWN)]: 'target down is not ready: Unreachable: connect ECONNREFUSED',
      [GONE]: `virtual node ${GONE} has no known target`,
    });
  });

  it("judges a pod's RuntimeClass by the classes a target's summary publishes, and nothing of it where they are unknown", async () => {
    const p = proxy('100m');
    const manifest = JSON.parse(p.metadata!.annotations![SOURCE_POD_MANIFEST_ANNOTATION]!);
    manifest.spec.runtimeClassName = 'gvisor';
    p.spec!.runtimeClassName = 'gvisor';
    p.metadata!.annotations![SOURCE_POD_MANIFEST_ANNOTATION] = JSON.stringify(manifest);
    const result = (await post('/scheduler/filter', { Pod: p, NodeNames: [V(ROOMY), V(BUSY)] })).json as ExtenderFilterResult;
    expect(result.NodeNames).to.deep.equal([V(BUSY)]);
    expect(result.FailedAndUnresolvableNodes).to.deep.equal({ [V(ROOMY)]: 'no node in roomy fits: roomy has no RuntimeClass gvisor' });
  });

  it('filters Nodes: answers with the kept Node objects, judging virtual nodes by label', async () => {
    const items = [virtualNode(V(ROOMY)), virtualNode(V(BUSY)), node(REAL), node('admiralty-cluster-lookalike')];
    const r = await post('/scheduler/filter', { Pod: proxy('1'), Nodes: { items } });
    expect(r.status).to.equal(200);
    const result = r.json as ExtenderFilterResult;
    expect(result.Nodes!.items.map((n) => n.metadata!.name)).to.deep.equal([V(ROOMY), REAL, 'admiralty-cluster-lookalike']);
    expect(result.Nodes!.items[0]).to.deep.equal(JSON.parse(JSON.stringify(items[0])));
    expect(result.NodeNames).to.equal(undefined);
    expect(Object.keys(result.FailedNodes)).to.deep.equal([V(BUSY)]);
  });

  it('keeps everything when no virtual node is a candidate', async () => {
    const r = await post('/scheduler/filter', { Pod: pod('plain', { cpu: '64' }), NodeNames: [REAL, 'worker-2'] });
    expect((r.json as ExtenderFilterResult).NodeNames).to.deep.equal([REAL, 'worker-2']);
  });

  it('rejects every target when nothing fits, with resource reasons as resolvable', async () => {
    const r = await post('/scheduler/filter', { Pod: proxy('5'), NodeNames: [V(ROOMY), V(BUSY)] });
    const result = r.json as ExtenderFilterResult;
    expect(result.NodeNames).to.deep.equal([]);
    expect(result.FailedNodes).to.deep.equal({
      [V(ROOMY)]: 'no node in roomy fits: 2 Insufficient cpu (largest free 4)',
      [V(BUSY)]: 'no node in busy fits: 1 Insufficient cpu (largest free 500m)',
    });
    // An error, so that kube-scheduler retries with backoff (see filter). It is all the pod's
    // condition says, so the targets kube-scheduler did not offer are named too, with why.
    expect(result.Error).to.equal(
      `no target can run this pod now (retried with backoff): ${V(ROOMY)}: no node in roomy fits: 2 Insufficient cpu (largest free 4); ${V(BUSY)}: no node in busy fits: 1 Insufficient cpu (largest free 500m); ` +
        `${V(DOWN)} (not offered by the proxy scheduler): target down is not ready: Unreachable: connect ECONNREFUSED; ${V(COLD)} (not offered by the proxy scheduler): no ClusterSummary of target cold was read yet`,
    );
  });

  it('says of a target kube-scheduler did not offer, though it would fit, that its own checks rejected it', async () => {
    const result = (await post('/scheduler/filter', { Pod: proxy('1'), NodeNames: [V(BUSY)] })).json as ExtenderFilterResult;
    expect(result.Error).to.include(`${V(ROOMY)} (not offered by the proxy scheduler): its own checks of the virtual node (its room in all, taints, readiness, the proxy's constraints) rejected it`);
    // Nothing more when something is kept: kube-scheduler's own diagnosis names the rest.
    expect(((await post('/scheduler/filter', { Pod: proxy('1'), NodeNames: [V(ROOMY)] })).json as ExtenderFilterResult).Error).to.equal('');
  });

  it('prioritizes by rank under the default policy; real nodes and targets without state get 0', async () => {
    policy = { kind: 'spread' };
    let r = await post('/scheduler/prioritize', { Pod: proxy('1'), NodeNames: [V(ROOMY), V(BUSY), V(COLD), REAL] });
    expect(r.status).to.equal(200);
    // roomy: 8 - 1 - 1 = 6 of 8 free after the pod; busy: none.
    expect(r.json as HostPriority[]).to.deep.equal([
      { Host: V(ROOMY), Score: 10 },
      { Host: V(BUSY), Score: 9 },
      { Host: V(COLD), Score: 0 },
      { Host: REAL, Score: 0 },
    ]);
    policy = { kind: 'pack' };
    r = await post('/scheduler/prioritize', { Pod: proxy('1'), Nodes: { items: [virtualNode(V(ROOMY)), virtualNode(V(BUSY))] } });
    expect(r.json).to.deep.equal([
      { Host: V(ROOMY), Score: 9 },
      { Host: V(BUSY), Score: 10 },
    ]);
    policy = { kind: 'spread' };
  });

  it("ranks by the pod's preferred node affinity first: its own per real node, the proxy's own against the virtual node", async () => {
    const scores = async (body: object) => Object.fromEntries(((await post('/scheduler/prioritize', body)).json as HostPriority[]).map((h) => [h.Host, h.Score]));
    const prefer = (weight: number, key: string, value: string) => [{ weight, preference: { matchExpressions: [{ key, operator: 'In', values: [value] }] } }];
    // Without preferences, spread: roomy first.
    expect(await scores({ Pod: proxy('1'), NodeNames: [V(ROOMY), V(BUSY)] })).to.deep.equal({ [V(ROOMY)]: 10, [V(BUSY)]: 9 });
    // The pod's own term (saved manifest only, as in exact mode) on a real node of busy.
    const own = proxy('100m');
    own.metadata!.annotations![SOURCE_POD_MANIFEST_ANNOTATION] = JSON.stringify(
      pod('web', { cpu: '100m' }, { affinity: { nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: prefer(5, 'kubernetes.io/hostname', 'b1') } } }),
    );
    expect(await scores({ Pod: own, NodeNames: [V(ROOMY), V(BUSY)] })).to.deep.equal({ [V(BUSY)]: 10, [V(ROOMY)]: 9 });
    // Only a node that fits counts: b1 has 0.5 cpu free, too little for 1.
    const large = proxy('1');
    large.metadata!.annotations![SOURCE_POD_MANIFEST_ANNOTATION] = own.metadata!.annotations![SOURCE_POD_MANIFEST_ANNOTATION];
    expect(await scores({ Pod: large, NodeNames: [V(ROOMY), V(BUSY)] })).to.deep.equal({ [V(ROOMY)]: 10, [V(BUSY)]: 9 });
    // The proxy's own term (proxy-pod-scheduling-constraints) on a target key, with node names
    // only (judged against the target's identity) and with Node objects (against their labels).
    const constrained = proxy('1');
    constrained.spec!.affinity = { nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: prefer(10, 'multicluster.admiralty.io/cluster-target-name', 'busy') } };
    expect(await scores({ Pod: constrained, NodeNames: [V(ROOMY), V(BUSY)] })).to.deep.equal({ [V(BUSY)]: 10, [V(ROOMY)]: 9 });
    constrained.spec!.affinity = { nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: prefer(10, 'topology.kubernetes.io/region', 'eu') } };
    const labelled = (name: string, region: string) => {
      const n = virtualNode(name);
      n.metadata!.labels!['topology.kubernetes.io/region'] = region;
      return n;
    };
    expect(await scores({ Pod: constrained, Nodes: { items: [labelled(V(ROOMY), 'us'), labelled(V(BUSY), 'eu')] } })).to.deep.equal({ [V(BUSY)]: 10, [V(ROOMY)]: 9 });
    // Equally preferred: the policy decides again.
    expect(await scores({ Pod: constrained, Nodes: { items: [labelled(V(ROOMY), 'eu'), labelled(V(BUSY), 'eu')] } })).to.deep.equal({ [V(ROOMY)]: 10, [V(BUSY)]: 9 });
  });

  it("takes the pod's policy annotation over its namespace's, and the targets' placement", async () => {
    const p = proxy('1');
    p.metadata!.namespace = 'team';
    namespaces.team = { metadata: { name: 'team', annotations: { [PLACEMENT_POLICY_ANNOTATION]: 'pack' } } };
    const scores = async (pod: V1Pod) => Object.fromEntries(((await post('/scheduler/prioritize', { Pod: pod, NodeNames: [V(ROOMY), V(BUSY)] })).json as HostPriority[]).map((h) => [h.Host, h.Score]));
    try {
      expect(await scores(p)).to.deep.equal({ [V(BUSY)]: 10, [V(ROOMY)]: 9 });
      p.metadata!.annotations![PLACEMENT_POLICY_ANNOTATION] = 'burst';
      placements['ClusterTarget/busy'] = { weight: 1, priority: 2 };
      expect(await scores(p)).to.deep.equal({ [V(BUSY)]: 9, [V(ROOMY)]: 10 });
      placements['ClusterTarget/roomy'] = { weight: 0, priority: 0 };
      expect(await scores(p)).to.deep.equal({ [V(BUSY)]: 10, [V(ROOMY)]: 0 });
    } finally {
      delete namespaces.team;
      delete placements['ClusterTarget/busy'];
      delete placements['ClusterTarget/roomy'];
    }
  });

  it('warns once per pod about an unusable policy annotation, and uses the default', async () => {
    const p = proxy('1');
    p.metadata!.uid = 'uid-invalid-policy';
    p.metadata!.annotations![PLACEMENT_POLICY_ANNOTATION] = 'fill-first';
    for (let i = 0; i < 3; i++) {
      const r = await post('/scheduler/prioritize', { Pod: p, NodeNames: [V(ROOMY), V(BUSY)] });
      expect(r.json).to.deep.equal([
        { Host: V(ROOMY), Score: 10 },
        { Host: V(BUSY), Score: 9 },
      ]);
    }
    expect(events.filter((e) => e.uid === 'uid-invalid-policy')).to.deep.equal([
      {
        uid: 'uid-invalid-policy',
        type: 'Warning',
        reason: 'InvalidPlacementPolicy',
        message: `${PLACEMENT_POLICY_ANNOTATION} "fill-first" on the pod is not one of spread, pack, burst: placed by spread`,
      },
    ]);
  });

  it('shares by weight, counting the pods it ranked first before their bind shows', async () => {
    placements['ClusterTarget/roomy'] = { weight: 1, priority: 0 };
    placements['ClusterTarget/busy'] = { weight: 3, priority: 0 };
    // One pod of the group already bound to busy (from the proxies cache or the binder).
    groupPlacements = new Map([['bound-0', 'ClusterTarget/busy']]);
    const owner = { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web', uid: 'rs-1', controller: true };
    const firsts: string[] = [];
    try {
      for (let i = 0; i < 7; i++) {
        const p = proxy('1');
        p.metadata!.uid = `weighted-${i}`;
        p.metadata!.ownerReferences = [owner];
        const r = (await post('/scheduler/prioritize', { Pod: p, NodeNames: [V(ROOMY), V(BUSY)] })).json as HostPriority[];
        firsts.push(r.find((h) => h.Score === 10)!.Host);
      }
      // (pods + 1) / weight, lowest first; ties to the roomier target. busy 2/3 < roomy 1; then
      // 3/3 = 1/1, a tie: roomy; then busy x3 (4/3, 5/3 < 2); 6/3 = 2/1: roomy; busy. With the one
      // bound before: 6 on busy, 2 on roomy.
      expect(firsts.map((h) => (h === V(BUSY) ? 'busy' : 'roomy'))).to.deep.equal(['busy', 'roomy', 'busy', 'busy', 'busy', 'roomy', 'busy']);
      // A pod of another group starts afresh.
      const other = proxy('1');
      other.metadata!.uid = 'weighted-other';
      const r = (await post('/scheduler/prioritize', { Pod: other, NodeNames: [V(ROOMY), V(BUSY)] })).json as HostPriority[];
      expect(r.find((h) => h.Score === 10)!.Host).to.equal(V(BUSY));
    } finally {
      groupPlacements = new Map();
      delete placements['ClusterTarget/busy'];
      delete placements['ClusterTarget/roomy'];
    }
  });

  it('keeps a pod off a target that refused it lately, and says why', async () => {
    const p = proxy('1');
    p.metadata!.uid = 'uid-refused';
    memory.refuse('uid-refused', 'ClusterTarget/roomy', 'roomy: 0/2 nodes are available: 2 node(s) had volume node affinity conflict.', Date.now() - 2000);
    const r = await post('/scheduler/filter', { Pod: p, NodeNames: [V(ROOMY), REAL] });
    const result = r.json as ExtenderFilterResult;
    expect(result.NodeNames).to.deep.equal([REAL]);
    expect(result.FailedNodes).to.deep.equal({ [V(ROOMY)]: 'refused 2 s ago: roomy: 0/2 nodes are available: 2 node(s) had volume node affinity conflict.' });
    // Another pod is not affected.
    const other = await post('/scheduler/filter', { Pod: proxy('1'), NodeNames: [V(ROOMY)] });
    expect((other.json as ExtenderFilterResult).NodeNames).to.deep.equal([V(ROOMY)]);
  });

  it('does not offer a target to a pod whose namespace its cluster does not authorize us in, and says what to create', async () => {
    const why =
      'the cluster of ClusterTarget roomy does not authorize this source (user "u") to create pods in namespace batch: create a Source in namespace batch of that cluster with spec.userName "u", or a ClusterSource for every namespace';
    unauthorized.set('ClusterTarget/roomy|batch', why);
    try {
      const inBatch = proxy('1');
      inBatch.metadata!.namespace = 'batch';
      const r = await post('/scheduler/filter', { Pod: inBatch, NodeNames: [V(ROOMY), V(BUSY)] });
      const result = r.json as ExtenderFilterResult;
      expect(result.NodeNames).to.deep.equal([]);
      expect(result.FailedAndUnresolvableNodes).to.deep.equal({ [V(ROOMY)]: why });
      // Nothing left: an error, so kube-scheduler tries again within its backoff, and the event carries the reason.
      expect(result.Error).to.include(`${V(ROOMY)}: ${why}`);
      // The pods of another namespace still get the target.
      const r2 = await post('/scheduler/filter', { Pod: proxy('1'), NodeNames: [V(ROOMY)] });
      expect((r2.json as ExtenderFilterResult).NodeNames).to.deep.equal([V(ROOMY)]);
    } finally {
      unauthorized.clear();
    }
  });

  it('keeps the pods of a controller off a target a pod of it was re-placed out of, until the cool-down ends', async () => {
    const owned = (uid: string) => {
      const p = proxy('1');
      p.metadata!.uid = uid;
      p.metadata!.ownerReferences = [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-abc', uid: 'rs-avoiding', controller: true }];
      return p;
    };
    const until = Date.now() + 60_000;
    memory.avoid('rs-avoiding', 'ClusterTarget/roomy', 'delegate web-0-x1 ran on node n9, which roomy no longer has', until);
    const r = (await post('/scheduler/filter', { Pod: owned('replacement'), NodeNames: [V(ROOMY), REAL] })).json as ExtenderFilterResult;
    expect(r.NodeNames).to.deep.equal([REAL]);
    expect(r.FailedNodes).to.deep.equal({
      [V(ROOMY)]: `avoided for the pods of ReplicaSet web-abc until ${new Date(until).toISOString()}, after a re-placement: delegate web-0-x1 ran on node n9, which roomy no longer has`,
    });
    // A bare pod, or another controller's, is not affected.
    expect(((await post('/scheduler/filter', { Pod: proxy('1'), NodeNames: [V(ROOMY)] })).json as ExtenderFilterResult).NodeNames).to.deep.equal([V(ROOMY)]);
    // Lapsed: the target takes the controller's pods again.
    memory.avoid('rs-avoiding', 'ClusterTarget/roomy', 'old news', Date.now() - 1);
    expect(((await post('/scheduler/filter', { Pod: owned('later'), NodeNames: [V(ROOMY)] })).json as ExtenderFilterResult).NodeNames).to.deep.equal([V(ROOMY)]);
  });

  it('serves bind through the binder, and refuses malformed binding args', async () => {
    const args = { PodName: 'web', PodNamespace: 'default', PodUID: 'u1', Node: V(ROOMY) };
    let r = await post('/scheduler/bind', args);
    expect(r.status).to.equal(200);
    expect(r.json).to.deep.equal({ Error: '' });
    r = await post('/scheduler/bind', { ...args, Node: V(BUSY) });
    expect(r.json).to.deep.equal({ Error: 'busy: 0/1 nodes are available: 1 Insufficient cpu.' });
    expect(bindCalls.map((c) => c.Node)).to.deep.equal([V(ROOMY), V(BUSY)]);
    for (const body of ['nope', [], { ...args, PodUID: '' }, { ...args, Node: 3 }]) {
      r = await post('/scheduler/bind', body);
      expect(r.status, JSON.stringify(body)).to.equal(400);
    }
    expect(bindCalls).to.have.length(2);
  });

  const malformed: { name: string; body: string | object; reason: RegExp }[] = [
    { name: 'a body that is not JSON', body: '{nope', reason: /not JSON/ },
    { name: 'a JSON array', body: [], reason: /must be a JSON object/ },
    { name: 'no Pod', body: { NodeNames: ['a'] }, reason: /Pod must be an object/ },
    { name: 'a Pod without spec', body: { Pod: { metadata: {} }, NodeNames: ['a'] }, reason: /Pod.spec/ },
    { name: 'neither Nodes nor NodeNames', body: { Pod: pod('p') }, reason: /Nodes or NodeNames/ },
    { name: 'NodeNames not strings', body: { Pod: pod('p'), NodeNames: [1] }, reason: /NodeNames/ },
    { name: 'Nodes.items not an array', body: { Pod: pod('p'), Nodes: { items: {} } }, reason: /items must be an array/ },
    { name: 'a Node without a name', body: { Pod: pod('p'), Nodes: { items: [{ metadata: {} }] } }, reason: /items\[0\]/ },
    { name: 'a field nested 101 deep', body: `{"Pod":{"spec":{}},"NodeNames":[],"x":${'['.repeat(101)}${']'.repeat(101)}}`, reason: /^request body is nested deeper than 100 levels$/ },
    {
      name: `more than ${EXTENDER_MAX_JSON_TOKENS} JSON tokens`,
      body: `{"Pod":{"spec":{}},"NodeNames":[${'[],'.repeat(EXTENDER_MAX_JSON_TOKENS / 2)}[]]}`,
      reason: /^request body has more than 8388608 arrays, objects and items/,
    },
  ];
  for (const c of malformed) {
    it(`answers HTTP 400 to ${c.name}`, async () => {
      for (const path of ['/scheduler/filter', '/scheduler/prioritize']) {
        const r = await post(path, c.body);
        expect(r.status, path).to.equal(400);
        expect(r.text).to.match(c.reason);
      }
    });
  }

  it('preempts on a virtual node only the proxies whose delegates free a real node for the pod; other nodes keep their victims', async () => {
    const high = proxy('2');
    high.spec!.priority = 1000;
    const r = await post(PREEMPT_PATH, {
      Pod: high,
      NodeNameToMetaVictims: {
        [V(BUSY)]: { Pods: [{ UID: 'low-uid' }], NumPDBViolations: 1 },
        // No proxy of lower priority there: nothing kube-scheduler proposes is taken.
        [V(ROOMY)]: { Pods: [{ UID: 'someone' }], NumPDBViolations: 0 },
        [REAL]: { Pods: [{ UID: 'real-victim' }], NumPDBViolations: 0 },
      },
    });
    expect(r.status, r.text).to.equal(200);
    expect(r.json).to.deep.equal({
      NodeNameToMetaVictims: {
        [V(BUSY)]: { Pods: [{ UID: 'low-uid' }], NumPDBViolations: 0 },
        [REAL]: { Pods: [{ UID: 'real-victim' }], NumPDBViolations: 0 },
      },
    });
    // Bigger than b1: nothing.
    const huge = proxy('5');
    huge.spec!.priority = 1000;
    expect((await post(PREEMPT_PATH, { Pod: huge, NodeNameToMetaVictims: { [V(BUSY)]: { Pods: [{ UID: 'low-uid' }], NumPDBViolations: 0 } } })).json).to.deep.equal({ NodeNameToMetaVictims: {} });
    // A finished proxy holds nothing, and kube-scheduler does not list it on the node.
    lowProxy.status = { phase: 'Succeeded' };
    try {
      expect((await post(PREEMPT_PATH, { Pod: high, NodeNameToMetaVictims: { [V(BUSY)]: { Pods: [{ UID: 'low-uid' }], NumPDBViolations: 0 } } })).json).to.deep.equal({ NodeNameToMetaVictims: {} });
    } finally {
      delete lowProxy.status;
    }
    // Whole pods (an extender config without nodeCacheCapable) are read by their UIDs.
    expect((await post(PREEMPT_PATH, { Pod: high, NodeNameToVictims: { [V(BUSY)]: { Pods: [lowProxy], NumPDBViolations: 0 } } })).json).to.deep.equal({
      NodeNameToMetaVictims: { [V(BUSY)]: { Pods: [{ UID: 'low-uid' }], NumPDBViolations: 0 } },
    });
  });

  it("lets a pod preempt again only once the room its victims freed has had time to show in the target's summary", async () => {
    const high = proxy('2');
    high.spec!.priority = 1000;
    high.metadata!.uid = 'preemptor-uid';
    const call = { Pod: high, NodeNameToMetaVictims: { [V(BUSY)]: { Pods: [{ UID: 'low-uid' }], NumPDBViolations: 0 }, [REAL]: { Pods: [{ UID: 'real-victim' }], NumPDBViolations: 0 } } };
    expect(((await post(PREEMPT_PATH, call)).json as any).NodeNameToMetaVictims[V(BUSY)]).to.deep.equal({ Pods: [{ UID: 'low-uid' }], NumPDBViolations: 0 });
    // Its victims gone, the summary still counting them: kube-scheduler asks again.
    expect((await post(PREEMPT_PATH, call)).json).to.deep.equal({ NodeNameToMetaVictims: { [REAL]: { Pods: [{ UID: 'real-victim' }], NumPDBViolations: 0 } } });
  });

  it('refuses a malformed preempt call with a reason', async () => {
    for (const [body, reason] of [
      [{ NodeNameToMetaVictims: {} }, /Pod must be a Pod with a spec/],
      [{ Pod: proxy('1') }, /must carry NodeNameToMetaVictims or NodeNameToVictims/],
      [{ Pod: proxy('1'), NodeNameToMetaVictims: { n: { Pods: [{}] } } }, /NodeNameToMetaVictims\["n"\] must list its Pods with UIDs/],
      [{ Pod: proxy('1'), NodeNameToVictims: { n: { Pods: 'x' } } }, /NodeNameToVictims\["n"\] must list its Pods with UIDs/],
    ] as const) {
      const r = await post(PREEMPT_PATH, body);
      expect(r.status, JSON.stringify(body)).to.equal(400);
      expect(r.text).to.match(reason);
    }
  });

  it("answers a filter that failed inside with a fixed error, never the exception's text", async () => {
    const p = proxy('1');
    p.metadata!.namespace = 'explodes';
    const reply = await post(FILTER_PATH, { Pod: p, NodeNames: [V(ROOMY)] });
    expect(reply.status).to.equal(500);
    // kube-scheduler copies Error into the pod's FailedScheduling event, which users read.
    expect(reply.json).to.deep.equal({ FailedNodes: {}, Error: 'internal error (see the provider log)' });
    expect(reply.text).not.to.contain('abc123');
  });

  it('is served alongside other routes (the webhook’s, on its server)', async () => {
    const text = await new Promise<string>((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port, path: '/healthz' }, (res) => {
          let t = '';
          res.on('data', (c) => (t += c));
          res.on('end', () => resolve(t));
        })
        .on('error', reject);
    });
    expect(text).to.equal('ok');
  });

  it('records calls by verb and result', async () => {
    const metric = await metrics.getSingleMetric('admiralty_scheduler_extender_request_duration_seconds')!.get();
    const counts: Record<string, number> = {};
    for (const v of metric.values) {
      if ((v as { metricName?: string }).metricName?.endsWith('_count')) counts[`${v.labels.verb}/${v.labels.result}`] = v.value;
    }
    expect(counts['filter/ok']).to.be.greaterThan(0);
    expect(counts['prioritize/ok']).to.be.greaterThan(0);
    expect(counts['filter/bad_request']).to.equal(malformed.length);
    expect(counts['bind/ok']).to.equal(1);
    expect(counts['bind/refused']).to.equal(1);
    expect(counts['bind/bad_request']).to.equal(4);
  });
});

/**
 * kube-scheduler binds in the background and filters the next pod meanwhile: pod B's filter
 * comes while pod A's bind waits for the target's scheduler (the real binder, the target's
 * scheduler played on its delegate cache).
 */
describe('scheduler: createExtenderRoutes, while a bind is in flight', () => {
  const C2 = ref('c2');
  const KEY = 'ClusterTarget/c2';

  function proxy(name: string, cpu = '3', onNode?: string): V1Pod {
    const manifest = { metadata: { name, namespace: 'default' }, spec: onNode ? { nodeSelector: { 'kubernetes.io/hostname': onNode } } : {} };
    return {
      metadata: {
        name,
        namespace: 'default',
        uid: `uid-${name}`,
        labels: { [HAS_FINALIZER_LABEL]: 'true' },
        annotations: { [ELECT_ANNOTATION]: '', [SOURCE_POD_MANIFEST_ANNOTATION]: JSON.stringify(manifest) },
      },
      spec: { schedulerName: 'admiralty-proxy', containers: [{ name: 'c', image: 'x', resources: { requests: { cpu } } }] },
    };
  }

  /** Target c2 of these nodes; A and B ask 3 cpu each. */
  function setup(nodes: V1Node[]) {
    const source = coreStub();
    const { target, core: targetCore } = fakeTarget('c2');
    const delegates = new Map<string, V1Pod>();
    const cache = { get: (n: string, ns?: string) => delegates.get(`${ns}/${n}`), list: () => [...delegates.values()], hasSynced: () => true };
    const registry = new ClusterRegistry();
    registry.set(target, V(C2));
    registry.setHealth(KEY, { ready: true, reason: 'TargetReady', message: '', sinceMs: 0 });
    const namespace: V1Namespace = { metadata: { name: 'default', labels: { [NAMESPACE_ENABLED_LABEL]: 'enabled' } } };
    source.readNamespacedPod.callsFake(async ({ name }) => proxy(name));
    source.createNamespacedPodBinding.resolves({} as never);
    // The target's scheduler decides when the test says.
    targetCore.createNamespacedPod.callsFake(async ({ body }) => {
      const created = { ...body, metadata: { ...body.metadata, uid: `d-${body.metadata!.name}`, resourceVersion: '10' } };
      delegates.set(`default/${created.metadata.name}`, created);
      return created;
    });
    targetCore.deleteNamespacedPod.resolves({} as never);
    const memory = new PlacementMemory({ toldOfDelegateChanges: true });
    const binder = new Binder({
      sourceCore: source,
      registry,
      proxies: { get: () => undefined, list: () => [] },
      namespaces: { get: () => namespace, list: () => [namespace] },
      delegates: () => cache,
      memory,
      schedulerName: 'admiralty-proxy',
      sourceClusterName: 'c1',
      clock: realClock,
      logger: silentLogger(),
      placeTimeoutMs: 2000,
      pollMs: 5,
    });
    const state = { nodes: nodesOf(nodes), readAtMs: 0, podsResourceVersion: '5' };
    const routes = createExtenderRoutes({ registry, targetState: () => state, policy: { kind: 'spread' }, delegate: (_key, ns, name) => cache.get(name, ns), logger: silentLogger(), memory, binder });
    const filter = routes.find((r) => r.path === FILTER_PATH)!;
    const call = (p: V1Pod) =>
      (filter.handle({ path: FILTER_PATH, connection: undefined as never, body: Buffer.from(JSON.stringify({ Pod: p, NodeNames: [V(C2)] })) }) as { json: ExtenderFilterResult }).json;
    /** Starts A's bind; resolves, with the bind's result to come, once its delegate waits for the target's scheduler. */
    const bindA = async () => {
      const bound = binder.bind({ PodName: 'a', PodNamespace: 'default', PodUID: 'uid-a', Node: V(C2) });
      while (delegates.size === 0) await new Promise((r) => setTimeout(r, 2));
      // Wrapped: an async function's result would wait for the bind.
      return { bound };
    };
    /** The target's scheduler decides on A's delegate. */
    const decideA = (change: (d: V1Pod) => V1Pod) => {
      for (const [k, d] of delegates) delegates.set(k, { ...change(d), metadata: { ...change(d).metadata, resourceVersion: '11' } });
    };
    return { call, bindA, decideA };
  }

  it('keeps the next pod off the last room a bind in flight takes, and offers it again as soon as that bind is refused', async () => {
    // n1 has 4 cpu free, n2 2: only one of A and B fits.
    const t = setup([node('n1'), node('n2', { allocatable: { cpu: '2', memory: '8Gi', pods: '110' } })]);
    expect(t.call(proxy('a')).NodeNames).to.deep.equal([V(C2)]);
    const { bound: a } = await t.bindA();
    const b = t.call(proxy('b'));
    expect(b.NodeNames).to.deep.equal([]);
    expect(b.FailedNodes[V(C2)]).to.equal('no node in c2 fits: 2 Insufficient cpu (largest free 2)');
    t.decideA((d) => ({ ...d, metadata: { ...d.metadata, deletionTimestamp: new Date() } }));
    expect((await a).Error).to.equal('c2: the delegate is being deleted before it was placed');
    expect(t.call(proxy('b')).NodeNames).to.deep.equal([V(C2)]);
  });

  it('offers the room left beside a bind in flight, and counts that bind once, on the node its target chose', async () => {
    // n1 and n2 have 4 cpu free each: A and B both fit.
    const t = setup([node('n1'), node('n2')]);
    const { bound: a } = await t.bindA();
    expect(t.call(proxy('b')).NodeNames).to.deep.equal([V(C2)]);
    // A was guessed on n1 (the first of two alike); its target puts it on n2.
    expect(t.call(proxy('c', '2', 'n1')).NodeNames).to.deep.equal([]);
    t.decideA((d) => ({ ...d, spec: { ...d.spec!, nodeName: 'n2' } }));
    expect((await a).Error).to.equal('');
    // Counted once (B still fits), and on n2 now.
    expect(t.call(proxy('b')).NodeNames).to.deep.equal([V(C2)]);
    expect(t.call(proxy('c', '2', 'n1')).NodeNames).to.deep.equal([V(C2)]);
    expect(t.call(proxy('c', '2', 'n2')).FailedNodes[V(C2)]).to.equal("no node in c2 fits: 1 Insufficient cpu (largest free 1), 1 node(s) didn't match Pod's node affinity/selector");
  });
});

describe('scheduler: createExtenderRoutes, topology across targets', () => {
  const REGION = 'topology.kubernetes.io/region';
  const US = ref('us');
  const EU = ref('eu');
  const OTHER = ref('other');

  /** A proxy of app web, its spread or anti-affinity in the saved manifest only (the webhook drops them from the proxy). */
  function proxy(name: string, spec: Partial<V1Pod['spec']> = {}, nodeName?: string): V1Pod {
    const manifest = { metadata: { name, namespace: 'default', labels: { app: 'web' } }, spec };
    return {
      metadata: {
        name,
        namespace: 'default',
        uid: `uid-${name}`,
        labels: { app: 'web', [HAS_FINALIZER_LABEL]: 'true' },
        annotations: { [ELECT_ANNOTATION]: '', [SOURCE_POD_MANIFEST_ANNOTATION]: JSON.stringify(manifest) },
      },
      spec: {
        schedulerName: 'admiralty-proxy',
        nodeSelector: { [VIRTUAL_KUBELET_PROVIDER_LABEL]: 'admiralty' },
        containers: [{ name: 'c', image: 'x', resources: { requests: { cpu: '1' } } }],
        ...(nodeName ? { nodeName } : {}),
      },
    };
  }
  const SPREAD = { topologySpreadConstraints: [{ maxSkew: 1, topologyKey: REGION, whenUnsatisfiable: 'DoNotSchedule', labelSelector: { matchLabels: { app: 'web' } } }] };
  const ANTI = { affinity: { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [{ topologyKey: REGION, labelSelector: { matchLabels: { app: 'web' } } }] } } };

  /** Targets us and eu (one node each, in their region) and other (eu too), whose virtual node the proxy's constraints may exclude. */
  function setup(placed: { proxy: V1Pod; targetKey: string }[] = [], opts: { policy?: PlacementPolicy } = {}) {
    const registry = new ClusterRegistry();
    for (const r of [US, EU, OTHER]) {
      registry.set(createTargetClient(r, kubeConfig(), 'fp', false), V(r));
      registry.setHealth(`ClusterTarget/${r.name}`, { ready: true, reason: 'Ready', message: '', sinceMs: 0 });
    }
    const states: Record<string, TargetState> = {
      'ClusterTarget/us': { nodes: nodesOf([node('us-1', { labels: { [REGION]: 'us' } })]), readAtMs: 0 },
      'ClusterTarget/eu': { nodes: nodesOf([node('eu-1', { labels: { [REGION]: 'eu' } })]), readAtMs: 0 },
      'ClusterTarget/other': { nodes: nodesOf([node('ot-1', { labels: { [REGION]: 'ap' } })]), readAtMs: 0 },
    };
    const routes = createExtenderRoutes({
      registry,
      targetState: (key) => states[key],
      policy: opts.policy ?? { kind: 'spread' },
      placedProxies: (namespace) => placed.filter((p) => namespace === undefined || p.proxy.metadata?.namespace === namespace),
      affineProxies: () => placed.filter((p) => mayHavePodTerms(p.proxy)),
      logger: silentLogger(),
    });
    const route = (path: string) => routes.find((r) => r.path === path)!;
    const body = (p: V1Pod, names: string[]) => ({ path: '', connection: undefined as never, body: Buffer.from(JSON.stringify({ Pod: p, NodeNames: names })) });
    const filter = (p: V1Pod, names = [V(US), V(EU)]) => (route(FILTER_PATH).handle(body(p, names)) as { json: ExtenderFilterResult }).json;
    const prioritize = (p: V1Pod, names = [V(US), V(EU)]) => (route('/scheduler/prioritize').handle(body(p, names)) as { json: HostPriority[] }).json;
    return { filter, prioritize };
  }

  it('keeps a pod whose region already has one more off it (DoNotSchedule spread), and says why', () => {
    const t = setup([{ proxy: proxy('a', SPREAD, V(US)), targetKey: 'ClusterTarget/us' }]);
    const r = t.filter(proxy('b', SPREAD));
    expect(r.NodeNames).to.deep.equal([V(EU)]);
    expect(r.FailedAndUnresolvableNodes).to.deep.equal({
      [V(US)]: `no node in us fits: 1 node(s) didn't match pod topology spread constraints (${REGION}=us has 1 matching pod, the fewest in a domain is 0, maxSkew 1)`,
    });
  });

  it("counts a domain of a target the proxy's own constraints exclude only when nodeAffinityPolicy is Ignore", () => {
    // Region ap (target other) has no pod: a domain with 0 keeps us and eu, with one each, from a second.
    const placed = [
      { proxy: proxy('a', SPREAD, V(US)), targetKey: 'ClusterTarget/us' },
      { proxy: proxy('b', SPREAD, V(EU)), targetKey: 'ClusterTarget/eu' },
    ];
    const t = setup(placed);
    const excludingOther = (spec: object) => {
      const p = proxy('c', spec);
      p.spec!.affinity = {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [{ matchExpressions: [{ key: 'multicluster.admiralty.io/cluster-target-name', operator: 'NotIn', values: ['other'] }] }],
          },
        },
      };
      return p;
    };
    expect(t.filter(excludingOther(SPREAD)).NodeNames).to.deep.equal([V(US), V(EU)]);
    const ignore = { topologySpreadConstraints: [{ ...SPREAD.topologySpreadConstraints[0], nodeAffinityPolicy: 'Ignore' }] };
    expect(t.filter(excludingOther(ignore)).NodeNames).to.deep.equal([]);
  });

  it('keeps the third of a one-per-region group off every region, and says so in the error', () => {
    const t = setup([
      { proxy: proxy('a', ANTI, V(US)), targetKey: 'ClusterTarget/us' },
      { proxy: proxy('b', ANTI), targetKey: 'ClusterTarget/eu' },
    ]);
    const r = t.filter(proxy('c', ANTI));
    expect(r.NodeNames).to.deep.equal([]);
    expect(r.Error).to.include(`${V(US)}: no node in us fits: 1 node(s) didn't match pod anti-affinity rules (${REGION}=us has 1 matching pod)`);
    expect(r.Error).to.include(`${V(EU)}: no node in eu fits: 1 node(s) didn't match pod anti-affinity rules (${REGION}=eu has 1 matching pod)`);
  });

  it("keeps a pod with no constraints of its own off the region of a bound proxy whose required anti-affinity matches it, and says so in kube-scheduler's words", () => {
    const t = setup([{ proxy: proxy('a', ANTI, V(US)), targetKey: 'ClusterTarget/us' }]);
    const r = t.filter(proxy('x'));
    expect(r.NodeNames).to.deep.equal([V(EU)]);
    expect(r.FailedAndUnresolvableNodes).to.deep.equal({
      [V(US)]: `no node in us fits: 1 node(s) didn't satisfy existing pods anti-affinity rules (${REGION}=us has 1 pod whose anti-affinity matches this pod)`,
    });
  });

  it('ranks a pod with no constraints of its own away from the region of a bound proxy whose preferred anti-affinity matches it', () => {
    const preferred = {
      affinity: {
        podAntiAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 10, podAffinityTerm: ANTI.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]! }] },
      },
    };
    const t = setup([{ proxy: proxy('a', preferred, V(EU)), targetKey: 'ClusterTarget/eu' }], { policy: { kind: 'pack' } });
    // Pack alone would rank eu first (see the ScheduleAnyway test below).
    expect(t.prioritize(proxy('x'))).to.deep.equal([
      { Host: V(US), Score: 10 },
      { Host: V(EU), Score: 9 },
    ]);
    expect(t.filter(proxy('x')).NodeNames, 'preferred: both kept').to.deep.equal([V(US), V(EU)]);
  });

  it('breaks a tie for a pod with topology, and counts the pod it ranked first before its bind shows', () => {
    // us and eu are alike under spread: kube-scheduler would pick one at random, unknown here.
    const t = setup();
    expect(
      t.prioritize(proxy('x')).map((h) => h.Score),
      'a pod without topology: a tie',
    ).to.deep.equal([10, 10]);
    const a = proxy('a', ANTI);
    expect(t.prioritize(a)).to.deep.equal([
      { Host: V(US), Score: 9 },
      { Host: V(EU), Score: 10 },
    ]);
    // Not the pod itself.
    expect(t.filter(a).NodeNames).to.deep.equal([V(US), V(EU)]);
    expect(t.filter(proxy('b', ANTI)).NodeNames).to.deep.equal([V(US)]);
  });

  it('counts a pod its filter left one target to before its bind shows, since kube-scheduler then binds it without a prioritize', () => {
    const t = setup([{ proxy: proxy('a', ANTI, V(US)), targetKey: 'ClusterTarget/us' }]);
    expect(t.filter(proxy('b', ANTI)).NodeNames, 'b: only eu left').to.deep.equal([V(EU)]);
    const r = t.filter(proxy('c', ANTI));
    expect(r.NodeNames, 'c: b counted in eu').to.deep.equal([]);
    expect(r.Error).to.include(`${V(EU)}: no node in eu fits: 1 node(s) didn't match pod anti-affinity rules (${REGION}=eu has 1 matching pod)`);
  });

  it('ranks by ScheduleAnyway spread before the policy: pack would take eu (first by name), the spread takes us', () => {
    const soft = { topologySpreadConstraints: [{ ...SPREAD.topologySpreadConstraints[0]!, whenUnsatisfiable: 'ScheduleAnyway' }] };
    const t = setup([{ proxy: proxy('a', soft, V(EU)), targetKey: 'ClusterTarget/eu' }], { policy: { kind: 'pack' } });
    expect(t.prioritize(proxy('x'))).to.deep.equal([
      { Host: V(US), Score: 9 },
      { Host: V(EU), Score: 10 },
    ]);
    // Soft: the filter keeps both.
    expect(t.filter(proxy('b', soft)).NodeNames).to.deep.equal([V(US), V(EU)]);
    expect(t.prioritize(proxy('b', soft))).to.deep.equal([
      { Host: V(US), Score: 10 },
      { Host: V(EU), Score: 9 },
    ]);
  });

  it('costs a pod without topology nothing: neither its filter nor its prioritize asks for the proxies', () => {
    let asked = 0;
    const registry = new ClusterRegistry();
    registry.set(createTargetClient(US, kubeConfig(), 'fp', false), V(US));
    const routes = createExtenderRoutes({
      registry,
      targetState: () => ({ nodes: nodesOf([node('us-1')]), readAtMs: 0 }),
      policy: { kind: 'spread' },
      placedProxies: () => {
        asked++;
        return [];
      },
      logger: silentLogger(),
    });
    const filter = routes.find((r) => r.path === FILTER_PATH)!;
    const r = (filter.handle({ path: '', connection: undefined as never, body: Buffer.from(JSON.stringify({ Pod: proxy('x'), NodeNames: [V(US)] })) }) as { json: ExtenderFilterResult }).json;
    expect(r.NodeNames).to.deep.equal([V(US)]);
    const prioritize = routes.find((r) => r.path === '/scheduler/prioritize')!;
    const scores = (prioritize.handle({ path: '', connection: undefined as never, body: Buffer.from(JSON.stringify({ Pod: proxy('x'), NodeNames: [V(US)] })) }) as { json: HostPriority[] }).json;
    expect(scores).to.deep.equal([{ Host: V(US), Score: 10 }]);
    expect(asked).to.equal(0);
  });
});
