import { expect } from 'chai';
import { ValidationError } from '../../../../provider/core/errors.js';
import {
  buildKueueSetup,
  checkDnsLabel,
  defaultNamespaceSelector,
  findKueueTarget,
  flavorName,
  KUEUE_API_VERSION,
  parseNamespaceSelector,
  parseQuotaFlags,
  selectKueueTargets,
  type KueueSetupOptions,
  type KueueSetupTarget,
} from '../../../../provider/model/kueue-setup.js';
import { virtualNodeName } from '../../../../provider/model/names.js';

const target = (name: string, namespace = 'team', priority = 0, capacity?: Record<string, string>): KueueSetupTarget => ({
  ref: { kind: 'Target', namespace, name },
  priority,
  ...(capacity ? { capacity } : {}),
});
const clusterTarget = (name: string, priority = 0, capacity?: Record<string, string>): KueueSetupTarget => ({
  ref: { kind: 'ClusterTarget', namespace: '', name },
  priority,
  ...(capacity ? { capacity } : {}),
});
const names = (ts: readonly KueueSetupTarget[]) => ts.map((t) => (t.ref.kind === 'Target' ? `${t.ref.namespace}/${t.ref.name}` : `ClusterTarget/${t.ref.name}`));
const options = (targets: KueueSetupTarget[], more: Partial<KueueSetupOptions> = {}): KueueSetupOptions => ({
  targets,
  clusterQueue: 'admiralty',
  flavorPrefix: 'admiralty',
  preemption: 'Never',
  ...more,
});

describe('kueue setup: the manifest model', () => {
  describe('selectKueueTargets', () => {
    const c1 = target('c1');
    const c2 = target('c2', 'team', -5);
    const c3 = target('c3', 'team', 10);
    const shared = clusterTarget('c1');
    const gpu = clusterTarget('gpu');

    it('orders every target by spec.placement.priority (lower first), then name, a Target before a ClusterTarget of the same name', () => {
      expect(names(selectKueueTargets([c3, gpu, shared, c1, c2]))).to.deep.equal(['team/c2', 'team/c1', 'ClusterTarget/c1', 'ClusterTarget/gpu', 'team/c3']);
    });

    it('keeps the order --targets gives, whatever the priorities', () => {
      expect(names(selectKueueTargets([c1, c2, c3, gpu], ['c3', 'gpu', 'team/c1']))).to.deep.equal(['team/c3', 'ClusterTarget/gpu', 'team/c1']);
    });

    it('refuses an unknown target and lists the known ones', () => {
      expect(() => selectKueueTargets([c1, c2], ['c9'])).to.throw(ValidationError, 'unknown target "c9" (known: team/c1, team/c2)');
    });

    it('refuses a bare name that both a Target and a ClusterTarget have, and takes NAMESPACE/NAME or ClusterTarget/NAME for it', () => {
      expect(() => findKueueTarget([c1, shared], 'c1')).to.throw(ValidationError, 'target "c1" is ambiguous: team/c1, ClusterTarget/c1');
      expect(findKueueTarget([c1, shared], 'team/c1')).to.equal(c1);
      expect(findKueueTarget([c1, shared], 'ClusterTarget/c1')).to.equal(shared);
    });

    it('refuses a target listed twice', () => {
      expect(() => selectKueueTargets([c1, c2], ['c1', 'team/c1'])).to.throw(ValidationError, 'target team/c1 is listed twice (as "team/c1")');
    });

    it('refuses when there is no target at all', () => {
      expect(() => selectKueueTargets([])).to.throw(ValidationError, 'no Target nor ClusterTarget to make flavors of');
    });

    it('refuses Targets of two namespaces, which no one ClusterQueue can serve, and takes ClusterTargets beside one namespace', () => {
      expect(() => selectKueueTargets([c1, target('c1', 'other')], ['team/c1', 'other/c1'])).to.throw(ValidationError, 'Targets of namespaces other, team');
      expect(names(selectKueueTargets([c1, gpu]))).to.deep.equal(['team/c1', 'ClusterTarget/gpu']);
    });

    it('refuses more than the 64 flavors a resource group takes', () => {
      expect(() => selectKueueTargets(Array.from({ length: 65 }, (_, i) => clusterTarget(`t${i}`)))).to.throw(ValidationError, '65 targets: a ClusterQueue');
    });
  });

  describe('parseQuotaFlags', () => {
    it('reads amounts for every flavor and per target, as given', () => {
      const q = parseQuotaFlags(['cpu=8,memory=16Gi', 'pods=100', 'c2:cpu=2', 'ClusterTarget/gpu:cpu=500m,nvidia.com/gpu=4'])!;
      expect([...q.all]).to.deep.equal([
        ['cpu', '8'],
        ['memory', '16Gi'],
        ['pods', '100'],
      ]);
      expect([...q.byTarget].map(([t, m]) => [t, [...m]])).to.deep.equal([
        ['c2', [['cpu', '2']]],
        [
          'ClusterTarget/gpu',
          [
            ['cpu', '500m'],
            ['nvidia.com/gpu', '4'],
          ],
        ],
      ]);
    });

    it('is undefined without --quota: quotas then come from capacity', () => {
      expect(parseQuotaFlags([])).to.equal(undefined);
    });

    const bad: [string, string, string][] = [
      ['a list without =', 'cpu', 'write RESOURCE=QUANTITY'],
      ['an empty amount', 'cpu=', 'write RESOURCE=QUANTITY'],
      ['a quantity that does not parse', 'cpu=eight', 'cpu="eight" is not a quantity'],
      ['a negative quantity', 'memory=-1Gi', 'memory=-1Gi: a quota is at least 0'],
      ['a name that is no resource', 'c p u=1', '"c p u" is not a resource name'],
      ['a resource twice in one list', 'cpu=1,cpu=2', 'cpu is given twice'],
    ];
    for (const [why, text, message] of bad) {
      it(`refuses ${why}: ${JSON.stringify(text)}`, () => expect(() => parseQuotaFlags([text])).to.throw(ValidationError, message));
    }
    it('refuses a resource given in two --quota flags, and one target given twice', () => {
      expect(() => parseQuotaFlags(['cpu=1', 'cpu=2'])).to.throw(ValidationError, 'cpu is given twice');
      expect(() => parseQuotaFlags(['c2:cpu=1', 'c2:memory=2Gi'])).to.throw(ValidationError, 'target c2 is given twice');
    });
  });

  describe('parseNamespaceSelector', () => {
    const cases: [string, object][] = [
      ['', {}],
      ['team=a', { matchLabels: { team: 'a' } }],
      ['team==a,multicluster-scheduler=enabled', { matchLabels: { team: 'a', 'multicluster-scheduler': 'enabled' } }],
      ['tier!=dev', { matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['dev'] }] }],
      [
        'batch, !legacy',
        {
          matchExpressions: [
            { key: 'batch', operator: 'Exists' },
            { key: 'legacy', operator: 'DoesNotExist' },
          ],
        },
      ],
      [
        'env in (prod, staging),example.com/x notin (y)',
        {
          matchExpressions: [
            { key: 'env', operator: 'In', values: ['prod', 'staging'] },
            { key: 'example.com/x', operator: 'NotIn', values: ['y'] },
          ],
        },
      ],
    ];
    for (const [text, want] of cases) it(`reads ${JSON.stringify(text)} as kubectl -l does`, () => expect(parseNamespaceSelector(text)).to.deep.equal(want));
    for (const [text, message] of [
      ['team=a=b', 'cannot read'],
      ['env in (a', 'cannot read'],
      ['a=b,a=c', 'a cannot equal both b and c'],
      ['team=bad value', 'cannot read'],
      ['team=-x', '"-x" is not a label value'],
    ] as const) {
      it(`refuses ${JSON.stringify(text)}`, () => expect(() => parseNamespaceSelector(text)).to.throw(ValidationError, message));
    }
  });

  describe('checkDnsLabel', () => {
    it('takes a DNS-1123 label and refuses upper case, a leading dash and a name over the limit', () => {
      expect(checkDnsLabel('--cluster-queue', 'batch-1')).to.equal('batch-1');
      for (const bad of ['Batch', '-batch', 'a.b', '', 'x'.repeat(64)]) expect(() => checkDnsLabel('--cluster-queue', bad)).to.throw(ValidationError, '--cluster-queue');
    });
  });

  describe('buildKueueSetup', () => {
    const c1 = target('c1', 'team', 0, { cpu: '16', memory: '64Gi', pods: '220', 'ephemeral-storage': '1Ti', 'hugepages-2Mi': '0' });
    const c2 = target('c2', 'team', 0, { cpu: '8', memory: '32Gi', pods: '110', 'nvidia.com/gpu': '2' });

    it('makes one ResourceFlavor per target, named as its virtual node, with its identity labels as nodeLabels and a toleration of the virtual node taint', () => {
      const { objects } = buildKueueSetup(options([c2, c1], { quotas: parseQuotaFlags(['cpu=4']) }));
      const flavors = objects.filter((o) => o.kind === 'ResourceFlavor');
      expect(flavors.map((f) => f.metadata.name)).to.deep.equal([virtualNodeName(c2.ref), virtualNodeName(c1.ref)]);
      expect(flavors[0]).to.deep.equal({
        apiVersion: KUEUE_API_VERSION,
        kind: 'ResourceFlavor',
        metadata: { name: 'admiralty-namespace-team-c2', labels: { 'app.kubernetes.io/managed-by': 'admiralty-kueue-setup' } },
        spec: {
          nodeLabels: { 'virtual-kubelet.io/provider': 'admiralty', 'multicluster.admiralty.io/target-namespace': 'team', 'multicluster.admiralty.io/target-name': 'c2' },
          tolerations: [{ key: 'virtual-kubelet.io/provider', operator: 'Equal', value: 'admiralty', effect: 'NoSchedule' }],
        },
      });
    });

    it("gives a ClusterTarget's flavor its cluster-target-name label", () => {
      const { objects } = buildKueueSetup(options([clusterTarget('gpu')], { quotas: parseQuotaFlags(['cpu=1']) }));
      expect(objects[0]!.metadata.name).to.equal('admiralty-cluster-gpu');
      expect(objects[0]!.spec.nodeLabels).to.deep.equal({ 'virtual-kubelet.io/provider': 'admiralty', 'multicluster.admiralty.io/cluster-target-name': 'gpu' });
    });

    it('lists the flavors in the targets order in one resource group, each with the --quota amounts, a target its own amounts where it has them', () => {
      const { objects } = buildKueueSetup(options([c2, c1], { quotas: parseQuotaFlags(['cpu=4,memory=8Gi', 'c1:cpu=12']) }));
      const cq = objects.find((o) => o.kind === 'ClusterQueue')!;
      expect(cq.spec.resourceGroups).to.deep.equal([
        {
          coveredResources: ['cpu', 'memory'],
          flavors: [
            {
              name: 'admiralty-namespace-team-c2',
              resources: [
                { name: 'cpu', nominalQuota: '4' },
                { name: 'memory', nominalQuota: '8Gi' },
              ],
            },
            {
              name: 'admiralty-namespace-team-c1',
              resources: [
                { name: 'cpu', nominalQuota: '12' },
                { name: 'memory', nominalQuota: '8Gi' },
              ],
            },
          ],
        },
      ]);
      expect(cq.spec.flavorFungibility).to.deep.equal({ whenCanBorrow: 'TryNextFlavor', whenCanPreempt: 'TryNextFlavor' });
      expect(cq.spec.preemption).to.deep.equal({ withinClusterQueue: 'Never' });
      expect(cq.spec.queueingStrategy).to.equal('BestEffortFIFO');
    });

    it("without --quota, quotas each flavor at its target's capacity: cpu, memory, pods and every extended resource, 0 where a target has none", () => {
      const { objects } = buildKueueSetup(options([c1, c2]));
      const group = (objects.find((o) => o.kind === 'ClusterQueue')!.spec.resourceGroups as { coveredResources: string[]; flavors: { resources: { name: string; nominalQuota: string }[] }[] }[])[0]!;
      expect(group.coveredResources).to.deep.equal(['cpu', 'memory', 'pods', 'nvidia.com/gpu']);
      expect(group.flavors.map((f) => f.resources.map((r) => r.nominalQuota))).to.deep.equal([
        ['16', '64Gi', '220', '0'],
        ['8', '32Gi', '110', '2'],
      ]);
    });

    it('refuses to quota from capacity a target whose virtual node could not be read', () => {
      expect(() => buildKueueSetup(options([target('c3')]))).to.throw(ValidationError, 'the virtual node of target team/c3 could not be read for its capacity: give quotas with --quota');
    });

    it('refuses a flavor left without a quota for a resource another one has', () => {
      expect(() => buildKueueSetup(options([c1, c2], { quotas: parseQuotaFlags(['cpu=4', 'c2:memory=8Gi']) }))).to.throw(ValidationError, '--quota: no memory quota for target team/c1');
    });

    it('refuses a per-target quota of a target that is not in the ClusterQueue, or unknown', () => {
      const c3 = target('c3');
      expect(() => buildKueueSetup(options([c1], { quotas: parseQuotaFlags(['cpu=4', 'c3:cpu=1']) }), [c1, c3])).to.throw(ValidationError, 'target team/c3 is not one of the ClusterQueue');
      expect(() => buildKueueSetup(options([c1], { quotas: parseQuotaFlags(['cpu=4', 'c9:cpu=1']) }))).to.throw(ValidationError, 'unknown target "c9"');
    });

    it("admits by default from the Targets' namespace only, and only when it is opted in to Admiralty; from every opted-in namespace for ClusterTargets", () => {
      expect(defaultNamespaceSelector([c1, clusterTarget('gpu')])).to.deep.equal({ matchLabels: { 'kubernetes.io/metadata.name': 'team', 'multicluster-scheduler': 'enabled' } });
      expect(defaultNamespaceSelector([clusterTarget('gpu')])).to.deep.equal({ matchLabels: { 'multicluster-scheduler': 'enabled' } });
      const { objects } = buildKueueSetup(options([c1], { quotas: parseQuotaFlags(['cpu=1']) }));
      expect(objects.find((o) => o.kind === 'ClusterQueue')!.spec.namespaceSelector).to.deep.equal(defaultNamespaceSelector([c1]));
    });

    it("uses the given namespace selector, with a warning when it does not pin the Targets' namespace", () => {
      const { objects, warnings } = buildKueueSetup(options([c1], { quotas: parseQuotaFlags(['cpu=1']), namespaceSelector: { matchLabels: { batch: 'yes' } } }));
      expect(objects.find((o) => o.kind === 'ClusterQueue')!.spec.namespaceSelector).to.deep.equal({ matchLabels: { batch: 'yes' } });
      expect(warnings).to.deep.equal([
        '--namespace-selector does not pin kubernetes.io/metadata.name=team: Jobs of other namespaces would be admitted to flavors of Targets of team, where their pods cannot go',
      ]);
      expect(buildKueueSetup(options([clusterTarget('gpu')], { quotas: parseQuotaFlags(['cpu=1']), namespaceSelector: {} })).warnings).to.deep.equal([]);
    });

    it('adds the LocalQueue last, pointing at the ClusterQueue, and refuses one outside the namespace of the Targets', () => {
      const { objects } = buildKueueSetup(options([c1], { clusterQueue: 'batch', quotas: parseQuotaFlags(['cpu=1']), localQueue: { namespace: 'team', name: 'jobs' } }));
      expect(objects.map((o) => o.kind)).to.deep.equal(['ResourceFlavor', 'ClusterQueue', 'LocalQueue']);
      expect(objects[2]).to.deep.include({ metadata: { name: 'jobs', namespace: 'team', labels: { 'app.kubernetes.io/managed-by': 'admiralty-kueue-setup' } }, spec: { clusterQueue: 'batch' } });
      expect(() => buildKueueSetup(options([c1], { quotas: parseQuotaFlags(['cpu=1']), localQueue: { namespace: 'other', name: 'jobs' } }))).to.throw(
        ValidationError,
        '--local-queue other/jobs: the flavors include Targets of namespace team',
      );
    });

    it('names flavors with another prefix by the virtual node rule: hashed when the namespace has a dash, and within 63 characters', () => {
      expect(flavorName({ kind: 'Target', namespace: 'team', name: 'c1' }, 'batch')).to.equal('batch-namespace-team-c1');
      expect(flavorName({ kind: 'ClusterTarget', namespace: '', name: 'gpu' }, 'batch')).to.equal('batch-cluster-gpu');
      const dashed = flavorName({ kind: 'Target', namespace: 'a-b', name: 'c' }, 'batch');
      expect(dashed).to.match(/^batch-namespace-a-b-c-[0-9a-f]{10}$/);
      expect(dashed).to.not.equal(flavorName({ kind: 'Target', namespace: 'a', name: 'b-c' }, 'batch'));
      expect(flavorName({ kind: 'Target', namespace: 'team', name: 'x'.repeat(200) }, 'batch')).to.have.length.at.most(63);
    });
  });
});
