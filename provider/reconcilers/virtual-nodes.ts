import { CoordinationV1Api, CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions, type V1Lease, type V1Node, type V1Pod } from '@kubernetes/client-node';
import type { ClusterRegistry, TargetHealth } from '../clusters/cluster-registry.js';
import { parseTargetKey, targetKey } from '../clusters/target-client.js';
import type { Clock } from '../core/clock.js';
import { isAlreadyExists, isConflict, isNotFound, statusMessage } from '../core/errors.js';
import { API_GROUP, API_VERSION, CLUSTER_TARGET_NAME_LABEL, TARGET_NAME_LABEL, TARGET_NAMESPACE_LABEL, VIRTUAL_KUBELET_PROVIDER_LABEL, VIRTUAL_KUBELET_PROVIDER_VALUE } from '../core/keys.js';
import { perObject } from '../core/per-object.js';
import { proxiesCountedBy } from '../model/counted.js';
import { LABEL_VALUE_MAX_LENGTH, labelValueFor, virtualNodeName } from '../model/names.js';
import { podRequestsWithOverhead, requestedByNode } from '../model/resources.js';
import { conditionsEqual, parseTarget, readyCondition, setCondition } from '../model/target.js';
import type { Target, TargetRef } from '../model/types.js';
import { buildNodeLease, buildVirtualNode, buildVirtualNodeMetadataPatch, buildVirtualNodeStatusPatch, NODE_LEASE_NAMESPACE } from '../model/virtual-node.js';
import type { EventSink } from '../core/event-sink.js';
import type { ObjectCache } from '../controller/object-cache.js';
import type { SelfTargetBindings } from './self-target-bindings.js';

export interface VirtualNodeReconcilerOptions {
  sourceCore: CoreV1Api;
  sourceCustom: CustomObjectsApi;
  sourceCoordination: CoordinationV1Api;
  targets: ObjectCache<Target>;
  clusterTargets: ObjectCache<Target>;
  /**
   * The source's virtual nodes (the informer that wakes this reconciler): a node found there is
   * not read from the apiserver; one that is not (not created yet, or not labelled as ours) is.
   */
  virtualNodes?: ObjectCache<V1Node>;
  /** Filled by the {@link TargetRegistryReconciler}: health and summary of each target, as last probed. */
  registry: Pick<ClusterRegistry, 'health' | 'summary' | 'get'>;
  /** This source's proxies bound to a virtual node (none when delegation does not run here). */
  proxiesOn?: (nodeName: string) => readonly V1Pod[];
  /** A proxy's delegate in the target's cache (`targetKey`), to tell whether the target's summary counts it. */
  delegateOf?: (targetKey: string, proxy: V1Pod) => V1Pod | undefined;
  /** Binds the source role to the provider for its self targets, and only for them. */
  selfBindings: Pick<SelfTargetBindings, 'ensure' | 'remove' | 'allowed'>;
  /** Where the kube-apiserver reaches our kubelet API. */
  kubelet: { address: string; port: number };
  kubeletVersion: string;
  events: EventSink;
  clock: Clock;
  /** How often the node status is written even when nothing changed (default 60 s). */
  nodeStatusIntervalMs?: number;
  /**
   * Called when a self target's binding was just written: the read side should probe again
   * soon (main wires it to the registry controller, {@link AFTER_BINDING_MS} later).
   */
  onBindingWritten?: (key: string) => void;
  /** Virtual nodes advertise what the targets' preemptible pods hold too (see `VirtualNodeInput.advertisePreemptible`): when a proxy scheduler runs. */
  advertisePreemptible?: boolean;
}

/** How soon a self target is probed again after its binding was written (the authorizer's cache lags a little). */
export const AFTER_BINDING_MS = 1_000;

/** How soon the binding of a self target that went is looked at again while its clients are still registered. */
export const SELF_CLIENTS_GONE_MS = 500;

/**
 * The write side of targets, run by the leader: turns each Target and ClusterTarget into a
 * virtual node and keeps it honest, from what the {@link TargetRegistryReconciler} (the read
 * side, on every replica) last probed and recorded in the registry.
 *
 * Key: `Target/<ns>/<name>` or `ClusterTarget/<name>`. Woken after every probe of the target
 * (the wiring enqueues it on the registry's `probed` event, so the probe period is the Lease
 * period), by its Target and by its virtual node: it renews the node Lease and patches the
 * node's labels and status when they change (and at least every `nodeStatusIntervalMs`). The
 * Target's `Ready` condition and events say why a target is not usable. One target's failure
 * never touches another's key. Until the target was probed once, it writes nothing.
 *
 * A self target first gets its binding of the source role (see {@link SelfTargetBindings}); the
 * read side registers its clients only once the apiserver says the binding is in force. The
 * binding goes with the target, once the read side has dropped the target's clients (their
 * watches stop with them): until then the binding's finalizer keeps it in force.
 */
export class VirtualNodeReconciler {
  private readonly lastStatusWriteMs = new Map<string, number>();
  /** Keys known to have no self binding left (saves a read per probe of every remote target). */
  private readonly unbound = new Set<string>();
  /** The health last told with an event, by key: one event per transition. */
  private readonly told = new Map<string, { ready: boolean; reason: string }>();
  private readonly nodeStatusIntervalMs: number;
  /** By virtual node: its Lease as our last write returned it, renewed next without a read (as the kubelet does). */
  private readonly nodeLeases = new Map<string, V1Lease>();
  /** Each cached proxy's requests, computed once per version of it, not on every write of its node. */
  private readonly requestsOf = perObject(podRequestsWithOverhead);

  constructor(private readonly o: VirtualNodeReconcilerOptions) {
    this.nodeStatusIntervalMs = o.nodeStatusIntervalMs ?? 60_000;
  }

  /** Key of a Target or ClusterTarget object. */
  static keyOf(obj: Target, kind: 'Target' | 'ClusterTarget'): string {
    return targetKey({ kind, namespace: kind === 'Target' ? (obj.metadata.namespace ?? '') : '', name: obj.metadata.name ?? '' });
  }

  /**
   * Key of the target behind a virtual node (from its identity labels), so a node deleted by
   * hand comes back at once. A name over 63 characters is hashed in its label
   * ({@link labelValueFor}): `known` (the Target caches) gives the object whose label value it
   * is; without a match the label value is taken as the name.
   */
  static keyOfNode(node: V1Node, known?: { targets: ObjectCache<Target>; clusterTargets: ObjectCache<Target> }): string[] {
    const l = node.metadata?.labels ?? {};
    if (l[VIRTUAL_KUBELET_PROVIDER_LABEL] !== VIRTUAL_KUBELET_PROVIDER_VALUE) return [];
    const fullName = (value: string, candidates: Target[] | undefined) =>
      value.length < LABEL_VALUE_MAX_LENGTH ? value : (candidates?.find((t) => labelValueFor(t.metadata.name ?? '') === value)?.metadata.name ?? value);
    const ns = l[TARGET_NAMESPACE_LABEL];
    const name = l[TARGET_NAME_LABEL];
    const ct = l[CLUSTER_TARGET_NAME_LABEL];
    if (ns && name) return [targetKey({ kind: 'Target', namespace: ns, name: fullName(name, known?.targets.list(ns)) })];
    if (ct) return [targetKey({ kind: 'ClusterTarget', namespace: '', name: fullName(ct, known?.clusterTargets.list()) })];
    return [];
  }

  async reconcile(key: string): Promise<{ requeueAfterMs?: number } | void> {
    const ref = parseTargetKey(key);
    const obj = ref.kind === 'Target' ? this.o.targets.get(ref.name, ref.namespace) : this.o.clusterTargets.get(ref.name);
    const nodeName = virtualNodeName(ref);
    if (!obj) {
      await this.removeTarget(key, nodeName);
      if (this.actsAsSelf(key)) return { requeueAfterMs: SELF_CLIENTS_GONE_MS };
      await this.o.selfBindings.remove(ref);
      this.unbound.delete(key);
      this.told.delete(key);
      return;
    }
    const parsed = parseTarget(obj, ref.kind);
    let bindingError: unknown;
    if (parsed.ok && parsed.spec.self) {
      this.unbound.delete(key);
      try {
        if (await this.o.selfBindings.ensure(ref, obj.metadata.uid)) this.o.onBindingWritten?.(key);
      } catch (err) {
        bindingError = err;
      }
    } else if (!this.unbound.has(key)) {
      // No longer (or never) self: take back what a self spec was granted, once nothing uses it.
      if (this.actsAsSelf(key)) return { requeueAfterMs: SELF_CLIENTS_GONE_MS };
      await this.o.selfBindings.remove(ref);
      this.unbound.add(key);
    }
    const probed = this.o.registry.health(key);
    if (!probed) return; // not probed yet: the probe wakes us
    // The read side sees only that the binding is not in force; we know why.
    const where = ref.kind === 'Target' ? `namespace ${ref.namespace}` : 'all namespaces';
    const health: TargetHealth = bindingError
      ? {
          ready: false,
          reason: 'TargetForbidden',
          message: `cannot bind ClusterRole multicluster-scheduler-source to the provider in ${where}: ${statusMessage(bindingError)}`,
          sinceMs: probed.ready ? this.o.clock.now() : probed.sinceMs,
        }
      : probed;
    this.tellHealth(key, ref, obj, health);
    const node = await this.ensureNode(key, ref, nodeName, obj, health);
    if (node) await this.renewLease(node);
    await this.writeTargetStatus(ref, obj, nodeName, health);
  }

  /**
   * Whether this replica still holds the self clients of a target (the read side drops them on
   * its own round): their watches act with the binding, which must not go before them.
   */
  private actsAsSelf(key: string): boolean {
    return this.o.registry.get(key)?.self === true;
  }

  /** Says with an event when a target's health changed since we last said (or first saw it). */
  private tellHealth(key: string, ref: TargetRef, obj: Target, health: TargetHealth): void {
    const prev = this.told.get(key);
    if (prev && prev.ready === health.ready && prev.reason === health.reason) return;
    this.told.set(key, { ready: health.ready, reason: health.reason });
    const involved = { kind: ref.kind, apiVersion: `${API_GROUP}/${API_VERSION}`, metadata: { name: ref.name, namespace: ref.kind === 'Target' ? ref.namespace : undefined, uid: obj.metadata.uid } };
    this.o.events.record(involved, health.ready ? 'Normal' : 'Warning', health.reason, health.message);
  }

  private async ensureNode(key: string, ref: TargetRef, nodeName: string, obj: Target, health: TargetHealth): Promise<V1Node | undefined> {
    const now = new Date(this.o.clock.now());
    // A target that is not ready offers nothing, whatever it offered when last read.
    const summary = health.ready ? this.o.registry.summary(key)?.summary : undefined;
    const delegateOf = this.o.delegateOf && ((proxy: V1Pod) => this.o.delegateOf!(key, proxy));
    const parsed = parseTarget(obj, ref.kind);
    const desired = buildVirtualNode({
      ref,
      summary,
      excludedLabelsRegexp: parsed.ok ? obj.spec?.excludedLabelsRegexp : null,
      burstCapacity: parsed.ok ? parsed.spec.placement.burstCapacity : undefined,
      health: { ready: health.ready, reason: health.reason, message: health.message, lastTransitionTime: new Date(health.sinceMs).toISOString() },
      kubelet: this.o.kubelet,
      nodeInfo: { kubeletVersion: this.o.kubeletVersion },
      now: now.toISOString(),
      // The proxies whose delegates the summary counts: their room is already gone from its free.
      heldByProxies: requestedByNode(proxiesCountedBy(this.o.proxiesOn?.(nodeName) ?? [], summary, delegateOf), this.requestsOf).get(nodeName),
      advertisePreemptible: this.o.advertisePreemptible,
    });
    let existing = this.o.virtualNodes?.get(nodeName);
    if (!existing) {
      try {
        existing = await this.o.sourceCore.readNode({ name: nodeName });
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }
    if (!existing) {
      try {
        const created = await this.o.sourceCore.createNode({ body: desired });
        // Status is ignored on create: write it through the status subresource.
        await this.patchNodeStatus(nodeName, buildVirtualNodeStatusPatch(created, desired, { heartbeat: true }));
        this.lastStatusWriteMs.set(key, this.o.clock.monotonicMs());
        this.o.events.record(
          { kind: 'Node', apiVersion: 'v1', metadata: { name: nodeName, uid: created.metadata?.uid } },
          'Normal',
          'VirtualNodeCreated',
          `virtual node for ${ref.kind} ${ref.kind === 'Target' ? `${ref.namespace}/` : ''}${ref.name}`,
        );
        return created;
      } catch (err) {
        if (isAlreadyExists(err)) return undefined; // the next round patches it
        throw new Error(`creating virtual node ${nodeName}`, { cause: err });
      }
    }
    if (existing.metadata?.labels?.[VIRTUAL_KUBELET_PROVIDER_LABEL] !== VIRTUAL_KUBELET_PROVIDER_VALUE) {
      throw new Error(`node ${nodeName} exists and is not a virtual node of ours; refusing to take it over`);
    }
    const metadataPatch = buildVirtualNodeMetadataPatch(existing, desired);
    if (metadataPatch) {
      await this.o.sourceCore.patchNode({ name: nodeName, body: metadataPatch }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
    }
    // On the monotonic clock: after a step back of the wall clock, the heartbeat stays on time.
    const heartbeat = this.o.clock.monotonicMs() - (this.lastStatusWriteMs.get(key) ?? -Infinity) >= this.nodeStatusIntervalMs;
    const statusPatch = buildVirtualNodeStatusPatch(existing, desired, { heartbeat });
    if (statusPatch) {
      await this.patchNodeStatus(nodeName, statusPatch);
      this.lastStatusWriteMs.set(key, this.o.clock.monotonicMs());
    }
    return existing;
  }

  private async patchNodeStatus(nodeName: string, status: unknown): Promise<void> {
    if (!status) return;
    await this.o.sourceCore.patchNodeStatus({ name: nodeName, body: { status } }, setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch));
  }

  /**
   * Renews the virtual node's Lease. The Lease our last write returned is written back renewed,
   * without a read; if someone else wrote it since (409) or it is gone (404), it is read, or
   * created, as on the first round.
   */
  private async renewLease(node: V1Node): Promise<void> {
    const name = node.metadata!.name!;
    const lease = buildNodeLease(name, node.metadata!.uid!, new Date(this.o.clock.now()).toISOString());
    const renew = (existing: V1Lease): V1Lease => ({ ...existing, spec: { ...existing.spec, ...lease.spec, acquireTime: existing.spec?.acquireTime ?? lease.spec?.acquireTime } });
    const replace = async (body: V1Lease) => this.nodeLeases.set(name, await this.o.sourceCoordination.replaceNamespacedLease({ name, namespace: NODE_LEASE_NAMESPACE, body }));
    const held = this.nodeLeases.get(name);
    this.nodeLeases.delete(name);
    if (held) {
      try {
        await replace(renew(held));
        return;
      } catch (err) {
        if (!isConflict(err) && !isNotFound(err)) throw new Error(`renewing the Lease of ${name}`, { cause: err });
      }
    }
    try {
      await replace(renew(await this.o.sourceCoordination.readNamespacedLease({ name, namespace: NODE_LEASE_NAMESPACE })));
    } catch (err) {
      if (!isNotFound(err)) throw new Error(`renewing the Lease of ${name}`, { cause: err });
      const created = await this.o.sourceCoordination.createNamespacedLease({ namespace: NODE_LEASE_NAMESPACE, body: lease }).catch((e) => {
        if (!isAlreadyExists(e)) throw e;
      });
      if (created) this.nodeLeases.set(name, created);
    }
  }

  private async writeTargetStatus(ref: TargetRef, obj: Target, nodeName: string, health: TargetHealth): Promise<void> {
    const now = new Date(this.o.clock.now()).toISOString();
    const conditions = setCondition(obj.status?.conditions, readyCondition(health.ready, health.reason, health.message, obj.metadata.generation), now);
    if (conditionsEqual(conditions, obj.status?.conditions) && obj.status?.virtualNodeName === nodeName && obj.status?.observedGeneration === obj.metadata.generation) return;
    const body = { status: { conditions, virtualNodeName: nodeName, observedGeneration: obj.metadata.generation } };
    const opts = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
    const plural = ref.kind === 'Target' ? 'targets' : 'clustertargets';
    try {
      if (ref.kind === 'Target') {
        await this.o.sourceCustom.patchNamespacedCustomObjectStatus({ group: API_GROUP, version: API_VERSION, plural, namespace: ref.namespace, name: ref.name, body }, opts);
      } else {
        await this.o.sourceCustom.patchClusterCustomObjectStatus({ group: API_GROUP, version: API_VERSION, plural, name: ref.name, body }, opts);
      }
    } catch (err) {
      if (!isNotFound(err)) throw new Error(`writing the status of ${ref.kind} ${ref.name}`, { cause: err });
    }
  }

  /** The Target is gone: its virtual node goes (its Lease follows by owner reference); the read side drops its clients. */
  private async removeTarget(key: string, nodeName: string): Promise<void> {
    this.lastStatusWriteMs.delete(key);
    this.nodeLeases.delete(nodeName);
    try {
      const node = await this.o.sourceCore.readNode({ name: nodeName });
      if (node.metadata?.labels?.[VIRTUAL_KUBELET_PROVIDER_LABEL] !== VIRTUAL_KUBELET_PROVIDER_VALUE) return;
      await this.o.sourceCore.deleteNode({ name: nodeName, body: { preconditions: { uid: node.metadata!.uid } } });
    } catch (err) {
      if (!isNotFound(err)) throw new Error(`deleting virtual node ${nodeName}`, { cause: err });
    }
    try {
      const lease = await this.o.sourceCoordination.readNamespacedLease({ name: nodeName, namespace: NODE_LEASE_NAMESPACE });
      // Only the Lease our node held (it normally goes with the node, by owner reference).
      if (lease.spec?.holderIdentity === nodeName) {
        await this.o.sourceCoordination.deleteNamespacedLease({ name: nodeName, namespace: NODE_LEASE_NAMESPACE, body: { preconditions: { uid: lease.metadata?.uid } } });
      }
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }
}
