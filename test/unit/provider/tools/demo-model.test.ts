import { expect } from 'chai';
import { parse } from 'yaml';
import { ELECT_ANNOTATION, TARGET_NAME_LABEL, TARGET_NAMESPACE_LABEL, VIRTUAL_KUBELET_PROVIDER_LABEL } from '../../../../provider/core/keys.js';
import {
  compareProxiesAndDelegates,
  describeTally,
  formatCounts,
  nginxDeploymentYaml,
  tallyPods,
  UNSCHEDULED,
  virtualNodesByTarget,
  type NodeLike,
  type PodLike,
} from '../../../../provider/tools/demo-model.js';

const pod = (name: string, nodeName: string | undefined, phase: string, terminating = false): PodLike => ({
  metadata: { name, ...(terminating ? { deletionTimestamp: '2030-01-01T00:00:00Z' } : {}) },
  spec: nodeName ? { nodeName } : {},
  status: { phase },
});

const vnode = (name: string, namespace: string, target: string, ready: boolean): NodeLike => ({
  metadata: { name, labels: { [VIRTUAL_KUBELET_PROVIDER_LABEL]: 'admiralty', [TARGET_NAMESPACE_LABEL]: namespace, [TARGET_NAME_LABEL]: target } },
  status: { conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
});

describe('demo model', () => {
  describe('tallyPods', () => {
    it('counts pods per node and phase, terminating ones apart', () => {
      const t = tallyPods({
        items: [
          pod('a', 'admiralty-namespace-default-c1', 'Running'),
          pod('b', 'admiralty-namespace-default-c2', 'Running'),
          pod('c', 'admiralty-namespace-default-c2', 'Running'),
          pod('d', undefined, 'Pending'),
          pod('e', 'admiralty-namespace-default-c1', 'Running', true),
        ],
      });
      expect(t).to.deep.equal({
        total: 5,
        terminating: 1,
        running: 3,
        byPhase: { Running: 3, Pending: 1 },
        byNode: { 'admiralty-namespace-default-c1': 1, 'admiralty-namespace-default-c2': 2, [UNSCHEDULED]: 1 },
      });
    });

    it('reads a real `kubectl get pods -o json` shape, and an empty list', () => {
      const list = JSON.parse(
        '{"apiVersion":"v1","items":[{"kind":"Pod","metadata":{"name":"x"},"spec":{"nodeName":"c2-node-0"},"status":{"phase":"Running"}}],"kind":"List","metadata":{"resourceVersion":""}}',
      );
      expect(tallyPods(list).byNode).to.deep.equal({ 'c2-node-0': 1 });
      expect(tallyPods({ items: [] })).to.deep.equal({ total: 0, terminating: 0, running: 0, byPhase: {}, byNode: {} });
      expect(tallyPods({}).total).to.equal(0);
    });
  });

  describe('formatCounts and describeTally', () => {
    it('sorts keys and says none when empty', () => {
      expect(formatCounts({ b: 6, a: 4 })).to.equal('a 4, b 6');
      expect(formatCounts({})).to.equal('none');
    });
    it('describes phases and terminating pods', () => {
      expect(describeTally(tallyPods({ items: [pod('a', 'n', 'Running'), pod('b', undefined, 'Pending'), pod('c', 'n', 'Running', true)] }))).to.equal('1 Pending, 1 Running, 1 terminating');
      expect(describeTally(tallyPods({ items: [] }))).to.equal('no pods');
    });
  });

  describe('virtualNodesByTarget', () => {
    it('finds the virtual nodes of one namespace by their labels', () => {
      const nodes = virtualNodesByTarget(
        {
          items: [
            vnode('admiralty-namespace-default-c1', 'default', 'c1', true),
            vnode('admiralty-namespace-default-c2', 'default', 'c2', false),
            vnode('admiralty-namespace-other-c1', 'other', 'c1', true),
            { metadata: { name: 'c1-node-0', labels: { type: 'kwok' } } },
          ],
        },
        'default',
      );
      expect([...nodes]).to.deep.equal([
        ['c1', { name: 'admiralty-namespace-default-c1', ready: true }],
        ['c2', { name: 'admiralty-namespace-default-c2', ready: false }],
      ]);
    });
  });

  describe('compareProxiesAndDelegates', () => {
    const nodes = new Map([
      ['c2', { name: 'admiralty-namespace-default-c2', ready: true }],
      ['c1', { name: 'admiralty-namespace-default-c1', ready: true }],
    ]);
    it('agrees when each virtual node has as many proxies as its cluster has delegates', () => {
      const r = compareProxiesAndDelegates({ 'admiralty-namespace-default-c1': 4, 'admiralty-namespace-default-c2': 6 }, { c1: 4, c2: 6 }, nodes);
      expect(r.consistent).to.equal(true);
      expect(r.lines).to.deep.equal(['c1: 4 proxies on admiralty-namespace-default-c1, 4 delegates in c1', 'c2: 6 proxies on admiralty-namespace-default-c2, 6 delegates in c2']);
    });
    it('disagrees otherwise, and counts missing entries as zero', () => {
      const r = compareProxiesAndDelegates({ 'admiralty-namespace-default-c2': 1 }, { c1: 1 }, nodes);
      expect(r.consistent).to.equal(false);
      expect(r.lines).to.deep.equal(['c1: 0 proxies on admiralty-namespace-default-c1, 1 delegate in c1', 'c2: 1 proxy on admiralty-namespace-default-c2, 0 delegates in c2']);
    });
  });

  describe('nginxDeploymentYaml', () => {
    it('is the user guide Deployment, elected', () => {
      const d = parse(nginxDeploymentYaml({ name: 'nginx', namespace: 'default', replicas: 10 }));
      expect(d).to.deep.include({ apiVersion: 'apps/v1', kind: 'Deployment' });
      expect(d.metadata).to.deep.equal({ name: 'nginx', namespace: 'default' });
      expect(d.spec.replicas).to.equal(10);
      expect(d.spec.selector.matchLabels).to.deep.equal({ app: 'nginx' });
      expect(d.spec.template.metadata.labels).to.deep.equal({ app: 'nginx' });
      expect(d.spec.template.metadata.annotations).to.deep.equal({ [ELECT_ANNOTATION]: '' });
      expect(d.spec.template.spec.containers).to.deep.equal([{ name: 'nginx', image: 'nginx', ports: [{ containerPort: 80 }], resources: { requests: { cpu: '100m', memory: '32Mi' } } }]);
    });
  });
});
