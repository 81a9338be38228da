/**
 * What a pod spec names outside itself, read and rewritten in one place: the service-account
 * token volumes a delegate does not get, and the ConfigMaps and Secrets that follow a delegate
 * into its target. Pure; used by the delegate builder and the follow reconciler.
 */
import type { V1Container, V1PodSpec } from '@kubernetes/client-node';

/** Where the kubelet mounts a pod's service-account token. */
export const SERVICE_ACCOUNT_MOUNT_PATH = '/var/run/secrets/kubernetes.io/serviceaccount';

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

/** The two kinds of objects a delegate's spec names and the follow reconciler copies. */
export type CopyKind = 'configmap' | 'secret';

/**
 * What the delegate of one proxy calls the copies in its target, per kind: source name -> copy
 * name. A name absent from the map is left as it is. Maps, not records: `constructor` is a valid
 * object name.
 */
export type CopyNames = Record<CopyKind, Map<string, string>>;

/**
 * ConfigMaps every cluster publishes itself in every namespace (kube-controller-manager's
 * root-ca-cert-publisher): the target's own is the right one for a delegate there, so these are
 * never copied and never renamed, even when a user's own projected volume names them.
 */
const TARGET_OWN_CONFIGMAPS: ReadonlySet<string> = new Set(['kube-root-ca.crt']);

/** One place in a pod spec that names a ConfigMap or Secret: `holder[field]`. */
interface Slot {
  kind: CopyKind;
  holder: Record<string, unknown>;
  field: string;
}

/**
 * Every place in `spec` that names a ConfigMap or Secret of the pod's namespace: `configMap`,
 * `secret` and projected volume sources, the volume plugins' secret references (CSI
 * `nodePublishSecretRef`, azureFile, cephfs, cinder, flexVolume, iscsi, rbd, scaleIO, storageos),
 * `env[].valueFrom.configMapKeyRef`/`secretKeyRef` and `envFrom[].configMapRef`/`secretRef` of
 * containers, init containers and ephemeral containers, and `imagePullSecrets`. The service-account
 * token volumes that the delegate builder strips, and {@link TARGET_OWN_CONFIGMAPS}, are left out.
 * One list serves both reading the references and rewriting them, so the two never differ.
 */
function referenceSlots(spec: V1PodSpec): Slot[] {
  const skip = serviceAccountTokenVolumeNames(spec);
  const slots: Slot[] = [];
  const add = (kind: CopyKind, holder: object | undefined, field = 'name') => {
    const value = (holder as Record<string, unknown> | undefined)?.[field];
    if (typeof value !== 'string' || value === '') return;
    if (kind === 'configmap' && TARGET_OWN_CONFIGMAPS.has(value)) return;
    slots.push({ kind, holder: holder as Record<string, unknown>, field });
  };
  for (const v of spec.volumes ?? []) {
    if (skip.has(v.name)) continue;
    add('configmap', v.configMap);
    add('secret', v.secret, 'secretName');
    add('secret', v.csi?.nodePublishSecretRef);
    add('secret', v.azureFile, 'secretName');
    for (const ref of [v.cephfs, v.cinder, v.flexVolume, v.iscsi, v.rbd, v.scaleIO, v.storageos]) add('secret', ref?.secretRef);
    for (const s of v.projected?.sources ?? []) {
      add('configmap', s.configMap);
      add('secret', s.secret);
    }
  }
  for (const c of allContainers(spec)) {
    for (const e of c.env ?? []) {
      add('configmap', e.valueFrom?.configMapKeyRef);
      add('secret', e.valueFrom?.secretKeyRef);
    }
    for (const e of c.envFrom ?? []) {
      add('configmap', e.configMapRef);
      add('secret', e.secretRef);
    }
  }
  for (const s of spec.imagePullSecrets ?? []) add('secret', s);
  return slots;
}

/**
 * Names of the ConfigMaps and of the Secrets a pod spec references (in its own namespace), each
 * list sorted and deduplicated, from one walk of the spec (follow reads both for every proxy that
 * changes). ConfigMaps: `configMap` volumes, projected `configMap` sources,
 * `env[].valueFrom.configMapKeyRef` and `envFrom[].configMapRef`; `kube-root-ca.crt` is left out
 * wherever it is named, as every target has its own. Secrets: `secret` volumes, projected `secret`
 * sources, volume plugins' secret references (CSI `nodePublishSecretRef`, azureFile, cephfs,
 * cinder, flexVolume, iscsi, rbd, scaleIO, storageos), `env[].valueFrom.secretKeyRef`,
 * `envFrom[].secretRef`, and `imagePullSecrets`. Containers, init containers and ephemeral
 * containers alike; the service-account token volumes that the delegate builder strips are
 * ignored. Pure; called by the follow reconciler.
 */
export function referencedNames(spec: V1PodSpec): Record<CopyKind, string[]> {
  const names: Record<CopyKind, Set<string>> = { configmap: new Set(), secret: new Set() };
  for (const s of referenceSlots(spec)) names[s.kind].add(s.holder[s.field] as string);
  return { configmap: [...names.configmap].sort(), secret: [...names.secret].sort() };
}

/**
 * `spec` (a copy; the argument is not changed) with every reference to a ConfigMap or Secret
 * that `names` maps replaced by the copy's name, in every place {@link referencedNames}
 * reads. Pure; called by the delegate builder.
 */
export function withCopyNames(spec: V1PodSpec, names: CopyNames): V1PodSpec {
  const out = structuredClone(spec);
  for (const slot of referenceSlots(out)) {
    const renamed = names[slot.kind].get(slot.holder[slot.field] as string);
    if (renamed !== undefined) slot.holder[slot.field] = renamed;
  }
  return out;
}
