import { expect } from 'chai';
import type { V1Pod } from '@kubernetes/client-node';
import { releaseOurFinalizers } from '../../../../provider/model/finalizers.js';
import { pod } from '../../../support/pods.js';

const withFinalizers = (finalizers?: string[]): V1Pod => pod({ namespace: 'ns', finalizers });

describe('releaseOurFinalizers', () => {
  it('takes out every finalizer under our prefix, guarded by the list seen', () => {
    const finalizers = ['multicluster.admiralty.io/delegate', 'example.com/keep', 'multicluster.admiralty.io/follow'];
    expect(releaseOurFinalizers(withFinalizers(finalizers))).to.deep.equal({
      kept: ['example.com/keep'],
      patch: [
        { op: 'test', path: '/metadata/finalizers', value: finalizers },
        { op: 'replace', path: '/metadata/finalizers', value: ['example.com/keep'] },
      ],
    });
  });

  it('also tests the UID when given one', () => {
    const { patch } = releaseOurFinalizers(withFinalizers(['multicluster.admiralty.io/delegate']), { uid: 'u1' });
    expect(patch?.[0]).to.deep.equal({ op: 'test', path: '/metadata/uid', value: 'u1' });
    expect(patch).to.have.length(3);
  });

  it('writes nothing when none of ours is there', () => {
    expect(releaseOurFinalizers(withFinalizers(['example.com/keep']))).to.deep.equal({ kept: ['example.com/keep'] });
    expect(releaseOurFinalizers(withFinalizers())).to.deep.equal({ kept: [] });
  });
});
