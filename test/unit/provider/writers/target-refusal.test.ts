import { expect } from 'chai';
import sinon from 'sinon';
import type { TargetClient } from '../../../../provider/clusters/target-client.js';
import { NotDelegatedError } from '../../../../provider/core/errors.js';
import { refusalOf } from '../../../../provider/writers/target-refusal.js';
import { apiError } from '../../../support/api-errors.js';
import { fakeTarget } from '../../../support/targets.js';

const USER = 'system:serviceaccount:default:c1';

/** A ClusterTarget whose reviews answer as told (`allowed` undefined, `user` null: that review fails). */
function reviewingTarget(allowed: boolean | undefined, user: string | null = USER) {
  const createSelfSubjectAccessReview = sinon.stub();
  if (allowed === undefined) createSelfSubjectAccessReview.rejects(new Error('connection reset'));
  else createSelfSubjectAccessReview.resolves({ status: { allowed } });
  const createSelfSubjectReview = user === null ? sinon.stub().rejects(apiError(404, 'NotFound')) : sinon.stub().resolves({ status: { userInfo: { username: user } } });
  const target: TargetClient = { ...fakeTarget('c2').target, authorization: { createSelfSubjectAccessReview }, authentication: { createSelfSubjectReview } };
  return { target, createSelfSubjectAccessReview, createSelfSubjectReview };
}

describe('refusalOf', () => {
  it('asks the target, after a 403, whether its authorizer lets us make that very write, and who we are there', async () => {
    const { target, createSelfSubjectAccessReview } = reviewingTarget(false);
    // A copy's 403 comes wrapped by the code that made the request.
    const err = new Error('copying configmap apps/conf-0123456789 to c2', { cause: apiError(403, 'Forbidden') });
    const refusal = await refusalOf(target, { kind: 'configmap', namespace: 'apps', name: 'conf' }, err);
    expect(refusal).to.be.instanceOf(NotDelegatedError);
    expect(refusal!.reason).to.equal('SourceNotAuthorized');
    expect(refusal!.message).to.contain(`spec.userName "${USER}"`).and.contain('create a Source in namespace apps of that cluster').and.contain('or a ClusterSource');
    expect(refusal!.cause).to.equal(err);
    expect(createSelfSubjectAccessReview.firstCall.args[0].body.spec.resourceAttributes).to.deep.equal({ verb: 'create', resource: 'configmaps', namespace: 'apps' });
  });

  it("keeps the target's message when its authorizer allows the write (admission refused it)", async () => {
    const { target } = reviewingTarget(true);
    const refusal = await refusalOf(target, { kind: 'pod', namespace: 'apps' }, apiError(403, 'Forbidden', 'pods "web" is forbidden: violates PodSecurity "restricted:latest"'));
    expect({ reason: refusal!.reason, message: refusal!.message }).to.deep.equal({
      reason: 'DelegateForbidden',
      message: 'c2 refused to create the delegate: pods "web" is forbidden: violates PodSecurity "restricted:latest"',
    });
  });

  it("keeps the target's message when the reviews fail: they never hide the refusal", async () => {
    const { target } = reviewingTarget(undefined, null);
    const refusal = await refusalOf(target, { kind: 'pod', namespace: 'apps' }, apiError(403, 'Forbidden'));
    expect(refusal!.reason).to.equal('DelegateForbidden');
  });

  it('names no user the target would not name, and cuts the one it names to one printable line', async () => {
    expect((await refusalOf(reviewingTarget(false, null).target, { kind: 'pod', namespace: 'apps' }, apiError(403, 'Forbidden')))!.message).to.contain("the user of the ClusterTarget's kubeconfig");
    const odd = (await refusalOf(reviewingTarget(false, 'eve\n\u001b[31mroot').target, { kind: 'pod', namespace: 'apps' }, apiError(403, 'Forbidden')))!.message;
    expect(odd).to.not.match(/[\n\u001b]/);
  });

  it('asks nothing for other refusals, and leaves failures that are not refusals to the caller', async () => {
    const { target, createSelfSubjectAccessReview, createSelfSubjectReview } = reviewingTarget(false);
    expect((await refusalOf(target, { kind: 'pod', namespace: 'apps' }, apiError(404, 'NotFound')))!.reason).to.equal('TargetNamespaceMissing');
    expect((await refusalOf(target, { kind: 'pod', namespace: 'apps' }, apiError(422, 'Invalid')))!.reason).to.equal('DelegateInvalid');
    for (const err of [apiError(500, 'InternalError'), apiError(409, 'Conflict'), Object.assign(new Error('reset'), { code: 'ECONNRESET' })]) {
      expect(await refusalOf(target, { kind: 'pod', namespace: 'apps' }, err)).to.equal(undefined);
    }
    sinon.assert.notCalled(createSelfSubjectAccessReview);
    sinon.assert.notCalled(createSelfSubjectReview);
  });
});
