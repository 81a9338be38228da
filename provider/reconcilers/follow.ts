import type { CoreV1Api, V1ConfigMap, V1Namespace, V1Pod, V1Secret } from '@kubernetes/client-node';
import type { ClusterRegistry } from '../clusters/cluster-registry.js';
import type { TargetClient } from '../clusters/target-client.js';
import { CopyConflictError, isAlreadyExists, isNotFound, NotDelegatedError, TerminalError } from '../core/errors.js';
import { PARENT_NAME_ANNOTATION, PARENT_NAMESPACE_ANNOTATION } from '../core/keys.js';
import { delegateSourceView, isOurDelegate } from '../model/delegate-pod.js';
import { buildConfigMapCopy, buildSecretCopy, copyNeedsRecreate, copyNeedsUpdate, copyRefusal, isCopyOf, missingOriginalConflict } from '../model/follow.js';
import { copyName } from '../model/names.js';
import { referencedNames, type CopyKind, type CopyNames } from '../model/pod-references.js';
import { checkTenancy } from '../model/tenancy.js';
import type { EventSink } from '../core/event-sink.js';
import type { ObjectCache } from '../controller/object-cache.js';
import { TargetPasses } from './target-passes.js';
import { refusalOf } from '../writers/target-refusal.js';

type Kind = CopyKind;
type Copy = V1ConfigMap | V1Secret;

export interface FollowReconcilerOptions {
  /** Reads the originals by name (`get` only: no list or watch of Secrets in the source). */
  sourceCore: CoreV1Api;
  proxies: ObjectCache<V1Pod>;
  /** Source namespaces labelled `multicluster-scheduler=enabled` (others may be absent). */
  namespaces: ObjectCache<V1Namespace>;
  registry: ClusterRegistry;
  sourceClusterName: string;
  events: EventSink;
  /** Per-target caches of our copies. */
  targetConfigMaps: (targetKey: string) => ObjectCache<V1ConfigMap> | undefined;
  targetSecrets: (targetKey: string) => ObjectCache<V1Secret> | undefined;
  /**
   * Per-target caches of this source's delegates: a copy an earlier version made under the
   * original's own name stays while one of them still names it.
   */
  delegates: (targetKey: string) => ObjectCache<V1Pod> | undefined;
  /**
   * Proxies being placed by the scheduler extender, not bound yet, with their target (see
   * `Binder.placing`): their copies are made before their delegate, and must stay.
   */
  placing?: (namespace: string) => Iterable<{ proxy: V1Pod; targetKey: string }>;
  /** How often an original that a delegate uses is read again to carry its changes over (default 60 s). */
  resyncIntervalMs?: number;
}

/** What a delegate uses: read from the spec the delegate is built from, never from the manifest alone. */
function references(proxy: V1Pod): Record<Kind, string[]> {
  try {
    const spec = delegateSourceView(proxy).spec!;
    return referencedNames(spec);
  } catch {
    return { configmap: [], secret: [] };
  }
}

/**
 * Copies the ConfigMaps and Secrets that delegates use into their targets, keeps the copies in
 * sync, and deletes a copy once no proxy bound to that target (or being placed there by the
 * scheduler extender, see `placing`) uses it any more. While a proxy that uses it is not bound
 * yet, existing copies are kept in every target: the extender of any replica may be placing it
 * (copies before the delegate, then the bind), and this replica's `placing` knows only its own
 * placements. Key:
 * `configmap/<ns>/<name>` or `secret/<ns>/<name>`. Garbage collection is level-based (the set of
 * proxies that reference an object), so no finalizer is put on the user's objects. Copies are
 * never made into a `self` target: the originals are already there. A same-name object in a
 * target that is not ours is never touched.
 *
 * A copy is named per source ({@link copyName}: the original's name and a hash of this cluster's
 * name and it), and the delegate's references are rewritten to it (`ensureCopies` returns the
 * names), so two sources that send a ConfigMap of the same name into one namespace of one target
 * each get their own copy, and neither's delegates read the other's. Earlier versions (and
 * Admiralty) kept the original's name: such a copy of ours is kept, and in sync, while one of
 * this source's delegates in that target still names it (a pod's volumes and env never change),
 * and deleted once none does; new delegates use the per-source name.
 *
 * The originals are read by name, never listed or watched: caching every Secret of the source
 * cluster would make the provider hold (and need RBAC for) all of them, when it needs only those
 * that proxies reference. Changes to an original therefore reach the copies on the next resync
 * (`resyncIntervalMs`, while a delegate uses it) or on the next change of a proxy that uses it.
 */
export class FollowReconciler {
  private readonly resyncIntervalMs: number;
  /** Its passes over the targets: the wiring wakes the keys a target in an outage is owed once it is back. */
  readonly passes: TargetPasses;

  constructor(private readonly o: FollowReconcilerOptions) {
    this.resyncIntervalMs = o.resyncIntervalMs ?? 60_000;
    this.passes = new TargetPasses((key) => o.registry.health(key));
  }

  /**
   * Key mapper for copies in a target: the key of their source object, from the parent
   * annotations. A copy lives in its original's namespace; one whose annotations name another
   * maps to nothing (the target's server, or a user there, wrote them).
   */
  static keysOfCopy(kind: Kind, obj: Copy): string[] {
    const a = obj.metadata?.annotations ?? {};
    const name = a[PARENT_NAME_ANNOTATION];
    const ns = obj.metadata?.namespace;
    const parentNs = a[PARENT_NAMESPACE_ANNOTATION];
    if (parentNs && parentNs !== ns) return [];
    return name && ns ? [`${kind}/${ns}/${name}`] : [];
  }

  /**
   * Key mapper for proxies: every ConfigMap and Secret their delegate references (so binding and
   * deletion re-evaluate GC). Read from the proxy's own spec: the delegate's differs only in
   * scheduling fields, which reference neither, and parsing the saved manifest on every event
   * of every proxy was the largest cost of this mapper. A proxy whose manifest cannot be read
   * maps to keys too; their reconcile counts it as using nothing.
   */
  static keysOfProxy(proxy: V1Pod): string[] {
    const ns = proxy.metadata?.namespace;
    const spec = proxy.spec ?? { containers: [] };
    const { configmap, secret } = referencedNames(spec);
    return [...configmap.map((n) => `configmap/${ns}/${n}`), ...secret.map((n) => `secret/${ns}/${n}`)];
  }

  /**
   * Called by the delegation reconciler and the scheduler extender before they create a delegate
   * in `target`: creates or updates this source's copy of every ConfigMap and Secret the
   * delegate references, and returns the copies' names, for the delegate's spec. Idempotent;
   * maps nothing for a `self` target. A reference whose original does not exist here is left
   * out, so the delegate names it as it is (the target's own object of that name, if any, as
   * with Admiralty), with a Normal `CopySourceMissing` event on the proxy. The caller has
   * checked that the proxy may use `target` (`checkTenancy`).
   *
   * @throws CopyConflictError when a copy's name is taken by an object that is not that copy
   *   (a `CopyConflict` Warning on the proxy): the delegate must not read it.
   * @throws NotDelegatedError when the target refuses a copy (`SourceNotAuthorized`,
   *   `CopyForbidden`, `TargetNamespaceMissing`: see `refusalOf`), or when a Secret may never
   *   leave this cluster (`CopyRefused`: see `copyRefusal`), with a Warning of that reason on the
   *   proxy: no delegate is made without its copies.
   */
  async ensureCopies(proxy: V1Pod, target: TargetClient): Promise<CopyNames> {
    const names: CopyNames = { configmap: new Map(), secret: new Map() };
    if (target.self) return names;
    const ns = proxy.metadata!.namespace!;
    const refs = references(proxy);
    for (const kind of ['configmap', 'secret'] as const) {
      for (const name of refs[kind]) {
        const src = await this.source(kind, ns, name);
        if (!src) {
          // The delegate names it as it is: that must not be another source's copy, which a name
          // computed from that source's cluster name would otherwise reach. Ours are in the copies
          // cache; others' only through a read, on this path alone.
          const cache = kind === 'configmap' ? this.o.targetConfigMaps(target.key) : this.o.targetSecrets(target.key);
          const inTarget = cache?.get(name, ns) ?? (await this.readCopy(kind, ns, name, target));
          const conflict = missingOriginalConflict(kind, inTarget, this.o.sourceClusterName, target.displayName);
          if (conflict) {
            this.event(proxy, 'Warning', 'CopyConflict', conflict);
            throw new CopyConflictError(conflict);
          }
          // The delegate will wait for it, as the pod would at home, unless the target has its own.
          this.event(proxy, 'Normal', 'CopySourceMissing', `${kind} ${ns}/${name} does not exist here: the delegate in ${target.displayName} names it as it is`);
          continue;
        }
        const refused = copyRefusal(kind, src);
        if (refused) {
          this.event(proxy, 'Warning', 'CopyRefused', refused);
          throw new NotDelegatedError('CopyRefused', refused);
        }
        const as = copyName(name, this.o.sourceClusterName);
        let synced: boolean;
        try {
          synced = await this.sync(kind, src, target, as);
        } catch (err) {
          const refusal = await refusalOf(target, { kind, namespace: ns, name }, err);
          if (!refusal) throw err;
          this.event(proxy, 'Warning', refusal.reason, refusal.message);
          throw refusal;
        }
        if (!synced) {
          const message = `${kind} ${ns}/${as} in ${target.displayName}, the name of this cluster's copy of ${kind} ${name}, is taken by an object that is not that copy; no delegate is made to read it`;
          this.event(proxy, 'Warning', 'CopyConflict', message);
          throw new CopyConflictError(message);
        }
        names[kind].set(name, as);
      }
    }
    return names;
  }

  /**
   * Keeps the copies of one source object right in every non-self target: our copy exists (and
   * matches the source) exactly in the targets whose virtual node has a proxy that references
   * the object; elsewhere, and everywhere once the source object is gone, our copy is deleted
   * (UID precondition), as it is everywhere for an original that may never be copied
   * (`copyRefusal`). Proxies that are terminating still count while they are bound: their
   * delegate may still be running. Proxies that may not use their node's target
   * (`checkTenancy`) do not count. A copy under the original's own name (an earlier version's)
   * is kept while a delegate names it (see the class).
   */
  async reconcile(key: string): Promise<{ requeueAfterMs?: number } | void> {
    const parts = key.split('/');
    const [kind, ns, name] = parts as [Kind, string, string];
    if (parts.length !== 3 || (kind !== 'configmap' && kind !== 'secret') || !ns || !name) throw new TerminalError(`not a follow key: ${key}`);
    const original = await this.source(kind, ns, name);
    const src = original && !copyRefusal(kind, original) ? original : undefined;
    const usedIn = new Set<string>();
    let unboundUser = false;
    if (src) {
      for (const p of this.o.proxies.list(ns)) {
        if (p.metadata?.deletionTimestamp && !p.spec?.nodeName) continue;
        if (!p.spec?.nodeName && references(p)[kind].includes(name)) unboundUser = true;
        const target = p.spec?.nodeName ? this.o.registry.byNodeName(p.spec.nodeName) : undefined;
        // A pod that may not use the target gets no copies there, as it gets no delegate; a self
        // target is this cluster, where the originals already are.
        if (!target || target.self || !checkTenancy(p, this.o.namespaces.get(ns), target.ref).allowed) continue;
        if (references(p)[kind].includes(name)) usedIn.add(target.key);
      }
      for (const { proxy, targetKey } of this.o.placing?.(ns) ?? []) {
        if (references(proxy)[kind].includes(name)) usedIn.add(targetKey);
      }
    }
    const as = copyName(name, this.o.sourceClusterName);
    let earlierInUse = false;
    // A target out of reach is passed over, and the key comes back once it is reachable.
    await this.passes.each(
      key,
      this.o.registry.list().filter((t) => !t.self),
      async (target) => {
        // A conflict here has no proxy to tell: ensureCopies tells the next one that needs the copy.
        if (src && usedIn.has(target.key)) await this.sync(kind, src, target, as);
        else if (!unboundUser) await this.deleteCopy(kind, ns, as, name, target);
        if (await this.keepEarlierCopy(kind, ns, name, src, target, usedIn.has(target.key))) earlierInUse = true;
      },
    );
    // Nothing watches the original, nor the delegates that still name an earlier copy: look
    // again while a copy is in use (or may be).
    if (usedIn.size > 0 || unboundUser || earlierInUse) return { requeueAfterMs: this.resyncIntervalMs };
  }

  private async source(kind: Kind, ns: string, name: string): Promise<Copy | undefined> {
    try {
      return kind === 'configmap' ? await this.o.sourceCore.readNamespacedConfigMap({ name, namespace: ns }) : await this.o.sourceCore.readNamespacedSecret({ name, namespace: ns });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw new Error(`reading ${kind} ${ns}/${name}`, { cause: err });
    }
  }

  private async existingCopy(kind: Kind, ns: string, name: string, target: TargetClient): Promise<Copy | undefined> {
    const cache = kind === 'configmap' ? this.o.targetConfigMaps(target.key) : this.o.targetSecrets(target.key);
    return cache?.get(name, ns) ?? this.readCopy(kind, ns, name, target);
  }

  /** Reads `<ns>/<name>` in `target` directly; undefined when it does not exist. */
  private async readCopy(kind: Kind, ns: string, name: string, target: TargetClient): Promise<Copy | undefined> {
    try {
      return kind === 'configmap' ? await target.core.readNamespacedConfigMap({ name, namespace: ns }) : await target.core.readNamespacedSecret({ name, namespace: ns });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw new Error(`reading ${kind} ${ns}/${name} in ${target.displayName}`, { cause: err });
    }
  }

  /**
   * The copy an earlier version made under the original's own name `name` in `target`, if
   * there is one of ours: kept while one of this source's delegates there names it, and deleted
   * (UID precondition) once none does or the original is gone. Kept in sync only while a proxy
   * bound to `target` uses the original (`used`): what the target's caches hold (copies,
   * delegates) is the target's word, and never alone sends an original there. Read from the
   * caches only: a copy they have not seen yet wakes this key when they do. Returns whether it
   * is kept.
   */
  private async keepEarlierCopy(kind: Kind, ns: string, name: string, src: Copy | undefined, target: TargetClient, used: boolean): Promise<boolean> {
    const copies = kind === 'configmap' ? this.o.targetConfigMaps(target.key) : this.o.targetSecrets(target.key);
    const existing = copies?.get(name, ns);
    if (!existing || !isCopyOf(existing, this.o.sourceClusterName, name) || existing.metadata?.deletionTimestamp) return false;
    const delegates = this.o.delegates(target.key);
    // Not known yet: keep it, and look again.
    if (!delegates) return true;
    const named = (d: V1Pod) => isOurDelegate(d, this.o.sourceClusterName) && referencedNames(d.spec ?? { containers: [] })[kind].includes(name);
    if (src && delegates.list(ns).some(named)) {
      if (used) await this.sync(kind, src, target, name);
      return true;
    }
    await this.deleteObject(kind, existing, target);
    return false;
  }

  /**
   * Creates or updates our copy of `src` named `as` in `target`. An existing object there that
   * is not that copy ({@link isCopyOf}) is never touched: returns false. Idempotent.
   */
  private async sync(kind: Kind, src: Copy, target: TargetClient, as: string): Promise<boolean> {
    const ns = src.metadata!.namespace!;
    const parentName = src.metadata!.name!;
    const opts = { sourceClusterName: this.o.sourceClusterName, name: as };
    const desired = kind === 'configmap' ? buildConfigMapCopy(src as V1ConfigMap, opts) : buildSecretCopy(src as V1Secret, opts);
    const existing = await this.existingCopy(kind, ns, as, target);
    if (!existing) {
      if (await this.create(kind, desired, target)) return true;
      // It appeared since we looked (our own, through a lagging cache, or someone else's): whose
      // is it? Ours is brought up to date by the next pass.
      const appeared = await this.readCopy(kind, ns, as, target);
      return !!appeared && isCopyOf(appeared, this.o.sourceClusterName, parentName);
    }
    if (!isCopyOf(existing, this.o.sourceClusterName, parentName)) return false;
    if (!copyNeedsUpdate(existing, desired)) return true;
    if (copyNeedsRecreate(existing, desired)) {
      // Immutable content or a new Secret type: the apiserver refuses an update. Delete this very
      // object (UID precondition) and create the new one; if someone else recreates it in
      // between, the create fails with AlreadyExists and the retry looks again.
      await this.deleteObject(kind, existing, target);
      await this.create(kind, desired, target, true);
      return true;
    }
    const body = { ...desired, metadata: { ...desired.metadata, resourceVersion: existing.metadata?.resourceVersion } };
    try {
      if (kind === 'configmap') await target.core.replaceNamespacedConfigMap({ name: as, namespace: ns, body: body as V1ConfigMap });
      else await target.core.replaceNamespacedSecret({ name: as, namespace: ns, body: body as V1Secret });
    } catch (err) {
      // 409: the cache was stale; the retry reads the newer copy.
      throw new Error(`updating the copy ${as} of ${kind} ${ns}/${parentName} in ${target.displayName}`, { cause: err });
    }
    return true;
  }

  /** Creates `desired`; false when a first create finds the name taken (after a delete, that is an error: retry). */
  private async create(kind: Kind, desired: Copy, target: TargetClient, afterDelete = false): Promise<boolean> {
    const ns = desired.metadata!.namespace!;
    try {
      if (kind === 'configmap') await target.core.createNamespacedConfigMap({ namespace: ns, body: desired as V1ConfigMap });
      else await target.core.createNamespacedSecret({ namespace: ns, body: desired as V1Secret });
      return true;
    } catch (err) {
      if (isAlreadyExists(err) && !afterDelete) return false;
      throw new Error(`copying ${kind} ${ns}/${desired.metadata!.name} to ${target.displayName}`, { cause: err });
    }
  }

  /** Deletes one of our copies, exactly this object (UID precondition). */
  private async deleteObject(kind: Kind, existing: Copy, target: TargetClient): Promise<void> {
    const ns = existing.metadata!.namespace!;
    const name = existing.metadata!.name!;
    const args = { name, namespace: ns, body: { preconditions: { uid: existing.metadata?.uid } } };
    try {
      if (kind === 'configmap') await target.core.deleteNamespacedConfigMap(args);
      else await target.core.deleteNamespacedSecret(args);
    } catch (err) {
      if (!isNotFound(err)) throw new Error(`deleting the copy of ${kind} ${ns}/${name} in ${target.displayName}`, { cause: err });
    }
  }

  /** Deletes our copy `<ns>/<as>` of `<ns>/<name>` in `target`, if there is one; others' objects are left alone. */
  private async deleteCopy(kind: Kind, ns: string, as: string, name: string, target: TargetClient): Promise<void> {
    // The copies cache is enough here: a copy it has not seen yet wakes this key when it does.
    const cache = kind === 'configmap' ? this.o.targetConfigMaps(target.key) : this.o.targetSecrets(target.key);
    const existing = cache ? cache.get(as, ns) : await this.existingCopy(kind, ns, as, target);
    if (!existing || !isCopyOf(existing, this.o.sourceClusterName, name) || existing.metadata?.deletionTimestamp) return;
    await this.deleteObject(kind, existing, target);
  }

  private event(proxy: V1Pod, type: 'Normal' | 'Warning', reason: string, message: string): void {
    this.o.events.record({ kind: 'Pod', apiVersion: 'v1', metadata: { name: proxy.metadata?.name, namespace: proxy.metadata?.namespace, uid: proxy.metadata?.uid } }, type, reason, message);
  }
}
