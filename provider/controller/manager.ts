import type { Clock, ClockTimer } from '../core/clock.js';
import { errorFields, type Logger } from '../core/logger.js';
import { ClusterCaches, type CacheCluster, type InformerServices } from './cluster-caches.js';
import type { Controller } from './controller.js';
import type { CacheBudget } from './cache-budget.js';
import { TargetCaches, type EngagedTarget, type EngageHandler } from './target-caches.js';

/** A cache the manager starts, stops and waits for: an informer. */
export interface Cache {
  readonly name: string;
  start(): void;
  stop(): void;
  hasSynced(): boolean;
}

/**
 * One part of the provider, as the manager runs it (controller-runtime's `Runnable` with its
 * `LeaderElectionRunnable`): what it reads, whether it writes, how it starts and stops.
 */
export interface Runnable {
  readonly name: string;
  /**
   * True for a part that writes to a cluster (controllers): it runs only while this replica
   * leads. False (the default) for a part every replica runs: servers and the caches they read.
   */
  readonly needLeaderElection?: boolean;
  /**
   * The caches it reads. The manager starts each once, before the first runnable that needs
   * it, and stops it with the last. The caches of the runnables every replica runs must have
   * synced before the replica reports ready.
   */
  readonly caches?: readonly Cache[];
  /** Starts it; resolves once it serves (a server listens). A rejection stops the manager's start. */
  start(): Promise<void> | void;
  /**
   * A server's first step of a graceful shutdown: from now on it answers every request and
   * asks each client to close its connection after the answer, so that clients reconnect,
   * through the Service, to a replica that is not going away. It keeps serving until `stop`.
   */
  drain?(): void;
  /** Stops it within `deadlineMs`: stops taking work, lets in-flight work finish. */
  stop(deadlineMs: number): Promise<void> | void;
}

/** What the manager needs of a leader elector (see `LeaderElector`). */
export interface Elector {
  run(): Promise<void>;
  release(): Promise<void>;
}

export interface ManagerOptions {
  logger: Logger;
  /** Every deadline and delay of the manager's (the drain, the stops) is measured on it. */
  clock: Clock;
  /** The cluster this process runs in, whose caches {@link Manager.caches} makes. Without it, `caches()` throws. */
  cluster?: CacheCluster;
  /** What every informer the manager's caches make shares (the logger and clock default to the manager's). */
  informers?: Omit<InformerServices, 'logger' | 'clock'>;
  /**
   * Builds the elector, given what to call on gaining and losing leadership; without it this
   * replica leads from the start (`--leader-elect=false`).
   */
  elector?: (callbacks: { onStartedLeading(): void; onStoppedLeading(): void }) => Elector;
  /** Budget to stop the leader's runnables when leadership is lost. */
  stepDownDeadlineMs: number;
  /**
   * Called once the leader's runnables stopped after a loss of leadership (main exits); during a
   * shutdown, only when they did not stop within `stepDownDeadlineMs` of the loss.
   */
  onLostLeadership?: () => void;
}

/**
 * Runs the provider's parts, in the manner of controller-runtime's manager: the runnables every
 * replica needs (servers and the caches they read) start at once, the leader's (the writers)
 * start on election and stop the moment leadership is lost or cannot be confirmed. Readiness
 * means "can serve": every always-on runnable started and its caches synced, whether or not
 * this replica leads.
 */
export class Manager<T extends EngagedTarget = EngagedTarget> {
  private readonly runnables: Runnable[] = [];
  /** Started caches, with the runnables that hold them. */
  private readonly cacheUsers = new Map<Cache, Set<Runnable>>();
  private readonly running = new Set<Runnable>();
  private started = false;
  private leading = false;
  private stopping = false;
  private elector?: Elector;
  /** Leader runnables start one after the other; a loss waits for a start in progress. */
  private leaderTransition: Promise<void> = Promise.resolve();
  /** The shutdown's stop of the writers, once begun: whether they all stopped within its deadline. */
  private writersStopped?: Promise<boolean>;

  /** The caches of this process's cluster. */
  private readonly home?: ClusterCaches;
  /** The caches of each target, while it is engaged. */
  private readonly targets: TargetCaches<T>;

  constructor(private readonly options: ManagerOptions) {
    if (options.cluster) this.home = new ClusterCaches(options.cluster, this.informerServices());
    this.targets = new TargetCaches<T>(this.informerServices());
  }

  /**
   * The caches of this process's cluster: a part asks them for what it reads (see
   * {@link ClusterCaches.informer}) before the manager starts, and lists the caches its
   * runnable reads in its `caches`; those asked for `everyReplica` start with the manager.
   */
  caches(): ClusterCaches {
    if (!this.home) throw new Error('manager: no cluster to cache');
    return this.home;
  }

  /**
   * Adds what a part does when a target joins: it asks the target's caches for what it reads
   * and registers its watches, undone when `signal` is aborted (see {@link EngageHandler}).
   * The manager starts those caches and stops them when the target leaves or at shutdown.
   * Before `start()` only.
   */
  onEngage(handler: EngageHandler<T>): void {
    if (this.started) throw new Error('manager: onEngage after start');
    this.targets.onEngage(handler);
  }

  /** {@link onEngage} for a value per target (its caches, say), looked up by the target's key while it is engaged. */
  perTarget<V>(make: (target: T, caches: ClusterCaches) => V): (targetKey: string) => V | undefined {
    if (this.started) throw new Error('manager: perTarget after start');
    return this.targets.perTarget(make);
  }

  /** A target joins (or its clients change): see {@link onEngage}. `budget` bounds what its caches hold together. */
  engage(target: T, budget?: CacheBudget): void {
    this.targets.engage(target, budget);
  }

  /** A target leaves: its handlers' signals are aborted and its caches stop. */
  disengage(targetKey: string): void {
    this.targets.disengage(targetKey);
  }

  /** The keys of the targets engaged now. */
  engagedTargets(): string[] {
    return this.targets.keys();
  }

  private informerServices(): InformerServices {
    return { ...this.options.informers, logger: this.options.logger, clock: this.options.clock };
  }

  /** Adds a runnable; runnables start in the order added and stop in reverse. Before `start()` only. */
  add(r: Runnable): void {
    if (this.started) throw new Error(`manager: ${r.name} added after start`);
    this.runnables.push(r);
  }

  isLeader(): boolean {
    return this.leading;
  }

  /**
   * Starts the always-on runnables (and their caches), then leader election, or the leader's
   * runnables at once without an elector. Resolves once the always-on runnables serve.
   */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.home?.freeze();
    const warm = this.home?.everyReplica() ?? [];
    // First, with no start of its own: the caches every replica reads, which readiness waits for.
    if (warm.length > 0) this.runnables.unshift({ name: 'caches every replica reads', caches: warm, start: () => undefined, stop: () => undefined });
    for (const r of this.runnables.filter((x) => !x.needLeaderElection)) await this.startOne(r);
    if (this.options.elector) {
      this.elector = this.options.elector({ onStartedLeading: () => this.startedLeading(), onStoppedLeading: () => this.stoppedLeading() });
      void this.elector.run();
    } else this.startedLeading();
  }

  /** Whether this replica can serve, and if not, why (for `/readyz`). */
  readiness(): { ready: boolean; reason?: string } {
    if (this.stopping) return { ready: false, reason: 'shutting down' };
    const always = this.runnables.filter((r) => !r.needLeaderElection);
    const notStarted = always.filter((r) => !this.running.has(r)).map((r) => r.name);
    if (notStarted.length) return { ready: false, reason: `starting: ${notStarted.join(', ')}` };
    const notSynced = [...new Set(always.flatMap((r) => r.caches ?? []))].filter((c) => !c.hasSynced()).map((c) => c.name);
    if (notSynced.length) return { ready: false, reason: `caches not synced: ${notSynced.join(', ')}` };
    return { ready: true };
  }

  /**
   * Shuts down gracefully: not Ready from the first moment, servers draining (see
   * {@link Runnable.drain}); the writers stop and leadership is handed back at once, so another
   * replica leads while this one still serves; after `drainMs` (the time endpoints take to move
   * elsewhere) the rest stops, newest first. `deadlineMs` bounds the writers' stop and, from the
   * end of the drain, the rest.
   */
  async stop(deadlineMs: number, drainMs = 0): Promise<void> {
    this.stopping = true;
    if (drainMs > 0) this.options.logger.info('shutting down: not Ready; serving on while clients move to other replicas', { drainSeconds: drainMs / 1000 });
    for (const r of this.runnables) if (this.running.has(r)) r.drain?.();
    const { clock } = this.options;
    const drained = new Promise<void>((res) => clock.setTimeout(res, drainMs));
    const deadline = clock.monotonicMs() + deadlineMs;
    await this.leaderTransition;
    this.writersStopped = this.stopLeaders(Math.max(0, deadline - clock.monotonicMs()));
    await this.writersStopped;
    // After the writers stopped: the next leader must not overlap with them.
    await this.elector?.release();
    await drained;
    const rest = clock.monotonicMs() + deadlineMs;
    for (const r of [...this.runnables].reverse()) if (this.running.has(r)) await this.stopOne(r, Math.max(0, rest - clock.monotonicMs()));
    // Last: the servers read the targets' caches until they stop.
    this.targets.close();
  }

  /**
   * {@link stop}, given up on past `drainMs + deadlineMs` (an elector's release that hangs, a
   * leader's start in progress that does not end): the process then exits all the same.
   */
  async shutdown(deadlineMs: number, drainMs = 0): Promise<void> {
    if (!(await within(this.options.clock, this.stop(deadlineMs, drainMs), drainMs + deadlineMs)))
      this.options.logger.warn('shutdown: not every part stopped within its deadline', { deadlineSeconds: (drainMs + deadlineMs) / 1000 });
  }

  private startedLeading(): void {
    if (this.stopping) return;
    this.leading = true;
    this.leaderTransition = this.leaderTransition.then(async () => {
      const leaders = this.runnables.filter((r) => r.needLeaderElection);
      for (const r of leaders) {
        if (!this.leading || this.stopping) return;
        await this.startOne(r).catch((err) => this.options.logger.error('could not start a leader runnable', { runnable: r.name, ...errorFields(err) }));
      }
      this.options.logger.info('leading: writers started', { runnables: leaders.map((r) => r.name) });
    });
  }

  private stoppedLeading(): void {
    this.leading = false;
    const stepDownAt = this.options.clock.monotonicMs() + this.options.stepDownDeadlineMs;
    this.leaderTransition = this.leaderTransition
      .then(() => this.stopLeaders(this.options.stepDownDeadlineMs))
      .then(async (inTime) => {
        // A loss during a shutdown: the shutdown stops the writers already, on its own longer
        // deadline. Past the step-down deadline another replica may lead, so a writer still at
        // work then (a call that hangs) must not outlive this process, shutdown or not.
        if (this.stopping && this.writersStopped) inTime = inTime && (await within(this.options.clock, this.writersStopped, stepDownAt - this.options.clock.monotonicMs()));
        this.options.logger.warn(inTime ? 'leadership lost: writers stopped' : 'leadership lost: the writers did not stop within the step-down deadline');
        if (!this.stopping || !inTime) this.options.onLostLeadership?.();
      });
  }

  /** Stops the leader's runnables within `deadlineMs`; resolves with whether every one stopped in time. */
  private async stopLeaders(deadlineMs: number): Promise<boolean> {
    const deadline = this.options.clock.monotonicMs() + deadlineMs;
    const leaders = this.runnables.filter((r) => r.needLeaderElection && this.running.has(r)).reverse();
    // All at once: each stops taking work at its first step, so no writer waits for another.
    const stopped = await Promise.all(leaders.map((r) => this.stopOne(r, Math.max(0, deadline - this.options.clock.monotonicMs()))));
    return stopped.every(Boolean);
  }

  private async startOne(r: Runnable): Promise<void> {
    for (const c of r.caches ?? []) {
      let users = this.cacheUsers.get(c);
      if (!users) {
        users = new Set();
        this.cacheUsers.set(c, users);
        c.start();
      }
      users.add(r);
    }
    await r.start();
    this.running.add(r);
  }

  /** Stops one runnable within `deadlineMs`; resolves with whether it stopped in time (a failure to stop counts as stopped). */
  private async stopOne(r: Runnable, deadlineMs: number): Promise<boolean> {
    this.running.delete(r);
    let inTime = true;
    try {
      inTime = await within(this.options.clock, Promise.resolve(r.stop(deadlineMs)), deadlineMs);
    } catch (err) {
      this.options.logger.warn('stopping a runnable failed', { runnable: r.name, ...errorFields(err) });
    }
    for (const c of r.caches ?? []) {
      const users = this.cacheUsers.get(c);
      users?.delete(r);
      if (users && users.size === 0) {
        this.cacheUsers.delete(c);
        c.stop();
      }
    }
    return inTime;
  }
}

/**
 * A controller as the manager runs it: a writer, so on the leader only, reading `caches` (the
 * informers of this cluster it watches; a target's caches come and go with the target, see
 * {@link Manager.onEngage}).
 */
export function leaderController(controller: Controller, caches: readonly Cache[]): Runnable {
  return { name: controller.name, needLeaderElection: true, caches, start: () => controller.start(), stop: (ms) => controller.stop(ms) };
}

/** Whether `p` settles within `ms` on `clock` (its rejection is thrown); the timer is cleared either way. */
async function within(clock: Clock, p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ClockTimer | undefined;
  try {
    return await Promise.race([p.then(() => true), new Promise<boolean>((res) => (timer = clock.setTimeout(() => res(false), Math.max(0, ms))))]);
  } finally {
    if (timer) clock.clearTimeout(timer);
  }
}
