import { expect } from 'chai';
import { StringTable } from '../../../../provider/controller/string-table.js';
import { SubtreeTable, sameJson } from '../../../../provider/controller/subtree-table.js';

describe('SubtreeTable', () => {
  const tolerations = () =>
    JSON.parse('[{"key":"dedicated","operator":"Equal","value":"web","effect":"NoSchedule"},{"key":"node.kubernetes.io/not-ready","operator":"Exists","tolerationSeconds":300}]');

  it('gives a value of the same JSON the copy it holds, and other values their own', () => {
    const table = new SubtreeTable();
    const first = table.share(tolerations());
    const second = tolerations();
    expect(table.share(second)).to.equal(first);
    expect(first).to.deep.equal(tolerations());
    const other = table.share([{ key: 'other', operator: 'Exists' }]);
    expect(other).to.not.equal(first);
    expect(table.share(JSON.parse(JSON.stringify(other)))).to.equal(other);
  });

  it('freezes what it holds, deeply: a write through any object that shares it throws', () => {
    const table = new SubtreeTable();
    const shared = table.share({ requests: { cpu: '10m', memory: '16Mi' }, claims: [{ name: 'gpu' }] });
    expect(() => {
      (shared.requests as Record<string, string>).cpu = '1';
    }).to.throw(TypeError);
    expect(() => shared.claims.push({ name: 'more' })).to.throw(TypeError);
    expect(() => {
      (shared.claims[0] as { name: string }).name = 'x';
    }).to.throw(TypeError);
    expect(shared).to.deep.equal({ requests: { cpu: '10m', memory: '16Mi' }, claims: [{ name: 'gpu' }] });
  });

  it('leaves values whose JSON is longer than maxLength as they are, out of the table and not frozen', () => {
    const table = new SubtreeTable({ maxLength: 20 });
    const long = { key: 'x'.repeat(20) };
    expect(table.share(long)).to.equal(long);
    expect(Object.isFrozen(long)).to.equal(false);
    expect(table.size()).to.equal(0);
    const short = { k: 'v' };
    expect(table.share(short)).to.equal(short);
    expect(Object.isFrozen(short)).to.equal(true);
    expect(table.size()).to.equal(1);
  });

  it('holds at most two generations, by count and by characters, and keeps a value that keeps coming', () => {
    const table = new SubtreeTable({ maxEntries: 100, maxChars: 100_000 });
    const kept = table.share(tolerations());
    for (let i = 0; i < 10_000; i++) {
      table.share({ name: `unique-${i}` });
      // Seen again once in every generation: it moves to the newer one each time.
      if (i % 50 === 0) expect(table.share(tolerations())).to.equal(kept);
    }
    expect(table.size()).to.be.at.most(200);
    const long = new SubtreeTable({ maxEntries: 100, maxChars: 1000 });
    for (let i = 0; i < 100; i++) long.share({ v: `${i}`.padEnd(290, '.') });
    // 300 characters of JSON each: a generation turns over at its fourth value.
    expect(long.size()).to.be.at.most(8);
  });

  it('forgets a value not seen for two generations: the next one is its own copy', () => {
    const table = new SubtreeTable({ maxEntries: 10 });
    const old = table.share(tolerations());
    for (let i = 0; i < 30; i++) table.share({ i });
    const again = table.share(tolerations());
    expect(again).to.not.equal(old);
    expect(again).to.deep.equal(old);
  });

  it('leaves to the string table only what it has not frozen', () => {
    const strings = new StringTable();
    const table = new SubtreeTable();
    const shared = table.share({ key: 'k', values: ['a', 'b'] });
    const obj = { name: 'pod', shared };
    expect(() => strings.internValues(obj)).to.not.throw();
    expect(obj).to.deep.equal({ name: 'pod', shared: { key: 'k', values: ['a', 'b'] } });
  });

  it('takes the previous version of a part when it is shared and equal, without a lookup; otherwise the table as before', () => {
    // The previous version's part was shared through another table: only taking it as it is,
    // not a lookup, answers with it (and a lookup of a part new to this table would enter it).
    const previous = new SubtreeTable().share(tolerations());
    const table = new SubtreeTable();
    expect(table.share(tolerations(), previous)).to.equal(previous);
    expect(table.size()).to.equal(0);
    // Not equal: the table's copy, entered, as without a previous part.
    const changed = tolerations();
    changed[1].tolerationSeconds = 30;
    const shared = table.share(changed, previous);
    expect(shared).to.equal(changed);
    expect(Object.isFrozen(shared)).to.equal(true);
    expect(table.size()).to.equal(1);
    // Equal but not frozen (an object's own part, never shared): not taken, since a write
    // through one object must not reach another; the table answers.
    const own = tolerations();
    const answer = table.share(tolerations(), own);
    expect(answer).to.not.equal(own);
    expect(Object.isFrozen(own)).to.equal(false);
    expect(table.size()).to.equal(2);
  });
});

describe('sameJson', () => {
  it('is equality of JSON data: same values, same items in order, same keys in order', () => {
    const pairs: Array<[unknown, unknown, boolean]> = [
      [{ a: 1, b: [1, 'x', null, true] }, { a: 1, b: [1, 'x', null, true] }, true],
      [[], [], true],
      [{}, {}, true],
      ['x', 'x', true],
      [0, -0, true],
      [{ a: 1, b: 2 }, { b: 2, a: 1 }, false],
      [{ a: 1 }, { a: 1, b: 2 }, false],
      [{ a: 1, b: 2 }, { a: 1 }, false],
      [[1, 2], [2, 1], false],
      [[1], [1, 1], false],
      [[], {}, false],
      [{}, [], false],
      [{ a: null }, { a: {} }, false],
      [{ a: '1' }, { a: 1 }, false],
      [null, null, true],
      [null, {}, false],
    ];
    for (const [a, b, same] of pairs) expect(sameJson(a, b), `${JSON.stringify(a)} ${JSON.stringify(b)}`).to.equal(same);
  });

  it('takes nothing but plain data for equal: a Date, an instance of a class or undefined only equal themselves', () => {
    const at = (s: string) => new Date(s);
    expect(sameJson({ t: at('2026-11-29T00:00:00Z') }, { t: at('2026-11-29T00:00:01Z') })).to.equal(false);
    expect(sameJson({ t: at('2026-11-29T00:00:00Z') }, { t: at('2026-11-29T00:00:00Z') })).to.equal(false);
    expect(sameJson({ t: '2026-11-29T00:00:00Z' }, { t: at('2026-11-29T00:00:00Z') })).to.equal(false);
    class Meta {
      name = 'a';
    }
    expect(sameJson(new Meta(), new Meta())).to.equal(false);
    expect(sameJson({ a: undefined }, { a: undefined })).to.equal(false);
    expect(sameJson(Object.assign(Object.create(null), { a: 1 }), { a: 1 })).to.equal(true);
  });
});
