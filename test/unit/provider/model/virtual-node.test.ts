import { expect } from 'chai';
import { V1MicroTime } from '@kubernetes/client-node';
import type { V1Node } from '@kubernetes/client-node';
import { ValidationError } from '../../../../provider/core/errors.js';
import { buildNodeLease, buildVirtualNode, buildVirtualNodeMetadataPatch, buildVirtualNodeStatusPatch, type VirtualNodeInput } from '../../../../provider/model/virtual-node.js';

const NOW = '2024-05-01T10:00:00.000Z';
const LATER = '2024-05-01T10:01:00.000Z';

function input(over: Partial<VirtualNodeInput> = {}): VirtualNodeInput {
  return {
    ref: { kind: 'Target', namespace: 'default', name: 'c2' },
    summary: {
      metadata: { name: 'singleton', labels: { 'topology.kubernetes.io/region': 'eu', 'kubernetes.io/os': 'linux', team: 'a' } },
      capacity: { cpu: '8', memory: '32Gi', pods: '220' },
      allocatable: { cpu: '7800m', memory: '30Gi', pods: '220' },
    },
    health: { ready: true, reason: 'TargetReachable', message: 'ok', lastTransitionTime: '2024-05-01T09:00:00.000Z' },
    kubelet: { address: '127.0.0.1', port: 10443 },
    nodeInfo: { kubeletVersion: 'v1.36.3-admiralty-ts' },
    now: NOW,
    ...over,
  };
}

describe('buildVirtualNode', () => {
  const node = buildVirtualNode(input());

  it('is named after the target', () => expect(node.metadata!.name).to.equal('admiralty-namespace-default-c2'));

  it('has base, identity and summary labels', () => {
    expect(node.metadata!.labels).to.deep.equal({
      'virtual-kubelet.io/provider': 'admiralty',
      type: 'virtual-kubelet',
      'kubernetes.io/role': 'cluster',
      'node.kubernetes.io/exclude-from-external-load-balancers': 'true',
      'alpha.service-controller.kubernetes.io/exclude-balancer': 'true',
      'kubernetes.io/hostname': 'admiralty-namespace-default-c2',
      'kubernetes.io/os': 'linux',
      'multicluster.admiralty.io/target-namespace': 'default',
      'multicluster.admiralty.io/target-name': 'c2',
      'topology.kubernetes.io/region': 'eu',
      team: 'a',
    });
  });

  it('uses the cluster-target identity label for a ClusterTarget', () => {
    const labels = buildVirtualNode(input({ ref: { kind: 'ClusterTarget', namespace: '', name: 'c2' } })).metadata!.labels!;
    expect(labels['multicluster.admiralty.io/cluster-target-name']).to.equal('c2');
    expect(labels).to.not.have.property('multicluster.admiralty.io/target-namespace');
    expect(labels['kubernetes.io/hostname']).to.equal('admiralty-cluster-c2');
  });

  const overrides: [string, string, string, string][] = [
    ['summary overrides the role', 'kubernetes.io/role', 'agent', 'agent'],
    ['summary overrides the os', 'kubernetes.io/os', 'windows', 'windows'],
    ['summary never overrides the provider', 'virtual-kubelet.io/provider', 'other', 'admiralty'],
    ['summary never overrides type', 'type', 'real', 'virtual-kubelet'],
    ['summary never overrides the hostname', 'kubernetes.io/hostname', 'node-1', 'admiralty-namespace-default-c2'],
    ['summary never overrides LB exclusion', 'node.kubernetes.io/exclude-from-external-load-balancers', 'false', 'true'],
    ['summary never overrides identity', 'multicluster.admiralty.io/target-name', 'x', 'c2'],
  ];
  for (const [why, key, value, want] of overrides) {
    it(why, () => {
      const summary = { metadata: { labels: { [key]: value } } };
      expect(buildVirtualNode(input({ summary })).metadata!.labels![key]).to.equal(want);
    });
  }

  const exclusions: [string, string[]][] = [
    ['^team=', ['topology.kubernetes.io/region']],
    ['region', ['team']],
    ['=a$', ['topology.kubernetes.io/region']],
  ];
  for (const [re, kept] of exclusions) {
    it(`excludes summary labels matching ${re} on key=value`, () => {
      const labels = buildVirtualNode(input({ excludedLabelsRegexp: re })).metadata!.labels!;
      const fromSummary = ['topology.kubernetes.io/region', 'team'].filter((k) => k in labels);
      expect(fromSummary).to.deep.equal(kept);
    });
  }

  it('rejects an invalid excludedLabelsRegexp', () => {
    expect(() => buildVirtualNode(input({ excludedLabelsRegexp: '(' }))).to.throw(ValidationError);
  });

  it('has the NoSchedule taint', () => {
    expect(node.spec!.taints).to.deep.equal([{ key: 'virtual-kubelet.io/provider', value: 'admiralty', effect: 'NoSchedule' }]);
  });

  it('copies capacity and allocatable from the summary', () => {
    expect(node.status!.capacity).to.deep.equal({ cpu: '8', memory: '32Gi', pods: '220' });
    expect(node.status!.allocatable).to.deep.equal({ cpu: '7800m', memory: '30Gi', pods: '220' });
  });

  const defaults: [string, VirtualNodeInput['summary'], Record<string, string>, Record<string, string>][] = [
    ['no summary', undefined, { cpu: '0', memory: '0', pods: '0' }, { cpu: '0', memory: '0', pods: '0' }],
    [
      'summary without allocatable',
      { metadata: {}, capacity: { cpu: '2', 'nvidia.com/gpu': '1' } },
      { cpu: '2', 'nvidia.com/gpu': '1', memory: '0', pods: '0' },
      { cpu: '2', 'nvidia.com/gpu': '1', memory: '0', pods: '0' },
    ],
  ];
  for (const [why, summary, capacity, allocatable] of defaults) {
    it(`defaults resources: ${why}`, () => {
      const n = buildVirtualNode(input({ summary }));
      expect(n.status!.capacity).to.deep.equal(capacity);
      expect(n.status!.allocatable).to.deep.equal(allocatable);
    });
  }

  describe('allocatable from what is free in the target', () => {
    const withFree = (free: Record<string, string>) => ({ ...input().summary!, free });
    const cases: [string, Record<string, string>, Map<string, bigint> | undefined, Record<string, string>][] = [
      ['what is free, when none of our proxies runs there', { cpu: '3', memory: '10Gi', pods: '100' }, undefined, { cpu: '3', memory: '10Gi', pods: '100' }],
      [
        'plus what our running proxies hold (kube-scheduler subtracts them again)',
        { cpu: '3', memory: '10Gi', pods: '100' },
        new Map([
          ['cpu', 1_500_000_000n],
          ['pods', 2_000_000_000n],
        ]),
        { cpu: '4500m', memory: '10Gi', pods: '102' },
      ],
      [
        'never above the target allocatable',
        { cpu: '7', memory: '30Gi', pods: '219' },
        new Map([
          ['cpu', 2_000_000_000n],
          ['pods', 5_000_000_000n],
        ]),
        { cpu: '7800m', memory: '30Gi', pods: '220' },
      ],
      ['without a quantity the target wrote wrong', { cpu: 'lots', memory: '1Gi', pods: '1' }, undefined, { cpu: '0', memory: '1Gi', pods: '1' }],
    ];
    for (const [why, free, held, want] of cases) {
      it(why, () => {
        const n = buildVirtualNode(input({ summary: withFree(free), heldByProxies: held }));
        expect(n.status!.allocatable).to.deep.equal(want);
        expect(n.status!.capacity, 'capacity stays the target total').to.deep.equal({ cpu: '8', memory: '32Gi', pods: '220' });
      });
    }
  });

  describe("with what the target's preemptible pods hold (a proxy scheduler judges priority)", () => {
    const summary = {
      ...input().summary!,
      free: { cpu: '1', memory: '2Gi', pods: '100' },
      priorityClassValues: [{ name: 'urgent', value: 1000 }],
      nodePools: [
        {
          labels: {},
          nodes: [
            { name: 'a', allocatable: {}, free: {}, heldByPriority: [{ priority: 10, requests: { cpu: '3', memory: '4Gi', pods: '2' } }] },
            // A node that takes no new pods offers nothing, preemptible or not.
            { name: 'b', allocatable: {}, free: {}, notReady: true, heldByPriority: [{ priority: 10, requests: { cpu: '3' } }] },
          ],
        },
      ],
    };
    it('adds it to what is free, within the allocatable, when asked', () => {
      const n = buildVirtualNode(input({ summary, advertisePreemptible: true, heldByProxies: new Map([['cpu', 5_000_000_000n]]) }));
      expect(n.status!.allocatable).to.deep.equal({ cpu: '7800m', memory: '6Gi', pods: '102' });
    });
    it('advertises only what is free without it (fallback mode: the virtual node is all that is judged)', () => {
      expect(buildVirtualNode(input({ summary })).status!.allocatable).to.deep.equal({ cpu: '1', memory: '2Gi', pods: '100' });
    });
  });

  describe('with burst capacity', () => {
    // The proxy scheduler's own resource check runs before the extender's filter: a target that
    // can take a pod only by scaling up must not be refused by it.
    const n = (cores: number) => BigInt(cores) * 1_000_000_000n;
    it('adds the capacity to what is free, and a bound past any pod for what it leaves out', () => {
      const node = buildVirtualNode(
        input({
          summary: { ...input().summary!, free: { cpu: '3', memory: '10Gi', pods: '100' } },
          burstCapacity: new Map([
            ['cpu', n(64)],
            ['pods', n(10)],
          ]),
        }),
      );
      // 1 EiB and 10 GiB, in GiB.
      expect(node.status!.allocatable).to.deep.equal({ cpu: '67', memory: `${2 ** 30 + 10}Gi`, pods: '110' });
      expect(node.status!.capacity).to.deep.equal({ cpu: '72', memory: `${2 ** 30 + 32}Gi`, pods: '230' });
    });
    it('offers it on a target with no nodes at all (scale from zero)', () => {
      const node = buildVirtualNode(
        input({
          summary: { metadata: { name: 'singleton' }, capacity: {}, allocatable: {}, free: {} },
          burstCapacity: new Map([
            ['cpu', n(64)],
            ['memory', n(256 * 2 ** 30)],
          ]),
        }),
      );
      expect(node.status!.allocatable).to.deep.equal({ cpu: '64', memory: '256Gi', pods: '1000000' });
    });
    it('offers nothing without a summary (a target that is not ready)', () => {
      const node = buildVirtualNode(input({ summary: undefined, burstCapacity: new Map([['cpu', n(64)]]) }));
      expect(node.status!.allocatable).to.deep.equal({ cpu: '0', memory: '0', pods: '0' });
    });
  });

  const readiness: [boolean, string][] = [
    [true, 'True'],
    [false, 'False'],
  ];
  for (const [ready, status] of readiness) {
    it(`reports Ready=${status} from target health`, () => {
      const n = buildVirtualNode(input({ health: { ready, reason: 'R', message: 'M', lastTransitionTime: '2024-05-01T09:00:00.000Z' } }));
      const c = n.status!.conditions!;
      expect(c.map((x) => [x.type, x.status])).to.deep.equal([
        ['Ready', status],
        ['MemoryPressure', 'False'],
        ['DiskPressure', 'False'],
        ['PIDPressure', 'False'],
      ]);
      expect(c[0]).to.include({ reason: 'R', message: 'M' });
      expect(c[0]!.lastTransitionTime!.toISOString()).to.equal('2024-05-01T09:00:00.000Z');
      expect(c.every((x) => x.lastHeartbeatTime!.toISOString() === NOW)).to.equal(true);
    });
  }

  it('puts the kubelet address first as InternalIP, then the hostname', () => {
    expect(node.status!.addresses).to.deep.equal([
      { type: 'InternalIP', address: '127.0.0.1' },
      { type: 'Hostname', address: 'admiralty-namespace-default-c2' },
    ]);
    expect(node.status!.daemonEndpoints).to.deep.equal({ kubeletEndpoint: { Port: 10443 } });
  });

  it('fills nodeInfo', () => {
    expect(node.status!.nodeInfo).to.include({ kubeletVersion: 'v1.36.3-admiralty-ts', operatingSystem: 'linux', architecture: '' });
    const withArch = buildVirtualNode(input({ summary: { metadata: { labels: { 'kubernetes.io/arch': 'arm64' } } } }));
    expect(withArch.status!.nodeInfo!.architecture).to.equal('arm64');
    const explicit = buildVirtualNode(input({ nodeInfo: { kubeletVersion: 'v1', architecture: 'amd64', operatingSystem: 'linux' } }));
    expect(explicit.status!.nodeInfo!.architecture).to.equal('amd64');
  });
});

describe('buildVirtualNodeStatusPatch', () => {
  // What the apiserver returns: a JSON round trip turns Dates into strings; simulate client-node Dates.
  const stored = (n: V1Node): V1Node => {
    const copy = JSON.parse(JSON.stringify(n)) as V1Node;
    for (const c of copy.status!.conditions!) {
      c.lastHeartbeatTime = new Date(c.lastHeartbeatTime as unknown as string);
      c.lastTransitionTime = new Date(c.lastTransitionTime as unknown as string);
    }
    return copy;
  };
  const existing = stored(buildVirtualNode(input()));

  it('is null when only heartbeat times differ', () => {
    expect(buildVirtualNodeStatusPatch(existing, buildVirtualNode(input({ now: LATER })))).to.equal(null);
  });

  it('returns a body on heartbeat request, keeping transition times', () => {
    const patch = buildVirtualNodeStatusPatch(existing, buildVirtualNode(input({ now: LATER })), { heartbeat: true })!;
    const pressure = patch.conditions!.find((c) => c.type === 'DiskPressure')!;
    expect(pressure.lastTransitionTime!.toISOString()).to.equal(NOW);
    expect(pressure.lastHeartbeatTime!.toISOString()).to.equal(LATER);
  });

  it('ignores conditions written by others', () => {
    const withOther = stored(buildVirtualNode(input()));
    withOther.status!.conditions!.push({ type: 'NetworkUnavailable', status: 'True' });
    expect(buildVirtualNodeStatusPatch(withOther, buildVirtualNode(input({ now: LATER })))).to.equal(null);
  });

  it('treats quantities by value', () => {
    const e = stored(buildVirtualNode(input()));
    e.status!.capacity!.memory = String(32 * 2 ** 30);
    expect(buildVirtualNodeStatusPatch(e, buildVirtualNode(input({ now: LATER })))).to.equal(null);
  });

  const changes: [string, Partial<VirtualNodeInput>][] = [
    ['readiness', { health: { ready: false, reason: 'TargetUnreachable', message: 'x', lastTransitionTime: LATER } }],
    ['capacity', { summary: { metadata: {}, capacity: { cpu: '16', memory: '32Gi', pods: '220' } } }],
    ['kubelet port', { kubelet: { address: '127.0.0.1', port: 10444 } }],
    ['kubelet address', { kubelet: { address: '127.0.0.2', port: 10443 } }],
    ['kubelet version', { nodeInfo: { kubeletVersion: 'v2' } }],
  ];
  for (const [what, over] of changes) {
    it(`returns the status when ${what} changes`, () => {
      const desired = buildVirtualNode(input({ ...over, now: LATER }));
      const patch = buildVirtualNodeStatusPatch(existing, desired);
      expect(patch).to.not.equal(null);
      expect(patch!.conditions!.map((c) => c.type)).to.deep.equal(['Ready', 'MemoryPressure', 'DiskPressure', 'PIDPressure']);
    });
  }

  it('sets a new transition time when Ready flips, and null for resources no longer there', () => {
    const e = stored(buildVirtualNode(input({ summary: { metadata: {}, capacity: { cpu: '1', 'nvidia.com/gpu': '2' } } })));
    const desired = buildVirtualNode(input({ now: LATER, summary: { metadata: {}, capacity: { cpu: '1' } }, health: { ready: false, reason: 'R', message: 'M', lastTransitionTime: LATER } }));
    const patch = buildVirtualNodeStatusPatch(e, desired)!;
    expect(patch.capacity).to.deep.equal({ cpu: '1', memory: '0', pods: '0', 'nvidia.com/gpu': null });
    expect(patch.conditions![0]!.lastTransitionTime!.toISOString()).to.equal(LATER);
  });
});

describe('buildVirtualNodeMetadataPatch', () => {
  const desired = buildVirtualNode(input());
  it('is null when the labels and our annotations are exact', () => {
    expect(buildVirtualNodeMetadataPatch(JSON.parse(JSON.stringify(desired)), desired)).to.equal(null);
  });
  it('removes hand-added labels and sets missing ones', () => {
    const existing: V1Node = { metadata: { labels: { ...desired.metadata!.labels!, 'hand-made': 'x' }, annotations: desired.metadata!.annotations } };
    delete existing.metadata!.labels!.team;
    existing.metadata!.labels!['kubernetes.io/os'] = 'windows';
    expect(buildVirtualNodeMetadataPatch(existing, desired)).to.deep.equal({
      metadata: { labels: { 'hand-made': null, 'kubernetes.io/os': 'linux', team: 'a' } },
    });
  });
  it("points metrics-server at the node's own resource metrics path, leaving others' annotations alone", () => {
    expect(desired.metadata!.annotations).to.deep.equal({ 'metrics.k8s.io/resource-metrics-path': `/metrics/resource/${desired.metadata!.name}` });
    const existing: V1Node = { metadata: { labels: desired.metadata!.labels, annotations: { 'node.alpha.kubernetes.io/ttl': '0', 'metrics.k8s.io/resource-metrics-path': '/metrics/resource' } } };
    expect(buildVirtualNodeMetadataPatch(existing, desired)).to.deep.equal({
      metadata: { annotations: { 'metrics.k8s.io/resource-metrics-path': `/metrics/resource/${desired.metadata!.name}` } },
    });
  });
});

describe('buildNodeLease', () => {
  it('builds the node lease', () => {
    const lease = buildNodeLease('admiralty-cluster-c2', 'node-uid', NOW);
    expect(lease.metadata).to.deep.equal({
      name: 'admiralty-cluster-c2',
      namespace: 'kube-node-lease',
      ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: 'admiralty-cluster-c2', uid: 'node-uid' }],
    });
    expect(lease.spec).to.include({ holderIdentity: 'admiralty-cluster-c2', leaseDurationSeconds: 40 });
    expect(lease.spec!.renewTime).to.be.instanceOf(V1MicroTime);
    // The apiserver parses MicroTime with exactly six fractional digits.
    expect(JSON.parse(JSON.stringify(lease)).spec.renewTime).to.equal('2024-05-01T10:00:00.000000Z');
  });
});
