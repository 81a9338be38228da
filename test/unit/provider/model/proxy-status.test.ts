import { expect } from 'chai';
import type { V1Pod, V1PodStatus } from '@kubernetes/client-node';
import { TARGET_REACHABLE_CONDITION } from '../../../../provider/core/keys.js';
import { buildDelegatePod, delegateSourcePod, savedSourcePodManifest } from '../../../../provider/model/delegate-pod.js';
import { checkTenancy } from '../../../../provider/model/tenancy.js';
import { schedulingPod } from '../../../../scheduler/fit.js';
import { SubtreeTable } from '../../../../provider/controller/subtree-table.js';
import { sharePodParts } from '../../../../provider/model/shared-pod-parts.js';
import {
  buildProxyAnnotations,
  buildProxyStatus,
  cachedSourcePodManifest,
  proxyFields,
  proxyStatusEquals,
  proxyStatusPatch,
  statusEquals,
  UNCACHED_PROXY_STATUS_FIELDS,
} from '../../../../provider/model/proxy-status.js';
import { proxy as baseProxy } from '../../../support/pods.js';

function proxy(status: V1PodStatus = {}, annotations: Record<string, string> = {}): V1Pod {
  return baseProxy({ namespace: 'ns', annotations, spec: { containers: [{ name: 'main' }, { name: 'side' }], initContainers: [{ name: 'init' }] }, status });
}

describe('buildProxyStatus', () => {
  const delegateStatus: V1PodStatus = {
    phase: 'Running',
    conditions: [
      { type: 'Ready', status: 'True', observedGeneration: 3, lastTransitionTime: new Date('2024-01-01T00:00:05Z') },
      { type: 'PodScheduled', status: 'True' },
    ],
    podIP: '10.1.0.5',
    podIPs: [{ ip: '10.1.0.5' }],
    hostIP: '172.18.0.3',
    hostIPs: [{ ip: '172.18.0.3' }],
    startTime: new Date('2024-01-01T00:00:00Z'),
    message: 'm',
    reason: 'r',
    qosClass: 'BestEffort',
    nominatedNodeName: 'target-node',
    observedGeneration: 3,
    containerStatuses: [
      { name: 'side', image: 'b', imageID: '', ready: true, restartCount: 0 },
      { name: 'istio-proxy', image: 'i', imageID: '', ready: true, restartCount: 0 },
      { name: 'main', image: 'a', imageID: '', ready: true, restartCount: 1 },
    ],
    initContainerStatuses: [
      { name: 'injected-init', image: 'x', imageID: '', ready: true, restartCount: 0 },
      { name: 'init', image: 'y', imageID: '', ready: true, restartCount: 0 },
    ],
  };
  const own: V1PodStatus = {
    phase: 'Pending',
    qosClass: 'Burstable',
    observedGeneration: 1,
    ephemeralContainerStatuses: [{ name: 'debug', image: 'e', imageID: '', ready: false, restartCount: 0 }],
  };
  const built = buildProxyStatus(proxy(own), { status: delegateStatus });

  const mirrored: (keyof V1PodStatus)[] = ['phase', 'podIP', 'podIPs', 'hostIP', 'hostIPs', 'startTime', 'message', 'reason'];
  for (const field of mirrored) {
    it(`mirrors ${field} from the delegate`, () => expect(built[field]).to.deep.equal(delegateStatus[field]));
  }
  const keptFromProxy: (keyof V1PodStatus)[] = ['qosClass', 'observedGeneration', 'ephemeralContainerStatuses'];
  for (const field of keptFromProxy) {
    it(`keeps ${field} from the proxy`, () => expect(built[field]).to.deep.equal(own[field]));
  }
  it('mirrors conditions without the delegate generation', () => {
    expect(built.conditions).to.deep.equal([
      { type: 'Ready', status: 'True', lastTransitionTime: new Date('2024-01-01T00:00:05Z') },
      { type: 'PodScheduled', status: 'True' },
    ]);
  });
  it('filters container statuses to the proxy containers, keeping the delegate order', () => {
    expect(built.containerStatuses!.map((s) => s.name)).to.deep.equal(['side', 'main']);
    expect(built.initContainerStatuses!.map((s) => s.name)).to.deep.equal(['init']);
  });
  it('does not mirror the nominated node (a target node)', () => {
    expect(built).to.not.have.property('nominatedNodeName');
  });
  it("keeps the proxy's own TargetReachable and Replaceable conditions after the delegate's, and no other of the proxy's", () => {
    const reachable = { type: 'multicluster.admiralty.io/TargetReachable', status: 'False', reason: 'TargetUnreachable', message: 'm' };
    const replaceable = { type: 'multicluster.admiralty.io/Replaceable', status: 'False', reason: 'CannotReplace', message: 'm' };
    const delegated = { type: 'multicluster.admiralty.io/Delegated', status: 'False', reason: 'DelegateForbidden' };
    const out = buildProxyStatus(proxy({ ...own, conditions: [delegated, reachable, replaceable, { type: 'Ready', status: 'False' }] }), { status: delegateStatus });
    expect(out.conditions!.map((c) => `${c.type}=${c.status}`)).to.deep.equal([
      'Ready=True',
      'PodScheduled=True',
      'multicluster.admiralty.io/TargetReachable=False',
      'multicluster.admiralty.io/Replaceable=False',
    ]);
    // Stable: the status built from a proxy that has it is equal to it (no write on the next pass).
    expect(statusEquals(buildProxyStatus(proxy(out), { status: delegateStatus }), out)).to.equal(true);
  });
  it('handles a delegate without status', () => {
    expect(buildProxyStatus(proxy({ qosClass: 'Guaranteed' }), {})).to.deep.equal({ qosClass: 'Guaranteed' });
  });
});

describe('statusEquals', () => {
  const cases: [string, V1PodStatus | undefined, V1PodStatus | undefined, boolean][] = [
    ['both undefined', undefined, undefined, true],
    ['undefined vs empty', undefined, {}, true],
    ['Date vs string', { startTime: new Date('2024-01-01T00:00:00Z') }, { startTime: '2024-01-01T00:00:00Z' as unknown as Date }, true],
    ['Date vs later string', { startTime: new Date('2024-01-01T00:00:00Z') }, { startTime: '2024-01-01T00:00:01Z' as unknown as Date }, false],
    ['key order', { phase: 'Running', podIP: '1' }, { podIP: '1', phase: 'Running' }, true],
    ['empty list vs absent', { podIPs: [] }, {}, true],
    ['phase differs', { phase: 'Running' }, { phase: 'Pending' }, false],
    [
      'container state differs',
      { containerStatuses: [{ name: 'a', image: 'i', imageID: '', ready: true, restartCount: 0 }] },
      { containerStatuses: [{ name: 'a', image: 'i', imageID: '', ready: true, restartCount: 1 }] },
      false,
    ],
  ];
  for (const [why, a, b, want] of cases) {
    it(why, () => expect(statusEquals(a, b)).to.equal(want));
  }
  it('sees a built status as equal to itself after a JSON round trip', () => {
    const s = buildProxyStatus(proxy(), { status: { phase: 'Running', startTime: new Date('2024-01-01T00:00:00Z') } });
    expect(statusEquals(s, JSON.parse(JSON.stringify(s)))).to.equal(true);
  });
});

describe('buildProxyAnnotations', () => {
  const elect = { 'multicluster.admiralty.io/elect': '', 'multicluster.admiralty.io/sourcepod-manifest': '{}' };
  const cases: [string, Record<string, string>, Record<string, string> | undefined, Record<string, string> | null][] = [
    ['nothing to change', { ...elect, a: '1' }, { a: '1', 'multicluster.admiralty.io/parent-name': 'p' }, null],
    ['feeds back a new annotation', { ...elect, a: '1' }, { a: '1', 'workflows.argoproj.io/outputs': 'o' }, { ...elect, a: '1', 'workflows.argoproj.io/outputs': 'o' }],
    ['feeds back a changed value', { ...elect, a: '1' }, { a: '2' }, { ...elect, a: '2' }],
    ['drops a proxy-only foreign annotation', { ...elect, a: '1', b: '2' }, { a: '1' }, { ...elect, a: '1' }],
    ['never takes Admiralty annotations from the delegate', { ...elect }, { 'multicluster.admiralty.io/elect': 'x' }, null],
    ['delegate without annotations', { ...elect, a: '1' }, undefined, { ...elect }],
  ];
  for (const [why, own, theirs, want] of cases) {
    it(why, () => {
      expect(buildProxyAnnotations(proxy({}, own), { metadata: { annotations: theirs } })).to.deep.equal(want);
    });
  }
});

describe('proxyFields (the proxies cache)', () => {
  const t = '2024-01-01T00:00:00Z';
  const manifest = { metadata: { name: 'p', namespace: 'ns' }, spec: { containers: [{ name: 'main', image: 'nginx' }] } };
  // As the informer has it: parsed JSON, a running proxy that mirrors its delegate, with its own conditions.
  const full = (status: V1PodStatus): V1Pod =>
    JSON.parse(
      JSON.stringify({
        metadata: { name: 'p', namespace: 'ns', uid: 'u', resourceVersion: '7', annotations: { 'multicluster.admiralty.io/sourcepod-manifest': JSON.stringify(manifest) } },
        spec: { nodeName: 'admiralty-c2', containers: [{ name: 'main', image: 'nginx', resources: { requests: { cpu: '10m' } } }, { name: 'side' }], initContainers: [{ name: 'init' }] },
        status,
      }),
    );
  const running: V1PodStatus = {
    phase: 'Running',
    conditions: [
      { type: 'Ready', status: 'True', lastTransitionTime: t as unknown as Date },
      { type: TARGET_REACHABLE_CONDITION, status: 'True', reason: 'TargetReachable', lastTransitionTime: t as unknown as Date },
    ],
    hostIP: '10.0.0.2',
    hostIPs: [{ ip: '10.0.0.2' }],
    podIP: '10.244.0.9',
    podIPs: [{ ip: '10.244.0.9' }],
    startTime: t as unknown as Date,
    containerStatuses: [{ name: 'main', ready: true, restartCount: 0, image: 'nginx', imageID: 'sha', state: { running: { startedAt: t as unknown as Date } } }],
    initContainerStatuses: [{ name: 'init', ready: true, restartCount: 0, image: 'busybox', imageID: 'sha', state: { terminated: { exitCode: 0 } } }],
    qosClass: 'Burstable',
    ephemeralContainerStatuses: [{ name: 'debug', ready: false, restartCount: 0, image: 'busybox', imageID: '' }],
  };
  const delegate: V1Pod = {
    status: { ...running, conditions: [{ type: 'Ready', status: 'False', lastTransitionTime: t as unknown as Date }], containerStatuses: [{ ...running.containerStatuses![0]!, restartCount: 3 }] },
  };

  // As the cache has it with the wiring's sharePodParts: a proxy of the same workload came
  // first, so the parts this one repeats are that one's frozen copies.
  const sharedWithAnother = (p: V1Pod): V1Pod => {
    const table = new SubtreeTable();
    sharePodParts(proxyFields(structuredClone(p)), table);
    const kept = sharePodParts(proxyFields(p), table);
    expect(Object.isFrozen(kept.spec!.containers[0]!.resources)).to.equal(true);
    return kept;
  };

  const readers: Array<[string, (p: V1Pod) => unknown]> = [
    ['buildProxyStatus', (p) => buildProxyStatus(p, delegate)],
    ['buildProxyAnnotations', (p) => buildProxyAnnotations(p, delegate)],
    ['buildDelegatePod', (p) => buildDelegatePod(p, { sourceClusterName: 'c1' })],
    ['checkTenancy', (p) => checkTenancy(p, { metadata: { name: 'ns', labels: { 'multicluster-scheduler': 'enabled' } } }, { kind: 'Target', namespace: 'ns', name: 'c2' })],
    ['the phase, start time and conditions (hadDelegate, outage, replacement, counted proxies)', (p) => [p.status?.phase, p.status?.startTime, p.status?.conditions]],
    ['metadata but the manifest, and spec', (p) => [{ ...p.metadata, annotations: { ...p.metadata?.annotations, 'multicluster.admiralty.io/sourcepod-manifest': undefined } }, p.spec]],
  ];
  for (const [state, status] of [
    ['running', running],
    ['pending', { phase: 'Pending', qosClass: 'BestEffort' }],
    ['without a status', undefined],
  ] as const) {
    for (const [reader, read] of readers) {
      it(`${reader} reads the same of a ${state} proxy from what is kept`, () => {
        expect(read(proxyFields(full(status as V1PodStatus)))).to.deep.equal(read(full(status as V1PodStatus)));
      });
      it(`${reader} reads the same of a ${state} proxy from what is kept, its parts shared with another proxy's (frozen)`, () => {
        expect(read(sharedWithAnother(full(status as V1PodStatus)))).to.deep.equal(read(full(status as V1PodStatus)));
      });
    }
  }

  // The saved manifest as an earlier webhook wrote it (the pod as created, defaults included),
  // with and without scheduling fields, as the webhook writes it now, and ones the cache keeps as
  // they are (YAML, broken, no spec object).
  const defaulted = { containers: [{ name: 'main', image: 'nginx', env: [{ name: 'A', value: 'x'.repeat(500) }] }], restartPolicy: 'Always', dnsPolicy: 'ClusterFirst', serviceAccountName: 'default' };
  const scheduling = {
    nodeSelector: { zone: 'a' },
    affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'k', operator: 'In', values: ['v'] }] }] } } },
    tolerations: [{ key: 't', operator: 'Exists' }],
    topologySpreadConstraints: [{ maxSkew: 1, topologyKey: 'zone', whenUnsatisfiable: 'DoNotSchedule' }],
    schedulerName: 'custom',
  };
  const manifests: Array<[string, string]> = [
    ['a defaulted manifest', JSON.stringify({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', labels: { a: 'b' } }, spec: defaulted })],
    ['one with every scheduling field', JSON.stringify({ metadata: { name: 'p' }, spec: { ...defaulted, ...scheduling } })],
    ['one with null scheduling fields', JSON.stringify({ spec: { ...defaulted, nodeSelector: null, tolerations: null } })],
    ['one without containers', JSON.stringify({ spec: { nodeSelector: { zone: 'a' } } })],
    ['the one the webhook saves', savedSourcePodManifest({ metadata: { name: 'p', namespace: 'n' }, spec: { ...defaulted, ...scheduling } })],
    ['a YAML one', 'spec:\n  containers:\n  - name: main\n  nodeSelector:\n    zone: b\n'],
    ['a broken one', '{"spec": '],
    ['one whose spec is a list', '{"spec": []}'],
    ['an array', '[]'],
  ];
  const withManifest = (m: string): V1Pod => {
    const p = full(running);
    p.metadata!.annotations!['multicluster.admiralty.io/sourcepod-manifest'] = m;
    return p;
  };
  const outcome = (read: () => unknown) => {
    try {
      return read();
    } catch (err) {
      return `${(err as Error).constructor.name}: ${(err as Error).message}`;
    }
  };
  for (const [what, m] of manifests) {
    // The pods these return carry the proxy's status too, which the cache keeps less of (above).
    const podOf = (p: V1Pod) => [p.metadata, p.spec];
    for (const [reader, read] of [
      ['delegateSourcePod', (p: V1Pod) => podOf(delegateSourcePod(p))],
      ['schedulingPod (the extender)', (p: V1Pod) => podOf(schedulingPod(p))],
      ['buildDelegatePod', (p: V1Pod) => buildDelegatePod(p, { sourceClusterName: 'c1' })],
    ] as const) {
      it(`${reader} reads the same of ${what} from what is kept`, () => {
        expect(outcome(() => read(proxyFields(withManifest(m))))).to.deep.equal(outcome(() => read(withManifest(m))));
      });
      it(`${reader} reads the same of ${what} from what is kept, its parts shared with another proxy's (frozen)`, () => {
        expect(outcome(() => read(sharedWithAnother(withManifest(m))))).to.deep.equal(outcome(() => read(withManifest(m))));
      });
    }
  }

  it('keeps of a JSON manifest only its scheduling fields, and the others as they are', () => {
    expect(JSON.parse(cachedSourcePodManifest(manifests[0]![1]))).to.deep.equal({ spec: {} });
    expect(JSON.parse(cachedSourcePodManifest(manifests[1]![1]))).to.deep.equal({ spec: scheduling });
    expect(JSON.parse(cachedSourcePodManifest(manifests[2]![1]))).to.deep.equal({ spec: { nodeSelector: null, tolerations: null } });
    expect(JSON.parse(cachedSourcePodManifest(manifests[3]![1]))).to.deep.equal({ spec: { nodeSelector: { zone: 'a' } } });
    expect(JSON.parse(cachedSourcePodManifest(manifests[4]![1]))).to.deep.equal({ spec: scheduling });
    for (const [, m] of manifests.slice(5)) expect(cachedSourcePodManifest(m)).to.equal(m);
    // Not vacuous: the delegate takes the manifest's scheduling fields, from the kept one too.
    expect(buildDelegatePod(proxyFields(withManifest(manifests[1]![1])), { sourceClusterName: 'c1' }).spec)
      .to.include({ schedulerName: 'custom' })
      .and.deep.include({ nodeSelector: { zone: 'a' } });
  });

  it('drops the container statuses and IPs, and keeps the rest of the status', () => {
    const kept = proxyFields(full(running));
    expect(Object.keys(kept.status!).sort()).to.deep.equal(['conditions', 'ephemeralContainerStatuses', 'phase', 'qosClass', 'startTime']);
    for (const f of UNCACHED_PROXY_STATUS_FIELDS) expect(full(running).status).to.have.property(f);
  });

  it('carries its digest neither in JSON, nor in a spread, nor in a clone', () => {
    const kept = proxyFields(full(running));
    const plain = JSON.parse(JSON.stringify(kept));
    expect({ ...kept.status }).to.deep.equal(plain.status);
    expect(structuredClone(kept)).to.deep.equal(plain);
    expect(Object.getOwnPropertySymbols({ ...kept.status })).to.deep.equal([]);
  });

  it('compares a cached proxy with a status as statusEquals compares the whole one, uncached fields included', () => {
    const statuses: V1PodStatus[] = [
      running,
      { ...running, startTime: new Date(t) },
      buildProxyStatus(full(running), delegate),
      { ...running, containerStatuses: [{ ...running.containerStatuses![0]!, restartCount: 1 }] },
      { ...running, podIP: '10.244.0.10' },
      { ...running, hostIPs: undefined, hostIP: undefined },
      { phase: 'Pending' },
    ];
    for (const a of statuses) {
      for (const b of statuses) {
        expect(proxyStatusEquals(proxyFields(full(a)), b), JSON.stringify([a, b])).to.equal(statusEquals(a, b));
      }
    }
  });

  it('patches the whole status: its fields, and null for those the proxy may have and it lacks', () => {
    const kept = proxyFields(full({ ...running, nominatedNodeName: 'n1', message: 'old' }));
    const next: V1PodStatus = { phase: 'Succeeded', containerStatuses: running.containerStatuses };
    expect(proxyStatusPatch(kept, next)).to.deep.equal({
      metadata: { resourceVersion: '7' },
      status: {
        phase: 'Succeeded',
        containerStatuses: running.containerStatuses,
        conditions: null,
        startTime: null,
        qosClass: null,
        ephemeralContainerStatuses: null,
        nominatedNodeName: null,
        message: null,
        initContainerStatuses: null,
        hostIP: null,
        hostIPs: null,
        podIP: null,
        podIPs: null,
      },
    });
  });
});
