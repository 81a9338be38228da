import { expect } from 'chai';
import { perObject } from '../../../../provider/core/per-object.js';

describe('perObject', () => {
  it('computes once per object and hands back what it computed, for each memory of its own', () => {
    const seen: string[] = [];
    const lengthOf = perObject((o: { name: string }) => (seen.push(o.name), { length: o.name.length }));
    const a = { name: 'alpha' };
    const b = { name: 'be' };
    const first = lengthOf(a);
    expect(lengthOf(a)).to.equal(first);
    expect(lengthOf(b)).to.deep.equal({ length: 2 });
    const copy = lengthOf({ ...a });
    expect(copy, 'another object with the same content is another version').to.not.equal(first);
    expect(copy).to.deep.equal(first);
    expect(seen).to.deep.equal(['alpha', 'be', 'alpha']);
    const other = perObject((o: { name: string }) => (seen.push(`other ${o.name}`), 0));
    other(a);
    expect(seen.at(-1)).to.equal('other alpha');
  });

  it('remembers an undefined answer too', () => {
    let calls = 0;
    const nothing = perObject((_: object) => (calls++, undefined));
    const o = {};
    nothing(o);
    nothing(o);
    expect(calls).to.equal(1);
  });
});
