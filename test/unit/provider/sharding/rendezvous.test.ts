import { expect } from 'chai';
import { fnv1a64, ownerOf } from '../../../../provider/sharding/rendezvous.js';

const hex = ([hi, lo]: readonly [number, number]) => hi.toString(16).padStart(8, '0') + lo.toString(16).padStart(8, '0');
const members = (n: number) => Array.from({ length: n }, (_, i) => `admiralty-provider-6c9f7b8d5-r${i}x-1`);
const targets = (n: number) => Array.from({ length: n }, (_, i) => `Target/ns-${i}/target`);
const owners = (keys: readonly string[], ms: readonly string[]) => new Map(keys.map((k) => [k, ownerOf(k, ms)]));
const counts = (m: ReadonlyMap<string, string | undefined>) => {
  const c = new Map<string, number>();
  for (const o of m.values()) c.set(o!, (c.get(o!) ?? 0) + 1);
  return c;
};

// Pinned: a change of hash would move targets between replicas that run different versions.
const EXPECTED_SPLIT = [106, 84, 110];

describe('rendezvous hashing', () => {
  it('fnv1a64 gives the published FNV-1a 64 values', () => {
    expect(hex(fnv1a64(''))).to.equal('cbf29ce484222325');
    expect(hex(fnv1a64('a'))).to.equal('af63dc4c8601ec8c');
    expect(hex(fnv1a64('foobar'))).to.equal('85944171f73967e8');
  });

  it('gives no owner among no members, and the only member when there is one', () => {
    expect(ownerOf('Target/a/b', [])).to.equal(undefined);
    expect(ownerOf('Target/a/b', ['m0'])).to.equal('m0');
  });

  it('is deterministic and ignores the order and duplicates of the members', () => {
    const ms = members(5);
    for (const key of targets(50)) {
      const owner = ownerOf(key, ms);
      expect(ownerOf(key, [...ms].reverse())).to.equal(owner);
      expect(ownerOf(key, [...ms, ...ms])).to.equal(owner);
    }
  });

  it('spreads 300 targets over 3 members with each between 75 and 125 (100 each if perfectly even)', () => {
    const c = counts(owners(targets(300), members(3)));
    expect([...c.keys()].sort()).to.deep.equal(members(3));
    // The band is three standard deviations of a fair split.
    for (const n of c.values()) expect(n).to.be.within(75, 125);
    expect([...c.values()].reduce((a, b) => a + b, 0)).to.equal(300);
  });

  it('spreads 300 targets over 10 members with each between 12 and 48 (30 each if perfectly even)', () => {
    const c = counts(owners(targets(300), members(10)));
    expect(c.size).to.equal(10);
    for (const n of c.values()) expect(n).to.be.within(12, 48);
  });

  it('keeps the owners of fixed names across releases, since replicas of two versions share a group during a rolling upgrade', () => {
    const c = counts(owners(targets(300), members(3)));
    expect(members(3).map((m) => c.get(m))).to.deep.equal(EXPECTED_SPLIT);
  });

  it('moves, when a member joins, only targets that go to the new member, about a quarter of them from 3 to 4', () => {
    const before = owners(targets(300), members(3));
    const after = owners(targets(300), members(4));
    const moved = [...before.keys()].filter((k) => before.get(k) !== after.get(k));
    for (const k of moved) expect(after.get(k)).to.equal(members(4)[3]);
    expect(moved.length).to.be.within(45, 105);
  });

  it('moves, when a member leaves, only the targets it owned', () => {
    const all = members(4);
    const gone = all[1]!;
    const before = owners(targets(300), all);
    const after = owners(
      targets(300),
      all.filter((m) => m !== gone),
    );
    for (const [k, owner] of before) {
      if (owner === gone) expect(after.get(k)).to.not.equal(gone);
      else expect(after.get(k)).to.equal(owner);
    }
  });
});
