import { expect } from 'chai';
import sinon from 'sinon';
import { AuthenticationV1Api, AuthorizationV1Api, KubeConfig } from '@kubernetes/client-node';
import type { IncomingMessage } from 'node:http';
import { FakeClock } from '../../../../provider/core/clock.js';
import { createKubeletAuthorizer, kubeletRequestAttributes } from '../../../../provider/kubelet/auth.js';

function kc(): KubeConfig {
  const k = new KubeConfig();
  k.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:1' }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return k;
}

const req = (authorization?: string) => ({ headers: authorization ? { authorization } : {}, socket: {} }) as unknown as IncomingMessage;

describe('createKubeletAuthorizer', () => {
  afterEach(() => sinon.restore());

  it('maps methods to verbs and every pod route to nodes/proxy', () => {
    expect(kubeletRequestAttributes('POST', 'n')).to.deep.equal({ verb: 'create', resource: 'nodes', subresource: 'proxy', name: 'n' });
    expect(kubeletRequestAttributes('GET', 'n').verb).to.equal('get');
    // exec/attach/port-forward need create whatever the method (a WebSocket upgrade is a GET).
    expect(kubeletRequestAttributes('GET', 'n', true).verb).to.equal('create');
  });

  it('authenticates bearer tokens with TokenReview and caches the answer', async () => {
    const review = sinon.stub(AuthenticationV1Api.prototype, 'createTokenReview').resolves({
      spec: {},
      status: { authenticated: true, user: { username: 'system:serviceaccount:kube-system:metrics', groups: ['system:serviceaccounts'] } },
    });
    const a = createKubeletAuthorizer({ kubeConfig: kc(), clock: new FakeClock(0) });
    expect(await a.authenticate(req())).to.equal(null);
    const u = await a.authenticate(req('Bearer abc'));
    expect(u).to.include({ name: 'system:serviceaccount:kube-system:metrics' });
    await a.authenticate(req('Bearer abc'));
    expect(review.callCount).to.equal(1);
    expect(review.firstCall.args[0].body.spec.token).to.equal('abc');
  });

  it('authorizes with SubjectAccessReview, caching allow 10 s and deny 5 s', async () => {
    const clock = new FakeClock(0);
    const sar = sinon.stub(AuthorizationV1Api.prototype, 'createSubjectAccessReview');
    sar.resolves({ spec: {}, status: { allowed: false } });
    const a = createKubeletAuthorizer({ kubeConfig: kc(), clock });
    const user = { name: 'bob', groups: ['dev'] };
    const attrs = kubeletRequestAttributes('POST', 'admiralty-cluster-c1');
    expect(await a.authorize(user, attrs)).to.equal(false);
    expect(sar.firstCall.args[0].body.spec).to.deep.include({
      user: 'bob',
      groups: ['dev'],
      resourceAttributes: { verb: 'create', resource: 'nodes', subresource: 'proxy', name: 'admiralty-cluster-c1' },
    });
    sar.resolves({ spec: {}, status: { allowed: true } });
    clock.advance(4_000);
    expect(await a.authorize(user, attrs)).to.equal(false);
    clock.advance(2_000);
    expect(await a.authorize(user, attrs)).to.equal(true);
    clock.advance(9_000);
    expect(await a.authorize(user, attrs)).to.equal(true);
    expect(sar.callCount).to.equal(2);
  });

  it('keys cached decisions by user extra (canonically), groups and uid, not only by name', async () => {
    const sar = sinon.stub(AuthorizationV1Api.prototype, 'createSubjectAccessReview');
    // The authorizer allows only the identity whose extra carries the right scope.
    sar.callsFake(async (param) => ({ spec: {}, status: { allowed: (param.body.spec.extra?.scopes ?? []).includes('exec') } }));
    const a = createKubeletAuthorizer({ kubeConfig: kc(), clock: new FakeClock(0) });
    const attrs = kubeletRequestAttributes('POST', 'n', true);
    const scoped = { name: 'bob', groups: ['dev'], uid: 'u1', extra: { scopes: ['exec', 'logs'], team: ['a'] } };
    expect(await a.authorize(scoped, attrs)).to.equal(true);
    // Same name, groups and uid, other extra: must not reuse the allow.
    expect(await a.authorize({ ...scoped, extra: { scopes: ['logs'] } }, attrs)).to.equal(false);
    expect(await a.authorize({ ...scoped, extra: undefined }, attrs)).to.equal(false);
    // The same extra in another order is the same identity: cached.
    const calls = sar.callCount;
    expect(await a.authorize({ ...scoped, extra: { team: ['a'], scopes: ['logs', 'exec'] } }, attrs)).to.equal(true);
    expect(sar.callCount).to.equal(calls);
    // Other uid or groups: asked again.
    await a.authorize({ ...scoped, uid: 'u2' }, attrs);
    await a.authorize({ ...scoped, groups: ['dev', 'ops'] }, attrs);
    expect(sar.callCount).to.equal(calls + 2);
  });
});
