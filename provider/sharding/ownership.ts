import { V1MicroTime, type CoordinationV1Api, type V1Lease } from '@kubernetes/client-node';
import type { Clock } from '../core/clock.js';
import { isConflict, isNotFound } from '../core/errors.js';
import { TARGET_FENCE_LABEL, TARGET_KEY_ANNOTATION } from '../core/keys.js';
import { errorFields, type Logger } from '../core/logger.js';
import type { Membership } from './membership.js';
import { fnv1a64 } from './rendezvous.js';

export interface TargetOwnershipOptions {
  coordination: CoordinationV1Api;
  /** Where the fence Leases live: the provider's own namespace, with the membership Leases. */
  namespace: string;
  group: string;
  identity: string;
  /** This replica's membership: a fence is good only while its holder's membership Lease is live. */
  membership: Pick<Membership, 'isMember' | 'isLive'>;
  clock: Clock;
  logger: Logger;
  /**
   * Stops `targetKey`'s writers and resolves once none of them can write again (its workers
   * drained, its timers cleared). Idempotent: it is called before every release, and for every
   * owned target when this replica's membership lapses.
   */
  stopWriters(targetKey: string): Promise<void>;
}

/** How many claims (or releases) of one `sync` run at once. */
const HANDOFF_CONCURRENCY = 8;

/** Runs `fn` over `items`, at most `limit` at once. */
async function inParallel<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

/** What `sync` left: the targets owned, and those wanted but still held by a live peer. */
export interface OwnershipSync {
  owned: string[];
  waiting: string[];
}

/** The name of `targetKey`'s fence Lease: keys (`Target/<ns>/<name>`) are hashed to fit a name. */
export function fenceLeaseName(targetKey: string): string {
  const [hi, lo] = fnv1a64(targetKey);
  return `admiralty-target-${hi.toString(16).padStart(8, '0')}${lo.toString(16).padStart(8, '0')}`;
}

/**
 * The fence that keeps two replicas from writing one target: a Lease per target
 * (`admiralty-target-<hash>`, in the provider's namespace) whose holder is the one replica that
 * may run that target's writers. A replica takes it only when it has no holder, names this
 * replica, or names a replica whose membership Lease is not live (see `Membership.isLive`),
 * with optimistic concurrency, so of two claimants one gets 409. The fence is never renewed on
 * its own: its holder's liveness is its membership Lease's, which keeps the cost of ownership to
 * one write per target per hand-off (a per-target renewal would be one write per target per
 * period). So the Lease's `renewTime` is the time of the claim, and tools that judge Leases by
 * their renew time would call a held fence expired; `holderIdentity` is what counts.
 *
 * A hand-off: the owner stops the target's writers first (`stopWriters`), then empties the
 * holder, so its successor takes the target at once. A replica that dies takes its fences with
 * it: peers take them once its membership Lease has gone a lease duration without renewal by
 * their observation, by which time it has stopped writing (its membership lapses at its renew
 * deadline, which is shorter).
 */
export class TargetOwnership {
  /** Targets this replica holds the fence of, and the fence as our last write returned it. */
  private readonly owned = new Map<string, V1Lease>();

  constructor(private readonly o: TargetOwnershipOptions) {}

  /** Whether this replica may write `targetKey` now: it holds the fence and its membership is confirmed. Synchronous, for a gate before every write. */
  isOwner(targetKey: string): boolean {
    return this.owned.has(targetKey) && this.o.membership.isMember();
  }

  /** The targets whose fence this replica holds, sorted. */
  ownedTargets(): string[] {
    return [...this.owned.keys()].sort();
  }

  /**
   * Takes `targetKey`'s fence if it is free (see the class); true once it is ours, so its writers
   * may start. False when a live peer holds it or another claimant won the race: try again later.
   * Throws on API errors.
   */
  async claim(targetKey: string): Promise<boolean> {
    if (this.owned.has(targetKey)) return this.o.membership.isMember();
    if (!this.o.membership.isMember()) return false;
    const name = fenceLeaseName(targetKey);
    const { namespace, identity } = this.o;
    let lease: V1Lease;
    try {
      lease = await this.o.coordination.readNamespacedLease({ name, namespace });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      return this.create(targetKey);
    }
    const named = lease.metadata?.annotations?.[TARGET_KEY_ANNOTATION];
    if (named !== targetKey) throw new Error(`fence Lease ${name} is for target ${named}, not ${targetKey}`);
    const holder = lease.spec?.holderIdentity ?? '';
    if (holder && holder !== identity && (await this.o.membership.isLive(holder))) return false;
    if (!this.o.membership.isMember()) return false;
    try {
      this.owned.set(targetKey, await this.o.coordination.replaceNamespacedLease({ name, namespace, body: this.claimed(lease, holder) }));
    } catch (err) {
      if (isConflict(err)) return false;
      throw err;
    }
    this.o.logger.info('claimed target', { target: targetKey, ...(holder && holder !== identity ? { from: holder } : {}) });
    return true;
  }

  private async create(targetKey: string): Promise<boolean> {
    const now = new V1MicroTime(this.o.clock.now());
    const body: V1Lease = {
      metadata: {
        name: fenceLeaseName(targetKey),
        namespace: this.o.namespace,
        labels: { [TARGET_FENCE_LABEL]: this.o.group },
        annotations: { [TARGET_KEY_ANNOTATION]: targetKey },
      },
      spec: { holderIdentity: this.o.identity, acquireTime: now, renewTime: now, leaseTransitions: 0 },
    };
    try {
      this.owned.set(targetKey, await this.o.coordination.createNamespacedLease({ namespace: this.o.namespace, body }));
    } catch (err) {
      if (isConflict(err)) return false;
      throw err;
    }
    this.o.logger.info('claimed target', { target: targetKey });
    return true;
  }

  private claimed(lease: V1Lease, holder: string): V1Lease {
    const now = new V1MicroTime(this.o.clock.now());
    const spec = lease.spec ?? {};
    const takeover = holder !== this.o.identity;
    return {
      ...lease,
      spec: { ...spec, holderIdentity: this.o.identity, renewTime: now, acquireTime: takeover ? now : spec.acquireTime, leaseTransitions: (spec.leaseTransitions ?? 0) + (takeover ? 1 : 0) },
    };
  }

  /**
   * Gives `targetKey` up: `isOwner` is false at once, its writers are stopped (awaited), and then
   * its fence's holder is emptied if it still names us, so a successor takes it at once. True
   * once the fence is free of us; false when the write failed (logged; `sync` retries it, and
   * the fence frees itself anyway when our membership lapses). Throws only if `stopWriters`
   * does, and then leaves the fence ours: a writer that may still run keeps its fence.
   */
  async release(targetKey: string): Promise<boolean> {
    const held = this.owned.get(targetKey);
    this.owned.delete(targetKey);
    await this.o.stopWriters(targetKey);
    const { namespace, identity } = this.o;
    const name = fenceLeaseName(targetKey);
    const clear = (lease: V1Lease): V1Lease => ({ ...lease, spec: { ...lease.spec, holderIdentity: '' } });
    try {
      if (held) {
        try {
          await this.o.coordination.replaceNamespacedLease({ name, namespace, body: clear(held) });
          return true;
        } catch (err) {
          if (!isConflict(err) && !isNotFound(err)) throw err;
        }
      }
      const lease = await this.o.coordination.readNamespacedLease({ name, namespace });
      if (lease.spec?.holderIdentity !== identity) return true;
      await this.o.coordination.replaceNamespacedLease({ name, namespace, body: clear(lease) });
      return true;
    } catch (err) {
      if (isNotFound(err)) return true;
      this.o.logger.warn('could not release target', { target: targetKey, ...errorFields(err) });
      return false;
    }
  }

  /**
   * Makes this replica own what it should: every target of `wanted` (the targets rendezvous
   * hashing gives it, from `Membership`'s live members) is claimed, every owned target not in it
   * released, and fences that still name us but that we do not own in memory (a release that
   * failed, or claims from before our membership lapsed) released too. While our membership is
   * not confirmed it claims nothing and stops every owned target's writers without writing (the
   * API may be unreachable; the fences free themselves when our membership Lease expires).
   * Call it on every membership change and every retry period while targets are waiting.
   */
  async sync(wanted: ReadonlySet<string>): Promise<OwnershipSync> {
    if (!this.o.membership.isMember()) {
      for (const key of [...this.owned.keys()]) {
        this.owned.delete(key);
        await this.o.stopWriters(key);
      }
      return { owned: [], waiting: [...wanted].sort() };
    }
    // A few at a time: a hand-off of a dead member's tens of targets, one claim (two or three
    // calls) after the other, took 4 s on a loaded machine.
    await inParallel(
      [...this.owned.keys()].filter((key) => !wanted.has(key)),
      HANDOFF_CONCURRENCY,
      (key) => this.release(key),
    );
    await this.releaseStale(wanted);
    await inParallel([...wanted].sort(), HANDOFF_CONCURRENCY, async (key) => {
      if (this.owned.has(key)) return;
      try {
        await this.claim(key);
      } catch (err) {
        this.o.logger.warn('could not claim target', { target: key, ...errorFields(err) });
      }
    });
    return { owned: this.ownedTargets(), waiting: [...wanted].filter((k) => !this.owned.has(k)).sort() };
  }

  /** Releases fences of the group that name us but are neither owned nor wanted. */
  private async releaseStale(wanted: ReadonlySet<string>): Promise<void> {
    let items: V1Lease[];
    try {
      items = (await this.o.coordination.listNamespacedLease({ namespace: this.o.namespace, labelSelector: `${TARGET_FENCE_LABEL}=${this.o.group}` })).items;
    } catch (err) {
      this.o.logger.debug('listing the fence Leases failed', errorFields(err));
      return;
    }
    for (const lease of items) {
      const key = lease.metadata?.annotations?.[TARGET_KEY_ANNOTATION];
      if (!key || lease.spec?.holderIdentity !== this.o.identity || this.owned.has(key) || wanted.has(key)) continue;
      await this.release(key);
    }
  }

  /**
   * The target is gone: stops its writers and deletes its fence if it is free or ours (with a
   * UID precondition), so fences do not outlive their targets. Throws on API errors.
   */
  async remove(targetKey: string): Promise<void> {
    this.owned.delete(targetKey);
    await this.o.stopWriters(targetKey);
    const name = fenceLeaseName(targetKey);
    const { namespace } = this.o;
    try {
      const lease = await this.o.coordination.readNamespacedLease({ name, namespace });
      const holder = lease.spec?.holderIdentity ?? '';
      if (holder && holder !== this.o.identity) return;
      await this.o.coordination.deleteNamespacedLease({ name, namespace, body: { preconditions: { uid: lease.metadata?.uid, resourceVersion: lease.metadata?.resourceVersion } } });
    } catch (err) {
      if (!isNotFound(err) && !isConflict(err)) throw err;
    }
  }
}
