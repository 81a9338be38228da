import type { V1Affinity, V1NodeSelectorRequirement, V1NodeSelectorTerm, V1PodSpec } from '@kubernetes/client-node';
import { CLUSTER_TARGET_NAME_LABEL, TARGET_NAME_LABEL, TARGET_NAMESPACE_LABEL, VIRTUAL_KUBELET_PROVIDER_LABEL } from '../core/keys.js';

/**
 * Label keys that exist only on virtual nodes (the targets reconciler writes them; the webhook
 * adds nodeSelector/affinity on them to proxies). A real node of a target never has them: a pod
 * that names them in its own constraints (to pin itself to a target, as Admiralty's users do)
 * means the target, which {@link resolveTargetKeys} judges against the target's identity.
 */
export const VIRTUAL_NODE_ONLY_LABEL_KEYS: ReadonlySet<string> = new Set([VIRTUAL_KUBELET_PROVIDER_LABEL, TARGET_NAMESPACE_LABEL, TARGET_NAME_LABEL, CLUSTER_TARGET_NAME_LABEL]);

/**
 * Whether a label set satisfies one node selector requirement, with kube-scheduler's semantics:
 * `In`/`NotIn`/`Exists`/`DoesNotExist`/`Gt`/`Lt` (`NotIn` and `DoesNotExist` match an absent
 * label; `Gt`/`Lt` take one integer value and compare the label as an integer); an unknown
 * operator never matches. Pure.
 */
export function matchesLabelRequirement(r: V1NodeSelectorRequirement, labels: Readonly<Record<string, string>>): boolean {
  return matchesLabelValue(r, Object.prototype.hasOwnProperty.call(labels, r.key) ? labels[r.key] : undefined);
}

/** {@link matchesLabelRequirement} for the value of its key's label, undefined when there is none. Pure. */
export function matchesLabelValue(r: V1NodeSelectorRequirement, value: string | undefined): boolean {
  const has = value !== undefined;
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
      const [only, ...others] = values;
      if (!has || only === undefined || others.length > 0) return false;
      const actual = parseInteger(value);
      const bound = parseInteger(only);
      if (actual === undefined || bound === undefined) return false;
      return r.operator === 'Gt' ? actual > bound : actual < bound;
    }
    default:
      return false;
  }
}

/** Go's strconv.ParseInt(s, 10, 64), as upstream uses for Gt/Lt. */
function parseInteger(text: string): bigint | undefined {
  if (!/^[+-]?[0-9]+$/.test(text)) return undefined;
  const n = BigInt(text);
  return n > 9223372036854775807n || n < -9223372036854775808n ? undefined : n;
}

/**
 * A pod spec's nodeSelector and required node affinity with every requirement on a
 * {@link VIRTUAL_NODE_ONLY_LABEL_KEYS} key judged against `identity` (the target's virtual-node
 * labels, `targetIdentityLabels`), so that what is left speaks of real nodes only:
 *
 * * a nodeSelector entry that the identity satisfies is dropped;
 * * in a required node selector term, satisfied requirements are dropped, and a term with one
 *   that is not is dropped whole (it matches no node of this target); a term left with no
 *   requirement matched every node, so the required affinity goes (kube-scheduler would read an
 *   empty term as matching nothing);
 * * preferred terms, which only score, are left alone.
 *
 * Returns a shallow copy of `spec` with those two fields replaced (the rest shared), `spec`
 * itself when it names no such key, or undefined when the target is excluded: an entry or every
 * term the identity does not satisfy. The extender's filter judges what this returns, and the
 * delegate sent to that target carries it, so both agree. Pure.
 */
export function resolveTargetKeys(spec: V1PodSpec, identity: Readonly<Record<string, string>>): V1PodSpec | undefined {
  const isTargetKey = (key: string) => VIRTUAL_NODE_ONLY_LABEL_KEYS.has(key);
  const selector = spec.nodeSelector;
  const required = spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
  const named = Object.keys(selector ?? {}).some(isTargetKey) || (required?.nodeSelectorTerms ?? []).some((t) => (t.matchExpressions ?? []).some((e) => isTargetKey(e.key)));
  if (!named) return spec;

  let nodeSelector: Record<string, string> | undefined;
  if (selector) {
    nodeSelector = {};
    for (const [key, value] of Object.entries(selector)) {
      if (!isTargetKey(key)) nodeSelector[key] = value;
      else if (identity[key] !== value) return undefined;
    }
  }
  let affinity: V1Affinity | undefined = spec.affinity;
  if (required) {
    const terms: V1NodeSelectorTerm[] = [];
    let matchesEveryNode = false;
    for (const term of required.nodeSelectorTerms ?? []) {
      const expressions = term.matchExpressions ?? [];
      if (!expressions.some((e) => isTargetKey(e.key))) {
        terms.push(term);
        continue;
      }
      if (!expressions.filter((e) => isTargetKey(e.key)).every((e) => matchesLabelRequirement(e, identity))) continue;
      const rest = expressions.filter((e) => !isTargetKey(e.key));
      if (rest.length === 0 && !term.matchFields?.length) matchesEveryNode = true;
      terms.push({ ...term, matchExpressions: rest });
    }
    if (!matchesEveryNode && terms.length === 0) return undefined;
    const { requiredDuringSchedulingIgnoredDuringExecution: _dropped, ...nodeAffinity } = spec.affinity!.nodeAffinity!;
    affinity = {
      ...spec.affinity,
      nodeAffinity: matchesEveryNode ? nodeAffinity : { ...nodeAffinity, requiredDuringSchedulingIgnoredDuringExecution: { ...required, nodeSelectorTerms: terms } },
    };
  }
  const resolved: V1PodSpec = { ...spec, affinity, nodeSelector };
  if (!nodeSelector || Object.keys(nodeSelector).length === 0) delete resolved.nodeSelector;
  if (!affinity) delete resolved.affinity;
  return resolved;
}
