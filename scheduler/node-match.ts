import type { V1NodeSelectorRequirement, V1NodeSelectorTerm, V1PodSpec, V1Taint, V1Toleration } from '@kubernetes/client-node';
import { HOSTNAME_LABEL } from '../provider/core/keys.js';
import { matchesLabelValue } from '../provider/model/target-keys.js';

/** What node selection looks at: a node's name (`matchFields`) and labels. */
export interface NodeIdentity {
  name: string;
  /** Its labels; the same object for the nodes of one pool of a summary, which differ in `hostname` only. */
  labels: Readonly<Record<string, string>>;
  /** Its `kubernetes.io/hostname` label, when that is not in `labels`: it wins over theirs. */
  hostname?: string;
}

/** The value of the node's label `key`, or undefined. */
function labelOf(node: NodeIdentity, key: string): string | undefined {
  if (key === HOSTNAME_LABEL && node.hostname !== undefined) return node.hostname;
  return Object.prototype.hasOwnProperty.call(node.labels, key) ? node.labels[key] : undefined;
}

/**
 * Whether a node satisfies a pod's `nodeSelector` and required node affinity, with kube-scheduler's
 * semantics: every nodeSelector entry must be equal; node selector terms are ORed, and inside a
 * term every `matchExpressions` and `matchFields` requirement is ANDed; a term with no
 * requirement matches nothing; labels are matched by `matchesLabelRequirement`; `matchFields`
 * supports `metadata.name` with `In`/`NotIn`. An unknown operator or field never matches. A
 * pod's requirements on a target's own keys are resolved before (`resolveTargetKeys`): a real
 * node has none of those labels.
 *
 * Pure.
 */
export function matchesNodeSelectorAndAffinity(spec: V1PodSpec, node: NodeIdentity): boolean {
  for (const [key, value] of Object.entries(spec.nodeSelector ?? {})) {
    if (labelOf(node, key) !== value) return false;
  }
  const required = spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
  if (!required) return true;
  return (required.nodeSelectorTerms ?? []).some((term) => matchesTerm(term, node));
}

/**
 * Whether a node matches one node selector term, as {@link matchesNodeSelectorAndAffinity} judges
 * each required term: every requirement holds, and a term with none matches nothing (upstream
 * reads preferred terms the same way). Pure.
 */
export function matchesTerm(term: V1NodeSelectorTerm, node: NodeIdentity): boolean {
  const expressions = term.matchExpressions ?? [];
  const fields = term.matchFields ?? [];
  if (expressions.length === 0 && fields.length === 0) return false;
  return expressions.every((r) => matchesLabelValue(r, labelOf(node, r.key))) && fields.every((r) => matchesFieldRequirement(r, node));
}

function matchesFieldRequirement(r: V1NodeSelectorRequirement, node: NodeIdentity): boolean {
  if (r.key !== 'metadata.name') return false;
  const name = node.name;
  const values = r.values ?? [];
  if (r.operator === 'In') return values.includes(name);
  if (r.operator === 'NotIn') return !values.includes(name);
  return false;
}

/**
 * The first `NoSchedule` or `NoExecute` taint of the node that no toleration tolerates, if any
 * (`PreferNoSchedule` only affects scoring). Toleration matching is upstream's: an empty effect
 * matches every effect; an empty key with `Exists` matches every taint; `Exists` ignores the
 * value; `Equal` (or no operator) compares values.
 *
 * Pure.
 */
export function untoleratedTaint(taints: readonly V1Taint[] | undefined, tolerations: readonly V1Toleration[] | undefined): V1Taint | undefined {
  for (const taint of taints ?? []) {
    if (taint.effect !== 'NoSchedule' && taint.effect !== 'NoExecute') continue;
    if (!(tolerations ?? []).some((t) => tolerates(t, taint))) return taint;
  }
  return undefined;
}

/** Whether one toleration tolerates one taint (upstream `Toleration.ToleratesTaint`). */
export function tolerates(t: V1Toleration, taint: V1Taint): boolean {
  if (t.effect && t.effect !== taint.effect) return false;
  if (t.key && t.key !== taint.key) return false;
  switch (t.operator || 'Equal') {
    case 'Exists':
      return true;
    case 'Equal':
      // An empty key is only valid with Exists.
      return !!t.key && (t.value ?? '') === (taint.value ?? '');
    default:
      return false;
  }
}
