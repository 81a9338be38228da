import type { V1Affinity, V1Container, V1NodeSelectorTerm, V1Pod, V1PodSpec, V1Volume } from '@kubernetes/client-node';
import { ValidationError } from '../core/errors.js';
import { parseUntrustedYaml } from '../core/untrusted-yaml.js';
import {
  HAS_FINALIZER_LABEL,
  KEY_PREFIX,
  NO_PREFIX_LABEL_REGEXP_ANNOTATION,
  PARENT_CLUSTER_NAME_LABEL,
  PARENT_NAMESPACE_ANNOTATION,
  PARENT_NAME_ANNOTATION,
  PARENT_UID_LABEL,
  SOURCE_POD_MANIFEST_ANNOTATION,
  VIRTUAL_KUBELET_PROVIDER_LABEL,
  VIRTUAL_KUBELET_PROVIDER_VALUE,
} from '../core/keys.js';
import { parseNoPrefixRegexp, prefixLabels } from './labels.js';
import { serviceAccountTokenVolumeNames, withCopyNames, type CopyNames } from './pod-references.js';
import { delegatePodName } from './names.js';
import { resolveTargetKeys } from './target-keys.js';

/** Options of {@link buildDelegatePod}. */
export interface DelegatePodOptions {
  /** Name of the source cluster (ours), written to `parent-cluster-name` and hashed into the name. */
  sourceClusterName: string;
  /**
   * The names of this source's copies in the target (see `FollowReconciler.ensureCopies`): the
   * delegate's references to those ConfigMaps and Secrets are rewritten to them. Absent (a self
   * target), or for a name it does not map, a reference keeps its name.
   */
  copyNames?: CopyNames;
  /**
   * The target's own labels (`targetIdentityLabels`): the pod's nodeSelector and required node
   * affinity on them are resolved against it (`resolveTargetKeys`), as the extender's filter
   * judged them, since no real node there has them. Absent, or a target they exclude: kept as
   * they are.
   */
  targetLabels?: Readonly<Record<string, string>>;
  /** For a member of a gang being placed: the PodGroup it joins in the target, and the domain its plan keeps it in. */
  gang?: DelegateGang;
}

/**
 * What a gang's plan says of one delegate: the PodGroup of the target it joins
 * (`spec.schedulingGroup.podGroupName`; none: it joins none), and the domain of a real node
 * label it must run in (added to its nodeSelector).
 */
export interface DelegateGang {
  podGroupName?: string;
  domain?: { key: string; value: string };
}

/** Largest saved manifest we parse as YAML (Admiralty wrote YAML ones, of a few KB; ours are JSON): about 1 ms per KB of the event loop. */
const MAX_MANIFEST_BYTES = 64 * 1024;

/**
 * What the webhook saves of an admitted pod in `SOURCE_POD_MANIFEST_ANNOTATION`, as JSON: its
 * name (or generateName) and namespace, and of its spec the {@link MANIFEST_SCHEDULING_FIELDS}
 * it has, as the user wrote them, before the proxy's own replace them. That is all a delegate
 * takes from the manifest ({@link delegateSourceView}); the rest of the pod is on the proxy,
 * unchanged. Admiralty saved the whole pod, which every write and watch event of a proxy then
 * carried twice (its manifests are still read: {@link sourcePodManifest}).
 *
 * Pure; called by the webhook on a pod's first admission.
 */
export function savedSourcePodManifest(pod: V1Pod): string {
  const { name, generateName, namespace } = pod.metadata ?? {};
  return JSON.stringify({ apiVersion: 'v1', kind: 'Pod', metadata: { name, generateName, namespace }, spec: schedulingFieldsOf(pod.spec ?? {}) });
}

/** The {@link MANIFEST_SCHEDULING_FIELDS} a spec has (null ones included), and nothing else: what a saved manifest needs to hold. */
export function schedulingFieldsOf(spec: object): Record<string, unknown> {
  const kept: Record<string, unknown> = {};
  for (const f of MANIFEST_SCHEDULING_FIELDS) {
    const value = (spec as Record<string, unknown>)[f];
    if (value !== undefined) kept[f] = value;
  }
  return kept;
}

/**
 * Reads the source pod manifest the webhook saved on the proxy: ours ({@link
 * savedSourcePodManifest}), or a whole pod, as an earlier version of ours and Admiralty saved
 * (JSON; YAML too, since Admiralty wrote YAML and JSON is a subset of it). Only its spec's
 * {@link MANIFEST_SCHEDULING_FIELDS} are read.
 *
 * @throws ValidationError when the annotation is absent or is not an object with a spec object.
 */
export function sourcePodManifest(proxy: V1Pod): V1Pod {
  const raw = proxy.metadata?.annotations?.[SOURCE_POD_MANIFEST_ANNOTATION];
  const key = `${proxy.metadata?.namespace ?? ''}/${proxy.metadata?.name ?? ''}`;
  if (raw === undefined || raw === '') {
    throw new ValidationError(`proxy pod ${key} has no ${SOURCE_POD_MANIFEST_ANNOTATION} annotation`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    try {
      parsed = parseUntrustedYaml(raw, { maxBytes: MAX_MANIFEST_BYTES });
    } catch (err) {
      throw new ValidationError(`proxy pod ${key}: ${SOURCE_POD_MANIFEST_ANNOTATION} is neither JSON nor YAML`, { cause: err });
    }
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new ValidationError(`proxy pod ${key}: ${SOURCE_POD_MANIFEST_ANNOTATION} is not an object`);
  }
  const pod = parsed as V1Pod;
  if (!pod.spec || typeof pod.spec !== 'object' || Array.isArray(pod.spec)) {
    throw new ValidationError(`proxy pod ${key}: ${SOURCE_POD_MANIFEST_ANNOTATION} has no spec`);
  }
  return pod;
}

/** The spec without the service-account token volumes and the mounts that reference them. */
function withoutTokenVolumes(spec: V1PodSpec): V1PodSpec {
  const drop = serviceAccountTokenVolumeNames(spec);
  if (drop.size === 0) return spec;
  const strip = (c: V1Container): V1Container => ({
    ...c,
    volumeMounts: c.volumeMounts?.filter((m) => !drop.has(m.name)),
  });
  return {
    ...spec,
    volumes: spec.volumes?.filter((v: V1Volume) => !drop.has(v.name)),
    containers: spec.containers.map(strip),
    initContainers: spec.initContainers?.map(strip),
  };
}

/**
 * Spec fields the webhook rewrites on the proxy so that the stock kube-scheduler places it on a
 * virtual node (see `mutatePod`): the delegate takes these, and only these, from the saved
 * source pod manifest, where the user's own values are kept.
 */
export const MANIFEST_SCHEDULING_FIELDS = ['nodeSelector', 'affinity', 'tolerations', 'topologySpreadConstraints', 'schedulerName'] as const;

/**
 * The pod a delegate is made of: the proxy as it is now, except for the
 * {@link MANIFEST_SCHEDULING_FIELDS}, which come from the source pod manifest, and the proxy-only
 * marks (`HAS_FINALIZER_LABEL`, every `multicluster.admiralty.io/*` annotation but
 * `no-prefix-label-regexp`), which are dropped.
 *
 * Why not the whole manifest, as Admiralty does: the manifest is an annotation, so whoever
 * creates the pod can write it, and source-side admission (PodSecurity, policy webhooks) judges
 * the proxy, not the annotation. Taking containers, volumes, security contexts, host
 * namespaces, service account and annotations from the manifest would let a harmless-looking
 * proxy run a privileged delegate. The scheduling fields taken from it are ones the user could
 * have written on the pod anyway, so a forged manifest gains nothing.
 *
 * Pure; used by the delegate builder, the follow reconciler (what the delegate references) and
 * the scheduler extender (what the delegate needs to fit).
 *
 * @throws ValidationError when the manifest is missing or unparsable.
 */
export function delegateSourcePod(proxy: V1Pod): V1Pod {
  const view = delegateSourceView(proxy);
  return { ...view, spec: structuredClone(view.spec) };
}

/**
 * {@link delegateSourcePod} without the copy of the spec: its objects are the proxy's and those
 * of the manifest parsed for this call, so it is for reading only (what the delegate will need
 * to fit, what it references). A filter call or a reconcile that only reads saves a deep copy of the spec.
 *
 * @throws ValidationError as {@link delegateSourcePod}.
 */
export function delegateSourceView(proxy: V1Pod): V1Pod {
  const manifest = sourcePodManifest(proxy);
  const spec = { ...(proxy.spec ?? ({} as V1PodSpec)) };
  for (const field of MANIFEST_SCHEDULING_FIELDS) {
    const value = manifest.spec?.[field];
    if (value === undefined || value === null) delete spec[field];
    else (spec as unknown as Record<string, unknown>)[field] = value;
  }
  const labels = { ...proxy.metadata?.labels };
  delete labels[HAS_FINALIZER_LABEL];
  const annotations: Record<string, string> = {};
  for (const [k, v] of Object.entries(proxy.metadata?.annotations ?? {})) {
    if (!k.startsWith(KEY_PREFIX) || k === NO_PREFIX_LABEL_REGEXP_ANNOTATION) annotations[k] = v;
  }
  return { ...proxy, metadata: { ...proxy.metadata, labels, annotations }, spec };
}

/**
 * Builds the delegate pod of a proxy pod, to be created in the target the proxy is bound to,
 * from {@link delegateSourcePod} (the live proxy, with the user's scheduling fields restored from
 * the source pod manifest):
 *
 * * name: {@link delegatePodName} (deterministic); namespace: the proxy's;
 * * labels: the proxy's labels re-prefixed ({@link prefixLabels}, honouring the proxy's
 *   `no-prefix-label-regexp`), plus `parent-uid` = proxy UID and `parent-cluster-name`;
 * * annotations: the proxy's annotations minus every `multicluster.admiralty.io/*` key, plus
 *   `parent-name` and `parent-namespace`;
 * * spec: the proxy's spec with the manifest's tolerations, affinity, topology spread,
 *   nodeSelector and schedulerName (the proxy's is the source's proxy scheduler), requirements
 *   on the target's own labels resolved (`opts.targetLabels`), the affinity kept off virtual nodes ({@link offVirtualNodes}: a delegate is never sent on), minus the
 *   service-account token volumes and their mounts, its ConfigMap and Secret references renamed
 *   to this source's copies (`opts.copyNames`, see `withCopyNames`), with `nodeName`, `priority`,
 *   `preemptionPolicy`, `overhead`, `schedulingGates` and ephemeral containers cleared (see
 *   inline comments); `serviceAccountName` and `priorityClassName` are kept, so the target must
 *   have that ServiceAccount/PriorityClass;
 * * no ownerReferences, finalizers, uid, resourceVersion, timestamps, managedFields,
 *   generateName or status.
 *
 * Pure and deterministic; called by the delegation reconciler.
 *
 * @throws ValidationError when the manifest is missing or unparsable, the proxy has no UID, or the
 *   no-prefix regexp does not compile.
 */
export function buildDelegatePod(proxy: V1Pod, opts: DelegatePodOptions): V1Pod {
  const source = delegateSourcePod(proxy);
  const { proxyName, namespace, uid } = checkedIdentity(proxy, source.spec?.containers);
  const sourceAnnotations = source.metadata?.annotations ?? {};
  const labels = prefixLabels(source.metadata?.labels, parseNoPrefixRegexp(sourceAnnotations[NO_PREFIX_LABEL_REGEXP_ANNOTATION]));
  labels[PARENT_UID_LABEL] = uid;
  labels[PARENT_CLUSTER_NAME_LABEL] = opts.sourceClusterName;

  const annotations: Record<string, string> = {};
  for (const [k, v] of Object.entries(sourceAnnotations)) {
    if (!k.startsWith(KEY_PREFIX)) annotations[k] = v;
  }
  annotations[PARENT_NAME_ANNOTATION] = proxyName;
  annotations[PARENT_NAMESPACE_ANNOTATION] = namespace;

  let spec: V1PodSpec = withoutTokenVolumes(source.spec!);
  if (opts.copyNames) spec = withCopyNames(spec, opts.copyNames);
  if (opts.targetLabels) spec = resolveTargetKeys(spec, opts.targetLabels) ?? spec;
  spec.affinity = offVirtualNodes(spec.affinity);
  // The proxy's node is a virtual node of the source, meaningless in the target.
  delete spec.nodeName;
  // The Priority admission plugin rejects a pod whose priority/preemptionPolicy differ from what
  // it computes from priorityClassName; the target must resolve its own (Admiralty clears priority).
  delete spec.priority;
  delete spec.preemptionPolicy;
  // Likewise the RuntimeClass admission plugin sets overhead from the target's RuntimeClass and
  // rejects a pod that brings a different one.
  delete spec.overhead;
  // Scheduling gates were honoured on the proxy (the stock scheduler waited for their removal);
  // the manifest still lists them, and nobody would ever lift them in the target.
  delete spec.schedulingGates;
  // The API refuses ephemeral containers on create; they are added through a subresource only.
  delete spec.ephemeralContainers;
  // The proxy's PodGroup is the source's: a delegate joins its target's PodGroup of the gang, or none.
  const grouped = spec as V1PodSpec & { schedulingGroup?: { podGroupName: string } };
  delete grouped.schedulingGroup;
  if (opts.gang?.podGroupName) grouped.schedulingGroup = { podGroupName: opts.gang.podGroupName };
  if (opts.gang?.domain) spec.nodeSelector = { ...spec.nodeSelector, [opts.gang.domain.key]: opts.gang.domain.value };
  dropEmpty(spec, 'volumes');
  for (const c of [...spec.containers, ...(spec.initContainers ?? [])]) dropEmpty(c, 'volumeMounts');

  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: delegatePodName(proxyName, opts.sourceClusterName, uid),
      namespace,
      labels,
      annotations,
    },
    spec,
  };
}

/**
 * The name {@link buildDelegatePod} gives the delegate of `proxy`, after the checks it makes, in
 * the same order (it throws the same ValidationError where {@link buildDelegatePod} would), but
 * without building the delegate: no clone of the spec, no labels or annotations. For the
 * reconciles that only look the delegate up (most of them: a proxy's delegate is created once,
 * and its status is mirrored several times); only a create needs the whole pod.
 *
 * Pure; called by the delegation reconciler on every reconcile of a bound proxy.
 *
 * @throws ValidationError as {@link buildDelegatePod}.
 */
export function delegateNameOf(proxy: V1Pod, opts: Pick<DelegatePodOptions, 'sourceClusterName'>): string {
  sourcePodManifest(proxy);
  const { proxyName, uid } = checkedIdentity(proxy, proxy.spec?.containers);
  parseNoPrefixRegexp(proxy.metadata?.annotations?.[NO_PREFIX_LABEL_REGEXP_ANNOTATION]);
  return delegatePodName(proxyName, opts.sourceClusterName, uid);
}

/** The proxy's name, namespace and uid, once checked, and that the pod has containers: what both builders check first. */
function checkedIdentity(proxy: V1Pod, containers: unknown): { proxyName: string; namespace: string; uid: string } {
  const proxyName = proxy.metadata?.name;
  const namespace = proxy.metadata?.namespace;
  const uid = proxy.metadata?.uid;
  if (!proxyName || !namespace || !uid) {
    throw new ValidationError('proxy pod must have a name, a namespace and a uid');
  }
  if (!Array.isArray(containers)) throw new ValidationError(`proxy pod ${namespace}/${proxyName} has no spec.containers`);
  return { proxyName, namespace, uid };
}

/** The requirement that keeps a pod off every virtual node (an absent label satisfies `NotIn`). */
const NOT_ON_A_VIRTUAL_NODE = { key: VIRTUAL_KUBELET_PROVIDER_LABEL, operator: 'NotIn', values: [VIRTUAL_KUBELET_PROVIDER_VALUE] };

/**
 * `affinity` with a requirement that no virtual node meets ANDed into every required node
 * selector term (one term holding only it when there is none), so that the target's scheduler
 * never binds the delegate to one of the target's own virtual nodes. Without it a delegate whose
 * user tolerates every taint (`operator: Exists` with no key) could land on one in a target that
 * is itself a source (mesh), or in the source itself (`self: true`), where no provider takes
 * it (it is no proxy): bound, and never running. Chains A→B→C are
 * therefore not supported: a delegate runs in the cluster it was sent to. Idempotent; pure.
 */
export function offVirtualNodes(affinity: V1Affinity | undefined): V1Affinity {
  const required = affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
  const terms: V1NodeSelectorTerm[] = required?.nodeSelectorTerms?.length ? required.nodeSelectorTerms : [{}];
  const isOurs = (e: { key: string; operator: string; values?: string[] }) =>
    e.key === NOT_ON_A_VIRTUAL_NODE.key && e.operator === 'NotIn' && e.values?.length === 1 && e.values[0] === VIRTUAL_KUBELET_PROVIDER_VALUE;
  const nodeSelectorTerms = terms.map((t) =>
    (t.matchExpressions ?? []).some(isOurs) ? t : { ...t, matchExpressions: [...(t.matchExpressions ?? []), { ...NOT_ON_A_VIRTUAL_NODE, values: [...NOT_ON_A_VIRTUAL_NODE.values] }] },
  );
  return { ...affinity, nodeAffinity: { ...affinity?.nodeAffinity, requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms } } };
}

/** Deletes `obj[key]` when it is an empty array, so the object reads as the API would return it. */
function dropEmpty<T extends object>(obj: T, key: keyof T): void {
  const v = obj[key];
  if (v === undefined || (Array.isArray(v) && v.length === 0)) delete obj[key];
}

/**
 * Label selector (`key=value`) that finds the delegate of a proxy in a target, by the proxy's UID.
 * Combine with {@link isOurDelegate} before any update or delete.
 */
export function delegateSelectorForProxy(proxyUid: string): string {
  return `${PARENT_UID_LABEL}=${proxyUid}`;
}

/** Of each container of a cached delegate: what `podRequests` and the reference readers read. */
const DELEGATE_CONTAINER_FIELDS = ['name', 'resources', 'restartPolicy', 'env', 'envFrom', 'volumeMounts'] as const;
/** Of a cached delegate's spec, besides its containers: its node, what `podRequests` and the reference readers read. */
const DELEGATE_SPEC_FIELDS = ['nodeName', 'overhead', 'resources', 'volumes', 'imagePullSecrets', 'serviceAccountName', 'serviceAccount'] as const;

/**
 * What the caches of delegates keep of a pod in a target: its metadata (labels, annotations,
 * UID, timestamps: ownership, the way back to the proxy, deletion), its whole status (mirrored
 * onto the proxy), and of its spec the node, what `podRequests` reads (the binder and the burst
 * room count the requests of delegates waiting for a node) and what `referencedNames`
 * reads (follow keeps a copy while a delegate names it): volumes, mounts,
 * env, envFrom, pull secrets, service account. Nothing reads the rest (image, command, probes,
 * scheduling constraints, security context), and every write to a delegate is built from its
 * proxy. Shares the objects it keeps with `pod`. Pure; the informer's transform.
 */
export function delegateFields(pod: V1Pod): V1Pod {
  const spec = pod.spec ?? { containers: [] };
  const containers = (list: V1Container[]) => list.map((c) => pick(c, DELEGATE_CONTAINER_FIELDS) as V1Container);
  return {
    metadata: pod.metadata,
    spec: {
      ...pick(spec, DELEGATE_SPEC_FIELDS),
      containers: containers(spec.containers ?? []),
      ...(spec.initContainers ? { initContainers: containers(spec.initContainers) } : {}),
      ...(spec.ephemeralContainers ? { ephemeralContainers: containers(spec.ephemeralContainers as V1Container[]) } : {}),
      // A gang's delegate: the binder reads its PodGroup's wait for the other members as no verdict.
      ...((spec as { schedulingGroup?: unknown }).schedulingGroup ? { schedulingGroup: (spec as { schedulingGroup?: unknown }).schedulingGroup } : {}),
    } as V1PodSpec,
    ...(pod.status ? { status: pod.status } : {}),
  };
}

/** The `keys` of `obj` that are set. */
function pick<T extends object, K extends keyof T>(obj: T, keys: readonly K[]): Pick<T, K> {
  const out = {} as Pick<T, K>;
  for (const k of keys) if (obj[k] !== undefined) out[k] = obj[k];
  return out;
}

/**
 * Whether a pod in a target is a delegate created by this source cluster: it has a non-empty
 * `parent-uid` label and `parent-cluster-name` equal to ours. When `proxyUid` is given, the
 * `parent-uid` must also equal it. Checked before every write to a remote pod.
 */
export function isOurDelegate(pod: V1Pod, sourceClusterName: string, proxyUid?: string): boolean {
  const labels = pod.metadata?.labels ?? {};
  const parentUid = labels[PARENT_UID_LABEL];
  if (!parentUid || labels[PARENT_CLUSTER_NAME_LABEL] !== sourceClusterName) return false;
  return proxyUid === undefined || parentUid === proxyUid;
}
