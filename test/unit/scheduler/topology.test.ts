import { expect } from 'chai';
import type { V1PodAffinityTerm, V1PodSpec, V1TopologySpreadConstraint } from '@kubernetes/client-node';
import { SOURCE_POD_MANIFEST_ANNOTATION, TARGET_NAME_LABEL, TARGET_NAMESPACE_LABEL, VIRTUAL_KUBELET_PROVIDER_LABEL } from '../../../provider/core/keys.js';
import {
  hasRequiredTopology,
  mayHavePodTerms,
  podTerms,
  podTopology,
  softTopologyScores,
  topologyFilter,
  unconstrainedTopology,
  type PlacedPod,
  type PodTopology,
  type TopologyTarget,
} from '../../../scheduler/topology.js';
import { node, nodesOf, pod } from './fixtures.js';

const REGION = 'topology.kubernetes.io/region';
const ZONE = 'topology.kubernetes.io/zone';

const identity = (name: string) => ({ [VIRTUAL_KUBELET_PROVIDER_LABEL]: 'admiralty', [TARGET_NAMESPACE_LABEL]: 'default', [TARGET_NAME_LABEL]: name });

/** A target of the sandbox's shape: two nodes in `region`, zones `<region>-a` and `-b`; `taint` on the second. */
function target(name: string, region: string, extra: { inScope?: boolean; taintSecond?: boolean } = {}): TopologyTarget {
  const taints = extra.taintSecond ? [{ key: 'dedicated', value: 'x', effect: 'NoSchedule' }] : undefined;
  return {
    key: `default/${name}`,
    identity: identity(name),
    nodes: nodesOf([node(`${name}-node-0`, { labels: { [REGION]: region, [ZONE]: `${region}-a` } }), node(`${name}-node-1`, { labels: { [REGION]: region, [ZONE]: `${region}-b` }, taints })]),
    inScope: extra.inScope ?? true,
  };
}

const c1 = target('c1', 'us');
const c2 = target('c2', 'eu');

/** `n` proxies of app `app` on a target (their nodes unknown unless `node` says). */
const on = (t: TopologyTarget, n: number, opts: { app?: string; node?: string; namespace?: string } = {}): PlacedPod[] =>
  Array.from({ length: n }, () => ({ namespace: opts.namespace ?? 'default', labels: { app: opts.app ?? 'web' }, targetKey: t.key, ...(opts.node ? { nodeName: opts.node } : {}) }));

const spread = (key: string, maxSkew = 1, extra: Partial<V1TopologySpreadConstraint> = {}): V1TopologySpreadConstraint => ({
  maxSkew,
  topologyKey: key,
  whenUnsatisfiable: 'DoNotSchedule',
  labelSelector: { matchLabels: { app: 'web' } },
  ...extra,
});
const term = (key: string, extra: Partial<V1PodAffinityTerm> = {}): V1PodAffinityTerm => ({ topologyKey: key, labelSelector: { matchLabels: { app: 'web' } }, ...extra });

/** A pod of app web with this spec. */
function web(spec: Partial<V1PodSpec>, labels: Record<string, string> = { app: 'web' }, namespace = 'default') {
  const p = pod('web-x', { cpu: '1' }, spec, namespace);
  p.metadata!.labels = labels;
  return p;
}

/** The verdict on each target, every node of it a candidate: true, or the reason. */
function verdicts(
  spec: Partial<V1PodSpec>,
  pods: PlacedPod[],
  targets: TopologyTarget[] = [c1, c2],
  opts: { labels?: Record<string, string>; namespaceLabels?: Record<string, Record<string, string>> } = {},
): Record<string, true | string> {
  const topology = podTopology(web(spec, opts.labels), (n) => opts.namespaceLabels?.[n]);
  expect(topology, 'the pod has topology constraints').to.not.equal(undefined);
  const judge = topologyFilter(topology!, targets, pods);
  const out: Record<string, true | string> = {};
  for (const t of targets) {
    const v = judge(t.key, t.nodes);
    out[t.key.split('/')[1]!] = v.fits ? true : v.reason;
  }
  return out;
}

/** `pods` holding the terms of a pod with this affinity (its labels app=web unless `labels` say). */
const holding = (pods: PlacedPod[], affinity: V1PodSpec['affinity'], labels?: Record<string, string>): PlacedPod[] => {
  const terms = podTerms(web({ affinity }, labels), () => undefined);
  expect(terms, 'the holder has terms').to.not.equal(undefined);
  return pods.map((p) => ({ ...p, terms }));
};

/** The verdict on each target of a `topology` already built, every node a candidate: true, or the reason. */
function judged(topology: PodTopology, pods: PlacedPod[], targets: TopologyTarget[] = [c1, c2]): Record<string, true | string> {
  const judge = topologyFilter(topology, targets, pods);
  return Object.fromEntries(
    targets.map((t) => {
      const v = judge(t.key, t.nodes);
      return [t.key.split('/')[1], v.fits ? true : v.reason];
    }),
  );
}

describe('scheduler: podTerms and mayHavePodTerms', () => {
  it("podTerms is undefined for a pod without pod (anti-)affinity terms, and reads matchLabelKeys from the holder's own labels", () => {
    expect(podTerms(web({ topologySpreadConstraints: [spread(REGION)] }), () => undefined)).to.equal(undefined);
    const terms = podTerms(
      web({ affinity: { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [term(REGION, { labelSelector: {}, matchLabelKeys: ['tenant'] })] } } }, { app: 'web', tenant: 'a' }),
      () => undefined,
    )!;
    expect(terms.antiAffinity).to.have.length(1);
    expect(terms.antiAffinity[0]!.selector({ tenant: 'a' })).to.equal(true);
    expect(terms.antiAffinity[0]!.selector({ tenant: 'b' })).to.equal(false);
  });
  it('mayHavePodTerms looks at the saved manifest as text, else at the spec', () => {
    const proxy = (manifest: string | undefined, spec: Partial<V1PodSpec> = {}) => {
      const p = web(spec);
      if (manifest !== undefined) p.metadata!.annotations = { [SOURCE_POD_MANIFEST_ANNOTATION]: manifest };
      return p;
    };
    expect(mayHavePodTerms(proxy(JSON.stringify({ spec: { affinity: { podAntiAffinity: {} } } })))).to.equal(true);
    expect(mayHavePodTerms(proxy(JSON.stringify({ spec: { affinity: { podAffinity: {} } } })))).to.equal(true);
    expect(mayHavePodTerms(proxy(JSON.stringify({ spec: { affinity: { nodeAffinity: {} } } }), { affinity: { podAntiAffinity: {} } }))).to.equal(false);
    expect(mayHavePodTerms(proxy(undefined, { affinity: { podAntiAffinity: {} } }))).to.equal(true);
    expect(mayHavePodTerms(proxy(undefined))).to.equal(false);
  });
});

describe('scheduler: podTopology', () => {
  it('is undefined for a pod without topology spread or pod (anti-)affinity; soft ones alone leave the filter nothing to judge', () => {
    expect(podTopology(web({}), () => undefined)).to.equal(undefined);
    const zeroWeight = { podAntiAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 0, podAffinityTerm: term(REGION) }] } };
    expect(podTopology(web({ affinity: zeroWeight }), () => undefined)).to.equal(undefined);
    const soft = podTopology(web({ topologySpreadConstraints: [spread(REGION, 1, { whenUnsatisfiable: 'ScheduleAnyway' })] }), () => undefined)!;
    expect(hasRequiredTopology(soft)).to.equal(false);
    const preferred = { podAntiAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 1, podAffinityTerm: term(REGION) }] } };
    expect(hasRequiredTopology(podTopology(web({ affinity: preferred }), () => undefined)!)).to.equal(false);
    expect(hasRequiredTopology(podTopology(web({ topologySpreadConstraints: [spread(REGION)] }), () => undefined)!)).to.equal(true);
  });

  it('counts the namespaces of the pod and its terms, or all of them for a namespaceSelector', () => {
    const named = podTopology(web({ affinity: { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [term(REGION, { namespaces: ['other'] })] } } }), () => undefined);
    expect([...(named!.namespaces as Set<string>)].sort()).to.deep.equal(['default', 'other']);
    const selected = podTopology(web({ affinity: { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [term(REGION, { namespaceSelector: {} })] } } }), () => undefined);
    expect(selected!.namespaces).to.equal('all');
  });
});

describe('scheduler: topologyFilter', () => {
  describe('DoNotSchedule spread', () => {
    const table: { name: string; spec: Partial<V1PodSpec>; pods: PlacedPod[]; targets?: TopologyTarget[]; labels?: Record<string, string>; want: Record<string, true | string> }[] = [
      { name: 'no pod yet: both regions pass', spec: { topologySpreadConstraints: [spread(REGION)] }, pods: [], want: { c1: true, c2: true } },
      {
        name: 'one in us: us would be 2 against 0 in eu, so only c2 passes',
        spec: { topologySpreadConstraints: [spread(REGION)] },
        pods: on(c1, 1),
        want: { c1: `2 node(s) didn't match pod topology spread constraints (${REGION}=us has 1 matching pod, the fewest in a domain is 0, maxSkew 1)`, c2: true },
      },
      { name: 'one in each: both pass again', spec: { topologySpreadConstraints: [spread(REGION)] }, pods: [...on(c1, 1), ...on(c2, 1)], want: { c1: true, c2: true } },
      { name: 'maxSkew 2 lets us take a second', spec: { topologySpreadConstraints: [spread(REGION, 2)] }, pods: on(c1, 1), want: { c1: true, c2: true } },
      { name: 'pods of another app do not count', spec: { topologySpreadConstraints: [spread(REGION)] }, pods: on(c1, 3, { app: 'db' }), want: { c1: true, c2: true } },
      { name: 'pods of another namespace do not count', spec: { topologySpreadConstraints: [spread(REGION)] }, pods: on(c1, 3, { namespace: 'other' }), want: { c1: true, c2: true } },
      {
        name: 'a pod its own selector does not match adds nothing to its domain',
        spec: { topologySpreadConstraints: [spread(REGION)] },
        labels: { app: 'other' },
        pods: on(c1, 1),
        want: { c1: true, c2: true },
      },
      {
        name: 'zones within one target: a proxy whose node is known counts in its zone only',
        spec: { topologySpreadConstraints: [spread(ZONE)] },
        pods: [...on(c1, 1, { node: 'c1-node-0' }), ...on(c1, 1, { node: 'c1-node-1' }), ...on(c2, 1, { node: 'c2-node-0' })],
        want: {
          c1: `1 node(s) didn't match pod topology spread constraints (${ZONE}=us-a has 1 matching pod, the fewest in a domain is 0, maxSkew 1), 1 node(s) didn't match pod topology spread constraints (${ZONE}=us-b has 1 matching pod, the fewest in a domain is 0, maxSkew 1)`,
          c2: true,
        },
      },
      {
        name: 'a proxy whose node is not known yet counts in every zone of its target',
        spec: { topologySpreadConstraints: [spread(ZONE)] },
        pods: on(c2, 1),
        want: {
          c1: true,
          c2: `1 node(s) didn't match pod topology spread constraints (${ZONE}=eu-a has 1 matching pod, the fewest in a domain is 0, maxSkew 1), 1 node(s) didn't match pod topology spread constraints (${ZONE}=eu-b has 1 matching pod, the fewest in a domain is 0, maxSkew 1)`,
        },
      },
      {
        name: 'the target-name key: each target is a domain',
        spec: { topologySpreadConstraints: [spread(TARGET_NAME_LABEL)] },
        pods: on(c2, 1),
        want: { c1: true, c2: `2 node(s) didn't match pod topology spread constraints (${TARGET_NAME_LABEL}=c2 has 1 matching pod, the fewest in a domain is 0, maxSkew 1)` },
      },
      {
        name: 'minDomains 3 with two regions: the fewest counts as 0, so one per region at most',
        spec: { topologySpreadConstraints: [spread(REGION, 1, { minDomains: 3 })] },
        pods: [...on(c1, 1), ...on(c2, 1)],
        want: {
          c1: `2 node(s) didn't match pod topology spread constraints (${REGION}=us has 1 matching pod, the fewest in a domain is 0, maxSkew 1)`,
          c2: `2 node(s) didn't match pod topology spread constraints (${REGION}=eu has 1 matching pod, the fewest in a domain is 0, maxSkew 1)`,
        },
      },
      {
        name: 'nodeAffinityPolicy Honor (the default): a region the pod may not use is no domain',
        spec: { topologySpreadConstraints: [spread(REGION)], nodeSelector: { [REGION]: 'us' } },
        pods: on(c1, 2),
        // Only us is a domain: with 2 there, the fewest is 2, and us may take a third.
        want: { c1: true, c2: true },
      },
      {
        name: 'nodeAffinityPolicy Ignore: that region is a domain, so us may not run ahead',
        spec: { topologySpreadConstraints: [spread(REGION, 1, { nodeAffinityPolicy: 'Ignore' })], nodeSelector: { [REGION]: 'us' } },
        pods: on(c1, 1),
        want: { c1: `2 node(s) didn't match pod topology spread constraints (${REGION}=us has 1 matching pod, the fewest in a domain is 0, maxSkew 1)`, c2: true },
      },
      {
        name: 'a target out of scope (another namespace, say) is no domain under Honor',
        spec: { topologySpreadConstraints: [spread(REGION)] },
        targets: [c1, target('c2', 'eu', { inScope: false })],
        pods: on(c1, 1),
        // Only us is a domain: with 1 there, the fewest is 1, and us may take a second.
        want: { c1: true, c2: true },
      },
      {
        name: 'matchLabelKeys: only the pods with the same value count',
        spec: { topologySpreadConstraints: [spread(REGION, 1, { matchLabelKeys: ['pod-template-hash'] })] },
        labels: { app: 'web', 'pod-template-hash': 'new' },
        pods: on(c1, 2).map((p) => ({ ...p, labels: { ...p.labels, 'pod-template-hash': 'old' } })),
        want: { c1: true, c2: true },
      },
      {
        name: 'a node without the key fails (missing required label)',
        spec: { topologySpreadConstraints: [spread('rack')] },
        pods: [],
        want: {
          c1: `2 ${"node(s) didn't match pod topology spread constraints (missing required label)"} (no rack)`,
          c2: `2 ${"node(s) didn't match pod topology spread constraints (missing required label)"} (no rack)`,
        },
      },
    ];
    for (const row of table) {
      it(row.name, () => {
        expect(verdicts(row.spec, row.pods, row.targets, { labels: row.labels })).to.deep.equal(row.want);
      });
    }
  });

  describe('required pod anti-affinity', () => {
    const anti = (t: V1PodAffinityTerm) => ({ affinity: { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [t] } } });
    it('one per region: a region with a matching pod is out', () => {
      expect(verdicts(anti(term(REGION)), on(c1, 1))).to.deep.equal({ c1: `2 node(s) didn't match pod anti-affinity rules (${REGION}=us has 1 matching pod)`, c2: true });
    });
    it('both regions taken: the third has nowhere to go', () => {
      const v = verdicts(anti(term(REGION)), [...on(c1, 1), ...on(c2, 1)]);
      expect(v.c1).to.match(/anti-affinity rules \(topology.kubernetes.io\/region=us has 1 matching pod\)/);
      expect(v.c2).to.match(/anti-affinity rules \(topology.kubernetes.io\/region=eu has 1 matching pod\)/);
    });
    it('on zones, a pod whose node is known keeps only its own zone', () => {
      expect(verdicts(anti(term(ZONE)), on(c2, 1, { node: 'c2-node-1' }))).to.deep.equal({ c1: true, c2: true });
    });
    it('a node without the key passes', () => {
      expect(verdicts(anti(term('rack')), on(c1, 1))).to.deep.equal({ c1: true, c2: true });
    });
    it('pods of other namespaces count only when the term names them, or its namespaceSelector selects theirs', () => {
      expect(verdicts(anti(term(REGION)), on(c1, 1, { namespace: 'other' }))).to.deep.equal({ c1: true, c2: true });
      expect(verdicts(anti(term(REGION, { namespaces: ['other'] })), on(c1, 1, { namespace: 'other' })).c1).to.be.a('string');
      const bySelector = anti(term(REGION, { namespaceSelector: { matchLabels: { team: 'a' } } }));
      expect(verdicts(bySelector, on(c1, 1, { namespace: 'other' }), [c1, c2], { namespaceLabels: { other: { team: 'a' } } }).c1).to.be.a('string');
      expect(verdicts(bySelector, on(c1, 1, { namespace: 'other' }), [c1, c2], { namespaceLabels: { other: { team: 'b' } } }).c1).to.equal(true);
    });
    it('mismatchLabelKeys: pods with the same value do not count', () => {
      const t = term(REGION, { mismatchLabelKeys: ['tenant'] });
      const pods = on(c1, 1).map((p) => ({ ...p, labels: { ...p.labels, tenant: 'a' } }));
      expect(verdicts(anti(t), pods, [c1, c2], { labels: { app: 'web', tenant: 'a' } }).c1).to.equal(true);
      expect(verdicts(anti(t), pods, [c1, c2], { labels: { app: 'web', tenant: 'b' } }).c1).to.be.a('string');
    });
  });

  describe('required pod affinity', () => {
    const affine = (...terms: V1PodAffinityTerm[]) => ({ affinity: { podAffinity: { requiredDuringSchedulingIgnoredDuringExecution: terms } } });
    it('goes where a matching pod is', () => {
      expect(verdicts(affine(term(REGION)), on(c2, 1))).to.deep.equal({ c1: `2 node(s) didn't match pod affinity rules (${REGION}=us has no matching pod)`, c2: true });
    });
    it('the first of a group that attracts itself goes anywhere', () => {
      expect(verdicts(affine(term(REGION)), [])).to.deep.equal({ c1: true, c2: true });
    });
    it('no matching pod, and the pod does not match its own term: nowhere', () => {
      const v = verdicts(affine(term(REGION)), [], [c1, c2], { labels: { app: 'other' } });
      expect(v).to.deep.equal({
        c1: `2 node(s) didn't match pod affinity rules (${REGION}=us has no matching pod)`,
        c2: `2 node(s) didn't match pod affinity rules (${REGION}=eu has no matching pod)`,
      });
    });
    it('a node without the key fails', () => {
      expect(verdicts(affine(term('rack')), on(c2, 1)).c2).to.equal(`2 node(s) didn't match pod affinity rules (no rack)`);
    });
  });

  describe("existing pods' required anti-affinity (symmetry)", () => {
    const antiX = (t: V1PodAffinityTerm = term(REGION, { labelSelector: { matchLabels: { app: 'x' } } })) => ({ podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [t] } });
    const x = unconstrainedTopology(web({}, { app: 'x' }));
    it("keeps a pod with no constraints of its own out of the region of a counted pod whose anti-affinity matches it, in kube-scheduler's words with the domain", () => {
      expect(judged(x, holding(on(c1, 1), antiX()))).to.deep.equal({
        c1: `2 node(s) didn't satisfy existing pods anti-affinity rules (${REGION}=us has 1 pod whose anti-affinity matches this pod)`,
        c2: true,
      });
    });
    it('keeps nothing out when the term does not select the pod, or names only other namespaces', () => {
      expect(judged(unconstrainedTopology(web({}, { app: 'y' })), holding(on(c1, 1), antiX()))).to.deep.equal({ c1: true, c2: true });
      expect(judged(x, holding(on(c1, 1), antiX(term(REGION, { labelSelector: { matchLabels: { app: 'x' } }, namespaces: ['other'] }))))).to.deep.equal({ c1: true, c2: true });
    });
    it("a namespaceSelector in the holder's term is judged against the labels of the pod's namespace", () => {
      const bySelector = antiX(term(REGION, { labelSelector: { matchLabels: { app: 'x' } }, namespaceSelector: { matchLabels: { team: 'a' } } }));
      const pods = on(c1, 1).map((p) => ({ ...p, terms: podTerms(web({ affinity: bySelector }), (n) => (n === 'default' ? { team: 'a' } : undefined)) }));
      expect(judged(x, pods).c1).to.be.a('string');
      const others = on(c1, 1).map((p) => ({ ...p, terms: podTerms(web({ affinity: bySelector }), () => ({ team: 'b' })) }));
      expect(judged(x, others).c1).to.equal(true);
    });
    it('on zones, a holder whose node is known keeps out only its own zone', () => {
      const verdict = topologyFilter(x, [c2], holding(on(c2, 1, { node: 'c2-node-0' }), antiX(term(ZONE, { labelSelector: { matchLabels: { app: 'x' } } }))))(c2.key, c2.nodes);
      expect(verdict.fits && verdict.nodes.map((n) => n.name)).to.deep.equal(['c2-node-1']);
    });
    it('a holder with two matching terms on the key counts as one pod', () => {
      const two = { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [term(REGION, { labelSelector: { matchLabels: { app: 'x' } } }), term(REGION, { labelSelector: {} })] } };
      expect(judged(x, holding(on(c1, 2), two)).c1).to.equal(`2 node(s) didn't satisfy existing pods anti-affinity rules (${REGION}=us has 2 pods whose anti-affinity matches this pod)`);
    });
    it("is judged after the pod's own anti-affinity, whose reason comes first", () => {
      const own = podTopology(web({ affinity: { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [term(REGION)] } } }, { app: 'x' }), () => undefined)!;
      // The holder is app=web too: both match the pod's own term.
      const pods = [...holding(on(c1, 1), antiX()), ...on(c1, 1, { app: 'web' })];
      expect(judged(own, pods).c1).to.equal(`2 node(s) didn't match pod anti-affinity rules (${REGION}=us has 2 matching pods)`);
    });
  });

  it('nodeTaintsPolicy: a zone whose only node is tainted against the pod is a domain under Ignore (the default), not under Honor', () => {
    const tainted = target('c1', 'us', { taintSecond: true });
    const passing = (policy: 'Honor' | 'Ignore') => {
      const topology = podTopology(web({ topologySpreadConstraints: [spread(ZONE, 1, { nodeTaintsPolicy: policy })] }), () => undefined)!;
      const verdict = topologyFilter(topology, [tainted], on(tainted, 1, { node: 'c1-node-0' }))(tainted.key, tainted.nodes);
      return verdict.fits && verdict.nodes.map((n) => n.name);
    };
    // Ignore: us-b is a domain with 0, so us-a (1) may not take another.
    expect(passing('Ignore')).to.deep.equal(['c1-node-1']);
    // Honor: us-a is the only domain, and its 1 is the fewest.
    expect(passing('Honor')).to.deep.equal(['c1-node-0', 'c1-node-1']);
  });

  it('keeps only the candidate nodes that pass', () => {
    const topology = podTopology(web({ topologySpreadConstraints: [spread(ZONE)] }), () => undefined)!;
    const verdict = topologyFilter(topology, [c2], on(c2, 1, { node: 'c2-node-0' }))(c2.key, c2.nodes);
    expect(verdict.fits && verdict.nodes.map((n) => n.name)).to.deep.equal(['c2-node-1']);
  });
});

describe('scheduler: softTopologyScores', () => {
  const soft = (key: string, maxSkew = 1) => spread(key, maxSkew, { whenUnsatisfiable: 'ScheduleAnyway' });
  const weighted = (kind: 'podAffinity' | 'podAntiAffinity', weight: number, t: V1PodAffinityTerm) => ({
    affinity: { [kind]: { preferredDuringSchedulingIgnoredDuringExecution: [{ weight, podAffinityTerm: t }] } },
  });
  const scores = (spec: Partial<V1PodSpec>, pods: PlacedPod[], targets: TopologyTarget[] = [c1, c2]) => {
    const topology = podTopology(web(spec), () => undefined)!;
    const out = softTopologyScores(
      topology,
      targets,
      pods,
      targets.map((t) => ({ key: t.key, nodes: t.nodes })),
    );
    return out && Object.fromEntries([...out].map(([k, v]) => [k.split('/')[1], v]));
  };

  it('is undefined for a pod with required topology only', () => {
    expect(scores({ topologySpreadConstraints: [spread(REGION)] }, [])).to.equal(undefined);
  });
  it('ScheduleAnyway spread: the region with fewer matching pods scores 100, the other 0', () => {
    expect(scores({ topologySpreadConstraints: [soft(REGION)] }, on(c1, 2))).to.deep.equal({ c1: 0, c2: 100 });
  });
  it('ScheduleAnyway spread with no pod yet: every target scores 100', () => {
    expect(scores({ topologySpreadConstraints: [soft(REGION)] }, [])).to.deep.equal({ c1: 100, c2: 100 });
  });
  it("ScheduleAnyway spread: a target's best node counts (an empty zone in c2 beside a full one)", () => {
    expect(scores({ topologySpreadConstraints: [soft(ZONE)] }, [...on(c1, 1, { node: 'c1-node-0' }), ...on(c2, 3, { node: 'c2-node-0' })])).to.deep.equal({ c1: 100, c2: 100 });
  });
  it('preferred anti-affinity: the region with a matching pod scores 0', () => {
    expect(scores(weighted('podAntiAffinity', 10, term(REGION)), on(c1, 1))).to.deep.equal({ c1: 0, c2: 100 });
  });
  it('preferred affinity: the region with a matching pod of another app scores 100', () => {
    expect(scores(weighted('podAffinity', 10, term(REGION, { labelSelector: { matchLabels: { app: 'db' } } })), on(c2, 1, { app: 'db' }))).to.deep.equal({ c1: 0, c2: 100 });
  });
  describe("existing pods' terms (symmetry)", () => {
    const x = unconstrainedTopology(web({}, { app: 'x' }));
    const selectsX = term(REGION, { labelSelector: { matchLabels: { app: 'x' } } });
    const symmetric = (pods: PlacedPod[]) => {
      const out = softTopologyScores(
        x,
        [c1, c2],
        pods,
        [c1, c2].map((t) => ({ key: t.key, nodes: t.nodes })),
      );
      return out && Object.fromEntries([...out].map(([k, v]) => [k.split('/')[1], v]));
    };
    it('is undefined when neither the pod nor a counted pod has terms to score', () => {
      expect(symmetric(on(c1, 2))).to.equal(undefined);
    });
    it("a counted pod's preferred anti-affinity that matches the pod: its region scores 0, the other 100", () => {
      expect(symmetric(holding(on(c1, 1), weighted('podAntiAffinity', 5, selectsX).affinity))).to.deep.equal({ c1: 0, c2: 100 });
    });
    it("a counted pod's preferred affinity that matches the pod: its region scores 100, the other 0", () => {
      expect(symmetric(holding(on(c2, 1), weighted('podAffinity', 5, selectsX).affinity))).to.deep.equal({ c1: 0, c2: 100 });
    });
    it("a counted pod's required affinity that matches the pod weighs 1 (hardPodAffinityWeight): it wins over nothing, loses to a preferred weight of 2", () => {
      const required = holding(on(c1, 1), { podAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [selectsX] } });
      expect(symmetric(required)).to.deep.equal({ c1: 100, c2: 0 });
      expect(symmetric([...required, ...holding(on(c2, 1), weighted('podAffinity', 2, selectsX).affinity)])).to.deep.equal({ c1: 0, c2: 100 });
    });
    it("adds up with the pod's own preferred terms before normalizing", () => {
      // The pod prefers app=db (weight 10, in c1); a pod in c2 prefers the pod with weight 20.
      const own = podTopology(web(weighted('podAffinity', 10, term(REGION, { labelSelector: { matchLabels: { app: 'db' } } })), { app: 'x' }), () => undefined)!;
      const pods = [...on(c1, 1, { app: 'db' }), ...holding(on(c2, 1), weighted('podAffinity', 20, selectsX).affinity)];
      const out = softTopologyScores(
        own,
        [c1, c2],
        pods,
        [c1, c2].map((t) => ({ key: t.key, nodes: t.nodes })),
      )!;
      expect(Object.fromEntries([...out].map(([k, v]) => [k.split('/')[1], v]))).to.deep.equal({ c1: 0, c2: 100 });
    });
  });
  it('spread and pod affinity add up', () => {
    const spec = { topologySpreadConstraints: [soft(REGION)], ...weighted('podAffinity', 10, term(REGION, { labelSelector: { matchLabels: { app: 'db' } } })) };
    expect(scores(spec, [...on(c1, 2), ...on(c1, 1, { app: 'db' })])).to.deep.equal({ c1: 100, c2: 100 });
  });
});
