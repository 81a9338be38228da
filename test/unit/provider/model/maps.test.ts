import { expect } from 'chai';
import { stringMapEquals, stringMapMergePatch } from '../../../../provider/model/maps.js';
import { equalNormalized, normalJson } from '../../../../provider/model/normalize.js';

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
    expect(normalJson({ b: [], a: { t: new Date('2024-01-01T00:00:00Z'), u: [null, {}, 1] }, c: null, d: {}, e: undefined })).to.equal('{"a":{"t":"2024-01-01T00:00:00.000Z","u":[1]}}');
    expect(normalJson({ z: 1, 'a"b': 'x\n', m: [{ y: true, x: false }] })).to.equal('{"a\\"b":"x\\n","m":[{"x":false,"y":true}],"z":1}');
    expect(normalJson({ a: {}, b: [[], null] })).to.equal('null');
    expect(normalJson(undefined)).to.equal('null');
    expect(equalNormalized({ t: '2024-01-01T01:00:00+01:00' }, { t: new Date('2024-01-01T00:00:00Z') })).to.equal(true);
    expect(equalNormalized({ a: 1, b: { c: [] } }, { b: {}, a: 1 })).to.equal(true);
    expect(equalNormalized([1, 2], [2, 1])).to.equal(false);
    expect(equalNormalized({ a: '1' }, { a: 1 })).to.equal(false);
    expect(normalJson('2024-01-01T00:00:00.5Z')).to.equal('"2024-01-01T00:00:00.500Z"');
    expect(normalJson('2024-1-01T00:00:00Z')).to.equal('"2024-1-01T00:00:00Z"');
    expect(normalJson('pod-2024-01-01T00:00:00Z')).to.equal('"pod-2024-01-01T00:00:00Z"');
    expect(normalJson('2024-13-45T99:00:00Z'), 'not a date, though shaped like one').to.equal('"2024-13-45T99:00:00Z"');
  });

  it('gives the text JSON.stringify gives of the value with its empties dropped and its keys sorted', () => {
    // A pod status as the apiserver writes it, and the same with its keys in another order.
    const status = {
      phase: 'Running',
      conditions: [{ type: 'Ready', status: 'True', lastProbeTime: null, lastTransitionTime: '2026-11-29T05:22:04Z' }],
      hostIP: '10.0.0.1',
      podIPs: [{ ip: '10.201.0.243' }],
      startTime: '2026-11-29T05:22:03Z',
      containerStatuses: [{ name: 'app', state: { running: { startedAt: '2026-11-29T05:22:04Z' } }, lastState: {}, ready: true, restartCount: 0, image: 'nginx', imageID: '' }],
      qosClass: 'Burstable',
    };
    const reordered = Object.fromEntries(Object.entries(status).reverse());
    expect(normalJson(status)).to.equal(normalJson(reordered));
    expect(JSON.parse(normalJson(status))).to.deep.equal({
      conditions: [{ lastTransitionTime: '2026-11-29T05:22:04.000Z', status: 'True', type: 'Ready' }],
      containerStatuses: [{ image: 'nginx', imageID: '', name: 'app', ready: true, restartCount: 0, state: { running: { startedAt: '2026-11-29T05:22:04.000Z' } } }],
      hostIP: '10.0.0.1',
      phase: 'Running',
      podIPs: [{ ip: '10.201.0.243' }],
      qosClass: 'Burstable',
      startTime: '2026-11-29T05:22:03.000Z',
    });
  });
});
