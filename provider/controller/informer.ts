import { ListWatch, Watch, type KubeConfig, type KubernetesListObject, type KubernetesObject } from '@kubernetes/client-node';
import type { Clock, ClockTimer } from '../core/clock.js';
import { errorFields, type Logger } from '../core/logger.js';
import type { Metrics } from '../core/metrics.js';

export interface InformerOptions<T extends KubernetesObject> {
  /** Short name for logs and metrics, e.g. `proxies`. */
  name: string;
  /** Cluster the objects come from, for logs. */
  cluster: string;
  kubeConfig: KubeConfig;
  /** Collection path, e.g. `/api/v1/pods`. */
  path: string;
  list: () => Promise<KubernetesListObject<T>>;
  labelSelector?: string;
  fieldSelector?: string;
  logger: Logger;
  clock: Clock;
  metrics?: Metrics;
  /** Restart a watch that has seen no event for this long (default 5 min): client-node 1.4 has no watch timeout. */
  idleRestartMs?: number;
}

type Handler<T> = (obj: T) => void;

/**
 * A cache of one kind of object in one cluster, kept current by list+watch. Wraps client-node's
 * ListWatch, which stops for good on any error but 410: here every error is followed by a
 * restart with capped exponential backoff (1 s to 30 s, with jitter), and a watch silent for too
 * long is restarted too (a half-open connection otherwise stalls forever). A restart relists
 * into the same cache, so objects deleted meanwhile produce `delete` events.
 */
export class Informer<T extends KubernetesObject> {
  private readonly lw: ListWatch<T>;
  private readonly handlers: Record<'add' | 'update' | 'delete', Handler<T>[]> = { add: [], update: [], delete: [] };
  private running = false;
  private synced = false;
  private failures = 0;
  private restartTimer?: ClockTimer;
  private idleTimer?: ClockTimer;
  private lastError?: { message: string; atMs: number };

  constructor(private readonly o: InformerOptions<T>) {
    this.lw = new ListWatch<T>(o.path, new Watch(o.kubeConfig), o.list, false, o.labelSelector, o.fieldSelector);
    for (const verb of ['add', 'update', 'delete'] as const) {
      this.lw.on(verb, (obj) => {
        this.touch();
        for (const h of this.handlers[verb]) h(obj);
      });
    }
    this.lw.on('connect', () => {
      this.synced = true;
      this.failures = 0;
      this.touch();
    });
    this.lw.on('error', (err) => this.scheduleRestart(err));
  }

  get name(): string {
    return this.o.name;
  }

  on(verb: 'add' | 'update' | 'delete', handler: Handler<T>): void {
    this.handlers[verb].push(handler);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.run();
  }

  private run(): void {
    if (!this.running) return;
    this.lw.start().catch((err) => this.scheduleRestart(err));
    this.touch();
  }

  private scheduleRestart(err: unknown): void {
    if (!this.running || this.restartTimer) return;
    this.failures++;
    const delay = Math.min(30_000, 1000 * 2 ** Math.min(this.failures - 1, 5));
    const jittered = Math.round(delay * (1 + 0.2 * Math.random()));
    this.lastError = { message: errorFields(err).error, atMs: this.o.clock.now() };
    this.o.logger.warn('informer failed; restarting', { informer: this.o.name, cluster: this.o.cluster, retryInMs: jittered, ...errorFields(err) });
    this.o.metrics?.informerRestarts.inc({ informer: this.o.name });
    this.restartTimer = this.o.clock.setTimeout(() => {
      this.restartTimer = undefined;
      void this.lw
        .stop()
        .catch(() => undefined)
        .then(() => this.run());
    }, jittered);
  }

  /** Re-arms the idle watchdog. */
  private touch(): void {
    if (this.idleTimer) this.o.clock.clearTimeout(this.idleTimer);
    if (!this.running) return;
    const idle = this.o.idleRestartMs ?? 5 * 60_000;
    this.idleTimer = this.o.clock.setTimeout(() => {
      this.idleTimer = undefined;
      this.o.logger.debug('informer idle; restarting its watch', { informer: this.o.name, cluster: this.o.cluster });
      void this.lw
        .stop()
        .catch(() => undefined)
        .then(() => this.run());
    }, idle);
  }

  stop(): void {
    this.running = false;
    if (this.restartTimer) this.o.clock.clearTimeout(this.restartTimer);
    if (this.idleTimer) this.o.clock.clearTimeout(this.idleTimer);
    this.restartTimer = this.idleTimer = undefined;
    void this.lw.stop().catch(() => undefined);
  }

  get(name: string, namespace?: string): T | undefined {
    return this.lw.get(name, namespace);
  }

  list(namespace?: string): T[] {
    return [...this.lw.list(namespace)];
  }

  hasSynced(): boolean {
    return this.synced;
  }

  health(): { ok: boolean; lastError?: string; lastErrorAt?: number } {
    return { ok: this.synced && !this.restartTimer, lastError: this.lastError?.message, lastErrorAt: this.lastError?.atMs };
  }
}
