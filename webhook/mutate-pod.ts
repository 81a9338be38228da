import type { V1Affinity, V1NodeSelectorRequirement, V1NodeSelectorTerm, V1Pod, V1PodSpec, V1Toleration } from '@kubernetes/client-node';
import { labelValueFor } from '../provider/model/names.js';
import {
  CLUSTER_TARGET_NAME_LABEL,
  TARGET_NAMESPACE_LABEL,
  ELECT_ANNOTATION,
  HAS_FINALIZER_LABEL,
  PROXY_FINALIZER,
  PROXY_POD_SCHEDULING_CONSTRAINTS_ANNOTATION,
  SOURCE_POD_MANIFEST_ANNOTATION,
  VIRTUAL_KUBELET_PROVIDER_LABEL,
  VIRTUAL_KUBELET_PROVIDER_VALUE,
  VIRTUAL_NODE_TAINT_EFFECT,
  VIRTUAL_NODE_TAINT_KEY,
  VIRTUAL_NODE_TAINT_VALUE,
} from '../provider/core/keys.js';
import { jsonEqual } from './create-json-patch.js';
import { parseProxySchedulingConstraints } from './parse-proxy-scheduling-constraints.js';

const NOT_READY_TAINT = 'node.kubernetes.io/not-ready';
const UNREACHABLE_TAINT = 'node.kubernetes.io/unreachable';
const NETWORK_UNAVAILABLE_TAINT = 'node.kubernetes.io/network-unavailable';

/**
 * Tolerations every proxy carries. The virtual node taint keeps ordinary pods off virtual
 * nodes. network-unavailable: some route controllers set it on nodes they do not manage.
 * not-ready/unreachable without `tolerationSeconds`: when a target is down the provider decides
 * what happens to its proxies; taint-based eviction must never delete them.
 */
const PROXY_TOLERATIONS: readonly V1Toleration[] = [
  { key: VIRTUAL_NODE_TAINT_KEY, operator: 'Equal', value: VIRTUAL_NODE_TAINT_VALUE, effect: VIRTUAL_NODE_TAINT_EFFECT },
  { key: NETWORK_UNAVAILABLE_TAINT, operator: 'Exists' },
  { key: NOT_READY_TAINT, operator: 'Exists', effect: 'NoExecute' },
  { key: UNREACHABLE_TAINT, operator: 'Exists', effect: 'NoExecute' },
];

export interface MutatePodOptions {
  /** Finalizers every proxy gets; default `[PROXY_FINALIZER]`. */
  finalizers?: readonly string[];
  /**
   * The pod's namespace (the AdmissionReview's `request.namespace`): when given, the proxy may
   * only land on virtual nodes of Targets of this namespace or of ClusterTargets.
   */
  namespace?: string;
}

/**
 * Turns an elected source pod into a proxy pod. Pure: returns a new object, never touches `pod`.
 *
 * Acts only if the pod has `ELECT_ANNOTATION`; otherwise returns `{ pod, mutated: false }`.
 * The proxy: keeps the pod as received (JSON) in `SOURCE_POD_MANIFEST_ANNOTATION` unless already
 * there; gets `nodeSelector` `virtual-kubelet.io/provider=admiralty` (added to the user's), the
 * proxy tolerations (added to the user's, without duplicates), `PROXY_FINALIZER` and
 * `HAS_FINALIZER_LABEL=true`; keeps node affinity but loses pod (anti-)affinity and topology
 * spread (those are honoured by the delegate in its target). The
 * `PROXY_POD_SCHEDULING_CONSTRAINTS_ANNOTATION`, when set, adds its `nodeSelector` entries and
 * tolerations, and its `affinity` / `topologySpreadConstraints`, where given, replace the
 * proxy's. Everything else (containers, resources, labels, owners, scheduler name) is kept.
 *
 * Idempotent: mutating a proxy again yields `mutated: false` (webhook reinvocation).
 * Called by the webhook app on pod CREATE.
 *
 * @throws ValidationError if the constraints annotation is malformed (the pod is refused).
 */
export function mutatePod(pod: V1Pod, opts: MutatePodOptions = {}): { pod: V1Pod; mutated: boolean } {
  const annotations = pod.metadata?.annotations ?? {};
  if (!(ELECT_ANNOTATION in annotations)) return { pod, mutated: false };
  const constraintsText = annotations[PROXY_POD_SCHEDULING_CONSTRAINTS_ANNOTATION];
  const constraints = constraintsText === undefined ? {} : parseProxySchedulingConstraints(constraintsText);

  const out: V1Pod = structuredClone(pod);
  const metadata = (out.metadata ??= {});
  const outAnnotations = (metadata.annotations ??= {});
  if (outAnnotations[SOURCE_POD_MANIFEST_ANNOTATION] === undefined) {
    // The input, not `out`: the delegate is built from the pod as the user wrote it.
    outAnnotations[SOURCE_POD_MANIFEST_ANNOTATION] = JSON.stringify(pod);
  }
  metadata.labels = { ...metadata.labels, [HAS_FINALIZER_LABEL]: 'true' };
  const finalizers = metadata.finalizers ?? [];
  for (const f of opts.finalizers ?? [PROXY_FINALIZER]) if (!finalizers.includes(f)) finalizers.push(f);
  metadata.finalizers = finalizers;

  const spec: V1PodSpec = (out.spec ??= {} as V1PodSpec);
  spec.nodeSelector = {
    ...spec.nodeSelector,
    ...constraints.nodeSelector,
    [VIRTUAL_KUBELET_PROVIDER_LABEL]: VIRTUAL_KUBELET_PROVIDER_VALUE,
  };
  spec.tolerations = mergeTolerations(
    (spec.tolerations ?? []).filter((t) => !isBoundedOutageToleration(t)),
    constraints.tolerations ?? [],
    PROXY_TOLERATIONS,
  );

  let affinity = constraints.affinity ?? proxyAffinity(spec.affinity);
  if (opts.namespace) affinity = withTargetScope(affinity, opts.namespace);
  if (affinity) spec.affinity = affinity;
  else delete spec.affinity;
  if (constraints.topologySpreadConstraints) spec.topologySpreadConstraints = constraints.topologySpreadConstraints;
  else delete spec.topologySpreadConstraints;

  const mutated = !jsonEqual(JSON.parse(JSON.stringify(out)), JSON.parse(JSON.stringify(pod)));
  return mutated ? { pod: out, mutated } : { pod, mutated };
}

/**
 * A not-ready/unreachable NoExecute toleration with `tolerationSeconds` (the
 * DefaultTolerationSeconds admission plugin adds 300 s ones before webhooks run). The taint
 * manager evicts after the smallest `tolerationSeconds` among matching tolerations, so such an
 * entry would defeat our unbounded one; the delegate keeps it through the saved manifest.
 */
function isBoundedOutageToleration(t: V1Toleration): boolean {
  return (
    (t.key === NOT_READY_TAINT || t.key === UNREACHABLE_TAINT) &&
    (t.effect === 'NoExecute' || !t.effect) &&
    t.tolerationSeconds !== undefined &&
    t.tolerationSeconds !== null
  );
}

/** Concatenation without duplicates (an absent operator means `Equal`). */
function mergeTolerations(...lists: ReadonlyArray<readonly V1Toleration[]>): V1Toleration[] {
  const out: V1Toleration[] = [];
  const normal = (t: V1Toleration) => ({ ...t, operator: t.operator || 'Equal' });
  for (const list of lists) {
    for (const t of list) {
      if (!out.some((o) => jsonEqual(normal(o), normal(t)))) out.push(structuredClone(t));
    }
  }
  return out;
}

/** The user's affinity minus pod (anti-)affinity: only node affinity matters between virtual nodes. */
function proxyAffinity(affinity: V1Affinity | undefined): V1Affinity | undefined {
  if (!affinity?.nodeAffinity) return undefined;
  return { nodeAffinity: affinity.nodeAffinity };
}

/**
 * Restricts the proxy to virtual nodes of Targets in its own namespace or of ClusterTargets: a
 * Target serves one namespace, and the stock kube-scheduler knows nothing of that. Required
 * node-affinity terms are ORed and their expressions ANDed, so each of the user's terms is
 * split in two: with `target-namespace In [ns]`, and with `cluster-target-name Exists`.
 * Idempotent: terms that already carry the scope are left alone (webhook reinvocation).
 */
function withTargetScope(affinity: V1Affinity | undefined, namespace: string): V1Affinity {
  const scoped = (t: V1NodeSelectorTerm) => (t.matchExpressions ?? []).some((e) => e.key === TARGET_NAMESPACE_LABEL || e.key === CLUSTER_TARGET_NAME_LABEL);
  const required = affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
  const terms: V1NodeSelectorTerm[] = required?.nodeSelectorTerms?.length ? required.nodeSelectorTerms : [{}];
  if (terms.every(scoped)) return affinity!;
  const scopes: V1NodeSelectorRequirement[] = [
    { key: TARGET_NAMESPACE_LABEL, operator: 'In', values: [labelValueFor(namespace)] },
    { key: CLUSTER_TARGET_NAME_LABEL, operator: 'Exists' },
  ];
  const nodeSelectorTerms = terms.flatMap((t) => (scoped(t) ? [t] : scopes.map((s) => ({ ...t, matchExpressions: [...(t.matchExpressions ?? []), s] }))));
  return { ...affinity, nodeAffinity: { ...affinity?.nodeAffinity, requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms } } };
}
