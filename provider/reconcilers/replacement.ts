import type { CoreV1Api, CoreV1Event, V1Pod } from '@kubernetes/client-node';
import type { ClusterRegistry } from '../clusters/cluster-registry.js';
import type { TargetClient } from '../clusters/target-client.js';
import type { Clock } from '../core/clock.js';
import { isNotFound } from '../core/errors.js';
import type { Metrics } from '../core/metrics.js';
import { autoscalerVerdict } from '../model/autoscaler.js';
import { isOurDelegate } from '../model/delegate-pod.js';
import { virtualNodeName } from '../model/names.js';
import { parentOf } from '../model/outage.js';
import { decideReplacement, REPLACE_COOL_DOWN_MS, type ReplacementDecision } from '../model/replacement.js';
import type { EventSink } from '../core/event-sink.js';
import { ConditionWrites, deleteProxyNow, recordProxyEvent, type ConditionWritesPass } from '../writers/proxy-writes.js';
import type { ObjectCache } from '../controller/object-cache.js';

export interface ReplacementReconcilerOptions {
  sourceCore: CoreV1Api;
  /** Source pods that are proxies (labelled by the webhook). */
  proxies: ObjectCache<V1Pod>;
  /** Per-target cache of the pods this source created there; undefined until the target's informers run. */
  delegates: (targetKey: string) => ObjectCache<V1Pod> | undefined;
  /** Per-target cache of pod events there (for cluster-autoscaler's word on a delegate); undefined until its informers run. */
  targetEvents?: (targetKey: string) => ObjectCache<CoreV1Event> | undefined;
  /** Targets' clients, health and last summaries, as the targets' probes record them. */
  registry: Pick<ClusterRegistry, 'get' | 'health' | 'summary' | 'nodeNameOf'>;
  sourceClusterName: string;
  /** `--replace-unschedulable-after`, ms; 0: Unschedulable delegates are never re-placed. */
  unschedulableAfterMs: number;
  /** How long a target is avoided for a controller's pods after a re-placement (default {@link REPLACE_COOL_DOWN_MS}). */
  coolDownMs?: number;
  /** Keeps the target off the pods of the controller with this UID until `untilMs` (the extender's placement memory). */
  avoid: (ownerUid: string, targetKey: string, reason: string, untilMs: number) => void;
  events: EventSink;
  clock: Clock;
  /** Counts re-placements, by target key and reason. */
  metrics?: Pick<Metrics, 'replacements'>;
}

type Result = { requeueAfterMs?: number } | void;

/** Longest wait before an Unschedulable delegate's deadline is looked at again (probes wake the key every 10 s anyway). */
const MAX_RECHECK_MS = 60_000;

/**
 * Re-placement of pods whose delegate is stuck in a ready target. Key: the target's key
 * (`Target/<ns>/<name>` or `ClusterTarget/<name>`), woken by each probe of the target (which also
 * reads its ClusterSummary), by cluster-autoscaler's events on pods there, and at the next
 * Unschedulable deadline. Each pass looks at the
 * target's delegates whose proxy is bound to its virtual node (a delegate the extender is still
 * placing has an unbound proxy, and is the binder's):
 *
 * * a delegate Unschedulable longer than `--replace-unschedulable-after` (unless the target's
 *   cluster-autoscaler said `TriggeredScaleUp` for it: a node is coming), or Unschedulable and
 *   refused a node by the autoscaler (`NotTriggerScaleUp`), or bound to a node the target's
 *   summary no longer lists, is stuck (see {@link decideReplacement});
 * * a stuck delegate of a proxy with a controller: a `Replacing` event on the proxy, the target
 *   avoided for that controller's pods for the cool-down, then the proxy deleted (UID
 *   precondition, no grace: its delegate runs nothing). Delegation deletes the delegate before it
 *   releases the proxy, and the controller creates a replacement, which the extender places
 *   elsewhere;
 * * a stuck delegate of a bare pod: the condition `Replaceable=False` (reason `CannotReplace`) and
 *   a Warning event, written once; nothing is deleted.
 *
 * Unreachable targets are the outage reconciler's: nothing is decided from a target that does
 * not answer.
 */
export class ReplacementReconciler {
  /** Conditions written that the proxies cache may not show yet (no second write, no repeated event). */
  private readonly writes = new ConditionWrites();

  constructor(private readonly o: ReplacementReconcilerOptions) {}

  async reconcile(key: string): Promise<Result> {
    const target = this.o.registry.get(key);
    const health = this.o.registry.health(key);
    const cache = this.o.delegates(key);
    if (!target) this.writes.forget(key);
    if (!target || !health?.ready || !cache) return;
    const nodeName = this.o.registry.nodeNameOf(key) ?? virtualNodeName(target.ref);
    const read = this.o.registry.summary(key);
    const summary = read && {
      nodeNames: new Set((read.summary.nodePools ?? []).flatMap((p) => p.nodes.map((n) => n.name))),
      readAtMs: read.readAtMs,
      podsResourceVersion: read.summary.podsResourceVersion,
    };
    const now = this.o.clock.now();
    let recheckAtMs: number | undefined;
    const failures: unknown[] = [];
    const pass = this.writes.begin(key);
    try {
      for (const delegate of cache.list()) {
        if (!isOurDelegate(delegate, this.o.sourceClusterName)) continue;
        const parent = parentOf(delegate);
        const proxy = parent.name && parent.namespace ? this.o.proxies.get(parent.name, parent.namespace) : undefined;
        if (!proxy || proxy.metadata?.uid !== parent.uid || proxy.spec?.nodeName !== nodeName) continue;
        const decide = (d: V1Pod) =>
          decideReplacement({
            proxy,
            delegate: d,
            targetName: target.displayName,
            summary,
            autoscaler: d.spec?.nodeName ? undefined : autoscalerVerdict(d, this.o.targetEvents?.(key)?.list(d.metadata?.namespace) ?? []),
            unschedulableAfterMs: this.o.unschedulableAfterMs,
            coolDownMs: this.o.coolDownMs ?? REPLACE_COOL_DOWN_MS,
            nowMs: now,
          });
        let decision = decide(delegate);
        if (decision.recheckAtMs !== undefined) recheckAtMs = Math.min(recheckAtMs ?? Infinity, decision.recheckAtMs);
        try {
          // A re-placement kills the pod: the delegate is read first. The cache may lag the target
          // (one just back from an outage, whose watch has not caught up), and a delegate its
          // scheduler placed meanwhile must stay. One gone is delegation's to handle.
          if (decision.replace) {
            const live = await this.readDelegate(target, delegate);
            decision = live ? decide(live) : {};
          }
          await this.apply(proxy, decision, key, pass);
        } catch (err) {
          failures.push(err); // one bad proxy does not stall the others
        }
      }
    } finally {
      pass.end();
    }
    if (failures.length > 0) throw new Error(`${failures.length} re-placement(s) in ${target.displayName} failed`, { cause: failures[0] });
    return recheckAtMs === undefined ? undefined : { requeueAfterMs: Math.min(MAX_RECHECK_MS, Math.max(0, recheckAtMs - now)) };
  }

  /** The delegate as its target has it now; undefined when it is gone (or another pod has its name). */
  private async readDelegate(target: TargetClient, cached: V1Pod): Promise<V1Pod | undefined> {
    const name = cached.metadata!.name!;
    const namespace = cached.metadata!.namespace!;
    try {
      const live = await target.core.readNamespacedPod({ name, namespace });
      return live.metadata?.uid === cached.metadata?.uid ? live : undefined;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw new Error(`reading delegate ${namespace}/${name} in ${target.displayName}`, { cause: err });
    }
  }

  private async apply(proxy: V1Pod, decision: ReplacementDecision, targetKey: string, pass: ConditionWritesPass): Promise<void> {
    if (decision.replace) {
      const { ownerUid, avoidUntilMs, reason } = decision.replace;
      // Avoided before the delete: the controller's replacement may be scheduled at once.
      this.o.avoid(ownerUid, targetKey, decision.event!.message, avoidUntilMs);
      // Said before the delete: once the proxy is gone, an event about it is hard to find.
      recordProxyEvent(this.o.events, proxy, decision.event!);
      if (await deleteProxyNow(this.o.sourceCore, proxy, 'to re-place it')) this.o.metrics?.replacements.inc({ target: targetKey, reason });
      return;
    }
    if (decision.condition) await pass.write(this.o.sourceCore, this.o.events, proxy, decision.condition, decision.event);
  }
}
