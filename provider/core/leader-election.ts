import { V1MicroTime, type CoordinationV1Api, type V1Lease } from '@kubernetes/client-node';
import type { Clock, ClockTimer } from './clock.js';
import { isConflict, isNotFound } from './errors.js';
import { errorFields, type Logger } from './logger.js';

export interface LeaderElectorOptions {
  coordination: CoordinationV1Api;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationSeconds: number;
  renewDeadlineSeconds: number;
  retryPeriodSeconds: number;
  clock: Clock;
  logger: Logger;
  onStartedLeading(): void;
  onStoppedLeading(): void;
}

/**
 * Leader election on a coordination.k8s.io Lease, with optimistic concurrency (a write with a
 * stale resourceVersion fails with 409 and we lost the race). A lease is taken over when it has
 * no holder or its holder has not renewed for `leaseDurationSeconds`. `release()` empties the
 * holder so another replica takes over at once instead of waiting for expiry.
 */
export class LeaderElector {
  private leading = false;
  private stopped = false;
  private timer?: ClockTimer;
  private lastRenewMs = 0;
  /** The lease record (holder and renew time) last seen, and when we first saw it. */
  private observed?: { record: string; atMs: number };

  constructor(private readonly o: LeaderElectorOptions) {}

  isLeader(): boolean {
    return this.leading;
  }

  /** Starts trying; returns at once. */
  run(): Promise<void> {
    return this.tick();
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = this.o.clock.setTimeout(() => void this.tick(), this.o.retryPeriodSeconds * 1000);
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    try {
      const ok = await this.tryAcquireOrRenew();
      if (ok) {
        this.lastRenewMs = this.o.clock.now();
        if (!this.leading) {
          this.leading = true;
          this.o.logger.info('became leader', { lease: `${this.o.namespace}/${this.o.name}`, identity: this.o.identity });
          this.o.onStartedLeading();
        }
      } else if (this.leading) this.lose('another replica holds the lease');
    } catch (err) {
      this.o.logger.debug('leader election attempt failed', errorFields(err));
      if (this.leading && this.o.clock.now() - this.lastRenewMs > this.o.renewDeadlineSeconds * 1000) this.lose('could not renew the lease in time');
    }
    this.schedule();
  }

  private lose(why: string): void {
    this.leading = false;
    this.o.logger.warn('lost leadership', { why });
    this.o.onStoppedLeading();
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const now = new V1MicroTime(this.o.clock.now());
    const { namespace, name, identity } = this.o;
    let lease: V1Lease;
    try {
      lease = await this.o.coordination.readNamespacedLease({ name, namespace });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      const body: V1Lease = {
        metadata: { name, namespace },
        spec: { holderIdentity: identity, leaseDurationSeconds: this.o.leaseDurationSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 },
      };
      try {
        await this.o.coordination.createNamespacedLease({ namespace, body });
        return true;
      } catch (e) {
        if (isConflict(e)) return false;
        throw e;
      }
    }
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity ?? '';
    // Expiry is judged by when *we* saw the record change, never by the holder's timestamps:
    // replicas' clocks may disagree (as client-go does).
    const record = `${holder}|${spec.renewTime ? new Date(spec.renewTime).toISOString() : ''}`;
    if (this.observed?.record !== record) this.observed = { record, atMs: this.o.clock.now() };
    const expired = this.o.clock.now() - this.observed.atMs > (spec.leaseDurationSeconds ?? this.o.leaseDurationSeconds) * 1000;
    if (holder && holder !== identity && !expired) return false;
    const takeover = holder !== identity;
    lease.spec = {
      ...spec,
      holderIdentity: identity,
      leaseDurationSeconds: this.o.leaseDurationSeconds,
      renewTime: now,
      acquireTime: takeover ? now : spec.acquireTime,
      leaseTransitions: (spec.leaseTransitions ?? 0) + (takeover ? 1 : 0),
    };
    try {
      await this.o.coordination.replaceNamespacedLease({ name, namespace, body: lease });
      return true;
    } catch (e) {
      if (isConflict(e)) return false;
      throw e;
    }
  }

  /** Stops and, if leading, hands the lease back. */
  async release(): Promise<void> {
    this.stopped = true;
    if (this.timer) this.o.clock.clearTimeout(this.timer);
    if (!this.leading) return;
    this.leading = false;
    try {
      const lease = await this.o.coordination.readNamespacedLease({ name: this.o.name, namespace: this.o.namespace });
      if (lease.spec?.holderIdentity !== this.o.identity) return;
      lease.spec = { ...lease.spec, holderIdentity: '', renewTime: new V1MicroTime(this.o.clock.now() - this.o.leaseDurationSeconds * 1000) };
      await this.o.coordination.replaceNamespacedLease({ name: this.o.name, namespace: this.o.namespace, body: lease });
    } catch (err) {
      this.o.logger.warn('could not release the leader lease', errorFields(err));
    }
  }
}
