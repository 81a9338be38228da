import type { V1Pod } from '@kubernetes/client-node';
import type { Clock } from '../provider/core/clock.js';
import type { ObjectCache } from '../provider/controller/object-cache.js';

/** A proxy being placed on a target: it uses that target before it is bound to its virtual node. */
export interface Placement {
  proxy: V1Pod;
  targetKey: string;
}

/** How long a placement still counts after the bind, at most, while the proxies cache catches up. */
const PLACED_GRACE_MS = 60_000;

/**
 * The proxies the binder is placing (copies made, delegate created or waited for) or has just
 * bound, with their target. One object that the binder writes and the follow reconciler reads
 * (it keeps their copies in that target, as it does for proxies bound there), so that neither
 * needs the other to be built first.
 */
export class BeingPlaced {
  /** By proxy UID: placements under way, and done ones until the proxies cache shows the bind. */
  private readonly placements = new Map<string, Placement & { boundAtMs?: number }>();

  constructor(private readonly options: { proxies: Pick<ObjectCache<V1Pod>, 'get'>; clock: Clock }) {}

  /** Every namespace's when `namespace` is undefined (the extender's topology, for a term with a namespaceSelector). */
  placing(namespace?: string): Placement[] {
    this.forgetBound();
    const out: Placement[] = [];
    for (const p of this.placements.values()) if (namespace === undefined || p.proxy.metadata?.namespace === namespace) out.push({ proxy: p.proxy, targetKey: p.targetKey });
    return out;
  }

  /** Proxies being placed on `targetKey` and not bound yet (their delegate may not exist yet). */
  placingOn(targetKey: string): V1Pod[] {
    this.forgetBound();
    return [...this.placements.values()].filter((p) => p.targetKey === targetKey && p.boundAtMs === undefined).map((p) => p.proxy);
  }

  /** How many placements are held: those under way, and bound ones until the proxies cache shows them (at most {@link PLACED_GRACE_MS}). */
  get held(): number {
    return this.placements.size;
  }

  /** The placement of the proxy `uid` begins. */
  begin(uid: string, placement: Placement): void {
    this.forgetBound();
    this.placements.set(uid, placement);
  }

  /** The proxy `uid` is bound: its placement counts until the proxies cache shows it. */
  bound(uid: string, placement: Placement): void {
    this.placements.set(uid, { ...placement, boundAtMs: this.options.clock.now() });
  }

  /** The placement of the proxy `uid` failed. */
  drop(uid: string): void {
    this.placements.delete(uid);
  }

  /**
   * Drops the bound placements that the proxies cache shows bound, or that were bound longer
   * than {@link PLACED_GRACE_MS} ago. Called on every read and every new placement, so that what
   * is held stays bounded by the binds of the last minute, whoever asks (each record holds a
   * whole proxy).
   */
  private forgetBound(): void {
    const now = this.options.clock.now();
    for (const [uid, p] of this.placements) {
      if (p.boundAtMs === undefined) continue;
      const cached = this.options.proxies.get(p.proxy.metadata!.name!, p.proxy.metadata!.namespace);
      if ((cached?.metadata?.uid === uid && cached.spec?.nodeName) || now - p.boundAtMs > PLACED_GRACE_MS) this.placements.delete(uid);
    }
  }
}
