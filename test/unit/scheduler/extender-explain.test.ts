import type { V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { ClusterRegistry } from '../../../provider/clusters/cluster-registry.js';
import { createTargetClient } from '../../../provider/clusters/target-client.js';
import { PLACEMENT_POLICY_ANNOTATION, SOURCE_POD_MANIFEST_ANNOTATION } from '../../../provider/core/keys.js';
import { silentLogger } from '../../../provider/core/logger.js';
import { virtualNodeName } from '../../../provider/model/names.js';
import type { TargetRef } from '../../../provider/model/types.js';
import { createExtender, FILTER_PATH, type TargetState } from '../../../scheduler/extender-server.js';
import { kubeConfig, node, nodesOf, pod } from './fixtures.js';

const C1: TargetRef = { kind: 'Target', namespace: 'ns', name: 'c1' };
const C2: TargetRef = { kind: 'Target', namespace: 'ns', name: 'c2' };
const ELSEWHERE: TargetRef = { kind: 'Target', namespace: 'other', name: 'c3' };
const SHARED: TargetRef = { kind: 'ClusterTarget', namespace: '', name: 'shared' };
const DOWN: TargetRef = { kind: 'ClusterTarget', namespace: '', name: 'down' };

/** A proxy as the webhook leaves it: the source pod saved in its annotation. */
function proxy(name: string, requests: Record<string, string>, annotations: Record<string, string> = {}): V1Pod {
  const source = pod(name, requests, {}, 'ns');
  const p = pod(name, requests, {}, 'ns');
  p.metadata!.uid = `${name}-uid`;
  p.metadata!.annotations = { [SOURCE_POD_MANIFEST_ANNOTATION]: JSON.stringify(source), ...annotations };
  return p;
}

describe('scheduler: Extender.explain', () => {
  const events: string[] = [];
  const counted: [string, string, string][] = [];
  const registry = new ClusterRegistry();
  for (const r of [C1, C2, ELSEWHERE, SHARED, DOWN]) {
    const client = createTargetClient(r, kubeConfig(), 'fp', false);
    registry.set(client, virtualNodeName(r));
    registry.setHealth(client.key, { ready: r !== DOWN, reason: r === DOWN ? 'TargetUnreachable' : 'TargetReachable', message: r === DOWN ? 'connect ECONNREFUSED' : '', sinceMs: 0 });
  }
  const states: Record<string, TargetState> = {
    'Target/ns/c1': { nodes: nodesOf([node('a1', { allocatable: { cpu: '8', memory: '16Gi', pods: '110' } })]), readAtMs: 0 },
    'Target/ns/c2': { nodes: nodesOf([node('b1', { allocatable: { cpu: '2', memory: '8Gi', pods: '110' } }), node('b2', { allocatable: { cpu: '2', memory: '8Gi', pods: '110' } })]), readAtMs: 0 },
    'Target/other/c3': { nodes: nodesOf([node('x1')]), readAtMs: 0 },
    'ClusterTarget/shared': { nodes: nodesOf([node('s1')]), readAtMs: 0 },
    'ClusterTarget/down': { nodes: nodesOf([node('d1')]), readAtMs: 0 },
  };
  const extender = createExtender({
    registry,
    targetState: (key) => states[key],
    policy: { kind: 'spread' },
    events: { record: (_obj, _type, reason) => events.push(reason) },
    refusals: { record: (key, source, reason) => void counted.push([key, source, reason]) },
    logger: silentLogger(),
  });

  it("judges every target of the pod's namespace and every ClusterTarget, none of another namespace", () => {
    const verdicts = extender.explain(proxy('p', { cpu: '1' }));
    expect(verdicts.map((v) => v.targetKey)).to.have.members(['Target/ns/c1', 'Target/ns/c2', 'ClusterTarget/shared', 'ClusterTarget/down']);
  });

  it('fails a target no node of which fits, with the count and the largest free amount; passes the others with a score', () => {
    const verdicts = extender.explain(proxy('big', { cpu: '3' }));
    const byKey = new Map(verdicts.map((v) => [v.targetKey, v]));
    expect(byKey.get('Target/ns/c2')).to.deep.include({ passes: false, node: virtualNodeName(C2), reason: 'no node in ns/c2 fits: 2 Insufficient cpu (largest free 2)', unresolvable: false });
    expect(byKey.get('Target/ns/c2')).to.not.have.property('score');
    expect(byKey.get('Target/ns/c1')).to.deep.include({ passes: true });
    // c1 has 5 of 8 cpu left after the pod, shared 1 of 4: c1 ranks first.
    expect(byKey.get('Target/ns/c1')!.score).to.equal(10);
    expect(byKey.get('ClusterTarget/shared')!.score).to.equal(9);
  });

  it("gives a target that is not ready the filter's reason, unresolvable", () => {
    const down = extender.explain(proxy('p', { cpu: '1' })).find((v) => v.targetKey === 'ClusterTarget/down');
    expect(down).to.deep.include({ passes: false, unresolvable: true, reason: 'target down is not ready: TargetUnreachable: connect ECONNREFUSED' });
  });

  it('records no Warning event for an unusable placement-policy annotation, which prioritize would', () => {
    extender.explain(proxy('odd', { cpu: '1' }, { [PLACEMENT_POLICY_ANNOTATION]: 'nonsense' }));
    expect(events).to.deep.equal([]);
  });

  it('says in words why each passing target passed (on how many nodes it fits, the most room left on one) and what its score ranks by', () => {
    const byKey = new Map(extender.explain(proxy('big', { cpu: '3' })).map((v) => [v.targetKey, v]));
    expect(byKey.get('Target/ns/c1')).to.deep.include({
      why: 'fits on 1 of 1 node(s) of ns/c1; the most free on one of them: cpu 8, memory 16Gi',
      ranking: 'spread (the default): the most free cpu (share of allocatable, after the pod) first',
    });
    const packed = extender.explain(proxy('packed', { cpu: '1' }, { [PLACEMENT_POLICY_ANNOTATION]: 'pack' })).find((v) => v.targetKey === 'Target/ns/c2');
    expect(packed).to.deep.include({ passes: true, why: 'fits on 2 of 2 node(s) of ns/c2; the most free on one of them: cpu 2, memory 8Gi' });
    expect(packed!.ranking).to.equal("pack (the pod's annotation): the least free cpu first, to fill one target before the next");
    expect(byKey.get('Target/ns/c2')).to.not.have.property('why');
  });

  it('counts the targets the filter rejects, by reason name, and none of those explain judges', async () => {
    counted.length = 0;
    extender.explain(proxy('big', { cpu: '3' }));
    expect(counted).to.deep.equal([]);
    const filter = extender.routes.find((r) => r.path === FILTER_PATH)!;
    await filter.handle({
      path: FILTER_PATH,
      connection: undefined as never,
      body: Buffer.from(JSON.stringify({ Pod: proxy('big', { cpu: '3' }), NodeNames: [virtualNodeName(C1), virtualNodeName(C2), virtualNodeName(DOWN)] })),
    });
    expect(counted).to.deep.equal([
      ['Target/ns/c2', 'filter', 'NoNodeFits'],
      ['ClusterTarget/down', 'filter', 'TargetNotReady'],
    ]);
  });
});
