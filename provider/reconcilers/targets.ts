import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1Node,
  type V1Pod,
} from '@kubernetes/client-node';
import type { ClusterRegistry, TargetHealth } from '../clusters/cluster-registry.js';
import { withRequestDeadline } from '../clusters/request-deadline.js';
import type { ServerAddressPolicy } from '../clusters/server-address-policy.js';
import { KubeconfigError } from '../clusters/target-kubeconfig.js';
import { createTargetClient, kubeConfigFromSecret, parseTargetKey, targetKey, type TargetClient } from '../clusters/target-client.js';
import type { Clock } from '../core/clock.js';
import { classifyApiError, isAlreadyExists, isNotFound, statusMessage } from '../core/errors.js';
import {
  API_GROUP,
  API_VERSION,
  CLUSTER_SUMMARY_NAME,
  CLUSTER_TARGET_NAME_LABEL,
  TARGET_NAME_LABEL,
  TARGET_NAMESPACE_LABEL,
  VIRTUAL_KUBELET_PROVIDER_LABEL,
  VIRTUAL_KUBELET_PROVIDER_VALUE,
} from '../core/keys.js';
import { virtualNodeName } from '../model/names.js';
import { requestedByNode } from '../model/resources.js';
import { conditionsEqual, parseTarget, readyCondition, setCondition, type NormalizedTargetSpec } from '../model/target.js';
import type { ClusterSummary, Target, TargetRef } from '../model/types.js';
import { buildNodeLease, buildVirtualNode, buildVirtualNodeLabelsPatch, buildVirtualNodeStatusPatch, NODE_LEASE_NAMESPACE } from '../model/virtual-node.js';
import type { EventSink } from './event-sink.js';
import type { ObjectCache } from './object-cache.js';
import type { SelfTargetBindings } from './self-target-bindings.js';

export interface TargetsReconcilerOptions {
  sourceKubeConfig: KubeConfig;
  sourceCore: CoreV1Api;
  sourceCustom: CustomObjectsApi;
  sourceCoordination: CoordinationV1Api;
  targets: ObjectCache<Target>;
  clusterTargets: ObjectCache<Target>;
  registry: ClusterRegistry;
  /** Which addresses a Target's kubeconfig may point at. */
  serverPolicy: ServerAddressPolicy;
  /** Deadline of each API call to a target from a Secret (default 30 s); self targets share the source's. */
  requestTimeoutMs?: number;
  /** This source's proxies bound to a virtual node (none when delegation does not run here). */
  proxiesOn?: (nodeName: string) => readonly V1Pod[];
  /** Binds the source role to the provider for its self targets, and only for them. */
  selfBindings: Pick<SelfTargetBindings, 'ensure' | 'remove' | 'allowed'>;
  /** Where the kube-apiserver reaches our kubelet API. */
  kubelet: { address: string; port: number };
  kubeletVersion: string;
  events: EventSink;
  clock: Clock;
  /** How often the node status is written even when nothing changed (default 60 s). */
  nodeStatusIntervalMs?: number;
  /** How often each target is probed and its node Lease renewed (default 10 s). */
  leaseIntervalMs?: number;
  /** Budget of one probe of a target's API (default 5 s). */
  probeTimeoutMs?: number;
  /** Called with each target's readiness, for the `admiralty_target_ready` gauge. */
  onHealth?: (target: string, ready: boolean) => void;
}

/** How soon a self target is probed again after its binding was written (the authorizer's cache lags a little). */
const AFTER_BINDING_MS = 1_000;

/** A target's health as probed, with the summary when it was read. */
interface Probe {
  health: Omit<TargetHealth, 'sinceMs'>;
  summary?: ClusterSummary;
  client?: TargetClient;
}

/**
 * Turns each Target and ClusterTarget into a virtual node and keeps it honest.
 *
 * Key: `Target/<ns>/<name>` or `ClusterTarget/<name>`. Level-based and periodic: every
 * `leaseIntervalMs` it re-reads the Target's kubeconfig Secret (so fixing a Secret heals the
 * target without a restart), probes the target by reading its ClusterSummary, renews the node
 * Lease, and patches the node's labels and status when they change (and at least every
 * `nodeStatusIntervalMs`). The Target's `Ready` condition and events say why a target is not
 * usable. One target's failure never touches another's key.
 *
 * A self target first gets its binding of the source role (see {@link SelfTargetBindings}); its
 * clients join the registry only once the apiserver says the binding is in force, so no
 * per-target informer starts with rights it does not have. The binding goes with the target.
 */
export class TargetsReconciler {
  private readonly lastStatusWriteMs = new Map<string, number>();
  /** Keys known to have no self binding left (saves a read per probe of every remote target). */
  private readonly unbound = new Set<string>();
  private readonly nodeStatusIntervalMs: number;
  private readonly leaseIntervalMs: number;
  private readonly probeTimeoutMs: number;

  constructor(private readonly o: TargetsReconcilerOptions) {
    this.nodeStatusIntervalMs = o.nodeStatusIntervalMs ?? 60_000;
    this.leaseIntervalMs = o.leaseIntervalMs ?? 10_000;
    this.probeTimeoutMs = o.probeTimeoutMs ?? 5_000;
  }

  /** Key of a Target or ClusterTarget object. */
  static keyOf(obj: Target, kind: 'Target' | 'ClusterTarget'): string {
    return targetKey({ kind, namespace: kind === 'Target' ? obj.metadata.namespace ?? '' : '', name: obj.metadata.name ?? '' });
  }

  /** Key of the target behind a virtual node (from its identity labels), so a node deleted by hand comes back at once. */
  static keyOfNode(node: V1Node): string[] {
    const l = node.metadata?.labels ?? {};
    if (l[VIRTUAL_KUBELET_PROVIDER_LABEL] !== VIRTUAL_KUBELET_PROVIDER_VALUE) return [];
    const ns = l[TARGET_NAMESPACE_LABEL];
    const name = l[TARGET_NAME_LABEL];
    const ct = l[CLUSTER_TARGET_NAME_LABEL];
    if (ns && name) return [targetKey({ kind: 'Target', namespace: ns, name })];
    if (ct) return [targetKey({ kind: 'ClusterTarget', namespace: '', name: ct })];
    return [];
  }

  async reconcile(key: string): Promise<{ requeueAfterMs?: number } | void> {
    const ref = parseTargetKey(key);
    const obj = ref.kind === 'Target' ? this.o.targets.get(ref.name, ref.namespace) : this.o.clusterTargets.get(ref.name);
    const nodeName = virtualNodeName(ref);
    if (!obj) {
      await this.removeTarget(key, nodeName);
      await this.o.selfBindings.remove(ref);
      this.unbound.delete(key);
      return;
    }
    const parsed = parseTarget(obj, ref.kind);
    let bindingWritten = false;
    let bindingError: unknown;
    if (parsed.ok && parsed.spec.self) {
      this.unbound.delete(key);
      try {
        bindingWritten = await this.o.selfBindings.ensure(ref, obj.metadata.uid);
      } catch (err) {
        bindingError = err;
      }
    } else if (!this.unbound.has(key)) {
      // No longer (or never) self: take back what a self spec was granted.
      await this.o.selfBindings.remove(ref);
      this.unbound.add(key);
    }
    const probe = await this.probe(ref, obj, nodeName, bindingError);
    const health = this.recordHealth(key, ref, obj, probe);
    const node = await this.ensureNode(key, ref, nodeName, obj, probe, health);
    if (node) await this.renewLease(node);
    await this.writeTargetStatus(ref, obj, nodeName, health);
    return { requeueAfterMs: bindingWritten && !health.ready ? AFTER_BINDING_MS : this.leaseIntervalMs };
  }

  /** Validates the Target, builds its clients and reads its ClusterSummary. Never throws. */
  private async probe(ref: TargetRef, obj: Target, nodeName: string, bindingError?: unknown): Promise<Probe> {
    const parsed = parseTarget(obj, ref.kind);
    if (!parsed.ok) {
      this.o.registry.deleteClient(targetKey(ref));
      return { health: { ready: false, reason: parsed.reason, message: parsed.message } };
    }
    let client: TargetClient;
    try {
      client = await this.buildClient(ref, parsed.spec);
    } catch (err) {
      this.o.registry.deleteClient(targetKey(ref));
      if (err instanceof KubeconfigError) return { health: { ready: false, reason: err.reason, message: err.message } };
      const kind = classifyApiError(err);
      return { health: { ready: false, reason: kind === 'Forbidden' ? 'SecretForbidden' : 'SecretUnreadable', message: `reading the kubeconfig Secret: ${statusMessage(err)}` } };
    }
    if (client.self) {
      const forbidden = await this.selfForbidden(ref, bindingError);
      if (forbidden) {
        this.o.registry.deleteClient(targetKey(ref));
        return { health: { ready: false, reason: 'TargetForbidden', message: forbidden } };
      }
    }
    this.o.registry.set(client, nodeName);
    try {
      const summary = (await withTimeout(
        this.o.clock,
        client.custom.getClusterCustomObject({ group: API_GROUP, version: API_VERSION, plural: 'clustersummaries', name: CLUSTER_SUMMARY_NAME }),
        this.probeTimeoutMs,
        `the target's API did not answer within ${this.probeTimeoutMs} ms`,
      )) as ClusterSummary;
      const namespace = ref.kind === 'Target' ? ref.namespace : undefined;
      if (namespace && !client.self) {
        // The summary is readable cluster-wide; delegates need rights in this namespace, which a
        // Source in that namespace of the target grants. Say so rather than fail on every pod.
        try {
          await withTimeout(this.o.clock, client.core.listNamespacedPod({ namespace, limit: 1 }), this.probeTimeoutMs, `the target's API did not answer within ${this.probeTimeoutMs} ms`);
        } catch (err) {
          if (classifyApiError(err) === 'Forbidden') {
            return { client, health: { ready: false, reason: 'TargetForbidden', message: `our identity may not manage pods in namespace ${namespace} of the target: create a Source for it there (${statusMessage(err)})` } };
          }
          throw err;
        }
      }
      this.o.registry.setSummary(targetKey(ref), summary, this.o.clock.now());
      return { client, summary, health: { ready: true, reason: 'TargetReady', message: `target reachable at ${client.kubeConfig.getCurrentCluster()?.server}` } };
    } catch (err) {
      const kind = classifyApiError(err);
      const server = client.kubeConfig.getCurrentCluster()?.server;
      const reasons: Record<string, string> = {
        Forbidden: 'TargetForbidden',
        Unauthorized: 'TargetUnauthorized',
        NotFound: 'ClusterSummaryMissing',
      };
      const reason = reasons[kind] ?? 'TargetUnreachable';
      const message =
        kind === 'NotFound'
          ? `the target at ${server} has no ClusterSummary "${CLUSTER_SUMMARY_NAME}": install the provider (or at least its CRDs and summary controller) there`
          : `${kind === 'Forbidden' || kind === 'Unauthorized' ? 'the target refused our credentials' : 'cannot reach the target'} at ${server}: ${statusMessage(err)}`;
      return { client, health: { ready: false, reason, message } };
    }
  }

  /** Why the provider may not (yet) act as a source in its own cluster for this target, if it may not. */
  private async selfForbidden(ref: TargetRef, bindingError: unknown): Promise<string | undefined> {
    const where = ref.kind === 'Target' ? `namespace ${ref.namespace}` : 'all namespaces';
    if (bindingError) return `cannot bind ClusterRole multicluster-scheduler-source to the provider in ${where}: ${statusMessage(bindingError)}`;
    try {
      if (await this.o.selfBindings.allowed(ref)) return undefined;
      return `the provider may not create pods in ${where} yet (its binding of multicluster-scheduler-source is not in force)`;
    } catch (err) {
      return `cannot check the provider's own rights in ${where}: ${statusMessage(err)}`;
    }
  }

  private async buildClient(ref: TargetRef, spec: NormalizedTargetSpec): Promise<TargetClient> {
    const existing = this.o.registry.get(targetKey(ref));
    if (spec.self) return existing?.fingerprint === 'self' ? existing : createTargetClient(ref, this.o.sourceKubeConfig, 'self', true);
    const s = spec.kubeconfigSecret!;
    let secret;
    try {
      secret = await this.o.sourceCore.readNamespacedSecret({ name: s.name, namespace: s.namespace });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    const { kubeConfig, fingerprint } = kubeConfigFromSecret(secret, { secretName: s.name, secretNamespace: s.namespace, key: s.key, context: s.context }, this.o.serverPolicy, existing?.self ? undefined : existing);
    if (existing && existing.fingerprint === fingerprint) return existing;
    return createTargetClient(ref, withRequestDeadline(kubeConfig, this.o.requestTimeoutMs ?? 30_000), fingerprint, false);
  }

  /** Stores the health in the registry, keeping the transition time, and says so with events on change. */
  private recordHealth(key: string, ref: TargetRef, obj: Target, probe: Probe): TargetHealth {
    const now = this.o.clock.now();
    const prev = this.o.registry.health(key);
    const health: TargetHealth = { ...probe.health, sinceMs: prev && prev.ready === probe.health.ready ? prev.sinceMs : now };
    this.o.registry.setHealth(key, health);
    this.o.onHealth?.(key, health.ready);
    if (!prev || prev.ready !== health.ready || prev.reason !== health.reason) {
      const involved = { kind: ref.kind, apiVersion: `${API_GROUP}/${API_VERSION}`, metadata: { name: ref.name, namespace: ref.kind === 'Target' ? ref.namespace : undefined, uid: obj.metadata.uid } };
      if (health.ready) this.o.events.record(involved, 'Normal', health.reason, health.message);
      else this.o.events.record(involved, 'Warning', health.reason, health.message);
    }
    return health;
  }

  private async ensureNode(key: string, ref: TargetRef, nodeName: string, obj: Target, probe: Probe, health: TargetHealth): Promise<V1Node | undefined> {
    const now = new Date(this.o.clock.now());
    const desired = buildVirtualNode({
      ref,
      summary: probe.summary,
      excludedLabelsRegexp: parseTarget(obj, ref.kind).ok ? obj.spec?.excludedLabelsRegexp : null,
      health: { ready: health.ready, reason: health.reason, message: health.message, lastTransitionTime: new Date(health.sinceMs).toISOString() },
      kubelet: this.o.kubelet,
      nodeInfo: { kubeletVersion: this.o.kubeletVersion },
      now: now.toISOString(),
      // Running proxies: their delegates' room is already gone from the target's free.
      heldByProxies: requestedByNode((this.o.proxiesOn?.(nodeName) ?? []).filter((p) => p.status?.phase === 'Running')).get(nodeName),
    });
    let existing: V1Node | undefined;
    try {
      existing = await this.o.sourceCore.readNode({ name: nodeName });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    if (!existing) {
      try {
        const created = await this.o.sourceCore.createNode({ body: desired });
        // Status is ignored on create: write it through the status subresource.
        await this.patchNodeStatus(nodeName, buildVirtualNodeStatusPatch(created, desired, { heartbeat: true }));
        this.lastStatusWriteMs.set(key, this.o.clock.now());
        this.o.events.record({ kind: 'Node', apiVersion: 'v1', metadata: { name: nodeName, uid: created.metadata?.uid } }, 'Normal', 'VirtualNodeCreated', `virtual node for ${ref.kind} ${ref.kind === 'Target' ? `${ref.namespace}/` : ''}${ref.name}`);
        return created;
      } catch (err) {
        if (isAlreadyExists(err)) return undefined; // the next round patches it
        throw new Error(`creating virtual node ${nodeName}`, { cause: err });
      }
    }
    if (existing.metadata?.labels?.[VIRTUAL_KUBELET_PROVIDER_LABEL] !== VIRTUAL_KUBELET_PROVIDER_VALUE) {
      throw new Error(`node ${nodeName} exists and is not a virtual node of ours; refusing to take it over`);
    }
    const labelsPatch = buildVirtualNodeLabelsPatch(existing, desired);
    if (labelsPatch) {
      await this.o.sourceCore.patchNode({ name: nodeName, body: labelsPatch }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
    }
    const heartbeat = this.o.clock.now() - (this.lastStatusWriteMs.get(key) ?? 0) >= this.nodeStatusIntervalMs;
    const statusPatch = buildVirtualNodeStatusPatch(existing, desired, { heartbeat });
    if (statusPatch) {
      await this.patchNodeStatus(nodeName, statusPatch);
      this.lastStatusWriteMs.set(key, this.o.clock.now());
    }
    return existing;
  }

  private async patchNodeStatus(nodeName: string, status: unknown): Promise<void> {
    if (!status) return;
    await this.o.sourceCore.patchNodeStatus({ name: nodeName, body: { status } }, setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch));
  }

  private async renewLease(node: V1Node): Promise<void> {
    const name = node.metadata!.name!;
    const lease = buildNodeLease(name, node.metadata!.uid!, new Date(this.o.clock.now()).toISOString());
    try {
      const existing = await this.o.sourceCoordination.readNamespacedLease({ name, namespace: NODE_LEASE_NAMESPACE });
      existing.spec = { ...existing.spec, ...lease.spec, acquireTime: existing.spec?.acquireTime ?? lease.spec?.acquireTime };
      await this.o.sourceCoordination.replaceNamespacedLease({ name, namespace: NODE_LEASE_NAMESPACE, body: existing });
    } catch (err) {
      if (!isNotFound(err)) throw new Error(`renewing the Lease of ${name}`, { cause: err });
      await this.o.sourceCoordination.createNamespacedLease({ namespace: NODE_LEASE_NAMESPACE, body: lease }).catch((e) => {
        if (!isAlreadyExists(e)) throw e;
      });
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

  /** The Target is gone: its virtual node goes (its Lease follows by owner reference), and so do its clients. */
  private async removeTarget(key: string, nodeName: string): Promise<void> {
    this.o.registry.delete(key);
    this.lastStatusWriteMs.delete(key);
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

/** Rejects with ETIMEDOUT (a network error) if `p` has not settled within `ms` of `clock`. */
function withTimeout<T>(clock: Clock, p: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: ReturnType<Clock['setTimeout']> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = clock.setTimeout(() => reject(Object.assign(new Error(message), { code: 'ETIMEDOUT' })), ms);
  });
  return Promise.race([p, timeout]).finally(() => timer && clock.clearTimeout(timer));
}
