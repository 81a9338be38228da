import { V1MicroTime, type CoordinationV1Api, type V1Lease } from '@kubernetes/client-node';
import type { Clock, ClockTimer } from '../core/clock.js';
import { isConflict, isNotFound } from '../core/errors.js';
import { MEMBERSHIP_LABEL } from '../core/keys.js';
import { errorFields, type Logger } from '../core/logger.js';
import { abortWith, AttemptDeadlineError, withAttemptDeadline } from '../core/attempt-deadline.js';
import { fnv1a64 } from './rendezvous.js';

export interface MembershipOptions {
  coordination: CoordinationV1Api;
  /** Where the group's Leases live: the provider's own namespace. */
  namespace: string;
  /** The group's name, a label value: replicas of one installation share it. */
  group: string;
  /** This replica's identity, unique among live replicas (main's `<pod name>-<pid>`). */
  identity: string;
  leaseDurationSeconds: number;
  /** How long this replica counts itself a member without a confirmed renewal; shorter than the lease. */
  renewDeadlineSeconds: number;
  /** The renew period: one write of our Lease and one list of the group's each period. */
  retryPeriodSeconds: number;
  clock: Clock;
  logger: Logger;
  /**
   * Whether `identity` is an earlier process of this very replica (the same pod, restarted): it
   * is known dead, so its Lease is not waited out. Main's identities are `<pod name>-<pid>`.
   */
  isPredecessor?: (identity: string) => boolean;
  /**
   * Called with the live members, sorted, whenever that set changes. This replica is in it only
   * while its own Lease is confirmed: when it drops out, it owns no target and must stop every
   * target's writers.
   */
  onChange(members: readonly string[]): void;
}

/** The name of `identity`'s membership Lease: identities (pod name and pid) are hashed to fit a name. */
export function memberLeaseName(identity: string): string {
  const [hi, lo] = fnv1a64(identity);
  return `admiralty-member-${hi.toString(16).padStart(8, '0')}${lo.toString(16).padStart(8, '0')}`;
}

/** A member's Lease as we last saw it, and when we first saw that record (monotonic). */
interface Observed {
  holder: string;
  record: string;
  atMs: number;
  leaseDurationSeconds: number;
  uid?: string;
  resourceVersion?: string;
}

/**
 * This replica's membership in a group of provider replicas, on coordination.k8s.io Leases: one
 * Lease per replica (`admiralty-member-<hash>`, labelled with the group), which it creates and
 * renews every retry period; every replica lists the group's Leases each period and reports the
 * live ones. The cost is one write and one list per replica per period, whatever the number of
 * targets.
 *
 * A member is live while the record of its Lease (holder and renew time) has changed within its
 * `leaseDurationSeconds`, measured from when *we* first saw that record on the monotonic clock,
 * as `LeaderElector` judges expiry: replicas' wall clocks may disagree, and judging a peer dead
 * early would let two replicas write one target. The price: a replica that starts counts a dead
 * peer's stale Lease live for one lease duration. A graceful stop deletes the Lease, so peers
 * drop the member at their next list. Leases dead for two lease durations are deleted by
 * whichever member sees them, with a resourceVersion precondition so a late renewal wins.
 *
 * This replica counts itself a member only while its last confirmed renewal started less than
 * `renewDeadlineSeconds` ago; attempts are aborted at that deadline, as `LeaderElector`'s are,
 * so a hung call cannot keep a replica writing after its peers have taken its targets.
 */
export class Membership {
  private stopped = false;
  private confirmed = false;
  private timer?: ClockTimer;
  private lastRenewMs = 0;
  private readonly inFlight = new Set<AbortController>();
  /** Our Lease as our last write returned it: the next renewal writes it without reading first. */
  private held?: V1Lease;
  /** The group's other Leases by name. */
  private readonly observed = new Map<string, Observed>();
  /** Leases that vanished while live, until they would have expired: `isLive` only. */
  private readonly vanished = new Map<string, Observed>();
  private published = '';
  private current: readonly string[] = [];

  constructor(private readonly o: MembershipOptions) {}

  /** Starts renewing and listing; returns once the first round is done. */
  run(): Promise<void> {
    return this.tick();
  }

  /** Whether this replica's own Lease is confirmed: when false it owns no target. */
  isMember(): boolean {
    // Judged on the clock, not only by the last attempt: exact at the deadline even while an attempt hangs.
    return this.confirmed && !this.stopped && this.o.clock.monotonicMs() - this.lastRenewMs < this.o.renewDeadlineSeconds * 1000;
  }

  /** The live members as last published to `onChange`, sorted. */
  members(): readonly string[] {
    return this.current;
  }

  /**
   * Whether `identity` holds a live membership Lease, read now rather than from the last list
   * (a claim must not take a target from a peer our last list predates). An identity whose Lease
   * we see for the first time counts live for one lease duration; one with no Lease is not live.
   */
  async isLive(identity: string): Promise<boolean> {
    if (identity === this.o.identity) return this.isMember();
    const name = memberLeaseName(identity);
    try {
      const lease = await this.o.coordination.readNamespacedLease({ name, namespace: this.o.namespace });
      this.observe(lease);
    } catch (err) {
      if (!isNotFound(err)) throw err;
      // A Lease deleted while it was live (by an operator, or by a graceful leaver whose
      // releases failed) keeps its holder live until it would have expired: its holder may
      // still be writing. One we never saw live is not.
      const before = this.observed.get(name) ?? this.vanished.get(name);
      this.observed.delete(name);
      return before !== undefined && before.holder === identity && this.live(before);
    }
    const seen = this.observed.get(name);
    return seen !== undefined && seen.holder === identity && this.live(seen);
  }

  private live(seen: Observed): boolean {
    return this.o.clock.monotonicMs() - seen.atMs <= seen.leaseDurationSeconds * 1000;
  }

  private schedule(): void {
    if (this.stopped) return;
    let delayMs = this.o.retryPeriodSeconds * 1000;
    // A member whose attempts fail fast is judged at its renew deadline, not at the next retry after it.
    if (this.confirmed) delayMs = Math.min(delayMs, Math.max(0, this.lastRenewMs + this.o.renewDeadlineSeconds * 1000 - this.o.clock.monotonicMs()));
    this.timer = this.o.clock.setTimeout(() => void this.tick(), delayMs);
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    const startedMs = this.o.clock.monotonicMs();
    const renewDeadlineMs = this.o.renewDeadlineSeconds * 1000;
    if (this.confirmed && this.lastRenewMs + renewDeadlineMs - startedMs <= 0) this.unconfirm('could not renew the membership Lease in time');
    // A member has until its renew deadline; a candidate, one renew deadline per attempt.
    const budgetMs = this.confirmed ? this.lastRenewMs + renewDeadlineMs - startedMs : renewDeadlineMs;
    // The renewal's outcome counts as soon as it is known: a hung list must not delay leaving.
    const renewal = withAttemptDeadline(this.o.clock, Math.max(0, budgetMs), this.inFlight, (signal) => this.renew(signal)).then(
      () => this.confirm(startedMs),
      (err) => this.renewFailed(err),
    );
    const listing = withAttemptDeadline(this.o.clock, renewDeadlineMs, this.inFlight, (signal) => this.list(signal)).catch((err) => {
      this.o.logger.debug('listing the provider group failed', errorFields(err));
    });
    await Promise.all([renewal, listing]);
    if (this.stopped) return;
    this.publish();
    this.schedule();
  }

  private confirm(startedMs: number): void {
    if (this.stopped) return;
    this.lastRenewMs = startedMs;
    if (!this.confirmed) this.o.logger.info('joined the provider group', { group: this.o.group, identity: this.o.identity });
    this.confirmed = true;
    this.publish();
  }

  private renewFailed(err: unknown): void {
    if (this.stopped) return;
    this.o.logger.debug('membership renewal failed', errorFields(err));
    if (this.confirmed && this.o.clock.monotonicMs() - this.lastRenewMs >= this.o.renewDeadlineSeconds * 1000) this.unconfirm('could not renew the membership Lease in time');
    this.publish();
  }

  private unconfirm(why: string): void {
    this.held = undefined;
    if (!this.confirmed) return;
    this.confirmed = false;
    this.o.logger.warn('left the provider group', { group: this.o.group, why });
  }

  /** Tells `onChange` when the live set differs from the one it was last told. */
  private publish(): void {
    const live = new Set<string>();
    if (this.isMember()) live.add(this.o.identity);
    for (const seen of this.observed.values()) if (this.live(seen)) live.add(seen.holder);
    const members = [...live].sort();
    const key = members.join('\n');
    if (key === this.published) return;
    this.published = key;
    this.current = members;
    this.o.onChange(members);
  }

  /** Renews our Lease: the one our last write returned, else the one read, else a new one. */
  private async renew(signal: AbortSignal): Promise<void> {
    const { namespace, identity } = this.o;
    const name = memberLeaseName(identity);
    const options = abortWith(signal);
    const now = new V1MicroTime(this.o.clock.now());
    if (this.held) {
      try {
        return await this.write(this.renewed(this.held, now), options);
      } catch (e) {
        if (!isConflict(e) && !isNotFound(e)) throw e;
      }
    }
    let lease: V1Lease;
    try {
      lease = await this.o.coordination.readNamespacedLease({ name, namespace }, options);
    } catch (err) {
      if (!isNotFound(err)) throw err;
      const body = this.renewed({ metadata: { name, namespace } }, now);
      this.held = await this.o.coordination.createNamespacedLease({ namespace, body }, options);
      return;
    }
    await this.write(this.renewed(lease, now), options);
  }

  private async write(lease: V1Lease, options: never): Promise<void> {
    this.held = undefined;
    this.held = await this.o.coordination.replaceNamespacedLease({ name: lease.metadata!.name!, namespace: this.o.namespace, body: lease }, options);
  }

  private renewed(lease: V1Lease, now: V1MicroTime): V1Lease {
    const labels = { ...lease.metadata?.labels, [MEMBERSHIP_LABEL]: this.o.group };
    const spec = lease.spec ?? {};
    return {
      ...lease,
      metadata: { ...lease.metadata, labels },
      spec: { ...spec, holderIdentity: this.o.identity, leaseDurationSeconds: this.o.leaseDurationSeconds, acquireTime: spec.acquireTime ?? now, renewTime: now },
    };
  }

  /** Lists the group's Leases: new records are noted, vanished Leases forgotten, long-dead ones deleted. */
  private async list(signal: AbortSignal): Promise<void> {
    const own = memberLeaseName(this.o.identity);
    const list = await this.o.coordination.listNamespacedLease({ namespace: this.o.namespace, labelSelector: `${MEMBERSHIP_LABEL}=${this.o.group}` }, abortWith(signal));
    const seen = new Set<string>();
    for (const lease of list.items) {
      const name = lease.metadata?.name;
      if (!name || name === own) continue;
      seen.add(name);
      this.observe(lease);
      // This pod's earlier process: dead, so its Lease goes now, not after two lease durations.
      const holder = lease.spec?.holderIdentity ?? '';
      if (this.isPredecessor(holder)) {
        await this.collect(name, { holder, record: '', atMs: 0, leaseDurationSeconds: 0, uid: lease.metadata?.uid, resourceVersion: lease.metadata?.resourceVersion }, signal);
      }
    }
    for (const [name, o] of this.vanished) if (!this.live(o)) this.vanished.delete(name);
    for (const [name, o] of this.observed) {
      if (seen.has(name)) continue;
      this.observed.delete(name);
      if (this.live(o)) this.vanished.set(name, o);
    }
    for (const [name, o] of this.observed) {
      if (this.o.clock.monotonicMs() - o.atMs > 2 * o.leaseDurationSeconds * 1000) await this.collect(name, o, signal);
    }
  }

  /** Notes `lease`'s record, and when it first showed, unless it is a graceful leaver's or has no holder. */
  private observe(lease: V1Lease): void {
    const name = lease.metadata!.name!;
    this.vanished.delete(name);
    const holder = lease.spec?.holderIdentity ?? '';
    // A container restarted in its pod: the process that held this Lease is gone, and waiting a
    // lease duration for it held the targets it owned for 15 s more (the new process, having
    // first seen its predecessor's Lease at its start, would count it live until then).
    if (!holder || lease.metadata?.deletionTimestamp || this.isPredecessor(holder)) {
      this.observed.delete(name);
      return;
    }
    const renew = lease.spec?.renewTime;
    const record = `${holder}|${renew ? new Date(renew).toISOString() : ''}`;
    const before = this.observed.get(name);
    const atMs = before?.record === record ? before.atMs : this.o.clock.monotonicMs();
    this.observed.set(name, {
      holder,
      record,
      atMs,
      leaseDurationSeconds: lease.spec?.leaseDurationSeconds ?? this.o.leaseDurationSeconds,
      uid: lease.metadata?.uid,
      resourceVersion: lease.metadata?.resourceVersion,
    });
  }

  /** Whether `holder` is an earlier process of this replica's pod (see `MembershipOptions.isPredecessor`). */
  private isPredecessor(holder: string): boolean {
    return holder !== '' && holder !== this.o.identity && this.o.isPredecessor?.(holder) === true;
  }

  /** Deletes the Lease of a member dead for two lease durations (a SIGKILLed replica's pod name never comes back). */
  private async collect(name: string, o: Observed, signal: AbortSignal): Promise<void> {
    try {
      await this.o.coordination.deleteNamespacedLease({ name, namespace: this.o.namespace, body: { preconditions: { uid: o.uid, resourceVersion: o.resourceVersion } } }, abortWith(signal));
      this.o.logger.info('deleted the membership Lease of a dead member', { lease: name, member: o.holder });
      this.observed.delete(name);
    } catch (err) {
      if (isNotFound(err)) this.observed.delete(name);
      else if (!isConflict(err)) throw err;
    }
  }

  /**
   * Stops renewing and deletes our Lease, so peers drop us at their next list instead of after
   * expiry. Call it after this replica's targets are released (their writers stopped first).
   */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) this.o.clock.clearTimeout(this.timer);
    for (const c of this.inFlight) c.abort(new AttemptDeadlineError('membership stopped'));
    const uid = this.held?.metadata?.uid;
    this.held = undefined;
    this.confirmed = false;
    const name = memberLeaseName(this.o.identity);
    const { namespace } = this.o;
    try {
      await withAttemptDeadline(this.o.clock, this.o.renewDeadlineSeconds * 1000, new Set(), async (signal) => {
        const precondition = uid ?? (await this.o.coordination.readNamespacedLease({ name, namespace }, abortWith(signal))).metadata?.uid;
        await this.o.coordination.deleteNamespacedLease({ name, namespace, body: { preconditions: { uid: precondition } } }, abortWith(signal));
      });
    } catch (err) {
      if (!isNotFound(err)) this.o.logger.warn('could not delete the membership Lease', errorFields(err));
    }
  }
}

/**
 * Whether an identity (`<pod>-<pid>`) is an earlier process of pod `pod`: a container restarted
 * in its pod. A pod's name is unique among live pods, and its processes run one after the other.
 */
export function isEarlierProcessOf(pod: string, pid = process.pid): (identity: string) => boolean {
  return (identity) => identity.startsWith(`${pod}-`) && /^\d+$/.test(identity.slice(pod.length + 1)) && identity !== `${pod}-${pid}`;
}
