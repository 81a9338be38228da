import { expect } from 'chai';
import { createJsonPatch, escapePointerToken, type JsonPatchOp } from '../../../webhook/create-json-patch.js';
import { mutatePod } from '../../../webhook/mutate-pod.js';
import { ELECT_ANNOTATION } from '../../../provider/core/keys.js';

/** A minimal RFC 6902 applier (add/replace/remove/test on objects and array indexes). */
function applyPatch(doc: unknown, ops: JsonPatchOp[]): unknown {
  let root = structuredClone(doc);
  for (const op of ops) {
    if (op.path === '') {
      if (op.op === 'test') continue;
      root = op.op === 'remove' ? null : structuredClone(op.value);
      continue;
    }
    const tokens = op.path
      .slice(1)
      .split('/')
      .map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
    const last = tokens.pop()!;
    let parent = root as Record<string, unknown>;
    for (const t of tokens) {
      if (!(t in parent)) throw new Error(`path ${op.path} does not exist`);
      parent = parent[t] as Record<string, unknown>;
    }
    if (op.op !== 'add' && !(last in parent)) throw new Error(`path ${op.path} does not exist`);
    if (op.op === 'remove') delete parent[last];
    else if (op.op === 'test') expect(parent[last]).to.deep.equal(op.value);
    else parent[last] = structuredClone(op.value);
  }
  return root;
}

describe('webhook: createJsonPatch', () => {
  const cases: Array<[string, unknown, unknown]> = [
    ['equal objects', { a: 1, b: [1, 2] }, { b: [1, 2], a: 1 }],
    ['added, removed and replaced members', { a: 1, b: { c: 2, d: 3 } }, { a: 2, b: { c: 2, e: 4 }, f: null }],
    ['a member added to a missing parent', { metadata: {} }, { metadata: { annotations: { 'x/y': 'z' } } }],
    ['keys with ~ and /', { 'a~b': 1, 'c/d': 1 }, { 'a~b': 2, 'c/d': 2, 'e~/f': 3 }],
    ['arrays replaced whole', { l: [1, 2, 3] }, { l: [1, 3] }],
    ['a type change', { a: { b: 1 } }, { a: [1] }],
    ['a root replacement', [1], { a: 1 }],
    ['undefined counts as absent', { a: undefined, b: 1 }, { b: 1 }],
    ['undefined in after counts as absent', { a: { b: 1, c: 2 } }, { a: { b: 1, c: undefined, d: undefined } }],
    ['a Date as its JSON string', { t: '2026-01-01T00:00:00.000Z', u: 'x' }, { t: new Date('2026-01-01T00:00:00.000Z'), u: new Date('2026-01-02T00:00:00.000Z') }],
    ['keys named as members of every object', { constructor: 1, toString: 'x' }, { constructor: 2, hasOwnProperty: 'y', valueOf: { a: 1 } }],
  ];
  for (const [what, before, after] of cases) {
    it(`round-trips ${what}`, () => {
      const patched = applyPatch(JSON.parse(JSON.stringify(before) ?? 'null'), createJsonPatch(before, after));
      expect(patched).to.deep.equal(JSON.parse(JSON.stringify(after)));
      const parsed = JSON.parse(JSON.stringify(before) ?? 'null');
      expect(createJsonPatch(parsed, after, { beforeIsJson: true }), 'the same from a parsed before').to.deep.equal(createJsonPatch(before, after));
    });
  }

  it('emits nothing for equal documents and escapes pointers', () => {
    expect(createJsonPatch({ a: [1, { b: 2 }] }, { a: [1, { b: 2 }] })).to.deep.equal([]);
    expect(escapePointerToken('a~/b')).to.equal('a~0~1b');
    expect(createJsonPatch({ m: {} }, { m: { 'multicluster.admiralty.io/elect': '' } })).to.deep.equal([{ op: 'add', path: '/m/multicluster.admiralty.io~1elect', value: '' }]);
  });

  it('takes a Date for its JSON string, and sends only JSON', () => {
    const ops = createJsonPatch({ t: '2026-01-01T00:00:00.000Z', l: ['x'] }, { t: new Date('2026-01-01T00:00:00.000Z'), l: [new Date('2026-01-02T00:00:00.000Z')] });
    expect(ops).to.deep.equal([{ op: 'replace', path: '/l', value: ['2026-01-02T00:00:00.000Z'] }]);
  });

  it('compares a subtree after shares with before at once, and never reads it', () => {
    const shared = { containers: [{ name: 'c', image: 'i' }] };
    // A getter that throws: a walk of the shared subtree (or a copy of after) would meet it.
    Object.defineProperty(shared.containers[0], 'trap', { enumerable: true, get: () => expect.fail('the shared subtree was read') });
    const before = { metadata: { name: 'p' }, spec: shared };
    expect(createJsonPatch(before, { metadata: { name: 'p', labels: { a: 'b' } }, spec: shared }, { beforeIsJson: true })).to.deep.equal([{ op: 'add', path: '/metadata/labels', value: { a: 'b' } }]);
  });

  it('turns a source pod into its proxy', () => {
    const pod = {
      metadata: { name: 'p', annotations: { [ELECT_ANNOTATION]: '' } },
      spec: { containers: [{ name: 'c', image: 'i' }], tolerations: [{ key: 'k', operator: 'Exists' }] },
    };
    const proxy = mutatePod(pod).pod;
    expect(applyPatch(pod, createJsonPatch(pod, proxy))).to.deep.equal(proxy);
  });
});
