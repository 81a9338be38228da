import type { V1NodeSelectorRequirement, V1Pod, V1PodSpec } from '@kubernetes/client-node';
import { expect } from 'chai';
import {
  CLUSTER_TARGET_NAME_LABEL,
  ELECT_ANNOTATION,
  PARENT_CLUSTER_NAME_LABEL,
  PARENT_UID_LABEL,
  SOURCE_POD_MANIFEST_ANNOTATION,
  TARGET_NAME_LABEL,
  TARGET_NAMESPACE_LABEL,
  USE_CONSTRAINTS_FROM_SPEC_ANNOTATION,
  VIRTUAL_KUBELET_PROVIDER_LABEL,
} from '../../../provider/core/keys.js';
import { buildDelegatePod } from '../../../provider/model/delegate-pod.js';
import { matchesNodeSelectorAndAffinity } from '../../../scheduler/node-match.js';
import { mutatePod } from '../../../webhook/mutate-pod.js';
import { fitsTarget, likelyNode, waitingRequests, type FitOptions } from '../../../scheduler/fit.js';
import { podRequests } from '../../../provider/model/resources.js';
import { targetIdentityLabels } from '../../../provider/model/virtual-node.js';
import { container, node, nodesOf, pod, runningOn } from './fixtures.js';
import type { V1Node, V1RuntimeClass } from '@kubernetes/client-node';
import { buildClusterSummary } from '../../../provider/model/cluster-summary.js';
import { runtimeClassesOfSummary } from '../../../scheduler/target-classes.js';

/** ClusterTarget c2: the labels its virtual node has and no real node does. */
const C2_LABELS = targetIdentityLabels({ kind: 'ClusterTarget', namespace: '', name: 'c2' });
const opts = { targetName: 'c2', targetLabels: C2_LABELS };

/** fitsTarget over a target made of these nodes and pods, seen through its summary. */
function fit(p: V1Pod, nodes: V1Node[], pods: V1Pod[], o: FitOptions) {
  return fitsTarget(p, nodesOf(nodes, pods), o);
}

function affinity(...terms: { exprs?: V1NodeSelectorRequirement[]; fields?: V1NodeSelectorRequirement[] }[]): Partial<V1PodSpec> {
  return {
    affinity: {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: terms.map((t) => ({ matchExpressions: t.exprs, matchFields: t.fields })),
        },
      },
    },
  };
}

const expr = (key: string, operator: string, values?: string[]): V1NodeSelectorRequirement => ({ key, operator, values });

describe('scheduler: fitsTarget', () => {
  const labelled = node('n1', { labels: { zone: 'a', gen: '5', gpu: 'true' } });

  const cases: { name: string; pod: V1Pod; fits: boolean; reason?: string }[] = [
    { name: 'empty pod on a plain node', pod: pod('p'), fits: true, reason: '1 of 1 node(s) in c2 fit' },
    // nodeSelector
    { name: 'nodeSelector matches', pod: pod('p', {}, { nodeSelector: { zone: 'a' } }), fits: true },
    { name: 'nodeSelector value differs', pod: pod('p', {}, { nodeSelector: { zone: 'b' } }), fits: false, reason: "no node in c2 fits: 1 node(s) didn't match Pod's node affinity/selector" },
    { name: 'nodeSelector key absent', pod: pod('p', {}, { nodeSelector: { disk: 'ssd' } }), fits: false },
    {
      name: "nodeSelector entries on the target's own keys are judged against the target, the rest against its nodes",
      pod: pod('p', {}, { nodeSelector: { [VIRTUAL_KUBELET_PROVIDER_LABEL]: 'admiralty', [CLUSTER_TARGET_NAME_LABEL]: 'c2', zone: 'a' } }),
      fits: true,
    },
    {
      name: 'a nodeSelector that pins the pod to another target excludes this one',
      pod: pod('p', {}, { nodeSelector: { [CLUSTER_TARGET_NAME_LABEL]: 'c3', zone: 'a' } }),
      fits: false,
      reason: "no node in c2 fits: the pod's nodeSelector or node affinity on target labels excludes c2",
    },
    {
      name: 'a Target pin (target-name) excludes a ClusterTarget',
      pod: pod('p', {}, { nodeSelector: { [TARGET_NAME_LABEL]: 'c2' } }),
      fits: false,
    },
    // required node affinity, one operator at a time
    { name: 'In matches', pod: pod('p', {}, affinity({ exprs: [expr('zone', 'In', ['a', 'b'])] })), fits: true },
    { name: 'In does not match', pod: pod('p', {}, affinity({ exprs: [expr('zone', 'In', ['b'])] })), fits: false },
    { name: 'NotIn matches', pod: pod('p', {}, affinity({ exprs: [expr('zone', 'NotIn', ['b'])] })), fits: true },
    { name: 'NotIn on an absent label matches', pod: pod('p', {}, affinity({ exprs: [expr('disk', 'NotIn', ['ssd'])] })), fits: true },
    { name: 'NotIn does not match', pod: pod('p', {}, affinity({ exprs: [expr('zone', 'NotIn', ['a'])] })), fits: false },
    { name: 'Exists matches', pod: pod('p', {}, affinity({ exprs: [expr('gpu', 'Exists')] })), fits: true },
    { name: 'Exists does not match', pod: pod('p', {}, affinity({ exprs: [expr('disk', 'Exists')] })), fits: false },
    { name: 'DoesNotExist matches', pod: pod('p', {}, affinity({ exprs: [expr('disk', 'DoesNotExist')] })), fits: true },
    { name: 'DoesNotExist does not match', pod: pod('p', {}, affinity({ exprs: [expr('gpu', 'DoesNotExist')] })), fits: false },
    { name: 'Gt matches', pod: pod('p', {}, affinity({ exprs: [expr('gen', 'Gt', ['4'])] })), fits: true },
    { name: 'Gt does not match', pod: pod('p', {}, affinity({ exprs: [expr('gen', 'Gt', ['5'])] })), fits: false },
    { name: 'Lt matches', pod: pod('p', {}, affinity({ exprs: [expr('gen', 'Lt', ['6'])] })), fits: true },
    { name: 'Lt on a non-integer label never matches', pod: pod('p', {}, affinity({ exprs: [expr('zone', 'Lt', ['6'])] })), fits: false },
    { name: 'unknown operator never matches', pod: pod('p', {}, affinity({ exprs: [expr('zone', 'Like', ['a'])] })), fits: false },
    { name: 'expressions in a term are ANDed', pod: pod('p', {}, affinity({ exprs: [expr('zone', 'In', ['a']), expr('gpu', 'DoesNotExist')] })), fits: false },
    {
      name: 'terms are ORed',
      pod: pod('p', {}, affinity({ exprs: [expr('zone', 'In', ['b'])] }, { exprs: [expr('gpu', 'Exists')] })),
      fits: true,
    },
    { name: 'an empty term matches nothing', pod: pod('p', {}, affinity({})), fits: false },
    { name: 'matchFields metadata.name In', pod: pod('p', {}, affinity({ fields: [expr('metadata.name', 'In', ['n1'])] })), fits: true },
    { name: 'matchFields metadata.name NotIn', pod: pod('p', {}, affinity({ fields: [expr('metadata.name', 'NotIn', ['n1'])] })), fits: false },
    {
      name: "the webhook's target-scope terms count as satisfied",
      pod: pod(
        'p',
        {},
        affinity({ exprs: [expr('zone', 'In', ['a']), expr(TARGET_NAMESPACE_LABEL, 'In', ['default'])] }, { exprs: [expr('zone', 'In', ['a']), expr(CLUSTER_TARGET_NAME_LABEL, 'Exists')] }),
      ),
      fits: true,
    },
    {
      name: 'a term that excludes the target is left out, and the others still judge the nodes',
      pod: pod('p', {}, affinity({ exprs: [expr(CLUSTER_TARGET_NAME_LABEL, 'In', ['c3'])] }, { exprs: [expr('zone', 'In', ['b']), expr(CLUSTER_TARGET_NAME_LABEL, 'In', ['c2'])] })),
      fits: false,
      reason: "no node in c2 fits: 1 node(s) didn't match Pod's node affinity/selector",
    },
    {
      name: 'a term on target keys alone that the target satisfies lets every node through',
      pod: pod('p', {}, affinity({ exprs: [expr(CLUSTER_TARGET_NAME_LABEL, 'In', ['c2', 'c3'])] }, { exprs: [expr('disk', 'Exists')] })),
      fits: true,
    },
    {
      name: 'every term excluding the target excludes it',
      pod: pod('p', {}, affinity({ exprs: [expr(CLUSTER_TARGET_NAME_LABEL, 'NotIn', ['c2'])] }, { exprs: [expr(TARGET_NAMESPACE_LABEL, 'Exists'), expr('zone', 'In', ['a'])] })),
      fits: false,
      reason: "no node in c2 fits: the pod's nodeSelector or node affinity on target labels excludes c2",
    },
  ];

  for (const c of cases) {
    it(c.name, () => {
      const r = fit(c.pod, [labelled], [], opts);
      expect(r.fits, r.reason).to.equal(c.fits);
      if (c.reason) expect(r.reason).to.equal(c.reason);
    });
  }

  describe('taints', () => {
    const tainted = node('n1', { taints: [{ key: 'dedicated', value: 'gpu', effect: 'NoSchedule' }] });
    const table: { name: string; taintEffect?: string; tolerations?: V1PodSpec['tolerations']; fits: boolean }[] = [
      { name: 'untolerated NoSchedule rejects', fits: false },
      { name: 'Equal with the same value tolerates', tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'gpu', effect: 'NoSchedule' }], fits: true },
      { name: 'no operator means Equal', tolerations: [{ key: 'dedicated', value: 'gpu' }], fits: true },
      { name: 'Equal with another value does not', tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'cpu' }], fits: false },
      { name: 'Exists on the key tolerates', tolerations: [{ key: 'dedicated', operator: 'Exists' }], fits: true },
      { name: 'empty key with Exists tolerates everything', tolerations: [{ operator: 'Exists' }], fits: true },
      { name: 'another effect does not', tolerations: [{ key: 'dedicated', operator: 'Exists', effect: 'NoExecute' }], fits: false },
      { name: 'NoExecute is checked too', taintEffect: 'NoExecute', fits: false },
      { name: 'PreferNoSchedule is ignored', taintEffect: 'PreferNoSchedule', fits: true },
    ];
    for (const c of table) {
      it(c.name, () => {
        const n = c.taintEffect ? node('n1', { taints: [{ key: 'dedicated', value: 'gpu', effect: c.taintEffect }] }) : tainted;
        const r = fit(pod('p', {}, { tolerations: c.tolerations }), [n], [], opts);
        expect(r.fits, r.reason).to.equal(c.fits);
        if (!c.fits) expect(r.reason).to.equal('no node in c2 fits: 1 node(s) had untolerated taint {dedicated: gpu}');
      });
    }
  });

  describe('node state', () => {
    it('rejects a NotReady node', () => {
      const r = fit(pod('p'), [node('n1', { ready: false })], [], opts);
      expect(r).to.include({ fits: false, reason: 'no node in c2 fits: 1 node(s) were not ready', unresolvable: true });
    });

    it('rejects a node without conditions', () => {
      const n = node('n1');
      n.status!.conditions = [];
      expect(fit(pod('p'), [n], [], opts).fits).to.equal(false);
    });

    it('rejects a cordoned node, unless the pod tolerates unschedulable', () => {
      const cordoned = node('n1', { unschedulable: true });
      expect(fit(pod('p'), [cordoned], [], opts).reason).to.equal('no node in c2 fits: 1 node(s) were unschedulable');
      const tolerant = pod('p', {}, { tolerations: [{ key: 'node.kubernetes.io/unschedulable', operator: 'Exists', effect: 'NoSchedule' }] });
      expect(fit(tolerant, [cordoned], [], opts).fits).to.equal(true);
    });

    it('never counts the target’s own virtual nodes (its summary leaves them out)', () => {
      const v = node('admiralty-cluster-x', { labels: { [VIRTUAL_KUBELET_PROVIDER_LABEL]: 'admiralty' } });
      expect(fit(pod('p'), [v], [], opts).reason).to.equal('no node in c2 fits: c2 has no nodes');
    });

    it('says so when the target has no nodes', () => {
      expect(fit(pod('p'), [], [], opts)).to.include({ fits: false, reason: 'no node in c2 fits: c2 has no nodes' });
    });
  });

  describe('resources', () => {
    const small = node('n1', { allocatable: { cpu: '2', memory: '4Gi', pods: '3', 'nvidia.com/gpu': '1' } });
    const table: { name: string; requests: Record<string, string>; running?: V1Pod[]; fits: boolean; reason?: string }[] = [
      { name: 'fits in an empty node', requests: { cpu: '2', memory: '4Gi' }, fits: true },
      { name: 'too much cpu', requests: { cpu: '2500m' }, fits: false, reason: 'no node in c2 fits: 1 Insufficient cpu (largest free 2)' },
      {
        name: 'cpu and memory both short are both counted',
        requests: { cpu: '3', memory: '5Gi' },
        fits: false,
        reason: 'no node in c2 fits: 1 Insufficient cpu (largest free 2), 1 Insufficient memory (largest free 4Gi)',
      },
      { name: 'running pods hold their requests', requests: { cpu: '1500m' }, running: [runningOn('n1', { cpu: '1' })], fits: false },
      { name: 'terminal pods hold nothing', requests: { cpu: '1500m' }, running: [runningOn('n1', { cpu: '1' }, 'Succeeded'), runningOn('n1', { cpu: '1' }, 'Failed')], fits: true },
      { name: 'pods on other nodes do not count', requests: { cpu: '1500m' }, running: [runningOn('n9', { cpu: '2' })], fits: true },
      { name: 'extended resource available', requests: { 'nvidia.com/gpu': '1' }, fits: true },
      { name: 'extended resource short', requests: { 'nvidia.com/gpu': '2' }, fits: false, reason: 'no node in c2 fits: 1 Insufficient nvidia.com/gpu (largest free 1)' },
      { name: 'extended resource the node lacks', requests: { 'example.com/fpga': '1' }, fits: false, reason: 'no node in c2 fits: 1 Insufficient example.com/fpga (largest free 0)' },
      { name: 'pod slots', requests: {}, running: [runningOn('n1', {}), runningOn('n1', {}), runningOn('n1', {})], fits: false, reason: 'no node in c2 fits: 1 Too many pods' },
    ];
    for (const c of table) {
      it(c.name, () => {
        const r = fit(pod('p', c.requests), [small], c.running ?? [], opts);
        expect(r.fits, r.reason).to.equal(c.fits);
        if (c.reason) expect(r.reason).to.equal(c.reason);
        if (!c.fits) expect(r.unresolvable).to.equal(false);
      });
    }

    it('counts reasons over nodes, most frequent first', () => {
      const nodes = [node('a', { allocatable: { cpu: '1', memory: '1Gi', pods: '10' } }), node('b', { allocatable: { cpu: '1', memory: '1Gi', pods: '10' } }), node('c', { labels: { zone: 'x' } })];
      const r = fit(pod('p', { cpu: '2' }, { nodeSelector: { zone: 'a' } }), nodes, [], opts);
      expect(r.reason).to.equal("no node in c2 fits: 3 node(s) didn't match Pod's node affinity/selector");
      const r2 = fit(pod('p', { cpu: '2' }), nodes.slice(0, 2).concat(node('c', { ready: false })), [], opts);
      expect(r2.reason).to.equal('no node in c2 fits: 2 Insufficient cpu (largest free 1), 1 node(s) were not ready');
      expect(r2.unresolvable).to.equal(false);
    });

    it('never fits a pod that only the sum of the nodes could hold', () => {
      const half = { cpu: '2', memory: '4Gi', pods: '10' };
      const r = fit(pod('p', { cpu: '3' }), [node('a', { allocatable: half }), node('b', { allocatable: half })], [runningOn('a', { cpu: '500m' })], opts);
      expect(r).to.include({ fits: false, reason: 'no node in c2 fits: 2 Insufficient cpu (largest free 2)', unresolvable: false });
    });

    it('takes off what was placed since the summary was written', () => {
      const nodes = nodesOf([node('a', { allocatable: { cpu: '2', memory: '4Gi', pods: '10' } })]);
      expect(fitsTarget(pod('p', { cpu: '1500m' }), nodes, opts).fits).to.equal(true);
      const assumed = new Map([['a', new Map([['cpu', 1_000_000_000n]])]]);
      expect(fitsTarget(pod('p', { cpu: '1500m' }), nodes, { ...opts, assumed }).reason).to.equal('no node in c2 fits: 1 Insufficient cpu (largest free 1)');
    });

    it('lists the nodes that fit', () => {
      const r = fit(pod('p', { cpu: '3' }), [node('a'), node('b', { allocatable: { cpu: '2', memory: '1Gi', pods: '10' } })], [], opts);
      expect(r).to.deep.include({ fits: true, fittingNodes: ['a'], reason: '1 of 2 node(s) in c2 fit' });
    });
  });

  describe('podRequests', () => {
    it('takes the max of the containers sum and each init container', () => {
      const spec: V1PodSpec = { containers: [container({ cpu: '1' }), container({ cpu: '500m', memory: '1Gi' })], initContainers: [container({ cpu: '2', memory: '100Mi' })] };
      const r = podRequests(spec);
      expect(r.get('cpu')).to.equal(2_000_000_000n);
      expect(r.get('memory')).to.equal(1024n ** 3n * 1_000_000_000n);
    });

    it('adds sidecars (restartable init containers) to everything after them', () => {
      const spec: V1PodSpec = {
        initContainers: [container({ cpu: '1' }, { restartPolicy: 'Always' }), container({ cpu: '2' })],
        containers: [container({ cpu: '500m' })],
      };
      // init phase: 1 (sidecar) + 2 = 3; run phase: 0.5 + 1 = 1.5.
      expect(podRequests(spec).get('cpu')).to.equal(3_000_000_000n);
    });

    it('uses limits where requests are missing', () => {
      expect(podRequests({ containers: [{ name: 'c', resources: { limits: { cpu: '750m' } } }] }).get('cpu')).to.equal(750_000_000n);
    });
  });

  describe('source pod manifest', () => {
    it("judges the delegate spec: the manifest's scheduling fields, not the proxy's", () => {
      const original = pod('p', { cpu: '1' }, { nodeSelector: { zone: 'a' } });
      const proxy = pod('p', { cpu: '1' }, { nodeSelector: { [VIRTUAL_KUBELET_PROVIDER_LABEL]: 'admiralty', other: 'x' } });
      proxy.metadata!.annotations = { [SOURCE_POD_MANIFEST_ANNOTATION]: JSON.stringify(original) };
      const r = fit(proxy, [node('n1', { labels: { zone: 'a' }, allocatable: { cpu: '2', memory: '1Gi', pods: '10' } })], [], opts);
      expect(r.fits, r.reason).to.equal(true);
    });

    it("takes the containers' requests from the proxy, as the delegate does, whatever the manifest says", () => {
      const proxy = pod('p', { cpu: '3' });
      const original = pod('p', { cpu: '1' });
      proxy.metadata!.annotations = { [SOURCE_POD_MANIFEST_ANNOTATION]: JSON.stringify(original) };
      const r = fit(proxy, [node('n1', { allocatable: { cpu: '2', memory: '1Gi', pods: '10' } })], [], opts);
      expect(r.fits).to.equal(false);
    });

    it('rejects, unresolvably, when the manifest is unreadable', () => {
      const proxy = pod('p');
      proxy.metadata!.annotations = { [SOURCE_POD_MANIFEST_ANNOTATION]: '[1, 2]' };
      const r = fit(proxy, [node('n1')], [], opts);
      expect(r.fits).to.equal(false);
      expect(r.unresolvable).to.equal(true);
      expect(r.reason).to.match(/sourcepod-manifest/);
    });
  });
});

describe('scheduler: fitsTarget and host ports (judged per real node, as NodePorts does)', () => {
  type Port = { hostPort: number; protocol?: string; hostIP?: string };
  const withPorts = (name: string, ports: Port[], nodeName?: string): V1Pod => {
    const p = pod(name, { cpu: '100m' }, nodeName ? { nodeName } : {});
    p.spec!.containers[0]!.ports = ports.map((x) => ({ containerPort: 8080, ...x }));
    if (nodeName) p.status = { phase: 'Running' };
    return p;
  };
  const nodes = [node('n1'), node('n2')];

  const cases: { name: string; wants: Port[]; held: [string, Port[]][]; fitting: string[] }[] = [
    { name: 'a port held on one node leaves the other', wants: [{ hostPort: 80 }], held: [['n1', [{ hostPort: 80 }]]], fitting: ['n2'] },
    { name: 'another protocol does not conflict', wants: [{ hostPort: 80, protocol: 'UDP' }], held: [['n1', [{ hostPort: 80 }]]], fitting: ['n1', 'n2'] },
    { name: 'every address against one address conflicts', wants: [{ hostPort: 80 }], held: [['n1', [{ hostPort: 80, hostIP: '10.0.0.1' }]]], fitting: ['n2'] },
    { name: 'one address against every address conflicts', wants: [{ hostPort: 80, hostIP: '10.0.0.2' }], held: [['n1', [{ hostPort: 80, hostIP: '0.0.0.0' }]]], fitting: ['n2'] },
    { name: 'two different addresses do not conflict', wants: [{ hostPort: 80, hostIP: '10.0.0.2' }], held: [['n1', [{ hostPort: 80, hostIP: '10.0.0.1' }]]], fitting: ['n1', 'n2'] },
    { name: 'another port does not conflict', wants: [{ hostPort: 81 }], held: [['n1', [{ hostPort: 80 }]]], fitting: ['n1', 'n2'] },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const r = fit(
        withPorts('p', c.wants),
        nodes,
        c.held.map(([n, ports], i) => withPorts(`h${i}`, ports, n)),
        opts,
      );
      expect(r.fittingNodes).to.deep.equal(c.fitting);
    });
  }

  it('counts the host ports promised on a node that its summary does not show yet (binds in flight)', () => {
    const promised = new Map([['n1', [{ port: 80, protocol: 'TCP' }]]]);
    expect(fit(withPorts('p', [{ hostPort: 80 }]), nodes, [], { ...opts, assumedPorts: promised }).fittingNodes).to.deep.equal(['n2']);
    expect(fit(withPorts('p', [{ hostPort: 81 }]), nodes, [], { ...opts, assumedPorts: promised }).fittingNodes).to.deep.equal(['n1', 'n2']);
    // A pod without host ports is not held back by them.
    expect(fit(pod('p', { cpu: '100m' }), nodes, [], { ...opts, assumedPorts: promised }).fittingNodes).to.deep.equal(['n1', 'n2']);
  });

  it('says why when every node holds the port, resolvably (evicting a pod could free it)', () => {
    const held = [withPorts('a', [{ hostPort: 18080 }], 'n1'), withPorts('b', [{ hostPort: 18080 }], 'n2')];
    const r = fit(withPorts('p', [{ hostPort: 18080 }]), nodes, held, opts);
    expect(r).to.include({ fits: false, reason: "no node in c2 fits: 2 node(s) didn't have free ports for the requested pod ports", unresolvable: false });
  });

  it('counts the ports of sidecars, not of init containers that end, nor of finished pods', () => {
    const sidecar = pod('s', {}, { nodeName: 'n1', initContainers: [container({}, { name: 'side', restartPolicy: 'Always', ports: [{ containerPort: 1, hostPort: 80 }] })] });
    const init = pod('i', {}, { nodeName: 'n2', initContainers: [container({}, { name: 'init', ports: [{ containerPort: 1, hostPort: 80 }] })] });
    const done = withPorts('d', [{ hostPort: 80 }], 'n2');
    done.status = { phase: 'Succeeded' };
    expect(fit(withPorts('p', [{ hostPort: 80 }]), nodes, [sidecar, init, done], opts).fittingNodes).to.deep.equal(['n2']);
    // And a pod's own sidecar asks for its port as its containers do.
    const wantsBySidecar = pod('w', {}, { initContainers: [container({}, { name: 'side', restartPolicy: 'Always', ports: [{ containerPort: 1, hostPort: 80 }] })] });
    expect(fit(wantsBySidecar, nodes, [sidecar], opts).fittingNodes).to.deep.equal(['n2']);
  });
});

describe('scheduler: fitsTarget with burst capacity', () => {
  const n = (g: string) => BigInt(g) * 1_000_000_000n;
  const full = node('n1', { allocatable: { cpu: '4', memory: '8Gi', pods: '110' } });
  const burst = (capacity: Record<string, bigint>, waiting: Record<string, bigint> = {}): FitOptions => ({
    ...opts,
    burst: { capacity: new Map(Object.entries(capacity)), waiting: () => new Map(Object.entries(waiting)) },
  });

  it('fits by burst when no current node can take the pod but the capacity can', () => {
    const r = fit(pod('p', { cpu: '8' }), [full], [], burst({ cpu: n('16') }));
    expect(r).to.deep.include({ fits: true, byBurst: true, fittingNodes: [] });
    expect(r.reason).to.equal('no node in c2 fits now (1 Insufficient cpu (largest free 4)); its burst capacity can hold the pod');
  });

  it('fits a target with no nodes at all (scale from zero)', () => {
    const r = fitsTarget(pod('p', { cpu: '1' }), [], burst({ cpu: n('16') }));
    expect(r).to.deep.include({ fits: true, byBurst: true });
  });

  it('counts what already waits there against the capacity', () => {
    const r = fit(pod('p', { cpu: '8' }), [full], [], burst({ cpu: n('16') }, { cpu: n('10') }));
    expect(r.fits).to.equal(false);
    expect(r.reason).to.equal('no node in c2 fits: 1 Insufficient cpu (largest free 4); burst capacity short of cpu');
  });

  it('counts pod slots under pods, and leaves resources the capacity does not name unlimited', () => {
    expect(fitsTarget(pod('p', { cpu: '1', memory: '1Ti' }), [], burst({ pods: n('2') }, { pods: n('1') })).fits).to.equal(true);
    expect(fitsTarget(pod('p', { cpu: '1' }), [], burst({ pods: n('2') }, { pods: n('2') })).reason).to.match(/burst capacity short of pods$/);
  });

  it('prefers current nodes: a pod that fits one is not counted as a burst', () => {
    const r = fit(pod('p', { cpu: '1' }), [full], [], burst({ cpu: n('16') }));
    expect(r).to.deep.include({ fits: true, fittingNodes: ['n1'] });
    expect(r.byBurst).to.equal(undefined);
  });

  it('without burst capacity, a target with no nodes still does not fit', () => {
    expect(fitsTarget(pod('p'), [], opts)).to.deep.include({ fits: false, unresolvable: true, reason: 'no node in c2 fits: c2 has no nodes' });
  });
});

describe("scheduler: fitsTarget with the target's RuntimeClasses", () => {
  const taint = { key: 'sandbox', value: 'gvisor', effect: 'NoSchedule' };
  const nodes = [node('plain'), node('sandboxed', { labels: { runtime: 'gvisor' }, taints: [taint] })];
  /** c2's classes as its summary publishes them. */
  const classes = (...rcs: V1RuntimeClass[]) => runtimeClassesOfSummary(buildClusterSummary(nodes, [], undefined, undefined, { runtime: rcs }));
  const gvisor: V1RuntimeClass = {
    metadata: { name: 'gvisor' },
    handler: 'runsc',
    overhead: { podFixed: { cpu: '1' } },
    scheduling: { nodeSelector: { runtime: 'gvisor' }, tolerations: [{ key: 'sandbox', operator: 'Exists', effect: 'NoSchedule' }] },
  };
  const ofClass = (requests: Record<string, string>, spec: Partial<V1PodSpec> = {}) => pod('p', requests, { runtimeClassName: 'gvisor', ...spec });

  it("fits only the nodes the class selects, tolerating the class's taints", () => {
    const r = fit(ofClass({ cpu: '1' }), nodes, [], { ...opts, runtimeClasses: classes(gvisor) });
    expect(r).to.deep.include({ fits: true, fittingNodes: ['sandboxed'] });
  });

  it("adds the class's overhead in the target to the requests, not the source's", () => {
    // 4 cpu a node: 3 + 1 of overhead fit; 3.5 + 1 do not, whatever the proxy's own overhead says.
    expect(fit(ofClass({ cpu: '3' }, { overhead: { cpu: '10' } }), nodes, [], { ...opts, runtimeClasses: classes(gvisor) }).fits).to.equal(true);
    const r = fit(ofClass({ cpu: '3500m' }), nodes, [], { ...opts, runtimeClasses: classes(gvisor) });
    expect(r).to.include({ fits: false, unresolvable: false, reason: "no node in c2 fits: 1 Insufficient cpu (largest free 4), 1 node(s) didn't match Pod's node affinity/selector" });
  });

  it('fits no node of a target without the class, and says so', () => {
    const r = fit(ofClass({ cpu: '1' }), nodes, [], { ...opts, runtimeClasses: classes() });
    expect(r).to.include({ fits: false, unresolvable: true, reason: 'no node in c2 fits: c2 has no RuntimeClass gvisor' });
  });

  it("fits no node when the pod's nodeSelector sets a key of the class's to another value (the target's admission would refuse it)", () => {
    const r = fit(ofClass({}, { nodeSelector: { runtime: 'kata' } }), nodes, [], { ...opts, runtimeClasses: classes(gvisor) });
    expect(r).to.include({
      fits: false,
      unresolvable: true,
      reason: "no node in c2 fits: the RuntimeClass gvisor of c2 selects nodes with runtime=gvisor, and the pod's nodeSelector has runtime=kata",
    });
    expect(fit(ofClass({}, { nodeSelector: { runtime: 'gvisor' } }), nodes, [], { ...opts, runtimeClasses: classes(gvisor) }).fits).to.equal(true);
    // A key of the class's that the pod does not set is no conflict, whatever its name.
    const odd = { ...gvisor, scheduling: { nodeSelector: { constructor: 'x' } } };
    expect(fit(ofClass({}, { nodeSelector: {} }), nodes, [], { ...opts, runtimeClasses: classes(odd) }).reason).to.not.match(/selects nodes with/);
  });

  it('judges a class without scheduling or overhead by the pod alone', () => {
    const r = fit(ofClass({ cpu: '4' }), nodes, [], { ...opts, runtimeClasses: classes({ metadata: { name: 'gvisor' }, handler: 'runsc' }) });
    expect(r).to.deep.include({ fits: true, fittingNodes: ['plain'] });
  });

  it("judges nothing of the class when the target's summary publishes no classes (an earlier writer)", () => {
    expect(runtimeClassesOfSummary(buildClusterSummary(nodes))).to.equal(undefined);
    expect(fit(ofClass({ cpu: '4' }), nodes, [], opts)).to.deep.include({ fits: true, fittingNodes: ['plain'] });
  });

  it("fits no node of a target without the pod's PriorityClass, and judges nothing of it where the names are unknown", () => {
    const urgent = pod('p', { cpu: '1' }, { priorityClassName: 'urgent' });
    expect(fit(urgent, nodes, [], { ...opts, priorityClasses: new Set(['low']) })).to.include({ fits: false, unresolvable: true, reason: 'no node in c2 fits: c2 has no PriorityClass urgent' });
    expect(fit(urgent, nodes, [], { ...opts, priorityClasses: new Set(['urgent']) }).fits).to.equal(true);
    expect(fit(urgent, nodes, [], opts).fits).to.equal(true);
  });

  it('leaves pods without a class alone', () => {
    expect(fit(pod('p', { cpu: '4' }), nodes, [], { ...opts, runtimeClasses: classes() })).to.deep.include({ fits: true, fittingNodes: ['plain'] });
  });
});

describe('scheduler: likelyNode', () => {
  const nodes = nodesOf([
    node('n1', { allocatable: { cpu: '4', memory: '8Gi', pods: '110' }, labels: { zone: 'a' } }),
    node('n2', { allocatable: { cpu: '8', memory: '2Gi', pods: '110' }, labels: { zone: 'b' } }),
    node('n3', { allocatable: { cpu: '16', memory: '16Gi', pods: '110' }, labels: { zone: 'c' }, ready: false }),
  ]);
  const GiB = 2n ** 30n;

  it("gives the fitting node with the most free room of the pod's largest request", () => {
    // 4Gi is half the most memory free, 1 cpu an eighth of the most cpu free: memory decides.
    expect(likelyNode(pod('p', { cpu: '1', memory: '4Gi' }), nodes, opts)).to.equal('n1');
    expect(likelyNode(pod('p', { cpu: '2', memory: '100Mi' }), nodes, opts)).to.equal('n2');
    // Asking nothing: cpu.
    expect(likelyNode(pod('p'), nodes, opts)).to.equal('n2');
  });

  it('judges as the filter does: what is assumed, node constraints; none when no node fits, burst capacity or not', () => {
    expect(likelyNode(pod('p', { cpu: '2' }), nodes, { ...opts, assumed: new Map([['n2', new Map([['cpu', 7_000_000_000n]])]]) })).to.equal('n1');
    expect(likelyNode(pod('p', { cpu: '2' }), nodes, { ...opts, assumed: new Map([['n2', new Map([['cpu', 5_000_000_000n]])]]) })).to.equal('n1');
    expect(likelyNode(pod('p', { cpu: '2' }, { nodeSelector: { zone: 'a' } }), nodes, opts)).to.equal('n1');
    const burst = { capacity: new Map([['cpu', 100_000_000_000n]]) };
    expect(likelyNode(pod('p', { cpu: '10' }), nodes, { ...opts, burst })).to.equal(undefined);
    expect(likelyNode(pod('p', { memory: `${9n * GiB}` }), nodes, opts)).to.equal(undefined);
  });

  it("honours the pod's preferred node affinity before free room: the node matching the most weight wins, room breaks ties among equals", () => {
    const prefer = (...terms: [number, string][]) => ({
      affinity: {
        nodeAffinity: {
          preferredDuringSchedulingIgnoredDuringExecution: terms.map(([weight, zone]) => ({ weight, preference: { matchExpressions: [{ key: 'zone', operator: 'In', values: [zone] }] } })),
        },
      },
    });
    // By room alone cpu would take n2 (8 cpu free against 4).
    expect(likelyNode(pod('p', { cpu: '1' }, prefer([10, 'a'])), nodes, opts)).to.equal('n1');
    expect(likelyNode(pod('p', { cpu: '1' }, prefer([10, 'a'], [20, 'b'])), nodes, opts)).to.equal('n2');
    // Alike (both matched, weight 5 each): room decides, n2.
    expect(likelyNode(pod('p', { cpu: '1' }, prefer([5, 'a'], [5, 'b'])), nodes, opts)).to.equal('n2');
  });
});

describe('scheduler: waitingRequests', () => {
  const delegate = (uid: string, cpu: string, o: { nodeName?: string; deleting?: boolean; phase?: string; source?: string } = {}) => {
    const d = pod(`d-${uid}`, { cpu }, o.nodeName ? { nodeName: o.nodeName } : {});
    d.metadata!.labels = { [PARENT_UID_LABEL]: uid, [PARENT_CLUSTER_NAME_LABEL]: o.source ?? 'c1' };
    if (o.deleting) d.metadata!.deletionTimestamp = new Date();
    d.status = { phase: o.phase ?? 'Pending' };
    return d;
  };

  it('sums our delegates without a node, and the proxies being placed whose delegate is not there yet, one pod slot each', () => {
    const placingProxy = pod('web-2', { cpu: '2' });
    placingProxy.metadata!.uid = 'u3';
    const alreadyCreated = pod('web-1', { cpu: '5' });
    alreadyCreated.metadata!.uid = 'u1';
    const w = waitingRequests(
      [delegate('u1', '1'), delegate('u2', '1', { nodeName: 'n1' }), delegate('u4', '1', { deleting: true }), delegate('u5', '1', { phase: 'Failed' }), delegate('u6', '1', { source: 'other' })],
      [alreadyCreated, placingProxy],
      'c1',
    );
    expect(w.get('cpu')).to.equal(3_000_000_000n);
    expect(w.get('pods')).to.equal(2_000_000_000n);
  });
});

describe('scheduler: a pod pinned to a target in its own spec', () => {
  // Admiralty's users pin a pod with a nodeSelector on the virtual node's labels. No real node of
  // the target has them: the filter and the delegate must agree on what they mean there.
  const c2 = targetIdentityLabels({ kind: 'Target', namespace: 'default', name: 'c2' });
  const c3 = targetIdentityLabels({ kind: 'Target', namespace: 'default', name: 'c3' });
  for (const useSpec of [false, true]) {
    it(`goes to that target only, and its delegate there can be placed (use-constraints-from-spec: ${useSpec})`, () => {
      const input = pod('web', { cpu: '1' }, { nodeSelector: { [TARGET_NAME_LABEL]: 'c2', [TARGET_NAMESPACE_LABEL]: 'default', zone: 'a' } });
      input.metadata!.annotations = { [ELECT_ANNOTATION]: '', ...(useSpec ? { [USE_CONSTRAINTS_FROM_SPEC_ANNOTATION]: '' } : {}) };
      const proxy = mutatePod(input, { schedulerName: 'admiralty-proxy', namespace: 'default' }).pod;
      proxy.metadata!.uid = 'u1';
      const realNode = node('c2-node-1', { labels: { zone: 'a' } });

      expect(fitsTarget(proxy, nodesOf([realNode]), { targetName: 'c3', targetLabels: c3 }).fits, 'another target').to.equal(false);
      const fit = fitsTarget(proxy, nodesOf([realNode]), { targetName: 'c2', targetLabels: c2 });
      expect(fit.fits, fit.reason).to.equal(true);

      const delegate = buildDelegatePod(proxy, { sourceClusterName: 'c1', targetLabels: c2 });
      expect(delegate.spec!.nodeSelector).to.deep.equal({ zone: 'a' });
      // What c2's kube-scheduler checks: nodeSelector and required affinity, on the node's own labels.
      expect(matchesNodeSelectorAndAffinity(delegate.spec!, { name: 'c2-node-1', labels: realNode.metadata!.labels! })).to.equal(true);
    });
  }
});
