import type { CoreV1Api, CoreV1Event } from '@kubernetes/client-node';
import type { Clock } from './clock.js';
import { errorFields, type Logger } from './logger.js';
import { unreadAnswer } from './unread-answer.js';

export interface InvolvedObject {
  kind: string;
  apiVersion: string;
  metadata: { name?: string; namespace?: string; uid?: string; resourceVersion?: string };
}

/**
 * Writes core/v1 Events, aggregating repeats: the same object, reason and message within ten
 * minutes bumps `count` and `lastTimestamp` of the existing Event instead of making a new one.
 * Never throws; a failed write is logged at debug level (events are best effort).
 */
export class EventRecorder {
  private readonly recent = new Map<string, { name: string; namespace: string; count: number; atMs: number }>();
  private readonly maxEntries = 4096;

  constructor(private readonly o: { core: CoreV1Api; component: string; host?: string; clock: Clock; logger: Logger }) {}

  record(obj: InvolvedObject, type: 'Normal' | 'Warning', reason: string, message: string): void {
    void this.write(obj, type, reason, message);
  }

  private async write(obj: InvolvedObject, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    const namespace = obj.metadata.namespace || 'default';
    const key = `${obj.kind}/${namespace}/${obj.metadata.name}/${obj.metadata.uid}/${reason}/${message}`;
    const now = new Date(this.o.clock.now());
    const seen = this.recent.get(key);
    try {
      if (seen && this.o.clock.now() - seen.atMs < 10 * 60_000) {
        seen.count++;
        seen.atMs = this.o.clock.now();
        const existing = await this.o.core.readNamespacedEvent({ name: seen.name, namespace: seen.namespace });
        existing.count = seen.count;
        existing.lastTimestamp = now;
        await this.o.core.replaceNamespacedEvent({ name: seen.name, namespace: seen.namespace, body: existing });
        return;
      }
      const name = `${(obj.metadata.name ?? 'object').slice(0, 200)}.${now.getTime().toString(16)}${Math.floor(Math.random() * 0xffff).toString(16)}`;
      const event: CoreV1Event = {
        metadata: { name, namespace },
        involvedObject: {
          kind: obj.kind,
          apiVersion: obj.apiVersion,
          name: obj.metadata.name,
          namespace: obj.metadata.namespace,
          uid: obj.metadata.uid,
          resourceVersion: obj.metadata.resourceVersion,
        },
        reason,
        message: message.slice(0, 1024),
        type,
        count: 1,
        firstTimestamp: now,
        lastTimestamp: now,
        source: { component: this.o.component, host: this.o.host },
        reportingComponent: this.o.component,
        reportingInstance: this.o.host ?? this.o.component,
      };
      await this.o.core.createNamespacedEvent({ namespace, body: event }, unreadAnswer());
      if (this.recent.size >= this.maxEntries) this.recent.delete(this.recent.keys().next().value!);
      this.recent.set(key, { name, namespace, count: 1, atMs: this.o.clock.now() });
    } catch (err) {
      this.recent.delete(key);
      this.o.logger.debug('could not record an event', { reason, kind: obj.kind, name: obj.metadata.name, ...errorFields(err) });
    }
  }
}
