import { expect } from 'chai';
import type { V1ClusterRoleBinding } from '@kubernetes/client-node';
import { admiraltyBindingMismatch } from '../../../../provider/model/admiralty-binding.js';

const RBAC = 'rbac.authorization.k8s.io';
const OWNER = { kind: 'Source' as const, name: 'cluster1', uid: 'src-uid' };
const SUBJECTS = [
  { kind: 'ServiceAccount', name: 'cluster1', namespace: 'default' },
  { kind: 'User', apiGroup: RBAC, name: 'spiffe://c1' },
];
const OURS: V1ClusterRoleBinding = {
  metadata: { name: 'admiralty-source-default-cluster1-cluster-summary-viewer' },
  roleRef: { apiGroup: RBAC, kind: 'ClusterRole', name: 'multicluster-scheduler-cluster-summary-viewer' },
  subjects: SUBJECTS,
};
/** What Admiralty 0.17's source controller leaves, as read back from the API server. */
const ADMIRALTY: V1ClusterRoleBinding = {
  metadata: {
    name: 'admiralty-source-default-cluster1-cluster-summary-viewer',
    uid: 'crb-uid',
    ownerReferences: [{ apiVersion: 'multicluster.admiralty.io/v1alpha1', kind: 'Source', name: 'cluster1', uid: 'src-uid', controller: true, blockOwnerDeletion: true }],
  },
  roleRef: { apiGroup: RBAC, kind: 'ClusterRole', name: 'admiralty-cluster-summary-viewer' },
  subjects: SUBJECTS,
};

describe('admiraltyBindingMismatch', () => {
  it("recognizes Admiralty's binding for the same Source", () => {
    expect(admiraltyBindingMismatch(ADMIRALTY, OURS, OWNER)).to.equal(undefined);
  });

  const owner = ADMIRALTY.metadata!.ownerReferences![0]!;
  const cases: Array<[string, V1ClusterRoleBinding, string]> = [
    ['a label (someone else’s, or ours for another Source)', { ...ADMIRALTY, metadata: { ...ADMIRALTY.metadata, labels: { team: 'a' } } }, 'it has labels (team)'],
    [
      'an annotation (e.g. applied with kubectl)',
      { ...ADMIRALTY, metadata: { ...ADMIRALTY.metadata, annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{}' } } },
      'it has annotations (kubectl.kubernetes.io/last-applied-configuration)',
    ],
    ['no owner', { ...ADMIRALTY, metadata: { ...ADMIRALTY.metadata, ownerReferences: [] } }, 'its owner is not this Source (uid src-uid)'],
    ['an earlier Source of the same name', { ...ADMIRALTY, metadata: { ...ADMIRALTY.metadata, ownerReferences: [{ ...owner, uid: 'old' }] } }, 'its owner is not this Source (uid src-uid)'],
    ['a ClusterSource of the same name', { ...ADMIRALTY, metadata: { ...ADMIRALTY.metadata, ownerReferences: [{ ...owner, kind: 'ClusterSource' }] } }, 'its owner is not this Source (uid src-uid)'],
    ['another group', { ...ADMIRALTY, metadata: { ...ADMIRALTY.metadata, ownerReferences: [{ ...owner, apiVersion: 'example.com/v1' }] } }, 'its owner is not this Source (uid src-uid)'],
    ['a non-controller reference', { ...ADMIRALTY, metadata: { ...ADMIRALTY.metadata, ownerReferences: [{ ...owner, controller: false }] } }, 'its owner is not this Source (uid src-uid)'],
    ['a second owner', { ...ADMIRALTY, metadata: { ...ADMIRALTY.metadata, ownerReferences: [owner, { ...owner, name: 'x', uid: 'x' }] } }, 'its owner is not this Source (uid src-uid)'],
    [
      'another role',
      { ...ADMIRALTY, roleRef: { apiGroup: RBAC, kind: 'ClusterRole', name: 'cluster-admin' } },
      'its roleRef is ClusterRole/cluster-admin, not ClusterRole/admiralty-cluster-summary-viewer',
    ],
    [
      'a Role of that name',
      { ...ADMIRALTY, roleRef: { apiGroup: RBAC, kind: 'Role', name: 'admiralty-cluster-summary-viewer' } },
      'its roleRef is Role/admiralty-cluster-summary-viewer, not ClusterRole/admiralty-cluster-summary-viewer',
    ],
    [
      'Admiralty’s other role',
      { ...ADMIRALTY, roleRef: { apiGroup: RBAC, kind: 'ClusterRole', name: 'admiralty-source' } },
      'its roleRef is ClusterRole/admiralty-source, not ClusterRole/admiralty-cluster-summary-viewer',
    ],
    ['an extra subject', { ...ADMIRALTY, subjects: [...SUBJECTS, { kind: 'Group', apiGroup: RBAC, name: 'system:authenticated' }] }, 'its subjects are not those of this Source'],
  ];
  for (const [what, existing, reason] of cases) {
    it(`refuses a binding with ${what}`, () => {
      expect(admiraltyBindingMismatch(existing, OURS, OWNER)).to.equal(reason);
    });
  }

  it('refuses when ours binds a role Admiralty has no counterpart for', () => {
    expect(admiraltyBindingMismatch(ADMIRALTY, { ...OURS, roleRef: { ...OURS.roleRef, name: 'edit' } }, OWNER)).to.equal('Admiralty has no counterpart of ClusterRole/edit');
  });
});
