import { expect } from 'chai';
import type { V1Service, V1ServiceSpec } from '@kubernetes/client-node';
import { ValidationError } from '../../../../provider/core/errors.js';
import {
  buildReroutedService,
  buildServiceCopy,
  formatSelector,
  originalSelector,
  parseSelector,
  reroutedSelector,
  serviceCopyDrops,
  serviceCopyNeedsUpdate,
  serviceCopyRefusal,
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
    ['rerouted with a no-prefix regexp', svc({ app: 'web', [`${P}tier`]: 'f' }, { [ORIG]: 'app=web,tier=f', [`${P}no-prefix-label-regexp`]: '^app=' }), { app: 'web', tier: 'f' }],
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
  it('makes a NodePort Service a ClusterIP copy, without what the target allocates', () => {
    expect(copy.spec).to.deep.equal({
      selector: { [`${P}app`]: 'web' },
      type: 'ClusterIP',
      ipFamilyPolicy: 'SingleStack',
      ports: [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }],
    });
  });
  it('reroutes an unrerouted input the same way', () => {
    expect(buildServiceCopy(svc({ app: 'web' }), { sourceClusterName: 'c1' }).spec!.selector).to.deep.equal(copy.spec!.selector);
  });

  /** A source Service with `spec` merged over a ClusterIP one. */
  const withSpec = (spec: Partial<V1ServiceSpec>, annotations: Record<string, string> = {}): V1Service => {
    const s = svc({ app: 'web' }, annotations);
    s.spec = { ...s.spec, type: 'ClusterIP', healthCheckNodePort: undefined, ports: [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }], ...spec };
    return s;
  };
  const copyOf = (s: V1Service) => buildServiceCopy(s, { sourceClusterName: 'c1' });

  const types: [string, Partial<V1ServiceSpec>, Pick<V1ServiceSpec, 'type' | 'clusterIP'>][] = [
    ['no type', { type: undefined }, { type: 'ClusterIP' }],
    ['ClusterIP', { type: 'ClusterIP' }, { type: 'ClusterIP' }],
    ['NodePort', { type: 'NodePort' }, { type: 'ClusterIP' }],
    ['LoadBalancer', { type: 'LoadBalancer' }, { type: 'ClusterIP' }],
    ['headless ClusterIP', { clusterIP: 'None', clusterIPs: ['None'] }, { type: 'ClusterIP', clusterIP: 'None' }],
  ];
  for (const [from, spec, want] of types) {
    it(`maps type ${from} to ${want.type}${want.clusterIP ? `, clusterIP ${want.clusterIP}` : ' with no clusterIP'}`, () => {
      const out = copyOf(withSpec(spec)).spec!;
      expect({ type: out.type, clusterIP: out.clusterIP }).to.deep.equal({ type: want.type, clusterIP: want.clusterIP });
      expect(out).to.not.have.property('clusterIPs');
    });
  }

  const lb = { type: 'LoadBalancer' } as const;
  const dropped: [keyof V1ServiceSpec, Partial<V1ServiceSpec>][] = [
    ['externalIPs', { externalIPs: ['203.0.113.10'] }],
    ['loadBalancerIP', { ...lb, loadBalancerIP: '203.0.113.11' }],
    ['loadBalancerSourceRanges', { ...lb, loadBalancerSourceRanges: ['0.0.0.0/0'] }],
    ['loadBalancerClass', { ...lb, loadBalancerClass: 'example.com/lb' }],
    ['externalTrafficPolicy', { ...lb, externalTrafficPolicy: 'Local' }],
    ['healthCheckNodePort', { ...lb, externalTrafficPolicy: 'Local', healthCheckNodePort: 30001 }],
    ['allocateLoadBalancerNodePorts', { ...lb, allocateLoadBalancerNodePorts: true }],
    ['externalName', { externalName: 'example.com' }],
  ];
  for (const [field, spec] of dropped) {
    it(`leaves out ${field} and names it among the drops`, () => {
      const s = withSpec(spec);
      expect(copyOf(s).spec).to.not.have.property(field);
      expect(serviceCopyDrops(s)).to.include(field);
    });
  }
  it('leaves out ports[].nodePort and names it once among the drops', () => {
    const s = withSpec({
      type: 'NodePort',
      ports: [
        { port: 80, nodePort: 30080 },
        { port: 443, nodePort: 30443 },
      ],
    });
    expect(copyOf(s).spec!.ports).to.deep.equal([{ port: 80 }, { port: 443 }]);
    expect(serviceCopyDrops(s)).to.deep.equal(['type NodePort', 'ports[].nodePort']);
  });
  it('leaves out cluster IPs and IP families without naming them (the target allocates its own)', () => {
    const s = withSpec({ clusterIP: '10.96.0.10', clusterIPs: ['10.96.0.10'], ipFamilies: ['IPv4'] });
    expect(copyOf(s).spec).to.not.have.any.keys('clusterIP', 'clusterIPs', 'ipFamilies');
    expect(serviceCopyDrops(s)).to.deep.equal([]);
  });

  const kept: [keyof V1ServiceSpec, unknown][] = [
    ['sessionAffinity', 'ClientIP'],
    ['sessionAffinityConfig', { clientIP: { timeoutSeconds: 60 } }],
    ['publishNotReadyAddresses', true],
    ['internalTrafficPolicy', 'Local'],
    ['trafficDistribution', 'PreferClose'],
    ['ipFamilyPolicy', 'PreferDualStack'],
  ];
  for (const [field, value] of kept) {
    it(`keeps ${field} (it claims nothing in the target)`, () => {
      const s = withSpec({ [field]: value });
      expect(copyOf(s).spec![field]).to.deep.equal(value);
      expect(serviceCopyDrops(s)).to.deep.equal([]);
    });
  }
  it("keeps a port's name, protocol, port, targetPort and appProtocol", () => {
    const port = { name: 'h2', protocol: 'TCP', port: 443, targetPort: 'https', appProtocol: 'kubernetes.io/h2c' };
    expect(copyOf(withSpec({ ports: [{ ...port, nodePort: 30443 }] })).spec!.ports).to.deep.equal([port]);
  });

  it('names every drop of a LoadBalancer Service with external IPs, in a fixed order', () => {
    const s = withSpec(
      {
        type: 'LoadBalancer',
        externalIPs: ['203.0.113.10'],
        loadBalancerSourceRanges: ['0.0.0.0/0'],
        externalTrafficPolicy: 'Cluster',
        allocateLoadBalancerNodePorts: true,
        ports: [{ port: 80, nodePort: 30080 }],
      },
      { 'service.beta.kubernetes.io/aws-load-balancer-scheme': 'internet-facing', 'metallb.universe.tf/address-pool': 'public' },
    );
    expect(serviceCopyDrops(s)).to.deep.equal([
      'type LoadBalancer',
      'allocateLoadBalancerNodePorts',
      'externalIPs',
      'externalTrafficPolicy',
      'loadBalancerSourceRanges',
      'ports[].nodePort',
      'annotation metallb.universe.tf/address-pool',
      'annotation service.beta.kubernetes.io/aws-load-balancer-scheme',
    ]);
  });

  // [annotation key, copied, named among the drops when left out]
  const annotations: [string, boolean, boolean][] = [
    [`${P}no-prefix-label-regexp`, true, false],
    ['io.cilium/global-service', true, false],
    ['io.cilium/shared-service', true, false],
    ['io.cilium/service-affinity', true, false],
    ['service.cilium.io/global', true, false],
    ['service.cilium.io/shared', true, false],
    ['service.cilium.io/affinity', true, false],
    ['service.cilium.io/global-sync-endpoint-slices', true, false],
    ['service.beta.kubernetes.io/aws-load-balancer-type', false, true],
    ['service.kubernetes.io/topology-mode', false, true],
    ['cloud.google.com/load-balancer-type', false, true],
    ['networking.gke.io/load-balancer-type', false, true],
    ['metallb.universe.tf/loadBalancerIPs', false, true],
    ['metallb.io/loadBalancerIPs', false, true],
    ['load-balancer.hetzner.cloud/location', false, true],
    ['lbipam.cilium.io/ips', false, true],
    ['external-dns.alpha.kubernetes.io/hostname', false, true],
    ['tailscale.com/expose', false, true],
    ['prometheus.io/scrape', false, true],
    ['kubectl.kubernetes.io/last-applied-configuration', false, false],
    ['meta.helm.sh/release-name', false, false],
    ['argocd.argoproj.io/tracking-id', false, false],
  ];
  for (const [key, copied, named] of annotations) {
    it(`annotation ${key}: ${copied ? 'copied' : named ? 'left out and named' : 'left out, not named (bookkeeping)'}`, () => {
      // "true": the reroute sets io.cilium/global-service so.
      const s = withSpec({}, { [key]: 'true' });
      expect(copyOf(s).metadata!.annotations![key]).to.equal(copied ? 'true' : undefined);
      expect(serviceCopyDrops(s)).to.deep.equal(named ? [`annotation ${key}`] : []);
    });
  }

  it('refuses an ExternalName Service: serviceCopyRefusal says why, buildServiceCopy throws ValidationError', () => {
    const s = withSpec({ type: 'ExternalName', externalName: 'db.example.com' });
    expect(serviceCopyRefusal(s)).to.equal('service team/web is of type ExternalName: it is never copied to a target');
    expect(() => copyOf(s)).to.throw(ValidationError);
    expect(serviceCopyRefusal(withSpec({ type: 'LoadBalancer' }))).to.equal(undefined);
  });

  it('does not modify its input', () => {
    const input = withSpec({ type: 'LoadBalancer', externalIPs: ['203.0.113.10'] }, { 'metallb.universe.tf/address-pool': 'p' });
    const before = JSON.stringify(input);
    copyOf(input);
    serviceCopyDrops(input);
    expect(JSON.stringify(input)).to.equal(before);
  });

  // The copy as the target stores it: what it allocated, and its defaults.
  const stored: V1Service = JSON.parse(JSON.stringify(copy));
  stored.spec!.clusterIP = '10.200.0.7';
  stored.spec!.clusterIPs = ['10.200.0.7'];
  stored.spec!.ipFamilies = ['IPv6'];
  const updates: [string, V1Service, boolean][] = [
    ['only target allocations differ', stored, false],
    ['a port differs', { ...stored, spec: { ...stored.spec, ports: [{ port: 81 }] } }, true],
    ['the selector differs', { ...stored, spec: { ...stored.spec, selector: { a: 'b' } } }, true],
    ['an annotation differs', { ...stored, metadata: { ...stored.metadata, annotations: {} } }, true],
    ["an earlier version's copy has external IPs", { ...stored, spec: { ...stored.spec, externalIPs: ['203.0.113.10'] } }, true],
    ["an earlier version's copy is a LoadBalancer", { ...stored, spec: { ...stored.spec, type: 'LoadBalancer', ports: [{ ...stored.spec!.ports![0]!, nodePort: 31000 }] } }, true],
    [
      "an earlier version's copy has a load-balancer annotation",
      { ...stored, metadata: { ...stored.metadata, annotations: { ...stored.metadata!.annotations, 'metallb.universe.tf/address-pool': 'p' } } },
      true,
    ],
  ];
  for (const [why, existing, want] of updates) {
    it(`serviceCopyNeedsUpdate: ${why}`, () => expect(serviceCopyNeedsUpdate(existing, copy)).to.equal(want));
  }
});
