import { expect } from 'chai';
import type { V1Pod, V1PodCondition } from '@kubernetes/client-node';
import { ConditionWrites } from '../../../../provider/writers/proxy-writes.js';
import { pod } from '../../../support/pods.js';

const proxyAt = (uid: string, resourceVersion?: string): V1Pod => pod({ name: uid, namespace: 'apps', uid, resourceVersion });
const cond = (message: string): V1PodCondition => ({ type: 'multicluster.admiralty.io/TargetReachable', status: 'False', reason: 'TargetUnreachable', message });

describe('ConditionWrites', () => {
  it('holds a write while the cache shows the version it was made over, for the same condition only', () => {
    const writes = new ConditionWrites();
    let pass = writes.begin('k');
    expect(pass.inFlight(proxyAt('a', '1'), cond('m'))).to.equal(false);
    pass.wrote(proxyAt('a', '1'), cond('m'));
    pass.end();

    pass = writes.begin('k');
    expect(pass.inFlight(proxyAt('a', '1'), cond('m'))).to.equal(true);
    expect(pass.inFlight(proxyAt('a', '1'), cond('another message')), 'another condition').to.equal(false);
    pass.end();
    pass = writes.begin('k');
    expect(pass.inFlight(proxyAt('a', '2'), cond('m')), 'a newer proxy').to.equal(false);
    pass.end();
    expect(writes.size, 'dropped once a pass no longer needs it').to.equal(0);
  });

  it('keeps passes of different keys apart, forgets a key, and remembers nothing of a proxy without a version', () => {
    const writes = new ConditionWrites();
    const k = writes.begin('k');
    k.wrote(proxyAt('a', '1'), cond('m'));
    k.wrote(proxyAt('b'), cond('m'));
    k.end();
    const other = writes.begin('other');
    expect(other.inFlight(proxyAt('a', '1'), cond('m'))).to.equal(false);
    other.end();
    expect(writes.size).to.equal(1);
    writes.forget('k');
    expect(writes.size).to.equal(0);
  });
});
