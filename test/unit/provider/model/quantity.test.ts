import { expect } from 'chai';
import { ValidationError } from '../../../../provider/core/errors.js';
import { formatQuantity, parseQuantity, quantityEquals, resourceListEquals } from '../../../../provider/model/quantity.js';

const G = 1_000_000_000n;

describe('quantity', () => {
  describe('parseQuantity (nano-units)', () => {
    const cases: [string | number, bigint][] = [
      ['0', 0n],
      ['1', G],
      [4, 4n * G],
      ['100m', 100_000_000n],
      ['1500m', 1_500_000_000n],
      ['0.5', 500_000_000n],
      ['.5', 500_000_000n],
      ['250u', 250_000n],
      ['5n', 5n],
      ['1k', 1000n * G],
      ['1M', 1_000_000n * G],
      ['2G', 2_000_000_000n * G],
      ['1T', 10n ** 12n * G],
      ['1P', 10n ** 15n * G],
      ['1E', 10n ** 18n * G],
      ['1Ki', 1024n * G],
      ['1Mi', 1048576n * G],
      ['1.5Gi', 1610612736n * G],
      ['1Ti', 2n ** 40n * G],
      ['1Pi', 2n ** 50n * G],
      ['1Ei', 2n ** 60n * G],
      ['1e3', 1000n * G],
      ['1E3', 1000n * G],
      ['12e-3', 12_000_000n],
      ['+3', 3n * G],
      ['-2', -2n * G],
      ['1e-12', 1n], // finer than a nano: rounded up
    ];
    for (const [input, want] of cases) {
      it(`${JSON.stringify(input)} -> ${want}`, () => expect(parseQuantity(input)).to.equal(want));
    }
    for (const bad of ['', 'abc', '1Q', '1 Gi', '1.2.3', 'Gi', '1e', '--1']) {
      it(`rejects ${JSON.stringify(bad)}`, () => expect(() => parseQuantity(bad)).to.throw(ValidationError));
    }

    // The suffix tables are plain objects: the names they inherit from Object.prototype are no suffix.
    for (const bad of ['12constructor', '1toString', '1__proto__', '1hasOwnProperty']) {
      it(`rejects ${JSON.stringify(bad)} as an unknown suffix`, () => expect(() => parseQuantity(bad)).to.throw(ValidationError, /unknown suffix/));
    }

    // A target's server writes its ClusterSummary, and a tenant a Target's burst capacity: an
    // exponent of millions made a bigint of millions of digits, seconds of the event loop.
    const MAX = ((1n << 63n) - 1n) * G;
    const capped: [string, bigint][] = [
      ['1e100000', MAX],
      ['-1e100000', -MAX],
      ['99999999999999999999Ei', MAX],
      ['9223372036854775807', MAX],
      ['9223372036854775806', MAX - G],
      ['0e999999999', 0n],
      ['1e-999999999', 1n],
      ['1e999999999', MAX],
    ];
    for (const [input, want] of capped) {
      it(`${input} -> ${want === MAX ? 'max' : want === -MAX ? '-max' : want} (at most 2^63-1 units, as the apiserver caps)`, () => expect(parseQuantity(input)).to.equal(want));
    }
    it('rejects a quantity longer than any the apiserver writes', () => {
      expect(() => parseQuantity('1'.repeat(100_000))).to.throw(ValidationError);
      expect(() => parseQuantity(`0.${'0'.repeat(100_000)}1`)).to.throw(ValidationError);
    });
  });

  describe('formatQuantity', () => {
    const cases: [bigint, string, string][] = [
      [4n * G, 'cpu', '4'],
      [1_500_000_000n, 'cpu', '1500m'],
      [5n, 'cpu', '5n'],
      [0n, 'cpu', '0'],
      [220n * G, 'pods', '220'],
      [2n * 2n ** 30n * G, 'memory', '2Gi'],
      [8039396n * 1024n * G, 'memory', '8039396Ki'],
      [1000n * G, 'memory', '1000'],
      [0n, 'memory', '0'],
      [1023n * G + 1n, 'ephemeral-storage', '1Ki'], // bytes rounded up
      [4n * 1048576n * G, 'hugepages-2Mi', '4Mi'],
      [3n * G, 'nvidia.com/gpu', '3'],
    ];
    for (const [nano, resource, want] of cases) {
      it(`${resource} ${nano} -> ${want}`, () => expect(formatQuantity(nano, resource)).to.equal(want));
    }
    it('round-trips', () => {
      for (const [q, r] of [
        ['1500m', 'cpu'],
        ['16Gi', 'memory'],
        ['110', 'pods'],
        ['123456789', 'memory'],
      ]) {
        expect(formatQuantity(parseQuantity(q!), r!)).to.equal(q);
      }
    });
  });

  describe('equality', () => {
    const cases: [string | undefined, string | undefined, boolean][] = [
      ['1Gi', '1073741824', true],
      ['4', '4000m', true],
      ['1k', '1000', true],
      ['1Ki', '1k', false],
      [undefined, undefined, true],
      ['1', undefined, false],
      ['bogus', 'bogus', true],
    ];
    for (const [a, b, want] of cases) {
      it(`${a} vs ${b} -> ${want}`, () => expect(quantityEquals(a, b)).to.equal(want));
    }
    it('compares resource lists by value and by key set', () => {
      expect(resourceListEquals({ cpu: '4', memory: '1Gi' }, { memory: '1073741824', cpu: '4000m' })).to.equal(true);
      expect(resourceListEquals({ cpu: '4' }, { cpu: '4', pods: '110' })).to.equal(false);
      expect(resourceListEquals(undefined, {})).to.equal(true);
    });
  });
});
