import { expect } from 'chai';
import type { V1Namespace, V1Pod } from '@kubernetes/client-node';
import { PLACEMENT_POLICY_ANNOTATION } from '../../../provider/core/keys.js';
import { groupPlacements, placementGroup, placementPolicyOf, type PolicyChoice } from '../../../scheduler/placement-policy.js';
import { proxy } from '../../support/pods.js';

const A = PLACEMENT_POLICY_ANNOTATION;
const spread = { kind: 'spread' } as const;

/** Pod `p`, of ReplicaSet `rs` when `owner` says which. */
function pod(annotations?: Record<string, string>, owner?: { uid: string; controller?: boolean }): V1Pod {
  return proxy({ namespace: 'ns', annotations, spec: {}, owner: owner && { name: 'rs', uid: owner.uid, controller: owner.controller } });
}
function namespace(annotations?: Record<string, string>): V1Namespace {
  return { metadata: { name: 'ns', annotations } };
}

describe('scheduler: placementPolicyOf', () => {
  const cases: [string, V1Pod, V1Namespace | undefined, PolicyChoice][] = [
    ['no annotation anywhere: the default', pod(), namespace(), { policy: spread, from: 'default' }],
    ['no namespace known: the default', pod(), undefined, { policy: spread, from: 'default' }],
    ["the pod's", pod({ [A]: 'pack' }), namespace(), { policy: { kind: 'pack' }, from: 'pod' }],
    ["the namespace's", pod(), namespace({ [A]: 'burst' }), { policy: { kind: 'burst' }, from: 'namespace' }],
    ["the pod's wins", pod({ [A]: 'spread' }), namespace({ [A]: 'pack' }), { policy: spread, from: 'pod' }],
    [
      'an invalid pod value: the default, said',
      pod({ [A]: 'Pack' }),
      namespace({ [A]: 'burst' }),
      { policy: spread, from: 'default', invalid: { from: 'pod', message: `${A} "Pack" on the pod is not one of spread, pack, burst: placed by spread` } },
    ],
    [
      'an invalid namespace value',
      pod(),
      namespace({ [A]: ' pack' }),
      { policy: spread, from: 'default', invalid: { from: 'namespace', message: `${A} " pack" on namespace ns is not one of spread, pack, burst: placed by spread` } },
    ],
    [
      'an empty value is invalid too',
      pod({ [A]: '' }),
      namespace(),
      { policy: spread, from: 'default', invalid: { from: 'pod', message: `${A} "" on the pod is not one of spread, pack, burst: placed by spread` } },
    ],
  ];
  for (const [name, p, ns, want] of cases) {
    it(name, () => expect(placementPolicyOf(p, ns, spread)).to.deep.equal(want));
  }

  it('quotes at most 64 characters of a hostile value, escaped', () => {
    const hostile = `\u001b[31m${'x'.repeat(10_000)}\n`;
    const choice = placementPolicyOf(pod({ [A]: hostile }), undefined, spread);
    expect(choice.policy).to.deep.equal(spread);
    const message = choice.invalid!.message;
    expect(message.length).to.be.below(250);
    expect(message).not.to.match(/[\u0000-\u001f]/);
    expect(message).to.contain('\\u001b[31mxxx');
    expect(message).to.contain('…"');
  });
});

describe('scheduler: placementGroup', () => {
  it('is the controller, by UID', () => {
    expect(placementGroup(pod(undefined, { uid: 'u1', controller: true }))).to.equal('controller/u1');
  });
  it('is the namespace for a pod without a controller', () => {
    expect(placementGroup(pod())).to.equal('namespace/ns');
    expect(placementGroup(pod(undefined, { uid: 'u1' }))).to.equal('namespace/ns');
  });
});

describe('scheduler: groupPlacements', () => {
  /** A proxy of ReplicaSet `rs` (or of none), bound to `node` when given. */
  function proxyOf(uid: string, o: { rs?: string; node?: string; phase?: string; deleting?: boolean } = {}): V1Pod {
    return proxy({
      namespace: 'ns',
      uid,
      spec: {},
      owner: o.rs ? { name: 'rs', uid: o.rs } : undefined,
      deletedAt: o.deleting ? new Date(0) : undefined,
      nodeName: o.node,
      phase: o.phase ?? (o.node ? 'Running' : 'Pending'),
    });
  }
  const targetOf = (node: string) => ({ 'vn-c1': 'Target/ns/c1', 'vn-c2': 'Target/ns/c2' })[node];

  it('counts the bound pods of the same group, then those being bound, and nothing else', () => {
    const me = proxyOf('me', { rs: 'a' });
    const proxies = [
      me,
      proxyOf('bound-1', { rs: 'a', node: 'vn-c1' }),
      proxyOf('bound-2', { rs: 'a', node: 'vn-c2' }),
      proxyOf('other-group', { rs: 'b', node: 'vn-c1' }),
      proxyOf('bare', { node: 'vn-c1' }),
      proxyOf('done', { rs: 'a', node: 'vn-c1', phase: 'Succeeded' }),
      proxyOf('leaving', { rs: 'a', node: 'vn-c1', deleting: true }),
      proxyOf('real-node', { rs: 'a', node: 'worker-1' }),
      proxyOf('pending', { rs: 'a' }),
    ];
    const placing = [
      { proxy: proxyOf('pending', { rs: 'a' }), targetKey: 'Target/ns/c2' },
      // The cache shows it bound already: the cache wins.
      { proxy: proxyOf('bound-1', { rs: 'a' }), targetKey: 'Target/ns/c2' },
      { proxy: proxyOf('other-placing', { rs: 'b' }), targetKey: 'Target/ns/c2' },
    ];
    expect(Object.fromEntries(groupPlacements(me, proxies, targetOf, placing))).to.deep.equal({
      'bound-1': 'Target/ns/c1',
      'bound-2': 'Target/ns/c2',
      pending: 'Target/ns/c2',
    });
  });

  it('groups the bare pods of a namespace together', () => {
    const me = proxyOf('me');
    expect([...groupPlacements(me, [proxyOf('bare', { node: 'vn-c2' }), proxyOf('owned', { rs: 'a', node: 'vn-c1' })], targetOf, []).keys()]).to.deep.equal(['bare']);
  });
});
