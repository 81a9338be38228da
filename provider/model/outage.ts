import type { V1Namespace, V1Pod, V1PodCondition } from '@kubernetes/client-node';
import { parseGoDuration } from '../core/duration.js';
import { FAILOVER_AFTER_ANNOTATION, PARENT_NAME_ANNOTATION, PARENT_NAMESPACE_ANNOTATION, PARENT_UID_LABEL, TARGET_REACHABLE_CONDITION } from '../core/keys.js';
import { isOurDelegate } from './delegate-pod.js';

/** The health reason that means "the target's API cannot be reached" (targets reconciler's probe). */
export const TARGET_UNREACHABLE_REASON = 'TargetUnreachable';

/**
 * Whether a target's health is an outage: not ready because its API does not answer. Other
 * failures (refused credentials, a broken kubeconfig Secret, no ClusterSummary) are configuration
 * problems that the Target's status reports; they neither mark proxies nor move them. Pure.
 */
export function isOutage(health: { ready: boolean; reason: string } | undefined): boolean {
  return !!health && !health.ready && health.reason === TARGET_UNREACHABLE_REASON;
}

/**
 * How long after a target was last seen unreachable a standby replica still refuses to create
 * delegates there: the leader fences a target that comes back (deletes the delegates of proxies
 * that failed over) on its next probe, and only the leader knows when it has. Three probe
 * periods of the default `--node-lease-interval-seconds`.
 */
export const STANDBY_FENCE_GRACE_MS = 30_000;

/**
 * Whether a replica that does not lead (and so does not fence) may create a delegate in a target
 * whose health it probes itself: not during an outage, nor within `graceMs` of the last time
 * the target was seen unreachable (`lastOutageMs`). `monoNowMs` is on the same monotonic clock as
 * `lastOutageMs`. Pure.
 */
export function standbyMayCreateDelegates(health: { ready: boolean; reason: string; lastOutageMs?: number } | undefined, monoNowMs: number, graceMs = STANDBY_FENCE_GRACE_MS): boolean {
  if (isOutage(health)) return false;
  return health?.lastOutageMs === undefined || monoNowMs - health.lastOutageMs >= graceMs;
}

/** A proxy's failover policy: from its own annotation, else its namespace's. */
export type FailoverPolicy =
  { kind: 'none' } | { kind: 'after'; afterMs: number; text: string; from: 'pod' | 'namespace' } | { kind: 'invalid'; text: string; from: 'pod' | 'namespace'; error: string };

/** Reads `multicluster.admiralty.io/failover-after` from the pod, else from its namespace. Pure. */
export function failoverPolicy(proxy: V1Pod, namespace: V1Namespace | undefined): FailoverPolicy {
  const own = proxy.metadata?.annotations?.[FAILOVER_AFTER_ANNOTATION];
  const inherited = namespace?.metadata?.annotations?.[FAILOVER_AFTER_ANNOTATION];
  const from = own !== undefined ? 'pod' : 'namespace';
  const text = own ?? inherited;
  if (text === undefined) return { kind: 'none' };
  try {
    return { kind: 'after', afterMs: parseGoDuration(text), text, from };
  } catch (err) {
    return { kind: 'invalid', text, from, error: (err as Error).message };
  }
}

/** The controller that would recreate a proxy deleted for failover or re-placement (ownerReference with `controller: true`). */
export function controllerOf(proxy: V1Pod): { kind: string; name: string; uid: string } | undefined {
  const ref = proxy.metadata?.ownerReferences?.find((r) => r.controller === true);
  return ref ? { kind: ref.kind, name: ref.name, uid: ref.uid } : undefined;
}

export interface OutageInput {
  proxy: V1Pod;
  /** The proxy's namespace (for its failover-after annotation), if cached. */
  namespace: V1Namespace | undefined;
  /** The target's display name, for messages. */
  targetName: string;
  /** When the target became unreachable, ms since the epoch (the registry's `outageSinceMs`), for messages. */
  unreachableSinceMs: number;
  /**
   * How long the target has been unreachable, measured on the monotonic clock: what the
   * failover deadline is judged by, so a step of the wall clock moves no failover.
   */
  unreachableForMs: number;
  nowMs: number;
}

/** What to do about one proxy while its target is unreachable. */
export interface OutageDecision {
  /** The TargetReachable condition the proxy should carry, if it should carry one. */
  condition?: V1PodCondition;
  /** The event to record when the condition is written or the proxy deleted (never on a no-op). */
  event?: { type: 'Normal' | 'Warning'; reason: string; message: string };
  /** Delete the proxy (if not deleting yet) and release its finalizer: its controller replaces it. */
  failover: boolean;
  /** When to look again (the failover deadline), ms since the epoch. */
  recheckAtMs?: number;
}

const iso = (ms: number) => new Date(ms).toISOString();

/**
 * How long a target stays unreachable before its proxies are told (condition and event): two
 * probe periods of the default `--node-lease-interval-seconds`. One probe that fails (a slow
 * answer, a blip of the network) then writes nothing per proxy, where a target of 5000 proxies
 * that flapped cost 10 000 condition writes and as many events a flap. The virtual node turns
 * NotReady at once all the same, and a failover-after shorter than this still fails over at its
 * time.
 */
export const OUTAGE_NOTICE_MS = 20_000;

/**
 * Decides about one proxy bound to an unreachable target. Finished proxies are left alone (their
 * last status is final); within {@link OUTAGE_NOTICE_MS} of the outage's start, so is every proxy
 * whose failover is not due, with a recheck at the end of it; a deleting proxy gets no
 * condition, but a failover is still finished (its finalizer released) if its policy says so. The condition is stable for a given outage
 * and policy (its time is the outage's start), so a level-based caller writes it once per
 * transition: when the target becomes unreachable, and when a bare pod's deadline passes.
 * Pure.
 */
export function decideOutage(i: OutageInput): OutageDecision {
  const { proxy } = i;
  const phase = proxy.status?.phase;
  if (phase === 'Succeeded' || phase === 'Failed') return { failover: false };
  const deleting = !!proxy.metadata?.deletionTimestamp;
  const since = `target ${i.targetName} unreachable since ${iso(i.unreachableSinceMs)}`;
  const policy = failoverPolicy(proxy, i.namespace);
  if (i.unreachableForMs < OUTAGE_NOTICE_MS && !(policy.kind === 'after' && i.unreachableForMs >= policy.afterMs)) {
    const lookAgainIn = (policy.kind === 'after' ? Math.min(OUTAGE_NOTICE_MS, policy.afterMs) : OUTAGE_NOTICE_MS) - i.unreachableForMs;
    return { failover: false, recheckAtMs: i.nowMs + Math.ceil(lookAgainIn) };
  }
  const condition = (message: string): V1PodCondition => ({
    type: TARGET_REACHABLE_CONDITION,
    status: 'False',
    reason: TARGET_UNREACHABLE_REASON,
    message,
    lastTransitionTime: new Date(i.unreachableSinceMs),
  });
  const withCondition = (message: string, reason: string, recheckAtMs?: number): OutageDecision =>
    deleting ? { failover: false } : { condition: condition(message), event: { type: 'Warning', reason, message }, failover: false, recheckAtMs };

  if (policy.kind === 'none') {
    return withCondition(`${since}; the pod stays bound to it (no ${FAILOVER_AFTER_ANNOTATION} on the pod or its namespace)`, TARGET_UNREACHABLE_REASON);
  }
  const where = policy.from === 'pod' ? 'the pod' : 'its namespace';
  if (policy.kind === 'invalid') {
    return withCondition(`${since}; the pod stays bound to it: ${FAILOVER_AFTER_ANNOTATION} on ${where} is invalid: ${policy.error}`, 'InvalidFailoverAfter');
  }
  if (i.unreachableForMs < policy.afterMs) {
    // The message names the deadline on the wall clock from the outage's start, so it stays the
    // same from pass to pass; the recheck is timed by what is left on the monotonic clock.
    const recheckAtMs = i.nowMs + Math.ceil(policy.afterMs - i.unreachableForMs);
    return withCondition(`${since}; failover at ${iso(i.unreachableSinceMs + policy.afterMs)} (${FAILOVER_AFTER_ANNOTATION}: ${policy.text} on ${where})`, TARGET_UNREACHABLE_REASON, recheckAtMs);
  }
  const owner = controllerOf(proxy);
  if (!owner) {
    return withCondition(`${since}; cannot fail over after ${policy.text}: the pod has no controller to recreate it on another target, so it stays`, 'CannotFailOver');
  }
  return {
    failover: true,
    event: {
      type: 'Warning',
      reason: 'FailingOver',
      message: `${since}, longer than ${FAILOVER_AFTER_ANNOTATION} ${policy.text}: deleting the proxy so that its ${owner.kind} ${owner.name} recreates it on another target; its delegate in ${i.targetName} is deleted when ${i.targetName} is back`,
    },
  };
}

/**
 * The condition a proxy should carry once its target is reachable again: True, if it carried
 * False; undefined (nothing to write) otherwise. Pure.
 */
export function decideRecovered(proxy: V1Pod, targetName: string, nowMs: number): OutageDecision {
  const current = proxy.status?.conditions?.find((c) => c.type === TARGET_REACHABLE_CONDITION);
  if (current?.status !== 'False') return { failover: false };
  const message = `target ${targetName} reachable again since ${iso(nowMs)}`;
  return {
    condition: { type: TARGET_REACHABLE_CONDITION, status: 'True', reason: 'TargetReachable', message, lastTransitionTime: new Date(nowMs) },
    event: { type: 'Normal', reason: 'TargetReachable', message },
    failover: false,
  };
}

/** Whether the proxy's TargetReachable condition differs from `desired` (status, reason or message). Pure. */
export function conditionDiffers(proxy: V1Pod, desired: V1PodCondition): boolean {
  const current = proxy.status?.conditions?.find((c) => c.type === desired.type);
  return !current || current.status !== desired.status || current.reason !== desired.reason || current.message !== desired.message;
}

/** The proxy a delegate was made for, from its labels and annotations. Pure. */
export function parentOf(delegate: V1Pod): { name?: string; namespace?: string; uid?: string } {
  const a = delegate.metadata?.annotations ?? {};
  return {
    name: a[PARENT_NAME_ANNOTATION],
    namespace: a[PARENT_NAMESPACE_ANNOTATION] || delegate.metadata?.namespace,
    uid: delegate.metadata?.labels?.[PARENT_UID_LABEL],
  };
}

/**
 * Fencing verdict on a pod found in a target that comes back: `notOurs` (another source's, or
 * no delegate at all: never touched), `keep` (its proxy lives with the UID it was made for, or it
 * is already being deleted), or `delete` (an orphan: its proxy is gone, e.g. failed over while
 * the target was unreachable). `liveProxyUid` is the UID of the pod now at the parent's name and
 * namespace in the source, undefined if there is none. Pure.
 */
export function fenceVerdict(delegate: V1Pod, sourceClusterName: string, liveProxyUid: string | undefined): 'notOurs' | 'keep' | 'delete' {
  if (!isOurDelegate(delegate, sourceClusterName)) return 'notOurs';
  if (delegate.metadata?.deletionTimestamp) return 'keep';
  const parent = parentOf(delegate);
  if (!parent.name || !parent.namespace) return 'notOurs';
  return liveProxyUid !== undefined && liveProxyUid === parent.uid ? 'keep' : 'delete';
}
