import { CoreV1Api, PatchStrategy, setHeaderOptions, type V1Namespace, type V1Pod } from '@kubernetes/client-node';
import type { ClusterRegistry, TargetHealth } from '../clusters/cluster-registry.js';
import type { TargetClient } from '../clusters/target-client.js';
import type { Clock } from '../core/clock.js';
import type { Metrics } from '../core/metrics.js';
import { classifyApiError, isNotFound } from '../core/errors.js';
import { forEachPage, TooManyItemsError } from '../controller/pager.js';
import { API_GROUP, API_VERSION, HAS_FINALIZER_LABEL, PARENT_CLUSTER_NAME_LABEL, TARGET_REACHABLE_CONDITION } from '../core/keys.js';
import { releaseOurFinalizers } from '../model/finalizers.js';
import { virtualNodeName } from '../model/names.js';
import { decideOutage, decideRecovered, fenceVerdict, isOutage, parentOf, type OutageDecision } from '../model/outage.js';
import type { EventSink } from '../core/event-sink.js';
import { ConditionWrites, deleteProxyNow, recordProxyEvent, type ConditionWritesPass } from '../writers/proxy-writes.js';
import type { ObjectCache } from '../controller/object-cache.js';

export interface OutageReconcilerOptions {
  sourceCore: CoreV1Api;
  /** Source pods that are proxies (labelled by the webhook). */
  proxies: ObjectCache<V1Pod>;
  /** The proxies bound to a node (the proxies cache's index); without it, every proxy is walked. */
  proxiesOn?: (nodeName: string) => V1Pod[];
  /** Source namespaces labelled `multicluster-scheduler=enabled` (their failover-after annotation). */
  namespaces: ObjectCache<V1Namespace>;
  /** Targets' clients and health, as the targets reconciler records them. */
  registry: Pick<ClusterRegistry, 'get' | 'health' | 'byNodeName' | 'nodeNameOf'>;
  sourceClusterName: string;
  events: EventSink;
  clock: Clock;
  /** Counts failovers and fenced delegates, by target key. */
  metrics?: Pick<Metrics, 'outageFailovers' | 'fencedDelegates'>;
}

type Result = { requeueAfterMs?: number } | void;

/**
 * Longest wait before a failover deadline is looked at again. Probes wake the key every 10 s
 * anyway; the cap keeps a far deadline from overflowing the timer (Node fires at once past 2^31 ms).
 */
const MAX_RECHECK_MS = 60_000;

/**
 * A fence pass stops past this many delegates: more pods than a Kubernetes cluster is built to
 * hold (150 000), so the target's server is not describing one. Each page costs this cluster up
 * to {@link FENCE_SINGLE_READS} reads and one list of the proxies, so the bound is on this
 * cluster's work too.
 */
export const MAX_FENCE_DELEGATES = 150_000;
/** A fence pass stops past this long, however few delegates: a server may answer its pages slowly. */
export const FENCE_PASS_DEADLINE_MS = 10 * 60_000;
/** After a pass stopped at a bound, the next one waits this long (probes wake the key every 10 s). */
export const FENCE_HOLD_OFF_MS = 5 * 60_000;

/**
 * What happens to proxies while their target is unreachable, and after. Key: the target's key
 * (`Target/<ns>/<name>` or `ClusterTarget/<name>`), woken by each probe of the target and by
 * changes of proxies that concern an outage.
 *
 * * **Say it.** While the target is unreachable (see `isOutage`), each of its proxies carries the
 *   condition `multicluster.admiralty.io/TargetReachable=False` and gets one Warning event; each
 *   is written once per transition (the condition is stable for an outage, so a level-based
 *   pass writes nothing the second time, and {@link ConditionWrites} covers a pass that starts
 *   before the cache shows the first one's writes).
 * * **Failover, opt-in.** A proxy whose `multicluster.admiralty.io/failover-after` (its own or
 *   its namespace's) has elapsed is deleted (UID precondition) and its finalizer released, so its
 *   controller recreates it and the scheduler places the new pod elsewhere (the virtual node is
 *   NotReady). A bare pod cannot be recreated: it stays, and its condition says so.
 * * **Fencing.** Once a target has been seen unreachable, no new delegate is created there until a
 *   fence pass has run: the pass lists this source's delegates there and deletes, with a UID
 *   precondition, those whose proxy is gone. So a delegate left behind by a failover never runs
 *   next to its replacement once the target is back. A pass also runs the first time a target is
 *   seen ready after start (a provider that restarted during an outage and missed it), without
 *   holding delegation back: outside an outage nothing can have failed over. A replica whose
 *   registry saw the target unreachable before its first pass (a standby that took over) holds
 *   it back until that pass has fenced. A pass is bounded ({@link MAX_FENCE_DELEGATES},
 *   {@link FENCE_PASS_DEADLINE_MS}): one that passes a bound stops, says so on the Target
 *   (Warning `FenceStopped`), leaves the gate as it was, and the next waits
 *   {@link FENCE_HOLD_OFF_MS}.
 *
 * Once the target is back, the proxies that carried False get True.
 */
export class OutageReconciler {
  /** Targets seen unreachable and not fenced since: no delegate may be created there. */
  private readonly owed = new Set<string>();
  /** Targets fenced at least once since start. */
  private readonly fencedOnce = new Set<string>();
  /** Conditions written that the proxies cache may not show yet (no second write, no repeated event). */
  private readonly writes = new ConditionWrites();
  /** Targets whose last fence pass stopped at a bound: no pass before this (monotonic ms). */
  private readonly fenceHeldOff = new Map<string, number>();

  constructor(private readonly o: OutageReconcilerOptions) {}

  /**
   * Key mapper for proxies: the key of the proxy's target when that target is in an outage or
   * the proxy still says it is (so healthy times cost no reconcile per proxy change).
   */
  static keysOfProxy(registry: Pick<ClusterRegistry, 'byNodeName' | 'health'>, proxy: V1Pod): string[] {
    const nodeName = proxy.spec?.nodeName;
    const target = nodeName ? registry.byNodeName(nodeName) : undefined;
    if (!target) return [];
    const marked = proxy.status?.conditions?.some((c) => c.type === TARGET_REACHABLE_CONDITION && c.status === 'False');
    return marked || isOutage(registry.health(target.key)) ? [target.key] : [];
  }

  /**
   * Whether delegates may be created in this target now: false from when the target is seen
   * unreachable until a fence pass has run. Read by delegation and the extender's bind.
   *
   * An outage the registry saw before this replica's first pass counts too: the registry
   * probes on every replica, but only the leader's passes fence, so a standby that takes over
   * after an outage (in which the old leader may have failed proxies over) owes a fence it
   * never recorded.
   */
  mayCreateDelegates(targetKey: string): boolean {
    if (this.owed.has(targetKey)) return false;
    return this.fencedOnce.has(targetKey) || this.o.registry.health(targetKey)?.lastOutageMs === undefined;
  }

  async reconcile(key: string): Promise<Result> {
    const target = this.o.registry.get(key);
    const health = this.o.registry.health(key);
    if (!target || !health) {
      // Gone, or not loaded: fence again when it (re)appears (an owed fence stays owed).
      this.fencedOnce.delete(key);
      this.writes.forget(key);
      this.fenceHeldOff.delete(key);
      return;
    }
    const nodeName = this.o.registry.nodeNameOf(key) ?? virtualNodeName(target.ref);
    const proxies = this.o.proxiesOn?.(nodeName) ?? this.o.proxies.list().filter((p) => p.spec?.nodeName === nodeName);
    const now = this.o.clock.now();
    if (isOutage(health)) {
      this.owed.add(key);
      let recheckAtMs: number | undefined;
      const pass = this.writes.begin(key);
      try {
        await this.each(proxies, `proxies on ${target.displayName}`, async (proxy) => {
          const decision = decideOutage({
            proxy,
            namespace: this.o.namespaces.get(proxy.metadata!.namespace!),
            targetName: target.displayName,
            unreachableSinceMs: health.outageSinceMs ?? health.sinceMs,
            unreachableForMs: unreachableFor(health, now, this.o.clock.monotonicMs()),
            nowMs: now,
          });
          if (decision.recheckAtMs !== undefined) recheckAtMs = Math.min(recheckAtMs ?? Infinity, decision.recheckAtMs);
          await this.apply(proxy, decision, key, pass);
        });
      } finally {
        pass.end();
      }
      return recheckAtMs === undefined ? undefined : { requeueAfterMs: Math.min(MAX_RECHECK_MS, Math.max(0, recheckAtMs - now)) };
    }
    if (!health.ready) return; // a configuration problem, not an outage: the Target's status says it
    if (this.owed.has(key) || !this.fencedOnce.has(key)) {
      const heldOffMs = (this.fenceHeldOff.get(key) ?? -Infinity) - this.o.clock.monotonicMs();
      if (heldOffMs > 0) return { requeueAfterMs: heldOffMs };
      await this.fence(target);
      this.owed.delete(key);
      this.fencedOnce.add(key);
    }
    const pass = this.writes.begin(key);
    try {
      await this.each(proxies, `proxies on ${target.displayName}`, (proxy) => this.apply(proxy, decideRecovered(proxy, target.displayName, now), key, pass));
    } finally {
      pass.end();
    }
  }

  /**
   * Runs `fn` on every item, then throws the first failure (one bad proxy does not stall the
   * others); a fence pass past its deadline stops at once.
   */
  private async each<T>(items: T[], what: string, fn: (item: T) => Promise<void>): Promise<void> {
    const failures: unknown[] = [];
    for (const item of items) {
      try {
        await fn(item);
      } catch (err) {
        if (err instanceof FenceStoppedError) throw err;
        failures.push(err);
      }
    }
    if (failures.length > 0) throw new Error(`${failures.length} of ${items.length} ${what} failed`, { cause: failures[0] });
  }

  private async apply(proxy: V1Pod, decision: OutageDecision, targetKey: string, pass: ConditionWritesPass): Promise<void> {
    if (decision.failover) {
      const first = !proxy.metadata?.deletionTimestamp;
      // Said before the delete: once the proxy is gone, an event about it is hard to find.
      if (decision.event && first) recordProxyEvent(this.o.events, proxy, decision.event);
      await this.failover(proxy);
      if (first) this.o.metrics?.outageFailovers.inc({ target: targetKey });
      return;
    }
    if (decision.condition) await pass.write(this.o.sourceCore, this.o.events, proxy, decision.condition, decision.event);
  }

  /**
   * Deletes the proxy (UID precondition, no grace: no kubelet will confirm it) and releases our
   * finalizers, which delegation cannot do while the delegate is out of reach; the release then
   * removes the pod. Idempotent: a proxy deleting already with no grace (an earlier pass whose
   * release failed) only has its finalizers released. One deleting with a grace period (deleted
   * by a user or its controller meanwhile) is deleted again with none: released alone, it would
   * stay Terminating until the target is back, and a StatefulSet cannot recreate a pod whose
   * name is still taken.
   */
  private async failover(proxy: V1Pod): Promise<void> {
    const name = proxy.metadata!.name!;
    const namespace = proxy.metadata!.namespace!;
    const uid = proxy.metadata!.uid!;
    // 404 or 409 (gone already, or another pod took the name): nothing of ours to release.
    if (proxy.metadata?.deletionGracePeriodSeconds !== 0 && !(await deleteProxyNow(this.o.sourceCore, proxy, 'for failover'))) return;
    // A conditional write: this pod (UID), with the finalizers we saw.
    const { patch } = releaseOurFinalizers(proxy, { uid });
    if (!patch) return;
    try {
      await this.o.sourceCore.patchNamespacedPod({ name, namespace, body: patch }, setHeaderOptions('Content-Type', PatchStrategy.JsonPatch));
    } catch (err) {
      if (isNotFound(err)) return;
      throw new Error(`releasing the finalizer of proxy ${namespace}/${name} for failover`, { cause: err });
    }
  }

  /**
   * Deletes this source's delegates in the target whose proxy is gone (or is another pod now).
   * Lists the target directly, a page at a time (its informer cache may still hold what it saw
   * before the outage; a page's delegates are dealt with before the next is asked for). Each
   * proxy is confirmed gone with the source itself before its delegate is deleted (see
   * {@link LiveProxies}). Of a Target's namespace, only delegates and parents there are looked at,
   * whatever its server answers. Past {@link MAX_FENCE_DELEGATES} or
   * {@link FENCE_PASS_DEADLINE_MS}, the pass stops (see the class).
   */
  private async fence(target: TargetClient): Promise<void> {
    const labelSelector = `${PARENT_CLUSTER_NAME_LABEL}=${this.o.sourceClusterName}`;
    const ns = target.ref.kind === 'Target' ? target.ref.namespace : undefined;
    const deleted: string[] = [];
    const deadline = this.o.clock.monotonicMs() + FENCE_PASS_DEADLINE_MS;
    const checkDeadline = () => {
      if (this.o.clock.monotonicMs() > deadline) throw new FenceStoppedError(`the pass did not end within ${FENCE_PASS_DEADLINE_MS / 60_000} min`);
    };
    const fencePage = (delegates: V1Pod[]) => {
      // One per page: a list of the proxies taken after the page was, shows the proxy of every
      // delegate on it (a proxy is made before its delegate) that has not gone since.
      const live = new LiveProxies(this.o.sourceCore, this.o.proxies, ns);
      return this.each(delegates, `delegates in ${target.displayName}`, async (d) => {
        // A server that answers each delete slowly keeps a page going no longer either.
        checkDeadline();
        // First without reading the source: another source's pods, or ones deleting, are left alone.
        if (fenceVerdict(d, this.o.sourceClusterName, undefined) !== 'delete') return;
        const parent = parentOf(d);
        if (ns !== undefined && (d.metadata?.namespace !== ns || parent.namespace !== ns)) return;
        const verdict = fenceVerdict(d, this.o.sourceClusterName, await live.uidOf(parent.name!, parent.namespace!, parent.uid));
        if (verdict !== 'delete') return;
        try {
          await target.core.deleteNamespacedPod({ name: d.metadata!.name!, namespace: d.metadata!.namespace!, body: { preconditions: { uid: d.metadata!.uid } } });
          deleted.push(`${d.metadata!.namespace}/${d.metadata!.name}`);
          this.o.metrics?.fencedDelegates.inc({ target: target.key });
        } catch (err) {
          if (isNotFound(err) || classifyApiError(err) === 'Conflict') return;
          throw new Error(`deleting orphaned delegate ${d.metadata!.namespace}/${d.metadata!.name} in ${target.displayName}`, { cause: err });
        }
      });
    };
    const list = (limit: number, _continue: string | undefined) =>
      ns ? target.core.listNamespacedPod({ namespace: ns, labelSelector, limit, _continue }) : target.core.listPodForAllNamespaces({ labelSelector, limit, _continue });
    try {
      await forEachPage(
        async (limit, from) => {
          checkDeadline();
          try {
            return await list(limit, from);
          } catch (err) {
            throw Object.assign(new Error(`listing delegates in ${target.displayName} to fence it`, { cause: err }), { type: (err as { type?: unknown })?.type });
          }
        },
        fencePage,
        { what: `delegates of this source in ${target.displayName}`, maxItems: MAX_FENCE_DELEGATES },
      );
    } catch (err) {
      if (!(err instanceof FenceStoppedError || err instanceof TooManyItemsError)) throw err;
      // Not a failure to retry at once: the target's server keeps offering what no cluster holds.
      this.fenceHeldOff.set(target.key, this.o.clock.monotonicMs() + FENCE_HOLD_OFF_MS);
      const message = `fencing ${target.displayName} stopped: ${err.message} (at most ${MAX_FENCE_DELEGATES} delegates, more pods than a cluster holds, and ${FENCE_PASS_DEADLINE_MS / 60_000} min); ${this.owed.has(target.key) ? 'no new delegate goes there until a pass ends' : 'delegation there goes on'}, and the next pass starts in ${FENCE_HOLD_OFF_MS / 60_000} min`;
      this.targetEvent(target, 'Warning', 'FenceStopped', message);
      throw new Error(message, { cause: err });
    } finally {
      if (deleted.length > 0) {
        this.targetEvent(
          target,
          'Normal',
          'DelegatesFenced',
          `deleted ${deleted.length} delegate(s) in ${target.displayName} whose proxy is gone (failed over or deleted while it was unreachable): ${deleted.slice(0, 20).join(', ')}${deleted.length > 20 ? ', …' : ''}`,
        );
      }
    }
  }

  private targetEvent(target: TargetClient, type: 'Normal' | 'Warning', reason: string, message: string): void {
    const ref = target.ref;
    this.o.events.record(
      { kind: ref.kind, apiVersion: `${API_GROUP}/${API_VERSION}`, metadata: { name: ref.name, namespace: ref.kind === 'Target' ? ref.namespace : undefined } },
      type,
      reason,
      message,
    );
  }
}

/** A fence pass past its deadline (see {@link FENCE_PASS_DEADLINE_MS}). */
class FenceStoppedError extends Error {
  override readonly name = 'FenceStoppedError';
}

/** Parents read one by one for a page of a fence pass; past these, one list of the source's proxies answers for the rest. */
const FENCE_SINGLE_READS = 20;

/**
 * The pods now at delegates' parent names in the source, for one page of a fence pass: the
 * proxies cache when it shows the parent with the UID the delegate names, else the source
 * itself. The first {@link FENCE_SINGLE_READS} are single reads; after them, one list of the
 * source's proxies (in the Target's namespace, or all) answers for the page. So a page costs
 * the source a bounded number of calls however many orphans (or fakes: the target's server says
 * which delegates there are) it holds.
 */
class LiveProxies {
  private reads = 0;
  private listed?: Promise<Map<string, string | undefined>>;

  constructor(
    private readonly sourceCore: CoreV1Api,
    private readonly proxies: ObjectCache<V1Pod>,
    private readonly namespace: string | undefined,
  ) {}

  /** UID of the pod now at `namespace/name` in the source, undefined if there is none. */
  async uidOf(name: string, namespace: string, expectedUid: string | undefined): Promise<string | undefined> {
    const cached = this.proxies.get(name, namespace);
    if (cached?.metadata?.uid === expectedUid && expectedUid !== undefined) return expectedUid;
    if (this.reads < FENCE_SINGLE_READS) {
      this.reads++;
      try {
        return (await this.sourceCore.readNamespacedPod({ name, namespace })).metadata?.uid;
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw new Error(`reading proxy ${namespace}/${name}`, { cause: err });
      }
    }
    this.listed ??= this.list();
    return (await this.listed).get(`${namespace}/${name}`);
  }

  private async list(): Promise<Map<string, string | undefined>> {
    const uids = new Map<string, string | undefined>();
    const labelSelector = `${HAS_FINALIZER_LABEL}=true`;
    const ns = this.namespace;
    try {
      await forEachPage(
        (limit, _continue) =>
          ns ? this.sourceCore.listNamespacedPod({ namespace: ns, labelSelector, limit, _continue }) : this.sourceCore.listPodForAllNamespaces({ labelSelector, limit, _continue }),
        (pods) => {
          for (const p of pods) uids.set(`${p.metadata?.namespace}/${p.metadata?.name}`, p.metadata?.uid);
        },
        { what: 'proxies' },
      );
    } catch (err) {
      throw new Error(`listing proxies${ns ? ` in ${ns}` : ''} to fence`, { cause: err });
    }
    return uids;
  }
}

/** How long the target has been unreachable: on the monotonic clock, or the wall clock for a health that has no monotonic start. */
function unreachableFor(health: TargetHealth, nowMs: number, monoNowMs: number): number {
  if (health.outageSinceMonoMs !== undefined) return monoNowMs - health.outageSinceMonoMs;
  return nowMs - (health.outageSinceMs ?? health.sinceMs);
}
