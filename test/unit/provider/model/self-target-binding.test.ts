import { expect } from 'chai';
import { ValidationError } from '../../../../provider/core/errors.js';
import { buildSelfTargetBinding, holdSelfBindingPatch, releaseSelfBindingPatch, selfTargetBindingName, subjectOfUser } from '../../../../provider/model/self-target-binding.js';

const SA = { kind: 'ServiceAccount', namespace: 'admiralty', name: 'admiralty' };

describe('subjectOfUser', () => {
  const cases: [string, object][] = [
    ['system:serviceaccount:admiralty:admiralty', SA],
    ['system:serviceaccount:ops:provider-2', { kind: 'ServiceAccount', namespace: 'ops', name: 'provider-2' }],
    ['jane@example.com', { kind: 'User', apiGroup: 'rbac.authorization.k8s.io', name: 'jane@example.com' }],
    // Not a well-formed service account name: bound as the user it is, never guessed into an SA.
    ['system:serviceaccount:only-namespace', { kind: 'User', apiGroup: 'rbac.authorization.k8s.io', name: 'system:serviceaccount:only-namespace' }],
  ];
  for (const [user, subject] of cases) {
    it(`${user} -> ${JSON.stringify(subject)}`, () => expect(subjectOfUser(user)).to.deep.equal(subject));
  }
  it('refuses an empty user name', () => expect(() => subjectOfUser('')).to.throw(ValidationError));
});

describe('buildSelfTargetBinding', () => {
  it('binds the source ClusterRole in the namespace of a self Target only, owned by the Target', () => {
    const b = buildSelfTargetBinding({ kind: 'Target', namespace: 'team-a', name: 'home' }, 'uid-1', SA);
    expect(b.kind).to.equal('RoleBinding');
    expect(b.object).to.deep.equal({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: {
        name: 'admiralty-self-target-home',
        namespace: 'team-a',
        labels: { 'multicluster.admiralty.io/target-namespace': 'team-a', 'multicluster.admiralty.io/target-name': 'home' },
        finalizers: ['multicluster.admiralty.io/self-target'],
        ownerReferences: [{ apiVersion: 'multicluster.admiralty.io/v1alpha1', kind: 'Target', name: 'home', uid: 'uid-1', controller: true }],
      },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'multicluster-scheduler-source' },
      subjects: [SA],
    });
  });

  it('binds it cluster-wide for a self ClusterTarget, owned by the ClusterTarget', () => {
    const b = buildSelfTargetBinding({ kind: 'ClusterTarget', namespace: '', name: 'home' }, 'uid-2', SA);
    expect(b.kind).to.equal('ClusterRoleBinding');
    expect(b.object.metadata).to.deep.equal({
      name: 'admiralty-self-cluster-target-home',
      labels: { 'multicluster.admiralty.io/cluster-target-name': 'home' },
      finalizers: ['multicluster.admiralty.io/self-target'],
      ownerReferences: [{ apiVersion: 'multicluster.admiralty.io/v1alpha1', kind: 'ClusterTarget', name: 'home', uid: 'uid-2', controller: true }],
    });
    expect(b.object.roleRef.name).to.equal('multicluster-scheduler-source');
  });

  it('keeps names valid for long target names', () => {
    const name = selfTargetBindingName({ kind: 'ClusterTarget', namespace: '', name: 'x'.repeat(253) });
    expect(name.length).to.be.at.most(253);
  });

  it('refuses a Target without uid (no owner reference could be set)', () => {
    expect(() => buildSelfTargetBinding({ kind: 'Target', namespace: 'a', name: 'b' }, undefined, SA)).to.throw(ValidationError);
  });
});

describe('the finalizer of a self binding', () => {
  const F = 'multicluster.admiralty.io/self-target';

  it('is added to a binding made before it existed, only on that object and finalizer list', () => {
    expect(holdSelfBindingPatch({ uid: 'u' })).to.deep.equal([
      { op: 'test', path: '/metadata/uid', value: 'u' },
      { op: 'add', path: '/metadata/finalizers', value: [F] },
    ]);
    expect(holdSelfBindingPatch({ uid: 'u', finalizers: ['other/x'] })).to.deep.equal([
      { op: 'test', path: '/metadata/uid', value: 'u' },
      { op: 'test', path: '/metadata/finalizers', value: ['other/x'] },
      { op: 'replace', path: '/metadata/finalizers', value: ['other/x', F] },
    ]);
  });

  it('is not added where it is, nor to a binding being deleted', () => {
    expect(holdSelfBindingPatch({ uid: 'u', finalizers: [F] })).to.equal(undefined);
    expect(holdSelfBindingPatch({ uid: 'u', deletionTimestamp: '2026-01-01T00:00:00Z' })).to.equal(undefined);
  });

  it('is released keeping the finalizers of others, touching nothing but finalizers (no bind check on such a patch)', () => {
    expect(releaseSelfBindingPatch({ uid: 'u', finalizers: ['other/x', F] })).to.deep.equal([
      { op: 'test', path: '/metadata/uid', value: 'u' },
      { op: 'test', path: '/metadata/finalizers', value: ['other/x', F] },
      { op: 'replace', path: '/metadata/finalizers', value: ['other/x'] },
    ]);
    expect(releaseSelfBindingPatch({ uid: 'u', finalizers: [F] })).to.deep.equal([
      { op: 'test', path: '/metadata/uid', value: 'u' },
      { op: 'test', path: '/metadata/finalizers', value: [F] },
      { op: 'remove', path: '/metadata/finalizers' },
    ]);
    expect(releaseSelfBindingPatch({ uid: 'u', finalizers: ['other/x'] })).to.equal(undefined);
  });
});
