import { V1MicroTime, type CoordinationV1Api, type V1Lease } from '@kubernetes/client-node';
import { abortWith, AttemptDeadlineError, withAttemptDeadline } from './attempt-deadline.js';
import type { Clock, ClockTimer } from './clock.js';
import { isConflict, isNotFound } from './errors.js';
import { errorFields, type Logger } from './logger.js';

export interface LeaderElectorOptions {
  coordination: CoordinationV1Api;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationSeconds: number;
  /**
   * How long a leader keeps leading without a confirmed renewal; shorter than the lease, so it
   * steps down before another replica may take the lease (`parseConfig` checks this).
   */
  renewDeadlineSeconds: number;
  retryPeriodSeconds: number;
  clock: Clock;
  logger: Logger;
  onStartedLeading(): void;
  /** Called once when leadership is lost or cannot be confirmed: stop every writer now. */
  onStoppedLeading(): void;
}

/**
 * Leader election on a coordination.k8s.io Lease, with optimistic concurrency (a write with a
 * stale resourceVersion fails with 409 and we lost the race). A lease is taken over when it has
 * no holder or its holder has not renewed for `leaseDurationSeconds`. `release()` empties the
 * holder so another replica takes over at once instead of waiting for expiry.
 *
 * Every attempt has a deadline, and its API calls are aborted when it passes: a leader's attempt
 * must finish within `renewDeadlineSeconds` of its last confirmed renewal (as client-go's
 * `RenewDeadline`), else the leader steps down at that moment. Attempts are `retryPeriodSeconds`
 * apart, less than the renew deadline, so a hung renew call can no longer leave a leader that
 * never steps down while another replica, `leaseDurationSeconds` after the last renewal it
 * saw, takes over.
 */
export class LeaderElector {
  private leading = false;
  private stopped = false;
  private timer?: ClockTimer;
  /** When the attempt that last confirmed our lease started, on the monotonic clock (the lease says that time or later). */
  private lastRenewMs = 0;
  /** The attempt in flight, which a stop aborts. */
  private readonly inFlight = new Set<AbortController>();
  /** The lease record (holder and renew time) last seen, and when we first saw it (monotonic). */
  private observed?: { record: string; atMs: number };
  /** The lease as our last write returned it, while we lead: the next renewal writes it without reading first. */
  private held?: V1Lease;

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
    let delayMs = this.o.retryPeriodSeconds * 1000;
    // A leader whose attempts fail fast is judged at its renew deadline, not at the first retry
    // after it: the writers' stop budget (lease duration less renew deadline) starts there.
    if (this.leading) delayMs = Math.min(delayMs, Math.max(0, this.lastRenewMs + this.o.renewDeadlineSeconds * 1000 - this.o.clock.monotonicMs()));
    this.timer = this.o.clock.setTimeout(() => void this.tick(), delayMs);
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    const startedMs = this.o.clock.monotonicMs();
    const renewDeadlineMs = this.o.renewDeadlineSeconds * 1000;
    // A leader has until its renew deadline; a candidate, one renew deadline per attempt.
    const budgetMs = this.leading ? this.lastRenewMs + renewDeadlineMs - startedMs : renewDeadlineMs;
    if (this.leading && budgetMs <= 0) {
      this.lose('could not renew the lease in time');
      this.schedule();
      return;
    }
    try {
      const ok = await withAttemptDeadline(this.o.clock, Math.max(0, budgetMs), this.inFlight, (signal) => this.tryAcquireOrRenew(signal), 'leader election attempt');
      if (this.stopped) return;
      if (ok) {
        this.lastRenewMs = startedMs;
        if (!this.leading) {
          this.leading = true;
          this.o.logger.info('became leader', { lease: `${this.o.namespace}/${this.o.name}`, identity: this.o.identity });
          this.o.onStartedLeading();
        }
      } else if (this.leading) this.lose('another replica holds the lease');
    } catch (err) {
      if (this.stopped) return;
      this.o.logger.debug('leader election attempt failed', errorFields(err));
      if (this.leading && this.o.clock.monotonicMs() - this.lastRenewMs >= renewDeadlineMs) this.lose('could not renew the lease in time');
    }
    this.schedule();
  }

  private lose(why: string): void {
    this.held = undefined;
    if (!this.leading) return;
    this.leading = false;
    this.o.logger.warn('lost leadership', { why });
    this.o.onStoppedLeading();
  }

  private async tryAcquireOrRenew(signal: AbortSignal): Promise<boolean> {
    const now = new V1MicroTime(this.o.clock.now());
    const { namespace, name, identity } = this.o;
    const options = abortWith(signal);
    // A leader renews the lease its last write returned, without reading it first (as
    // client-go's fast path): if anyone wrote it since, the resourceVersion is stale and the
    // write fails with 409; then, or if it is gone, the attempt goes on as a candidate's would.
    if (this.leading && this.held) {
      try {
        await this.write(renewed(this.held, identity, this.o.leaseDurationSeconds, now), options);
        return true;
      } catch (e) {
        if (!isConflict(e) && !isNotFound(e)) throw e;
      }
    }
    let lease: V1Lease;
    try {
      lease = await this.o.coordination.readNamespacedLease({ name, namespace }, options);
    } catch (err) {
      if (!isNotFound(err)) throw err;
      const body: V1Lease = {
        metadata: { name, namespace },
        spec: { holderIdentity: identity, leaseDurationSeconds: this.o.leaseDurationSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 },
      };
      try {
        this.held = await this.o.coordination.createNamespacedLease({ namespace, body }, options);
        return true;
      } catch (e) {
        if (isConflict(e)) return false;
        throw e;
      }
    }
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity ?? '';
    // Expiry is judged by when *we* saw the record change, never by the holder's timestamps:
    // replicas' clocks may disagree (as client-go does). On the monotonic clock, as client-go's
    // times compare: a step of this node's wall clock must not expire a live lease.
    const record = `${holder}|${spec.renewTime ? new Date(spec.renewTime).toISOString() : ''}`;
    if (this.observed?.record !== record) this.observed = { record, atMs: this.o.clock.monotonicMs() };
    const expired = this.o.clock.monotonicMs() - this.observed.atMs > (spec.leaseDurationSeconds ?? this.o.leaseDurationSeconds) * 1000;
    if (holder && holder !== identity && !expired) return false;
    try {
      await this.write(renewed(lease, identity, this.o.leaseDurationSeconds, now), options);
      return true;
    } catch (e) {
      if (isConflict(e)) return false;
      throw e;
    }
  }

  /** Replaces the lease and keeps what the API server returned, for the next renewal. */
  private async write(lease: V1Lease, options: never): Promise<void> {
    this.held = undefined;
    this.held = await this.o.coordination.replaceNamespacedLease({ name: this.o.name, namespace: this.o.namespace, body: lease }, options);
  }

  /** Stops and, if leading, hands the lease back. */
  async release(): Promise<void> {
    this.stopped = true;
    if (this.timer) this.o.clock.clearTimeout(this.timer);
    for (const attempt of this.inFlight) attempt.abort(new AttemptDeadlineError('elector stopped'));
    this.held = undefined;
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

/** `lease` held by `identity`, renewed `now`: a takeover when someone else held it. */
function renewed(lease: V1Lease, identity: string, leaseDurationSeconds: number, now: V1MicroTime): V1Lease {
  const spec = lease.spec ?? {};
  const takeover = spec.holderIdentity !== identity;
  return {
    ...lease,
    spec: {
      ...spec,
      holderIdentity: identity,
      leaseDurationSeconds,
      renewTime: now,
      acquireTime: takeover ? now : spec.acquireTime,
      leaseTransitions: (spec.leaseTransitions ?? 0) + (takeover ? 1 : 0),
    },
  };
}
