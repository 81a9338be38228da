import { EventEmitter } from 'node:events';
import { CacheBudget } from '../controller/cache-budget.js';
import type { ClusterSummary } from '../model/types.js';
import type { TargetClient } from './target-client.js';

/** Health of a target as last observed by the targets reconciler. */
export interface TargetHealth {
  ready: boolean;
  reason: string;
  message: string;
  /** When `ready` last changed, ms since the epoch. */
  sinceMs: number;
  /**
   * When the target's outage (see `isOutage`) began: the first probe since it was last ready
   * that got no answer; undefined while it is ready or has not failed so. Not `sinceMs`, which
   * a target not ready for another reason first (refused credentials, say) set earlier.
   * failover-after counts from this. A probe answered with a refusal meanwhile (an apiserver
   * that restarts may serve no custom resources for a moment) does not start it again.
   */
  outageSinceMs?: number;
  /**
   * `outageSinceMs` on the clock's monotonic reading (`Clock.monotonicMs`): what failover-after
   * is measured on, so that a step of the wall clock during an outage (NTP, a resumed VM) moves
   * no failover.
   */
  outageSinceMonoMs?: number;
  /** When the target was last seen unreachable (its API did not answer), if ever, on the monotonic clock. */
  lastOutageMs?: number;
}

/**
 * The registry of target clusters: one client set per Target/ClusterTarget, replaced live when
 * its credentials change and removed when it is deleted. Controllers that work per target
 * (delegation, follow, services, the kubelet API) look targets up here and listen for
 * `added`/`removed` to start or stop their per-target watches, and for `probed` (the key of a
 * target just probed, whether or not it answered) to look at it again. A broken target never
 * blocks the others: each entry is independent.
 */
export class ClusterRegistry extends EventEmitter<{ added: [TargetClient]; removed: [TargetClient]; probed: [string] }> {
  private readonly clients = new Map<string, TargetClient>();
  private readonly healths = new Map<string, TargetHealth>();
  /** Virtual node name -> target key. */
  private readonly nodes = new Map<string, string>();
  private readonly summaries = new Map<string, { summary: ClusterSummary; readAtMs: number }>();
  private readonly budgets = new Map<string, CacheBudget>();

  /** `cacheBudgetBytes`: what each target's informers may hold together (see {@link cacheBudget}); unbounded without. */
  constructor(private readonly options: { cacheBudgetBytes?: number } = {}) {
    super();
  }

  /** Says that the target was just probed (its health and summary are fresh): emits `probed`. */
  probed(key: string): void {
    this.emit('probed', key);
  }

  /** Adds or replaces a target's clients. Emits `removed` for the old one, then `added`. Idempotent for the same fingerprint. */
  set(client: TargetClient, virtualNodeName: string): void {
    const old = this.clients.get(client.key);
    this.nodes.set(virtualNodeName, client.key);
    if (old && old.fingerprint === client.fingerprint) return;
    if (old) this.emit('removed', old);
    this.clients.set(client.key, client);
    this.emit('added', client);
  }

  /** Forgets a target entirely: clients, health and node mapping (the Target is gone). */
  delete(key: string): void {
    this.deleteClient(key);
    this.healths.delete(key);
    this.summaries.delete(key);
    this.budgets.delete(key);
    for (const [node, k] of this.nodes) if (k === key) this.nodes.delete(node);
  }

  /**
   * Drops a target's clients but keeps its health, so that a Target that stays broken is not
   * seen as new on every probe (one event per transition, a stable transition time).
   */
  deleteClient(key: string): void {
    const old = this.clients.get(key);
    this.clients.delete(key);
    if (old) this.emit('removed', old);
  }

  get(key: string): TargetClient | undefined {
    return this.clients.get(key);
  }

  /** The target behind a virtual node, if any. */
  byNodeName(nodeName: string): TargetClient | undefined {
    const key = this.nodes.get(nodeName);
    return key ? this.clients.get(key) : undefined;
  }

  nodeNameOf(key: string): string | undefined {
    for (const [node, k] of this.nodes) if (k === key) return node;
    return undefined;
  }

  list(): TargetClient[] {
    return [...this.clients.values()];
  }

  setHealth(key: string, health: TargetHealth): void {
    this.healths.set(key, health);
  }

  health(key: string): TargetHealth | undefined {
    return this.healths.get(key);
  }

  /** Records the target's ClusterSummary as just read (the scheduler extender judges from it). */
  setSummary(key: string, summary: ClusterSummary, readAtMs: number): void {
    this.summaries.set(key, { summary, readAtMs });
  }

  /**
   * The budget of what the target's informers may hold together (see `CacheBudget`), one per
   * target for as long as it exists: the informers of its successive clients share it (each
   * counts itself out when it stops).
   */
  cacheBudget(key: string): CacheBudget {
    let budget = this.budgets.get(key);
    if (!budget) this.budgets.set(key, (budget = new CacheBudget(this.options.cacheBudgetBytes ?? Infinity)));
    return budget;
  }

  /** Why the target's informers refuse to hold what its server has, while they do (see `CacheBudget.refusal`). */
  cacheBudgetRefusal(key: string): string | undefined {
    return this.budgets.get(key)?.refusal();
  }

  /** The target's last ClusterSummary and when it was read, if any. */
  summary(key: string): { summary: ClusterSummary; readAtMs: number } | undefined {
    return this.summaries.get(key);
  }
}
