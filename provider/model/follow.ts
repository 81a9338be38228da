import type { V1ConfigMap, V1ObjectMeta, V1Secret } from '@kubernetes/client-node';
import { HAS_FINALIZER_LABEL, PARENT_CLUSTER_NAME_LABEL, PARENT_NAMESPACE_ANNOTATION, PARENT_NAME_ANNOTATION, PARENT_UID_LABEL } from '../core/keys.js';
import { ValidationError } from '../core/errors.js';
import { stringMapEquals } from './maps.js';

/** Options of the copy builders. */
export interface CopyOptions {
  sourceClusterName: string;
  /** Name of the copy (default: the source object's); see `copyName`. */
  name?: string;
}

/**
 * Metadata of a copy in a target: `opts.name` (default: the source's name), same namespace, the
 * source's labels and annotations
 * (minus our `has-finalizer` label, which belongs to the local object) plus `parent-uid`,
 * `parent-cluster-name`, `parent-name` and `parent-namespace`. Nothing server-owned (uid,
 * resourceVersion, timestamps, managedFields), no ownerReferences, no finalizers.
 *
 * @throws ValidationError when the source has no name, namespace or uid.
 */
export function copyMetadata(src: V1ObjectMeta | undefined, opts: CopyOptions): V1ObjectMeta {
  const name = src?.name;
  const namespace = src?.namespace;
  const uid = src?.uid;
  if (!name || !namespace || !uid) throw new ValidationError('object to copy must have a name, a namespace and a uid');
  const labels: Record<string, string> = { ...(src?.labels ?? {}) };
  delete labels[HAS_FINALIZER_LABEL];
  labels[PARENT_UID_LABEL] = uid;
  labels[PARENT_CLUSTER_NAME_LABEL] = opts.sourceClusterName;
  const annotations: Record<string, string> = { ...(src?.annotations ?? {}) };
  annotations[PARENT_NAME_ANNOTATION] = name;
  annotations[PARENT_NAMESPACE_ANNOTATION] = namespace;
  return { name: opts.name ?? name, namespace, labels, annotations };
}

/**
 * The copy of a local ConfigMap to write in a target: {@link copyMetadata}, same `data`,
 * `binaryData` and `immutable`. Pure; called by the follow reconciler.
 */
export function buildConfigMapCopy(src: V1ConfigMap, opts: CopyOptions): V1ConfigMap {
  const copy: V1ConfigMap = { apiVersion: 'v1', kind: 'ConfigMap', metadata: copyMetadata(src.metadata, opts) };
  if (src.data) copy.data = { ...src.data };
  if (src.binaryData) copy.binaryData = { ...src.binaryData };
  if (src.immutable !== undefined) copy.immutable = src.immutable;
  return copy;
}

/**
 * Secret types that are this cluster's own credentials: a ServiceAccount's token and a
 * bootstrap token. A copy in a target would hand whoever may read Secrets there (and every other
 * source's delegates in that namespace) a credential for this cluster.
 */
const CREDENTIAL_SECRET_TYPES = new Set(['kubernetes.io/service-account-token', 'bootstrap.kubernetes.io/token']);

/**
 * Why `src` is never copied into a target, or undefined when it may be: a Secret holding this
 * cluster's own credentials (see {@link CREDENTIAL_SECRET_TYPES}). Pure; the follow reconciler
 * refuses the pod's delegation with reason `CopyRefused`, and keeps no copy of it anywhere.
 */
export function copyRefusal(kind: 'configmap' | 'secret', src: V1ConfigMap | V1Secret): string | undefined {
  const type = kind === 'secret' ? (src as V1Secret).type : undefined;
  if (!type || !CREDENTIAL_SECRET_TYPES.has(type)) return undefined;
  return `secret ${src.metadata?.namespace}/${src.metadata?.name} is of type ${type}, a credential for this cluster: it is never copied to a target (give the pod a Secret of its own there, or one of another type here)`;
}

/**
 * The copy of a local Secret to write in a target: {@link copyMetadata}, same `data`, `type` and
 * `immutable`. `stringData` (write-only, only present on objects not read back from the API) is
 * folded into `data` as base64, which is what the apiserver would store, so copies compare equal
 * to what a target returns. Never called for a Secret that {@link copyRefusal} refuses. Pure;
 * called by the follow reconciler.
 */
export function buildSecretCopy(src: V1Secret, opts: CopyOptions): V1Secret {
  const copy: V1Secret = { apiVersion: 'v1', kind: 'Secret', metadata: copyMetadata(src.metadata, opts) };
  const data: Record<string, string> = { ...(src.data ?? {}) };
  for (const [k, v] of Object.entries(src.stringData ?? {})) data[k] = Buffer.from(v, 'utf8').toString('base64');
  if (src.data || src.stringData) copy.data = data;
  if (src.type !== undefined) copy.type = src.type;
  if (src.immutable !== undefined) copy.immutable = src.immutable;
  return copy;
}

/**
 * Whether a remote object is a copy made by this source cluster: non-empty `parent-uid` label
 * and `parent-cluster-name` equal to ours (and, when `parentUid` is given, `parent-uid` equal to
 * it). Never update or delete a remote object for which this is false: a same-name object that is
 * not ours (e.g. each cluster's own `kube-root-ca.crt`) is left alone.
 */
export function isOwnedCopy(obj: { metadata?: V1ObjectMeta }, sourceClusterName: string, parentUid?: string): boolean {
  const labels = obj.metadata?.labels ?? {};
  const uid = labels[PARENT_UID_LABEL];
  if (!uid || labels[PARENT_CLUSTER_NAME_LABEL] !== sourceClusterName) return false;
  return parentUid === undefined || uid === parentUid;
}

/**
 * Whether a remote object is this source cluster's copy of the object named `parentName` in the
 * same namespace: {@link isOwnedCopy} and `parent-name` equal to it. A copy of ours under a
 * name that is not the one we expect (a 40-bit hash collision, or an earlier version's copy of
 * an object literally named like a copy) belongs to another object and is left alone.
 */
export function isCopyOf(obj: { metadata?: V1ObjectMeta }, sourceClusterName: string, parentName: string): boolean {
  return isOwnedCopy(obj, sourceClusterName) && obj.metadata?.annotations?.[PARENT_NAME_ANNOTATION] === parentName;
}

/**
 * Whether a remote object is a copy that Admiralty or this project made for a source other than
 * `sourceClusterName`: its `parent-cluster-name` label names another cluster (the empty name,
 * Admiralty's default, included), or it has no such label but carries another mark of a copy
 * (`parent-uid` as a label or, as Admiralty before 0.11 wrote it, as an annotation; `parent-name`).
 * A delegate must never name such an object: it is another source's data. Pure.
 */
export function isOtherSourcesCopy(obj: { metadata?: V1ObjectMeta }, sourceClusterName: string): boolean {
  const labels = obj.metadata?.labels ?? {};
  const annotations = obj.metadata?.annotations ?? {};
  if (PARENT_CLUSTER_NAME_LABEL in labels) return labels[PARENT_CLUSTER_NAME_LABEL] !== sourceClusterName;
  return PARENT_UID_LABEL in labels || PARENT_UID_LABEL in annotations || PARENT_NAME_ANNOTATION in annotations;
}

/**
 * Why a delegate may not name `inTarget`, the object of the target that a reference to
 * `<namespace>/<name>` (absent from this cluster) would name as it is, or undefined when it may
 * (it does not exist, or it is the target's own, or this source's): another source's copy
 * ({@link isOtherSourcesCopy}). The message names the object and not the other source. Pure;
 * the follow reconciler refuses the pod's delegation with reason `CopyConflict`.
 */
export function missingOriginalConflict(kind: 'configmap' | 'secret', inTarget: { metadata?: V1ObjectMeta } | undefined, sourceClusterName: string, targetName: string): string | undefined {
  if (!inTarget || !isOtherSourcesCopy(inTarget, sourceClusterName)) return undefined;
  const where = `${inTarget.metadata?.namespace}/${inTarget.metadata?.name}`;
  return `${kind} ${where} does not exist here, and ${kind} ${where} in ${targetName} is a copy that belongs to another source: no delegate is made to read it`;
}

type Copy = V1ConfigMap | V1Secret;

function contentEquals(a: Copy, b: Copy): boolean {
  return stringMapEquals(a.data, b.data) && stringMapEquals((a as V1ConfigMap).binaryData, (b as V1ConfigMap).binaryData) && (a as V1Secret).type === (b as V1Secret).type;
}

/**
 * Whether the remote copy differs from the desired one in what we own: data, binaryData, Secret
 * type, immutable, labels and annotations (exactly). Pure.
 */
export function copyNeedsUpdate(existing: Copy, desired: Copy): boolean {
  return (
    !contentEquals(existing, desired) ||
    (existing.immutable ?? false) !== (desired.immutable ?? false) ||
    !stringMapEquals(existing.metadata?.labels, desired.metadata?.labels) ||
    !stringMapEquals(existing.metadata?.annotations, desired.metadata?.annotations)
  );
}

/**
 * Whether an update cannot be applied in place and the copy must be deleted and created again:
 * the existing copy is immutable and its content or immutability must change, or a Secret's
 * `type` changes (the apiserver refuses both). Check after {@link copyNeedsUpdate}. Pure.
 */
export function copyNeedsRecreate(existing: Copy, desired: Copy): boolean {
  if ((existing as V1Secret).type !== (desired as V1Secret).type) return true;
  if (existing.immutable !== true) return false;
  return !contentEquals(existing, desired) || desired.immutable !== true;
}
