import { expect } from 'chai';
import { stringMapEquals, stringMapMergePatch } from '../../../../provider/model/maps.js';
import { equalNormalized, normalizeForCompare } from '../../../../provider/model/normalize.js';

describe('maps', () => {
  const eq: [Record<string, string> | undefined, Record<string, string> | undefined, boolean][] = [
    [undefined, {}, true],
    [{ a: '1' }, { a: '1' }, true],
    [{ a: '1' }, { a: '2' }, false],
    [{ a: '1' }, { b: '1' }, false],
    [{ a: '1' }, { a: '1', b: '2' }, false],
  ];
  for (const [a, b, want] of eq) {
    it(`stringMapEquals ${JSON.stringify(a)} ${JSON.stringify(b)} -> ${want}`, () => expect(stringMapEquals(a, b)).to.equal(want));
  }
  const patches: [Record<string, string> | undefined, Record<string, string>, Record<string, string | null> | null][] = [
    [{ a: '1' }, { a: '1' }, null],
    [undefined, { a: '1' }, { a: '1' }],
    [{ a: '1', b: '2' }, { a: '3' }, { a: '3', b: null }],
  ];
  for (const [cur, want, patch] of patches) {
    it(`stringMapMergePatch ${JSON.stringify(cur)} -> ${JSON.stringify(want)}`, () => expect(stringMapMergePatch(cur, want)).to.deep.equal(patch));
  }
});

describe('normalize', () => {
  it('normalizes dates, drops empties, sorts keys', () => {
    expect(normalizeForCompare({ b: [], a: { t: new Date('2024-01-01T00:00:00Z') }, c: null, d: {} })).to.deep.equal({
      a: { t: '2024-01-01T00:00:00.000Z' },
    });
    expect(equalNormalized({ t: '2024-01-01T01:00:00+01:00' }, { t: new Date('2024-01-01T00:00:00Z') })).to.equal(true);
    expect(equalNormalized([1, 2], [2, 1])).to.equal(false);
    expect(normalizeForCompare('2024-01-01T00:00:00.5Z')).to.equal('2024-01-01T00:00:00.500Z');
    expect(normalizeForCompare('2024-1-01T00:00:00Z')).to.equal('2024-1-01T00:00:00Z');
    expect(normalizeForCompare('pod-2024-01-01T00:00:00Z')).to.equal('pod-2024-01-01T00:00:00Z');
  });
});
