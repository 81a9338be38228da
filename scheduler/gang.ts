import type { V1Pod } from '@kubernetes/client-node';
import type { Clock } from '../provider/core/clock.js';
import type { Gang } from '../provider/model/pod-group.js';

/** A member of a gang to place: its proxy, and the name of its delegate (the key of its reservation). */
export interface GangMember {
  uid: string;
  proxy: V1Pod;
  delegateName: string;
}

/** A domain of a real node label that a gang must stay in (its PodGroup's topology key, when that is no target label). */
export interface Domain {
  key: string;
  value: string;
}

/**
 * One target as a gang's plan sees it: `seats(domain)` starts a fresh simulation of its nodes
 * (what binds in flight and placements already take counted), whose function places one more
 * member on the node its scheduler most likely chooses and says whether one fitted.
 */
export interface GangTarget {
  key: string;
  name: string;
  seats(domain?: Domain): (member: GangMember) => boolean;
  /** The values of a real node label on this target's nodes (the domains a gang could use here). */
  domainValues(key: string): Iterable<string>;
}

/** Where a plan puts each member, and what it holds per target. */
export interface GangPlan {
  assigned: Map<string, string>;
  shares: Map<string, number>;
  domain?: Domain;
}

/** How many of `members`, in order, one target seats, stopping at `limit`. */
function seated(target: GangTarget, members: readonly GangMember[], limit: number, domain: Domain | undefined): GangMember[] {
  const seat = target.seats(domain);
  const out: GangMember[] = [];
  for (const m of members) {
    if (out.length >= limit) break;
    if (seat(m)) out.push(m);
  }
  return out;
}

/** Seats `need` members across `targets`, the roomiest first (fewer when they lack room). */
function spread(targets: readonly GangTarget[], members: readonly GangMember[], need: number, domain: Domain | undefined): { assigned: Map<string, string>; room: Map<string, number> } {
  const room = new Map(targets.map((t) => [t.key, seated(t, members, need, domain).length]));
  const order = [...targets].sort((a, b) => room.get(b.key)! - room.get(a.key)! || a.key.localeCompare(b.key));
  const assigned = new Map<string, string>();
  let left = [...members];
  for (const t of order) {
    if (assigned.size >= need) break;
    const took = seated(t, left, need - assigned.size, domain);
    for (const m of took) assigned.set(m.uid, t.key);
    const taken = new Set(took.map((m) => m.uid));
    left = left.filter((m) => !taken.has(m.uid));
  }
  return { assigned, room };
}

/** How many of `members` one target seats now, at most `limit`. */
export function seatCount(target: GangTarget, members: readonly GangMember[], limit: number): number {
  return seated(target, members, limit, undefined).length;
}

function sharesOf(assigned: ReadonlyMap<string, string>): Map<string, number> {
  const shares = new Map<string, number>();
  for (const key of assigned.values()) shares.set(key, (shares.get(key) ?? 0) + 1);
  return shares;
}

/**
 * Plans a gang: puts `need` of `members` (the first ones that fit, in order) on the targets at
 * once, or says why it cannot; the members beyond are placed one by one once the gang is. `oneTarget`: all in one target, the one with the most
 * room (its PodGroup's topology key is a target's label). `domainKey`: all on real nodes of one
 * value of that label, across targets, the domain with the most room first. Otherwise across
 * targets, the roomiest first, so a gang is split only when no target holds it. Pure but for the
 * targets' simulations.
 */
export function planGang(members: readonly GangMember[], need: number, targets: readonly GangTarget[], opts: { oneTarget?: boolean; domainKey?: string } = {}): GangPlan | { reason: string } {
  if (targets.length === 0) return { reason: 'no target can run its pods now' };
  if (opts.oneTarget) {
    const room = targets.map((t) => ({ t, took: seated(t, members, need, undefined) }));
    room.sort((a, b) => b.took.length - a.took.length || a.t.key.localeCompare(b.t.key));
    const best = room[0]!;
    if (best.took.length < need) return { reason: `no single target has room for ${need}: ${room.map((r) => `${r.t.name} for ${r.took.length}`).join(', ')}` };
    const assigned = new Map(best.took.map((m) => [m.uid, best.t.key]));
    return { assigned, shares: sharesOf(assigned) };
  }
  if (opts.domainKey !== undefined) {
    const key = opts.domainKey;
    const values = new Set<string>();
    for (const t of targets) for (const v of t.domainValues(key)) values.add(v);
    const tried: string[] = [];
    const plans = [...values].sort().map((value) => ({ value, ...spread(targets, members, need, { key, value }) }));
    plans.sort((a, b) => b.assigned.size - a.assigned.size || a.value.localeCompare(b.value));
    for (const p of plans) {
      if (p.assigned.size >= need) return { assigned: p.assigned, shares: sharesOf(p.assigned), domain: { key, value: p.value } };
      tried.push(`${key}=${p.value} for ${p.assigned.size}`);
    }
    return { reason: values.size === 0 ? `no node of any target has the label ${key}` : `no domain of ${key} has room for ${need}: ${tried.join(', ')}` };
  }
  const { assigned, room } = spread(targets, members, need, undefined);
  if (assigned.size < need) return { reason: `the targets together have room for ${assigned.size} of ${need}: ${targets.map((t) => `${t.name} for ${room.get(t.key)}`).join(', ')}` };
  return { assigned, shares: sharesOf(assigned) };
}

/** Members of plans remembered at most (those of failed plans are kept until planned again); the oldest are forgotten first. */
const MAX_MEMBERS = 10_000;

/** A plan adopted: its members' reservations are held until they are bound, or the plan ends. */
interface Held extends GangPlan {
  gang: Gang;
  members: Map<string, GangMember>;
  atMs: number;
  /** Members whose delegate was placed, waiting for the rest. */
  placed: Set<string>;
  /** Members bound: their reservations are the binder's now. */
  bound: Set<string>;
  failed?: string;
  waiters: Set<() => void>;
}

/** The targets a waiting gang holds (see {@link GangPlans.hold}). */
interface Hold {
  gang: Gang;
  targets: Set<string>;
  /** Its pods' priority: pods of higher priority are not held off. */
  priority: number;
  /** When it began holding, and its last try. */
  sinceMs: number;
  atMs: number;
}

export interface GangPlansOptions {
  clock: Clock;
  /** Takes a member's room in its target (`PlacementMemory.reserve`), and gives it back. */
  reserve(targetKey: string, member: GangMember): void;
  release(targetKey: string, member: GangMember): void;
  /**
   * How long a plan waits for all its members to be placed (default 30 s, above the delegate
   * placement timeout): then it fails, and its reservations are given back.
   */
  ttlMs?: number;
  /**
   * How long a waiting gang is counted waiting, and its hold kept, after its last try (default
   * 15 s: kube-scheduler tries a pod again within 10 s at most). A gang deleted, or no longer
   * tried, lets its room go then.
   */
  holdTtlMs?: number;
  /**
   * How long a waiting gang may hold targets at most (default 2 min): then it waits as any pod
   * does, so that a gang whose room never frees (the pods there run for good) does not keep
   * the targets from everyone else.
   */
  maxHoldMs?: number;
}

/**
 * The gangs being placed, by `namespace/name`: the extender adopts a plan when it filters a
 * gang's first member, and answers the others with their planned target; the binder waits, for
 * each member, until every member's delegate is placed ({@link GangPlans.placed}) before it
 * binds any, and a member that fails fails the plan, so that no proxy of a gang is bound unless
 * all are. In memory only (a restarted provider plans again).
 */
export class GangPlans {
  private readonly plans = new Map<string, Held>();
  private readonly byMember = new Map<string, Held>();
  private readonly ttlMs: number;
  private readonly holdTtlMs: number;
  private readonly maxHoldMs: number;
  /** Gangs refused a plan, by key: since when, and their last try. */
  private readonly waitingGangs = new Map<string, { sinceMs: number; lastMs: number; holdSinceMs?: number }>();
  private readonly holdsByGang = new Map<string, Hold>();
  /** What was last said of each gang on its PodGroup (see {@link news}). */
  private readonly said = new Map<string, string>();

  constructor(private readonly o: GangPlansOptions) {
    this.ttlMs = o.ttlMs ?? 30_000;
    this.holdTtlMs = o.holdTtlMs ?? 15_000;
    this.maxHoldMs = o.maxHoldMs ?? 120_000;
  }

  /**
   * A gang was refused a plan now: it waits (since its first refusal). Says whether it is the
   * gang that has waited longest of those still tried: only that one holds targets, so two
   * waiting gangs never hold what each other needs.
   */
  waited(key: string): boolean {
    const now = this.o.clock.now();
    const w = this.waitingGangs.get(key);
    // Not tried for a while (or a new gang of that name): a new wait.
    if (w && now - w.lastMs <= this.holdTtlMs) w.lastMs = now;
    else this.waitingGangs.set(key, { sinceMs: now, lastMs: now });
    while (this.waitingGangs.size > MAX_MEMBERS) this.waitingGangs.delete(this.waitingGangs.keys().next().value!);
    let oldest: string | undefined;
    let since = Infinity;
    // A gang that has held for its time already waits as any pod does, and lets the next one hold.
    const mayHold = (v: { lastMs: number; holdSinceMs?: number }) => now - v.lastMs <= this.holdTtlMs && (v.holdSinceMs === undefined || now - v.holdSinceMs <= this.maxHoldMs);
    for (const [k, v] of this.waitingGangs) if (mayHold(v) && v.sinceMs < since) [oldest, since] = [k, v.sinceMs];
    return oldest === key;
  }

  /**
   * The gang that waited longest holds `targetKeys` (where it would fit once room frees there):
   * until it is placed, no longer tried, or has held them for `maxHoldMs`, the filter keeps
   * every other pod of no higher priority off them ({@link heldFor}), so that smaller pods do
   * not take the room it needs as it frees. Renewed at each of its tries; false once it has held
   * for `maxHoldMs` in this wait (then it holds nothing).
   */
  hold(gang: Gang, targetKeys: readonly string[], priority: number): boolean {
    const key = `${gang.namespace}/${gang.name}`;
    const now = this.o.clock.now();
    // Counted from its first hold of this wait, whatever let it go since.
    const waiting = this.waitingGangs.get(key);
    const since = waiting ? (waiting.holdSinceMs ??= now) : now;
    if (now - since > this.maxHoldMs) {
      this.release(key);
      return false;
    }
    this.holdsByGang.set(key, { gang, targets: new Set(targetKeys), priority, sinceMs: since, atMs: now });
    return true;
  }

  /** The waiting gang that holds `targetKey` against a pod of `priority` not of it, if any. */
  heldFor(targetKey: string, gangKey: string | undefined, priority: number): { gang: Gang; sinceMs: number } | undefined {
    const now = this.o.clock.now();
    for (const [key, hold] of this.holdsByGang) {
      if (key === gangKey || !hold.targets.has(targetKey) || priority > hold.priority || now - hold.sinceMs > this.maxHoldMs) continue;
      return hold;
    }
    return undefined;
  }

  /** Gives back the targets a waiting gang holds, if any. */
  release(key: string): void {
    this.holdsByGang.delete(key);
  }

  /** Lets go the holds of gangs not tried for `holdTtlMs`, with no pod left (`live`), or held for `maxHoldMs`; called on every filter, before anything is judged. */
  expire(live: (namespace: string, name: string) => boolean): void {
    if (this.holdsByGang.size === 0) return;
    const now = this.o.clock.now();
    for (const [key, hold] of this.holdsByGang) {
      if (now - hold.atMs > this.holdTtlMs || now - hold.sinceMs > this.maxHoldMs || !live(hold.gang.namespace, hold.gang.name)) this.release(key);
    }
  }

  /**
   * Whether `words` are news for a gang (not what was last said of it): the filter says a gang's
   * plan or wait once on its PodGroup, not at each of its members' tries.
   */
  news(key: string, words: string): boolean {
    if (this.said.get(key) === words) return false;
    this.said.delete(key);
    this.said.set(key, words);
    while (this.said.size > MAX_MEMBERS) this.said.delete(this.said.keys().next().value!);
    return true;
  }

  /** How many gangs hold targets while they wait. */
  get holding(): number {
    return this.holdsByGang.size;
  }

  /** The plan under way of a gang, if any (one that outlived its time fails first). */
  current(key: string): Held | undefined {
    const held = this.plans.get(key);
    if (held && !held.failed && this.o.clock.now() - held.atMs > this.ttlMs) this.fail(held, `its members were not all placed within ${Math.round(this.ttlMs / 1000)} s`);
    return this.plans.get(key);
  }

  /** Where the plan under way puts a member, with its share of that target and the plan's domain. */
  assignmentOf(uid: string): { gang: Gang; targetKey: string; share: number; domain?: Domain } | undefined {
    const held = this.byMember.get(uid);
    const targetKey = held?.assigned.get(uid);
    if (!held || held.failed || targetKey === undefined) return undefined;
    return { gang: held.gang, targetKey, share: held.shares.get(targetKey) ?? 0, ...(held.domain ? { domain: held.domain } : {}) };
  }

  /** Adopts a plan for `gang`: every assigned member's room is taken now. */
  adopt(gang: Gang, plan: GangPlan, members: readonly GangMember[]): void {
    const key = `${gang.namespace}/${gang.name}`;
    const old = this.plans.get(key);
    if (old) this.fail(old, 'planned again');
    this.release(key);
    this.waitingGangs.delete(key);
    // The members of failed plans of this gang are this plan's, or none's now.
    for (const [uid, h] of this.byMember) if (h.failed && h.gang.namespace === gang.namespace && h.gang.name === gang.name) this.byMember.delete(uid);
    const byUid = new Map(members.filter((m) => plan.assigned.has(m.uid)).map((m) => [m.uid, m]));
    const held: Held = { ...plan, gang, members: byUid, atMs: this.o.clock.now(), placed: new Set(), bound: new Set(), waiters: new Set() };
    this.plans.set(key, held);
    for (const [uid, m] of byUid) {
      this.byMember.set(uid, held);
      this.o.reserve(plan.assigned.get(uid)!, m);
    }
  }

  /**
   * The member's delegate is placed: resolves once every member's is, rejects when the plan
   * fails or `timeoutMs` passes first. A pod no plan holds resolves at once.
   */
  async placed(uid: string, timeoutMs: number): Promise<void> {
    const held = this.byMember.get(uid);
    if (!held) return;
    held.placed.add(uid);
    this.wake(held);
    const deadline = this.o.clock.now() + timeoutMs;
    for (;;) {
      if (held.failed) throw new Error(`pod group ${held.gang.namespace}/${held.gang.name} was not placed: ${held.failed}`);
      if (held.placed.size >= held.members.size) return;
      const left = deadline - this.o.clock.now();
      if (left <= 0) {
        this.fail(held, `${held.members.size - held.placed.size} of its ${held.members.size} members were not placed in time`);
        continue;
      }
      await new Promise<void>((resolve) => {
        const timer = this.o.clock.setTimeout(resolve, Math.min(left, 1000));
        held.waiters.add(() => {
          this.o.clock.clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** The member was bound: its room is the binder's to keep now. When all are, the plan ends. */
  bound(uid: string): void {
    const held = this.byMember.get(uid);
    if (!held) return;
    held.bound.add(uid);
    this.byMember.delete(uid);
    if (held.bound.size >= held.members.size && this.plans.get(`${held.gang.namespace}/${held.gang.name}`) === held) this.plans.delete(`${held.gang.namespace}/${held.gang.name}`);
  }

  /** The member's bind failed (`reason`): so does the plan of its gang. */
  memberFailed(uid: string, reason: string): void {
    const held = this.byMember.get(uid);
    if (held) this.fail(held, reason);
  }

  /** Whether the pod is a member of a plan (under way, or failed and not planned again). */
  holds(uid: string): boolean {
    return this.byMember.has(uid);
  }

  /** How many plans are under way. */
  get size(): number {
    return this.plans.size;
  }

  private fail(held: Held, reason: string): void {
    if (held.failed) return;
    held.failed = reason;
    const key = `${held.gang.namespace}/${held.gang.name}`;
    if (this.plans.get(key) === held) this.plans.delete(key);
    // Its members stay known as the failed plan's, so that a bind of one that begins now fails
    // too, until a new plan of the gang adopts them (or its pod is forgotten).
    for (const [uid, m] of held.members) if (!held.bound.has(uid)) this.o.release(held.assigned.get(uid)!, m);
    while (this.byMember.size > MAX_MEMBERS) this.byMember.delete(this.byMember.keys().next().value!);
    this.wake(held);
  }

  private wake(held: Held): void {
    const waiters = [...held.waiters];
    held.waiters.clear();
    for (const w of waiters) w();
  }
}
