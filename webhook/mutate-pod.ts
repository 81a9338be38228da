import type { V1Affinity, V1NodeSelectorRequirement, V1NodeSelectorTerm, V1Pod, V1PodSpec, V1Toleration } from '@kubernetes/client-node';
import { ValidationError } from '../provider/core/errors.js';
import { savedSourcePodManifest } from '../provider/model/delegate-pod.js';
import { labelValueFor } from '../provider/model/names.js';
import {
  CLUSTER_TARGET_NAME_LABEL,
  TARGET_NAMESPACE_LABEL,
  ELECT_ANNOTATION,
  USE_CONSTRAINTS_FROM_SPEC_ANNOTATION,
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
import { checkPodSize } from './check-pod-size.js';
import { canonicalJson, jsonEqual } from './create-json-patch.js';
import { parseProxySchedulingConstraints, type ProxySchedulingConstraints } from './parse-proxy-scheduling-constraints.js';

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
  /**
   * The second kube-scheduler that places proxies with the provider's extender (exact mode): the
   * proxy gets this `schedulerName`, and the user's nodeSelector and node affinity leave the
   * proxy (the extender judges them against each target's real nodes; the delegate keeps them),
   * unless the pod carries `USE_CONSTRAINTS_FROM_SPEC_ANNOTATION`. Empty or absent: the pod's
   * own scheduler places the proxy against virtual-node labels.
   */
  schedulerName?: string;
  /**
   * Reads the `PROXY_POD_SCHEDULING_CONSTRAINTS_ANNOTATION`; default
   * `parseProxySchedulingConstraints` (the webhook's routes pass one that remembers recent texts).
   */
  parseConstraints?: (text: string) => ProxySchedulingConstraints;
}

/**
 * Turns an elected source pod into a proxy pod. Pure: returns a new object, never touches `pod`
 * (the parts it does not change, such as the containers and volumes, are shared with it).
 *
 * Acts only if the pod has `ELECT_ANNOTATION`; otherwise returns `{ pod, mutated: false }`.
 * The proxy: keeps the pod's scheduling fields as received (`savedSourcePodManifest`) in
 * `SOURCE_POD_MANIFEST_ANNOTATION` unless already there; gets `nodeSelector`
 * `virtual-kubelet.io/provider=admiralty` (added to the user's), the proxy tolerations (added
 * to the user's, without duplicates), `PROXY_FINALIZER` and `HAS_FINALIZER_LABEL=true`; keeps
 * node affinity but loses pod (anti-)affinity and topology spread (those are honoured by the
 * delegate in its target). With `opts.schedulerName` (exact
 * mode) it gets that scheduler and loses the user's nodeSelector and node affinity too (see
 * {@link MutatePodOptions.schedulerName}). The
 * `PROXY_POD_SCHEDULING_CONSTRAINTS_ANNOTATION`, when set, adds its `nodeSelector` entries and
 * tolerations, and its `affinity` / `topologySpreadConstraints`, where given, replace the
 * proxy's. Everything else (containers, resources, labels, owners, scheduler name) is kept.
 *
 * Refused (ValidationError, so the pod is not created): an elected pod with a list longer than
 * `POD_LIST_LIMITS` allows (see `checkPodSize`), an elected pod with `spec.nodeName`
 * already set (it would skip the scheduler and land on any virtual node, another namespace's
 * included), and a pod that brings its own `SOURCE_POD_MANIFEST_ANNOTATION` without being one
 * of our proxies (see {@link isProxyOnReinvocation}) or whose manifest is not of our shape
 * (see {@link isSavedManifestShape}), and a constraints annotation its parser refuses or fails
 * on.
 *
 * Idempotent: mutating a proxy again yields `mutated: false` (webhook reinvocation).
 * Called by the webhook's /mutate route on pod CREATE.
 *
 * @throws ValidationError if the pod is refused (the message is for the user).
 */
export function mutatePod(pod: V1Pod, opts: MutatePodOptions = {}): { pod: V1Pod; mutated: boolean } {
  const annotations = pod.metadata?.annotations ?? {};
  if (!(ELECT_ANNOTATION in annotations)) return { pod, mutated: false };
  if (pod.spec?.nodeName) {
    throw new ValidationError(`an elected pod is placed by the scheduler: remove spec.nodeName (${JSON.stringify(pod.spec.nodeName)}) or the ${ELECT_ANNOTATION} annotation`);
  }
  checkPodSize(pod);
  const manifest = annotations[SOURCE_POD_MANIFEST_ANNOTATION];
  if (manifest !== undefined && (!isProxyOnReinvocation(pod) || !isSavedManifestShape(manifest))) {
    throw new ValidationError(`the ${SOURCE_POD_MANIFEST_ANNOTATION} annotation is written by admiralty only: remove it from the pod`);
  }
  const constraintsText = annotations[PROXY_POD_SCHEDULING_CONSTRAINTS_ANNOTATION];
  const constraints = constraintsText === undefined ? {} : readConstraints(constraintsText, opts.parseConstraints ?? parseProxySchedulingConstraints);

  // A copy of what is changed below (metadata, its annotations and finalizers, the spec's top
  // level); the rest (containers, volumes, ...) is the input's, which nothing here changes.
  const out: V1Pod = { ...pod, metadata: { ...pod.metadata }, spec: { ...pod.spec! } };
  const metadata = out.metadata!;
  const outAnnotations = (metadata.annotations = { ...metadata.annotations });
  const first = outAnnotations[SOURCE_POD_MANIFEST_ANNOTATION] === undefined;
  if (first) {
    // The input, not `out`: the delegate's scheduling fields are the user's, not the proxy's.
    outAnnotations[SOURCE_POD_MANIFEST_ANNOTATION] = savedSourcePodManifest(pod);
  }
  metadata.labels = { ...metadata.labels, [HAS_FINALIZER_LABEL]: 'true' };
  const finalizers = [...(metadata.finalizers ?? [])];
  for (const f of opts.finalizers ?? [PROXY_FINALIZER]) if (!finalizers.includes(f)) finalizers.push(f);
  metadata.finalizers = finalizers;

  const spec: V1PodSpec = out.spec!;
  // Exact mode: the extender matches the user's node constraints against each target's real
  // nodes, so they must not be matched against the virtual node's (shared-only) labels too.
  const exact = !!opts.schedulerName;
  const fromSpec = !exact || USE_CONSTRAINTS_FROM_SPEC_ANNOTATION in annotations;
  if (exact) spec.schedulerName = opts.schedulerName;
  spec.nodeSelector = {
    ...(fromSpec ? spec.nodeSelector : {}),
    ...constraints.nodeSelector,
    [VIRTUAL_KUBELET_PROVIDER_LABEL]: VIRTUAL_KUBELET_PROVIDER_VALUE,
  };
  spec.tolerations = mergeTolerations(
    (spec.tolerations ?? []).filter((t) => !isBoundedOutageToleration(t)),
    constraints.tolerations ?? [],
    PROXY_TOLERATIONS,
  );

  let affinity = constraints.affinity ?? (fromSpec ? proxyAffinity(spec.affinity) : undefined);
  if (opts.namespace) affinity = withTargetScope(affinity, opts.namespace);
  if (affinity) spec.affinity = affinity;
  else delete spec.affinity;
  if (constraints.topologySpreadConstraints) spec.topologySpreadConstraints = constraints.topologySpreadConstraints;
  else delete spec.topologySpreadConstraints;

  // The first time, the manifest was added: changed, no need to compare (two copies of the pod
  // as JSON, one with itself inside, on every admission). On reinvocation, compare.
  const mutated = first || !jsonEqual(JSON.parse(JSON.stringify(out)), JSON.parse(JSON.stringify(pod)));
  return mutated ? { pod: out, mutated } : { pod, mutated };
}

/**
 * The constraints of the annotation's `text`. Whatever makes the parser fail is in the user's
 * text, so a failure other than ValidationError (a bug the text found) is a refusal too: a 400
 * to the user whose message says what to fix and carries no internals, rather than an internal
 * error (500); the failure is kept as its `cause`, for the log.
 */
function readConstraints(text: string, parse: (text: string) => ProxySchedulingConstraints): ProxySchedulingConstraints {
  try {
    return parse(text);
  } catch (err) {
    if (err instanceof ValidationError) throw err;
    throw new ValidationError(
      `annotation ${PROXY_POD_SCHEDULING_CONSTRAINTS_ANNOTATION} could not be read: keep to nodeSelector, tolerations, affinity and topologySpreadConstraints, as in a PodSpec`,
      { cause: err },
    );
  }
}

/**
 * A not-ready/unreachable NoExecute toleration with `tolerationSeconds` (the
 * DefaultTolerationSeconds admission plugin adds 300 s ones before webhooks run). The taint
 * manager evicts after the smallest `tolerationSeconds` among matching tolerations, so such an
 * entry would defeat our unbounded one; the delegate keeps it through the saved manifest.
 */
function isBoundedOutageToleration(t: V1Toleration): boolean {
  return (t.key === NOT_READY_TAINT || t.key === UNREACHABLE_TAINT) && (t.effect === 'NoExecute' || !t.effect) && t.tolerationSeconds !== undefined && t.tolerationSeconds !== null;
}

/**
 * Concatenation without duplicates (an absent operator means `Equal`), in one pass: each entry
 * is keyed by its canonical JSON, so the cost is linear in the entries (a pairwise comparison
 * made 6000 tolerations cost seconds of the event loop).
 */
function mergeTolerations(...lists: ReadonlyArray<readonly V1Toleration[]>): V1Toleration[] {
  const out: V1Toleration[] = [];
  const seen = new Set<string>();
  for (const list of lists) {
    for (const t of list) {
      const key = canonicalJson({ ...t, operator: t.operator || 'Equal' });
      if (seen.has(key)) continue;
      seen.add(key);
      out.push(structuredClone(t));
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
 * split in two: with `target-namespace In [ns]`, and with `cluster-target-name Exists`. The
 * user's own expressions on these keys are kept, ANDed with the scope, so they can only narrow
 * it (choosing among ClusterTargets by name, say), never widen it.
 *
 * Idempotent: a term that already contains one of the two scope expressions exactly is left
 * alone (webhook reinvocation). Such a term can only match allowed nodes whatever else it says,
 * so this is safe for terms the user wrote too; a term that merely mentions our keys (e.g.
 * `target-namespace In [other]`) is not trusted.
 */
function withTargetScope(affinity: V1Affinity | undefined, namespace: string): V1Affinity {
  const scopes: V1NodeSelectorRequirement[] = [
    { key: TARGET_NAMESPACE_LABEL, operator: 'In', values: [labelValueFor(namespace)] },
    { key: CLUSTER_TARGET_NAME_LABEL, operator: 'Exists' },
  ];
  const isScope = (e: V1NodeSelectorRequirement) => scopes.some((s) => jsonEqual(normalRequirement(e), s));
  const scoped = (t: V1NodeSelectorTerm) => (t.matchExpressions ?? []).some(isScope);
  const required = affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
  const terms: V1NodeSelectorTerm[] = required?.nodeSelectorTerms?.length ? required.nodeSelectorTerms : [{}];
  if (terms.every(scoped)) return affinity!;
  const nodeSelectorTerms = terms.flatMap((t) => (scoped(t) ? [t] : scopes.map((s) => ({ ...t, matchExpressions: [...(t.matchExpressions ?? []), s] }))));
  return { ...affinity, nodeAffinity: { ...affinity?.nodeAffinity, requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms } } };
}

/** A requirement as JSON would carry it, so that an exact comparison ignores absent `values`. */
function normalRequirement(e: V1NodeSelectorRequirement): V1NodeSelectorRequirement {
  return e.values === undefined || e.values === null || (e.operator === 'Exists' && e.values.length === 0)
    ? { key: e.key, operator: e.operator }
    : { key: e.key, operator: e.operator, values: e.values };
}

/**
 * Whether a CREATE that carries `SOURCE_POD_MANIFEST_ANNOTATION` is our own proxy coming back
 * (the apiserver calls us again when a later webhook changed the pod: `reinvocationPolicy:
 * IfNeeded`). The AdmissionReview does not say whether a call is a reinvocation, so we look for
 * every mark our first pass leaves: the finalizer, the label and the virtual-node selector. A
 * pod creator could copy them; what a manifest can then change is bounded by the delegate
 * builder, which takes only scheduling fields from it (see `delegateSourcePod`).
 */
function isProxyOnReinvocation(pod: V1Pod): boolean {
  return (
    (pod.metadata?.finalizers ?? []).includes(PROXY_FINALIZER) &&
    pod.metadata?.labels?.[HAS_FINALIZER_LABEL] === 'true' &&
    pod.spec?.nodeSelector?.[VIRTUAL_KUBELET_PROVIDER_LABEL] === VIRTUAL_KUBELET_PROVIDER_VALUE
  );
}

/**
 * Whether a manifest on a pod being created has the shape ours has: a JSON object with a spec
 * object (`savedSourcePodManifest`). YAML is read only from proxies Admiralty made before a
 * migration, never taken at creation: a pod that copies our marks could otherwise hand every
 * later reader of its manifest (the extender's filter, on each try) YAML to parse.
 */
function isSavedManifestShape(text: string): boolean {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return false;
  }
  const spec = (parsed as { spec?: unknown } | null)?.spec;
  return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) && typeof spec === 'object' && spec !== null && !Array.isArray(spec);
}
