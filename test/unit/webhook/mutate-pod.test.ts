import type { V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { ValidationError } from '../../../provider/core/errors.js';
import { ELECT_ANNOTATION, HAS_FINALIZER_LABEL, PROXY_FINALIZER, PROXY_POD_SCHEDULING_CONSTRAINTS_ANNOTATION as CONSTRAINTS, SOURCE_POD_MANIFEST_ANNOTATION } from '../../../provider/core/keys.js';
import { savedSourcePodManifest } from '../../../provider/model/delegate-pod.js';
import { mutatePod } from '../../../webhook/mutate-pod.js';
import { rememberingConstraintsParser } from '../../../webhook/parse-proxy-scheduling-constraints.js';

const PROXY_TOLERATIONS = [
  { key: 'virtual-kubelet.io/provider', operator: 'Equal', value: 'admiralty', effect: 'NoSchedule' },
  { key: 'node.kubernetes.io/network-unavailable', operator: 'Exists' },
  { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute' },
  { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute' },
];

const nodeAffinity = {
  requiredDuringSchedulingIgnoredDuringExecution: {
    nodeSelectorTerms: [{ matchExpressions: [{ key: 'topology.kubernetes.io/region', operator: 'In', values: ['eu'] }] }],
  },
  preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 10, preference: { matchExpressions: [{ key: 'tier', operator: 'In', values: ['gold'] }] } }],
};
const podAntiAffinity = {
  requiredDuringSchedulingIgnoredDuringExecution: [{ topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: { app: 'web' } } }],
};
const spread = [{ maxSkew: 1, topologyKey: 'zone', whenUnsatisfiable: 'DoNotSchedule', labelSelector: { matchLabels: { app: 'web' } } }];

/** A pod as it reaches the webhook (after API defaulting, DefaultTolerationSeconds included). */
function sourcePod(annotations: Record<string, string> = { [ELECT_ANNOTATION]: '' }): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      generateName: 'web-7d9f-',
      namespace: 'default',
      labels: { app: 'web', 'pod-template-hash': '7d9f' },
      annotations,
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-7d9f', uid: 'rs-uid', controller: true, blockOwnerDeletion: true }],
      finalizers: ['example.com/keep'],
    },
    spec: {
      schedulerName: 'default-scheduler',
      serviceAccountName: 'web',
      containers: [{ name: 'web', image: 'nginx', resources: { requests: { cpu: '100m', memory: '64Mi' } } }],
      nodeSelector: { 'kubernetes.io/os': 'linux' },
      affinity: { nodeAffinity, podAntiAffinity },
      topologySpreadConstraints: spread,
      tolerations: [
        { key: 'dedicated', operator: 'Equal', value: 'gpu', effect: 'NoSchedule' },
        { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
        { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
      ],
    },
  };
}

describe('webhook: mutatePod', () => {
  it('leaves a pod without the elect annotation alone (same object)', () => {
    const pod = sourcePod({});
    const result = mutatePod(pod);
    expect(result.mutated).to.equal(false);
    expect(result.pod).to.equal(pod);
  });

  it('turns an elected pod into a proxy pod', () => {
    const pod = sourcePod();
    const before = structuredClone(pod);
    const { pod: proxy, mutated } = mutatePod(pod);
    expect(mutated).to.equal(true);
    expect(pod, 'input untouched').to.deep.equal(before);

    expect(proxy.metadata!.annotations![SOURCE_POD_MANIFEST_ANNOTATION]).to.equal(savedSourcePodManifest(before));
    // The user's scheduling fields, before the proxy's replaced them; not the rest of the pod.
    expect(JSON.parse(proxy.metadata!.annotations![SOURCE_POD_MANIFEST_ANNOTATION]!).spec).to.deep.equal({
      nodeSelector: before.spec!.nodeSelector,
      affinity: before.spec!.affinity,
      tolerations: before.spec!.tolerations,
      topologySpreadConstraints: before.spec!.topologySpreadConstraints,
      schedulerName: before.spec!.schedulerName,
    });
    expect(JSON.parse(proxy.metadata!.annotations![SOURCE_POD_MANIFEST_ANNOTATION]!).metadata).to.deep.equal({ generateName: 'web-7d9f-', namespace: 'default' });
    expect(proxy.metadata!.annotations![ELECT_ANNOTATION]).to.equal('');
    expect(proxy.metadata!.labels).to.deep.equal({ app: 'web', 'pod-template-hash': '7d9f', [HAS_FINALIZER_LABEL]: 'true' });
    expect(proxy.metadata!.finalizers).to.deep.equal(['example.com/keep', PROXY_FINALIZER]);
    expect(proxy.metadata!.ownerReferences).to.deep.equal(before.metadata!.ownerReferences);

    const spec = proxy.spec!;
    expect(spec.nodeSelector).to.deep.equal({ 'kubernetes.io/os': 'linux', 'virtual-kubelet.io/provider': 'admiralty' });
    // User toleration kept; the 300 s outage tolerations replaced by unbounded ones.
    expect(spec.tolerations).to.deep.equal([{ key: 'dedicated', operator: 'Equal', value: 'gpu', effect: 'NoSchedule' }, ...PROXY_TOLERATIONS]);
    expect(spec.tolerations!.some((t) => t.tolerationSeconds !== undefined)).to.equal(false);
    expect(spec.affinity).to.deep.equal({ nodeAffinity });
    expect(spec).to.not.have.property('topologySpreadConstraints');
    expect(spec.containers).to.deep.equal(before.spec!.containers);
    expect(spec.schedulerName).to.equal('default-scheduler');
    expect(spec.serviceAccountName).to.equal('web');
  });

  it('is idempotent on reinvocation', () => {
    const once = mutatePod(sourcePod()).pod;
    const twice = mutatePod(once);
    expect(twice.mutated).to.equal(false);
    expect(twice.pod).to.equal(once);
  });

  it('keeps the source manifest of a reinvocation (the first admission wins), after a later webhook changed the pod', () => {
    const once = mutatePod(sourcePod()).pod;
    const saved = once.metadata!.annotations![SOURCE_POD_MANIFEST_ANNOTATION];
    once.spec!.containers.push({ name: 'sidecar', image: 'proxy' });
    const { pod: proxy } = mutatePod(once);
    expect(proxy.metadata!.annotations![SOURCE_POD_MANIFEST_ANNOTATION]).to.equal(saved);
  });

  describe('refuses', () => {
    const forgedManifest = JSON.stringify({ spec: { containers: [{ name: 'web', image: 'nginx', securityContext: { privileged: true } }] } });
    const refusals: [string, () => V1Pod, RegExp][] = [
      [
        'a pod that brings its own source manifest',
        () => sourcePod({ [ELECT_ANNOTATION]: '', [SOURCE_POD_MANIFEST_ANNOTATION]: forgedManifest }),
        /sourcepod-manifest annotation is written by admiralty only/,
      ],
      [
        'a source manifest on a pod with only some of the proxy marks',
        () => {
          const p = sourcePod({ [ELECT_ANNOTATION]: '', [SOURCE_POD_MANIFEST_ANNOTATION]: forgedManifest });
          p.metadata!.finalizers!.push(PROXY_FINALIZER);
          p.metadata!.labels![HAS_FINALIZER_LABEL] = 'true';
          return p;
        },
        /written by admiralty only/,
      ],
      [
        'a pod with every proxy mark whose manifest is YAML, or not an object with a spec (ours is JSON)',
        () => {
          const p = mutatePod(sourcePod()).pod;
          p.metadata!.annotations![SOURCE_POD_MANIFEST_ANNOTATION] = `${'- '.repeat(20)}x`;
          return p;
        },
        /written by admiralty only/,
      ],
      [
        'a pod with every proxy mark whose manifest is JSON without a spec object',
        () => {
          const p = mutatePod(sourcePod()).pod;
          p.metadata!.annotations![SOURCE_POD_MANIFEST_ANNOTATION] = JSON.stringify({ spec: [] });
          return p;
        },
        /written by admiralty only/,
      ],
      [
        'an elected pod with spec.nodeName set (it would skip the scheduler)',
        () => {
          const p = sourcePod();
          p.spec!.nodeName = 'admiralty-namespace-other-t1';
          return p;
        },
        /remove spec.nodeName \("admiralty-namespace-other-t1"\)/,
      ],
    ];
    for (const [why, make, message] of refusals) {
      it(why, () => {
        let caught: unknown;
        try {
          mutatePod(make(), { namespace: 'default' });
        } catch (err) {
          caught = err;
        }
        expect(caught).to.be.instanceOf(ValidationError);
        expect((caught as Error).message).to.match(message);
      });
    }

    it('nothing on a pod that is not elected (the webhook leaves it alone)', () => {
      const p = sourcePod({ [SOURCE_POD_MANIFEST_ANNOTATION]: forgedManifest });
      p.spec!.nodeName = 'n1';
      expect(mutatePod(p).mutated).to.equal(false);
    });
  });

  it('drops pod affinity without node affinity entirely, and does not duplicate tolerations', () => {
    const pod = sourcePod();
    pod.spec!.affinity = { podAntiAffinity };
    pod.spec!.tolerations = [{ key: 'virtual-kubelet.io/provider', value: 'admiralty', effect: 'NoSchedule' }];
    const { pod: proxy } = mutatePod(pod);
    expect(proxy.spec).to.not.have.property('affinity');
    expect(proxy.spec!.tolerations).to.deep.equal([{ key: 'virtual-kubelet.io/provider', value: 'admiralty', effect: 'NoSchedule' }, ...PROXY_TOLERATIONS.slice(1)]);
  });

  it('adds nodeSelector and tolerations from the constraints annotation and replaces affinity and spread', () => {
    const constraints = [
      'nodeSelector:',
      '  topology.kubernetes.io/region: us',
      'tolerations:',
      '- key: spot',
      '  operator: Exists',
      'affinity:',
      '  nodeAffinity:',
      '    requiredDuringSchedulingIgnoredDuringExecution:',
      '      nodeSelectorTerms:',
      '      - matchExpressions:',
      '        - {key: multicluster.admiralty.io/cluster-target-name, operator: In, values: [a, b]}',
      'topologySpreadConstraints:',
      '- maxSkew: 2',
      '  topologyKey: multicluster.admiralty.io/cluster-target-name',
      '  whenUnsatisfiable: ScheduleAnyway',
    ].join('\n');
    const pod = sourcePod({ [ELECT_ANNOTATION]: '', [CONSTRAINTS]: constraints });
    const { pod: proxy } = mutatePod(pod);
    const spec = proxy.spec!;
    expect(spec.nodeSelector).to.deep.equal({
      'kubernetes.io/os': 'linux',
      'topology.kubernetes.io/region': 'us',
      'virtual-kubelet.io/provider': 'admiralty',
    });
    expect(spec.tolerations).to.deep.equal([{ key: 'dedicated', operator: 'Equal', value: 'gpu', effect: 'NoSchedule' }, { key: 'spot', operator: 'Exists' }, ...PROXY_TOLERATIONS]);
    expect(spec.affinity).to.deep.equal({
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [{ matchExpressions: [{ key: 'multicluster.admiralty.io/cluster-target-name', operator: 'In', values: ['a', 'b'] }] }],
        },
      },
    });
    expect(spec.topologySpreadConstraints).to.deep.equal([{ maxSkew: 2, topologyKey: 'multicluster.admiralty.io/cluster-target-name', whenUnsatisfiable: 'ScheduleAnyway' }]);
    // The saved manifest still has the user's own constraints, for the delegate.
    const saved = JSON.parse(proxy.metadata!.annotations![SOURCE_POD_MANIFEST_ANNOTATION]!) as V1Pod;
    expect(saved.spec!.affinity).to.deep.equal({ nodeAffinity, podAntiAffinity });
    expect(mutatePod(proxy).mutated, 'idempotent with constraints').to.equal(false);
  });

  it('keeps the proxy node affinity when the constraints annotation has no affinity', () => {
    const pod = sourcePod({ [ELECT_ANNOTATION]: '', [CONSTRAINTS]: 'tolerations: [{key: spot, operator: Exists}]' });
    const { pod: proxy } = mutatePod(pod);
    expect(proxy.spec!.affinity).to.deep.equal({ nodeAffinity });
    expect(proxy.spec).to.not.have.property('topologySpreadConstraints');
  });

  const malformed: Array<[string, string, RegExp]> = [
    ['bad YAML', 'nodeSelector: [unclosed', /not valid YAML/],
    ['an unknown top-level field', 'nodeselector: {a: b}', /nodeselector is not a supported field/],
    ['an unsupported PodSpec field', 'containers: []', /containers is not a supported field/],
    ['an unknown nested field', 'tolerations:\n- key: a\n  tolerationseconds: 5', /tolerations\[0\]\.tolerationseconds is not a supported field/],
    ['a wrong type', 'nodeSelector: {a: 1}', /nodeSelector\.a must be a string/],
    ['a missing required field', 'topologySpreadConstraints: [{maxSkew: 1, topologyKey: z}]', /topologySpreadConstraints\[0\]\.whenUnsatisfiable is required/],
    ['a duplicate key', 'nodeSelector: {a: b}\nnodeSelector: {c: d}', /not valid YAML/],
    ['a scalar', 'just text', /must be a mapping/],
    // Keys every object inherits are no fields (once found on the schema: an empty value was
    // accepted, any other a TypeError, answered as an internal error).
    ['toString, which objects inherit', 'toString: {}', /toString is not a supported field/],
    ['constructor, which objects inherit', 'constructor: {x: 1}', /constructor is not a supported field/],
    ['__proto__', '__proto__: {a: 1}', /__proto__ is not a supported field/],
    ['an inherited key nested', 'affinity: {hasOwnProperty: {}}', /affinity\.hasOwnProperty is not a supported field/],
    ['an inherited key in a list item', 'tolerations: [{valueOf: {}}]', /tolerations\[0\]\.valueOf is not a supported field/],
  ];
  for (const [what, text, message] of malformed) {
    it(`refuses a constraints annotation with ${what}`, () => {
      const pod = sourcePod({ [ELECT_ANNOTATION]: '', [CONSTRAINTS]: text });
      let caught: unknown;
      try {
        mutatePod(pod);
      } catch (err) {
        caught = err;
      }
      expect(caught).to.be.instanceOf(ValidationError);
      expect((caught as Error).message)
        .to.include(CONSTRAINTS)
        .and.match(message);
    });
  }

  it('refuses, without its internals, a constraints annotation its parser fails on', () => {
    const bug = new TypeError("Cannot read properties of undefined (reading 'x')");
    const parseConstraints = () => {
      throw bug;
    };
    let caught: unknown;
    try {
      mutatePod(sourcePod({ [ELECT_ANNOTATION]: '', [CONSTRAINTS]: 'nodeSelector: {a: b}' }), { parseConstraints });
    } catch (err) {
      caught = err;
    }
    expect(caught).to.be.instanceOf(ValidationError);
    expect((caught as Error).message).to.equal(`annotation ${CONSTRAINTS} could not be read: keep to nodeSelector, tolerations, affinity and topologySpreadConstraints, as in a PodSpec`);
    expect((caught as Error).cause, 'kept for the log').to.equal(bug);
  });
});

describe('mutatePod target scope', () => {
  const elected = (affinity?: any): V1Pod => ({
    metadata: { name: 'p', namespace: 'team-a', annotations: { 'multicluster.admiralty.io/elect': '' } },
    spec: { containers: [{ name: 'c', image: 'x' }], ...(affinity ? { affinity } : {}) },
  });
  const terms = (pod: V1Pod) => pod.spec!.affinity!.nodeAffinity!.requiredDuringSchedulingIgnoredDuringExecution!.nodeSelectorTerms;

  it('limits a proxy to Targets of its namespace or to ClusterTargets', () => {
    const { pod } = mutatePod(elected(), { namespace: 'team-a' });
    expect(terms(pod)).to.deep.equal([
      { matchExpressions: [{ key: 'multicluster.admiralty.io/target-namespace', operator: 'In', values: ['team-a'] }] },
      { matchExpressions: [{ key: 'multicluster.admiralty.io/cluster-target-name', operator: 'Exists' }] },
    ]);
  });

  it("ANDs the scope into each of the user's required terms", () => {
    const user = { key: 'topology.kubernetes.io/region', operator: 'In', values: ['eu'] };
    const { pod } = mutatePod(elected({ nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [user] }] } } }), { namespace: 'team-a' });
    expect(terms(pod)).to.have.length(2);
    for (const t of terms(pod)) expect(t.matchExpressions![0]).to.deep.equal(user);
    expect(terms(pod)[0]!.matchExpressions![1]!.key).to.equal('multicluster.admiralty.io/target-namespace');
    expect(terms(pod)[1]!.matchExpressions![1]!.key).to.equal('multicluster.admiralty.io/cluster-target-name');
  });

  // A term that mentions our keys is not a scoped term: each of these once let a pod of team-a
  // onto virtual nodes of other namespaces' Targets.
  const hostile: [string, any][] = [
    ['target-namespace In [other]', { key: 'multicluster.admiralty.io/target-namespace', operator: 'In', values: ['team-b'] }],
    ['target-namespace Exists', { key: 'multicluster.admiralty.io/target-namespace', operator: 'Exists' }],
    ['target-namespace NotIn [own]', { key: 'multicluster.admiralty.io/target-namespace', operator: 'NotIn', values: ['team-a'] }],
    ['target-name In [x]', { key: 'multicluster.admiralty.io/target-name', operator: 'In', values: ['t1'] }],
    ['cluster-target-name DoesNotExist', { key: 'multicluster.admiralty.io/cluster-target-name', operator: 'DoesNotExist' }],
  ];
  for (const [why, expression] of hostile) {
    for (const where of ['affinity', 'proxy-pod-scheduling-constraints'] as const) {
      it(`ANDs the scope into a user term with ${why} (${where})`, () => {
        const affinity = { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [expression] }] } } };
        const pod = where === 'affinity' ? elected(affinity) : elected();
        if (where !== 'affinity') pod.metadata!.annotations![CONSTRAINTS] = JSON.stringify({ affinity });
        const out = mutatePod(pod, { namespace: 'team-a' }).pod;
        expect(terms(out)).to.deep.equal([
          { matchExpressions: [expression, { key: 'multicluster.admiralty.io/target-namespace', operator: 'In', values: ['team-a'] }] },
          { matchExpressions: [expression, { key: 'multicluster.admiralty.io/cluster-target-name', operator: 'Exists' }] },
        ]);
      });
    }
  }

  it('leaves a user term that already holds an exact scope expression as it is (it can only narrow)', () => {
    const mine = [
      { key: 'multicluster.admiralty.io/cluster-target-name', operator: 'In', values: ['a'] },
      { key: 'multicluster.admiralty.io/cluster-target-name', operator: 'Exists' },
    ];
    const pod = elected({ nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: mine }] } } });
    expect(terms(mutatePod(pod, { namespace: 'team-a' }).pod)).to.deep.equal([{ matchExpressions: mine }]);
  });

  it('is idempotent on reinvocation', () => {
    const once = mutatePod(elected(), { namespace: 'team-a' }).pod;
    const twice = mutatePod(once, { namespace: 'team-a' });
    expect(twice.mutated).to.equal(false);
  });

  it('leaves the saved manifest without the scope (the delegate does not need it)', () => {
    const { pod } = mutatePod(elected(), { namespace: 'team-a' });
    const saved = JSON.parse(pod.metadata!.annotations!['multicluster.admiralty.io/sourcepod-manifest']!);
    expect(saved.spec.affinity).to.equal(undefined);
  });
});

describe('mutatePod exact mode (a proxy scheduler with the extender)', () => {
  const exact = { namespace: 'default', schedulerName: 'admiralty-proxy' };

  it('gives the proxy the proxy scheduler and takes the user’s node constraints off it', () => {
    const { pod } = mutatePod(sourcePod(), exact);
    expect(pod.spec!.schedulerName).to.equal('admiralty-proxy');
    expect(pod.spec!.nodeSelector).to.deep.equal({ 'virtual-kubelet.io/provider': 'admiralty' });
    // Only the target scope is left of the affinity: no user term, no preferred term.
    const terms = pod.spec!.affinity!.nodeAffinity!.requiredDuringSchedulingIgnoredDuringExecution!.nodeSelectorTerms;
    expect(terms.flatMap((t) => t.matchExpressions!.map((e) => e.key))).to.deep.equal(['multicluster.admiralty.io/target-namespace', 'multicluster.admiralty.io/cluster-target-name']);
    expect(pod.spec!.affinity!.nodeAffinity!.preferredDuringSchedulingIgnoredDuringExecution).to.equal(undefined);
    // The delegate gets them back from the manifest, with the pod's own scheduler.
    const saved = JSON.parse(pod.metadata!.annotations![SOURCE_POD_MANIFEST_ANNOTATION]!);
    expect(saved.spec.nodeSelector).to.deep.equal({ 'kubernetes.io/os': 'linux' });
    expect(saved.spec.schedulerName).to.equal('default-scheduler');
  });

  it('keeps the constraints annotation’s nodeSelector and affinity: they are about virtual nodes', () => {
    const p = sourcePod({ [ELECT_ANNOTATION]: '', [CONSTRAINTS]: JSON.stringify({ nodeSelector: { 'topology.kubernetes.io/region': 'eu' } }) });
    const { pod } = mutatePod(p, exact);
    expect(pod.spec!.nodeSelector).to.deep.equal({ 'topology.kubernetes.io/region': 'eu', 'virtual-kubelet.io/provider': 'admiralty' });
  });

  it('keeps the user’s constraints on the proxy for a pod that asks (use-constraints-from-spec-for-proxy-pod-scheduling)', () => {
    const { pod } = mutatePod(sourcePod({ [ELECT_ANNOTATION]: '', 'multicluster.admiralty.io/use-constraints-from-spec-for-proxy-pod-scheduling': '' }), exact);
    expect(pod.spec!.schedulerName).to.equal('admiralty-proxy');
    expect(pod.spec!.nodeSelector).to.deep.equal({ 'kubernetes.io/os': 'linux', 'virtual-kubelet.io/provider': 'admiralty' });
    expect(pod.spec!.affinity!.nodeAffinity!.preferredDuringSchedulingIgnoredDuringExecution).to.have.length(1);
  });

  it('is idempotent on reinvocation', () => {
    const once = mutatePod(sourcePod(), exact).pod;
    expect(mutatePod(once, exact).mutated).to.equal(false);
  });

  it('leaves the scheduler alone without a proxy scheduler name', () => {
    expect(mutatePod(sourcePod(), { namespace: 'default' }).pod.spec!.schedulerName).to.equal('default-scheduler');
    expect(mutatePod(sourcePod(), { namespace: 'default', schedulerName: '' }).pod.spec!.nodeSelector).to.have.property('kubernetes.io/os');
  });
});

describe("mutatePod with the webhook routes' remembering constraints parser", () => {
  const texts = [
    'tolerations: [{key: spot, operator: Exists}]',
    JSON.stringify({ nodeSelector: { 'topology.kubernetes.io/region': 'eu' }, affinity: { nodeAffinity } }),
    JSON.stringify({ topologySpreadConstraints: spread }),
  ];

  it('makes the same proxies as the plain parser, again and again, each one its own (changing one changes no other)', () => {
    const parseConstraints = rememberingConstraintsParser(2); // fewer than the texts: some are forgotten and parsed again
    for (let round = 0; round < 3; round++) {
      for (const text of texts) {
        for (const schedulerName of [undefined, 'admiralty-proxy']) {
          const plain = mutatePod(sourcePod({ [ELECT_ANNOTATION]: '', [CONSTRAINTS]: text }), { schedulerName }).pod;
          const remembered = mutatePod(sourcePod({ [ELECT_ANNOTATION]: '', [CONSTRAINTS]: text }), { schedulerName, parseConstraints }).pod;
          expect(remembered).to.deep.equal(plain);
          // A caller that changes what it got (the JSON patch is made from it) changes nothing remembered.
          remembered.spec!.tolerations?.push({ key: 'scribbled' });
          if (remembered.spec!.affinity?.nodeAffinity) remembered.spec!.affinity.nodeAffinity = {};
          remembered.spec!.topologySpreadConstraints?.splice(0);
        }
      }
    }
  });

  it('refuses an invalid text every time, as the plain parser does', () => {
    const parseConstraints = rememberingConstraintsParser();
    for (let i = 0; i < 2; i++) {
      expect(() => mutatePod(sourcePod({ [ELECT_ANNOTATION]: '', [CONSTRAINTS]: 'nodeSelector: [' }), { parseConstraints })).to.throw(ValidationError);
      expect(() => mutatePod(sourcePod({ [ELECT_ANNOTATION]: '', [CONSTRAINTS]: 'nodeName: x' }), { parseConstraints })).to.throw(ValidationError);
    }
  });
});
