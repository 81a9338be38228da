import { expect } from 'chai';
import { KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { ClusterCaches } from '../../../../provider/controller/cluster-caches.js';
import { realClock } from '../../../../provider/core/clock.js';
import { silentLogger } from '../../../../provider/core/logger.js';

describe('ClusterCaches', () => {
  const caches = () => new ClusterCaches({ name: 'source', kubeConfig: new KubeConfig() }, { logger: silentLogger(), clock: realClock });
  const list = async () => ({ items: [] as V1Pod[] });
  const transform = (p: V1Pod) => p;

  it('gives two requests for the same collection and selectors one informer, and different selectors another', () => {
    const c = caches();
    const a = c.informer<V1Pod>({ name: 'proxies', resource: '/api/v1/pods', list, labelSelector: 'x=true', transform });
    const b = c.informer<V1Pod>({ name: 'proxies', resource: '/api/v1/pods', list, labelSelector: 'x=true', transform });
    const other = c.informer<V1Pod>({ name: 'pods', resource: '/api/v1/pods', list });
    expect(b).to.equal(a);
    expect(other).to.not.equal(a);
    expect(c.all()).to.have.length(2);
  });

  it('refuses a request for a cached collection with another transform', () => {
    const c = caches();
    c.informer<V1Pod>({ name: 'proxies', resource: '/api/v1/pods', list, transform });
    expect(() => c.informer<V1Pod>({ name: 'proxies', resource: '/api/v1/pods', list, transform: (p) => p })).to.throw(/another transform/);
  });

  it('counts a cache as read on every replica once any request says so', () => {
    const c = caches();
    c.informer<V1Pod>({ name: 'proxies', resource: '/api/v1/pods', list });
    expect(c.everyReplica()).to.have.length(0);
    c.informer<V1Pod>({ name: 'proxies', resource: '/api/v1/pods', list, everyReplica: true });
    expect(c.everyReplica()).to.have.length(1);
  });

  it('refuses new caches once frozen', () => {
    const c = caches();
    c.freeze();
    expect(() => c.informer<V1Pod>({ name: 'proxies', resource: '/api/v1/pods', list })).to.throw(/after the caches of source started/);
  });
});
