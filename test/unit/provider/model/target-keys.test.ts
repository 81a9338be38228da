import type { V1NodeSelectorRequirement, V1PodSpec } from '@kubernetes/client-node';
import { expect } from 'chai';
import { CLUSTER_TARGET_NAME_LABEL, TARGET_NAME_LABEL, TARGET_NAMESPACE_LABEL, VIRTUAL_KUBELET_PROVIDER_LABEL } from '../../../../provider/core/keys.js';
import { resolveTargetKeys } from '../../../../provider/model/target-keys.js';
import { targetIdentityLabels } from '../../../../provider/model/virtual-node.js';

const C2 = targetIdentityLabels({ kind: 'Target', namespace: 'team', name: 'c2' });
const expr = (key: string, operator: string, values?: string[]): V1NodeSelectorRequirement => ({ key, operator, values });
const spec = (over: Partial<V1PodSpec>): V1PodSpec => ({ containers: [{ name: 'c' }], ...over });
const required = (...terms: V1NodeSelectorRequirement[][]): Partial<V1PodSpec> => ({
  affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: terms.map((matchExpressions) => ({ matchExpressions })) } } },
});

describe('resolveTargetKeys', () => {
  it("knows a Target's and a ClusterTarget's own labels", () => {
    expect(C2).to.deep.equal({ [VIRTUAL_KUBELET_PROVIDER_LABEL]: 'admiralty', [TARGET_NAMESPACE_LABEL]: 'team', [TARGET_NAME_LABEL]: 'c2' });
    expect(targetIdentityLabels({ kind: 'ClusterTarget', namespace: '', name: 'c3' })).to.deep.equal({ [VIRTUAL_KUBELET_PROVIDER_LABEL]: 'admiralty', [CLUSTER_TARGET_NAME_LABEL]: 'c3' });
  });

  it('returns the spec itself when it names none of those keys', () => {
    const s = spec({ nodeSelector: { zone: 'a' }, ...required([expr('gpu', 'Exists')]) });
    expect(resolveTargetKeys(s, C2)).to.equal(s);
  });

  it('drops nodeSelector entries the target satisfies, and excludes the target for one it does not', () => {
    expect(resolveTargetKeys(spec({ nodeSelector: { [TARGET_NAME_LABEL]: 'c2', [TARGET_NAMESPACE_LABEL]: 'team', zone: 'a' } }), C2)?.nodeSelector).to.deep.equal({ zone: 'a' });
    expect(resolveTargetKeys(spec({ nodeSelector: { [TARGET_NAME_LABEL]: 'c2' } }), C2)).to.not.have.property('nodeSelector');
    expect(resolveTargetKeys(spec({ nodeSelector: { [TARGET_NAME_LABEL]: 'c3', zone: 'a' } }), C2)).to.equal(undefined);
    expect(resolveTargetKeys(spec({ nodeSelector: { [CLUSTER_TARGET_NAME_LABEL]: 'c2' } }), C2), 'a ClusterTarget pin').to.equal(undefined);
  });

  it('drops satisfied requirements and the terms that exclude the target; a term left empty matched every node', () => {
    const keepsReal = resolveTargetKeys(spec(required([expr(TARGET_NAME_LABEL, 'In', ['c3'])], [expr(TARGET_NAME_LABEL, 'In', ['c2']), expr('zone', 'In', ['a'])], [expr('gpu', 'Exists')])), C2);
    expect(keepsReal?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms).to.deep.equal([
      { matchExpressions: [expr('zone', 'In', ['a'])] },
      { matchExpressions: [expr('gpu', 'Exists')] },
    ]);

    const anyNode = resolveTargetKeys(
      spec({
        affinity: {
          nodeAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [expr(TARGET_NAMESPACE_LABEL, 'Exists')] }, { matchExpressions: [expr('zone', 'In', ['a'])] }] },
            preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 1, preference: { matchExpressions: [expr('zone', 'In', ['b'])] } }],
          },
          podAntiAffinity: {},
        },
      }),
      C2,
    );
    expect(anyNode?.affinity).to.deep.equal({
      nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 1, preference: { matchExpressions: [expr('zone', 'In', ['b'])] } }] },
      podAntiAffinity: {},
    });

    // With matchFields left, the term still judges the node's name.
    const fields = resolveTargetKeys(
      spec({
        affinity: {
          nodeAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: {
              nodeSelectorTerms: [{ matchExpressions: [expr(VIRTUAL_KUBELET_PROVIDER_LABEL, 'In', ['admiralty'])], matchFields: [expr('metadata.name', 'In', ['n1'])] }],
            },
          },
        },
      }),
      C2,
    );
    expect(fields?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms).to.deep.equal([
      { matchExpressions: [], matchFields: [expr('metadata.name', 'In', ['n1'])] },
    ]);

    expect(resolveTargetKeys(spec(required([expr(TARGET_NAME_LABEL, 'NotIn', ['c2'])], [expr(TARGET_NAME_LABEL, 'DoesNotExist'), expr('zone', 'In', ['a'])])), C2), 'every term excludes it').to.equal(
      undefined,
    );
  });

  it('leaves the spec it was given as it was', () => {
    const s = spec({ nodeSelector: { [TARGET_NAME_LABEL]: 'c2', zone: 'a' }, ...required([expr(TARGET_NAME_LABEL, 'In', ['c2']), expr('zone', 'In', ['a'])]) });
    const before = structuredClone(s);
    resolveTargetKeys(s, C2);
    expect(s).to.deep.equal(before);
  });
});
