import type { V1Container, V1Pod, V1PodSpec, V1Volume } from '@kubernetes/client-node';
import { ValidationError } from '../core/errors.js';
import { parseUntrustedYaml } from '../core/untrusted-yaml.js';
import {
  KEY_PREFIX,
  NO_PREFIX_LABEL_REGEXP_ANNOTATION,
  PARENT_CLUSTER_NAME_LABEL,
  PARENT_NAMESPACE_ANNOTATION,
  PARENT_NAME_ANNOTATION,
  PARENT_UID_LABEL,
  SOURCE_POD_MANIFEST_ANNOTATION,
} from '../core/keys.js';
import { parseNoPrefixRegexp, prefixLabels } from './labels.js';
import { delegatePodName } from './names.js';

/** Where the kubelet mounts a pod's service-account token. */
export const SERVICE_ACCOUNT_MOUNT_PATH = '/var/run/secrets/kubernetes.io/serviceaccount';

/** Options of {@link buildDelegatePod}. */
export interface DelegatePodOptions {
  /** Name of the source cluster (ours), written to `parent-cluster-name` and hashed into the name. */
  sourceClusterName: string;
}

/** Largest saved manifest we parse as YAML: all of a pod's annotations together are capped at 256 KiB. */
const MAX_MANIFEST_BYTES = 256 * 1024;

/**
 * Reads the source pod manifest the webhook saved on the proxy (JSON; YAML is accepted too, since
 * Admiralty wrote YAML and JSON is a subset of it).
 *
 * @throws ValidationError when the annotation is absent or is not an object.
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
  if (!pod.spec || typeof pod.spec !== 'object' || !Array.isArray(pod.spec.containers)) {
    throw new ValidationError(`proxy pod ${key}: ${SOURCE_POD_MANIFEST_ANNOTATION} has no spec.containers`);
  }
  return pod;
}

/**
 * Names of the volumes that carry the source cluster's service-account token, which the delegate
 * must not get (the token is useless in the target, and the target injects its own):
 * * projected volumes named `kube-api-access-*` with a `serviceAccountToken` source (what the
 *   ServiceAccount admission plugin adds since 1.22);
 * * legacy Secret volumes whose secret is named `<serviceAccountName>-token-*`;
 * * any volume mounted at {@link SERVICE_ACCOUNT_MOUNT_PATH} by a container (Admiralty's rule).
 */
export function serviceAccountTokenVolumeNames(spec: V1PodSpec): Set<string> {
  const names = new Set<string>();
  const sa = spec.serviceAccountName || spec.serviceAccount || 'default';
  for (const v of spec.volumes ?? []) {
    if (v.name.startsWith('kube-api-access-') && v.projected?.sources?.some((s) => s.serviceAccountToken)) {
      names.add(v.name);
    }
    if (v.secret?.secretName?.startsWith(`${sa}-token-`)) names.add(v.name);
  }
  for (const c of allContainers(spec)) {
    for (const m of c.volumeMounts ?? []) {
      if (m.mountPath.replace(/\/+$/, '') === SERVICE_ACCOUNT_MOUNT_PATH) names.add(m.name);
    }
  }
  return names;
}

/** Containers, init containers and ephemeral containers of a spec (ephemeral ones share the fields we read). */
export function allContainers(spec: V1PodSpec): Pick<V1Container, 'name' | 'env' | 'envFrom' | 'volumeMounts'>[] {
  return [...(spec.initContainers ?? []), ...(spec.containers ?? []), ...(spec.ephemeralContainers ?? [])];
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
 * Builds the delegate pod of a proxy pod, to be created in the target the proxy is bound to.
 * Everything comes from the source pod manifest (the pod as the user submitted it, before the
 * webhook turned it into a proxy), not from the live proxy:
 *
 * * name: {@link delegatePodName} (deterministic); namespace: the proxy's;
 * * labels: the source labels re-prefixed ({@link prefixLabels}, honouring the manifest's
 *   `no-prefix-label-regexp`), plus `parent-uid` = proxy UID and `parent-cluster-name`;
 * * annotations: the source annotations minus every `multicluster.admiralty.io/*` key, plus
 *   `parent-name` and `parent-namespace`;
 * * spec: the source spec (so tolerations, affinity, topology spread and nodeSelector are the
 *   user's, not the proxy's), minus the service-account token volumes and their mounts, with
 *   `nodeName`, `priority`, `preemptionPolicy`, `overhead`, `schedulingGates` and ephemeral
 *   containers cleared (see inline comments); `schedulerName`, `serviceAccountName` and
 *   `priorityClassName` are kept, so the target must have that ServiceAccount/PriorityClass;
 * * no ownerReferences, finalizers, uid, resourceVersion, timestamps, managedFields,
 *   generateName or status.
 *
 * Pure and deterministic; called by the delegation reconciler.
 *
 * @throws ValidationError when the manifest is missing or unparsable, the proxy has no UID, or the
 *   no-prefix regexp does not compile.
 */
export function buildDelegatePod(proxy: V1Pod, opts: DelegatePodOptions): V1Pod {
  const manifest = sourcePodManifest(proxy);
  const proxyName = proxy.metadata?.name;
  const namespace = proxy.metadata?.namespace;
  const uid = proxy.metadata?.uid;
  if (!proxyName || !namespace || !uid) {
    throw new ValidationError('proxy pod must have a name, a namespace and a uid');
  }
  const sourceAnnotations = manifest.metadata?.annotations ?? {};
  const regexpSource =
    sourceAnnotations[NO_PREFIX_LABEL_REGEXP_ANNOTATION] ?? proxy.metadata?.annotations?.[NO_PREFIX_LABEL_REGEXP_ANNOTATION];
  const labels = prefixLabels(manifest.metadata?.labels, parseNoPrefixRegexp(regexpSource));
  labels[PARENT_UID_LABEL] = uid;
  labels[PARENT_CLUSTER_NAME_LABEL] = opts.sourceClusterName;

  const annotations: Record<string, string> = {};
  for (const [k, v] of Object.entries(sourceAnnotations)) {
    if (!k.startsWith(KEY_PREFIX)) annotations[k] = v;
  }
  annotations[PARENT_NAME_ANNOTATION] = proxyName;
  annotations[PARENT_NAMESPACE_ANNOTATION] = namespace;

  const spec: V1PodSpec = withoutTokenVolumes(structuredClone(manifest.spec!));
  // A manifest taken at admission has no nodeName, but a pod created already bound would carry
  // the source node's name, meaningless in the target.
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
