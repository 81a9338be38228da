import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import { eventTime } from './proxy-event.js';

/**
 * cluster-autoscaler's event reasons on a pending pod (its `EventingScaleUpStatusProcessor`):
 * Normal `TriggeredScaleUp`, `pod triggered scale-up: [{<node group> <size>-><new size> (max: <max>)}]`,
 * when a node group grows for the pod; Normal `NotTriggerScaleUp`, `pod didn't trigger scale-up: <n
 * reason>, …` (older releases: `pod didn't trigger scale-up (it wouldn't fit if a new node is
 * added): …`), when no node group can or may grow for it. Matched by reason, never by message.
 */
export const TRIGGERED_SCALE_UP = 'TriggeredScaleUp';
export const NOT_TRIGGER_SCALE_UP = 'NotTriggerScaleUp';

/**
 * How long after a `TriggeredScaleUp` a delegate is taken to be waiting for its node:
 * cluster-autoscaler's `--max-node-provision-time` default (15 min), after which it gives the
 * scale-up up itself.
 */
export const SCALE_UP_PATIENCE_MS = 15 * 60_000;

/** Whether an event is cluster-autoscaler's verdict on a pod (either reason). Pure. */
export function isAutoscalerVerdict(ev: CoreV1Event): boolean {
  return ev.involvedObject?.kind === 'Pod' && (ev.reason === TRIGGERED_SCALE_UP || ev.reason === NOT_TRIGGER_SCALE_UP);
}

/** The autoscaler's latest word on one pod. */
export interface AutoscalerVerdict {
  reason: typeof TRIGGERED_SCALE_UP | typeof NOT_TRIGGER_SCALE_UP;
  message: string;
  /** When it was last said (the event's last timestamp), ms since the epoch. */
  atMs: number;
}

/**
 * The latest `TriggeredScaleUp` or `NotTriggerScaleUp` event about `pod` among `events` (events
 * of its namespace), by last timestamp; an event naming another UID (an earlier pod of the same
 * name) does not count. Undefined when the autoscaler said nothing. Pure; read by the binder and
 * the replacement reconciler from a target's events cache.
 */
export function autoscalerVerdict(pod: V1Pod, events: readonly CoreV1Event[]): AutoscalerVerdict | undefined {
  const name = pod.metadata?.name;
  const uid = pod.metadata?.uid;
  let latest: AutoscalerVerdict | undefined;
  for (const ev of events) {
    if (!isAutoscalerVerdict(ev)) continue;
    const about = ev.involvedObject;
    if (about.name !== name || (uid && about.uid && about.uid !== uid)) continue;
    const atMs = eventTime(ev)?.getTime() ?? 0;
    if (!latest || atMs > latest.atMs) latest = { reason: ev.reason as AutoscalerVerdict['reason'], message: ev.message ?? '', atMs };
  }
  return latest;
}
