import type { V1Pod, V1PodCondition } from '@kubernetes/client-node';
import { REPLACEABLE_CONDITION } from '../core/keys.js';
import { NOT_TRIGGER_SCALE_UP, SCALE_UP_PATIENCE_MS, type AutoscalerVerdict } from './autoscaler.js';
import { summaryCounts } from './counted.js';
import { controllerOf } from './outage.js';

/**
 * How long a target is kept off the pods of a controller after one of them was re-placed out of
 * it (default of the extender's placement memory): long enough for the controller's next pods to
 * land elsewhere instead of going back to wait where the last one could not run, short enough
 * that a target that healed (nodes added, uncordoned) is used again soon.
 */
export const REPLACE_COOL_DOWN_MS = 5 * 60_000;

/**
 * How long after a delegate was scheduled a summary must have been read before the delegate's
 * node missing from it means the node is gone: a target writes its summary within about a
 * second of a node change, and the source reads it every probe (10 s by default), so a younger
 * delegate may sit on a node added since. Two probe periods; the rest covers a few seconds of
 * clock skew between the clusters. Kept well under the 40 s after which kube-controller-manager's
 * pod garbage collector deletes the pods of a deleted node (which would make the pod go without
 * the target being avoided).
 */
export const NODE_LOST_GRACE_MS = 20_000;

/** Why a delegate was re-placed (the `reason` label of `admiralty_replacements_total`). */
export type ReplacementReason = 'Unschedulable' | 'NotTriggerScaleUp' | 'NodeLost';

export interface ReplacementInput {
  proxy: V1Pod;
  delegate: V1Pod;
  /** The target's display name, for messages. */
  targetName: string;
  /**
   * Names of the target's real nodes in its last ClusterSummary, when it was read, and the pod
   * version it accounts for (its `podsResourceVersion`); undefined if none was read.
   */
  summary: { nodeNames: ReadonlySet<string>; readAtMs: number; podsResourceVersion?: string } | undefined;
  /** The target's cluster-autoscaler's latest word on the delegate (see `autoscalerVerdict`), if any. */
  autoscaler?: AutoscalerVerdict;
  /** `--replace-unschedulable-after`; 0: an Unschedulable delegate is never re-placed. */
  unschedulableAfterMs: number;
  /** How long the target is avoided for the controller's pods after a re-placement. */
  coolDownMs: number;
  nowMs: number;
}

/** What to do about one proxy whose delegate may be stuck in its target. */
export interface ReplacementDecision {
  /** Delete the proxy (delegation deletes its delegate first) and keep its controller's pods off the target until `avoidUntilMs`. */
  replace?: { ownerUid: string; avoidUntilMs: number; reason: ReplacementReason };
  /** The Replaceable condition the proxy should carry (a bare pod stuck, or no longer stuck). */
  condition?: V1PodCondition;
  /** The event to record with the deletion or the condition. */
  event?: { type: 'Normal' | 'Warning'; reason: string; message: string };
  /** When an Unschedulable delegate's time runs out, ms since the epoch. */
  recheckAtMs?: number;
}

const iso = (ms: number) => new Date(ms).toISOString();
const timeOf = (t: Date | string | undefined): number | undefined => (t === undefined ? undefined : new Date(t).getTime());
const seconds = (ms: number) => `${ms / 1000} s`;

/**
 * Why the delegate is stuck, if it is: Unschedulable in its target and the target's
 * cluster-autoscaler said `NotTriggerScaleUp` last (at once: no node is coming), or Unschedulable
 * for at least `unschedulableAfterMs` and no `TriggeredScaleUp` in the last
 * {@link SCALE_UP_PATIENCE_MS} (a node is coming: wait for it), or bound to a node that the
 * target's summary no longer lists (a summary that has seen the delegate bound, when it says
 * which pod version it accounts for, and read at least {@link NODE_LOST_GRACE_MS} after the
 * delegate was scheduled). `since` is stable for one stuck spell (the condition's time, or the
 * node's name), so messages built from it are too.
 */
function stuck(i: ReplacementInput): { reason: ReplacementReason; why: string } | { recheckAtMs: number } | undefined {
  const d = i.delegate;
  const scheduled = d.status?.conditions?.find((c) => c.type === 'PodScheduled');
  const node = d.spec?.nodeName;
  if (!node && scheduled?.status === 'False' && scheduled.reason === 'Unschedulable' && i.unschedulableAfterMs > 0) {
    const since = timeOf(scheduled.lastTransitionTime) ?? timeOf(d.metadata?.creationTimestamp);
    if (since === undefined) return undefined;
    const autoscaler = i.autoscaler;
    if (autoscaler?.reason === NOT_TRIGGER_SCALE_UP) {
      return {
        reason: 'NotTriggerScaleUp',
        why: `is Unschedulable in ${i.targetName} and its cluster-autoscaler will not add a node for it (${NOT_TRIGGER_SCALE_UP} at ${iso(autoscaler.atMs)}: ${autoscaler.message})`,
      };
    }
    // A scale-up under way: the delegate waits for its node, as long as the autoscaler itself would.
    const scalingUntil = autoscaler ? autoscaler.atMs + SCALE_UP_PATIENCE_MS : -Infinity;
    const deadline = Math.max(since + i.unschedulableAfterMs, scalingUntil);
    if (i.nowMs < deadline) return { recheckAtMs: deadline };
    const said = scheduled.message ? `: ${scheduled.message}` : '';
    const noNode = autoscaler ? `, and no node came within ${seconds(SCALE_UP_PATIENCE_MS)} of its cluster-autoscaler's ${autoscaler.reason}` : '';
    return { reason: 'Unschedulable', why: `is Unschedulable in ${i.targetName} since ${iso(since)}, longer than --replace-unschedulable-after (${seconds(i.unschedulableAfterMs)})${noNode}${said}` };
  }
  if (node && i.summary && !i.summary.nodeNames.has(node)) {
    // A summary computed before the delegate was bound may predate its node: one whose cluster
    // stopped writing it (its provider down) is read afresh every probe and never catches up.
    if (summaryCounts(i.summary, d) === false) return undefined;
    const scheduledAt = (scheduled?.status === 'True' ? timeOf(scheduled.lastTransitionTime) : undefined) ?? timeOf(d.metadata?.creationTimestamp) ?? -Infinity;
    if (i.summary.readAtMs - scheduledAt < NODE_LOST_GRACE_MS) return undefined;
    return { reason: 'NodeLost', why: `ran on node ${node}, which ${i.targetName} no longer has` };
  }
  return undefined;
}

/**
 * Decides about one bound proxy and its delegate: nothing (the delegate is placed, or not stuck
 * long enough yet: `recheckAtMs`), re-place (a proxy with a controller: its deletion makes the
 * controller create a replacement, which the extender keeps off this target for `coolDownMs`),
 * or say it (a bare pod: the condition `Replaceable=False`, reason `CannotReplace`, and a
 * Warning event; nothing is deleted). A bare pod that was stuck and is no longer gets
 * `Replaceable=True`. Finished or deleting proxies and deleting delegates are left alone.
 * The condition is stable for one stuck spell, so a level-based caller writes it once. Pure.
 */
export function decideReplacement(i: ReplacementInput): ReplacementDecision {
  const { proxy, delegate } = i;
  const phase = proxy.status?.phase;
  if (phase === 'Succeeded' || phase === 'Failed' || proxy.metadata?.deletionTimestamp || delegate.metadata?.deletionTimestamp) return {};
  const verdict = stuck(i);
  const name = delegate.metadata?.name;
  if (!verdict || 'recheckAtMs' in verdict) {
    const current = proxy.status?.conditions?.find((c) => c.type === REPLACEABLE_CONDITION);
    const recheckAtMs = verdict?.recheckAtMs;
    if (current?.status !== 'False') return { recheckAtMs };
    const message = `delegate ${name} is no longer stuck in ${i.targetName}`;
    return {
      recheckAtMs,
      condition: { type: REPLACEABLE_CONDITION, status: 'True', reason: 'DelegateNotStuck', message, lastTransitionTime: new Date(i.nowMs) },
      event: { type: 'Normal', reason: 'DelegateNotStuck', message },
    };
  }
  const owner = controllerOf(proxy);
  if (!owner) {
    const message = `delegate ${name} ${verdict.why}; the pod has no controller to recreate it on another target, so it stays`;
    return {
      condition: { type: REPLACEABLE_CONDITION, status: 'False', reason: 'CannotReplace', message, lastTransitionTime: new Date(i.nowMs) },
      event: { type: 'Warning', reason: 'CannotReplace', message },
    };
  }
  const avoidUntilMs = i.nowMs + i.coolDownMs;
  return {
    replace: { ownerUid: owner.uid, avoidUntilMs, reason: verdict.reason },
    event: {
      type: 'Warning',
      reason: 'Replacing',
      message: `delegate ${name} ${verdict.why}: deleting the proxy and its delegate so that its ${owner.kind} ${owner.name} recreates it on another target; ${i.targetName} is avoided for the ${owner.kind}'s pods until ${iso(avoidUntilMs)}`,
    },
  };
}
