import { expect } from 'chai';
import type { V1Node, V1Pod, V1RuntimeClass } from '@kubernetes/client-node';
import { perObject } from '../../../../provider/core/per-object.js';
import {
  buildClusterSummary,
  clusterSummaryProblem,
  isVirtualNode,
  MAX_SUMMARY_ENTRIES,
  MAX_SUMMARY_NODES,
  sightSummary,
  summaryEquals,
  summaryPodFields,
  summaryPriorityClassFields,
  summaryRuntimeClasses,
  summaryRuntimeClassFields,
  summaryStaleness,
} from '../../../../provider/model/cluster-summary.js';
import type { ClusterSummary } from '../../../../provider/model/types.js';
import { matchesNodeSelectorAndAffinity } from '../../../../scheduler/node-match.js';
import { nodesOfSummary } from '../../../../scheduler/target-nodes.js';
import { priorityClassesOfSummary, runtimeClassesOfSummary } from '../../../../scheduler/target-classes.js';
import { podRequestsWithOverhead } from '../../../../provider/model/resources.js';
import { pod as basePod } from '../../../support/pods.js';

function node(labels: Record<string, string>, capacity?: Record<string, string>, allocatable?: Record<string, string>): V1Node {
  return { metadata: { name: Object.values(labels)[0] ?? 'n', labels }, status: { capacity, allocatable } };
}

describe('buildClusterSummary', () => {
  const nodes = [
    node({ 'kubernetes.io/hostname': 'n1', zone: 'a', os: 'linux', gpu: 'yes' }, { cpu: '4', memory: '8039396Ki', pods: '110' }, { cpu: '3800m', memory: '7Gi', pods: '110' }),
    node({ 'kubernetes.io/hostname': 'n2', zone: 'b', os: 'linux' }, { cpu: '2', memory: '4Gi', pods: '110', 'nvidia.com/gpu': '1' }, { cpu: '1500m', memory: '3.5Gi', pods: '110' }),
    node({ 'virtual-kubelet.io/provider': 'admiralty', zone: 'z', os: 'windows' }, { cpu: '1000', memory: '1Ti', pods: '10000' }),
    node({ 'virtual-kubelet.io/provider': 'other' }, { cpu: '1000' }),
  ];
  const summary = buildClusterSummary(nodes);

  it('is the singleton ClusterSummary', () => {
    expect(summary.apiVersion).to.equal('multicluster.admiralty.io/v1alpha1');
    expect(summary.kind).to.equal('ClusterSummary');
    expect(summary.metadata.name).to.equal('singleton');
  });

  it('sums capacity over real nodes only, canonically', () => {
    expect(summary.capacity).to.deep.equal({ cpu: '6', memory: '12233700Ki', 'nvidia.com/gpu': '1', pods: '220' });
  });

  it('sums allocatable over real nodes only', () => {
    expect(summary.allocatable).to.deep.equal({ cpu: '5300m', memory: '10752Mi', pods: '220' });
  });

  it('keeps labels with a single value on every node that has them', () => {
    expect(summary.metadata.labels).to.deep.equal({ gpu: 'yes', os: 'linux' });
  });

  const edge: [string, V1Node[], Partial<ReturnType<typeof buildClusterSummary>>][] = [
    ['no nodes', [], { capacity: {}, allocatable: {} }],
    ['only virtual nodes', [nodes[2]!], { capacity: {}, allocatable: {} }],
    ['a node without status', [{ metadata: { name: 'x', labels: { a: '1' } } }], { capacity: {}, allocatable: {} }],
    ['an unparsable quantity is skipped', [node({ a: '1' }, { cpu: 'lots', memory: '1Gi' })], { capacity: { memory: '1Gi' } }],
  ];
  for (const [why, list, want] of edge) {
    it(why, () => expect(buildClusterSummary(list)).to.deep.include(want));
  }

  it('does not depend on node order', () => {
    expect(buildClusterSummary([...nodes].reverse())).to.deep.equal(summary);
  });
});

describe('summaryEquals', () => {
  const base = buildClusterSummary([node({ a: '1' }, { cpu: '4', memory: '1Gi' })]);
  const cases: [string, Parameters<typeof summaryEquals>[1], boolean][] = [
    ['same', JSON.parse(JSON.stringify(base)), true],
    ['quantities equal by value', { ...base, capacity: { cpu: '4000m', memory: '1073741824' } }, true],
    ['capacity differs', { ...base, capacity: { cpu: '5', memory: '1Gi' } }, false],
    ['labels differ', { ...base, metadata: { ...base.metadata, labels: { a: '2' } } }, false],
    ['the pod version it accounts for differs (all else equal)', { ...base, podsResourceVersion: '7' }, false],
    ['the renew interval it declares differs', { ...base, renewIntervalSeconds: 30 }, false],
    ['it publishes runtime classes, where the other publishes none', { ...base, runtimeClasses: [] }, false],
    ['only when it was written differs', { ...base, renewTime: '2026-11-29T10:00:00.000Z' }, true],
    ['undefined', undefined, false],
  ];
  for (const [why, other, want] of cases) {
    it(why, () => expect(summaryEquals(base, other)).to.equal(want));
  }
  it('is written by the builder when given, and left out when not', () => {
    expect(buildClusterSummary([], [], '42').podsResourceVersion).to.equal('42');
    expect(buildClusterSummary([], [])).to.not.have.property('podsResourceVersion');
  });
});

describe('buildClusterSummary: node pools and what is free', () => {
  const ready = [{ type: 'Ready', status: 'True' }];
  const worker = (name: string, labels: Record<string, string>, extra: Partial<V1Node['spec']> = {}, conditions = ready): V1Node => ({
    metadata: { name, labels: { 'kubernetes.io/hostname': name, ...labels } },
    spec: { ...extra },
    status: { allocatable: { cpu: '4', memory: '8Gi', pods: '10' }, conditions },
  });
  const pod = (name: string, nodeName: string | undefined, cpu: string, phase = 'Running'): V1Pod =>
    basePod({ name, namespace: 'team', spec: { nodeName, containers: [{ name: 'c', resources: { requests: { cpu, memory: '1Gi' } } }] }, status: { phase } });
  const nodes = [
    worker('a1', { pool: 'general', zone: 'a' }),
    worker('a2', { pool: 'general', zone: 'a' }),
    worker(
      'g1',
      { pool: 'gpu', zone: 'a' },
      {
        taints: [
          { key: 'gpu', value: 'true', effect: 'NoSchedule' },
          { key: 'soft', effect: 'PreferNoSchedule' },
        ],
      },
    ),
    worker('c1', { pool: 'general', zone: 'a' }, { unschedulable: true }),
    worker('n1', { pool: 'general', zone: 'a' }, {}, [{ type: 'Ready', status: 'False' }]),
  ];
  const pods = [pod('running', 'a1', '1500m'), pod('done', 'a1', '4', 'Succeeded'), pod('pending', undefined, '4'), pod('big', 'a2', '6')];
  const summary = buildClusterSummary(nodes, pods);

  it('groups nodes by their labels but the hostname, and by hard taints (PreferNoSchedule ignored)', () => {
    expect(summary.nodePools!.map((p) => ({ labels: p.labels, taints: p.taints, nodes: p.nodes.map((n) => n.name) }))).to.deep.equal([
      { labels: { pool: 'general', zone: 'a' }, taints: undefined, nodes: ['a1', 'a2', 'c1', 'n1'] },
      { labels: { pool: 'gpu', zone: 'a' }, taints: [{ key: 'gpu', value: 'true', effect: 'NoSchedule' }], nodes: ['g1'] },
    ]);
  });

  it('counts the requests of bound, non-terminal pods against their node, never below zero', () => {
    const byName = new Map(summary.nodePools!.flatMap((p) => p.nodes).map((n) => [n.name, n]));
    expect(byName.get('a1')!.free).to.deep.equal({ cpu: '2500m', memory: '7Gi', pods: '9' });
    expect(byName.get('a2')!.free, 'overcommitted: zero, not negative').to.deep.equal({ cpu: '0', memory: '7Gi', pods: '9' });
    expect(byName.get('g1')!.free).to.deep.equal({ cpu: '4', memory: '8Gi', pods: '10' });
    expect(byName.get('c1')).to.deep.include({ unschedulable: true });
    expect(byName.get('n1')).to.deep.include({ notReady: true });
  });

  it('sums free over the nodes that take new pods only (not cordoned, Ready)', () => {
    expect(summary.free).to.deep.equal({ cpu: '6500m', memory: '22Gi', pods: '28' });
  });

  it('records a hostname label only where it is not the node name', () => {
    const n = worker('ip-10-0-0-1.internal', {});
    n.metadata!.labels!['kubernetes.io/hostname'] = 'ip-10-0-0-1';
    expect(buildClusterSummary([n]).nodePools![0]!.nodes[0]!.hostname).to.equal('ip-10-0-0-1');
    expect(summary.nodePools![0]!.nodes[0]!.hostname).to.equal(undefined);
  });

  it('does not depend on node or pod order', () => {
    expect(buildClusterSummary([...nodes].reverse(), [...pods].reverse())).to.deep.equal(summary);
  });

  it("is the same with each pod's requests remembered, which a pod's new version computes again", () => {
    const computed: string[] = [];
    const requestsOf = perObject((p: V1Pod) => (computed.push(p.metadata!.name!), podRequestsWithOverhead(p)));
    expect(buildClusterSummary(nodes, pods, undefined, requestsOf)).to.deep.equal(summary);
    expect(buildClusterSummary(nodes, pods, undefined, requestsOf)).to.deep.equal(summary);
    expect(computed, 'once per bound, non-terminal pod over both builds').to.deep.equal(['running', 'big']);
    const grown = pod('big', 'a2', '1');
    const after = buildClusterSummary(nodes, [pods[0]!, grown], undefined, requestsOf);
    expect(computed).to.deep.equal(['running', 'big', 'big']);
    expect(after).to.deep.equal(buildClusterSummary(nodes, [pods[0]!, grown]));
  });

  it('orders nodes, taints and pools by code units, whatever the locale says', () => {
    // ICU's collation puts `a` before `B` and ignores the case first; code units put `B` (0x42) first.
    const mixed = [
      worker(
        'b-node',
        { pool: 'x' },
        {
          taints: [
            { key: 'b', effect: 'NoSchedule' },
            { key: 'B', effect: 'NoSchedule' },
          ],
        },
      ),
      worker(
        'B-node',
        { pool: 'x' },
        {
          taints: [
            { key: 'b', effect: 'NoSchedule' },
            { key: 'B', effect: 'NoSchedule' },
          ],
        },
      ),
      worker('a-node', { pool: 'Z' }),
    ];
    const s = buildClusterSummary(mixed);
    expect(s.nodePools!.map((p) => p.labels.pool)).to.deep.equal(['Z', 'x']);
    expect(s.nodePools![1]!.nodes.map((n) => n.name)).to.deep.equal(['B-node', 'b-node']);
    expect(s.nodePools![1]!.taints!.map((t) => t.key)).to.deep.equal(['B', 'b']);
  });

  it('makes summaryEquals see a change in what is free', () => {
    expect(summaryEquals(summary, buildClusterSummary(nodes, pods.slice(1)))).to.equal(false);
    expect(summaryEquals(summary, buildClusterSummary(nodes, pods))).to.equal(true);
  });
});

describe("clusterSummaryProblem (a target's server may answer anything)", () => {
  const node = { name: 'n1', allocatable: { cpu: '4' }, free: { cpu: '2' } };
  const pool = { labels: { zone: 'a' }, taints: [{ key: 'gpu', effect: 'NoSchedule' }], nodes: [node] };
  const good = { metadata: { name: 'singleton' }, allocatable: { cpu: '4' }, nodePools: [pool], podsResourceVersion: '12' };

  it('takes what buildClusterSummary writes, and a summary without pools', () => {
    const built = buildClusterSummary([
      { metadata: { name: 'w', labels: { zone: 'a' } }, spec: { taints: [{ key: 'k', effect: 'NoExecute' }] }, status: { allocatable: { cpu: '4' }, conditions: [{ type: 'Ready', status: 'True' }] } },
    ]);
    expect(clusterSummaryProblem(JSON.parse(JSON.stringify(built)))).to.equal(undefined);
    expect(clusterSummaryProblem(good)).to.equal(undefined);
    expect(clusterSummaryProblem({ metadata: {} })).to.equal(undefined);
  });

  const bad: [string, unknown, string][] = [
    ['not an object', [good], 'it is not an object'],
    ['pools not a list', { ...good, nodePools: { a: pool } }, 'nodePools must be a list'],
    ['a pool that is null', { ...good, nodePools: [null] }, 'nodePools[0] must be an object'],
    ['labels with a number', { ...good, nodePools: [{ ...pool, labels: { zone: 1 } }] }, 'nodePools[0].labels must map label keys to strings'],
    ['a taint without an effect', { ...good, nodePools: [{ ...pool, taints: [{ key: 'k' }] }] }, 'nodePools[0].taints must be a list of taints with a key and an effect'],
    ['nodes not a list', { ...good, nodePools: [{ ...pool, nodes: 'n1' }] }, 'nodePools[0].nodes must be a list'],
    ['a node without a name', { ...good, nodePools: [{ ...pool, nodes: [{ ...node, name: 7 }] }] }, 'nodePools[0].nodes[0] must be an object with a name'],
    ['free missing', { ...good, nodePools: [{ ...pool, nodes: [{ ...node, free: undefined }] }] }, 'nodePools[0].nodes[0].allocatable and .free must map resource names to quantity strings'],
    ['notReady a string', { ...good, nodePools: [{ ...pool, nodes: [{ ...node, notReady: 'yes' }] }] }, 'nodePools[0].nodes[0].notReady must be true or false'],
    ['free of the cluster a list', { ...good, free: ['cpu'] }, 'free must map resource names to quantity strings'],
    ['podsResourceVersion a number', { ...good, podsResourceVersion: 12 }, 'podsResourceVersion must be a string'],
    ['a renew interval of zero', { ...good, renewIntervalSeconds: 0 }, 'renewIntervalSeconds must be a whole number of seconds from 1 to 3600'],
    ['a renew interval over an hour', { ...good, renewIntervalSeconds: 3601 }, 'renewIntervalSeconds must be a whole number of seconds from 1 to 3600'],
    ['a renew interval in a string', { ...good, renewIntervalSeconds: '30' }, 'renewIntervalSeconds must be a whole number of seconds from 1 to 3600'],
    ['a fractional renew interval', { ...good, renewIntervalSeconds: 0.5 }, 'renewIntervalSeconds must be a whole number of seconds from 1 to 3600'],
    ['renewTime a number', { ...good, renewTime: 1 }, 'renewTime must be a string'],
    ['runtime classes not a list', { ...good, runtimeClasses: { gvisor: {} } }, 'runtimeClasses must be a list'],
    ['a runtime class without a name', { ...good, runtimeClasses: [{ overhead: { cpu: '1' } }] }, 'runtimeClasses[0] must be an object with a name'],
    ['an overhead of numbers', { ...good, runtimeClasses: [{ name: 'g', overhead: { cpu: 1 } }] }, 'runtimeClasses[0].overhead and .nodeSelector must map names to strings'],
    ['a class toleration with a numeric key', { ...good, runtimeClasses: [{ name: 'g', tolerations: [{ key: 1 }] }] }, 'runtimeClasses[0].tolerations must be a list of tolerations'],
    ['priority classes that are not names', { ...good, priorityClasses: [{ name: 'high' }] }, 'priorityClasses must be a list of names'],
    [
      'a class toleration of fractional seconds',
      { ...good, runtimeClasses: [{ name: 'g', tolerations: [{ tolerationSeconds: 0.5 }] }] },
      'runtimeClasses[0].tolerations must be a list of tolerations',
    ],
    [
      'host ports not a list',
      { ...good, nodePools: [{ ...pool, nodes: [{ ...node, hostPorts: { port: 80 } }] }] },
      'nodePools[0].nodes[0].hostPorts must be a list of ports (1 to 65535) with a protocol',
    ],
    [
      'a host port past 65535',
      { ...good, nodePools: [{ ...pool, nodes: [{ ...node, hostPorts: [{ port: 70000, protocol: 'TCP' }] }] }] },
      'nodePools[0].nodes[0].hostPorts must be a list of ports (1 to 65535) with a protocol',
    ],
    [
      'a host port without a protocol',
      { ...good, nodePools: [{ ...pool, nodes: [{ ...node, hostPorts: [{ port: 80 }] }] }] },
      'nodePools[0].nodes[0].hostPorts must be a list of ports (1 to 65535) with a protocol',
    ],
    [
      'priority buckets not a list',
      { ...good, nodePools: [{ ...pool, nodes: [{ ...node, heldByPriority: { 10: { cpu: '1' } } }] }] },
      'nodePools[0].nodes[0].heldByPriority must be a list of buckets with an integer priority and requests',
    ],
    [
      'a bucket of fractional priority',
      { ...good, nodePools: [{ ...pool, nodes: [{ ...node, heldByPriority: [{ priority: 1.5, requests: {} }] }] }] },
      'nodePools[0].nodes[0].heldByPriority must be a list of buckets with an integer priority and requests',
    ],
    [
      'a bucket of numeric requests',
      { ...good, nodePools: [{ ...pool, nodes: [{ ...node, heldByPriority: [{ priority: 1, requests: { cpu: 1 } }] }] }] },
      'nodePools[0].nodes[0].heldByPriority must be a list of buckets with an integer priority and requests',
    ],
    ['class values not a list', { ...good, priorityClassValues: { high: 10 } }, 'priorityClassValues must be a list of classes with a name and an integer value'],
    ['a class value in a string', { ...good, priorityClassValues: [{ name: 'high', value: '10' }] }, 'priorityClassValues must be a list of classes with a name and an integer value'],
    [
      'a class whose globalDefault is a string',
      { ...good, priorityClassValues: [{ name: 'high', value: 10, globalDefault: 'yes' }] },
      'priorityClassValues must be a list of classes with a name and an integer value',
    ],
  ];
  for (const [why, obj, problem] of bad) {
    it(`says why of ${why}`, () => expect(clusterSummaryProblem(obj)).to.equal(problem));
  }

  const manyLabels = Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`l${i}`, 'v']));
  const nodes = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `n${i}`, allocatable: {}, free: {} }));
  it('refuses more nodes than a cluster has (the filter walks them all for each pod)', () => {
    expect(clusterSummaryProblem({ ...good, nodePools: [{ ...pool, nodes: nodes(MAX_SUMMARY_NODES) }] })).to.equal(undefined);
    expect(clusterSummaryProblem({ ...good, nodePools: [{ ...pool, nodes: nodes(MAX_SUMMARY_NODES) }, pool] })).to.equal(`it describes over ${MAX_SUMMARY_NODES} nodes`);
  });

  it('refuses more labels, taints and amounts than a cluster of 20 000 nodes has, in pools, nodes or at the top', () => {
    const tooMany = `it holds over ${MAX_SUMMARY_ENTRIES} labels, taints, resource amounts, host ports, runtime and priority classes (a cluster of 15 000 nodes has about 200 000)`;
    // 251 pools of 2000 labels, a node each.
    expect(clusterSummaryProblem({ ...good, nodePools: Array.from({ length: 251 }, () => ({ labels: manyLabels, nodes: [node] })) })).to.equal(tooMany);
    expect(clusterSummaryProblem({ ...good, nodePools: Array.from({ length: 240 }, () => ({ labels: manyLabels, nodes: [node] })) })).to.equal(undefined);
    const amounts = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`example.com/r${i}`, '1']));
    const fatNodes = Array.from({ length: MAX_SUMMARY_NODES }, (_, i) => ({ name: `n${i}`, allocatable: amounts, free: amounts }));
    expect(clusterSummaryProblem({ ...good, nodePools: [{ labels: {}, nodes: fatNodes }] })).to.equal(tooMany);
    expect(clusterSummaryProblem({ ...good, metadata: { name: 'singleton', labels: Object.fromEntries(Array.from({ length: MAX_SUMMARY_ENTRIES + 1 }, (_, i) => [`l${i}`, 'v'])) } })).to.equal(
      tooMany,
    );
    const classes = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `rc${i}` }));
    expect(clusterSummaryProblem({ metadata: {}, runtimeClasses: classes(MAX_SUMMARY_ENTRIES) })).to.equal(undefined);
    expect(clusterSummaryProblem({ metadata: {}, runtimeClasses: classes(MAX_SUMMARY_ENTRIES + 1) })).to.equal(tooMany);
    const values = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `pc${i}`, value: i }));
    expect(clusterSummaryProblem({ metadata: {}, priorityClassValues: values(MAX_SUMMARY_ENTRIES) })).to.equal(undefined);
    expect(clusterSummaryProblem({ metadata: {}, priorityClassValues: values(MAX_SUMMARY_ENTRIES + 1) })).to.equal(tooMany);
    // Priority buckets count one each, and their amounts too.
    const bucket = { priority: 1, requests: { cpu: '1' } };
    const bucketNode = (n: number) => ({ name: 'n', allocatable: {}, free: {}, heldByPriority: Array.from({ length: n }, () => bucket) });
    expect(clusterSummaryProblem({ metadata: {}, nodePools: [{ labels: {}, nodes: [bucketNode(MAX_SUMMARY_ENTRIES / 2 + 1)] }] })).to.equal(tooMany);
    expect(clusterSummaryProblem({ metadata: {}, nodePools: [{ labels: {}, nodes: [bucketNode(MAX_SUMMARY_ENTRIES / 2)] }] })).to.equal(undefined);
  });

  it('takes priority buckets and class values as buildClusterSummary writes them', () => {
    const n: V1Node = { metadata: { name: 'w', labels: {} }, status: { allocatable: { cpu: '4' }, conditions: [{ type: 'Ready', status: 'True' }] } };
    const p: V1Pod = {
      metadata: { name: 'p', namespace: 'd' },
      spec: { nodeName: 'w', priority: 10, containers: [{ name: 'c', resources: { requests: { cpu: '1' } } }] },
      status: { phase: 'Running' },
    };
    const built = buildClusterSummary([n], [p], undefined, undefined, {
      priority: [
        { metadata: { name: 'low' }, value: 10, globalDefault: true, preemptionPolicy: 'Never' },
        { metadata: { name: 'high' }, value: 100 },
      ],
    });
    expect(built.nodePools![0]!.nodes[0]!.heldByPriority).to.have.length(1);
    expect(clusterSummaryProblem(JSON.parse(JSON.stringify(built)))).to.equal(undefined);
  });
});

describe('summary fields for priority', () => {
  it("keeps a pod's priority in what the summary's pod cache holds", () => {
    const p: V1Pod = { metadata: { name: 'p', namespace: 'd' }, spec: { nodeName: 'w', priority: 10, priorityClassName: 'low', containers: [{ name: 'c', image: 'x' }] } };
    expect(summaryPodFields(p).spec).to.deep.include({ nodeName: 'w', priority: 10 });
    expect(summaryPodFields(p).spec).to.not.have.property('priorityClassName');
    expect(summaryPodFields({ metadata: { name: 'q' }, spec: { containers: [] } }).spec).to.not.have.property('priority');
  });

  it("keeps a PriorityClass's value, preemption policy and global default", () => {
    expect(
      summaryPriorityClassFields({ metadata: { name: 'low', resourceVersion: '3', labels: { a: 'b' } }, value: 10, preemptionPolicy: 'Never', globalDefault: true, description: 'x' }),
    ).to.deep.equal({
      metadata: { name: 'low', resourceVersion: '3' },
      value: 10,
      preemptionPolicy: 'Never',
      globalDefault: true,
    });
  });

  it('makes summaryEquals see a change of class values alone', () => {
    const a: ClusterSummary = { metadata: { name: 's' }, priorityClasses: ['low'], priorityClassValues: [{ name: 'low', value: 10 }] };
    expect(summaryEquals(a, { ...a, priorityClassValues: [{ name: 'low', value: 11 }] })).to.equal(false);
    expect(summaryEquals(a, { ...a, priorityClassValues: [{ name: 'low', value: 10 }] })).to.equal(true);
  });
});

describe('buildClusterSummary: runtime classes', () => {
  const gvisor: V1RuntimeClass = {
    metadata: { name: 'gvisor', resourceVersion: '9', managedFields: [{ manager: 'kubectl' }], labels: { team: 'a' } },
    handler: 'runsc',
    overhead: { podFixed: { memory: '120Mi', cpu: '250m' } },
    scheduling: { nodeSelector: { runtime: 'gvisor' }, tolerations: [{ key: 'sandbox', operator: 'Exists', effect: 'NoSchedule', tolerationSeconds: undefined }] },
  };
  const kata: V1RuntimeClass = { metadata: { name: 'kata' }, handler: 'kata', overhead: { podFixed: {} }, scheduling: { nodeSelector: {}, tolerations: [] } };

  it('publishes, by name, what each class adds to a pod: its overhead, node selector and tolerations, empty ones left out', () => {
    expect(buildClusterSummary([], [], undefined, undefined, { runtime: [kata, gvisor] }).runtimeClasses).to.deep.equal([
      { name: 'gvisor', overhead: { cpu: '250m', memory: '120Mi' }, nodeSelector: { runtime: 'gvisor' }, tolerations: [{ key: 'sandbox', operator: 'Exists', effect: 'NoSchedule' }] },
      { name: 'kata' },
    ]);
  });

  it('publishes an empty list for a cluster without classes, and nothing when they were not read', () => {
    expect(buildClusterSummary([], [], undefined, undefined, { runtime: [] }).runtimeClasses).to.deep.equal([]);
    expect(buildClusterSummary([], [])).to.not.have.property('runtimeClasses');
  });

  it('is the same from the fields its informer keeps, which drop the rest', () => {
    const slim = summaryRuntimeClassFields(gvisor);
    expect(slim.metadata).to.deep.equal({ name: 'gvisor', resourceVersion: '9' });
    expect(summaryRuntimeClasses([slim])).to.deep.equal(summaryRuntimeClasses([gvisor]));
  });

  it('writes what a reader takes, and the reader parses its quantities', () => {
    const summary = JSON.parse(JSON.stringify(buildClusterSummary([], [], undefined, undefined, { runtime: [gvisor, kata] })));
    expect(clusterSummaryProblem(summary)).to.equal(undefined);
    const read = runtimeClassesOfSummary(summary)!;
    expect(read.get('gvisor')!.overhead.get('cpu')).to.equal(250_000_000n);
    expect(read.get('kata')).to.deep.equal({ overhead: new Map(), tolerations: [] });
    expect(runtimeClassesOfSummary(summary), 'parsed once per summary object').to.equal(read);
  });

  it('publishes the names of the PriorityClasses, sorted, from what their informer keeps', () => {
    const pcs = [
      { metadata: { name: 'system-node-critical' }, value: 2000001000 },
      { metadata: { name: 'high', labels: { a: 'b' } }, value: 1000, description: 'x' },
    ];
    const summary = buildClusterSummary([], [], undefined, undefined, { priority: pcs.map(summaryPriorityClassFields) });
    expect(summary.priorityClasses).to.deep.equal(['high', 'system-node-critical']);
    expect(buildClusterSummary([], [])).to.not.have.property('priorityClasses');
    expect(clusterSummaryProblem(JSON.parse(JSON.stringify(summary)))).to.equal(undefined);
    expect([...priorityClassesOfSummary(summary)!]).to.deep.equal(['high', 'system-node-critical']);
    expect(summaryEquals(summary, buildClusterSummary([], [], undefined, undefined, { priority: [] }))).to.equal(false);
  });

  it('makes summaryEquals see a class that changed', () => {
    const before = buildClusterSummary([], [], undefined, undefined, { runtime: [gvisor] });
    const after = buildClusterSummary([], [], undefined, undefined, { runtime: [{ ...gvisor, overhead: { podFixed: { cpu: '500m' } } }] });
    expect(summaryEquals(before, after)).to.equal(false);
    expect(summaryEquals(before, buildClusterSummary([], [], undefined, undefined, { runtime: [gvisor] }))).to.equal(true);
  });
});

describe("the extender's nodes of a summary", () => {
  it("share their pool's labels rather than copy them: a few hundred kB of summary once took a GiB", () => {
    const labels = Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`l${i}`, 'v']));
    const summary = { metadata: { name: 'singleton' }, nodePools: [{ labels, nodes: Array.from({ length: 10_000 }, (_, i) => ({ name: `n${i}`, allocatable: {}, free: {} })) }] };
    const nodes = nodesOfSummary(summary as ClusterSummary);
    expect(nodes).to.have.length(10_000);
    expect(nodes.every((n) => n.labels === nodes[0]!.labels)).to.equal(true);
    expect(nodes[7]!.hostname).to.equal('n7');
  });

  it("match a pod's hostname selector by their own name, and the pool's labels by the pool's", () => {
    const summary = buildClusterSummary(
      ['w1', 'w2'].map((name) => ({
        metadata: { name, labels: { zone: 'a', 'kubernetes.io/hostname': name } },
        status: { allocatable: { cpu: '4' }, conditions: [{ type: 'Ready', status: 'True' }] },
      })),
    );
    const nodes = nodesOfSummary(summary);
    const spec = (nodeSelector: Record<string, string>) => ({ containers: [], nodeSelector });
    expect(nodes.filter((n) => matchesNodeSelectorAndAffinity(spec({ 'kubernetes.io/hostname': 'w2', zone: 'a' }), n)).map((n) => n.name)).to.deep.equal(['w2']);
    const hostIn = {
      containers: [],
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [
              {
                matchExpressions: [
                  { key: 'kubernetes.io/hostname', operator: 'In', values: ['w1'] },
                  { key: 'zone', operator: 'Exists' },
                ],
              },
            ],
          },
        },
      },
    };
    expect(nodes.filter((n) => matchesNodeSelectorAndAffinity(hostIn, n)).map((n) => n.name)).to.deep.equal(['w1']);
    expect(nodes.filter((n) => matchesNodeSelectorAndAffinity(spec({ zone: 'b' }), n))).to.have.length(0);
  });
});

describe('summaryPodFields', () => {
  const full: V1Pod = {
    metadata: { name: 'p', namespace: 'team', resourceVersion: '42', uid: 'u', labels: { app: 'x' }, annotations: { big: 'x'.repeat(10_000) }, managedFields: [{ manager: 'kubectl' }] },
    spec: {
      nodeName: 'a1',
      overhead: { cpu: '100m' },
      initContainers: [
        { name: 'side', image: 'i', restartPolicy: 'Always', resources: { requests: { cpu: '250m' } } },
        { name: 'init', image: 'i', resources: { requests: { cpu: '2' } } },
      ],
      containers: [
        {
          name: 'c',
          image: 'i',
          env: [{ name: 'A', value: 'b' }],
          resources: { requests: { cpu: '1', memory: '1Gi' }, limits: { memory: '2Gi' } },
          ports: [
            { containerPort: 80, hostPort: 8080 },
            { containerPort: 9090, name: 'metrics' },
          ],
        },
      ],
      volumes: [{ name: 'v', emptyDir: {} }],
    },
    status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
  };
  it('keeps what the summary reads, so the summary is the same from slim pods', () => {
    const node: V1Node = { metadata: { name: 'a1' }, status: { allocatable: { cpu: '8', memory: '8Gi', pods: '10' }, conditions: [{ type: 'Ready', status: 'True' }] } };
    const summary = buildClusterSummary([node], [full]);
    expect(summary.nodePools![0]!.nodes[0]!.hostPorts).to.deep.equal([{ port: 8080, protocol: 'TCP' }]);
    expect(buildClusterSummary([node], [summaryPodFields(full)])).to.deep.equal(summary);
  });
  it('keeps of the ports only those that hold a host port', () => {
    expect(summaryPodFields(full).spec!.containers[0]!.ports).to.deep.equal([{ containerPort: 80, hostPort: 8080 }]);
    expect(summaryPodFields({ ...full, spec: { ...full.spec!, containers: [{ name: 'c', ports: [{ containerPort: 80 }] }] } }).spec!.containers[0]).to.not.have.property('ports');
  });
  it('keeps the name, namespace and resourceVersion the informer needs, and drops the rest', () => {
    const slim = summaryPodFields(full);
    expect(slim.metadata).to.deep.equal({ name: 'p', namespace: 'team', resourceVersion: '42' });
    expect(JSON.stringify(slim).length).to.be.below(JSON.stringify(full).length / 10);
  });
});

describe('buildClusterSummary: host ports', () => {
  const ready = (name: string): V1Node => ({ metadata: { name }, status: { allocatable: { cpu: '8', pods: '10' }, conditions: [{ type: 'Ready', status: 'True' }] } });
  const holding = (name: string, nodeName: string, ports: { hostPort: number; protocol?: string; hostIP?: string }[], phase = 'Running'): V1Pod => ({
    metadata: { name, namespace: 'ns' },
    spec: { nodeName, containers: [{ name: 'c', ports: ports.map((p) => ({ containerPort: 1, ...p })) }] },
    status: { phase },
  });

  it('writes, per node, the host ports its running pods hold: sorted, once each, 0.0.0.0 and TCP as the defaults they are', () => {
    const pods = [
      holding('a', 'n1', [{ hostPort: 443 }, { hostPort: 80, protocol: 'UDP' }]),
      holding('b', 'n1', [
        { hostPort: 80, hostIP: '0.0.0.0' },
        { hostPort: 80, hostIP: '10.0.0.1' },
      ]),
      holding('c', 'n1', [{ hostPort: 443, protocol: 'TCP' }]),
      holding('done', 'n2', [{ hostPort: 22 }], 'Failed'),
    ];
    const summary = buildClusterSummary([ready('n1'), ready('n2')], pods);
    expect(clusterSummaryProblem(JSON.parse(JSON.stringify(summary))), 'what it writes, its readers take').to.equal(undefined);
    const nodes = summary.nodePools![0]!.nodes;
    expect(nodes[0]!.hostPorts).to.deep.equal([
      { port: 80, protocol: 'TCP' },
      { port: 80, protocol: 'TCP', hostIP: '10.0.0.1' },
      { port: 80, protocol: 'UDP' },
      { port: 443, protocol: 'TCP' },
    ]);
    expect(nodes[1], 'a finished pod holds nothing').to.not.have.property('hostPorts');
  });
});

describe('isVirtualNode (pods the summary informer does not keep)', () => {
  const real: V1Node = {
    metadata: { name: 'n1', labels: { 'kubernetes.io/hostname': 'n1' } },
    status: { allocatable: { cpu: '4', memory: '8Gi', pods: '110' }, conditions: [{ type: 'Ready', status: 'True' }] },
  };
  const ours: V1Node = {
    metadata: { name: 'admiralty-cluster-c2', labels: { 'virtual-kubelet.io/provider': 'admiralty' } },
    status: { allocatable: { cpu: '1000', pods: '10000' }, conditions: [{ type: 'Ready', status: 'True' }] },
  };
  const other: V1Node = { metadata: { name: 'vk-other', labels: { 'virtual-kubelet.io/provider': 'other' } }, status: { allocatable: { cpu: '1000' } } };
  const bound = (name: string, nodeName: string): V1Pod => ({
    metadata: { name, namespace: 'ns' },
    spec: { nodeName, containers: [{ name: 'c', resources: { requests: { cpu: '1' } } }] },
    status: { phase: 'Running' },
  });
  const nodes = [real, ours, other];
  const pods = [bound('a', 'n1'), bound('proxy', 'admiralty-cluster-c2'), bound('b', 'vk-other'), bound('c', 'n1')];

  it('says yes to the nodes of any virtual-kubelet provider and no to real nodes', () => {
    expect(nodes.map(isVirtualNode)).to.deep.equal([false, true, true]);
  });
  it('leaves the summary as it is when the pods of virtual nodes are left out, and those pods are what it is told', () => {
    const onReal = pods.filter((p) => !isVirtualNode(nodes.find((n) => n.metadata!.name === p.spec!.nodeName)!));
    expect(onReal.map((p) => p.metadata!.name)).to.deep.equal(['a', 'c']);
    expect(buildClusterSummary(nodes, onReal)).to.deep.equal(buildClusterSummary(nodes, pods));
    // ...while the pods of a real node do count: the check above is not vacuous.
    expect(buildClusterSummary(nodes, onReal.slice(1))).to.not.deep.equal(buildClusterSummary(nodes, onReal));
  });
});

describe('sightSummary and summaryStaleness (a reader tells a stopped writer from a quiet cluster)', () => {
  const summary = (resourceVersion: string | undefined, renewIntervalSeconds?: number) => ({
    metadata: { name: 'singleton', ...(resourceVersion ? { resourceVersion } : {}) },
    ...(renewIntervalSeconds ? { renewIntervalSeconds } : {}),
  });

  it('keeps the first sighting of a version, and starts again at a new one', () => {
    const first = sightSummary(undefined, { ...summary('5', 30), renewTime: 't1' }, 1_000);
    expect(first).to.deep.equal({ version: '5', sinceMs: 1_000, renewTime: 't1', renews: true });
    expect(sightSummary(first, { ...summary('5', 30), renewTime: 't1' }, 50_000)).to.equal(first);
    expect(sightSummary(first, { ...summary('6', 30), renewTime: 't2' }, 50_000)).to.deep.equal({ version: '6', sinceMs: 50_000, renewTime: 't2', renews: true });
    // A server that gives no resourceVersion: the renewTime tells versions apart.
    expect(sightSummary(undefined, { ...summary(undefined, 30), renewTime: 't1' }, 0)).to.deep.include({ version: 't1', sinceMs: 0 });
  });

  it("is stale only past three renew intervals and one probe period, on the reader's clock", () => {
    const s = { ...summary('5', 30), renewTime: 't1' };
    const seen = sightSummary(undefined, s, 0);
    expect(summaryStaleness(seen, s, 100_000, 10_000)).to.equal(undefined);
    expect(summaryStaleness(seen, s, 100_001, 10_000)).to.match(
      /^its ClusterSummary has not changed for 100 s, though its writer rewrites it every 30 s at the longest \(last written at t1, by its clock\): /,
    );
  });

  it('never calls a summary stale that promises no renewal', () => {
    const s = summary('5');
    expect(summaryStaleness(sightSummary(undefined, s, 0), s, 1e12, 10_000)).to.equal(undefined);
  });

  it('nor one rewritten without a new renewTime: its writer keeps the fields it finds and does not renew (a rollback)', () => {
    const renewed = sightSummary(undefined, { ...summary('5', 30), renewTime: 't1' }, 0);
    const kept = { ...summary('6', 30), renewTime: 't1' };
    const rewritten = sightSummary(renewed, kept, 50_000);
    expect(rewritten.renews).to.equal(false);
    expect(summaryStaleness(rewritten, kept, 1e9, 10_000)).to.equal(undefined);
    // A writer that renews again (the upgrade back) is judged again.
    const again = { ...summary('7', 30), renewTime: 't2' };
    const back = sightSummary(rewritten, again, 60_000);
    expect(back.renews).to.equal(true);
    expect(summaryStaleness(back, again, 60_000 + 100_001, 10_000)).to.be.a('string');
  });
});
