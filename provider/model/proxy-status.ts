import type { V1ContainerStatus, V1Pod, V1PodCondition, V1PodStatus } from '@kubernetes/client-node';
import { hash } from 'node:crypto';
import { KEY_PREFIX, REPLACEABLE_CONDITION, SOURCE_POD_MANIFEST_ANNOTATION, TARGET_REACHABLE_CONDITION } from '../core/keys.js';
import { schedulingFieldsOf } from './delegate-pod.js';
import { stringMapEquals } from './maps.js';
import { equalNormalized, normalJson } from './normalize.js';

/**
 * The status the proxy pod should have, mirrored from its delegate (Admiralty's feedback):
 * phase, conditions, podIP(s), hostIP(s), startTime, message and reason come from the delegate;
 * container and init-container statuses too, keeping only names that exist in the proxy's spec
 * (in the delegate's order). Kept from the proxy: `qosClass` (the apiserver treats it as
 * immutable and it follows from the proxy's own resources), `ephemeralContainerStatuses` (the
 * delegate has none: ephemeral containers are not delegated) and `observedGeneration` (it refers
 * to the proxy's generation). Conditions lose `observedGeneration`, which counts the delegate's
 * generations, not the proxy's. The proxy's own `TargetReachable` and `Replaceable` conditions
 * (the outage and replacement reconcilers') are kept after the delegate's: the delegate knows
 * nothing of its target's reachability or of re-placement, and dropping it here would make the two writers undo each other. Timestamps are
 * passed through as they are (Date or string).
 *
 * Pure; called by the delegation reconciler, which writes the result with the status subresource
 * when {@link statusEquals} says it differs from the proxy's.
 */
export function buildProxyStatus(proxy: V1Pod, delegate: V1Pod): V1PodStatus {
  const from: V1PodStatus = delegate.status ?? {};
  const own: V1PodStatus = proxy.status ?? {};
  const containerNames = new Set((proxy.spec?.containers ?? []).map((c) => c.name));
  const initNames = new Set((proxy.spec?.initContainers ?? []).map((c) => c.name));
  const status: V1PodStatus = {
    phase: from.phase,
    conditions: withOwnConditions(from.conditions?.map(withoutObservedGeneration), own.conditions),
    message: from.message,
    reason: from.reason,
    hostIP: from.hostIP,
    hostIPs: from.hostIPs,
    podIP: from.podIP,
    podIPs: from.podIPs,
    startTime: from.startTime,
    containerStatuses: filterByName(from.containerStatuses, containerNames),
    initContainerStatuses: filterByName(from.initContainerStatuses, initNames),
    ephemeralContainerStatuses: own.ephemeralContainerStatuses,
    qosClass: own.qosClass,
    observedGeneration: own.observedGeneration,
  };
  return pruneUndefined(status);
}

function withoutObservedGeneration(c: V1PodCondition): V1PodCondition {
  if (c.observedGeneration === undefined) return c;
  const { observedGeneration: _ignored, ...rest } = c;
  return rest;
}

/** Conditions the proxy carries of its own (outage and replacement reconcilers), not its delegate's. */
const OWN_CONDITIONS = new Set([TARGET_REACHABLE_CONDITION, REPLACEABLE_CONDITION]);

/** The delegate's conditions, then the proxy's own conditions (TargetReachable, Replaceable) if it has any. */
function withOwnConditions(mirrored: V1PodCondition[] | undefined, own: V1PodCondition[] | undefined): V1PodCondition[] | undefined {
  const kept = own?.filter((c) => OWN_CONDITIONS.has(c.type)) ?? [];
  if (kept.length === 0) return mirrored;
  return [...(mirrored ?? []).filter((c) => !OWN_CONDITIONS.has(c.type)), ...kept];
}

function filterByName(statuses: V1ContainerStatus[] | undefined, names: Set<string>): V1ContainerStatus[] | undefined {
  return statuses?.filter((s) => names.has(s.name));
}

function pruneUndefined<T extends object>(obj: T): T {
  for (const k of Object.keys(obj) as (keyof T)[]) {
    if (obj[k] === undefined) delete obj[k];
  }
  return obj;
}

/**
 * Whether two pod statuses are the same once normalized ({@link normalJson}), so a
 * reconciler can skip no-op status writes. Order of list items matters.
 */
export function statusEquals(a: V1PodStatus | undefined, b: V1PodStatus | undefined): boolean {
  return equalNormalized(a, b);
}

/**
 * Status fields that the proxies cache does not keep: the delegate's, mirrored (see
 * {@link buildProxyStatus}), and read by nothing of ours but the comparison before a status
 * write, which {@link proxyStatusEquals} makes on a digest instead. The container statuses are
 * most of a running pod's status.
 */
export const UNCACHED_PROXY_STATUS_FIELDS = ['containerStatuses', 'initContainerStatuses', 'hostIP', 'hostIPs', 'podIP', 'podIPs'] as const;

/** Where a cached proxy's status keeps the digest of the whole status: a symbol, so neither JSON, a spread nor a write carries it. */
const STATUS_DIGEST = Symbol('admiralty.proxyStatusDigest');

/** A short digest of a status's normal form: equal digests, equal statuses (as {@link statusEquals} says). */
function statusDigest(status: V1PodStatus | undefined): string {
  return hash('sha1', normalJson(status), 'base64');
}

/**
 * What the proxies cache keeps of the source pod manifest the webhook saved: of its spec, the
 * `MANIFEST_SCHEDULING_FIELDS`, the only fields `delegateSourcePod` takes from it, as JSON.
 * Ours holds little more (`savedSourcePodManifest`); a whole pod, as an earlier version of ours
 * and Admiralty saved, is often the largest part of a proxy. A manifest that is not a JSON object
 * with a spec object (a YAML one of Admiralty's, a broken one) is kept as it is, so that its
 * readers decide about it as before.
 */
export function cachedSourcePodManifest(raw: string): string {
  let pod: unknown;
  try {
    pod = JSON.parse(raw);
  } catch {
    return raw;
  }
  const spec = (pod as { spec?: Record<string, unknown> } | null)?.spec;
  if (!pod || typeof pod !== 'object' || Array.isArray(pod) || !spec || typeof spec !== 'object' || Array.isArray(spec)) return raw;
  return JSON.stringify({ spec: schedulingFieldsOf(spec) });
}

/**
 * What the proxies cache keeps of a proxy: all of it but
 *
 * * of the saved source pod manifest, what {@link cachedSourcePodManifest} keeps (nothing writes
 *   a cached proxy's annotations back: the delegation reconciler patches only the keys that
 *   change, and the manifest never does);
 * * the {@link UNCACHED_PROXY_STATUS_FIELDS} of its status, in whose place the status carries a
 *   digest of the whole (a non-enumerable symbol-keyed property: JSON, spreads and clones leave
 *   it out), for {@link proxyStatusEquals}.
 *
 * Metadata, spec (the delegate is built from it), phase, conditions, start time and the proxy's
 * own status fields stay. The status and annotations are new objects with only what is kept, not
 * the parsed ones with fields deleted (V8 keeps an object that lost properties in a larger,
 * slower form). Pure; the transform of the proxies informer.
 */
export function proxyFields(pod: V1Pod): V1Pod {
  const manifest = pod.metadata?.annotations?.[SOURCE_POD_MANIFEST_ANNOTATION];
  if (manifest !== undefined) pod.metadata!.annotations = { ...pod.metadata!.annotations, [SOURCE_POD_MANIFEST_ANNOTATION]: cachedSourcePodManifest(manifest) };
  if (!pod.status) return pod;
  const { containerStatuses: _c, initContainerStatuses: _i, hostIP: _h, hostIPs: _hs, podIP: _p, podIPs: _ps, ...kept } = pod.status;
  Object.defineProperty(kept, STATUS_DIGEST, { value: statusDigest(pod.status), enumerable: false });
  pod.status = kept;
  return pod;
}

/**
 * Whether the proxy's status is already `status` ({@link statusEquals}); for a proxy from the
 * cache ({@link proxyFields}), by the digest of its whole status. Called by the delegation
 * reconciler before it writes a proxy's status.
 */
export function proxyStatusEquals(proxy: V1Pod, status: V1PodStatus): boolean {
  const digest = (proxy.status as Record<symbol, string> | undefined)?.[STATUS_DIGEST];
  return digest === undefined ? statusEquals(proxy.status, status) : digest === statusDigest(status);
}

/**
 * A JSON merge patch of the proxy's status subresource that makes it exactly `status`, as an
 * update of the whole status would: every field of `status`, and null for each field the proxy
 * may have that `status` lacks (those of the cached status, and the uncached ones). Lists are
 * replaced whole by a merge patch. It carries the cached resourceVersion, so that a newer proxy
 * makes it fail with a conflict (409), as the update did. Pure; written by the delegation
 * reconciler.
 */
export function proxyStatusPatch(proxy: V1Pod, status: V1PodStatus): { metadata: { resourceVersion?: string }; status: Record<string, unknown> } {
  const body: Record<string, unknown> = {};
  for (const k of [...Object.keys(proxy.status ?? {}), ...UNCACHED_PROXY_STATUS_FIELDS]) body[k] = null;
  Object.assign(body, status);
  return { metadata: { resourceVersion: proxy.metadata?.resourceVersion }, status: body };
}

/**
 * The annotations the proxy should carry: its own `multicluster.admiralty.io/*` annotations
 * (the source manifest, the election) plus the delegate's other annotations, so annotations that
 * target-side controllers write on the delegate (e.g. Argo's executor) flow back. Non-Admiralty
 * annotations present only on the proxy are therefore dropped, as in Admiralty.
 *
 * @returns the complete new annotation map, or null when the proxy already has exactly it (no
 *   write needed). Write it with an update, or turn it into a merge patch (removed keys as null)
 *   with `stringMapMergePatch`. Pure; called by the delegation reconciler.
 */
export function buildProxyAnnotations(proxy: V1Pod, delegate: V1Pod): Record<string, string> | null {
  const current = proxy.metadata?.annotations ?? {};
  const desired: Record<string, string> = {};
  for (const [k, v] of Object.entries(current)) {
    if (k.startsWith(KEY_PREFIX)) desired[k] = v;
  }
  for (const [k, v] of Object.entries(delegate.metadata?.annotations ?? {})) {
    if (!k.startsWith(KEY_PREFIX)) desired[k] = v;
  }
  return stringMapEquals(current, desired) ? null : desired;
}
