import { expect } from 'chai';
import sinon from 'sinon';
import type { V1Namespace, V1Pod } from '@kubernetes/client-node';
import { ClusterRegistry } from '../../../../provider/clusters/cluster-registry.js';
import { createProxyResolver } from '../../../../provider/kubelet/proxy-resolver.js';
import { delegatePodName } from '../../../../provider/model/names.js';
import { notFound } from '../../../support/api-errors.js';
import { coreStub } from '../../../support/stubs.js';
import { fakeTarget } from '../../../support/targets.js';
import { proxy } from '../../../support/pods.js';

const NODE_A = 'admiralty-namespace-team-a-t';
const NODE_CT = 'admiralty-cluster-ct';

/** A proxy as the webhook leaves it, on `nodeName`, but for the annotations given, which replace the webhook's. */
function pod(namespace: string, nodeName: string, annotations?: Record<string, string>): V1Pod {
  const p = proxy({ namespace, uid: `uid-${namespace}`, elected: true, nodeName });
  if (annotations) p.metadata!.annotations = annotations;
  return p;
}

function setup(pods: V1Pod[], namespaces: V1Namespace[]) {
  const core = coreStub();
  core.readNamespacedPod.callsFake(async ({ name, namespace }) => {
    const p = pods.find((x) => x.metadata!.name === name && x.metadata!.namespace === namespace);
    if (!p) throw notFound();
    return p;
  });
  core.readNamespace.callsFake(async ({ name }) => {
    const n = namespaces.find((x) => x.metadata!.name === name);
    if (!n) throw notFound();
    return n;
  });
  const registry = new ClusterRegistry();
  const { target: a } = fakeTarget('t', { namespace: 'team-a' });
  registry.set(a, NODE_A);
  registry.set(fakeTarget('ct').target, NODE_CT);
  return { resolver: createProxyResolver({ core, registry, sourceClusterName: 'c1' }), a };
}

const enabled = (name: string): V1Namespace => ({ metadata: { name, labels: { 'multicluster-scheduler': 'enabled' } } });

describe('createProxyResolver', () => {
  afterEach(() => sinon.restore());

  it("resolves a proxy on its own namespace's Target to its delegate", async () => {
    const { resolver, a } = setup([pod('team-a', NODE_A)], [enabled('team-a')]);
    const r = await resolver.resolve('team-a', 'p');
    expect(r).to.deep.equal({ nodeName: NODE_A, target: { kubeConfig: a.kubeConfig, namespace: 'team-a', pod: delegatePodName('p', 'c1', 'uid-team-a') } });
  });

  it('resolves a proxy on a ClusterTarget', async () => {
    const { resolver } = setup([pod('team-b', NODE_CT)], [enabled('team-b')]);
    expect(await resolver.resolve('team-b', 'p')).to.have.property('nodeName', NODE_CT);
  });

  // Each answers null, as for a pod that does not exist: no existence leak.
  const refusals: [string, V1Pod[], V1Namespace[]][] = [
    ["a pod of team-b on team-a's Target (nodeName set by its creator)", [pod('team-b', NODE_A)], [enabled('team-b')]],
    ['a proxy whose namespace is not enabled', [pod('team-a', NODE_A)], [{ metadata: { name: 'team-a' } }]],
    ['a proxy whose namespace cannot be read', [pod('team-a', NODE_A)], []],
    ['a pod that was never elected', [pod('team-a', NODE_A, { 'multicluster.admiralty.io/sourcepod-manifest': '{}' })], [enabled('team-a')]],
    ['a pod on a node that is not virtual', [pod('team-a', 'real-node')], [enabled('team-a')]],
    ['a pod that does not exist', [], [enabled('team-a')]],
  ];
  for (const [why, pods, namespaces] of refusals) {
    it(`answers null for ${why}`, async () => {
      const { resolver } = setup(pods, namespaces);
      expect(await resolver.resolve(pods[0]?.metadata?.namespace ?? 'team-a', 'p')).to.equal(null);
    });
  }
});
