import { CoreV1Api, PatchStrategy, setHeaderOptions, type V1ContainerStatus, type V1Namespace, type V1Pod, type V1PodStatus } from '@kubernetes/client-node';
import type { ClusterRegistry } from '../clusters/cluster-registry.js';
import type { TargetClient } from '../clusters/target-client.js';
import type { Clock } from '../core/clock.js';
import { isNotFound, TerminalError, ValidationError } from '../core/errors.js';
import { unreadAnswer } from '../core/unread-answer.js';
import { PARENT_NAME_ANNOTATION, PARENT_NAMESPACE_ANNOTATION, SOURCE_POD_MANIFEST_ANNOTATION } from '../core/keys.js';
import { delegateNameOf, isOurDelegate } from '../model/delegate-pod.js';
import { releaseOurFinalizers } from '../model/finalizers.js';
import { delegatePodName } from '../model/names.js';
import { stringMapMergePatch } from '../model/maps.js';
import { isOutage } from '../model/outage.js';
import type { CopyNames } from '../model/pod-references.js';
import { buildProxyAnnotations, buildProxyStatus, proxyStatusEquals, proxyStatusPatch } from '../model/proxy-status.js';
import { checkTenancy } from '../model/tenancy.js';
import type { EventSink } from '../core/event-sink.js';
import type { ObjectCache } from '../controller/object-cache.js';
import { deleteProxyNow, markNotDelegated } from '../writers/proxy-writes.js';
import { DelegateWriter } from '../writers/delegate-writer.js';

export interface DelegationReconcilerOptions {
  sourceCore: CoreV1Api;
  /** Source pods that are proxies (labelled by the webhook). */
  proxies: ObjectCache<V1Pod>;
  /** Source namespaces labelled `multicluster-scheduler=enabled` (others may be absent). */
  namespaces: ObjectCache<V1Namespace>;
  /**
   * Per-target cache of the pods this source created there, with the index
   * {@link DelegationReconciler.BY_PROXY_INDEX}; undefined until the target's informers run.
   */
  delegates: (targetKey: string) => DelegatesCache | undefined;
  registry: ClusterRegistry;
  sourceClusterName: string;
  events: EventSink;
  clock: Clock;
  /**
   * Whether delegates may be created in a target now (the outage reconciler's fencing gate: a
   * target back from an outage first loses the delegates of proxies that failed over). Default: always.
   */
  mayCreateDelegates?: (targetKey: string) => boolean;
  /** Copies what the delegate references into its target before it is created; the delegate names the copies so. */
  follow?: { ensureCopies(proxy: V1Pod, target: TargetClient): Promise<CopyNames> };
}

/** A target's delegates cache, with its index by proxy ({@link DelegationReconciler.delegatesByProxy}). */
export interface DelegatesCache extends ObjectCache<V1Pod> {
  byIndex(index: string, value: string): V1Pod[];
}

type Result = { requeueAfterMs?: number } | void;

/** How often a proxy whose virtual node has no target in the registry looks again (see `withoutTarget`). */
const WITHOUT_TARGET_RECHECK_MS = 5000;

/** Where a proxy's delegate is, in its target: all a lookup needs. */
type DelegateRef = { name: string; namespace: string };

/** How long a deleted proxy waits before it looks at its terminating delegate again, if no change of the delegate wakes it first. */
export const DELEGATE_GONE_RECHECK_MS = 10_000;

/**
 * How long past its deletion deadline a delegate may take to go before its proxy says it is
 * stuck: a loaded target's kubelets (or kwok) finish pods some seconds late, which is no news.
 */
export const DELEGATE_STUCK_AFTER_MS = 60_000;

/**
 * Proxy pods -> delegate pods. Key: `<namespace>/<proxy name>`.
 *
 * For a proxy bound to a virtual node: create its delegate in that node's target (after the
 * ConfigMaps and Secrets it uses), if the proxy may use that target (see `checkTenancy`; if not,
 * a Warning event and a `Delegated=False` condition with the reason, and nothing is written to
 * the target), mirror the delegate's status and annotations onto the proxy,
 * and on deletion delete the delegate first, then release the proxy's finalizer and remove the
 * proxy (no kubelet will confirm a pod on a virtual node: we play its part). A delegate that
 * disappears makes a controlled proxy go (its owner replaces it) and a bare proxy Failed.
 *
 * Caches may lag: every conclusion drawn from a delegate's absence (release, replace, fail) is
 * confirmed with a direct read of the target first, so a restart never loses or doubles pods,
 * unless the same cache showed the delegate of a deleted proxy before (it then saw it go).
 */
export class DelegationReconciler {
  /**
   * Per delegates cache, the delegates (`<namespace>/<name>`) of deleted proxies that this cache
   * showed: once it no longer does, it saw them go (a watch's deletion or a fresh list without
   * them), so their absence needs no read of the target. Per cache object, so a target's new
   * informer, not synced yet, is not taken at its word. Entries go when their proxy is released.
   */
  private readonly seenGoing = new WeakMap<ObjectCache<V1Pod>, Set<string>>();
  /**
   * Proxies (key -> UID) released for good (no finalizer left, removal sent): the updates that
   * still arrive before the cache drops them (our own finalizer patch) need nothing more, not a
   * read of the target and a second removal each. Entries go when the proxy leaves the cache.
   */
  private readonly released = new Map<string, string>();
  /**
   * Deleted proxies (key -> UID) whose delegate was said to be stuck terminating, so it is said
   * once, not on every recheck. Entries go when the proxy leaves the cache.
   */
  private readonly toldStuck = new Map<string, string>();
  /**
   * Virtual nodes without a target in the registry, by when a read last found them: the
   * proxies there share one read per recheck period, not one each (a broken Secret may leave
   * thousands of them waiting).
   */
  private readonly nodeSeenAt = new Map<string, number>();

  /** Creates the delegates and their copies, as the scheduler extender's bind does. */
  private readonly writer: DelegateWriter;

  constructor(private readonly o: DelegationReconcilerOptions) {
    this.writer = new DelegateWriter(o);
  }

  /** Name of the delegates caches' index by the key of their proxy ({@link delegatesByProxy}). */
  static readonly BY_PROXY_INDEX = 'by-proxy';

  /** The delegates index: a delegate of this source under its proxy's key, as {@link delegateToProxyKey} maps it. */
  static delegatesByProxy(sourceClusterName: string): (pod: V1Pod) => string[] {
    return (pod) => DelegationReconciler.delegateToProxyKey(pod, sourceClusterName);
  }

  /** Key mapper for source proxy pods: `<namespace>/<name>`. */
  static proxyKey(pod: V1Pod): string {
    return `${pod.metadata?.namespace}/${pod.metadata?.name}`;
  }

  /**
   * Key mapper for target pods: a delegate change wakes its proxy (found through the
   * parent-name/parent-namespace annotations), only if the pod is ours (parent-cluster-name).
   * Static with the cluster name as a parameter so it can be wired before a reconciler exists.
   */
  static delegateToProxyKey(pod: V1Pod, sourceClusterName: string): string[] {
    if (!isOurDelegate(pod, sourceClusterName)) return [];
    const a = pod.metadata?.annotations ?? {};
    const ns = a[PARENT_NAMESPACE_ANNOTATION] || pod.metadata?.namespace;
    const name = a[PARENT_NAME_ANNOTATION];
    return name && ns ? [`${ns}/${name}`] : [];
  }

  async reconcile(key: string): Promise<Result> {
    const slash = key.indexOf('/');
    const namespace = key.slice(0, slash);
    const name = key.slice(slash + 1);
    const proxy = this.o.proxies.get(name, namespace);
    if (!proxy) {
      this.released.delete(key);
      this.toldStuck.delete(key);
      return this.deleteOrphans(namespace, name);
    }
    if (proxy.metadata?.annotations?.[SOURCE_POD_MANIFEST_ANNOTATION] === undefined) return;

    const terminating = !!proxy.metadata?.deletionTimestamp;
    if (terminating && proxy.metadata?.uid && this.released.get(key) === proxy.metadata.uid) return;
    const nodeName = proxy.spec?.nodeName;
    if (!nodeName) {
      // Never scheduled: nothing to delete remotely; the apiserver removes it once released.
      if (terminating) await this.release(proxy);
      return;
    }
    const target = this.o.registry.byNodeName(nodeName);
    if (!target) return this.withoutTarget(proxy, nodeName, terminating);
    const cache = this.o.delegates(target.key);
    if (!cache) return { requeueAfterMs: 2000 };
    if (terminating) return this.deleteDelegateFirst(proxy, target, cache);

    // Only a create needs the whole delegate (built in createOrReplace): a lookup needs its name,
    // checked as the build would check it, so an invalid proxy is refused on every reconcile.
    let delegateName: string;
    try {
      delegateName = delegateNameOf(proxy, { sourceClusterName: this.o.sourceClusterName });
    } catch (err) {
      if (err instanceof ValidationError) {
        this.event(proxy, 'Warning', 'InvalidProxy', err.message);
        throw new TerminalError(`proxy ${key}: ${err.message}`, { cause: err });
      }
      throw err;
    }
    // A delegate missing from the cache is read from the target only where its absence leads to
    // a conclusion (replace or fail a proxy whose delegate went away; see also deleteDelegateFirst).
    // A proxy that never had one gets its create at once: the name is deterministic, so a
    // delegate the cache has not shown yet answers AlreadyExists, and a read before every create
    // would double the calls of a burst.
    const desired = { name: delegateName, namespace };
    const existing = cache.get(delegateName, namespace) ?? (hadDelegate(proxy) ? await this.readDelegate(target, desired) : undefined);
    const ours = !!existing && isOurDelegate(existing, this.o.sourceClusterName, proxy.metadata!.uid);

    if (!existing) return this.createOrReplace(proxy, desired, target);
    if (!ours) {
      this.event(proxy, 'Warning', 'DelegateNameConflict', `pod ${namespace}/${delegateName} in ${target.displayName} exists and is not this proxy's delegate`);
      throw new TerminalError(`delegate name conflict for ${key} in ${target.displayName}`);
    }
    await this.feedback(proxy, existing);
    await this.deleteStrays(proxy, target, desired);
  }

  /**
   * A deleted proxy: its delegate goes first (once), then the proxy is released. Needs only the
   * delegate's name, not the delegate (no parse of the saved manifest): a proxy whose manifest
   * cannot be read has no delegate to find and is released. A same-name pod that is not ours is
   * not this proxy's delegate: it must not keep the proxy's finalizer forever, and it is never
   * deleted by us. While the delegate terminates, its informer wakes the proxy when it changes or
   * goes; the requeue is only a safety net, so that thousands of proxies deleted at once do not
   * each come back every second.
   */
  private async deleteDelegateFirst(proxy: V1Pod, target: TargetClient, cache: ObjectCache<V1Pod>): Promise<Result> {
    const name = proxy.metadata!.name!;
    const namespace = proxy.metadata!.namespace!;
    const uid = proxy.metadata?.uid;
    if (!uid) return this.release(proxy);
    const delegateName = delegatePodName(name, this.o.sourceClusterName, uid);
    const seen = this.seenGoing.get(cache) ?? new Set<string>();
    this.seenGoing.set(cache, seen);
    const seenKey = `${namespace}/${delegateName}`;
    const cached = cache.get(delegateName, namespace);
    // Gone from a cache that showed it: no read needed to confirm (see seenGoing).
    const existing = cached ?? (seen.has(seenKey) ? undefined : await this.readDelegate(target, { name: delegateName, namespace }));
    if (existing && isOurDelegate(existing, this.o.sourceClusterName, uid)) {
      if (cached) seen.add(seenKey);
      if (!existing.metadata?.deletionTimestamp) await this.deleteDelegate(target, existing, proxy);
      else this.tellIfStuck(proxy, existing, target);
      return { requeueAfterMs: DELEGATE_GONE_RECHECK_MS };
    }
    await this.release(proxy);
    seen.delete(seenKey);
  }

  /**
   * Deletes this proxy's delegates in targets other than its own: the scheduler extender creates
   * a delegate before the proxy is bound, and one it could not delete after a refusal stays.
   */
  private async deleteStrays(proxy: V1Pod, home: TargetClient, desired: DelegateRef): Promise<void> {
    for (const target of this.o.registry.list()) {
      if (target.key === home.key) continue;
      const stray = this.o.delegates(target.key)?.get(desired.name, desired.namespace);
      if (!stray || stray.metadata?.deletionTimestamp || !isOurDelegate(stray, this.o.sourceClusterName, proxy.metadata!.uid)) continue;
      await this.deleteDelegate(target, stray, proxy);
      this.event(proxy, 'Normal', 'StrayDelegateDeleted', `deleted delegate ${stray.metadata!.name} in ${target.displayName}: the pod runs in ${home.displayName}`);
    }
  }

  /** Reads the delegate directly (the cache may lag); undefined when it does not exist. */
  private async readDelegate(target: TargetClient, desired: DelegateRef): Promise<V1Pod | undefined> {
    try {
      return await target.core.readNamespacedPod({ name: desired.name, namespace: desired.namespace });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw new Error(`reading delegate ${desired.name} in ${target.displayName}`, { cause: err });
    }
  }

  private async createOrReplace(proxy: V1Pod, desired: DelegateRef, target: TargetClient): Promise<Result> {
    const phase = proxy.status?.phase;
    // A proxy that had a delegate, now gone (deleted or evicted in the target): creating another
    // would silently restart a pod the user saw running.
    if (hadDelegate(proxy)) {
      // Finished: a target may garbage-collect finished pods; the proxy keeps its last status.
      if (phase === 'Succeeded' || phase === 'Failed') return;
      const name = proxy.metadata!.name!;
      const namespace = proxy.metadata!.namespace!;
      const owner = proxy.metadata?.ownerReferences?.find((r) => r.controller);
      const where = `its delegate ${desired.name} was deleted in ${target.displayName}`;
      if (owner) {
        this.event(proxy, 'Warning', 'DelegateDeleted', `${where}; deleting the proxy so that its ${owner.kind} replaces it`);
        try {
          await this.o.sourceCore.deleteNamespacedPod({ name, namespace, body: { preconditions: { uid: proxy.metadata!.uid } } });
        } catch (err) {
          if (!isNotFound(err)) throw new Error(`deleting proxy ${namespace}/${name} whose delegate is gone`, { cause: err });
        }
      } else {
        // A bare pod has no owner to replace it: say so rather than lose it silently.
        this.event(proxy, 'Warning', 'DelegateDeleted', `${where}; the pod has no owner to replace it, so it is marked Failed`);
        try {
          // Read, not cached: the cache keeps no container statuses (see proxyFields), and the
          // Failed status terminates each of them. The read's resourceVersion guards the update.
          const live = await this.o.sourceCore.readNamespacedPod({ name, namespace });
          if (live.metadata?.uid !== proxy.metadata?.uid) return;
          await this.o.sourceCore.replaceNamespacedPodStatus({ name, namespace, body: { ...live, status: failedStatus(live, where, new Date(this.o.clock.now())) } });
        } catch (err) {
          if (isNotFound(err)) return;
          throw new Error(`marking proxy ${namespace}/${name} Failed`, { cause: err });
        }
      }
      return;
    }
    if (this.o.mayCreateDelegates && !this.o.mayCreateDelegates(target.key)) return { requeueAfterMs: 1000 };
    // Before anything is written with the target's credentials: the label and annotations that
    // brought the pod here are the pod creator's, and the webhook may never have seen the pod.
    const verdict = checkTenancy(proxy, this.o.namespaces.get(proxy.metadata!.namespace!), target.ref);
    if (!verdict.allowed) {
      this.event(proxy, 'Warning', verdict.reason, verdict.message);
      await this.markNotDelegated(proxy, verdict.reason, verdict.message);
      throw new TerminalError(`proxy ${proxy.metadata!.namespace}/${proxy.metadata!.name}: ${verdict.message}`);
    }
    const created = await this.writer.create(proxy, target, 'nothing');
    if (created.outcome === 'nameTaken') return { requeueAfterMs: 1000 };
    if (created.outcome === 'refused') {
      // A copy's refusal has its event on the proxy already (the follow reconciler's).
      if (created.of === 'copies') throw created.refusal;
      this.event(proxy, 'Warning', created.refusal.reason, created.refusal.message);
      throw new Error(`creating delegate ${desired.name} in ${target.displayName}`, { cause: created.refusal.cause });
    }
    this.event(proxy, 'Normal', 'DelegateCreated', `delegate ${desired.name} created in ${target.displayName}`);
  }

  /** Mirrors the delegate's status and annotations onto the proxy, writing only what changed. */
  private async feedback(proxy: V1Pod, delegate: V1Pod): Promise<void> {
    const name = proxy.metadata!.name!;
    const namespace = proxy.metadata!.namespace!;
    const status = buildProxyStatus(proxy, delegate);
    if (!proxyStatusEquals(proxy, status)) {
      // A merge patch of the whole status, which the cache does not keep whole, with the cached
      // resourceVersion: a 409 means a newer proxy; retry from the cache.
      try {
        await this.o.sourceCore.patchNamespacedPodStatus({ name, namespace, body: proxyStatusPatch(proxy, status) }, unreadAnswer(setHeaderOptions('Content-Type', PatchStrategy.MergePatch)));
      } catch (err) {
        throw new Error(`writing the status of proxy ${namespace}/${name}`, { cause: err });
      }
    }
    const annotations = buildProxyAnnotations(proxy, delegate);
    const patch = annotations && stringMapMergePatch(proxy.metadata?.annotations, annotations);
    if (patch) {
      try {
        await this.o.sourceCore.patchNamespacedPod({ name, namespace, body: { metadata: { annotations: patch } } }, unreadAnswer(setHeaderOptions('Content-Type', PatchStrategy.MergePatch)));
      } catch (err) {
        throw new Error(`patching the annotations of proxy ${namespace}/${name}`, { cause: err });
      }
    }
  }

  private async deleteDelegate(target: TargetClient, delegate: V1Pod, proxy: V1Pod): Promise<void> {
    const grace = proxy.metadata?.deletionGracePeriodSeconds;
    try {
      await target.core.deleteNamespacedPod(
        {
          name: delegate.metadata!.name!,
          namespace: delegate.metadata!.namespace!,
          gracePeriodSeconds: grace ?? undefined,
          body: { preconditions: { uid: delegate.metadata!.uid } },
        },
        unreadAnswer(),
      );
    } catch (err) {
      if (!isNotFound(err)) throw new Error(`deleting delegate ${delegate.metadata!.name} in ${target.displayName}`, { cause: err });
    }
  }

  /**
   * Removes our finalizer (a JSON patch that tests the list first, so a concurrent change is
   * never overwritten). A proxy on a virtual node has no kubelet to confirm its end, so once no
   * finalizer but ours holds it we remove it for good: with a grace-0 delete sent first, while
   * our finalizer still holds it, so that the patch that removes the finalizer removes the pod
   * too. In the other order (patch, then delete) the apiserver writes the pod once more, and
   * every pod watcher of the source gets one more event per deleted proxy.
   */
  private async release(proxy: V1Pod): Promise<void> {
    const name = proxy.metadata!.name!;
    const namespace = proxy.metadata!.namespace!;
    const { kept, patch } = releaseOurFinalizers(proxy);
    const removeForGood = kept.length === 0 && !!proxy.spec?.nodeName;
    // Already at grace 0 (a release whose patch failed after its delete): the delete would change nothing.
    if (removeForGood && proxy.metadata?.deletionGracePeriodSeconds !== 0) {
      // False: gone already, or another pod has the name; nothing of this proxy's is left to release.
      if (!(await deleteProxyNow(this.o.sourceCore, proxy, 'for good'))) return;
    }
    if (patch) {
      // A failed test (422) means the cached list is stale: the retry reads a fresher one.
      try {
        await this.o.sourceCore.patchNamespacedPod({ name, namespace, body: patch }, unreadAnswer(setHeaderOptions('Content-Type', PatchStrategy.JsonPatch)));
      } catch (err) {
        if (isNotFound(err)) return;
        throw new Error(`removing the finalizer of proxy ${namespace}/${name}`, { cause: err });
      }
    }
    // No finalizer left: the apiserver removes it (at once if it was never bound).
    if (kept.length === 0 && proxy.metadata?.uid) this.released.set(`${namespace}/${name}`, proxy.metadata.uid);
  }

  /**
   * The proxy's node has no target in the registry. While the virtual node exists the target
   * is only not loaded yet (start-up, a broken Secret): wait. Once the node is gone, so is the
   * Target: a terminating proxy is released, so no finalizer outlives its target.
   */
  private async withoutTarget(proxy: V1Pod, nodeName: string, terminating: boolean): Promise<Result> {
    // On the monotonic clock: a step back of the wall clock must not stretch the recheck period.
    const now = this.o.clock.monotonicMs();
    let nodeExists = (this.nodeSeenAt.get(nodeName) ?? -Infinity) > now - WITHOUT_TARGET_RECHECK_MS;
    if (!nodeExists) {
      try {
        await this.o.sourceCore.readNode({ name: nodeName });
        nodeExists = true;
        for (const [node, at] of this.nodeSeenAt) if (at <= now - WITHOUT_TARGET_RECHECK_MS) this.nodeSeenAt.delete(node);
        this.nodeSeenAt.set(nodeName, now);
      } catch (err) {
        if (!isNotFound(err)) throw new Error(`reading node ${nodeName} of proxy ${proxy.metadata?.namespace}/${proxy.metadata?.name}`, { cause: err });
        this.nodeSeenAt.delete(nodeName);
      }
    }
    if (nodeExists) return { requeueAfterMs: WITHOUT_TARGET_RECHECK_MS };
    if (terminating) await this.release(proxy);
    return;
  }

  /**
   * The proxy is gone: delete any delegate it left in any target (after a crash, say). Found
   * through the caches' index by proxy; the source is read only when one is found (most often
   * none is: a proxy is released once its delegate is gone).
   */
  private async deleteOrphans(namespace: string, name: string): Promise<void> {
    const left: { target: TargetClient; delegate: V1Pod }[] = [];
    for (const target of this.o.registry.list()) {
      // Out of reach: the outage reconciler fences the target before it gets new delegates.
      if (isOutage(this.o.registry.health(target.key))) continue;
      for (const d of this.o.delegates(target.key)?.byIndex(DelegationReconciler.BY_PROXY_INDEX, `${namespace}/${name}`) ?? []) {
        // A delegate lives in its proxy's namespace: one elsewhere that names it is not ours to delete.
        if (d.metadata?.namespace === namespace && !d.metadata?.deletionTimestamp) left.push({ target, delegate: d });
      }
    }
    if (!left.length) return;
    // The cache may not have seen the proxy yet (start-up): ask the source before deleting.
    let liveUid: string | undefined;
    try {
      liveUid = (await this.o.sourceCore.readNamespacedPod({ name, namespace })).metadata?.uid;
    } catch (err) {
      if (!isNotFound(err)) throw new Error(`reading proxy ${namespace}/${name}`, { cause: err });
    }
    for (const { target, delegate } of left) {
      if (liveUid && isOurDelegate(delegate, this.o.sourceClusterName, liveUid)) continue;
      await this.deleteDelegate(target, delegate, {});
    }
  }

  private markNotDelegated(proxy: V1Pod, reason: string, message: string): Promise<void> {
    return markNotDelegated(this.o.sourceCore, proxy, reason, message, new Date(this.o.clock.now()));
  }

  /**
   * A Warning event on a deleted proxy whose delegate is still there, {@link DELEGATE_STUCK_AFTER_MS}
   * past its deletion deadline (its deletionTimestamp: the delete plus its grace period), which
   * is what keeps the proxy Terminating: the delegate's finalizers, or a target node that does
   * not confirm. Said once per proxy. A delegate that goes in time costs no event: most
   * deletions are quick, and an event per deleted pod was a third of the source's writes while
   * pods were deleted.
   */
  private tellIfStuck(proxy: V1Pod, delegate: V1Pod, target: TargetClient): void {
    const key = DelegationReconciler.proxyKey(proxy);
    const uid = proxy.metadata?.uid;
    const deadline = new Date(delegate.metadata!.deletionTimestamp as unknown as string);
    if (!uid || this.toldStuck.get(key) === uid || !(this.o.clock.now() - deadline.getTime() > DELEGATE_STUCK_AFTER_MS)) return;
    this.toldStuck.set(key, uid);
    const finalizers = delegate.metadata?.finalizers ?? [];
    const held =
      finalizers.length > 0
        ? `its finalizers ${finalizers.slice(0, 3).join(', ')}${finalizers.length > 3 ? ` and ${finalizers.length - 3} more` : ''} hold it`
        : 'no finalizer holds it (its node has not confirmed)';
    this.event(
      proxy,
      'Warning',
      'DelegateStuckTerminating',
      `delegate ${delegate.metadata!.name} in ${target.displayName} is still there more than ${DELEGATE_STUCK_AFTER_MS / 1000} s past its deletion deadline ${deadline.toISOString()}: ${held}; this pod stays Terminating until it goes`,
    );
  }

  private event(proxy: V1Pod, type: 'Normal' | 'Warning', reason: string, message: string): void {
    this.o.events.record({ kind: 'Pod', apiVersion: 'v1', metadata: { name: proxy.metadata?.name, namespace: proxy.metadata?.namespace, uid: proxy.metadata?.uid } }, type, reason, message);
  }
}

/**
 * Whether the proxy had a delegate: its status only ever leaves Pending (or gets a startTime)
 * through feedback from one.
 */
function hadDelegate(proxy: V1Pod): boolean {
  const phase = proxy.status?.phase;
  return !!proxy.status?.startTime || (phase !== undefined && phase !== 'Pending');
}

/**
 * The status of a bare proxy whose delegate disappeared: Failed, not ready, every container that
 * has not terminated marked terminated with the same reason (what a kubelet would report for a
 * pod it lost), so controllers and users reading container states see a consistent picture.
 */
function failedStatus(proxy: V1Pod, message: string, now: Date): V1PodStatus {
  const status = structuredClone(proxy.status ?? {});
  const terminate = (s: V1ContainerStatus): V1ContainerStatus =>
    s.state?.terminated
      ? s
      : { ...s, ready: false, started: false, state: { terminated: { exitCode: 137, reason: 'DelegateDeleted', message, finishedAt: now, startedAt: s.state?.running?.startedAt } } };
  status.phase = 'Failed';
  status.reason = 'DelegateDeleted';
  status.message = message;
  status.containerStatuses = status.containerStatuses?.map(terminate);
  status.conditions = status.conditions?.map((c) =>
    (c.type === 'Ready' || c.type === 'ContainersReady') && c.status !== 'False' ? { ...c, status: 'False', reason: 'DelegateDeleted', lastTransitionTime: now } : c,
  );
  return status;
}
