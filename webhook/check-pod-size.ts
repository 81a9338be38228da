import type { V1Pod } from '@kubernetes/client-node';
import { ValidationError } from '../provider/core/errors.js';

/**
 * The most items each list (or map) of an elected pod may hold. Kubernetes sets no such limits
 * (only etcd's 1.5 MiB per object), but every list of a proxy is walked again and again: by the
 * webhook, by the extender's filter for each real node of each target, by the delegate builder
 * and the copies. A limit here bounds all of that at once, with a denial that names the field,
 * instead of work that grows with whatever a pod creator writes. Each is far above what real
 * pods carry (tens of tolerations, a few hundred environment variables); a path with `[*]` is
 * the limit of each such list (each container's `env`, each term's `matchExpressions`).
 */
export const POD_LIST_LIMITS = {
  'metadata.labels': 256,
  'metadata.finalizers': 64,
  'metadata.ownerReferences': 64,
  'spec.containers': 128,
  'spec.initContainers': 128,
  'spec.containers[*].env': 2048,
  'spec.containers[*].envFrom': 256,
  'spec.containers[*].ports': 256,
  'spec.containers[*].volumeMounts': 512,
  'spec.volumes': 512,
  'spec.tolerations': 256,
  'spec.nodeSelector': 128,
  'spec.imagePullSecrets': 64,
  'spec.hostAliases': 256,
  'spec.topologySpreadConstraints': 32,
  'spec.resourceClaims': 128,
  'spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms': 64,
  'spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution': 64,
  'spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution': 64,
  'spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution': 64,
  'spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution': 64,
  'spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution': 64,
  /** Each label selector's `matchLabels` (topology spread, pod (anti-)affinity terms). */
  'selector[*].matchLabels': 128,
  /** Each node selector term's `matchExpressions` and `matchFields`, and each label selector's `matchExpressions`. */
  'selector[*].expressions': 64,
  /** Each requirement's `values`. */
  'selector[*].expressions[*].values': 256,
} as const;

type Limited = keyof typeof POD_LIST_LIMITS;

/**
 * Refuses an elected pod any of whose lists is longer than {@link POD_LIST_LIMITS} allows,
 * naming the first such field, its length and the limit. Linear in the pod's size, and it
 * stops at the first list over its limit. Takes a pod that {@link checkPodShape} accepted
 * (lists are arrays, maps are objects); lists it does not know the type of are skipped.
 *
 * Pure; called by `mutatePod` for elected pods only: other pods are not ours to limit.
 *
 * @throws ValidationError naming the field and the limit.
 */
export function checkPodSize(pod: V1Pod): void {
  const m = pod.metadata ?? {};
  count(m.labels, 'metadata.labels', 'metadata.labels');
  count(m.finalizers, 'metadata.finalizers', 'metadata.finalizers');
  count(m.ownerReferences, 'metadata.ownerReferences', 'metadata.ownerReferences');
  const s = pod.spec;
  if (!s) return;
  for (const field of ['containers', 'initContainers'] as const) {
    const list = s[field];
    count(list, `spec.${field}`, `spec.${field}`);
    list?.forEach((c, i) => {
      if (!c || typeof c !== 'object') return;
      for (const sub of ['env', 'envFrom', 'ports', 'volumeMounts'] as const) count(c[sub], `spec.${field}[${i}].${sub}`, `spec.containers[*].${sub}`);
    });
  }
  for (const field of ['volumes', 'tolerations', 'nodeSelector', 'imagePullSecrets', 'hostAliases', 'topologySpreadConstraints', 'resourceClaims'] as const) {
    count(s[field], `spec.${field}`, `spec.${field}`);
  }
  (s.topologySpreadConstraints ?? []).forEach((t, i) => labelSelector(t?.labelSelector, `spec.topologySpreadConstraints[${i}].labelSelector`));
  const a = s.affinity;
  if (!a) return;
  const nodeAt = 'spec.affinity.nodeAffinity';
  const required = a.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
  count(required, `${nodeAt}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`, `${nodeAt}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`);
  required?.forEach((t, i) => nodeSelectorTerm(t, `${nodeAt}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[${i}]`));
  const preferred = a.nodeAffinity?.preferredDuringSchedulingIgnoredDuringExecution;
  count(preferred, `${nodeAt}.preferredDuringSchedulingIgnoredDuringExecution`, `${nodeAt}.preferredDuringSchedulingIgnoredDuringExecution`);
  preferred?.forEach((t, i) => nodeSelectorTerm(t?.preference, `${nodeAt}.preferredDuringSchedulingIgnoredDuringExecution[${i}].preference`));
  for (const kind of ['podAffinity', 'podAntiAffinity'] as const) {
    const at = `spec.affinity.${kind}`;
    const req = a[kind]?.requiredDuringSchedulingIgnoredDuringExecution;
    count(req, `${at}.requiredDuringSchedulingIgnoredDuringExecution`, `${at}.requiredDuringSchedulingIgnoredDuringExecution` as Limited);
    req?.forEach((t, i) => podAffinityTerm(t, `${at}.requiredDuringSchedulingIgnoredDuringExecution[${i}]`));
    const pref = a[kind]?.preferredDuringSchedulingIgnoredDuringExecution;
    count(pref, `${at}.preferredDuringSchedulingIgnoredDuringExecution`, `${at}.preferredDuringSchedulingIgnoredDuringExecution` as Limited);
    pref?.forEach((t, i) => podAffinityTerm(t?.podAffinityTerm, `${at}.preferredDuringSchedulingIgnoredDuringExecution[${i}].podAffinityTerm`));
  }
}

type Requirement = { values?: unknown };

function nodeSelectorTerm(t: { matchExpressions?: Requirement[]; matchFields?: Requirement[] } | undefined, at: string): void {
  if (!t || typeof t !== 'object') return;
  requirements(t.matchExpressions, `${at}.matchExpressions`);
  requirements(t.matchFields, `${at}.matchFields`);
}

function podAffinityTerm(t: { labelSelector?: object; namespaceSelector?: object } | undefined, at: string): void {
  if (!t || typeof t !== 'object') return;
  labelSelector(t.labelSelector, `${at}.labelSelector`);
  labelSelector(t.namespaceSelector, `${at}.namespaceSelector`);
}

function labelSelector(s: { matchLabels?: unknown; matchExpressions?: Requirement[] } | undefined, at: string): void {
  if (!s || typeof s !== 'object') return;
  count(s.matchLabels, `${at}.matchLabels`, 'selector[*].matchLabels');
  requirements(s.matchExpressions, `${at}.matchExpressions`);
}

function requirements(list: Requirement[] | undefined, at: string): void {
  count(list, at, 'selector[*].expressions');
  list?.forEach((e, i) => e && typeof e === 'object' && count(e.values, `${at}[${i}].values`, 'selector[*].expressions[*].values'));
}

/** Throws when `v`, a list or a map, has more items than the limit named `limit`. */
function count(v: unknown, at: string, limit: Limited): void {
  if (v === undefined || v === null || typeof v !== 'object') return;
  const max = POD_LIST_LIMITS[limit];
  let n: number;
  if (Array.isArray(v)) n = v.length;
  else {
    n = 0;
    // Counting stops past the limit: a map is never walked further than that.
    for (const k in v) if (Object.hasOwn(v, k) && ++n > max) break;
  }
  if (n > max) {
    const what = Array.isArray(v) ? `${n} items` : `more than ${max} entries`;
    throw new ValidationError(`${at} has ${what}: an elected pod may have at most ${max} (admiralty's limit, which bounds the work each proxy costs)`);
  }
}
