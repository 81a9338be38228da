import type { CoreV1Api, CoreV1Event, V1Namespace, V1Pod } from '@kubernetes/client-node';
import type { ClusterRegistry } from '../provider/clusters/cluster-registry.js';
import type { TargetClient } from '../provider/clusters/target-client.js';
import type { Clock } from '../provider/core/clock.js';
import { classifyApiError, isNotFound, NotDelegatedError, statusMessage } from '../provider/core/errors.js';
import { errorFields, type Logger } from '../provider/core/logger.js';
import { sanitizeRemoteText } from '../provider/core/redact.js';
import { autoscalerVerdict, NOT_TRIGGER_SCALE_UP, TRIGGERED_SCALE_UP } from '../provider/model/autoscaler.js';
import { delegateNameOf, isOurDelegate } from '../provider/model/delegate-pod.js';
import { podHostPorts } from '../provider/model/host-ports.js';
import type { CopyNames } from '../provider/model/pod-references.js';
import { addInto, heldOnNode, ONE_POD, podRequests, type ResourceAmounts } from '../provider/model/resources.js';
import type { RuntimeClasses } from './target-classes.js';
import { SOURCE_NOT_AUTHORIZED } from '../provider/model/refusal.js';
import { checkTenancy } from '../provider/model/tenancy.js';
import type { ObjectCache } from '../provider/controller/object-cache.js';
import { DelegateCreateError, DelegateWriter, type DelegateCreation } from '../provider/writers/delegate-writer.js';
import type { DelegateGang } from '../provider/model/delegate-pod.js';
import { podGroupNameOf } from '../provider/model/pod-group.js';
import type { GangPlans } from './gang.js';
import { TargetPodGroups } from './target-pod-groups.js';
import { asksClaimTemplates, claimCreationFailure, nominatedFor, preemptingFor, unschedulableVerdict } from './delegate-verdict.js';
import type { EventRecorder } from '../provider/core/events.js';
import { schedulingPod } from './fit.js';
import { BeingPlaced, type Placement } from './being-placed.js';
import type { PlacementMemory } from './placement-memory.js';
import type { RefusalLog } from './refusal-log.js';

/** `ExtenderBindingArgs` of k8s.io/kube-scheduler/extender/v1. */
export interface ExtenderBindingArgs {
  PodName: string;
  PodNamespace: string;
  PodUID: string;
  Node: string;
}

/** `ExtenderBindingResult`: an empty `Error` means bound. */
export interface ExtenderBindingResult {
  Error: string;
}

export type { Placement } from './being-placed.js';

export interface BinderOptions {
  sourceCore: CoreV1Api;
  registry: Pick<ClusterRegistry, 'byNodeName' | 'health'>;
  /** Proxies of the source (a live read is made when the cache does not have the pod yet). */
  proxies: ObjectCache<V1Pod>;
  /** Source namespaces labelled `multicluster-scheduler=enabled`. */
  namespaces: ObjectCache<V1Namespace>;
  /** Where the binder records what it is placing, shared with whoever reads it (follow); its own when absent. */
  beingPlaced?: BeingPlaced;
  /** Per-target cache of our delegates, when its informer runs (else the binder reads the target). */
  delegates: (targetKey: string) => (ObjectCache<V1Pod> & { hasSynced(): boolean }) | undefined;
  /**
   * Per-target cache of pod events, where cluster-autoscaler's word on a delegate shows, and the
   * target's resource-claim controller's (see `claimCreationFailure`).
   */
  targetEvents?: (targetKey: string) => ObjectCache<CoreV1Event> | undefined;
  /**
   * Whether a target has `spec.placement.burstCapacity`: there, an Unschedulable delegate waits
   * for the target's cluster-autoscaler instead of being refused at once (see {@link Binder}).
   */
  bursts?: (targetKey: string) => boolean;
  /**
   * A target's RuntimeClasses, when its summary publishes them: a bind in flight takes the
   * overhead the target's class sets, not the source's.
   */
  runtimeClasses?: (targetKey: string) => RuntimeClasses | undefined;
  /**
   * Where the Event that says a target preempts for a proxy goes (`PreemptingInTarget`, on the
   * proxy), and how many pods of lower priority than the delegate the target's summary counts on
   * the node it nominated (`lowerPriorityPods`: an upper bound on its victims, which only its
   * scheduler knows; undefined when the summary does not say).
   */
  events?: Pick<EventRecorder, 'record'>;
  lowerPriorityPods?: (targetKey: string, node: string, proxy: V1Pod) => number | undefined;
  /** Copies the ConfigMaps and Secrets the delegate uses into its target first; the delegate names the copies so. */
  follow?: { ensureCopies(proxy: V1Pod, target: TargetClient): Promise<CopyNames> };
  memory: PlacementMemory;
  /**
   * Where each bind a target did not take is counted for `kubectl admiralty status`, by the
   * reason's name: `DelegateNotPlaced` (its scheduler did not place the delegate), the
   * `Delegated` condition's reason when the target's apiserver refused it (`CopyRefused`,
   * `SourceNotAuthorized`, `TargetNamespaceMissing`, ...), `TenancyForbids`, `NameTaken`,
   * `CreateFailed`, `BindFailed` for a failure after the delegate was placed (the proxy's
   * Binding), and `GangNotPlaced` for a gang's member whose group was not placed whole. A bind turned down before anything is tried (the target not ready or fenced) is not
   * counted: the filter counts the target's unreadiness.
   */
  refusals?: Pick<RefusalLog, 'record'>;
  /**
   * Where a refusal by the target's authorizer (`SourceNotAuthorized`) goes instead of `memory`:
   * it keeps the pods of that namespace off the target until the target's next probe, which
   * offers it again as soon as a Source or ClusterSource grants the rights (see
   * `TargetAuthorization.refused`). When it does not follow the target, `memory` is used.
   */
  authorization?: { refused(targetKey: string, namespace: string, reason: string): boolean };
  /** The proxy scheduler's name: only pods with this `schedulerName` are bound. */
  schedulerName: string;
  sourceClusterName: string;
  clock: Clock;
  logger: Logger;
  /**
   * Whether delegates may be created in a target now (the outage reconciler's fencing gate: a
   * target back from an outage first loses the delegates of proxies that failed over). Default: always.
   */
  mayCreateDelegates?: (targetKey: string) => boolean;
  /**
   * The gangs being placed, shared with the extender's filter: a member's delegate joins its
   * target's PodGroup, and its proxy is bound only once every member's delegate is placed.
   */
  gangs?: GangPlans;
  /** How long the target's scheduler has to place the delegate (default 20 s, under kube-scheduler's extender httpTimeout). */
  placeTimeoutMs?: number;
  /**
   * How often the delegate is looked at while waiting, at the latest (default 500 ms in the
   * cache, 10x that with live reads): a bind is woken at once by {@link Binder.delegateChanged},
   * so this only bounds the wait when no change is reported.
   */
  pollMs?: number;
}

/** A target would not (or could not) take the pod: kube-scheduler is told, and the target is remembered as refusing. */
class Refused extends Error {
  /** The reason's name, as {@link RefusalLog} counts it. */
  constructor(
    readonly code: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** A gang's member not bound because its group was not placed whole: no refusal of the target. */
class GangNotPlaced extends Error {}

/**
 * The extender's `bind` verb: binds a proxy to a virtual node only once the target behind that
 * node has really placed the proxy's delegate.
 *
 * kube-scheduler calls `bind` from its binding goroutines (one per pod, concurrently), after the
 * one-pod-at-a-time scheduling cycle has chosen the node, so the wait happens here and never
 * holds up the placement of other pods. In order:
 *
 * 1. the proxy is read and checked (same UID, not bound elsewhere, its tenancy allows the target);
 * 2. the pod's room in the target is reserved (`PlacementMemory.reserve`) until the bind ends,
 *    so the filter does not offer it to the pods kube-scheduler places meanwhile; then the
 *    ConfigMaps and Secrets it uses are copied, and its delegate is created in the target
 *    (the name is deterministic, so the delegation reconciler adopts it once the proxy is bound);
 *    when the target's apiserver refuses one of these writes, the proxy's `Delegated=False`
 *    condition says why in the words of fallback mode (see `refusalOf`: `SourceNotAuthorized`
 *    names the Source the target lacks), and so does the error;
 * 3. we wait until the target's scheduler sets the delegate's `nodeName`, or nominates the node
 *    it waits to bind the delegate to ({@link nominatedFor}: volumes being bound, or its victims
 *    of lower priority leaving, when the target preempts for it: an Event on the proxy says so,
 *    see `preemptingFor`); if it reports the
 *    delegate Unschedulable, or does not decide within `placeTimeoutMs`, or the create fails, or
 *    the target cannot make the delegate's ResourceClaims ({@link claimCreationFailure}), the
 *    delegate is deleted, the target is remembered as refusing this pod (the extender's filter
 *    then keeps the pod off it for a while; a refusal by the target's authorizer keeps the pod's
 *    namespace off it until its next probe instead, see `authorization`) and an error goes back, so kube-scheduler tries again
 *    and picks another virtual node. In a target with burst capacity, an Unschedulable delegate
 *    waits for the target's cluster-autoscaler instead, within the same time: `TriggeredScaleUp`
 *    on it binds the proxy with the delegate still pending (it runs once the new node is Ready;
 *    re-placement watches it from then on), `NotTriggerScaleUp` refuses the target;
 * 4. the proxy is bound (a Binding in the source); if that fails (the proxy is gone or was bound
 *    meanwhile) the delegate is deleted.
 *
 * Never throws: every failure is an `ExtenderBindingResult.Error` that names the target and why,
 * which kube-scheduler puts in the pod's FailedScheduling event.
 */
export class Binder {
  private readonly inflight = new Map<string, Promise<ExtenderBindingResult>>();
  /** Placements under way, and done ones until the proxies cache shows the bind. */
  private readonly beingPlaced: BeingPlaced;
  private readonly placeTimeoutMs: number;
  private readonly pollMs: number;
  /** Binds waiting for a delegate to change, by {@link waitKey}. */
  private readonly waiting = new Map<string, Set<() => void>>();
  /** Creates the delegates and their copies, as the delegation reconciler does. */
  private readonly writer: DelegateWriter;
  /** The PodGroups gangs' delegates form in their targets. */
  private readonly targetPodGroups: TargetPodGroups;

  constructor(private readonly o: BinderOptions) {
    this.writer = new DelegateWriter(o);
    this.beingPlaced = o.beingPlaced ?? new BeingPlaced(o);
    this.targetPodGroups = new TargetPodGroups({ sourceClusterName: o.sourceClusterName, clock: o.clock, logger: o.logger });
    this.placeTimeoutMs = o.placeTimeoutMs ?? 20_000;
    this.pollMs = o.pollMs ?? 500;
  }

  /**
   * Wakes the binds waiting for this delegate. The wiring calls it for every change the
   * target's delegates informer sees, so a bind goes on as soon as the target's scheduler has
   * decided rather than at its next look (polling every 100 ms cost each pod 50 ms on average
   * and, with a thousand binds waiting, ten thousand wake-ups a second). Cheap when nobody waits.
   */
  delegateChanged(targetKey: string, delegate: V1Pod): void {
    const key = waitKey(targetKey, delegate.metadata?.namespace ?? '', delegate.metadata?.name ?? '');
    const wakers = this.waiting.get(key);
    if (!wakers) return;
    this.waiting.delete(key);
    for (const wake of wakers) wake();
  }

  /** One bind call; a repeated call for the same pod and node joins the one in flight. */
  bind(args: ExtenderBindingArgs): Promise<ExtenderBindingResult> {
    const key = `${args.PodUID}/${args.Node}`;
    let p = this.inflight.get(key);
    if (!p) {
      p = this.place(args)
        .then(() => ({ Error: '' }))
        .catch((err: unknown) => ({ Error: (err as Error).message }))
        .finally(() => this.inflight.delete(key));
      this.inflight.set(key, p);
    }
    return p;
  }

  /**
   * The proxies of a namespace that are being placed (copies made, delegate created or waited
   * for) or were just bound, with their target: the follow reconciler keeps their copies in
   * that target, as it does for proxies bound there. Every namespace's when `namespace` is
   * undefined (the extender's topology, for a term with a namespaceSelector).
   */
  placing(namespace?: string): Placement[] {
    return this.beingPlaced.placing(namespace);
  }

  /** Proxies being placed on `targetKey` and not bound yet (their delegate may not exist yet). */
  placingOn(targetKey: string): V1Pod[] {
    return this.beingPlaced.placingOn(targetKey);
  }

  /** How many placements are held: those under way, and bound ones until the proxies cache shows them (see {@link BeingPlaced}). */
  get held(): number {
    return this.beingPlaced.held;
  }

  private async place(args: ExtenderBindingArgs): Promise<void> {
    const { PodNamespace: namespace, PodName: name, Node: node } = args;
    const proxy = await this.readProxy(namespace, name, args.PodUID);
    // The extender's port is reachable by more than kube-scheduler: bind only what the proxy
    // scheduler may place (its own pods, proxies allowed on the target: checked below).
    if (proxy.spec?.schedulerName !== this.o.schedulerName) {
      throw new Error(`the admiralty extender binds only pods of scheduler ${this.o.schedulerName}, not ${namespace}/${name} (scheduler ${proxy.spec?.schedulerName ?? 'default-scheduler'})`);
    }
    if (proxy.spec?.nodeName) {
      if (proxy.spec.nodeName === node) return;
      throw new Error(`pod ${namespace}/${name} is already bound to ${proxy.spec.nodeName}`);
    }
    const target = this.o.registry.byNodeName(node);
    if (!target) throw new Error(`node ${node} is not a virtual node of a known target: the admiralty extender binds proxies to virtual nodes only`);
    const health = this.o.registry.health(target.key);
    if (health && !health.ready) throw new Error(`target ${target.displayName} is not ready: ${health.reason}`);
    if (this.o.mayCreateDelegates && !this.o.mayCreateDelegates(target.key)) throw new Error(`target ${target.displayName} is being fenced: delegates left there by failed-over proxies go first`);
    let reserved: { namespace: string; name: string } | undefined;
    try {
      const verdict = checkTenancy(proxy, this.o.namespaces.get(namespace), target.ref);
      if (!verdict.allowed) throw new Refused('TenancyForbids', `${target.displayName} may not run this pod: ${verdict.message}`);
      // The checks of buildDelegatePod, before anything is written; the delegate is built once,
      // with its copies' names.
      const delegateName = delegateNameOf(proxy, { sourceClusterName: this.o.sourceClusterName });
      this.beingPlaced.begin(args.PodUID, { proxy, targetKey: target.key });
      // kube-scheduler filters the next pods while this bind waits for the target's scheduler:
      // they must not be offered the room this pod is taking.
      reserved = { namespace, name: delegateName };
      // The delegate's containers, and so its ports, are the proxy's.
      this.o.memory.reserve(target.key, proxy, delegateRequests(proxy, this.o.runtimeClasses?.(target.key)), this.o.clock.now(), reserved, podHostPorts(proxy.spec));
      const startMs = this.o.clock.now();
      const gang = await this.gangOf(proxy, target);
      const delegate = await this.createDelegate(proxy, delegateName, target, gang);
      if (gang?.podGroupName) await this.targetPodGroups.owned(target, gang.podGroupName, delegate);
      const placed = await this.waitPlaced(target, delegate, asksClaimTemplates(proxy));
      await this.wholeGang(args.PodUID, target, placed, startMs);
      await this.bindProxy(proxy, node, target, placed);
      this.o.gangs?.bound(args.PodUID);
      this.beingPlaced.bound(args.PodUID, { proxy, targetKey: target.key });
      // A delegate waiting for a scale-up holds no node yet: it counts against burst capacity
      // while it waits. One whose node was nominated holds that node's room already.
      const placedOn = placed.spec?.nodeName ?? nominatedFor(placed);
      if (placedOn) {
        const delegateKey = { namespace: placed.metadata?.namespace ?? namespace, name: placed.metadata?.name ?? delegateName };
        this.o.memory.assume(target.key, placedOn, heldOnNode(placed), this.o.clock.now(), delegateKey, podHostPorts(placed.spec));
      } else this.o.memory.release(target.key, reserved);
      this.o.memory.forget(args.PodUID);
      const preempting = preemptingFor(placed);
      if (preempting) this.tellPreempting(proxy, target, preempting);
      const where = placed.spec?.nodeName ?? (placedOn ? `${placedOn} (nominated, not bound yet)` : '(waiting for a scale-up)');
      this.o.logger.debug('scheduler extender: bound', { pod: `${namespace}/${name}`, cluster: target.displayName, node: where });
    } catch (err) {
      this.beingPlaced.drop(args.PodUID);
      if (reserved) this.o.memory.release(target.key, reserved);
      if (err instanceof GangNotPlaced) {
        this.o.refusals?.record(target.key, 'bind', 'GangNotPlaced', err.message);
        throw err;
      }
      this.o.gangs?.memberFailed(args.PodUID, `the bind of ${namespace}/${name} failed`);
      const refused = err instanceof Refused;
      const message = refused ? err.message : `${target.displayName}: ${(err as Error).message}`;
      // No Source for us in the namespace: nothing to back off from, the probe says when there is one.
      const unauthorized = refused && err.cause instanceof NotDelegatedError && err.cause.reason === SOURCE_NOT_AUTHORIZED;
      if (!(unauthorized && this.o.authorization?.refused(target.key, namespace, message))) this.o.memory.refuse(args.PodUID, target.key, message, this.o.clock.now());
      this.o.refusals?.record(target.key, 'bind', refused ? err.code : 'BindFailed', message);
      this.o.logger.info('scheduler extender: target refused a pod', { pod: `${namespace}/${name}`, cluster: target.displayName, reason: message });
      throw new Error(message, { cause: err });
    }
  }

  /**
   * Says on the proxy that its target is preempting pods for it (see `preemptingFor`): which
   * target, on which node, and how many pods of lower priority the summary counted there, when
   * it says. Best effort: the event recorder never throws.
   */
  private tellPreempting(proxy: V1Pod, target: TargetClient, node: string): void {
    let count: number | undefined;
    try {
      count = this.o.lowerPriorityPods?.(target.key, node, proxy);
    } catch {
      count = undefined;
    }
    const how = count === undefined ? '' : ` (its summary counted ${count} such pod(s) there; its scheduler evicts the fewest that make room)`;
    this.o.events?.record(
      { kind: 'Pod', apiVersion: 'v1', metadata: proxy.metadata! },
      'Normal',
      'PreemptingInTarget',
      `${target.displayName} preempts pods of lower priority on its node ${node} for this pod${how}; the delegate runs there once they are gone`,
    );
    this.o.logger.info('scheduler extender: target preempts for a pod', { pod: `${proxy.metadata?.namespace}/${proxy.metadata?.name}`, cluster: target.displayName, node, lowerPriorityPods: count });
  }

  /** The proxy, from the cache or the source; it must still be the pod kube-scheduler means. */
  private async readProxy(namespace: string, name: string, uid: string): Promise<V1Pod> {
    let proxy = this.o.proxies.get(name, namespace);
    if (!proxy || proxy.metadata?.uid !== uid) {
      try {
        proxy = await this.o.sourceCore.readNamespacedPod({ name, namespace });
      } catch (err) {
        if (isNotFound(err)) throw new Error(`pod ${namespace}/${name} no longer exists`, { cause: err });
        throw new Error(`reading pod ${namespace}/${name}: ${statusMessage(err)}`, { cause: err });
      }
    }
    if (proxy.metadata?.uid !== uid) throw new Error(`pod ${namespace}/${name} was replaced (UID ${proxy.metadata?.uid}, not ${uid})`);
    if (proxy.metadata?.deletionTimestamp) throw new Error(`pod ${namespace}/${name} is being deleted`);
    return proxy;
  }

  /** Creates the delegate (after its copies); an existing delegate of this very proxy is taken as is. */
  private async createDelegate(proxy: V1Pod, name: string, target: TargetClient, gang?: DelegateGang): Promise<V1Pod> {
    const namespace = proxy.metadata!.namespace!;
    let created: DelegateCreation;
    try {
      // Only the new delegate's name and uid are read (waitPlaced).
      created = await this.writer.create(proxy, target, 'identity', gang);
    } catch (err) {
      const cause = err instanceof DelegateCreateError ? err.cause : err;
      throw new Refused('CreateFailed', `${target.displayName}: cannot create the delegate: ${sanitizeRemoteText(statusMessage(cause))}`);
    }
    if (created.outcome === 'created') return created.delegate;
    if (created.outcome === 'nameTaken') {
      const existing = await target.core.readNamespacedPod({ name, namespace });
      if (isOurDelegate(existing, this.o.sourceClusterName, proxy.metadata!.uid) && !existing.metadata?.deletionTimestamp) return existing;
      throw new Refused('NameTaken', `${target.displayName}: pod ${namespace}/${name} exists and is not this pod's delegate`);
    }
    // A copy refused (its Warning is on the proxy already) or the delegate refused: the pod says
    // why in its Delegated condition (the writer set it), as in fallback mode, while
    // kube-scheduler tries other targets; the condition goes once a delegate exists.
    throw new Refused(created.refusal.reason, created.refusal.message, { cause: created.refusal }); // it names the target
  }

  /**
   * For a member of a gang being placed: its PodGroup in the target (when the plan puts more than
   * one member there and the target serves PodGroups) and the domain its plan keeps it in. Throws
   * {@link GangNotPlaced} when its plan failed, or puts it on another target.
   */
  private async gangOf(proxy: V1Pod, target: TargetClient): Promise<DelegateGang | undefined> {
    const uid = proxy.metadata!.uid!;
    const plans = this.o.gangs;
    if (!plans?.holds(uid)) return undefined;
    const at = plans.assignmentOf(uid);
    const group = `${proxy.metadata!.namespace}/${podGroupNameOf(proxy) ?? ''}`;
    if (!at) throw new GangNotPlaced(`pod group ${group} was not placed whole; it is planned again`);
    if (at.targetKey !== target.key) throw new GangNotPlaced(`pod group ${group} is planned on another target than ${target.displayName}`);
    const podGroupName = at.share > 1 ? await this.targetPodGroups.ensure(target, proxy.metadata!.namespace!, at.gang.name, at.share) : undefined;
    return { ...(podGroupName ? { podGroupName } : {}), ...(at.domain ? { domain: at.domain } : {}) };
  }

  /**
   * A gang's member waits, its delegate placed, for every member's delegate to be placed before
   * its proxy is bound; when the plan fails meanwhile (a member refused, or late), its delegate
   * is deleted, so no delegate of a gang not placed whole is left behind.
   */
  private async wholeGang(uid: string, target: TargetClient, placed: V1Pod, startMs: number): Promise<void> {
    const plans = this.o.gangs;
    if (!plans?.holds(uid)) return;
    try {
      // Within kube-scheduler's wait for the bind (its httpTimeout is above the placement timeout).
      await plans.placed(uid, Math.max(1000, startMs + this.placeTimeoutMs + 5000 - this.o.clock.now()));
    } catch (err) {
      await this.deleteDelegate(target, placed.metadata!.name!, placed.metadata!.namespace!, placed.metadata!.uid);
      throw new GangNotPlaced(`${target.displayName}: ${(err as Error).message}`);
    }
  }

  /**
   * Waits for the target's scheduler to decide. Resolves with the placed delegate (bound to a
   * node, or with its node nominated: {@link nominatedFor}), or in a target
   * with burst capacity with the Unschedulable delegate once cluster-autoscaler said
   * `TriggeredScaleUp` for it; rejects with {@link Refused} (and deletes the delegate) when it is
   * Unschedulable (with burst capacity: the autoscaler said `NotTriggerScaleUp`), gone, or
   * undecided in time, or (`claimTemplates`: the delegate asks for ResourceClaims from
   * templates) when the target cannot make its claims.
   */
  private async waitPlaced(target: TargetClient, created: V1Pod, claimTemplates: boolean): Promise<V1Pod> {
    const name = created.metadata!.name!;
    const namespace = created.metadata!.namespace!;
    const uid = created.metadata!.uid;
    const deadline = this.o.clock.now() + this.placeTimeoutMs;
    let reason: string | undefined;
    for (let round = 0; ; round++) {
      const cache = this.o.delegates(target.key);
      const live = !cache?.hasSynced();
      let current: V1Pod | undefined = live ? undefined : cache!.get(name, namespace);
      if (live || (!current && round % 10 === 9)) {
        // No running cache, or the cache has not seen it yet: ask the target.
        try {
          current = await target.core.readNamespacedPod({ name, namespace });
        } catch (err) {
          if (!isNotFound(err)) throw err;
          current = undefined;
        }
        if (!current) {
          reason = `${target.displayName}: the delegate was deleted before it was placed`;
          break;
        }
      }
      if (current && uid && current.metadata?.uid !== uid) {
        reason = `${target.displayName}: the delegate was replaced before it was placed`;
        break;
      }
      if (current?.spec?.nodeName) return current;
      // Committed to a node, not yet bound to it: see `nominatedFor`.
      if (current && nominatedFor(current)) return current;
      const scheduled = current && unschedulableVerdict(current);
      if (scheduled) {
        const unschedulable = `${target.displayName}: ${sanitizeRemoteText(scheduled.message ?? 'the delegate is unschedulable')}`;
        if (!this.o.bursts?.(target.key)) {
          reason = unschedulable;
          break;
        }
        const said = autoscalerVerdict(current!, this.o.targetEvents?.(target.key)?.list(namespace) ?? []);
        if (said?.reason === TRIGGERED_SCALE_UP) return current!;
        if (said?.reason === NOT_TRIGGER_SCALE_UP) {
          reason = `${unschedulable}; cluster-autoscaler: ${sanitizeRemoteText(said.message)}`;
          break;
        }
        if (this.o.clock.now() >= deadline) {
          reason = `${unschedulable}; its cluster-autoscaler said nothing within ${this.placeTimeoutMs / 1000} s`;
          break;
        }
      }
      const claimFailure = claimTemplates && current && claimCreationFailure(current, this.o.targetEvents?.(target.key));
      if (claimFailure) {
        reason = `${target.displayName}: ${sanitizeRemoteText(claimFailure)}`;
        break;
      }
      if (current?.metadata?.deletionTimestamp || current?.status?.phase === 'Failed') {
        reason = `${target.displayName}: the delegate ${current.metadata?.deletionTimestamp ? 'is being deleted' : 'failed'} before it was placed`;
        break;
      }
      if (this.o.clock.now() >= deadline) {
        reason = `${target.displayName}: its scheduler did not place the delegate within ${this.placeTimeoutMs / 1000} s`;
        break;
      }
      await this.changeOrTimeout(waitKey(target.key, namespace, name), live ? this.pollMs * 10 : this.pollMs);
    }
    await this.deleteDelegate(target, name, namespace, uid);
    throw new Refused('DelegateNotPlaced', reason);
  }

  /** Binds the proxy in the source; on failure the delegate goes, unless the proxy is bound there already. */
  private async bindProxy(proxy: V1Pod, node: string, target: TargetClient, delegate: V1Pod): Promise<void> {
    const name = proxy.metadata!.name!;
    const namespace = proxy.metadata!.namespace!;
    try {
      await this.o.sourceCore.createNamespacedPodBinding({
        name,
        namespace,
        body: { apiVersion: 'v1', kind: 'Binding', metadata: { name, namespace, uid: proxy.metadata!.uid }, target: { apiVersion: 'v1', kind: 'Node', name: node } },
      });
    } catch (err) {
      const now = await this.o.sourceCore.readNamespacedPod({ name, namespace }).catch(() => undefined);
      if (now?.metadata?.uid === proxy.metadata!.uid && now?.spec?.nodeName === node) return;
      await this.deleteDelegate(target, delegate.metadata!.name!, delegate.metadata!.namespace!, delegate.metadata!.uid);
      throw new Error(`binding pod ${namespace}/${name} to ${node}: ${statusMessage(err)}`, { cause: err });
    }
  }

  private async deleteDelegate(target: TargetClient, name: string, namespace: string, uid: string | undefined): Promise<void> {
    try {
      await target.core.deleteNamespacedPod({ name, namespace, gracePeriodSeconds: 0, body: { gracePeriodSeconds: 0, ...(uid ? { preconditions: { uid } } : {}) } });
    } catch (err) {
      // Gone, or another pod has the name now: nothing of ours to delete.
      if (isNotFound(err) || classifyApiError(err) === 'Conflict') return;
      this.o.logger.warn('scheduler extender: could not delete a refused delegate (the delegation reconciler deletes it once the pod is bound elsewhere, or gone)', {
        cluster: target.displayName,
        delegate: `${namespace}/${name}`,
        ...errorFields(err),
      });
    }
  }

  /**
   * Resolves when {@link delegateChanged} reports the delegate, or after `ms`. Registered in the
   * same tick as the look that found it undecided, so no change can slip in between.
   */
  private changeOrTimeout(key: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      let wakers = this.waiting.get(key);
      if (!wakers) this.waiting.set(key, (wakers = new Set()));
      const wake = () => {
        this.o.clock.clearTimeout(timer);
        resolve();
      };
      const timer = this.o.clock.setTimeout(() => {
        const set = this.waiting.get(key);
        set?.delete(wake);
        if (set?.size === 0) this.waiting.delete(key);
        resolve();
      }, ms);
      wakers.add(wake);
    });
  }
}

function waitKey(targetKey: string, namespace: string, name: string): string {
  return `${targetKey}/${namespace}/${name}`;
}

/**
 * What the delegate of `proxy` asks for, pod slot included: its scheduling view's requests (the
 * proxy's own, when that view cannot be read), plus the overhead of its RuntimeClass in the
 * target when `classes` are known (the proxy's, the source's, otherwise).
 */
export function delegateRequests(proxy: V1Pod, classes: RuntimeClasses | undefined): ResourceAmounts {
  let spec = proxy.spec;
  try {
    spec = schedulingPod(proxy).spec;
  } catch {
    // Such a pod is refused when its delegate is built.
  }
  const overhead = classes && spec?.runtimeClassName ? classes.get(spec.runtimeClassName)?.overhead : undefined;
  const requests = podRequests(spec, { includeOverhead: !classes });
  if (overhead) addInto(requests, overhead);
  requests.set('pods', ONE_POD);
  return requests;
}
