import { CoreV1Api, PatchStrategy, setHeaderOptions, type V1Pod, type V1PodCondition } from '@kubernetes/client-node';
import { classifyApiError, isNotFound } from '../core/errors.js';
import { unreadAnswer } from '../core/unread-answer.js';
import { DELEGATED_CONDITION } from '../core/keys.js';
import { conditionDiffers } from '../model/outage.js';
import type { EventSink } from '../core/event-sink.js';

/**
 * Writes one condition of a proxy with a strategic-merge patch of its status (merge key `type`),
 * so the other conditions stay as they are. A proxy gone meanwhile is not an error. Used by the
 * reconcilers that give proxies conditions of their own (outage, replacement).
 */
export async function writeProxyCondition(core: CoreV1Api, proxy: V1Pod, condition: V1PodCondition): Promise<void> {
  const name = proxy.metadata!.name!;
  const namespace = proxy.metadata!.namespace!;
  const body = { status: { conditions: [{ ...condition, lastTransitionTime: new Date(condition.lastTransitionTime as Date).toISOString() }] } };
  try {
    await core.patchNamespacedPodStatus({ name, namespace, body }, setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch));
  } catch (err) {
    if (isNotFound(err)) return;
    throw new Error(`writing condition ${condition.type} of proxy ${namespace}/${name}`, { cause: err });
  }
}

/**
 * Sets the proxy's `multicluster.admiralty.io/Delegated` condition to False with the reason,
 * unless it says so already. It goes away by itself: once a delegate exists, the proxy's
 * conditions are the delegate's. Best effort: a failure here must not hide the one the caller
 * reports (the event or the extender's answer says it too). Used by the delegation reconciler
 * and by the delegate writer (both the reconciler's and the scheduler extender's bind path),
 * so a pod says why it has no delegate on either path.
 */
export async function markNotDelegated(core: CoreV1Api, proxy: V1Pod, reason: string, message: string, now: Date): Promise<void> {
  const current = proxy.status?.conditions?.find((c) => c.type === DELEGATED_CONDITION);
  if (current?.status === 'False' && current.reason === reason && current.message === message) return;
  await writeProxyCondition(core, proxy, { type: DELEGATED_CONDITION, status: 'False', reason, message, lastTransitionTime: now }).catch(() => undefined);
}

/** Records an event about a proxy (by name, namespace and UID). */
export function recordProxyEvent(events: EventSink, proxy: V1Pod, e: { type: 'Normal' | 'Warning'; reason: string; message: string }): void {
  events.record({ kind: 'Pod', apiVersion: 'v1', metadata: { name: proxy.metadata?.name, namespace: proxy.metadata?.namespace, uid: proxy.metadata?.uid } }, e.type, e.reason, e.message);
}

/**
 * Deletes a proxy at once (UID precondition, no grace: no kubelet will confirm it; our finalizer
 * still holds it until released, and the release then removes it in the same write). Resolves
 * false when it was gone already (404) or another pod has its name now (409), true when this
 * call deleted it. `why` names the purpose in errors. The answer (the whole pod) is not read.
 */
export async function deleteProxyNow(core: CoreV1Api, proxy: V1Pod, why: string): Promise<boolean> {
  const name = proxy.metadata!.name!;
  const namespace = proxy.metadata!.namespace!;
  try {
    await core.deleteNamespacedPod({ name, namespace, gracePeriodSeconds: 0, body: { gracePeriodSeconds: 0, preconditions: { uid: proxy.metadata!.uid } } }, unreadAnswer());
    return true;
  } catch (err) {
    if (isNotFound(err) || classifyApiError(err) === 'Conflict') return false;
    throw new Error(`deleting proxy ${namespace}/${name} ${why}`, { cause: err });
  }
}

interface WrittenCondition {
  /** The proxy's resourceVersion the write was made over. */
  over: string;
  signature: string;
}

const signatureOf = (c: V1PodCondition) => `${c.type}\u0000${c.status}\u0000${c.reason ?? ''}\u0000${c.message ?? ''}`;

/**
 * The conditions a level-based reconciler wrote to proxies that its cache may not show yet. Its
 * key is queued again while a pass runs (by the watch events of the pass's own writes, by a
 * probe), so the next pass can start before the watch has brought back every write; without
 * this it would write the same condition again and repeat its event (the event's count says 2).
 * An entry holds only while the cached proxy still has the resourceVersion the write was made
 * over: any other version is newer and trusted as it is. Entries are kept per reconcile key and
 * each pass keeps only those it looked at, so proxies that left take theirs with them.
 */
export class ConditionWrites {
  private readonly byKey = new Map<string, Map<string, WrittenCondition>>();

  /** Starts a pass over `key`'s proxies; `end` it when the pass is over, even after a failure. */
  begin(key: string): ConditionWritesPass {
    return new ConditionWritesPass(this.byKey.get(key), (kept) => (kept.size > 0 ? this.byKey.set(key, kept) : this.byKey.delete(key)));
  }

  /** Drops what is remembered of `key` (its target is gone). */
  forget(key: string): void {
    this.byKey.delete(key);
  }

  /** Entries held, for tests. */
  get size(): number {
    let n = 0;
    for (const m of this.byKey.values()) n += m.size;
    return n;
  }
}

/** One pass of a reconcile key over its proxies (see {@link ConditionWrites}). */
export class ConditionWritesPass {
  private readonly kept = new Map<string, WrittenCondition>();

  constructor(
    private readonly previous: Map<string, WrittenCondition> | undefined,
    private readonly done: (kept: Map<string, WrittenCondition>) => void,
  ) {}

  /** Whether this very condition was written over the version of the proxy the cache still shows. */
  inFlight(proxy: V1Pod, condition: V1PodCondition): boolean {
    const uid = proxy.metadata?.uid;
    const written = uid ? this.previous?.get(uid) : undefined;
    if (!written || written.over !== proxy.metadata?.resourceVersion || written.signature !== signatureOf(condition)) return false;
    this.kept.set(uid!, written);
    return true;
  }

  /**
   * Writes one of the proxy's own conditions ({@link writeProxyCondition}) and records its event,
   * unless the cached proxy has that condition already or this pass's key wrote it and the cache
   * does not show it yet: so once per transition.
   */
  async write(core: CoreV1Api, events: EventSink, proxy: V1Pod, condition: V1PodCondition, event?: { type: 'Normal' | 'Warning'; reason: string; message: string }): Promise<void> {
    if (!conditionDiffers(proxy, condition) || this.inFlight(proxy, condition)) return;
    await writeProxyCondition(core, proxy, condition);
    this.wrote(proxy, condition);
    if (event) recordProxyEvent(events, proxy, event);
  }

  /** Records a write of `condition` over this version of the proxy (one without a version is not remembered). */
  wrote(proxy: V1Pod, condition: V1PodCondition): void {
    const uid = proxy.metadata?.uid;
    const over = proxy.metadata?.resourceVersion;
    if (uid && over) this.kept.set(uid, { over, signature: signatureOf(condition) });
  }

  end(): void {
    this.done(this.kept);
  }
}
