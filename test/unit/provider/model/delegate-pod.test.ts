import { expect } from 'chai';
import type { V1Pod } from '@kubernetes/client-node';
import { SubtreeTable } from '../../../../provider/controller/subtree-table.js';
import { ValidationError } from '../../../../provider/core/errors.js';
import {
  HAS_FINALIZER_LABEL,
  NO_PREFIX_LABEL_REGEXP_ANNOTATION,
  PARENT_CLUSTER_NAME_LABEL,
  PARENT_NAMESPACE_ANNOTATION,
  PARENT_NAME_ANNOTATION,
  PARENT_UID_LABEL,
  SOURCE_POD_MANIFEST_ANNOTATION,
} from '../../../../provider/core/keys.js';
import {
  buildDelegatePod,
  delegateFields,
  delegateNameOf,
  delegateSelectorForProxy,
  delegateSourcePod,
  delegateSourceView,
  isOurDelegate,
  offVirtualNodes,
  savedSourcePodManifest,
  sourcePodManifest,
} from '../../../../provider/model/delegate-pod.js';
import { delegatePodName } from '../../../../provider/model/names.js';
import { referencedNames, serviceAccountTokenVolumeNames } from '../../../../provider/model/pod-references.js';
import { parentOf } from '../../../../provider/model/outage.js';
import { proxyEventFor } from '../../../../provider/model/proxy-event.js';
import { buildProxyAnnotations, buildProxyStatus, proxyFields } from '../../../../provider/model/proxy-status.js';
import { decideReplacement } from '../../../../provider/model/replacement.js';
import { sharePodParts } from '../../../../provider/model/shared-pod-parts.js';
import { podRequests } from '../../../../provider/model/resources.js';
import { DelegationReconciler } from '../../../../provider/reconcilers/delegation.js';
import { waitingRequests } from '../../../../scheduler/fit.js';
import { matchesNodeSelectorAndAffinity } from '../../../../scheduler/node-match.js';
import { mutatePod } from '../../../../webhook/mutate-pod.js';

const SA_PATH = '/var/run/secrets/kubernetes.io/serviceaccount';

function sourcePod(): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'web-abc',
      generateName: 'web-',
      namespace: 'team',
      uid: 'source-uid',
      resourceVersion: '12',
      creationTimestamp: '2024-01-01T00:00:00Z' as unknown as Date,
      labels: { app: 'web', 'pod-template-hash': '7d9c' },
      annotations: {
        'multicluster.admiralty.io/elect': '',
        'example.com/note': 'hi',
      },
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-7d9c', uid: 'rs' }],
      finalizers: ['x/y'],
    },
    spec: {
      schedulerName: 'default-scheduler',
      serviceAccountName: 'builder',
      priorityClassName: 'high',
      priority: 1000,
      preemptionPolicy: 'PreemptLowerPriority',
      overhead: { cpu: '10m' },
      schedulingGates: [{ name: 'wait' }],
      nodeSelector: { disk: 'ssd' },
      tolerations: [{ key: 'gpu', operator: 'Exists' }],
      affinity: { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [{ topologyKey: 'kubernetes.io/hostname' }] } },
      topologySpreadConstraints: [{ maxSkew: 1, topologyKey: 'zone', whenUnsatisfiable: 'DoNotSchedule' }],
      volumes: [
        { name: 'data', configMap: { name: 'cfg' } },
        {
          name: 'kube-api-access-x1y2z',
          projected: { sources: [{ serviceAccountToken: { path: 'token', expirationSeconds: 3607 } }, { configMap: { name: 'kube-root-ca.crt' } }] },
        },
        { name: 'builder-token-abcde', secret: { secretName: 'builder-token-abcde' } },
      ],
      initContainers: [{ name: 'init', image: 'busybox', volumeMounts: [{ name: 'kube-api-access-x1y2z', mountPath: SA_PATH, readOnly: true }] }],
      containers: [
        {
          name: 'main',
          image: 'nginx',
          volumeMounts: [
            { name: 'data', mountPath: '/data' },
            { name: 'kube-api-access-x1y2z', mountPath: SA_PATH, readOnly: true },
            { name: 'builder-token-abcde', mountPath: '/legacy' },
          ],
        },
      ],
      nodeName: 'source-node',
    },
  };
}

/** The proxy the webhook makes of `source` (scheduling fields rewritten), once bound. */
function proxyOf(source: V1Pod, manifest: string | null = JSON.stringify(source)): V1Pod {
  return {
    metadata: {
      name: 'web-abc',
      namespace: 'team',
      uid: 'proxy-uid',
      labels: { ...source.metadata!.labels, [HAS_FINALIZER_LABEL]: 'true' },
      annotations: { ...source.metadata!.annotations, ...(manifest === null ? {} : { [SOURCE_POD_MANIFEST_ANNOTATION]: manifest }) },
      finalizers: ['multicluster.admiralty.io/delegate'],
    },
    spec: {
      ...source.spec!,
      nodeName: 'admiralty-namespace-team-c2',
      nodeSelector: { ...source.spec!.nodeSelector, 'virtual-kubelet.io/provider': 'admiralty' },
      tolerations: [{ key: 'virtual-kubelet.io/provider', value: 'admiralty' }],
      affinity: undefined,
      topologySpreadConstraints: undefined,
    },
  };
}

/** Proxies buildDelegatePod refuses. */
const invalid: [string, () => V1Pod][] = [
  ['no manifest', () => proxyOf(sourcePod(), null)],
  ['unparsable manifest', () => proxyOf(sourcePod(), '{not: [json')],
  ['manifest is a list', () => proxyOf(sourcePod(), '[1,2]')],
  ['manifest without a spec', () => proxyOf(sourcePod(), '{"metadata":{"name":"web-abc"}}')],
  ['manifest whose spec is a list', () => proxyOf(sourcePod(), '{"spec":[]}')],
  [
    'invalid no-prefix regexp',
    () => {
      const src = sourcePod();
      src.metadata!.annotations![NO_PREFIX_LABEL_REGEXP_ANNOTATION] = '(';
      return proxyOf(src);
    },
  ],
  [
    'proxy without uid',
    () => {
      const p = proxyOf(sourcePod());
      delete p.metadata!.uid;
      return p;
    },
  ],
  [
    'proxy without containers',
    () => {
      const p = proxyOf(sourcePod());
      delete (p.spec as { containers?: unknown }).containers;
      return p;
    },
  ],
  [
    'no uid and no manifest (the first fault is the one reported)',
    () => {
      const p = proxyOf(sourcePod(), null);
      delete p.metadata!.uid;
      return p;
    },
  ],
];

describe('buildDelegatePod', () => {
  const delegate = buildDelegatePod(proxyOf(sourcePod()), { sourceClusterName: 'c1' });

  it('names it deterministically in the proxy namespace', () => {
    expect(delegate.metadata!.name).to.equal(delegatePodName('web-abc', 'c1', 'proxy-uid'));
    expect(delegate.metadata!.namespace).to.equal('team');
    expect(buildDelegatePod(proxyOf(sourcePod()), { sourceClusterName: 'c1' })).to.deep.equal(delegate);
  });

  it("names this source's copies where it is given their names, and keeps every other reference", () => {
    const pod = sourcePod();
    pod.spec!.containers[0]!.envFrom = [{ configMapRef: { name: 'settings' } }, { secretRef: { name: 'creds' } }];
    pod.spec!.imagePullSecrets = [{ name: 'regcred' }];
    const copyNames = { configmap: new Map([['settings', 'settings-copy']]), secret: new Map([['creds', 'creds-copy']]) };
    const d = buildDelegatePod(proxyOf(pod), { sourceClusterName: 'c1', copyNames });
    expect(d.spec!.containers[0]!.envFrom).to.deep.equal([{ configMapRef: { name: 'settings-copy' } }, { secretRef: { name: 'creds-copy' } }]);
    expect(d.spec!.imagePullSecrets).to.deep.equal([{ name: 'regcred' }]);
    expect(d.metadata!.name).to.equal(delegate.metadata!.name);
    expect(buildDelegatePod(proxyOf(pod), { sourceClusterName: 'c1' }).spec!.containers[0]!.envFrom).to.deep.equal(pod.spec!.containers[0]!.envFrom);
  });

  it('prefixes source labels and adds parent labels', () => {
    expect(delegate.metadata!.labels).to.deep.equal({
      'multicluster.admiralty.io/app': 'web',
      'multicluster.admiralty.io/pod-template-hash': '7d9c',
      [PARENT_UID_LABEL]: 'proxy-uid',
      [PARENT_CLUSTER_NAME_LABEL]: 'c1',
    });
  });

  it("keeps Kueue's queue-name, priority-class and pod-group-name labels unprefixed on the delegate, and its pod group annotations as they are", () => {
    const pod = sourcePod();
    pod.metadata!.labels = { ...pod.metadata!.labels, 'kueue.x-k8s.io/queue-name': 'batch', 'kueue.x-k8s.io/priority-class': 'high', 'kueue.x-k8s.io/pod-group-name': 'g1' };
    pod.metadata!.annotations = { ...pod.metadata!.annotations, 'kueue.x-k8s.io/pod-group-total-count': '4' };
    const d = buildDelegatePod(proxyOf(pod), { sourceClusterName: 'c1' });
    expect(d.metadata!.labels).to.include({
      'kueue.x-k8s.io/queue-name': 'batch',
      'kueue.x-k8s.io/priority-class': 'high',
      'kueue.x-k8s.io/pod-group-name': 'g1',
      'multicluster.admiralty.io/app': 'web',
    });
    expect(d.metadata!.annotations).to.include({ 'kueue.x-k8s.io/pod-group-total-count': '4' });
  });

  it('drops Admiralty annotations and adds parent annotations', () => {
    expect(delegate.metadata!.annotations).to.deep.equal({
      'example.com/note': 'hi',
      [PARENT_NAME_ANNOTATION]: 'web-abc',
      [PARENT_NAMESPACE_ANNOTATION]: 'team',
    });
  });

  it('carries no server-owned or ownership metadata', () => {
    expect(Object.keys(delegate.metadata!).sort()).to.deep.equal(['annotations', 'labels', 'name', 'namespace']);
    expect(delegate).to.not.have.property('status');
  });

  const cleared = ['nodeName', 'priority', 'preemptionPolicy', 'overhead', 'schedulingGates', 'ephemeralContainers'] as const;
  for (const field of cleared) {
    it(`clears spec.${field}`, () => expect(delegate.spec).to.not.have.property(field));
  }

  const kept: [string, unknown][] = [
    ['schedulerName', 'default-scheduler'],
    ['serviceAccountName', 'builder'],
    ['priorityClassName', 'high'],
    ['nodeSelector', { disk: 'ssd' }],
    ['tolerations', [{ key: 'gpu', operator: 'Exists' }]],
    ['topologySpreadConstraints', [{ maxSkew: 1, topologyKey: 'zone', whenUnsatisfiable: 'DoNotSchedule' }]],
  ];
  for (const [field, want] of kept) {
    it(`keeps spec.${field} from the source manifest`, () => {
      expect((delegate.spec as unknown as Record<string, unknown>)[field]).to.deep.equal(want);
    });
  }

  it("drops the proxy's spec.schedulingGroup (the source's PodGroup), and names the gang's PodGroup of the target and keeps it in its domain when told", () => {
    const grouped = proxyOf(sourcePod());
    (grouped.spec as { schedulingGroup?: unknown }).schedulingGroup = { podGroupName: 'train' };
    expect(buildDelegatePod(grouped, { sourceClusterName: 'c1' }).spec).to.not.have.property('schedulingGroup');
    const d = buildDelegatePod(grouped, { sourceClusterName: 'c1', gang: { podGroupName: 'train-0123456789', domain: { key: 'zone', value: 'z2' } } });
    expect((d.spec as { schedulingGroup?: unknown }).schedulingGroup).to.deep.equal({ podGroupName: 'train-0123456789' });
    expect(d.spec!.nodeSelector).to.deep.equal({ disk: 'ssd', zone: 'z2' });
  });

  it('restores affinity from the manifest, not the proxy, kept off virtual nodes', () => {
    expect(delegate.spec!.affinity).to.deep.equal(offVirtualNodes(sourcePod().spec!.affinity));
    expect(delegate.spec!.affinity!.podAntiAffinity).to.deep.equal(sourcePod().spec!.affinity!.podAntiAffinity);
  });

  it('is never elected again by the webhook of the cluster it runs in, even when that namespace is enabled there', () => {
    // The webhook's matchCondition wants the elect annotation, and mutatePod acts only on it.
    expect(delegate.metadata!.annotations).to.not.have.property('multicluster.admiralty.io/elect');
    expect(mutatePod(structuredClone(delegate))).to.deep.include({ mutated: false });
  });

  it('never lands on a virtual node of its target, even when its user tolerates every taint', () => {
    const tolerant = sourcePod();
    tolerant.spec!.tolerations = [{ operator: 'Exists' }];
    const d = buildDelegatePod(proxyOf(tolerant), { sourceClusterName: 'c1' });
    const virtualNode = { name: 'admiralty-namespace-team-c3', labels: { 'virtual-kubelet.io/provider': 'admiralty', type: 'virtual-kubelet' } };
    const realNode = { name: 'c2-node-0', labels: { 'kubernetes.io/hostname': 'c2-node-0', disk: 'ssd' } };
    expect(matchesNodeSelectorAndAffinity(d.spec!, virtualNode)).to.equal(false);
    expect(matchesNodeSelectorAndAffinity(d.spec!, realNode)).to.equal(true);
  });

  it('removes service-account token volumes and their mounts everywhere', () => {
    expect(delegate.spec!.volumes!.map((v) => v.name)).to.deep.equal(['data']);
    expect(delegate.spec!.containers[0]!.volumeMounts).to.deep.equal([{ name: 'data', mountPath: '/data' }]);
    expect(delegate.spec!.initContainers![0]).to.not.have.property('volumeMounts');
  });

  it('does not modify the proxy', () => {
    const proxy = proxyOf(sourcePod());
    const before = JSON.stringify(proxy);
    buildDelegatePod(proxy, { sourceClusterName: 'c1' });
    expect(JSON.stringify(proxy)).to.equal(before);
  });

  it('honours the no-prefix regexp of the proxy', () => {
    const src = sourcePod();
    src.metadata!.annotations![NO_PREFIX_LABEL_REGEXP_ANNOTATION] = '^app=';
    const d = buildDelegatePod(proxyOf(src), { sourceClusterName: 'c1' });
    expect(d.metadata!.labels).to.include({ app: 'web', 'multicluster.admiralty.io/pod-template-hash': '7d9c' });
  });

  it("builds the same delegate from the manifest the webhook saves as from the whole pod (an earlier version's, Admiralty's)", () => {
    const src = sourcePod();
    src.spec!.nodeSelector = { disk: 'hdd' };
    src.spec!.schedulerName = 'custom';
    const saved = savedSourcePodManifest(src);
    expect(saved.length, 'smaller than the whole pod').to.be.below(JSON.stringify(src).length / 2);
    const d = buildDelegatePod(proxyOf(src, saved), { sourceClusterName: 'c1' });
    expect(d).to.deep.equal(buildDelegatePod(proxyOf(src), { sourceClusterName: 'c1' }));
    expect(d.spec)
      .to.include({ schedulerName: 'custom' })
      .and.deep.include({ nodeSelector: { disk: 'hdd' } });
  });

  it('accepts a YAML manifest (written by Admiralty)', () => {
    const yaml = 'metadata:\n  labels:\n    app: web\nspec:\n  nodeSelector:\n    disk: hdd\n  containers:\n  - name: main\n    image: nginx\n';
    const d = buildDelegatePod(proxyOf(sourcePod(), yaml), { sourceClusterName: 'c1' });
    expect(d.spec!.nodeSelector).to.deep.equal({ disk: 'hdd' });
  });

  describe('a forged manifest on a harmless proxy', () => {
    // What source-side admission saw and allowed: an unprivileged pod.
    const harmless = sourcePod();
    // What a pod creator may write into the annotation: root on the node, another identity,
    // and annotations that relax confinement in the target.
    const forged: V1Pod = structuredClone(harmless);
    forged.metadata!.annotations!['container.apparmor.security.beta.kubernetes.io/main'] = 'unconfined';
    forged.metadata!.labels!['extra'] = 'forged';
    Object.assign(forged.spec!, {
      hostNetwork: true,
      hostPID: true,
      hostIPC: true,
      serviceAccountName: 'cluster-admin',
      automountServiceAccountToken: true,
      securityContext: { runAsUser: 0 },
      volumes: [{ name: 'root', hostPath: { path: '/' } }],
      containers: [{ name: 'main', image: 'evil', securityContext: { privileged: true }, volumeMounts: [{ name: 'root', mountPath: '/host' }] }],
      initContainers: [{ name: 'init', image: 'evil', securityContext: { privileged: true } }],
      nodeSelector: { disk: 'nvme' },
    });
    const d = buildDelegatePod(proxyOf(harmless, JSON.stringify(forged)), { sourceClusterName: 'c1' });
    const honest = buildDelegatePod(proxyOf(harmless), { sourceClusterName: 'c1' });

    for (const field of ['containers', 'initContainers', 'volumes', 'securityContext', 'hostNetwork', 'hostPID', 'hostIPC', 'serviceAccountName', 'automountServiceAccountToken'] as const) {
      it(`takes spec.${field} from the proxy`, () => expect(d.spec![field]).to.deep.equal(honest.spec![field]));
    }
    it('takes labels and annotations from the proxy', () => {
      expect(d.metadata!.labels).to.deep.equal(honest.metadata!.labels);
      expect(d.metadata!.annotations).to.deep.equal(honest.metadata!.annotations);
    });
    it('takes only the scheduling fields from the manifest', () => {
      expect(d.spec!.nodeSelector).to.deep.equal({ disk: 'nvme' });
      expect({ ...d.spec, nodeSelector: undefined }).to.deep.equal({ ...honest.spec, nodeSelector: undefined });
    });
  });

  for (const [why, make] of invalid) {
    it(`throws ValidationError: ${why}`, () => {
      expect(() => buildDelegatePod(make(), { sourceClusterName: 'c1' })).to.throw(ValidationError);
    });
  }
});

describe('delegateSourceView (for reading) and delegateSourcePod (for building)', () => {
  it("give the same pod; the view shares the proxy's objects, the pod does not", () => {
    const proxy = proxyOf(sourcePod());
    const view = delegateSourceView(proxy);
    const pod = delegateSourcePod(proxy);
    expect(view).to.deep.equal(pod);
    // The user's scheduling fields, from the manifest, in both.
    expect(view.spec!.nodeSelector).to.deep.equal({ disk: 'ssd' });
    expect(view.spec!.containers).to.equal(proxy.spec!.containers);
    expect(pod.spec!.containers).to.not.equal(proxy.spec!.containers);
    // Changing the built pod leaves the proxy as it was; the view's spec object is its own.
    pod.spec!.containers[0]!.image = 'changed';
    delete view.spec!.volumes;
    expect(proxy.spec!.containers[0]!.image).to.equal('nginx');
    expect(proxy.spec!.volumes).to.have.length(3);
  });

  it('refuse the same proxies', () => {
    for (const [, make] of invalid.filter(([what]) => what.includes('manifest'))) {
      const p = make();
      expect(() => delegateSourceView(p)).to.throw(ValidationError);
      expect(() => delegateSourcePod(p)).to.throw(ValidationError);
    }
  });
});

describe("delegateNameOf (the delegation reconciler's lookups)", () => {
  const cachedManifest = (p: V1Pod) => proxyFields(structuredClone(p));
  const valid: [string, () => V1Pod][] = [
    ['a proxy', () => proxyOf(sourcePod())],
    ['a proxy as the proxies cache keeps it', () => cachedManifest(proxyOf(sourcePod()))],
    [
      'a proxy with a no-prefix regexp',
      () => {
        const src = sourcePod();
        src.metadata!.annotations![NO_PREFIX_LABEL_REGEXP_ANNOTATION] = '^app=';
        return proxyOf(src);
      },
    ],
    ["a proxy with a YAML manifest (Admiralty's)", () => proxyOf(sourcePod(), 'spec:\n  containers:\n  - name: main\n')],
  ];
  for (const [what, make] of valid) {
    it(`names the delegate of ${what} as buildDelegatePod does`, () => {
      const name = delegateNameOf(make(), { sourceClusterName: 'c1' });
      expect(name).to.equal(buildDelegatePod(make(), { sourceClusterName: 'c1' }).metadata!.name);
      expect(name).to.equal(delegatePodName('web-abc', 'c1', 'proxy-uid'));
    });
  }
  for (const [why, make] of invalid) {
    it(`throws what buildDelegatePod throws: ${why}`, () => {
      const thrown = (f: () => unknown) => {
        try {
          f();
        } catch (err) {
          return err as Error;
        }
        expect.fail('did not throw');
      };
      const built = thrown(() => buildDelegatePod(make(), { sourceClusterName: 'c1' }));
      const named = thrown(() => delegateNameOf(make(), { sourceClusterName: 'c1' }));
      expect(named).to.be.instanceOf(ValidationError);
      expect(named.constructor).to.equal(built.constructor);
      expect(named.message).to.equal(built.message);
    });
  }
});

describe('delegate ownership helpers', () => {
  it('builds the selector', () => {
    expect(delegateSelectorForProxy('u1')).to.equal(`${PARENT_UID_LABEL}=u1`);
  });
  const cases: [string, Record<string, string> | undefined, string | undefined, boolean][] = [
    ['ours', { [PARENT_UID_LABEL]: 'u1', [PARENT_CLUSTER_NAME_LABEL]: 'c1' }, undefined, true],
    ['ours, matching uid', { [PARENT_UID_LABEL]: 'u1', [PARENT_CLUSTER_NAME_LABEL]: 'c1' }, 'u1', true],
    ['other proxy', { [PARENT_UID_LABEL]: 'u1', [PARENT_CLUSTER_NAME_LABEL]: 'c1' }, 'u2', false],
    ['other cluster', { [PARENT_UID_LABEL]: 'u1', [PARENT_CLUSTER_NAME_LABEL]: 'c9' }, undefined, false],
    ['no parent uid', { [PARENT_CLUSTER_NAME_LABEL]: 'c1' }, undefined, false],
    ['no labels', undefined, undefined, false],
  ];
  for (const [why, labels, uid, want] of cases) {
    it(`isOurDelegate: ${why}`, () => expect(isOurDelegate({ metadata: { labels } }, 'c1', uid)).to.equal(want));
  }
});

describe('savedSourcePodManifest (what the webhook saves)', () => {
  it("keeps the name, namespace and the spec's scheduling fields of the pod, as JSON", () => {
    const src = sourcePod();
    const saved = JSON.parse(savedSourcePodManifest(src));
    expect(saved.metadata).to.deep.equal({ name: 'web-abc', generateName: 'web-', namespace: 'team' });
    const { nodeSelector, affinity, tolerations, topologySpreadConstraints, schedulerName } = src.spec!;
    expect(saved.spec).to.deep.equal({ nodeSelector, affinity, tolerations, topologySpreadConstraints, schedulerName });
  });

  it("keeps generateName where the pod has no name yet (a ReplicaSet's), and nothing undefined", () => {
    const saved = savedSourcePodManifest({
      metadata: { generateName: 'web-', namespace: 'team' },
      spec: { containers: [{ name: 'main' }], schedulerName: 'default-scheduler', nodeSelector: undefined },
    });
    expect(JSON.parse(saved)).to.deep.equal({ apiVersion: 'v1', kind: 'Pod', metadata: { generateName: 'web-', namespace: 'team' }, spec: { schedulerName: 'default-scheduler' } });
  });

  it('is read back by sourcePodManifest', () => {
    const src = sourcePod();
    expect(sourcePodManifest(proxyOf(src, savedSourcePodManifest(src))).spec).to.deep.equal(JSON.parse(savedSourcePodManifest(src)).spec);
  });
});

describe('sourcePodManifest on a hostile annotation', () => {
  const proxyWith = (raw: string): V1Pod => ({ metadata: { name: 'p', namespace: 'n', annotations: { [SOURCE_POD_MANIFEST_ANNOTATION]: raw } } });
  const cases: [string, string, RegExp][] = [
    ['YAML nested 20 000 deep (the parser would recurse until the stack runs out)', `spec: ${'['.repeat(20_000)}${']'.repeat(20_000)}`, /nested deeper than 32 levels/],
    ['YAML over 64 KiB', `spec: {containers: []}\n# ${'x'.repeat(70 * 1024)}`, /larger than 64 KiB/],
    ['a YAML alias bomb', `a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nspec: [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]`, /alias/i],
    ['YAML with duplicate keys', 'spec: {containers: []}\nspec: {containers: [{name: x, image: x, securityContext: {privileged: true}}]}', /duplicate key "spec"/],
  ];
  for (const [why, raw, cause] of cases) {
    // The cause names the bound that refused the text before the parser's work could grow with
    // it (the nesting scan, the size cap, the alias cap, our duplicate check). A parse that ran
    // away instead would show as the test's timeout, not as a time asserted here.
    it(`refuses ${why} with a ValidationError whose cause names the bound`, () => {
      const err = (() => {
        try {
          sourcePodManifest(proxyWith(raw));
        } catch (e) {
          return e as ValidationError & { cause?: Error };
        }
        return expect.fail('accepted');
      })();
      expect(err).to.be.instanceOf(ValidationError);
      expect(err.message).to.match(/is neither JSON nor YAML/);
      expect(err.cause?.message).to.match(cause);
    });
  }
});

describe('offVirtualNodes', () => {
  const notVirtual = { key: 'virtual-kubelet.io/provider', operator: 'NotIn', values: ['admiralty'] };
  const zone = { key: 'zone', operator: 'In', values: ['a'] };
  const cases: [string, Parameters<typeof offVirtualNodes>[0], unknown][] = [
    ['no affinity: one term with the requirement', undefined, { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [notVirtual] }] } } }],
    [
      'pod affinity only: kept beside it',
      { podAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [{ topologyKey: 'zone' }] } },
      {
        podAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [{ topologyKey: 'zone' }] },
        nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [notVirtual] }] } },
      },
    ],
    [
      'ORed terms: ANDed into each, matchFields and preferences kept',
      {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [zone] }, { matchFields: [{ key: 'metadata.name', operator: 'In', values: ['n1'] }] }] },
          preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 1, preference: { matchExpressions: [zone] } }],
        },
      },
      {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [{ matchExpressions: [zone, notVirtual] }, { matchFields: [{ key: 'metadata.name', operator: 'In', values: ['n1'] }], matchExpressions: [notVirtual] }],
          },
          preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 1, preference: { matchExpressions: [zone] } }],
        },
      },
    ],
  ];
  for (const [why, input, want] of cases) {
    it(why, () => {
      const before = structuredClone(input);
      expect(offVirtualNodes(input)).to.deep.equal(want);
      expect(input, 'the input is left alone').to.deep.equal(before);
    });
  }

  it('is idempotent', () => {
    const once = offVirtualNodes({ nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [zone] }] } } });
    expect(offVirtualNodes(once)).to.deep.equal(once);
  });
});

describe('delegateFields (what the caches of delegates keep)', () => {
  /** A delegate as its target's apiserver returns it, in the state `status` and `nodeName` say. */
  function liveDelegate(nodeName: string | undefined, status: V1Pod['status']): V1Pod {
    const source = sourcePod();
    source.spec!.resources = { requests: { cpu: '3' } };
    source.spec!.initContainers![0]!.resources = { requests: { memory: '1Gi' } };
    source.spec!.initContainers!.push({ name: 'side', image: 'envoy', restartPolicy: 'Always', resources: { requests: { cpu: '250m' }, limits: { memory: '64Mi' } } });
    source.spec!.containers[0]!.resources = { requests: { cpu: '1' }, limits: { memory: '2Gi' } };
    source.spec!.containers[0]!.env = [
      { name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'api', key: 't' } } },
      { name: 'MODE', valueFrom: { configMapKeyRef: { name: 'modes', key: 'm' } } },
      { name: 'PLAIN', value: 'x' },
    ];
    source.spec!.containers[0]!.envFrom = [{ configMapRef: { name: 'settings' } }, { secretRef: { name: 'more' } }];
    source.spec!.containers[0]!.command = ['nginx', '-g', 'daemon off;'];
    source.spec!.containers[0]!.readinessProbe = { httpGet: { path: '/', port: 80 } };
    source.spec!.imagePullSecrets = [{ name: 'registry' }];
    const built = buildDelegatePod(proxyOf(source), { sourceClusterName: 'c1' });
    // What the target's ServiceAccount admission adds to the delegate.
    const token = { name: 'kube-api-access-t9z8y', projected: { sources: [{ serviceAccountToken: { path: 'token', expirationSeconds: 3607 } }, { configMap: { name: 'kube-root-ca.crt' } }] } };
    const mount = { name: token.name, mountPath: SA_PATH, readOnly: true };
    return {
      ...built,
      metadata: {
        ...built.metadata,
        uid: 'delegate-uid',
        resourceVersion: '7',
        creationTimestamp: '2024-01-01T00:00:00Z' as unknown as Date,
        annotations: { ...built.metadata!.annotations, 'example.com/from-target': 'x' },
      },
      spec: {
        ...built.spec!,
        ...(nodeName ? { nodeName } : {}),
        volumes: [...(built.spec!.volumes ?? []), token],
        containers: built.spec!.containers.map((c) => ({ ...c, volumeMounts: [...(c.volumeMounts ?? []), mount] })),
        overhead: { cpu: '10m' },
        dnsPolicy: 'ClusterFirst',
        enableServiceLinks: true,
        terminationGracePeriodSeconds: 30,
      },
      status,
    };
  }
  const t = '2024-01-01T00:01:00Z' as unknown as Date;
  const running = liveDelegate('n1', {
    phase: 'Running',
    conditions: [
      { type: 'PodScheduled', status: 'True', lastTransitionTime: t },
      { type: 'Ready', status: 'True', lastTransitionTime: t, observedGeneration: 1 },
    ],
    hostIP: '10.0.0.2',
    podIP: '10.244.0.9',
    podIPs: [{ ip: '10.244.0.9' }],
    startTime: t,
    containerStatuses: [{ name: 'main', ready: true, restartCount: 0, image: 'nginx', imageID: 'sha', state: { running: { startedAt: t } } }],
    initContainerStatuses: [{ name: 'init', ready: true, restartCount: 0, image: 'busybox', imageID: 'sha', state: { terminated: { exitCode: 0, startedAt: t, finishedAt: t } } }],
    qosClass: 'Burstable',
  });
  const pending = liveDelegate(undefined, {
    phase: 'Pending',
    conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: '0/2 nodes are available', lastTransitionTime: t }],
  });
  const deleting: V1Pod = { ...running, metadata: { ...running.metadata, deletionTimestamp: t, deletionGracePeriodSeconds: 30 } };
  const proxy = proxyOf(sourcePod());
  proxy.metadata!.uid = running.metadata!.labels![PARENT_UID_LABEL];
  proxy.metadata!.ownerReferences = [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-7d9c', uid: 'rs', controller: true }];

  const readers: Array<[string, (d: V1Pod) => unknown]> = [
    ['buildProxyStatus', (d) => buildProxyStatus(proxy, d)],
    ['buildProxyAnnotations', (d) => buildProxyAnnotations(proxy, d)],
    ['isOurDelegate', (d) => [isOurDelegate(d, 'c1'), isOurDelegate(d, 'c1', proxy.metadata!.uid), isOurDelegate(d, 'c3')]],
    ['delegateToProxyKey', (d) => DelegationReconciler.delegateToProxyKey(d, 'c1')],
    ['parentOf', (d) => parentOf(d)],
    ['podRequests', (d) => [...podRequests(d.spec, { includeOverhead: true })]],
    ['waitingRequests', (d) => [...waitingRequests([d], [], 'c1')]],
    ['referencedNames', (d) => referencedNames(d.spec!)],
    ['serviceAccountTokenVolumeNames', (d) => [...serviceAccountTokenVolumeNames(d.spec!)]],
    [
      'proxyEventFor',
      (d) =>
        proxyEventFor(
          {
            metadata: { name: 'e', namespace: 'team', uid: 'e-uid' },
            involvedObject: { kind: 'Pod', name: d.metadata!.name, namespace: 'team', uid: d.metadata!.uid },
            reason: 'Pulled',
            message: 'ok',
            lastTimestamp: t,
          },
          d,
          proxy,
          'c1',
          'c2',
        ),
    ],
    ...([0, 120_000, 3_600_000] as const).map((afterMs): [string, (d: V1Pod) => unknown] => [
      `decideReplacement ${afterMs} ms on`,
      (d) =>
        decideReplacement({
          proxy,
          delegate: d,
          targetName: 'c2',
          summary: { nodeNames: new Set(['n2']), readAtMs: Date.parse('2024-01-01T00:01:00Z') + afterMs },
          unschedulableAfterMs: 60_000,
          coolDownMs: 60_000,
          nowMs: Date.parse('2024-01-01T00:01:00Z') + afterMs,
        }),
    ]),
    [
      'the name, namespace, resourceVersion and deletion the informer and writes use',
      (d) => [d.metadata?.name, d.metadata?.namespace, d.metadata?.resourceVersion, d.metadata?.uid, d.metadata?.deletionTimestamp, d.metadata?.deletionGracePeriodSeconds, d.spec?.nodeName],
    ],
  ];
  for (const [state, delegate] of [
    ['running', running],
    ['pending, unschedulable', pending],
    ['deleting', deleting],
  ] as const) {
    for (const [reader, read] of readers) {
      it(`${reader} reads the same of a ${state} delegate from what is kept`, () => {
        expect(read(delegateFields(structuredClone(delegate)))).to.deep.equal(read(structuredClone(delegate)));
      });
      it(`${reader} reads the same of a ${state} delegate from what is kept, its parts shared with another delegate's (frozen)`, () => {
        const table = new SubtreeTable();
        sharePodParts(delegateFields(structuredClone(delegate)), table);
        const kept = sharePodParts(delegateFields(structuredClone(delegate)), table);
        expect(Object.isFrozen(kept.spec!.volumes!.at(-1)!.projected)).to.equal(true);
        expect(read(kept)).to.deep.equal(read(structuredClone(delegate)));
      });
    }
  }

  it('names what the readers above read (not vacuous), and drops the rest: images, commands, probes, scheduling constraints', () => {
    expect(referencedNames(running.spec!)).to.deep.equal({ configmap: ['cfg', 'modes', 'settings'], secret: ['api', 'more', 'registry'] });
    const kept = delegateFields(structuredClone(running));
    expect(Object.keys(kept.spec!).sort()).to.deep.equal(['containers', 'imagePullSecrets', 'initContainers', 'nodeName', 'overhead', 'resources', 'serviceAccountName', 'volumes']);
    expect(Object.keys(kept.spec!.containers[0]!).sort()).to.deep.equal(['env', 'envFrom', 'name', 'resources', 'volumeMounts']);
    expect(kept.spec!.initContainers!.map((c) => Object.keys(c).sort())).to.deep.equal([
      ['name', 'resources'],
      ['name', 'resources', 'restartPolicy'],
    ]);
    expect(kept.metadata).to.deep.equal(running.metadata);
    expect(kept.status).to.deep.equal(running.status);
  });
});
