import { expect } from 'chai';
import sinon from 'sinon';
import { ApiException, AuthenticationV1Api, AuthorizationV1Api, RbacAuthorizationV1Api, type V1RoleBinding } from '@kubernetes/client-node';
import { buildSelfTargetBinding } from '../../../../provider/model/self-target-binding.js';
import type { TargetRef } from '../../../../provider/model/types.js';
import { SelfTargetBindings } from '../../../../provider/reconcilers/self-target-bindings.js';
import { notFound } from '../../../support/api-errors.js';

const REF: TargetRef = { kind: 'Target', namespace: 'team-a', name: 'home' };
const CT: TargetRef = { kind: 'ClusterTarget', namespace: '', name: 'home' };
const ME = 'system:serviceaccount:admiralty:admiralty';

function setup(existing?: V1RoleBinding) {
  const rbac = sinon.createStubInstance(RbacAuthorizationV1Api);
  rbac.readNamespacedRoleBinding.callsFake(async () => existing ?? Promise.reject(notFound()));
  rbac.readClusterRoleBinding.rejects(notFound());
  rbac.createNamespacedRoleBinding.callsFake(async ({ body }) => body);
  rbac.createClusterRoleBinding.callsFake(async ({ body }) => body);
  rbac.deleteNamespacedRoleBinding.resolves({});
  const authentication = sinon.createStubInstance(AuthenticationV1Api);
  authentication.createSelfSubjectReview.resolves({ status: { userInfo: { username: ME } } });
  const authorization = sinon.createStubInstance(AuthorizationV1Api);
  authorization.createSelfSubjectAccessReview.resolves({ spec: {}, status: { allowed: true } });
  return { rbac, authentication, authorization, bindings: new SelfTargetBindings({ rbac, authentication, authorization }) };
}

/** Our binding as the apiserver returns it, for `subject`. */
function ours(subject = { kind: 'ServiceAccount', namespace: 'admiralty', name: 'admiralty' }): V1RoleBinding {
  const rb = buildSelfTargetBinding(REF, 'uid-1', subject).object as V1RoleBinding;
  return { ...rb, metadata: { ...rb.metadata, uid: 'rb-uid' } };
}

describe('SelfTargetBindings', () => {
  afterEach(() => sinon.restore());

  it('creates the RoleBinding of a self Target for the identity the apiserver reports, asking who it is once', async () => {
    const w = setup();
    expect(await w.bindings.ensure(REF, 'uid-1')).to.equal(true);
    expect(await w.bindings.ensure(CT, 'uid-2')).to.equal(true);
    sinon.assert.calledOnce(w.authentication.createSelfSubjectReview);
    const rb = w.rbac.createNamespacedRoleBinding.firstCall.args[0];
    expect(rb.namespace).to.equal('team-a');
    expect(rb.body.subjects).to.deep.equal([{ kind: 'ServiceAccount', namespace: 'admiralty', name: 'admiralty' }]);
    expect(w.rbac.createClusterRoleBinding.firstCall.args[0].body.roleRef.name).to.equal('multicluster-scheduler-source');
  });

  it('leaves a binding as it should be alone', async () => {
    const w = setup(ours());
    expect(await w.bindings.ensure(REF, 'uid-1')).to.equal(false);
    sinon.assert.notCalled(w.rbac.createNamespacedRoleBinding);
    sinon.assert.notCalled(w.rbac.deleteNamespacedRoleBinding);
  });

  it('replaces our binding whose subject is outdated (roleRef and subjects are rewritten whole)', async () => {
    const w = setup(ours({ kind: 'ServiceAccount', namespace: 'old', name: 'provider' }));
    expect(await w.bindings.ensure(REF, 'uid-1')).to.equal(true);
    expect(w.rbac.deleteNamespacedRoleBinding.firstCall.args[0]).to.deep.include({ name: 'admiralty-self-target-home', namespace: 'team-a', body: { preconditions: { uid: 'rb-uid' } } });
    // Released too, or the new binding could not take the name.
    sinon.assert.callOrder(w.rbac.deleteNamespacedRoleBinding, w.rbac.patchNamespacedRoleBinding, w.rbac.createNamespacedRoleBinding);
  });

  it('never replaces or deletes a same-name binding that is not ours', async () => {
    const theirs: V1RoleBinding = {
      metadata: { name: 'admiralty-self-target-home', namespace: 'team-a', uid: 'x' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'admin' },
    };
    const w = setup(theirs);
    const err = await w.bindings.ensure(REF, 'uid-1').then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).to.match(/not ours/);
    await w.bindings.remove(REF);
    sinon.assert.notCalled(w.rbac.deleteNamespacedRoleBinding);
    sinon.assert.notCalled(w.rbac.createNamespacedRoleBinding);
  });

  it('removes our binding with a UID precondition, then releases its finalizer, and is done when there is none', async () => {
    const w = setup(ours());
    await w.bindings.remove(REF);
    expect(w.rbac.deleteNamespacedRoleBinding.firstCall.args[0]).to.deep.include({ name: 'admiralty-self-target-home', namespace: 'team-a', body: { preconditions: { uid: 'rb-uid' } } });
    const release = w.rbac.patchNamespacedRoleBinding.firstCall.args[0];
    expect(release).to.deep.include({ name: 'admiralty-self-target-home', namespace: 'team-a' });
    expect(release.body).to.deep.include({ op: 'test', path: '/metadata/uid', value: 'rb-uid' });
    expect(release.body).to.deep.include({ op: 'remove', path: '/metadata/finalizers' });
    sinon.assert.callOrder(w.rbac.deleteNamespacedRoleBinding, w.rbac.patchNamespacedRoleBinding);
    await setup().bindings.remove(REF);
  });

  it('keeps our binding that someone else deleted (it grants until released) while the target is self, and releases it with the target', async () => {
    const deleted = ours();
    deleted.metadata!.deletionTimestamp = new Date();
    const w = setup(deleted);
    expect(await w.bindings.ensure(REF, 'uid-1')).to.equal(false);
    sinon.assert.notCalled(w.rbac.patchNamespacedRoleBinding);
    sinon.assert.notCalled(w.rbac.createNamespacedRoleBinding);
    await w.bindings.remove(REF);
    sinon.assert.notCalled(w.rbac.deleteNamespacedRoleBinding);
    sinon.assert.calledOnce(w.rbac.patchNamespacedRoleBinding);
  });

  it('gives a binding of ours made before the finalizer existed the finalizer, and nothing else', async () => {
    const legacy = ours();
    delete legacy.metadata!.finalizers;
    const w = setup(legacy);
    expect(await w.bindings.ensure(REF, 'uid-1')).to.equal(false);
    expect(w.rbac.patchNamespacedRoleBinding.firstCall.args[0].body).to.deep.include({ op: 'add', path: '/metadata/finalizers', value: ['multicluster.admiralty.io/self-target'] });
    sinon.assert.notCalled(w.rbac.createNamespacedRoleBinding);
    sinon.assert.notCalled(w.rbac.deleteNamespacedRoleBinding);
  });

  it('has nothing to remove where it may not read bindings (no self role installed), but says so when it must bind', async () => {
    const w = setup();
    const forbidden = new ApiException(403, 'Forbidden', '{"kind":"Status","reason":"Forbidden","message":"cannot get rolebindings"}', {});
    w.rbac.readNamespacedRoleBinding.rejects(forbidden);
    await w.bindings.remove(REF);
    sinon.assert.notCalled(w.rbac.deleteNamespacedRoleBinding);
    const err = await w.bindings.ensure(REF, 'uid-1').then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).to.match(/reading the binding admiralty-self-target-home/);
  });

  it('asks the apiserver whether the provider may create pods where the target reaches', async () => {
    const w = setup();
    w.authorization.createSelfSubjectAccessReview.onSecondCall().resolves({ spec: {}, status: { allowed: false } });
    expect(await w.bindings.allowed(REF)).to.equal(true);
    expect(await w.bindings.allowed(CT)).to.equal(false);
    expect(w.authorization.createSelfSubjectAccessReview.firstCall.args[0].body.spec.resourceAttributes).to.deep.equal({ verb: 'create', resource: 'pods', namespace: 'team-a' });
    expect(w.authorization.createSelfSubjectAccessReview.secondCall.args[0].body.spec.resourceAttributes).to.deep.equal({ verb: 'create', resource: 'pods', namespace: '' });
  });
});
