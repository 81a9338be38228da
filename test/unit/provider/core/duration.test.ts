import { expect } from 'chai';
import { parseGoDuration } from '../../../../provider/core/duration.js';
import { ValidationError } from '../../../../provider/core/errors.js';

describe('parseGoDuration', () => {
  const good: [string, number][] = [
    ['30s', 30_000],
    ['2m', 120_000],
    ['1h30m', 5_400_000],
    ['1.5h', 5_400_000],
    ['500ms', 500],
    ['0', 0],
    ['0s', 0],
    ['+10s', 10_000],
    ['1m0.5s', 60_500],
    ['1500us', 2],
    ['2562047h', 9_223_369_200_000],
  ];
  for (const [text, ms] of good) it(`reads ${text} as ${ms} ms`, () => expect(parseGoDuration(text)).to.equal(ms));
  const bad = ['', '30', 's', '10 s', '1d', '-5s', 'abc', '1m-2s', '5S', '2562048h', '1e3s'];
  for (const text of bad) it(`refuses "${text}"`, () => expect(() => parseGoDuration(text)).to.throw(ValidationError));
});
