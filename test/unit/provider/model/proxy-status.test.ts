import { expect } from 'chai';
import type { V1Pod, V1PodStatus } from '@kubernetes/client-node';
import { buildProxyAnnotations, buildProxyStatus, statusEquals } from '../../../../provider/model/proxy-status.js';

function proxy(status: V1PodStatus = {}, annotations: Record<string, string> = {}): V1Pod {
  return {
    metadata: { name: 'p', namespace: 'ns', annotations },
    spec: { containers: [{ name: 'main' }, { name: 'side' }], initContainers: [{ name: 'init' }] },
    status,
  };
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
