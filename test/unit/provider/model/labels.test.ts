import { expect } from 'chai';
import { ValidationError } from '../../../../provider/core/errors.js';
import { parseGoRegexp, parseNoPrefixRegexp, prefixLabels } from '../../../../provider/model/labels.js';

const P = 'multicluster.admiralty.io/';

describe('labels', () => {
  describe('prefixLabels', () => {
    const cases: [string, Record<string, string> | undefined, RegExp | undefined, Record<string, string>][] = [
      ['undefined', undefined, undefined, {}],
      ['plain key', { app: 'web' }, undefined, { [`${P}app`]: 'web' }],
      ['domain replaced', { 'example.com/tier': 'front' }, undefined, { [`${P}tier`]: 'front' }],
      ['already prefixed stays', { [`${P}x`]: '1' }, undefined, { [`${P}x`]: '1' }],
      ['regexp on key', { app: 'web', tier: 'db' }, /^app=/, { app: 'web', [`${P}tier`]: 'db' }],
      ['regexp on value', { app: 'web', tier: 'db' }, /=db$/, { [`${P}app`]: 'web', tier: 'db' }],
      ['regexp is a search, not anchored', { 'x.io/keep-me': 'v' }, /keep/, { 'x.io/keep-me': 'v' }],
      ['prefixed key wins a collision', { app: 'a', [`${P}app`]: 'b' }, undefined, { [`${P}app`]: 'b' }],
      ['first sorted key wins a collision', { 'y.io/app': 'y', 'x.io/app': 'x' }, undefined, { [`${P}app`]: 'x' }],
      [
        "Kueue's queue name, priority class and pod group stay unprefixed; its other labels are prefixed",
        { 'kueue.x-k8s.io/queue-name': 'q', 'kueue.x-k8s.io/priority-class': 'high', 'kueue.x-k8s.io/pod-group-name': 'g', 'kueue.x-k8s.io/managed': 'true', 'kueue.x-k8s.io/podset': 'main' },
        undefined,
        { 'kueue.x-k8s.io/queue-name': 'q', 'kueue.x-k8s.io/priority-class': 'high', 'kueue.x-k8s.io/pod-group-name': 'g', [`${P}managed`]: 'true', [`${P}podset`]: 'main' },
      ],
      ['a queue-name under another domain is prefixed', { 'example.com/queue-name': 'q' }, undefined, { [`${P}queue-name`]: 'q' }],
    ];
    for (const [why, input, re, want] of cases) {
      it(why, () => expect(prefixLabels(input, re)).to.deep.equal(want));
    }
    it('matches a user regexp in linear time: (a+)+$ against a 63-character label value returns at once', function () {
      // A backtracking engine takes 2^n steps here (1.5 s at 26 characters, doubling with each);
      // mocha's timeout is the bound, so a regression hangs and fails instead of passing slowly.
      this.timeout(5000);
      const labels = { x: `${'a'.repeat(62)}!`, y: 'a'.repeat(63) };
      expect(prefixLabels(labels, parseNoPrefixRegexp('(a+)+$'))).to.deep.equal({ [`${P}x`]: labels.x, y: labels.y });
    });
    it('does not modify its input', () => {
      const input = { app: 'web' };
      prefixLabels(input);
      expect(input).to.deep.equal({ app: 'web' });
    });
  });

  describe('parseNoPrefixRegexp / parseGoRegexp', () => {
    const ok: [string | undefined | null, string, boolean][] = [
      [undefined, 'x', false],
      [null, 'x', false],
      ['^app=', 'app=web', true],
      ['^app=', 'tier=app', false],
      ['(?i)^APP=', 'app=web', true],
      ['', 'anything', true],
      ['(?U)a+', 'aaa', true],
      ['\\pL+=', 'app=web', true],
    ];
    for (const [src, subject, matches] of ok) {
      it(`${JSON.stringify(src)} on ${subject} -> ${matches}`, () => {
        const re = parseNoPrefixRegexp(src);
        expect(re?.test(subject) ?? false).to.equal(matches);
      });
    }
    for (const bad of ['(', '[a-', 'a{2,1}', '(?<=a)b', '(a)\\1', '((a{1000}){1000}){1000}', 'a'.repeat(5000)]) {
      it(`rejects ${JSON.stringify(bad.slice(0, 40))} with a ValidationError`, () => {
        expect(() => parseGoRegexp(bad)).to.throw(ValidationError);
      });
    }
  });
});
