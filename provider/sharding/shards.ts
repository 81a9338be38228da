import type { ClockTimer } from '../core/clock.js';
import { errorFields } from '../core/logger.js';
import type { ControllerGate } from '../controller/controller.js';
import type { Elector } from '../controller/manager.js';
import { Membership, type MembershipOptions } from './membership.js';
import { TargetOwnership } from './ownership.js';
import { ownerOf } from './rendezvous.js';

/**
 * The shard of the work that belongs to no target: the source cluster's summary and Sources,
 * follow and services (whose keys span targets), and proxies whose target is unknown or gone.
 * It is assigned and fenced like a target.
 */
export const CLUSTER_SHARD = 'Provider/cluster-wide';

/** What a gated controller gives its shards' owner: see `Controller.resync` and `Controller.quiesce`. */
export interface ShardedController {
  resync(): void;
  quiesce(shard: string | undefined): Promise<void>;
}

/** The Targets and ClusterTargets that exist, by key (`Target/<ns>/<name>`, `ClusterTarget/<name>`): the shards besides {@link CLUSTER_SHARD}. */
export interface TargetSet {
  keys(): Iterable<string>;
  has(key: string): boolean;
  /** Whether the set is complete (its caches have listed): until then no shard is written. */
  hasSynced(): boolean;
}

/** A membership's options (see `Membership`), and what a pass tells. */
export interface ShardsOptions extends Omit<MembershipOptions, 'onChange'> {
  /** Told the number of shards this replica owns after each pass. */
  onOwned?: (count: number) => void;
}

/**
 * Targets sharded across the provider's replicas, with Kubernetes Leases as the only
 * coordination: each replica is a member of the group ({@link Membership}), each shard (a target,
 * or {@link CLUSTER_SHARD}) goes to one live member by rendezvous hashing ({@link ownerOf}), and
 * a member writes a shard only while it holds the shard's fence ({@link TargetOwnership}). What
 * this gives: one replica at a time reconciles a given key of a given controller, and a shard's
 * old owner has stopped its reconciles before its fence is free for the new one.
 *
 * To the manager it is the elector ({@link elector}): "leading" means being a member, so every
 * member runs the writers' controllers, and each controller's gate ({@link gate}) lets through
 * only the keys of the shards this replica owns. A pass runs on every change of the members or
 * of the targets, and every retry period while a wanted shard is still held by a peer; each
 * shard claimed resyncs the gated controllers, so keys dropped while a peer owned it are seen.
 */
export class Shards {
  private readonly membership: Membership;
  private readonly ownership: TargetOwnership;
  private readonly controllers = new Set<ShardedController>();
  private readonly gone = new Set<string>();
  private callbacks?: { onStartedLeading(): void; onStoppedLeading(): void };
  private member = false;
  private stopped = false;
  private dirty = false;
  private pass?: Promise<void>;
  private retry?: ClockTimer;
  private targets?: TargetSet;

  constructor(private readonly o: ShardsOptions) {
    this.membership = new Membership({ ...o, onChange: () => this.changed() });
    const { coordination, namespace, group, identity, clock, logger } = o;
    this.ownership = new TargetOwnership({ coordination, namespace, group, identity, membership: this.membership, clock, logger, stopWriters: (key) => this.stopWriters(key) });
  }

  /** A controller's gate: `shardOf` names the target a key writes to; any other answer (undefined, a target that does not exist) is the cluster-wide shard. */
  gate(shardOf: (key: string) => string | undefined): ControllerGate {
    return {
      shardOf: (key) => {
        const shard = shardOf(key);
        return shard !== undefined && this.targets?.has(shard) ? shard : undefined;
      },
      owns: (shard) => this.owns(shard),
    };
  }

  /** A gated controller, resynced on each claim and quiesced on each release. Before `elector().run()`. */
  register(controller: ShardedController): void {
    this.controllers.add(controller);
  }

  /**
   * The targets to shard. Before it is given and complete, no shard is written: a key of a
   * target not listed yet would count as the cluster-wide shard's, whose owner would then write
   * that target beside the target's own owner.
   */
  track(targets: TargetSet): void {
    this.targets = targets;
    this.changed();
  }

  /** Whether this replica may write `shard` now (undefined: the cluster-wide shard). */
  owns(shard: string | undefined): boolean {
    return this.targets?.hasSynced() === true && this.ownership.isOwner(shard ?? CLUSTER_SHARD);
  }

  /** The shards this replica owns, sorted. */
  owned(): string[] {
    return this.ownership.ownedTargets();
  }

  /** The live members of the group as this replica last saw them. */
  members(): readonly string[] {
    return this.membership.members();
  }

  /** The manager's elector: `onStartedLeading` once this replica is a member, `onStoppedLeading` when it stops being one. */
  elector(callbacks: { onStartedLeading(): void; onStoppedLeading(): void }): Elector {
    this.callbacks = callbacks;
    return { run: () => this.membership.run(), release: () => this.release() };
  }

  /** The members or the targets changed: a pass, now or after the one running. */
  changed(): void {
    if (this.stopped) return;
    this.dirty = true;
    this.pass ??= this.passes().finally(() => (this.pass = undefined));
  }

  /** A Target is gone: its fence goes too, once its writers here stopped. */
  removed(key: string): void {
    this.gone.add(key);
    this.changed();
  }

  private async passes(): Promise<void> {
    while (this.dirty && !this.stopped) {
      this.dirty = false;
      try {
        await this.once();
      } catch (err) {
        this.o.logger.warn('sharding pass failed; retrying', errorFields(err));
        this.retryLater();
      }
    }
  }

  private async once(): Promise<void> {
    const isMember = this.membership.isMember();
    if (isMember !== this.member) {
      this.member = isMember;
      if (isMember) this.callbacks?.onStartedLeading();
      else this.callbacks?.onStoppedLeading();
    }
    const targets = this.targets;
    if (!targets?.hasSynced()) return this.retryLater();
    for (const key of [...this.gone]) {
      this.gone.delete(key);
      if (!targets.has(key)) await this.ownership.remove(key);
    }
    const members = this.membership.members();
    const wanted = new Set<string>();
    for (const key of [CLUSTER_SHARD, ...targets.keys()]) if (ownerOf(key, members) === this.o.identity) wanted.add(key);
    const before = new Set(this.ownership.ownedTargets());
    const { owned, waiting } = await this.ownership.sync(wanted);
    const claimed = owned.filter((key) => !before.has(key));
    if (claimed.length > 0) {
      this.o.logger.info('owning shards', { claimed: claimed.length, owned: owned.length, members: members.length });
      for (const c of this.controllers) c.resync();
    }
    this.o.onOwned?.(owned.length);
    if (waiting.length > 0) this.retryLater();
  }

  private retryLater(): void {
    if (this.retry || this.stopped) return;
    this.retry = this.o.clock.setTimeout(() => {
      this.retry = undefined;
      this.changed();
    }, this.o.retryPeriodSeconds * 1000);
  }

  /** Every gated controller's reconciles of `key` ended (none starts: its gate is shut already). */
  private async stopWriters(key: string): Promise<void> {
    const shard = key === CLUSTER_SHARD ? undefined : key;
    await Promise.all([...this.controllers].map((c) => c.quiesce(shard)));
  }

  /** Gives every shard back (the writers stopped first), then leaves the group. */
  private async release(): Promise<void> {
    this.stopped = true;
    if (this.retry) this.o.clock.clearTimeout(this.retry);
    await this.pass;
    try {
      await this.ownership.sync(new Set());
    } catch (err) {
      this.o.logger.warn('could not give every shard back; peers take them when the membership Lease expires', errorFields(err));
    }
    await this.membership.stop();
  }
}
