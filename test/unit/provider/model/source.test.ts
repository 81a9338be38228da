import { expect } from 'chai';
import { ValidationError } from '../../../../provider/core/errors.js';
import { buildSourceObjects, sourceOwnerLabels, sourceOwnerSelector } from '../../../../provider/model/source.js';
import type { ClusterSource, Source } from '../../../../provider/model/types.js';

const P = 'multicluster.admiralty.io/';
const sourceOwner = { apiVersion: 'multicluster.admiralty.io/v1alpha1', kind: 'Source', name: 'cluster1', uid: 'src-uid', controller: true, blockOwnerDeletion: true };
const clusterOwner = { ...sourceOwner, kind: 'ClusterSource', uid: 'csrc-uid' };

function source(spec: Source['spec'], namespace = 'default'): Source {
  return { metadata: { name: 'cluster1', namespace, uid: 'src-uid' }, spec };
}
function clusterSource(spec: ClusterSource['spec']): ClusterSource {
  return { metadata: { name: 'cluster1', uid: 'csrc-uid' }, spec };
}

describe('buildSourceObjects: Source', () => {
  const objs = buildSourceObjects(source({ serviceAccountName: 'cluster1', userName: 'spiffe://c1' }), 'Source');
  const labels = { [`${P}source-namespace`]: 'default', [`${P}source-name`]: 'cluster1' };
  const subjects = [
    { kind: 'ServiceAccount', name: 'cluster1', namespace: 'default' },
    { kind: 'User', apiGroup: 'rbac.authorization.k8s.io', name: 'spiffe://c1' },
  ];

  it('makes the ServiceAccount, owned by the Source', () => {
    expect(objs.serviceAccount).to.deep.equal({
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: 'cluster1', namespace: 'default', labels, ownerReferences: [sourceOwner] },
    });
  });
  it('binds the source role in the namespace', () => {
    expect(objs.roleBinding).to.deep.equal({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'admiralty-source-cluster1', namespace: 'default', labels, ownerReferences: [sourceOwner] },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'multicluster-scheduler-source' },
      subjects,
    });
  });
  it('binds the summary viewer cluster-wide, by labels only (no namespaced owner)', () => {
    expect(objs.clusterRoleBindings).to.deep.equal([
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: { name: 'admiralty-source-default-cluster1-cluster-summary-viewer', labels },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'multicluster-scheduler-cluster-summary-viewer' },
        subjects,
      },
    ]);
  });
  it('hashes the binding name for a hyphenated namespace, as Admiralty', () => {
    const o = buildSourceObjects(source({ userName: 'u' }, 'my-ns'), 'Source');
    expect(o.clusterRoleBindings[0]!.metadata!.name).to.equal('admiralty-source-my-ns-cluster1-cluster-summary-viewer-a5116f3f32');
  });

  const subjectCases: [string, Source['spec'], string[], boolean][] = [
    ['user only', { userName: 'u' }, ['User'], false],
    ['service account only', { serviceAccountName: 'sa' }, ['ServiceAccount'], true],
    ['nothing', {}, [], false],
  ];
  for (const [why, spec, kinds, hasSa] of subjectCases) {
    it(`subjects: ${why}`, () => {
      const o = buildSourceObjects(source(spec), 'Source');
      expect(o.serviceAccount !== undefined).to.equal(hasSa);
      if (kinds.length === 0) {
        expect(o.roleBinding).to.equal(undefined);
        expect(o.clusterRoleBindings).to.deep.equal([]);
      } else {
        expect(o.roleBinding!.subjects!.map((s) => s.kind)).to.deep.equal(kinds);
        expect(o.clusterRoleBindings[0]!.subjects!.map((s) => s.kind)).to.deep.equal(kinds);
      }
    });
  }
});

describe('buildSourceObjects: ClusterSource', () => {
  const objs = buildSourceObjects(clusterSource({ serviceAccount: { name: 'sa', namespace: 'admiralty' }, userName: 'u' }), 'ClusterSource');
  const labels = { [`${P}cluster-source-name`]: 'cluster1' };
  it('makes the ServiceAccount in its namespace, owned by the ClusterSource', () => {
    expect(objs.serviceAccount!.metadata).to.deep.equal({ name: 'sa', namespace: 'admiralty', labels, ownerReferences: [clusterOwner] });
  });
  it('makes no RoleBinding and two owned ClusterRoleBindings', () => {
    expect(objs.roleBinding).to.equal(undefined);
    expect(objs.clusterRoleBindings.map((b) => [b.metadata!.name, b.roleRef.name])).to.deep.equal([
      ['admiralty-cluster-source-cluster1', 'multicluster-scheduler-source'],
      ['admiralty-cluster-source-cluster1-cluster-summary-viewer', 'multicluster-scheduler-cluster-summary-viewer'],
    ]);
    for (const b of objs.clusterRoleBindings) {
      expect(b.metadata!.ownerReferences).to.deep.equal([clusterOwner]);
      expect(b.metadata!.labels).to.deep.equal(labels);
      expect(b.subjects!.map((s) => s.kind)).to.deep.equal(['ServiceAccount', 'User']);
    }
  });
});

describe('buildSourceObjects: invalid', () => {
  const cases: [string, () => unknown][] = [
    ['Source without uid', () => buildSourceObjects({ metadata: { name: 'a', namespace: 'b' }, spec: {} }, 'Source')],
    ['Source without namespace', () => buildSourceObjects({ metadata: { name: 'a', uid: 'u' }, spec: {} }, 'Source')],
    ['ClusterSource SA without namespace', () => buildSourceObjects(clusterSource({ serviceAccount: { name: 'sa', namespace: '' } }), 'ClusterSource')],
  ];
  for (const [why, run] of cases) {
    it(why, () => expect(run).to.throw(ValidationError));
  }
});

describe('sourceOwnerSelector', () => {
  it('selects what the labels mark', () => {
    expect(sourceOwnerSelector('Source', 'default', 'cluster1')).to.equal(`${P}source-name=cluster1,${P}source-namespace=default`);
    expect(sourceOwnerSelector('ClusterSource', '', 'c')).to.equal(`${P}cluster-source-name=c`);
  });
  it('keeps label values valid for long names', () => {
    const v = sourceOwnerLabels('Source', 'ns', 'n'.repeat(200))[`${P}source-name`]!;
    expect(v.length).to.be.at.most(63);
  });
});
