import { KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { ClusterRegistry } from '../../../../provider/clusters/cluster-registry.js';
import { createTargetClient } from '../../../../provider/clusters/target-client.js';
import { FakeClock, realClock } from '../../../../provider/core/clock.js';
import { RefusalLog } from '../../../../scheduler/refusal-log.js';
import { SOURCE_POD_MANIFEST_ANNOTATION } from '../../../../provider/core/keys.js';
import type { TargetVerdict } from '../../../../scheduler/extender-server.js';
import { createOperatorViews } from '../../../../provider/wiring/operator-views.js';

const kc = new KubeConfig();
kc.loadFromOptions({ clusters: [{ name: 'c', server: 'https://127.0.0.1:1' }], users: [{ name: 'u', token: 't' }], contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x' });

describe('wiring: createOperatorViews', () => {
  const registry = new ClusterRegistry();
  const c2 = createTargetClient({ kind: 'Target', namespace: 'ns', name: 'c2' }, kc, 'fp', false);
  registry.set(c2, 'admiralty-namespace-ns-c2');
  registry.setHealth(c2.key, { ready: false, reason: 'TargetUnreachable', message: 'connect ECONNREFUSED', sinceMs: 0, outageSinceMs: Date.UTC(2026, 0, 1) });
  registry.setSummary(
    c2.key,
    {
      metadata: { name: 'singleton' },
      renewTime: '2026-01-01T00:00:00Z',
      nodePools: [{ labels: {}, nodes: [{ name: 'n', allocatable: { cpu: '4' }, free: { cpu: '2', memory: '1Gi', pods: '9' } }] }],
    },
    Date.UTC(2026, 0, 1, 0, 0, 5),
  );
  const pods: Record<string, V1Pod> = {
    'ns/proxy': {
      metadata: { name: 'proxy', namespace: 'ns', annotations: { [SOURCE_POD_MANIFEST_ANNOTATION]: '{}' } },
      spec: { containers: [], nodeName: 'admiralty-namespace-ns-c2' },
      status: { phase: 'Running' },
    },
    'ns/plain': { metadata: { name: 'plain', namespace: 'ns' }, spec: { containers: [] } },
  };
  const verdicts: TargetVerdict[] = [
    { targetKey: 'Target/ns/c1', target: 'ns/c1', node: 'admiralty-namespace-ns-c1', passes: true, score: 9 },
    { targetKey: 'Target/ns/c2', target: 'ns/c2', node: 'admiralty-namespace-ns-c2', passes: true, score: 10 },
    { targetKey: 'Target/ns/c3', target: 'ns/c3', node: 'admiralty-namespace-ns-c3', passes: false, reason: 'no' },
  ];
  const log = new RefusalLog({ clock: new FakeClock(Date.UTC(2026, 0, 1, 0, 1)) });
  log.record(c2.key, 'filter', 'TargetNotReady', 'target ns/c2 is not ready: TargetUnreachable');
  log.record('Target/ns/c1', 'filter', 'NoNodeFits', 'not this one');
  const views = createOperatorViews({
    core: {
      readNamespacedPod: (async ({ namespace, name }: { namespace: string; name: string }) => {
        const p = pods[`${namespace}/${name}`];
        if (!p) throw Object.assign(new Error('not found'), { code: 404 });
        return p;
      }) as never,
    },
    registry,
    explain: () => () => verdicts,
    refusals: () => log,
    clock: realClock,
  });

  it("gives a target's health, outage start, its refusals counted by this replica and the room of the summary read, with when it was read", async () => {
    const answer = await views.summary('admiralty-namespace-ns-c2');
    expect(answer).to.deep.equal({
      code: 200,
      body: {
        node: 'admiralty-namespace-ns-c2',
        target: 'ns/c2',
        ready: false,
        reason: 'TargetUnreachable',
        message: 'connect ECONNREFUSED',
        outageSince: '2026-01-01T00:00:00.000Z',
        refusals: [{ source: 'filter', reason: 'TargetNotReady', count: 1, lastMessage: 'target ns/c2 is not ready: TargetUnreachable', lastAt: '2026-01-01T00:01:00.000Z' }],
        summary: {
          readAt: '2026-01-01T00:00:05.000Z',
          renewTime: '2026-01-01T00:00:00Z',
          largestFree: { cpu: '2', memory: '1Gi', pods: '9' },
          totalFree: { cpu: '2', memory: '1Gi', pods: '9' },
          nodes: 1,
          schedulableNodes: 1,
        },
      },
    });
    expect(views.summaryAttributes('admiralty-namespace-ns-c2')).to.deep.equal({ verb: 'get', group: 'multicluster.admiralty.io', resource: 'targets', namespace: 'ns', name: 'c2' });
    expect(views.summaryAttributes('c2-node-0')).to.equal(null);
  });

  it("explains a proxy: the extender's verdicts, the target it is bound to and the best scored", async () => {
    const answer = await views.explain('ns', 'proxy');
    expect(answer).to.deep.equal({
      code: 200,
      body: { pod: 'ns/proxy', phase: 'Running', boundTo: { node: 'admiralty-namespace-ns-c2', target: 'ns/c2' }, targets: verdicts, best: ['ns/c2'] },
    });
  });

  it('answers 404 for a pod that does not exist and 400 for one that is not a proxy', async () => {
    expect(await views.explain('ns', 'gone')).to.deep.equal({ code: 404, message: 'pod ns/gone not found' });
    const plain = await views.explain('ns', 'plain');
    expect(plain.code).to.equal(400);
    expect((plain as { message: string }).message).to.match(/^pod ns\/plain is not a proxy pod/);
  });
});
