import { expect } from 'chai';
import sinon from 'sinon';
import { FakeClock } from '../../../provider/core/clock.js';
import { PARENT_CLUSTER_NAME_LABEL } from '../../../provider/core/keys.js';
import { silentLogger } from '../../../provider/core/logger.js';
import { targetPodGroupName } from '../../../provider/model/pod-group.js';
import { TargetPodGroups } from '../../../scheduler/target-pod-groups.js';
import { alreadyExists, apiError, notFound } from '../../support/api-errors.js';
import { fakeTarget } from '../../support/targets.js';

describe('scheduler: TargetPodGroups', () => {
  const NAME = targetPodGroupName('train', 'c1');
  function setup() {
    const { target } = fakeTarget('t');
    const custom = {
      createNamespacedCustomObject: sinon.stub().resolves({}),
      getNamespacedCustomObject: sinon.stub(),
      deleteNamespacedCustomObject: sinon.stub().resolves({}),
      patchNamespacedCustomObject: sinon.stub().resolves({}),
    };
    (target as unknown as { custom: typeof custom }).custom = custom;
    const clock = new FakeClock(0);
    return { target, custom, clock, groups: new TargetPodGroups({ sourceClusterName: 'c1', clock, logger: silentLogger() }) };
  }
  const ours = (minCount: number) => ({ metadata: { name: NAME, namespace: 'ns', uid: 'pg-uid', labels: { [PARENT_CLUSTER_NAME_LABEL]: 'c1' } }, spec: { schedulingPolicy: { gang: { minCount } } } });

  it('makes the PodGroup of a gang once however many members ask at once, a gang of their share, labelled ours', async () => {
    const { target, custom, groups } = setup();
    const names = await Promise.all([1, 2, 3].map(() => groups.ensure(target, 'ns', 'train', 3)));
    expect(names).to.deep.equal([NAME, NAME, NAME]);
    expect(custom.createNamespacedCustomObject.callCount).to.equal(1);
    const body = custom.createNamespacedCustomObject.firstCall.args[0].body;
    expect(body.spec).to.deep.equal({ schedulingPolicy: { gang: { minCount: 3 } } });
    expect(body.metadata.labels).to.deep.equal({ [PARENT_CLUSTER_NAME_LABEL]: 'c1' });
  });

  it('uses an existing one of ours with that minCount, remakes one of ours with another, and leaves one not ours alone', async () => {
    const a = setup();
    a.custom.createNamespacedCustomObject.rejects(alreadyExists());
    a.custom.getNamespacedCustomObject.resolves(ours(3));
    expect(await a.groups.ensure(a.target, 'ns', 'train', 3)).to.equal(NAME);
    expect(a.custom.deleteNamespacedCustomObject.callCount).to.equal(0);

    const b = setup();
    b.custom.createNamespacedCustomObject.onFirstCall().rejects(alreadyExists());
    b.custom.getNamespacedCustomObject.resolves(ours(5));
    expect(await b.groups.ensure(b.target, 'ns', 'train', 3)).to.equal(NAME);
    expect(b.custom.deleteNamespacedCustomObject.firstCall.args[0].body).to.deep.equal({ preconditions: { uid: 'pg-uid' } });
    expect(b.custom.createNamespacedCustomObject.callCount).to.equal(2);

    const c = setup();
    c.custom.createNamespacedCustomObject.rejects(alreadyExists());
    c.custom.getNamespacedCustomObject.resolves({ ...ours(3), metadata: { name: NAME, namespace: 'ns', labels: {} } });
    expect(await c.groups.ensure(c.target, 'ns', 'train', 3)).to.equal(undefined);
  });

  it('gives none in a target that does not serve PodGroups (404) or lets us make none (403), and does not ask it again for a minute', async () => {
    for (const err of [notFound(), apiError(403, 'Forbidden')]) {
      const { target, custom, clock, groups } = setup();
      custom.createNamespacedCustomObject.rejects(err);
      expect(await groups.ensure(target, 'ns', 'train', 3)).to.equal(undefined);
      expect(await groups.ensure(target, 'ns', 'other', 2)).to.equal(undefined);
      expect(custom.createNamespacedCustomObject.callCount).to.equal(1);
      clock.advance(60_001);
      custom.createNamespacedCustomObject.resolves({});
      expect(await groups.ensure(target, 'ns', 'train', 3)).to.equal(NAME);
    }
  });

  it('makes a delegate an owner of the PodGroup by a strategic merge patch, and only logs a failure', async () => {
    const { target, custom, groups } = setup();
    await groups.owned(target, NAME, { metadata: { name: 'd1', namespace: 'ns', uid: 'd1-uid' } });
    expect(custom.patchNamespacedCustomObject.firstCall.args[0].body).to.deep.equal({ metadata: { ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: 'd1', uid: 'd1-uid' }] } });
    custom.patchNamespacedCustomObject.rejects(notFound());
    await groups.owned(target, NAME, { metadata: { name: 'd2', namespace: 'ns', uid: 'd2-uid' } });
  });
});
