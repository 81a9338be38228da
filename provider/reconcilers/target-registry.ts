import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import type { ClusterRegistry, TargetHealth } from '../clusters/cluster-registry.js';
import { withRequestDeadline } from '../clusters/request-deadline.js';
import type { ServerAddressPolicy } from '../clusters/server-address-policy.js';
import { KubeconfigError } from '../clusters/target-kubeconfig.js';
import { createTargetClient, kubeConfigFromSecret, parseTargetKey, targetKey, type TargetClient } from '../clusters/target-client.js';
import type { Clock } from '../core/clock.js';
import { classifyApiError, isNotFound, statusMessage } from '../core/errors.js';
import { API_GROUP, API_VERSION, CLUSTER_SUMMARY_NAME } from '../core/keys.js';
import { clusterSummaryProblem, sightSummary, summaryStaleness, type SummarySighting } from '../model/cluster-summary.js';
import { virtualNodeName } from '../model/names.js';
import { clusterTargetRights, targetForbidden } from '../model/refusal.js';
import { isOutage } from '../model/outage.js';
import { parseTarget, type NormalizedTargetSpec } from '../model/target.js';
import type { ClusterSummary, Target, TargetRef } from '../model/types.js';
import type { ObjectCache } from '../controller/object-cache.js';
import type { SelfTargetBindings } from './self-target-bindings.js';
import type { TargetAuthorization } from './target-authorization.js';

export interface TargetRegistryReconcilerOptions {
  sourceKubeConfig: KubeConfig;
  /** Reads the kubeconfig Secrets of Targets. */
  sourceCore: Pick<CoreV1Api, 'readNamespacedSecret'>;
  targets: ObjectCache<Target>;
  clusterTargets: ObjectCache<Target>;
  registry: ClusterRegistry;
  /** Which addresses a Target's kubeconfig may point at. */
  serverPolicy: ServerAddressPolicy;
  /** Deadline of each API call to a target from a Secret (default 30 s); self targets share the source's. */
  requestTimeoutMs?: number;
  /** Whether the provider's binding of the source role for a self target is in force (a review: no write). */
  selfBindings: Pick<SelfTargetBindings, 'allowed'>;
  clock: Clock;
  /** How often each target is probed (default 10 s): the node Lease period. */
  leaseIntervalMs?: number;
  /** Budget of one probe of a target's API (default 5 s). */
  probeTimeoutMs?: number;
  /** Called with each target's readiness, for the `admiralty_target_ready` gauge. */
  onHealth?: (target: string, ready: boolean) => void;
  /**
   * Asked on each probe of a Target or ClusterTarget from a Secret, once its summary was read:
   * in which namespaces the target lets our identity create pods (for a Target, its own only;
   * the extender's filter reads the answers; the Target's `Ready` reason says it). Without it,
   * such a target is taken to have every right, but a Target still needs to list pods in its
   * namespace.
   */
  authorization?: Pick<TargetAuthorization, 'refresh' | 'forget'>;
  /** Called after every probe of a target that still exists (the leader then writes its virtual node). */
  onProbed?: (key: string) => void;
}

/** A target's health as probed, with the summary when it was read. */
interface Probe {
  health: Omit<TargetHealth, 'sinceMs'>;
  summary?: ClusterSummary;
  client?: TargetClient;
}

/**
 * The read side of targets, run by every replica: keeps the {@link ClusterRegistry} filled
 * from Targets, ClusterTargets and their kubeconfig Secrets, so that the kubelet API and the
 * scheduler extender of a standby serve as the leader's do.
 *
 * Key: `Target/<ns>/<name>` or `ClusterTarget/<name>`. Every `leaseIntervalMs` it re-reads the
 * Target's kubeconfig Secret (so fixing a Secret heals the target without a restart), builds or
 * keeps its clients, probes the target by reading its ClusterSummary (and, for a target from a
 * Secret, asks `authorization` where it may create pods), and records the clients,
 * the summary and the health (with its transition time) in the registry. It writes nothing to
 * any cluster: the virtual node, its Lease, the Target's status, events and the self binding are
 * the leader's ({@link VirtualNodeReconciler}), which reads what this records.
 *
 * A self target's clients join the registry only once the apiserver says the provider's
 * binding of the source role is in force, so no per-target informer starts with rights it does
 * not have.
 */
export class TargetRegistryReconciler {
  private readonly leaseIntervalMs: number;
  private readonly probeTimeoutMs: number;
  /** The last refusal of each Target's kubeconfig text, so that the same text is not parsed again. */
  private readonly refusals = new Map<string, KubeconfigError>();
  /** Which version of each target's ClusterSummary this replica last read, and since when. */
  private readonly sightings = new Map<string, SummarySighting>();

  constructor(private readonly o: TargetRegistryReconcilerOptions) {
    this.leaseIntervalMs = o.leaseIntervalMs ?? 10_000;
    this.probeTimeoutMs = o.probeTimeoutMs ?? 5_000;
  }

  async reconcile(key: string): Promise<{ requeueAfterMs?: number } | void> {
    const ref = parseTargetKey(key);
    const obj = ref.kind === 'Target' ? this.o.targets.get(ref.name, ref.namespace) : this.o.clusterTargets.get(ref.name);
    if (!obj) {
      this.o.registry.delete(key);
      this.o.authorization?.forget(key);
      this.refusals.delete(key);
      this.sightings.delete(key);
      return;
    }
    let probe = await this.probe(ref, obj, virtualNodeName(ref));
    // Reachable, but holding more than the provider keeps of one target: what its caches show is
    // stale (see CacheBudget), so no more pods go there until a list fits again. Not an outage:
    // nothing fails over.
    const overBudget = probe.health.ready ? this.o.registry.cacheBudgetRefusal(key) : undefined;
    if (overBudget) probe = { ...probe, health: { ready: false, reason: 'CacheBudgetExceeded', message: overBudget } };
    this.recordHealth(key, probe);
    this.o.onProbed?.(key);
    return { requeueAfterMs: this.leaseIntervalMs };
  }

  /** Validates the Target, builds its clients and reads its ClusterSummary. Never throws. */
  // eslint-disable-next-line max-lines-per-function -- one probe's checks in order, each answering the target's health
  private async probe(ref: TargetRef, obj: Target, nodeName: string): Promise<Probe> {
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
      if (err instanceof KubeconfigError) {
        if (err.fingerprint) this.refusals.set(targetKey(ref), err);
        return { health: { ready: false, reason: err.reason, message: err.message } };
      }
      const kind = classifyApiError(err);
      return { health: { ready: false, reason: kind === 'Forbidden' ? 'SecretForbidden' : 'SecretUnreadable', message: `reading the kubeconfig Secret: ${statusMessage(err)}` } };
    }
    if (client.self) {
      const forbidden = await this.selfForbidden(ref);
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
      const server = client.kubeConfig.getCurrentCluster()?.server;
      const problem = clusterSummaryProblem(summary);
      if (problem) {
        return {
          client,
          health: { ready: false, reason: 'ClusterSummaryInvalid', message: `the target at ${server} answered a ClusterSummary "${CLUSTER_SUMMARY_NAME}" that is not one: ${problem}` },
        };
      }
      // A summary that has stopped changing says nothing of what is free there now: the
      // placements made since would count against it forever, and its nodes' room would never
      // come back. Not an outage: the target still answers, and nothing fails over.
      const sighting = sightSummary(this.sightings.get(targetKey(ref)), summary, this.o.clock.monotonicMs());
      this.sightings.set(targetKey(ref), sighting);
      const stale = summaryStaleness(sighting, summary, this.o.clock.monotonicMs(), this.leaseIntervalMs);
      if (stale) return { client, health: { ready: false, reason: 'ClusterSummaryStale', message: `the target at ${server}: ${stale}` } };
      if (namespace && !client.self) {
        // The summary is readable cluster-wide; delegates need rights in this namespace, which a
        // Source in that namespace of the target grants. Say so rather than fail on every pod.
        // One review: whether we may create pods there. Following the answer also lets a
        // refusal met at bind keep the pods off only until the next probe.
        const forbidden = this.o.authorization && targetForbidden(client, server, await this.o.authorization.refresh(client));
        if (forbidden) return { client, health: { ready: false, ...forbidden } };
        try {
          await withTimeout(this.o.clock, client.core.listNamespacedPod({ namespace, limit: 1 }), this.probeTimeoutMs, `the target's API did not answer within ${this.probeTimeoutMs} ms`);
        } catch (err) {
          if (classifyApiError(err) === 'Forbidden') {
            return {
              client,
              health: {
                ready: false,
                reason: 'TargetForbidden',
                message: `our identity may not manage pods in namespace ${namespace} of the target: create a Source for it there (${statusMessage(err)})`,
              },
            };
          }
          throw err;
        }
      }
      this.o.registry.setSummary(targetKey(ref), summary, this.o.clock.now());
      if (ref.kind === 'ClusterTarget' && !client.self && this.o.authorization) {
        // The summary is readable with a Source in any one namespace; pods need one in theirs,
        // or a ClusterSource: the filter offers the target by namespace, and the status says so.
        const rights = await this.o.authorization.refresh(client);
        return { client, summary, health: { ready: true, ...clusterTargetRights(server, rights) } };
      }
      if (client.self) this.o.authorization?.forget(targetKey(ref));
      return { client, summary, health: { ready: true, reason: 'TargetReady', message: `target reachable at ${server}` } };
    } catch (err) {
      // Unread, the summary may have changed: its staleness is counted again from the next read,
      // so that a target back from a long outage has three renew intervals to move it again.
      this.sightings.delete(targetKey(ref));
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
  private async selfForbidden(ref: TargetRef): Promise<string | undefined> {
    const where = ref.kind === 'Target' ? `namespace ${ref.namespace}` : 'all namespaces';
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
    const { kubeConfig, fingerprint } = kubeConfigFromSecret(
      secret,
      { secretName: s.name, secretNamespace: s.namespace, key: s.key, context: s.context },
      this.o.serverPolicy,
      existing?.self ? undefined : existing,
      this.refusals.get(targetKey(ref)),
    );
    this.refusals.delete(targetKey(ref));
    if (existing && existing.fingerprint === fingerprint) return existing;
    return createTargetClient(ref, withRequestDeadline(kubeConfig, this.o.requestTimeoutMs ?? 30_000), fingerprint, false);
  }

  /** Stores the health in the registry, keeping the transition time and the outage's start. */
  private recordHealth(key: string, probe: Probe): void {
    const now = this.o.clock.now();
    const mono = this.o.clock.monotonicMs();
    const prev = this.o.registry.health(key);
    const outage = isOutage(probe.health);
    const starts = !probe.health.ready && prev?.outageSinceMs === undefined && outage;
    this.o.registry.setHealth(key, {
      ...probe.health,
      sinceMs: prev && prev.ready === probe.health.ready ? prev.sinceMs : now,
      outageSinceMs: probe.health.ready ? undefined : starts ? now : prev?.outageSinceMs,
      outageSinceMonoMs: probe.health.ready ? undefined : starts ? mono : prev?.outageSinceMonoMs,
      lastOutageMs: outage ? mono : prev?.lastOutageMs,
    });
    this.o.onHealth?.(key, probe.health.ready);
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
