import type { V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { compareResourceVersions, proxiesCountedBy, summaryCounts } from '../../../../provider/model/counted.js';
import { pod } from '../../../support/pods.js';

const podAt = (name: string, rv: string, nodeName?: string, phase = 'Running'): V1Pod => pod({ name, resourceVersion: rv, uid: `uid-${name}`, spec: { nodeName }, status: { phase } });

describe('counted: which delegates a target summary counts', () => {
  describe('compareResourceVersions', () => {
    const cases: [string | undefined, string | undefined, -1 | 0 | 1 | undefined][] = [
      ['9', '10', -1],
      ['10', '9', 1],
      ['123', '123', 0],
      ['123', '124', -1],
      ['99999999999999999999', '100000000000000000000', -1],
      ['010', '10', undefined],
      ['0', '1', undefined],
      ['', '1', undefined],
      ['1a', '1', undefined],
      ['-1', '1', undefined],
      [undefined, '1', undefined],
      ['1'.repeat(41), '1', undefined],
    ];
    for (const [a, b, want] of cases) it(`${JSON.stringify(a)} against ${JSON.stringify(b)}: ${want}`, () => expect(compareResourceVersions(a, b)).to.equal(want));
  });

  describe('summaryCounts', () => {
    it('counts a bound, unfinished delegate once the summary has reached its version', () => {
      expect(summaryCounts({ podsResourceVersion: '100' }, podAt('d', '100', 'n1'))).to.equal(true);
      expect(summaryCounts({ podsResourceVersion: '101' }, podAt('d', '100', 'n1'))).to.equal(true);
      expect(summaryCounts({ podsResourceVersion: '99' }, podAt('d', '100', 'n1'))).to.equal(false);
    });
    it('never counts a delegate without a node, or a finished one', () => {
      expect(summaryCounts({ podsResourceVersion: '200' }, podAt('d', '100'))).to.equal(false);
      expect(summaryCounts({ podsResourceVersion: '200' }, podAt('d', '100', 'n1', 'Succeeded'))).to.equal(false);
    });
    it('cannot tell for a summary without a version, or versions that do not compare', () => {
      expect(summaryCounts({}, podAt('d', '100', 'n1'))).to.equal(undefined);
      expect(summaryCounts(undefined, podAt('d', '100', 'n1'))).to.equal(undefined);
      expect(summaryCounts({ podsResourceVersion: 'x' }, podAt('d', '100', 'n1'))).to.equal(undefined);
    });
  });

  describe('proxiesCountedBy', () => {
    const proxies = [podAt('counted', '1', 'vn'), podAt('late', '1', 'vn'), podAt('unbound', '1', 'vn', 'Pending'), podAt('lost', '1', 'vn'), podAt('done', '1', 'vn', 'Succeeded')];
    const delegates = new Map([
      ['counted', podAt('d-counted', '50', 'n1', 'Pending')],
      ['late', podAt('d-late', '60', 'n1')],
      ['unbound', podAt('d-unbound', '40')],
    ]);
    const delegateOf = (p: V1Pod) => delegates.get(p.metadata!.name!);
    const names = (ps: V1Pod[]) => ps.map((p) => p.metadata!.name);

    it("takes the proxies whose delegates the summary counts, whatever the proxies' phase, and none whose delegate is not cached", () => {
      // 'late' is Running, but the summary has not reached its delegate: its room is still in free.
      expect(names(proxiesCountedBy(proxies, { podsResourceVersion: '55' }, delegateOf))).to.deep.equal(['counted']);
      expect(names(proxiesCountedBy(proxies, { podsResourceVersion: '60' }, delegateOf))).to.deep.equal(['counted', 'late']);
    });

    it('falls back on the phase for a delegate whose version does not compare', () => {
      const odd = (p: V1Pod) => ({ ...delegateOf(p)!, metadata: { resourceVersion: 'x' } });
      expect(names(proxiesCountedBy(proxies.slice(0, 3), { podsResourceVersion: '55' }, odd))).to.deep.equal(['counted', 'late']);
    });

    it('takes the Running proxies when the summary does not say its version, or no delegate cache is wired', () => {
      expect(names(proxiesCountedBy(proxies, {}, delegateOf))).to.deep.equal(['counted', 'late', 'lost']);
      expect(names(proxiesCountedBy(proxies, { podsResourceVersion: '55' }))).to.deep.equal(['counted', 'late', 'lost']);
    });
  });
});
