import { expect } from 'chai';
import type { V1Namespace, V1Pod } from '@kubernetes/client-node';
import { checkTenancy } from '../../../../provider/model/tenancy.js';
import type { TargetRef } from '../../../../provider/model/types.js';
import { proxy as baseProxy } from '../../../support/pods.js';

const enabled = (name: string): V1Namespace => ({ metadata: { name, labels: { 'multicluster-scheduler': 'enabled' } } });
/** A proxy as the webhook leaves it, but for the annotations or labels given, which replace the webhook's. */
const proxy = (namespace: string, annotations?: Record<string, string>, labels?: Record<string, string>): V1Pod => {
  const p = baseProxy({ namespace, elected: true, spec: {} });
  if (annotations) p.metadata!.annotations = annotations;
  if (labels) p.metadata!.labels = labels;
  return p;
};
const targetOf = (namespace: string): TargetRef => ({ kind: 'Target', namespace, name: 't' });
const clusterTarget: TargetRef = { kind: 'ClusterTarget', namespace: '', name: 'ct' };

describe('checkTenancy', () => {
  const cases: [string, V1Pod, V1Namespace | undefined, TargetRef, string | null][] = [
    ["a proxy on its own namespace's Target", proxy('a'), enabled('a'), targetOf('a'), null],
    ['a proxy on a ClusterTarget', proxy('b'), enabled('b'), clusterTarget, null],
    ["a proxy on another namespace's Target", proxy('b'), enabled('b'), targetOf('a'), 'TargetNotAllowed'],
    ['a proxy of a namespace not enabled (no cached namespace)', proxy('a'), undefined, targetOf('a'), 'NamespaceNotEnabled'],
    ['a proxy of a namespace labelled otherwise', proxy('a'), { metadata: { name: 'a', labels: { 'multicluster-scheduler': 'disabled' } } }, clusterTarget, 'NamespaceNotEnabled'],
    ['the namespace object of another namespace', proxy('a'), enabled('b'), clusterTarget, 'NamespaceNotEnabled'],
    ['a pod that is not elected', proxy('a', { 'multicluster.admiralty.io/sourcepod-manifest': '{}' }), enabled('a'), targetOf('a'), 'NotAProxy'],
    ['a pod without a source manifest', proxy('a', { 'multicluster.admiralty.io/elect': '' }), enabled('a'), targetOf('a'), 'NotAProxy'],
    // The admission policy judges only pods with the label: one elected by an update lacks it.
    ['an elected pod with a manifest but without our label', proxy('a', undefined, {}), enabled('a'), targetOf('a'), 'NotAProxy'],
    ['an elected pod with a manifest and our label set to another value', proxy('a', undefined, { 'multicluster.admiralty.io/has-finalizer': 'yes' }), enabled('a'), targetOf('a'), 'NotAProxy'],
  ];
  for (const [why, pod, ns, target, reason] of cases) {
    it(`${reason ? 'refuses' : 'allows'} ${why}`, () => {
      const verdict = checkTenancy(pod, ns, target);
      if (reason === null) expect(verdict).to.deep.equal({ allowed: true });
      else expect(verdict).to.include({ allowed: false, reason }).and.to.have.property('message').that.is.a('string').and.not.empty;
    });
  }

  it('names the Target and both namespaces in the message', () => {
    const verdict = checkTenancy(proxy('b'), enabled('b'), targetOf('a'));
    expect(verdict.allowed === false && verdict.message).to.equal('Target a/t serves pods of namespace a only, not of b');
  });
});
