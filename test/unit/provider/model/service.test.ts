import { expect } from 'chai';
import type { V1Service } from '@kubernetes/client-node';
import { ValidationError } from '../../../../provider/core/errors.js';
import {
  buildReroutedService,
  buildServiceCopy,
  formatSelector,
  originalSelector,
  parseSelector,
  reroutedSelector,
  serviceCopyNeedsUpdate,
} from '../../../../provider/model/service.js';

const P = 'multicluster.admiralty.io/';
const ORIG = `${P}original-selector`;

function svc(selector: Record<string, string> | undefined, annotations: Record<string, string> = {}): V1Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'web', namespace: 'team', uid: 'svc-uid', resourceVersion: '9', annotations, labels: { app: 'web' } },
    spec: {
      selector,
      type: 'NodePort',
      clusterIP: '10.96.0.10',
      clusterIPs: ['10.96.0.10'],
      ipFamilies: ['IPv4'],
      ipFamilyPolicy: 'SingleStack',
      healthCheckNodePort: 30001,
      ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30080, protocol: 'TCP' }],
    },
  };
}

describe('selector helpers', () => {
  it('reroutes like delegate labels', () => {
    expect(reroutedSelector({ app: 'web', 'x.io/tier': 'f' })).to.deep.equal({ [`${P}app`]: 'web', [`${P}tier`]: 'f' });
    expect(reroutedSelector({ app: 'web' }, /^app=/)).to.deep.equal({ app: 'web' });
  });
  const round: [Record<string, string>, string][] = [
    [{}, ''],
    [{ b: '2', a: '1' }, 'a=1,b=2'],
    [{ 'x.io/k': 'v' }, 'x.io/k=v'],
  ];
  for (const [sel, text] of round) {
    it(`formats and parses ${text || '(empty)'}`, () => {
      expect(formatSelector(sel)).to.equal(text);
      expect(parseSelector(text)).to.deep.equal(sel);
    });
  }
  for (const bad of ['a', '=1', 'a=1=2', 'a=1,,b=2']) {
    it(`rejects malformed ${bad}`, () => expect(parseSelector(bad)).to.equal(undefined));
  }
});

describe('originalSelector', () => {
  const cases: [string, V1Service, Record<string, string>][] = [
    ['not rerouted', svc({ app: 'web' }), { app: 'web' }],
    ['rerouted', svc({ [`${P}app`]: 'web' }, { [ORIG]: 'app=web' }), { app: 'web' }],
    ['user replaced the selector since', svc({ app: 'shop' }, { [ORIG]: 'app=web' }), { app: 'shop' }],
    ['malformed annotation', svc({ app: 'web' }, { [ORIG]: 'garbage' }), { app: 'web' }],
    [
      'rerouted with a no-prefix regexp',
      svc({ app: 'web', [`${P}tier`]: 'f' }, { [ORIG]: 'app=web,tier=f', [`${P}no-prefix-label-regexp`]: '^app=' }),
      { app: 'web', tier: 'f' },
    ],
  ];
  for (const [why, s, want] of cases) {
    it(why, () => expect(originalSelector(s)).to.deep.equal(want));
  }
});

describe('buildReroutedService', () => {
  it('prefixes the selector and annotates', () => {
    const out = buildReroutedService(svc({ app: 'web' }, { keep: 'me' }));
    expect(out.spec!.selector).to.deep.equal({ [`${P}app`]: 'web' });
    expect(out.metadata!.annotations).to.deep.equal({
      keep: 'me',
      [ORIG]: 'app=web',
      'io.cilium/global-service': 'true',
      [`${P}global`]: 'true',
    });
    expect(out.spec!.clusterIP).to.equal('10.96.0.10');
  });
  it('is idempotent', () => {
    const once = buildReroutedService(svc({ app: 'web', tier: 'f' }));
    expect(buildReroutedService(once)).to.deep.equal(once);
  });
  it('follows a selector replaced by the user', () => {
    const once = buildReroutedService(svc({ app: 'web' }));
    once.spec!.selector = { app: 'shop' };
    const again = buildReroutedService(once);
    expect(again.spec!.selector).to.deep.equal({ [`${P}app`]: 'shop' });
    expect(again.metadata!.annotations![ORIG]).to.equal('app=shop');
  });
  it('does not modify its input', () => {
    const input = svc({ app: 'web' });
    const before = JSON.stringify(input);
    buildReroutedService(input);
    expect(JSON.stringify(input)).to.equal(before);
  });
  const invalid: [string, V1Service][] = [
    ['no selector', svc(undefined)],
    ['empty selector', svc({})],
    ['bad no-prefix regexp', svc({ app: 'web' }, { [`${P}no-prefix-label-regexp`]: '(' })],
  ];
  for (const [why, s] of invalid) {
    it(`throws ValidationError: ${why}`, () => expect(() => buildReroutedService(s)).to.throw(ValidationError));
  }
});

describe('buildServiceCopy', () => {
  const copy = buildServiceCopy(buildReroutedService(svc({ app: 'web' })), { sourceClusterName: 'c1' });
  it('marks the copy and its parent', () => {
    expect(copy.metadata!.labels).to.deep.equal({
      app: 'web',
      [`${P}parent-uid`]: 'svc-uid',
      [`${P}parent-cluster-name`]: 'c1',
    });
    expect(copy.metadata!.annotations).to.include({ [`${P}is-delegate`]: '', [`${P}parent-name`]: 'web', [`${P}parent-namespace`]: 'team', [ORIG]: 'app=web' });
    expect(Object.keys(copy.metadata!).sort()).to.deep.equal(['annotations', 'labels', 'name', 'namespace']);
  });
  it('clears what the target allocates and keeps the rest', () => {
    expect(copy.spec).to.deep.equal({
      selector: { [`${P}app`]: 'web' },
      type: 'NodePort',
      ipFamilyPolicy: 'SingleStack',
      ports: [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }],
    });
  });
  it('keeps a headless service headless', () => {
    const s = svc({ app: 'web' });
    s.spec!.clusterIP = 'None';
    s.spec!.clusterIPs = ['None'];
    expect(buildServiceCopy(s, { sourceClusterName: 'c1' }).spec!.clusterIP).to.equal('None');
  });
  it('reroutes an unrerouted input the same way', () => {
    expect(buildServiceCopy(svc({ app: 'web' }), { sourceClusterName: 'c1' }).spec!.selector).to.deep.equal(copy.spec!.selector);
  });

  const stored: V1Service = JSON.parse(JSON.stringify(copy));
  stored.spec!.clusterIP = '10.200.0.7';
  stored.spec!.clusterIPs = ['10.200.0.7'];
  stored.spec!.ipFamilies = ['IPv6'];
  stored.spec!.ports![0].nodePort = 31000;
  const updates: [string, V1Service, boolean][] = [
    ['only target allocations differ', stored, false],
    ['a port differs', { ...stored, spec: { ...stored.spec, ports: [{ port: 81 }] } }, true],
    ['the selector differs', { ...stored, spec: { ...stored.spec, selector: { a: 'b' } } }, true],
    ['an annotation differs', { ...stored, metadata: { ...stored.metadata, annotations: {} } }, true],
  ];
  for (const [why, existing, want] of updates) {
    it(`serviceCopyNeedsUpdate: ${why}`, () => expect(serviceCopyNeedsUpdate(existing, copy)).to.equal(want));
  }
});
