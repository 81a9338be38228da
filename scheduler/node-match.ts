import type { V1NodeSelectorRequirement, V1NodeSelectorTerm, V1PodSpec, V1Taint, V1Toleration } from '@kubernetes/client-node';
import {
  CLUSTER_TARGET_NAME_LABEL,
  TARGET_NAME_LABEL,
  TARGET_NAMESPACE_LABEL,
  VIRTUAL_KUBELET_PROVIDER_LABEL,
} from '../provider/core/keys.js';

/**
 * Label keys that exist only on virtual nodes (the targets reconciler writes them; the webhook
 * adds nodeSelector/affinity on them to proxies). A real node of a target never has them, so
 * when a pod's constraints are matched against real nodes these keys count as satisfied: the
 * stock kube-scheduler has already matched them against the virtual node.
 */
export const VIRTUAL_NODE_ONLY_LABEL_KEYS: ReadonlySet<string> = new Set([
  VIRTUAL_KUBELET_PROVIDER_LABEL,
  TARGET_NAMESPACE_LABEL,
  TARGET_NAME_LABEL,
  CLUSTER_TARGET_NAME_LABEL,
]);

/** What node selection looks at: a node's name (`matchFields`) and labels. */
export interface NodeIdentity {
  name: string;
  labels: Readonly<Record<string, string>>;
}

/**
 * Whether a node satisfies a pod's `nodeSelector` and required node affinity, with kube-scheduler's
 * semantics: every nodeSelector entry must be equal; node selector terms are ORed, and inside a
 * term every `matchExpressions` and `matchFields` requirement is ANDed; a term with no
 * requirement matches nothing; `In`/`NotIn`/`Exists`/`DoesNotExist`/`Gt`/`Lt` on labels
 * (`NotIn` and `DoesNotExist` match an absent label; `Gt`/`Lt` take one integer value and
 * compare the label as an integer); `matchFields` supports `metadata.name` with `In`/`NotIn`.
 * An unknown operator or field never matches. Requirements and selector entries on `ignoredKeys`
 * count as satisfied.
 *
 * Pure.
 */
export function matchesNodeSelectorAndAffinity(spec: V1PodSpec, node: NodeIdentity, ignoredKeys: ReadonlySet<string> = VIRTUAL_NODE_ONLY_LABEL_KEYS): boolean {
  const labels = node.labels;
  for (const [key, value] of Object.entries(spec.nodeSelector ?? {})) {
    if (ignoredKeys.has(key)) continue;
    if (labels[key] !== value) return false;
  }
  const required = spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
  if (!required) return true;
  return (required.nodeSelectorTerms ?? []).some((term) => matchesTerm(term, node, ignoredKeys));
}

function matchesTerm(term: V1NodeSelectorTerm, node: NodeIdentity, ignoredKeys: ReadonlySet<string>): boolean {
  const expressions = term.matchExpressions ?? [];
  const fields = term.matchFields ?? [];
  if (expressions.length === 0 && fields.length === 0) return false;
  const labels = node.labels;
  return (
    expressions.every((r) => ignoredKeys.has(r.key) || matchesLabelRequirement(r, labels)) &&
    fields.every((r) => matchesFieldRequirement(r, node))
  );
}

function matchesLabelRequirement(r: V1NodeSelectorRequirement, labels: Readonly<Record<string, string>>): boolean {
  const has = Object.prototype.hasOwnProperty.call(labels, r.key);
  const value = labels[r.key];
  const values = r.values ?? [];
  switch (r.operator) {
    case 'In':
      return has && values.includes(value);
    case 'NotIn':
      return !has || !values.includes(value);
    case 'Exists':
      return has;
    case 'DoesNotExist':
      return !has;
    case 'Gt':
    case 'Lt': {
      if (!has || values.length !== 1) return false;
      const actual = parseInteger(value);
      const bound = parseInteger(values[0]);
      if (actual === undefined || bound === undefined) return false;
      return r.operator === 'Gt' ? actual > bound : actual < bound;
    }
    default:
      return false;
  }
}

function matchesFieldRequirement(r: V1NodeSelectorRequirement, node: NodeIdentity): boolean {
  if (r.key !== 'metadata.name') return false;
  const name = node.name;
  const values = r.values ?? [];
  if (r.operator === 'In') return values.includes(name);
  if (r.operator === 'NotIn') return !values.includes(name);
  return false;
}

/** Go's strconv.ParseInt(s, 10, 64), as upstream uses for Gt/Lt. */
function parseInteger(text: string): bigint | undefined {
  if (!/^[+-]?[0-9]+$/.test(text)) return undefined;
  const n = BigInt(text);
  return n > 9223372036854775807n || n < -9223372036854775808n ? undefined : n;
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
