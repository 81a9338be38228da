import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import type { DelegateEventCopies } from '../core/config.js';
import { EVENT_COMPONENT, MIRRORED_FROM_ANNOTATION, PARENT_CLUSTER_NAME_LABEL, PARENT_NAME_ANNOTATION, PARENT_NAMESPACE_ANNOTATION, PARENT_UID_LABEL } from '../core/keys.js';
import { sanitizeRemoteText } from '../core/redact.js';
import { delegatePodName, HASH_HEX_LENGTH, shortHash } from './names.js';

/** Longest message we write; the apiserver accepts more, `kubectl describe` shows less. */
const MESSAGE_MAX_LENGTH = 1024;
/** Longest reason we write: the apiserver's own limit on an event's reason is 128. */
const REASON_MAX_LENGTH = 128;

/** Whether `ev` is copied onto the proxy of its delegate under `copies` (see `DELEGATE_EVENT_COPIES`). Pure. */
export function copiesEvent(copies: DelegateEventCopies, ev: CoreV1Event): boolean {
  return copies === 'all' || (copies === 'warnings' && ev.type === 'Warning');
}

/**
 * Reasons of the Normal events that every pod's start and stop brings, from its scheduler
 * (`Scheduled`) and its kubelet (`Pulling`, `Pulled`, `Created`, `Started`, `Killing`): four to
 * six a pod with a real kubelet. Neither a Warning copy nor cluster-autoscaler's verdicts
 * (`TriggeredScaleUp`, `NotTriggerScaleUp`, see `isAutoscalerVerdict`) has one of them.
 */
export const ROUTINE_POD_EVENT_REASONS = ['Scheduled', 'Pulling', 'Pulled', 'Created', 'Started', 'Killing'] as const;

/**
 * The field selector of a target's events watch: pod events, not ours (the events we record and
 * copy are about proxies, never about a delegate, and in a self target they would be one or two
 * events per offloaded pod), and, unless every event is copied (`all`), none of the
 * {@link ROUTINE_POD_EVENT_REASONS}: the cache keeps only what is copied and the autoscaler's
 * verdicts, so the server leaves out what would be sent, parsed and dropped. The informer's own
 * check stays: the selector only narrows what comes. Pure.
 */
export function targetEventsSelector(copies: DelegateEventCopies): string {
  const podEvents = `involvedObject.kind=Pod,reportingComponent!=${EVENT_COMPONENT}`;
  if (copies === 'all') return podEvents;
  return [podEvents, ...ROUTINE_POD_EVENT_REASONS.map((r) => `reason!=${r}`)].join(',');
}

/** When an event last happened: lastTimestamp, else the newer events API fields. Pure. */
export function eventTime(ev: CoreV1Event): Date | undefined {
  const t = ev.lastTimestamp ?? ev.series?.lastObservedTime ?? ev.eventTime ?? ev.firstTimestamp ?? ev.metadata?.creationTimestamp;
  return t === undefined ? undefined : new Date(t as unknown as string);
}

/**
 * Name of the proxy's copy of a target event: the proxy's name and a hash of the target event's
 * UID, so the same event maps to the same copy across retries and restarts. Pure.
 */
export function proxyEventName(proxyName: string, targetEventUid: string): string {
  return `${proxyName.slice(0, 200).replace(/[-.]+$/, '')}.${shortHash(targetEventUid)}`;
}

/**
 * The Event to write in the source cluster for an event about a delegate in a target, or
 * undefined when the event is not about the delegate of `proxy` (wrong pod, another source
 * cluster, a pod that was recreated under the same name). Everything about the delegate is the
 * target's word, so the copy goes only to the proxy the delegate names if that is `proxy` (the
 * source's own, read by the caller from the delegate's parent name, in the delegate's namespace):
 * same namespace, same UID as the delegate's `parent-uid`. The copy is about the proxy (kind
 * Pod, its UID), keeps type, reason, count and times, and says in its message where it happened:
 * `[<target>] <original message>`, one printable line of at most 1024 characters. Pure.
 */
export function proxyEventFor(ev: CoreV1Event, delegate: V1Pod, proxy: V1Pod | undefined, sourceClusterName: string, targetName: string): CoreV1Event | undefined {
  const labels = delegate.metadata?.labels ?? {};
  const annotations = delegate.metadata?.annotations ?? {};
  const proxyName = annotations[PARENT_NAME_ANNOTATION];
  const proxyNamespace = annotations[PARENT_NAMESPACE_ANNOTATION];
  const proxyUid = labels[PARENT_UID_LABEL];
  if (labels[PARENT_CLUSTER_NAME_LABEL] !== sourceClusterName || !proxyName || !proxyNamespace || !proxyUid) return undefined;
  if (proxyNamespace !== delegate.metadata?.namespace) return undefined;
  if (proxy?.metadata?.name !== proxyName || proxy.metadata.namespace !== proxyNamespace || proxy.metadata.uid !== proxyUid) return undefined;
  const about = ev.involvedObject;
  if (about?.kind !== 'Pod' || about.name !== delegate.metadata?.name || about.namespace !== delegate.metadata?.namespace) return undefined;
  if (about.uid && delegate.metadata?.uid && about.uid !== delegate.metadata.uid) return undefined;
  if (!ev.metadata?.uid) return undefined;
  const when = eventTime(ev) ?? new Date(0);
  const message = sanitizeRemoteText(`[${targetName}] ${ev.message ?? ''}`, MESSAGE_MAX_LENGTH);
  return {
    metadata: {
      name: proxyEventName(proxyName, ev.metadata.uid),
      namespace: proxyNamespace,
      annotations: { [MIRRORED_FROM_ANNOTATION]: `${targetName}/${ev.metadata.namespace}/${ev.metadata.name}` },
    },
    involvedObject: { kind: 'Pod', apiVersion: 'v1', name: proxyName, namespace: proxyNamespace, uid: proxyUid, fieldPath: about.fieldPath },
    type: ev.type === 'Warning' ? 'Warning' : 'Normal',
    reason: ev.reason === undefined ? undefined : sanitizeRemoteText(ev.reason, REASON_MAX_LENGTH),
    message,
    count: ev.count ?? ev.series?.count ?? 1,
    firstTimestamp: new Date((ev.firstTimestamp ?? when) as unknown as string),
    lastTimestamp: when,
    source: { component: EVENT_COMPONENT, host: targetName },
    reportingComponent: EVENT_COMPONENT,
    reportingInstance: targetName,
  };
}

/** The `-<hash>` that ends a delegate's name (see `delegatePodName`). */
const DELEGATE_NAME_SUFFIX = new RegExp(`-[0-9a-f]{${HASH_HEX_LENGTH}}$`);

/**
 * Whether a target event is about the delegate of one of this cluster's proxies: its pod's name
 * is the name `delegatePodName` gives a proxy of the same namespace (the proxy by that name, or,
 * for a name cut to length, a proxy whose name starts with it). Events about other pods (the
 * target's own, other sources') are not. A delegate's events come after its proxy exists, so a
 * cache of proxies that has synced knows it. Pure, given the lookups.
 */
export function isAboutDelegateOf(
  ev: CoreV1Event,
  sourceClusterName: string,
  proxy: (name: string, namespace: string) => V1Pod | undefined,
  proxiesIn: (namespace: string) => readonly V1Pod[],
): boolean {
  const about = ev.involvedObject;
  const name = about?.name;
  const namespace = about?.namespace ?? ev.metadata?.namespace;
  if (about?.kind !== 'Pod' || !name || !namespace || !DELEGATE_NAME_SUFFIX.test(name)) return false;
  const isDelegateOf = (p: V1Pod | undefined) => !!p?.metadata?.name && !!p.metadata.uid && delegatePodName(p.metadata.name, sourceClusterName, p.metadata.uid) === name;
  const prefix = name.slice(0, -(HASH_HEX_LENGTH + 1));
  if (isDelegateOf(proxy(prefix, namespace))) return true;
  // Cut names: the proxy's name is longer than what its delegate's name kept of it.
  return proxiesIn(namespace).some((p) => (p.metadata?.name?.length ?? 0) > prefix.length && p.metadata!.name!.startsWith(prefix) && isDelegateOf(p));
}
