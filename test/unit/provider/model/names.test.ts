import { expect } from 'chai';
import { admiraltyName, copyName, delegatePodName, labelValueFor, shortHash, virtualNodeName } from '../../../../provider/model/names.js';
import type { TargetRef } from '../../../../provider/model/types.js';

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

describe('names', () => {
  describe('virtualNodeName', () => {
    const t = (namespace: string, name: string): TargetRef => ({ kind: 'Target', namespace, name });
    const ct = (name: string): TargetRef => ({ kind: 'ClusterTarget', namespace: '', name });
    const plain: [TargetRef, string][] = [
      [t('default', 'c2'), 'admiralty-namespace-default-c2'],
      [t('default', 'eu-west-3-1'), 'admiralty-namespace-default-eu-west-3-1'],
      [t('team1', 'a.b'), 'admiralty-namespace-team1-a.b'],
      [ct('c2'), 'admiralty-cluster-c2'],
      [ct('my-cluster'), 'admiralty-cluster-my-cluster'],
    ];
    for (const [ref, want] of plain) {
      it(`${ref.kind} ${ref.namespace}/${ref.name} -> ${want} (plain)`, () => {
        expect(virtualNodeName(ref)).to.equal(want);
      });
    }

    const hashed: [string, TargetRef, string][] = [
      ['namespace with a dash', t('my-ns', 'c2'), 'admiralty-namespace-my-ns-c2-'],
      ['too long', t('default', 'x'.repeat(60)), 'admiralty-namespace-default-xxx'],
      ['plain form ends like a hash', t('default', 'c2-0123456789'), 'admiralty-namespace-default-c2-0123456789-'],
      ['long cluster target', ct('y'.repeat(50)), 'admiralty-cluster-yyy'],
    ];
    for (const [why, ref, prefix] of hashed) {
      it(`hashes when ${why}`, () => {
        const name = virtualNodeName(ref);
        expect(name.startsWith(prefix)).to.equal(true, name);
        expect(name).to.match(/-[0-9a-f]{10}$/);
        expect(name.length).to.be.at.most(63);
        expect(name).to.match(DNS1123_SUBDOMAIN);
      });
    }

    it('keeps ambiguous splits apart', () => {
      const a = virtualNodeName(t('a-b', 'c'));
      const b = virtualNodeName(t('a', 'b-c'));
      expect(b).to.equal('admiralty-namespace-a-b-c');
      expect(a).to.not.equal(b);
      expect(a).to.equal(`admiralty-namespace-a-b-c-${shortHash('admiralty-namespace/a-b/c')}`);
    });

    it('never lets a plain name equal a hashed one', () => {
      const hashedName = virtualNodeName(t('my-ns', 'c2'));
      // A Target crafted to read like that hashed name is itself hashed (rule 3).
      const crafted = virtualNodeName(t('my', hashedName.slice('admiralty-namespace-my-'.length)));
      expect(crafted).to.not.equal(hashedName);
    });

    it('is deterministic and distinct for Target and ClusterTarget', () => {
      expect(virtualNodeName(t('default', 'c2'))).to.equal(virtualNodeName(t('default', 'c2')));
      expect(virtualNodeName(ct('default-c2'))).to.not.equal(virtualNodeName(t('default', 'c2')));
    });

    it('cuts long names to a valid label without a trailing dash or dot', () => {
      for (const name of ['a'.repeat(30) + '-' + 'b'.repeat(200), 'a'.repeat(33) + '.' + 'b'.repeat(40)]) {
        const n = virtualNodeName(t('default', name));
        expect(n.length).to.be.at.most(63);
        expect(n).to.match(DNS1123_SUBDOMAIN);
        expect(n).to.not.match(/[-.]-/);
      }
    });
  });

  describe('delegatePodName', () => {
    const cases: [string, string, string][] = [
      ['web-7d9c6b5f4-abcde', 'c1', 'uid-1'],
      ['x'.repeat(253), 'c1', 'uid-1'],
      ['a'.repeat(51) + '-tail', 'c1', 'uid-2'],
      ['a'.repeat(51) + '.tail', 'c1', 'uid-2'],
    ];
    for (const [proxy, cluster, uid] of cases) {
      it(`fits 63 characters and stays a subdomain (${proxy.length} chars)`, () => {
        const n = delegatePodName(proxy, cluster, uid);
        expect(n.length).to.be.at.most(63);
        expect(n).to.match(DNS1123_SUBDOMAIN);
        expect(n.endsWith(`-${shortHash(`${cluster}/${uid}`)}`)).to.equal(true);
      });
    }
    it('keeps a short proxy name readable', () => {
      expect(delegatePodName('web-abc', 'c1', 'u1')).to.equal(`web-abc-${shortHash('c1/u1')}`);
    });
    it('differs per source cluster and per proxy uid, and is stable', () => {
      const base = delegatePodName('web', 'c1', 'u1');
      expect(delegatePodName('web', 'c1', 'u1')).to.equal(base);
      expect(delegatePodName('web', 'c2', 'u1')).to.not.equal(base);
      expect(delegatePodName('web', 'c1', 'u2')).to.not.equal(base);
    });
  });

  describe('copyName', () => {
    it("keeps the original's name readable, with a hash of the source cluster and the name", () => {
      expect(copyName('settings', 'c1')).to.equal(`settings-${shortHash('c1/settings')}`);
    });
    it('differs per source cluster and per name, and is stable', () => {
      expect(copyName('cfg', 'c2')).to.equal(copyName('cfg', 'c2'));
      expect(copyName('cfg', 'c2')).to.not.equal(copyName('cfg', 'c3'));
      expect(copyName('cfg', 'c2')).to.not.equal(copyName('cfg2', 'c2'));
    });
    const long: [string, string][] = [
      ['x'.repeat(253), 'c1'],
      ['x'.repeat(242), 'c1'],
      ['a'.repeat(240) + '-tail-of-a-long-name', 'c1'],
      ['a'.repeat(241) + '.b', 'c1'],
    ];
    for (const [name, cluster] of long) {
      it(`fits 253 characters and stays a subdomain (${name.length} chars)`, () => {
        const n = copyName(name, cluster);
        expect(n.length).to.be.at.most(253);
        expect(n).to.match(DNS1123_SUBDOMAIN);
      });
    }
    it('gives names cut to the same prefix different copies', () => {
      const prefix = 'p'.repeat(250);
      expect(copyName(`${prefix}-a`, 'c1')).to.not.equal(copyName(`${prefix}-b`, 'c1'));
    });
  });

  describe('admiraltyName (Admiralty compatibility)', () => {
    const cases: [string, Parameters<typeof admiraltyName>[0], string][] = [
      [
        'source CRB, plain',
        [{ value: 'admiralty-source', kind: 'constant' }, { value: 'default' }, { value: 'cluster1' }, { value: 'cluster-summary-viewer', kind: 'constant' }],
        'admiralty-source-default-cluster1-cluster-summary-viewer',
      ],
      [
        'source CRB, hyphenated namespace',
        [{ value: 'admiralty-source', kind: 'constant' }, { value: 'my-ns' }, { value: 'cluster1' }, { value: 'cluster-summary-viewer', kind: 'constant' }],
        'admiralty-source-my-ns-cluster1-cluster-summary-viewer-a5116f3f32',
      ],
      ['Admiralty virtual node with hyphen', [{ value: 'admiralty', kind: 'constant' }, { value: 'my-ns', kind: 'optional' }, { value: 'c2' }], 'admiralty-my-ns-c2-ef70f3d678'],
      ['single variable part with hyphen', [{ value: 'admiralty-source', kind: 'constant' }, { value: 'my-source' }], 'admiralty-source-my-source'],
      ['finalizer style', [{ value: 'default', kind: 'optional' }, { value: 'foo-bar' }], 'default-foo-bar-b1f5f88a38'],
    ];
    for (const [why, parts, want] of cases) {
      it(why, () => expect(admiraltyName(parts)).to.equal(want));
    }
    it('cuts to the limit', () => {
      const n = admiraltyName([{ value: 'admiralty-source', kind: 'constant' }, { value: 'z'.repeat(300) }]);
      expect(n.length).to.equal(253);
      expect(n).to.match(/^admiralty-source-z+-[0-9a-f]{10}$/);
    });
  });

  describe('labelValueFor', () => {
    it('keeps short values and hashes long ones to 63', () => {
      expect(labelValueFor('c2')).to.equal('c2');
      const long = labelValueFor('a'.repeat(100));
      expect(long.length).to.equal(63);
      expect(long).to.match(DNS1123_LABEL);
      expect(labelValueFor('a'.repeat(100))).to.equal(long);
    });
  });
});
