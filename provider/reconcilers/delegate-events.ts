import type { CoreV1Api, CoreV1Event, V1Pod } from '@kubernetes/client-node';
import { hash } from 'node:crypto';
import type { Clock } from '../core/clock.js';
import type { DelegateEventCopies } from '../core/config.js';
import { classifyApiError } from '../core/errors.js';
import { errorFields, type Logger } from '../core/logger.js';
import { unreadAnswer } from '../core/unread-answer.js';
import { PARENT_NAME_ANNOTATION } from '../core/keys.js';
import { copiesEvent, eventTime, proxyEventFor } from '../model/proxy-event.js';
import type { ObjectCache } from '../controller/object-cache.js';

/** A target's events cache with its index by pod (see {@link DelegateEventsReconciler.eventsByPod}). */
export interface IndexedEvents {
  byIndex(index: string, value: string): CoreV1Event[];
}

/** How many written copies are remembered, to skip rewriting an unchanged one. */
const REMEMBERED = 10_000;

export interface DelegateEventsOptions {
  sourceCore: CoreV1Api;
  /** Pod events in a target (by target key), or undefined while its informers do not run. */
  targetEvents: (targetKey: string) => ObjectCache<CoreV1Event> | undefined;
  /** Our delegates in a target (by target key). */
  delegates: (targetKey: string) => ObjectCache<V1Pod> | undefined;
  /** The source's proxies: an event is copied only onto the proxy its delegate belongs to. */
  proxies: ObjectCache<V1Pod>;
  /** The virtual node of a target (by target key): a proxy bound to another's gets none of its events. */
  virtualNodeOf: (targetKey: string) => string | undefined;
  /** Name shown in the copied message, e.g. `default/c2`. */
  targetName: (targetKey: string) => string | undefined;
  sourceClusterName: string;
  clock: Clock;
  logger: Logger;
  /** Events that last happened longer ago are not copied (a restart does not rewrite history). Default 1 h. */
  maxAgeMs?: number;
  /** Which events are copied (`--delegate-events`). */
  copies: DelegateEventCopies;
}

/**
 * Shows the events of each delegate on its proxy: every event about one of our delegates in a
 * target that `copies` takes (by default its Warnings: a target's FailedScheduling, BackOff,
 * Unhealthy) is copied into the source cluster as an event about the proxy, and kept current as
 * its count grows. Keys are `<target key>|<ns>|<event>`.
 *
 * What a target says of its delegates is its own word: an event is copied only onto a proxy of
 * this cluster that exists in the delegate's namespace, with the UID the delegate names, and is
 * not bound to another target's virtual node (see `proxyEventFor`).
 *
 * Copies have deterministic names (see `proxyEventName`), so retries and restarts update the
 * same copy instead of adding one. The copies are best effort: a namespace that is gone or
 * terminating is skipped; API failures are retried with the controller's backoff. Deleting the
 * target event changes nothing (copies expire with the source cluster's event TTL).
 */
export class DelegateEventsReconciler {
  private readonly written = new Map<string, string>();

  constructor(private readonly o: DelegateEventsOptions) {}

  static key(targetKey: string, ev: CoreV1Event): string {
    return `${targetKey}|${ev.metadata?.namespace ?? ''}|${ev.metadata?.name ?? ''}`;
  }

  /** Keys for a target event: only events about pods can concern a delegate, and only those that `copies` takes. */
  keysOfEvent(targetKey: string, ev: CoreV1Event): string[] {
    return ev.involvedObject?.kind === 'Pod' && copiesEvent(this.o.copies, ev) ? [DelegateEventsReconciler.key(targetKey, ev)] : [];
  }

  /** Name of the index of a target's events by the pod they are about ({@link eventsByPod}). */
  static readonly BY_POD_INDEX = 'by-pod';

  /**
   * The index of a target's events informer by pod: a pod event under `<its namespace>/<the
   * pod's name>`, other events under nothing. What {@link keysOfDelegate} looks up.
   */
  static eventsByPod(ev: CoreV1Event): string[] {
    const about = ev.involvedObject;
    return about?.kind === 'Pod' && about.name ? [`${ev.metadata?.namespace ?? ''}/${about.name}`] : [];
  }

  /**
   * Keys of the events already cached about a delegate (they may have come before it): the
   * events of its namespace about a pod of its name, found through the events informer's
   * {@link BY_POD_INDEX} (a walk of every cached event per new delegate was quadratic in a burst),
   * those that `copies` takes.
   */
  keysOfDelegate(targetKey: string, delegate: V1Pod, events: IndexedEvents | undefined): string[] {
    const name = delegate.metadata?.name;
    if (!name) return [];
    return (events?.byIndex(DelegateEventsReconciler.BY_POD_INDEX, `${delegate.metadata?.namespace ?? ''}/${name}`) ?? [])
      .filter((ev) => copiesEvent(this.o.copies, ev))
      .map((ev) => DelegateEventsReconciler.key(targetKey, ev));
  }

  async reconcile(key: string): Promise<void> {
    // A key not made by {@link key} names no event.
    const [targetKey, namespace, name] = key.split('|');
    const ev = targetKey === undefined || name === undefined ? undefined : this.o.targetEvents(targetKey)?.get(name, namespace);
    if (!ev || targetKey === undefined) {
      this.written.delete(key);
      return;
    }
    if (!copiesEvent(this.o.copies, ev)) return;
    const when = eventTime(ev);
    if (when && this.o.clock.now() - when.getTime() > (this.o.maxAgeMs ?? 3600_000)) return;
    const about = ev.involvedObject;
    const delegate = about?.name ? this.o.delegates(targetKey)?.get(about.name, about.namespace) : undefined;
    if (!delegate) return; // not ours, or not cached yet: its arrival enqueues this key again
    const proxy = this.o.proxies.get(delegate.metadata?.annotations?.[PARENT_NAME_ANNOTATION] ?? '', delegate.metadata?.namespace);
    const boundTo = proxy?.spec?.nodeName;
    if (boundTo && boundTo !== this.o.virtualNodeOf(targetKey)) return;
    const desired = proxyEventFor(ev, delegate, proxy, this.o.sourceClusterName, this.o.targetName(targetKey) ?? targetKey);
    if (!desired) return;
    // A digest: the message may be long, and up to REMEMBERED stamps are held.
    const stamp = hash('sha1', `${desired.count}|${(desired.lastTimestamp as Date).toISOString()}|${desired.message}`, 'base64');
    if (this.written.get(key) === stamp) return;

    const { name: copyName, namespace: copyNamespace } = desired.metadata as { name: string; namespace: string };
    try {
      await this.o.sourceCore.createNamespacedEvent({ namespace: copyNamespace, body: desired }, unreadAnswer());
    } catch (err) {
      const kind = classifyApiError(err);
      if (kind === 'AlreadyExists') {
        // Written before (by us, before a restart): bring it up to date.
        const existing = await this.o.sourceCore.readNamespacedEvent({ name: copyName, namespace: copyNamespace });
        if (existing.count !== desired.count || existing.message !== desired.message || !sameTime(existing.lastTimestamp, desired.lastTimestamp)) {
          await this.o.sourceCore.replaceNamespacedEvent({
            name: copyName,
            namespace: copyNamespace,
            body: { ...existing, count: desired.count, message: desired.message, lastTimestamp: desired.lastTimestamp, type: desired.type },
          });
        }
      } else if (kind === 'NotFound' || kind === 'Forbidden') {
        // The proxy's namespace is gone or terminating (403 "being terminated"): nothing to show.
        this.o.logger.debug('not copying a delegate event', { key, ...errorFields(err) });
        return;
      } else {
        throw new Error(`copying event ${namespace}/${name} of ${targetKey} to proxy ${copyNamespace}/${desired.involvedObject.name}`, { cause: err });
      }
    }
    if (this.written.size >= REMEMBERED) this.written.delete(this.written.keys().next().value!);
    this.written.delete(key);
    this.written.set(key, stamp);
  }
}

function sameTime(a: Date | string | undefined, b: Date | string | undefined): boolean {
  return a !== undefined && b !== undefined && new Date(a).getTime() === new Date(b).getTime();
}
