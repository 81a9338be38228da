import { expect } from 'chai';
import { ValidationError } from '../../../provider/core/errors.js';
import { ELECT_ANNOTATION } from '../../../provider/core/keys.js';
import { checkPodSize, POD_LIST_LIMITS } from '../../../webhook/check-pod-size.js';
import { mutatePod } from '../../../webhook/mutate-pod.js';
import type { V1Pod } from '@kubernetes/client-node';

const elected = (spec: Record<string, unknown>): V1Pod =>
  ({ metadata: { name: 'p', namespace: 'default', annotations: { [ELECT_ANNOTATION]: '' } }, spec: { containers: [{ name: 'c', image: 'x' }], ...spec } }) as V1Pod;
const tolerations = (n: number) => Array.from({ length: n }, (_, i) => ({ key: `k${i}`, operator: 'Exists' }));

describe('webhook: checkPodSize', () => {
  const cases: { name: string; spec: Record<string, unknown>; field: string; limit: number }[] = [
    { name: 'tolerations', spec: { tolerations: tolerations(6000) }, field: 'spec.tolerations', limit: POD_LIST_LIMITS['spec.tolerations'] },
    { name: 'containers', spec: { containers: Array.from({ length: 129 }, (_, i) => ({ name: `c${i}`, image: 'x' })) }, field: 'spec.containers', limit: 128 },
    { name: 'env of one container', spec: { containers: [{ name: 'c', image: 'x', env: Array.from({ length: 2049 }, (_, i) => ({ name: `E${i}` })) }] }, field: 'spec.containers[0].env', limit: 2048 },
    { name: 'nodeSelector entries', spec: { nodeSelector: Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`k${i}`, 'v'])) }, field: 'spec.nodeSelector', limit: 128 },
    {
      name: 'values of a node affinity requirement',
      spec: {
        affinity: {
          nodeAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'a', operator: 'In', values: Array.from({ length: 300 }, (_, i) => `v${i}`) }] }] },
          },
        },
      },
      field: 'spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values',
      limit: 256,
    },
    {
      name: 'topology spread constraints',
      spec: { topologySpreadConstraints: Array.from({ length: 33 }, () => ({ maxSkew: 1, topologyKey: 'zone', whenUnsatisfiable: 'DoNotSchedule' })) },
      field: 'spec.topologySpreadConstraints',
      limit: 32,
    },
  ];
  for (const c of cases) {
    it(`refuses an elected pod over the limit of ${c.name}, naming ${c.field} and ${c.limit}`, () => {
      expect(() => checkPodSize(elected(c.spec)))
        .to.throw(ValidationError)
        .with.property('message')
        .that.includes(c.field)
        .and.includes(`at most ${c.limit}`);
    });
  }

  it('accepts a pod at every limit it is given here (256 tolerations, 128 containers)', () => {
    expect(() => checkPodSize(elected({ tolerations: tolerations(256), containers: Array.from({ length: 128 }, (_, i) => ({ name: `c${i}`, image: 'x' })) }))).not.to.throw();
  });

  it('mutatePod refuses an elected pod with 6000 tolerations and leaves a pod that is not elected alone', () => {
    expect(() => mutatePod(elected({ tolerations: tolerations(6000) }))).to.throw(ValidationError, /spec\.tolerations has 6000 items/);
    const plain = { metadata: { name: 'p' }, spec: { containers: [], tolerations: tolerations(6000) } } as unknown as V1Pod;
    expect(mutatePod(plain).mutated).to.equal(false);
  });

  it('mutatePod keeps 246 distinct tolerations, drops 10 exact duplicates, and adds the proxy tolerations once', () => {
    const mine = tolerations(246);
    const { pod } = mutatePod(elected({ tolerations: [...mine.slice(0, 200), ...mine.slice(0, 10), ...mine.slice(200)] }));
    const keys = pod.spec!.tolerations!.map((t) => `${t.key}/${t.operator}/${t.effect ?? ''}`);
    expect(new Set(keys).size).to.equal(keys.length);
    expect(pod.spec!.tolerations!.length).to.equal(246 + 4);
  });
});
