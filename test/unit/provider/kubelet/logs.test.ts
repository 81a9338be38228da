import { expect } from 'chai';
import { parseLogQuery, podLogQuery } from '../../../../provider/kubelet/logs.js';

describe('parseLogQuery', () => {
  const base = { follow: false, previous: false, timestamps: false };
  const ok: Array<[string, object]> = [
    ['', base],
    ['follow=true&previous=1&timestamps=true', { follow: true, previous: true, timestamps: true }],
    ['tailLines=0', { ...base, tailLines: 0 }],
    ['tailLines=10&limitBytes=500', { ...base, tailLines: 10, limitBytes: 500 }],
    ['sinceSeconds=30', { ...base, sinceSeconds: 30 }],
    ['sinceTime=2024-05-01T10:00:00Z', { ...base, sinceTime: '2024-05-01T10:00:00Z' }],
    ['sinceTime=2024-05-01T10:00:00.123%2B02:00', { ...base, sinceTime: '2024-05-01T10:00:00.123+02:00' }],
    ['follow=false', base],
  ];
  for (const [q, want] of ok) {
    it(`accepts "${q}"`, () => expect(parseLogQuery(new URLSearchParams(q))).to.deep.equal(want));
  }
  const bad: Array<[string, string]> = [
    ['follow=maybe', 'follow'],
    ['tailLines=-1', 'tailLines'],
    ['tailLines=1.5', 'tailLines'],
    ['limitBytes=0', 'limitBytes'],
    ['sinceSeconds=0', 'sinceSeconds'],
    ['sinceSeconds=abc', 'sinceSeconds'],
    ['sinceTime=yesterday', 'sinceTime'],
    ['sinceTime=2024-05-01T10:00:00Z&sinceSeconds=5', 'at most one'],
  ];
  for (const [q, mention] of bad) {
    it(`rejects "${q}"`, () => {
      const r = parseLogQuery(new URLSearchParams(q));
      expect(r).to.be.a('string').that.contains(mention);
    });
  }
  it('keeps zero values when building the upstream query', () => {
    expect(podLogQuery('c', { ...base, tailLines: 0, follow: true }).toString()).to.equal('container=c&follow=true&tailLines=0');
  });
});
