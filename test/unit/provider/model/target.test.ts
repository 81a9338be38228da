import { expect } from 'chai';
import { conditionsEqual, DEFAULT_TARGET_PLACEMENT, parseTarget, parseTargetPlacement, readyCondition, setCondition } from '../../../../provider/model/target.js';
import type { Condition, Target } from '../../../../provider/model/types.js';

function target(spec: Target['spec'], namespace = 'default'): Target {
  return { metadata: { name: 'c2', namespace }, spec };
}
function clusterTarget(spec: Target['spec']): Target {
  return { metadata: { name: 'c2' }, spec };
}

const D = DEFAULT_TARGET_PLACEMENT;

describe('parseTarget', () => {
  const valid: [string, Target, 'Target' | 'ClusterTarget', unknown][] = [
    ['self', target({ self: true }), 'Target', { ref: { kind: 'Target', namespace: 'default', name: 'c2' }, self: true, excludedLabelsRegexp: null, placement: D }],
    [
      'secret with defaults',
      target({ kubeconfigSecret: { name: 'c2' } }),
      'Target',
      { ref: { kind: 'Target', namespace: 'default', name: 'c2' }, self: false, kubeconfigSecret: { namespace: 'default', name: 'c2', key: 'config' }, excludedLabelsRegexp: null, placement: D },
    ],
    [
      'secret with key, context and own namespace',
      target({ kubeconfigSecret: { name: 'c2', namespace: 'default', key: 'kc', context: 'ctx' }, excludedLabelsRegexp: '^zone=' }),
      'Target',
      {
        ref: { kind: 'Target', namespace: 'default', name: 'c2' },
        self: false,
        kubeconfigSecret: { namespace: 'default', name: 'c2', key: 'kc', context: 'ctx' },
        excludedLabelsRegexp: '^zone=',
        placement: D,
      },
    ],
    [
      'cluster target with secret namespace',
      clusterTarget({ kubeconfigSecret: { name: 'c2', namespace: 'admiralty' } }),
      'ClusterTarget',
      { ref: { kind: 'ClusterTarget', namespace: '', name: 'c2' }, self: false, kubeconfigSecret: { namespace: 'admiralty', name: 'c2', key: 'config' }, excludedLabelsRegexp: null, placement: D },
    ],
    [
      'placement',
      target({ self: true, placement: { weight: 0, priority: -3 } }),
      'Target',
      { ref: { kind: 'Target', namespace: 'default', name: 'c2' }, self: true, excludedLabelsRegexp: null, placement: { weight: 0, priority: -3 } },
    ],
    [
      'empty regexp means none',
      target({ self: true, excludedLabelsRegexp: '' }),
      'Target',
      { ref: { kind: 'Target', namespace: 'default', name: 'c2' }, self: true, excludedLabelsRegexp: null, placement: D },
    ],
  ];
  for (const [why, obj, kind, spec] of valid) {
    it(`accepts ${why}`, () => expect(parseTarget(obj, kind)).to.deep.equal({ ok: true, spec }));
  }

  const invalid: [string, Target, 'Target' | 'ClusterTarget', string, RegExp][] = [
    ['neither self nor secret', target({}), 'Target', 'InvalidSpec', /exactly one/],
    ['self false and no secret', target({ self: false }), 'Target', 'InvalidSpec', /exactly one/],
    ['both', target({ self: true, kubeconfigSecret: { name: 'x' } }), 'Target', 'InvalidSpec', /mutually exclusive/],
    ['empty secret name', target({ kubeconfigSecret: { name: '' } }), 'Target', 'InvalidSpec', /name is empty/],
    ['invalid secret name', target({ kubeconfigSecret: { name: 'Bad_Name' } }), 'Target', 'InvalidSpec', /not a valid Secret name/],
    ['cluster target without secret namespace', clusterTarget({ kubeconfigSecret: { name: 'x' } }), 'ClusterTarget', 'InvalidSpec', /namespace is required/],
    ['target reading another namespace', target({ kubeconfigSecret: { name: 'x', namespace: 'kube-system' } }), 'Target', 'InvalidSpec', /own namespace/],
    ['bad regexp', target({ self: true, excludedLabelsRegexp: '(' }), 'Target', 'InvalidExcludedLabelsRegexp', /excludedLabelsRegexp/],
    ['no name', { metadata: {}, spec: { self: true } }, 'ClusterTarget', 'InvalidSpec', /no name/],
    // The CRD refuses these; a Target written without its schema (or by an older CRD) is not Ready.
    ['negative weight', target({ self: true, placement: { weight: -1 } }), 'Target', 'InvalidSpec', /^spec.placement.weight must be an integer from 0 to 1000$/],
    ['fractional weight', target({ self: true, placement: { weight: 1.5 } }), 'Target', 'InvalidSpec', /weight must be an integer/],
    ['huge weight', target({ self: true, placement: { weight: 1e9 } }), 'Target', 'InvalidSpec', /weight must be an integer/],
    ['string priority', target({ self: true, placement: { priority: '1' as unknown as number } }), 'Target', 'InvalidSpec', /^spec.placement.priority must be an integer from -1000 to 1000$/],
    [
      'burst capacity of another resource',
      target({ self: true, placement: { burstCapacity: { gpu: '1' } as never } }),
      'Target',
      'InvalidSpec',
      /^spec.placement.burstCapacity.gpu: only cpu, memory, pods are allowed$/,
    ],
    [
      'burst capacity not a quantity',
      target({ self: true, placement: { burstCapacity: { cpu: 'lots' } } }),
      'Target',
      'InvalidSpec',
      /^spec.placement.burstCapacity.cpu must be a quantity of at least 0$/,
    ],
    ['negative burst capacity', target({ self: true, placement: { burstCapacity: { memory: '-1Gi' } } }), 'Target', 'InvalidSpec', /burstCapacity.memory must be a quantity/],
    ['empty burst capacity', target({ self: true, placement: { burstCapacity: {} } }), 'Target', 'InvalidSpec', /must name at least one of cpu, memory, pods$/],
  ];
  for (const [why, obj, kind, reason, message] of invalid) {
    it(`rejects ${why}`, () => {
      const r = parseTarget(obj, kind);
      expect(r.ok).to.equal(false);
      if (!r.ok) {
        expect(r.reason).to.equal(reason);
        expect(r.message).to.match(message);
      }
    });
  }
});

describe('parseTargetPlacement: burstCapacity', () => {
  it('parses quantities into nano-units, leaving out what is not named', () => {
    const r = parseTargetPlacement({ placement: { burstCapacity: { cpu: '64', memory: '1Gi', pods: 110 } } });
    expect(r.ok && [...r.placement.burstCapacity!]).to.deep.equal([
      ['cpu', 64_000_000_000n],
      ['memory', 1073741824_000_000_000n],
      ['pods', 110_000_000_000n],
    ]);
    const cpuOnly = parseTargetPlacement({ placement: { burstCapacity: { cpu: '500m' } } });
    expect(cpuOnly.ok && [...cpuOnly.placement.burstCapacity!]).to.deep.equal([['cpu', 500_000_000n]]);
  });

  it('has none by default', () => {
    const r = parseTargetPlacement({ self: true });
    expect(r.ok && r.placement.burstCapacity).to.equal(undefined);
  });
});

describe('conditions', () => {
  const T0 = '2024-01-01T00:00:00Z';
  const T1 = '2024-01-01T01:00:00Z';
  const ready: Condition = { type: 'Ready', status: 'True', reason: 'TargetReachable', message: '', lastTransitionTime: T0 };
  const other: Condition = { type: 'Other', status: 'True', reason: 'X', message: '', lastTransitionTime: T0 };

  const cases: [string, Condition[] | undefined, ReturnType<typeof readyCondition>, Condition[]][] = [
    ['appends to nothing', undefined, readyCondition(true, 'TargetReachable', ''), [{ ...ready, lastTransitionTime: T1 }]],
    ['keeps the transition time when status is unchanged', [ready, other], readyCondition(true, 'Again', 'msg'), [{ ...ready, reason: 'Again', message: 'msg' }, other]],
    [
      'moves the transition time when status changes',
      [other, ready],
      readyCondition(false, 'TargetUnreachable', 'dial tcp: refused', 4),
      [other, { type: 'Ready', status: 'False', reason: 'TargetUnreachable', message: 'dial tcp: refused', lastTransitionTime: T1, observedGeneration: 4 }],
    ],
  ];
  for (const [why, list, cond, want] of cases) {
    it(`setCondition ${why}`, () => {
      const before = JSON.stringify(list);
      expect(setCondition(list, cond, T1)).to.deep.equal(want);
      expect(JSON.stringify(list)).to.equal(before);
    });
  }

  it('conditionsEqual ignores order and sees changes', () => {
    expect(conditionsEqual([ready, other], [other, ready])).to.equal(true);
    expect(conditionsEqual([ready], [{ ...ready, message: 'x' }])).to.equal(false);
    expect(conditionsEqual(undefined, [])).to.equal(true);
    expect(conditionsEqual([ready], [])).to.equal(false);
  });
});
