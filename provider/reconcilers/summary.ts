import { CustomObjectsApi, type V1Node, type V1Pod, type V1PriorityClass, type V1RuntimeClass } from '@kubernetes/client-node';
import type { Clock } from '../core/clock.js';
import { isAlreadyExists, isNotFound } from '../core/errors.js';
import { API_GROUP, API_VERSION, CLUSTER_SUMMARY_NAME } from '../core/keys.js';
import { perObject } from '../core/per-object.js';
import { buildClusterSummary, sightSummary, summaryEquals, type SummarySighting } from '../model/cluster-summary.js';
import { podRequestsWithOverhead } from '../model/resources.js';
import type { ClusterSummary } from '../model/types.js';
import type { ObjectCache } from '../controller/object-cache.js';

export interface SummaryReconcilerOptions {
  custom: CustomObjectsApi;
  nodes: ObjectCache<V1Node>;
  /** Pods bound to nodes, of every namespace (what is free on each node is computed from them). */
  pods: ObjectCache<V1Pod>;
  /**
   * The cluster's RuntimeClasses, published in the summary once this cache has listed them; a
   * cache that cannot list them (no permission) leaves them out, and readers then do not judge
   * runtime classes. The summary never waits for it.
   */
  runtimeClasses?: { list(): V1RuntimeClass[]; hasSynced(): boolean };
  /** The cluster's PriorityClasses, published as {@link runtimeClasses} are. */
  priorityClasses?: { list(): V1PriorityClass[]; hasSynced(): boolean };
  /** The resourceVersion `pods` reflects ({@link ClusterSummary.podsResourceVersion}); read with the pods, in the same turn. */
  podsResourceVersion?: () => string;
  clock: Clock;
  /**
   * Rewritten at least this often even without a change (default 30 s), and declared in the
   * summary ({@link ClusterSummary.renewIntervalSeconds}), so that its readers can tell a quiet
   * cluster from a stopped writer. Whole seconds.
   */
  renewIntervalMs?: number;
  /** Writes at most once per this period, so a burst of pods is one write, not hundreds (default 1 s). */
  minWriteIntervalMs?: number;
}

/**
 * Writes this cluster's singleton ClusterSummary (sums of capacity and allocatable over its
 * real nodes, the node labels with a single value, the node pools with what is free on each
 * node, and its RuntimeClasses and PriorityClasses), which sources read to build the virtual
 * node of this cluster and to judge whether one of its nodes can take a pod. Runs in every cluster; one key, `singleton`, woken by any node or
 * pod change and when a renewal is due.
 *
 * Renewal: a summary whose version has stayed the same for `renewIntervalMs`, as this replica
 * has seen it, is written again with a new `renewTime`, so that it changes at least that often
 * (readers judge staleness the same way, by version; see `summaryStaleness`). A replica that
 * starts, or becomes leader, starts counting from its first read: it does not write a summary
 * that is still fresh.
 */
export class SummaryReconciler {
  static readonly KEY = CLUSTER_SUMMARY_NAME;
  private lastWriteMs = -Infinity;
  /** The version of the summary last read, and since when (monotonic) this replica has seen it. */
  private sighting: SummarySighting | undefined;
  /** Each cached pod's requests, computed once per version of it, not on every write. */
  private readonly requestsOf = perObject(podRequestsWithOverhead);

  constructor(private readonly o: SummaryReconcilerOptions) {}

  async reconcile(): Promise<{ requeueAfterMs?: number }> {
    const renewMs = this.o.renewIntervalMs ?? 30_000;
    // Spaced on the monotonic clock: measured on the wall clock, a write before a step back
    // would seem to lie in the future, and the summary would stay as it is for as long as the
    // clock moved.
    const wait = this.lastWriteMs + (this.o.minWriteIntervalMs ?? 1000) - this.o.clock.monotonicMs();
    if (wait > 0) return { requeueAfterMs: wait };
    const desired: ClusterSummary = {
      ...buildClusterSummary(this.o.nodes.list(), this.o.pods.list(), this.o.podsResourceVersion?.() || undefined, this.requestsOf, {
        runtime: this.o.runtimeClasses?.hasSynced() ? this.o.runtimeClasses.list() : undefined,
        priority: this.o.priorityClasses?.hasSynced() ? this.o.priorityClasses.list() : undefined,
      }),
      renewIntervalSeconds: Math.round(renewMs / 1000),
    };
    const api = { group: API_GROUP, version: API_VERSION, plural: 'clustersummaries' };
    let existing: ClusterSummary | undefined;
    try {
      existing = (await this.o.custom.getClusterCustomObject({ ...api, name: CLUSTER_SUMMARY_NAME })) as ClusterSummary;
    } catch (err) {
      if (!isNotFound(err)) throw new Error('reading the ClusterSummary', { cause: err });
    }
    const now = this.o.clock.monotonicMs();
    const renewTime = new Date(this.o.clock.now()).toISOString();
    if (!existing) {
      const created = await this.o.custom.createClusterCustomObject({ ...api, body: { apiVersion: `${API_GROUP}/${API_VERSION}`, kind: 'ClusterSummary', ...desired, renewTime } }).catch((err) => {
        if (!isAlreadyExists(err)) throw new Error('creating the ClusterSummary', { cause: err });
      });
      this.wrote(created as ClusterSummary | undefined, now);
      return { requeueAfterMs: renewMs };
    }
    this.sighting = sightSummary(this.sighting, existing, now);
    const dueInMs = this.sighting.sinceMs + renewMs - now;
    if (summaryEquals(existing, desired) && existing.renewTime && dueInMs > 0) return { requeueAfterMs: dueInMs };
    const body = {
      ...existing,
      metadata: { ...existing.metadata, labels: desired.metadata.labels },
      capacity: desired.capacity,
      allocatable: desired.allocatable,
      free: desired.free,
      nodePools: desired.nodePools,
      podsResourceVersion: desired.podsResourceVersion,
      renewIntervalSeconds: desired.renewIntervalSeconds,
      // Undefined drops a list this writer cannot read any more.
      runtimeClasses: desired.runtimeClasses,
      priorityClasses: desired.priorityClasses,
      priorityClassValues: desired.priorityClassValues,
      renewTime,
    };
    this.wrote((await this.o.custom.replaceClusterCustomObject({ ...api, name: CLUSTER_SUMMARY_NAME, body })) as ClusterSummary, now);
    return { requeueAfterMs: renewMs };
  }

  /** Counts the next renewal from this write, of the version the apiserver answered (if it did). */
  private wrote(written: ClusterSummary | undefined, nowMs: number): void {
    this.lastWriteMs = nowMs;
    this.sighting = written?.metadata?.resourceVersion ? { version: written.metadata.resourceVersion, sinceMs: nowMs, renews: true } : undefined;
  }
}
