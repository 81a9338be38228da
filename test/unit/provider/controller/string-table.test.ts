import { expect } from 'chai';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { StringTable } from '../../../../provider/controller/string-table.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Heap (bytes) still held after a full collection by what `make` returns. */
function heldBy(make: () => unknown): number {
  gc();
  gc();
  const before = process.memoryUsage().heapUsed;
  const kept = make();
  gc();
  gc();
  const bytes = process.memoryUsage().heapUsed - before;
  expect(kept).to.not.equal(undefined); // keeps `kept` alive through the reading
  return bytes;
}

describe('StringTable', () => {
  it('keeps one copy of a value that repeats, through generations turned over by values that never repeat', () => {
    const value = 'x'.repeat(4096);
    // Each object as a watch event brings it: parsed from its own text, so with its own copy.
    const texts = Array.from({ length: 1000 }, (_, i) => JSON.stringify({ metadata: { name: `pod-${i}` }, spec: { shared: value } }));
    const parseAll = (table?: StringTable) => texts.map((t) => (table ? table.internValues(JSON.parse(t)) : JSON.parse(t)));
    // 16 strings a generation: the names turn it over every 8 objects.
    const table = new StringTable({ maxEntries: 16 });
    const shared = heldBy(() => parseAll(table));
    const copies = heldBy(() => parseAll());
    expect(copies, 'a copy per object without the table').to.be.greaterThan(1000 * 4096);
    expect(shared, 'one copy with it').to.be.lessThan(copies / 4);
    expect(parseAll(table)).to.deep.equal(parseAll());
  });

  it('holds at most two generations, by count and by characters', () => {
    const table = new StringTable({ maxEntries: 100, maxChars: 1000 });
    for (let i = 0; i < 10_000; i++) table.intern(`value-${i}`);
    expect(table.size()).to.be.at.most(200);
    const long = new StringTable({ maxEntries: 100, maxChars: 1000 });
    for (let i = 0; i < 100; i++) long.intern(`${i}`.padEnd(300, '.'));
    // 300 characters each: a generation turns over at its fourth string.
    expect(long.size()).to.be.at.most(8);
  });

  it('leaves strings longer than maxLength out of the table', () => {
    const table = new StringTable({ maxLength: 10 });
    expect(table.intern('0123456789a')).to.equal('0123456789a');
    expect(table.size()).to.equal(0);
    expect(table.intern('0123456789')).to.equal('0123456789');
    expect(table.size()).to.equal(1);
  });

  it('interns the string values of objects and arrays at any depth, not uid and resourceVersion, and changes nothing else', () => {
    const table = new StringTable();
    const obj = {
      metadata: { name: 'a', namespace: 'ns', uid: 'u-1', resourceVersion: '7', labels: { app: 'web' } },
      spec: { tolerations: [{ key: 'k', operator: 'Exists', tolerationSeconds: 300 }], nodeName: null, args: ['x', 'y', 1, true, null, ['z']] },
    };
    const copy = structuredClone(obj);
    expect(table.internValues(obj)).to.equal(obj);
    expect(obj).to.deep.equal(copy);
    // a, ns, web, k, Exists, x, y, z: not u-1 nor 7.
    expect(table.size()).to.equal(8);
    table.internValues({ metadata: { name: 'a', uid: 'u-2' } });
    expect(table.size(), 'a value it holds is not added again').to.equal(8);
  });
});
