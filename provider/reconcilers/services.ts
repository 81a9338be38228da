import type { CoreV1Api, V1Pod, V1Service } from '@kubernetes/client-node';
import type { ClusterRegistry } from '../clusters/cluster-registry.js';
import type { TargetClient } from '../clusters/target-client.js';
import { classifyApiError, isAlreadyExists, isNotFound, TerminalError } from '../core/errors.js';
import { IS_DELEGATE_ANNOTATION, ORIGINAL_SELECTOR_ANNOTATION, PARENT_NAME_ANNOTATION, PARENT_NAMESPACE_ANNOTATION } from '../core/keys.js';
import { isOurDelegate } from '../model/delegate-pod.js';
import { isOwnedCopy } from '../model/follow.js';
import { equalNormalized } from '../model/normalize.js';
import { buildReroutedService, buildServiceCopy, originalSelector, serviceCopyDrops, serviceCopyNeedsUpdate, serviceCopyRefusal } from '../model/service.js';
import type { EventSink } from '../core/event-sink.js';
import type { ObjectCache } from '../controller/object-cache.js';
import { TargetPasses } from './target-passes.js';

export interface ServiceReconcilerOptions {
  sourceCore: CoreV1Api;
  services: ObjectCache<V1Service>;
  proxies: ObjectCache<V1Pod>;
  registry: ClusterRegistry;
  sourceClusterName: string;
  events: EventSink;
  targetServices: (targetKey: string) => ObjectCache<V1Service> | undefined;
  delegates: (targetKey: string) => ObjectCache<V1Pod> | undefined;
}

const matches = (selector: Record<string, string>, labels: Record<string, string> | undefined) => Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels?.[k] === v);

/** A key mapper must not throw: a Service with a broken no-prefix regexp selects nothing here (its own reconcile reports it). */
function safeOriginalSelector(svc: V1Service): Record<string, string> {
  try {
    return originalSelector(svc);
  } catch {
    return {};
  }
}

/**
 * Services that select proxy pods follow their delegates. Key: `<ns>/<name>` of a Service in
 * the source. Its selector is rerouted to the delegates' prefixed labels (the original kept in
 * an annotation), it is annotated as a global service, and a copy (cluster IPs cleared) is kept
 * in every non-self target that runs a delegate of a matching proxy; copies elsewhere, and
 * copies of a deleted Service, are deleted. A copy is never re-propagated, and a same-name
 * Service in a target that is not ours is left alone.
 *
 * A copy claims nothing in its target ({@link buildServiceCopy}: a ClusterIP Service without
 * external IPs, node ports or load-balancer settings); what it leaves out is said in one Warning
 * `CopyFieldsDropped` on the Service each time a reconcile creates or rewrites copies, so it
 * comes with every change the copies take and never with a reconcile that writes nothing. An
 * ExternalName Service is neither rerouted nor copied, and copies of ours of it are deleted.
 */
export class ServiceReconciler {
  /** Its passes over the targets: the wiring wakes the keys a target in an outage is owed once it is back. */
  readonly passes: TargetPasses;

  constructor(private readonly o: ServiceReconcilerOptions) {
    this.passes = new TargetPasses((key) => o.registry.health(key));
  }

  /** Key mapper for source Services: `<ns>/<name>`. */
  static keyOf(svc: V1Service): string {
    return `${svc.metadata?.namespace}/${svc.metadata?.name}`;
  }

  /** Key mapper for Service copies in a target: their source Service, from the parent annotations. */
  static keysOfCopy(svc: V1Service): string[] {
    const a = svc.metadata?.annotations ?? {};
    const name = a[PARENT_NAME_ANNOTATION];
    const ns = a[PARENT_NAMESPACE_ANNOTATION] || svc.metadata?.namespace;
    return name && ns ? [`${ns}/${name}`] : [];
  }

  /** Services of the proxy's namespace whose (original) selector matches it. */
  keysOfProxy(proxy: V1Pod): string[] {
    return this.o.services
      .list(proxy.metadata?.namespace)
      .filter((s) => !(IS_DELEGATE_ANNOTATION in (s.metadata?.annotations ?? {})) && matches(safeOriginalSelector(s), proxy.metadata?.labels))
      .map(ServiceReconciler.keyOf);
  }

  /** A delegate moving may change where copies are needed: wake the rerouted services of its namespace. */
  keysOfDelegate(delegate: V1Pod): string[] {
    const ns = delegate.metadata?.annotations?.[PARENT_NAMESPACE_ANNOTATION] ?? delegate.metadata?.namespace;
    return this.o.services
      .list(ns)
      .filter((s) => ORIGINAL_SELECTOR_ANNOTATION in (s.metadata?.annotations ?? {}))
      .map(ServiceReconciler.keyOf);
  }

  /**
   * Reroutes one source Service and keeps its copies right. Idempotent; every remote write is
   * preceded by an ownership check, deletes carry a UID precondition.
   */
  async reconcile(key: string): Promise<void> {
    const slash = key.indexOf('/');
    if (slash <= 0 || slash === key.length - 1) throw new TerminalError(`not a service key: ${key}`);
    const ns = key.slice(0, slash);
    const name = key.slice(slash + 1);
    const svc = this.o.services.get(name, ns);
    const nonSelf = this.o.registry.list().filter((t) => !t.self);
    if (!svc) {
      await this.passes.each(key, nonSelf, (t) => this.deleteCopy(ns, name, t));
      return;
    }
    if (IS_DELEGATE_ANNOTATION in (svc.metadata?.annotations ?? {})) return;
    if (serviceCopyRefusal(svc)) {
      await this.passes.each(key, nonSelf, (t) => this.deleteCopy(ns, name, t));
      return;
    }
    const selector = originalSelector(svc);
    // Proxies keep the user's labels, so the user's (original) selector finds them.
    const proxies = this.o.proxies.list(ns).filter((p) => matches(selector, p.metadata?.labels));
    const wanted = new Set<string>();
    for (const p of proxies) {
      const t = p.spec?.nodeName ? this.o.registry.byNodeName(p.spec.nodeName) : undefined;
      if (t && !t.self && this.runsDelegateOf(t, p)) wanted.add(t.key);
    }
    let rerouted = svc;
    if (proxies.length > 0) {
      rerouted = buildReroutedService(svc);
      if (!equalNormalized(rerouted.spec?.selector, svc.spec?.selector) || !equalNormalized(rerouted.metadata?.annotations, svc.metadata?.annotations)) {
        // An update with the cached resourceVersion: a 409 means the user changed it; retry.
        try {
          await this.o.sourceCore.replaceNamespacedService({ name, namespace: ns, body: rerouted });
        } catch (err) {
          throw new Error(`rerouting service ${ns}/${name}`, { cause: err });
        }
      }
    }
    // A target out of reach is passed over, and the key comes back once it is reachable.
    const written: string[] = [];
    try {
      await this.passes.each(key, nonSelf, async (t) => {
        if (!wanted.has(t.key)) return this.deleteCopy(ns, name, t);
        if (await this.ensureCopy(rerouted, t)) written.push(t.displayName);
      });
    } finally {
      // Said when copies change, even if another target's pass failed: the written ones are not written again.
      const drops = written.length > 0 ? serviceCopyDrops(rerouted) : [];
      if (drops.length > 0) {
        this.o.events.record(
          { kind: 'Service', apiVersion: 'v1', metadata: { name, namespace: ns, uid: svc.metadata?.uid } },
          'Warning',
          'CopyFieldsDropped',
          `the copies in ${written.join(', ')} are ClusterIP Services without: ${drops.join(', ')}`,
        );
      }
    }
  }

  /**
   * Whether `t` runs a delegate of `proxy`, per the target's delegate cache. Without a cache
   * (the target's informers are not running yet) the binding stands in for it, so that copies
   * are not garbage-collected on missing information.
   */
  private runsDelegateOf(t: TargetClient, proxy: V1Pod): boolean {
    const cache = this.o.delegates(t.key);
    if (!cache) return true;
    const uid = proxy.metadata?.uid;
    return !!uid && cache.list(proxy.metadata?.namespace).some((d) => isOurDelegate(d, this.o.sourceClusterName, uid));
  }

  private async existing(ns: string, name: string, t: TargetClient): Promise<V1Service | undefined> {
    const cached = this.o.targetServices(t.key)?.get(name, ns);
    if (cached) return cached;
    try {
      return await t.core.readNamespacedService({ name, namespace: ns });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw new Error(`reading service ${ns}/${name} in ${t.displayName}`, { cause: err });
    }
  }

  /** Makes `t`'s copy of `svc` right; whether it created or rewrote it. */
  private async ensureCopy(svc: V1Service, t: TargetClient): Promise<boolean> {
    const ns = svc.metadata!.namespace!;
    const name = svc.metadata!.name!;
    const desired = buildServiceCopy(svc, { sourceClusterName: this.o.sourceClusterName });
    const existing = await this.existing(ns, name, t);
    if (!existing) return this.createCopy(desired, t);
    if (!isOwnedCopy(existing, this.o.sourceClusterName)) {
      this.o.events.record(
        { kind: 'Service', apiVersion: 'v1', metadata: { name, namespace: ns, uid: svc.metadata?.uid } },
        'Warning',
        'CopyConflict',
        `service ${ns}/${name} already exists in ${t.displayName} and is not ours`,
      );
      return false;
    }
    // Being deleted (recreated below, or by someone): its deletion wakes this key.
    if (existing.metadata?.deletionTimestamp) return false;
    if (!serviceCopyNeedsUpdate(existing, desired)) return false;
    // The spec is the desired one whole, so that whatever an earlier version copied (external
    // IPs, a load-balancer type, node ports) goes; only what the target allocated is kept.
    const body: V1Service = {
      ...existing,
      metadata: { ...existing.metadata, labels: desired.metadata?.labels, annotations: desired.metadata?.annotations },
      spec: { ...desired.spec, clusterIP: existing.spec?.clusterIP, clusterIPs: existing.spec?.clusterIPs, ipFamilies: existing.spec?.ipFamilies },
    };
    try {
      await t.core.replaceNamespacedService({ name, namespace: ns, body });
      return true;
    } catch (err) {
      if (classifyApiError(err) !== 'Invalid') throw new Error(`updating the copy of service ${ns}/${name} in ${t.displayName}`, { cause: err });
    }
    // Refused as invalid: a change the apiserver makes only on a new object (a cluster IP
    // turned headless, say). Make the copy again.
    await t.core.deleteNamespacedService({ name, namespace: ns, body: { preconditions: { uid: existing.metadata?.uid } } }).catch((err) => {
      if (!isNotFound(err)) throw new Error(`deleting the copy of service ${ns}/${name} in ${t.displayName} to make it again`, { cause: err });
    });
    return this.createCopy(desired, t);
  }

  /** Creates a copy; false when the name is taken already (the cache, or a deletion, lags: the copy's event wakes the key). */
  private async createCopy(desired: V1Service, t: TargetClient): Promise<boolean> {
    const { name, namespace } = desired.metadata!;
    try {
      await t.core.createNamespacedService({ namespace: namespace!, body: desired });
      return true;
    } catch (err) {
      if (isAlreadyExists(err)) return false;
      throw new Error(`copying service ${namespace}/${name} to ${t.displayName}`, { cause: err });
    }
  }

  private async deleteCopy(ns: string, name: string, t: TargetClient): Promise<void> {
    // The copies cache is enough here: a copy it has not seen yet wakes this key when it does.
    const cache = this.o.targetServices(t.key);
    const existing = cache ? cache.get(name, ns) : await this.existing(ns, name, t);
    if (!existing || !isOwnedCopy(existing, this.o.sourceClusterName) || existing.metadata?.deletionTimestamp) return;
    await t.core.deleteNamespacedService({ name, namespace: ns, body: { preconditions: { uid: existing.metadata?.uid } } }).catch((err) => {
      if (!isNotFound(err)) throw new Error(`deleting the copy of service ${ns}/${name} in ${t.displayName}`, { cause: err });
    });
  }
}
