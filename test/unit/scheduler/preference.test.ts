import { expect } from 'chai';
import type { V1NodeSelectorRequirement, V1Pod, V1PreferredSchedulingTerm } from '@kubernetes/client-node';
import { SOURCE_POD_MANIFEST_ANNOTATION, TARGET_NAME_LABEL, TARGET_NAMESPACE_LABEL, VIRTUAL_KUBELET_PROVIDER_LABEL } from '../../../provider/core/keys.js';
import { schedulingPod } from '../../../scheduler/fit.js';
import { podPreferences, preferenceScore } from '../../../scheduler/preference.js';
import type { FitNode } from '../../../scheduler/target-nodes.js';
import { node, nodesOf, pod } from './fixtures.js';

const REGION = 'topology.kubernetes.io/region';
const ZONE = 'topology.kubernetes.io/zone';
const HOSTNAME = 'kubernetes.io/hostname';

const req = (key: string, operator: string, ...values: string[]): V1NodeSelectorRequirement => ({ key, operator, ...(values.length ? { values } : {}) });
const term = (weight: number, ...matchExpressions: V1NodeSelectorRequirement[]): V1PreferredSchedulingTerm => ({ weight, preference: { matchExpressions } });
const fieldTerm = (weight: number, ...names: string[]): V1PreferredSchedulingTerm => ({ weight, preference: { matchFields: [{ key: 'metadata.name', operator: 'In', values: names }] } });

/**
 * A proxy as the webhook makes it in exact mode: the pod's own preferred terms in the saved
 * manifest only, the proxy's (from proxy-pod-scheduling-constraints) on its spec.
 */
function proxy(own: V1PreferredSchedulingTerm[], onProxy: V1PreferredSchedulingTerm[] = []): V1Pod {
  const original = pod('web', { cpu: '1' }, own.length ? { affinity: { nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: own } } } : {});
  const p = pod(
    'web',
    { cpu: '1' },
    {
      nodeSelector: { [VIRTUAL_KUBELET_PROVIDER_LABEL]: 'admiralty' },
      ...(onProxy.length ? { affinity: { nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: onProxy } } } : {}),
    },
  );
  p.metadata!.annotations = { [SOURCE_POD_MANIFEST_ANNOTATION]: JSON.stringify(original) };
  return p;
}

/** c2 of the sandbox: region eu, zones eu-a and eu-b. */
const c2Nodes = nodesOf([node('c2-node-0', { labels: { [REGION]: 'eu', [ZONE]: 'eu-a' } }), node('c2-node-1', { labels: { [REGION]: 'eu', [ZONE]: 'eu-b' } })]);
const c2Identity = { [VIRTUAL_KUBELET_PROVIDER_LABEL]: 'admiralty', [TARGET_NAMESPACE_LABEL]: 'default', [TARGET_NAME_LABEL]: 'c2' };
const c2Virtual = { name: 'admiralty-namespace-default-c2', labels: { ...c2Identity, [REGION]: 'eu', [HOSTNAME]: 'admiralty-namespace-default-c2' } };

function score(p: V1Pod, fitting: readonly FitNode[] = c2Nodes): number | undefined {
  const prefs = podPreferences(p, schedulingPod(p));
  return prefs && preferenceScore(prefs, { identity: c2Identity, virtualNode: c2Virtual, fittingNodes: fitting });
}

describe('scheduler: podPreferences and preferenceScore', () => {
  const table: { name: string; pod: V1Pod; fitting?: readonly FitNode[]; score: number | undefined }[] = [
    { name: 'a pod that prefers nothing has no preferences', pod: proxy([]), score: undefined },
    { name: "the pod's own term on a real-node label, matched by the target's nodes", pod: proxy([term(10, req(REGION, 'In', 'eu'))]), score: 10 },
    { name: "the pod's own term that no node matches counts nothing", pod: proxy([term(10, req(REGION, 'In', 'us'))]), score: 0 },
    {
      name: 'the best fitting node counts, not the sum over nodes (as kube-scheduler scores a node)',
      pod: proxy([term(5, req(ZONE, 'In', 'eu-a')), term(7, req(ZONE, 'In', 'eu-b')), term(1, req(REGION, 'Exists'))]),
      score: 8,
    },
    {
      name: 'only the nodes that fit the pod count',
      pod: proxy([term(5, req(ZONE, 'In', 'eu-a')), term(7, req(ZONE, 'In', 'eu-b'))]),
      fitting: c2Nodes.filter((n) => n.name === 'c2-node-0'),
      score: 5,
    },
    { name: 'no fitting node: real-node terms count nothing', pod: proxy([term(5, req(REGION, 'In', 'eu'))]), fitting: [], score: 0 },
    { name: 'a hostname term is judged per node', pod: proxy([term(3, req(HOSTNAME, 'In', 'c2-node-1'))]), score: 3 },
    { name: 'a matchFields term is judged per node name', pod: proxy([fieldTerm(4, 'c2-node-0')]), score: 4 },
    { name: 'every requirement of a term must hold', pod: proxy([term(9, req(REGION, 'In', 'eu'), req(ZONE, 'In', 'us-a'))]), score: 0 },
    { name: 'an empty term matches nothing', pod: proxy([{ weight: 6, preference: {} }]), score: 0 },
    { name: 'a term of weight 0 is left out', pod: proxy([term(0, req(REGION, 'In', 'eu'))]), score: undefined },
    {
      name: "the pod's own term on a target key is judged against the target, once",
      pod: proxy([term(20, req(TARGET_NAME_LABEL, 'In', 'c2'))]),
      score: 20,
    },
    {
      name: 'a term on a target key counts even while no node fits (a burst)',
      pod: proxy([term(20, req(TARGET_NAME_LABEL, 'In', 'c2'))]),
      fitting: [],
      score: 20,
    },
    { name: 'a term whose target requirement fails counts nowhere here', pod: proxy([term(20, req(TARGET_NAME_LABEL, 'In', 'c1'), req(REGION, 'In', 'eu'))]), score: 0 },
    { name: 'a term on a target key and a node label needs both', pod: proxy([term(20, req(TARGET_NAME_LABEL, 'In', 'c2'), req(ZONE, 'In', 'eu-b'))]), score: 20 },
    {
      name: "the proxy's own term (proxy-pod-scheduling-constraints) against the virtual node's labels",
      pod: proxy([], [term(30, req(TARGET_NAME_LABEL, 'In', 'c2'))]),
      score: 30,
    },
    {
      name: "the proxy's own term on a shared label counts whatever fits",
      pod: proxy([], [term(30, req(REGION, 'In', 'eu'))]),
      fitting: [],
      score: 30,
    },
    { name: "the proxy's own term that the virtual node does not match", pod: proxy([], [term(30, req(TARGET_NAME_LABEL, 'NotIn', 'c2'))]), score: 0 },
    {
      name: "the pod's own and the proxy's own add up",
      pod: proxy([term(5, req(REGION, 'In', 'eu'))], [term(30, req(TARGET_NAME_LABEL, 'In', 'c2'))]),
      score: 35,
    },
    {
      name: 'a term the proxy keeps from the pod (use-constraints-from-spec) counts once',
      pod: proxy([term(5, req(REGION, 'In', 'eu')), term(5, req(REGION, 'In', 'eu'))], [term(5, req(REGION, 'In', 'eu')), term(5, req(REGION, 'In', 'eu')), term(2, req(REGION, 'Exists'))]),
      score: 12,
    },
  ];
  for (const row of table) {
    it(row.name, () => expect(score(row.pod, row.fitting)).to.equal(row.score));
  }

  it('a pod without the saved manifest is its own scheduling view: its terms count once, per real node', () => {
    const p = pod('bare', {}, { affinity: { nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [term(4, req(ZONE, 'In', 'eu-b'))] } } });
    expect(score(p)).to.equal(4);
  });

  it('terms compare by content, whatever the order of their fields', () => {
    const own = term(5, req(REGION, 'In', 'eu'));
    const reordered = JSON.parse(`{"preference":{"matchExpressions":[{"values":["eu"],"operator":"In","key":"${REGION}"}]},"weight":5}`);
    expect(score(proxy([own], [reordered]))).to.equal(5);
  });

  it('judges a pool of many nodes once per label set', () => {
    // 5000 nodes of one pool share one labels object: the count of matches stays one per pool.
    const labels = { [REGION]: 'eu' };
    const many: FitNode[] = Array.from({ length: 5000 }, (_, i) => ({
      name: `n${i}`,
      hostname: `n${i}`,
      labels,
      taints: [],
      unschedulable: false,
      notReady: false,
      allocatable: new Map(),
      free: new Map(),
    }));
    let reads = 0;
    const counting = new Proxy(labels, {
      getOwnPropertyDescriptor: (t, k) => {
        reads++;
        return Reflect.getOwnPropertyDescriptor(t, k);
      },
    });
    const counted = many.map((n) => ({ ...n, labels: counting }));
    expect(score(proxy([term(1, req(REGION, 'In', 'eu')), term(2, req(ZONE, 'DoesNotExist'))]), counted)).to.equal(3);
    expect(reads).to.be.at.most(4);
  });
});
