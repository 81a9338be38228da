import { expect } from 'chai';
import type { V1ConfigMap, V1Secret } from '@kubernetes/client-node';
import { ValidationError } from '../../../../provider/core/errors.js';
import { buildConfigMapCopy, buildSecretCopy, copyNeedsRecreate, copyNeedsUpdate, copyRefusal, isCopyOf, isOwnedCopy } from '../../../../provider/model/follow.js';

const meta = {
  name: 'cfg',
  namespace: 'team',
  uid: 'cm-uid',
  resourceVersion: '7',
  labels: { app: 'web', 'multicluster.admiralty.io/has-finalizer': 'true' },
  annotations: { note: 'x' },
  ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: 'p', uid: 'u' }],
  finalizers: ['multicluster.admiralty.io/follow'],
  managedFields: [{}],
};
const parentLabels = { app: 'web', 'multicluster.admiralty.io/parent-uid': 'cm-uid', 'multicluster.admiralty.io/parent-cluster-name': 'c1' };
const parentAnnotations = { note: 'x', 'multicluster.admiralty.io/parent-name': 'cfg', 'multicluster.admiralty.io/parent-namespace': 'team' };

describe('buildConfigMapCopy', () => {
  it('copies content and marks the parent', () => {
    const src: V1ConfigMap = { metadata: meta, data: { a: '1' }, binaryData: { b: 'AA==' }, immutable: true };
    expect(buildConfigMapCopy(src, { sourceClusterName: 'c1' })).to.deep.equal({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'cfg', namespace: 'team', labels: parentLabels, annotations: parentAnnotations },
      data: { a: '1' },
      binaryData: { b: 'AA==' },
      immutable: true,
    });
  });
  it('takes the name it is given (the per-source copy name)', () => {
    expect(buildConfigMapCopy({ metadata: meta }, { sourceClusterName: 'c1', name: 'cfg-0123456789' }).metadata).to.deep.equal({
      name: 'cfg-0123456789',
      namespace: 'team',
      labels: parentLabels,
      annotations: parentAnnotations,
    });
  });
  it('refuses a source without uid', () => {
    expect(() => buildConfigMapCopy({ metadata: { name: 'x', namespace: 'y' } }, { sourceClusterName: 'c1' })).to.throw(ValidationError);
  });
});

describe('buildSecretCopy', () => {
  const cases: [string, V1Secret, Partial<V1Secret>][] = [
    ['opaque', { metadata: meta, type: 'Opaque', data: { a: 'MQ==' } }, { type: 'Opaque', data: { a: 'MQ==' } }],
    ['stringData folded into data', { metadata: meta, data: { a: 'MQ==' }, stringData: { b: 'hi' } }, { data: { a: 'MQ==', b: 'aGk=' } }],
  ];
  for (const [why, src, want] of cases) {
    it(why, () => {
      const copy = buildSecretCopy(src, { sourceClusterName: 'c1' });
      expect(copy).to.deep.include(want);
      expect(copy.metadata).to.deep.equal({ name: 'cfg', namespace: 'team', labels: parentLabels, annotations: parentAnnotations });
      expect(copy).to.not.have.property('stringData');
    });
  }
});

describe('copyRefusal', () => {
  it("refuses this cluster's own credentials, a ServiceAccount token or a bootstrap token, and nothing else", () => {
    const of = (type?: string): V1Secret => ({ metadata: meta, type, data: { token: 'dA==' } });
    expect(copyRefusal('secret', of('kubernetes.io/service-account-token'))).to.match(/^secret team\/cfg is of type kubernetes.io\/service-account-token, a credential for this cluster/);
    expect(copyRefusal('secret', of('bootstrap.kubernetes.io/token'))).to.match(/a credential for this cluster/);
    for (const type of [undefined, 'Opaque', 'kubernetes.io/dockerconfigjson', 'kubernetes.io/tls', 'kubernetes.io/basic-auth']) expect(copyRefusal('secret', of(type)), type).to.equal(undefined);
    expect(copyRefusal('configmap', { metadata: meta, data: { type: 'kubernetes.io/service-account-token' } })).to.equal(undefined);
  });
});

describe('copy ownership and updates', () => {
  const own = (labels: Record<string, string>) => ({ metadata: { labels } });
  const owned: [string, Record<string, string>, string | undefined, boolean][] = [
    ['ours', { 'multicluster.admiralty.io/parent-uid': 'u', 'multicluster.admiralty.io/parent-cluster-name': 'c1' }, undefined, true],
    ['ours with the right parent', { 'multicluster.admiralty.io/parent-uid': 'u', 'multicluster.admiralty.io/parent-cluster-name': 'c1' }, 'u', true],
    ['another parent', { 'multicluster.admiralty.io/parent-uid': 'u', 'multicluster.admiralty.io/parent-cluster-name': 'c1' }, 'v', false],
    ['another cluster', { 'multicluster.admiralty.io/parent-uid': 'u', 'multicluster.admiralty.io/parent-cluster-name': 'c2' }, undefined, false],
    ['foreign (kube-root-ca.crt)', {}, undefined, false],
  ];
  for (const [why, labels, uid, want] of owned) {
    it(`isOwnedCopy: ${why}`, () => expect(isOwnedCopy(own(labels), 'c1', uid)).to.equal(want));
  }

  const copyOf = (cluster: string, parent: string) => ({
    metadata: { labels: { 'multicluster.admiralty.io/parent-uid': 'u', 'multicluster.admiralty.io/parent-cluster-name': cluster }, annotations: { 'multicluster.admiralty.io/parent-name': parent } },
  });
  const copies: [string, { metadata: object }, boolean][] = [
    ['our copy of it', copyOf('c1', 'cfg'), true],
    ['our copy of another object (a hash collision, or an earlier copy of an object named like it)', copyOf('c1', 'other'), false],
    ["another source's", copyOf('c2', 'cfg'), false],
    ['foreign', { metadata: {} }, false],
  ];
  for (const [why, obj, want] of copies) {
    it(`isCopyOf: ${why}`, () => expect(isCopyOf(obj, 'c1', 'cfg')).to.equal(want));
  }

  const desired = buildConfigMapCopy({ metadata: meta, data: { a: '1' } }, { sourceClusterName: 'c1' });
  const stored = { ...JSON.parse(JSON.stringify(desired)), metadata: { ...desired.metadata, uid: 'remote', resourceVersion: '3' } };
  const updates: [string, V1ConfigMap, boolean, boolean][] = [
    ['same (server fields ignored)', stored, false, false],
    ['data differs', { ...stored, data: { a: '2' } }, true, false],
    ['labels differ', { ...stored, metadata: { ...stored.metadata, labels: { x: 'y' } } }, true, false],
    ['immutable with different data', { ...stored, immutable: true, data: { a: '2' } }, true, true],
    ['immutable, desired mutable', { ...stored, immutable: true }, true, true],
  ];
  for (const [why, existing, update, recreate] of updates) {
    it(`copyNeedsUpdate/Recreate: ${why}`, () => {
      expect(copyNeedsUpdate(existing, desired)).to.equal(update);
      expect(copyNeedsRecreate(existing, desired)).to.equal(recreate);
    });
  }
  it('recreates a Secret whose type changes', () => {
    const d = buildSecretCopy({ metadata: meta, type: 'Opaque', data: {} }, { sourceClusterName: 'c1' });
    expect(copyNeedsRecreate({ ...d, type: 'kubernetes.io/tls' }, d)).to.equal(true);
  });
});
