import type { V1Node, V1Pod, V1PriorityClass, V1RuntimeClass } from '@kubernetes/client-node';
import { API_GROUP, API_VERSION, CLUSTER_SUMMARY_NAME, HOSTNAME_LABEL, VIRTUAL_KUBELET_PROVIDER_LABEL } from '../core/keys.js';
import { sortedEntries, stringMapEquals } from './maps.js';
import { formatQuantity, parseQuantity, resourceListEquals } from './quantity.js';
import { hostPortsByNode } from './host-ports.js';
import { heldByPriority, preemptionCeiling, summaryPriorityClassValues } from './priority-buckets.js';
import { allocatableOf, podRequestFields, requestedByNode, type ResourceAmounts } from './resources.js';
import type { ClusterSummary, NodePool, SummaryRuntimeClass } from './types.js';

/**
 * The ClusterSummary `singleton` a cluster writes about itself, over its real nodes (every node
 * carrying `virtual-kubelet.io/provider`, whatever the value, is left out: its capacity is
 * another cluster's, and counting it would let chained clusters count capacity twice).
 *
 * * capacity / allocatable: per resource, the exact sum over the nodes (no Ready or cordon
 *   filter, as in Admiralty), written canonically ({@link formatQuantity}); quantities that do not
 *   parse are skipped;
 * * metadata.labels: the labels whose key has one single value on every node that carries it
 *   (a key with two values anywhere is dropped), sorted by key;
 * * nodePools: the nodes grouped by their labels (but `kubernetes.io/hostname`, which would make
 *   every node a pool of its own) and hard taints, each node with its allocatable and what is
 *   free on it: allocatable minus the requests of the non-terminal `pods` bound to it (of every
 *   namespace, as kube-scheduler counts them), and the host ports those pods hold there
 *   ({@link hostPortsByNode}), and, when `classes.priority` is given, what its pods of each
 *   priority below the highest user class hold (`heldByPriority`, see {@link heldByPriority} and
 *   `preemptionCeiling`). This is what a source needs to know whether one real node can take
 *   a pod, without reading the target's nodes and pods itself;
 * * free: the sum of `free` over the nodes that take new pods (Ready and not cordoned);
 * * podsResourceVersion: `podsResourceVersion` when given, the version of the pod cache `pods`
 *   come from (see {@link ClusterSummary.podsResourceVersion});
 * * runtimeClasses: when `classes.runtime` is given, what each does to a pod
 *   ({@link summaryRuntimeClasses});
 * * priorityClasses: when `classes.priority` is given, their names, sorted; and
 *   priorityClassValues, their values and preemption policies ({@link summaryPriorityClassValues}).
 *
 * `requestsOf` gives a pod's requests (see `requestedByNode`; the reconciler remembers them per
 * cached pod). Pure and deterministic (independent of node and pod order); called by the summary
 * reconciler.
 */
export function buildClusterSummary(
  nodes: V1Node[],
  pods: readonly V1Pod[] = [],
  podsResourceVersion?: string,
  requestsOf?: (pod: V1Pod) => ResourceAmounts,
  classes: { runtime?: readonly V1RuntimeClass[]; priority?: readonly V1PriorityClass[] } = {},
): ClusterSummary {
  const real = nodes.filter((n) => !isVirtualNode(n));
  const labelValues = new Map<string, string | null>(); // null: conflicting values
  for (const node of real) {
    for (const [k, v] of Object.entries(node.metadata?.labels ?? {})) {
      const seen = labelValues.get(k);
      if (seen === undefined) labelValues.set(k, v);
      else if (seen !== v) labelValues.set(k, null);
    }
  }
  const labels: Record<string, string> = {};
  for (const k of [...labelValues.keys()].sort()) {
    const v = labelValues.get(k);
    if (v !== null && v !== undefined) labels[k] = v;
  }
  const requested = requestedByNode(pods, requestsOf);
  const hostPorts = hostPortsByNode(pods);
  // Published only below the highest user class: no pod can preempt the rest (nor without classes known).
  const ceiling = classes.priority && preemptionCeiling(classes.priority.map((c) => ({ value: c.value })));
  const byPriority = ceiling === undefined ? new Map() : heldByPriority(pods, requestsOf, ceiling);
  const pools = new Map<string, NodePool>();
  const freeTotal: ResourceAmounts = new Map();
  for (const node of [...real].sort((a, b) => ordinal(a.metadata?.name ?? '', b.metadata?.name ?? ''))) {
    const name = node.metadata?.name ?? '';
    const poolLabels = sortedMap(node.metadata?.labels, (k) => k !== HOSTNAME_LABEL);
    const taints = (node.spec?.taints ?? [])
      .filter((t) => t.effect === 'NoSchedule' || t.effect === 'NoExecute')
      .map((t) => ({ key: t.key, ...(t.value ? { value: t.value } : {}), effect: t.effect }))
      .sort((a, b) => ordinal(`${a.key}=${a.value ?? ''}:${a.effect}`, `${b.key}=${b.value ?? ''}:${b.effect}`));
    const poolKey = JSON.stringify([poolLabels, taints]);
    let pool = pools.get(poolKey);
    if (!pool) pools.set(poolKey, (pool = { labels: poolLabels, ...(taints.length ? { taints } : {}), nodes: [] }));
    const allocatable = allocatableOf(node);
    const used = requested.get(name) ?? new Map<string, bigint>();
    const free: ResourceAmounts = new Map();
    for (const [r, amount] of allocatable) free.set(r, amount > (used.get(r) ?? 0n) ? amount - (used.get(r) ?? 0n) : 0n);
    const hostname = node.metadata?.labels?.[HOSTNAME_LABEL];
    const unschedulable = node.spec?.unschedulable === true;
    const notReady = node.status?.conditions?.find((c) => c.type === 'Ready')?.status !== 'True';
    pool.nodes.push({
      name,
      ...(hostname !== undefined && hostname !== name ? { hostname } : {}),
      allocatable: formatList(allocatable),
      free: formatList(free),
      ...(unschedulable ? { unschedulable } : {}),
      ...(notReady ? { notReady } : {}),
      ...(hostPorts.has(name) ? { hostPorts: hostPorts.get(name) } : {}),
      ...(byPriority.has(name) ? { heldByPriority: byPriority.get(name) } : {}),
    });
    if (!unschedulable && !notReady) for (const [r, amount] of free) freeTotal.set(r, (freeTotal.get(r) ?? 0n) + amount);
  }
  return {
    apiVersion: `${API_GROUP}/${API_VERSION}`,
    kind: 'ClusterSummary',
    metadata: { name: CLUSTER_SUMMARY_NAME, labels },
    capacity: sumResources(real.map((n) => n.status?.capacity)),
    allocatable: sumResources(real.map((n) => n.status?.allocatable)),
    free: formatList(freeTotal),
    nodePools: [...pools.entries()].sort(([a], [b]) => ordinal(a, b)).map(([, p]) => p),
    ...(podsResourceVersion ? { podsResourceVersion } : {}),
    ...(classes.runtime ? { runtimeClasses: summaryRuntimeClasses(classes.runtime) } : {}),
    ...(classes.priority
      ? {
          priorityClasses: classes.priority
            .map((c) => c.metadata?.name ?? '')
            .filter((n) => n !== '')
            .sort(ordinal),
        }
      : {}),
    ...(classes.priority ? { priorityClassValues: summaryPriorityClassValues(classes.priority) } : {}),
  };
}

/**
 * What each RuntimeClass does to a pod that names it, as the cluster's RuntimeClass admission
 * plugin applies it: its fixed overhead, and its scheduling's node selector and tolerations
 * (empty ones left out), sorted by name. Pure.
 */
export function summaryRuntimeClasses(classes: readonly V1RuntimeClass[]): SummaryRuntimeClass[] {
  const out: SummaryRuntimeClass[] = [];
  for (const rc of classes) {
    const name = rc.metadata?.name;
    if (!name) continue;
    const overhead = rc.overhead?.podFixed;
    const nodeSelector = rc.scheduling?.nodeSelector;
    const tolerations = rc.scheduling?.tolerations;
    out.push({
      name,
      ...(overhead && Object.keys(overhead).length ? { overhead: sortedMap(overhead, () => true) } : {}),
      ...(nodeSelector && Object.keys(nodeSelector).length ? { nodeSelector: sortedMap(nodeSelector, () => true) } : {}),
      ...(tolerations?.length
        ? {
            tolerations: tolerations.map((t) => ({
              ...(t.key ? { key: t.key } : {}),
              ...(t.operator ? { operator: t.operator } : {}),
              ...(t.value ? { value: t.value } : {}),
              ...(t.effect ? { effect: t.effect } : {}),
              ...(t.tolerationSeconds !== undefined && t.tolerationSeconds !== null ? { tolerationSeconds: t.tolerationSeconds } : {}),
            })),
          }
        : {}),
    });
  }
  return out.sort((a, b) => ordinal(a.name, b.name));
}

/** The fields of a PriorityClass the summary reads (name, value, preemption policy, global default), and the resourceVersion its informer needs. */
export function summaryPriorityClassFields(pc: V1PriorityClass): V1PriorityClass {
  return {
    metadata: { name: pc.metadata?.name, resourceVersion: pc.metadata?.resourceVersion },
    value: pc.value,
    ...(pc.preemptionPolicy ? { preemptionPolicy: pc.preemptionPolicy } : {}),
    ...(pc.globalDefault ? { globalDefault: pc.globalDefault } : {}),
  };
}

/**
 * The fields of a RuntimeClass that {@link summaryRuntimeClasses} reads, for the summary's
 * RuntimeClass informer (its name, overhead and scheduling; the resourceVersion the informer needs).
 */
export function summaryRuntimeClassFields(rc: V1RuntimeClass): V1RuntimeClass {
  return {
    metadata: { name: rc.metadata?.name, resourceVersion: rc.metadata?.resourceVersion },
    handler: rc.handler,
    ...(rc.overhead ? { overhead: rc.overhead } : {}),
    ...(rc.scheduling ? { scheduling: rc.scheduling } : {}),
  };
}

/**
 * Whether a node is a virtual-kubelet node (ours or another provider's), which the summary
 * leaves out, and with it the pods bound to it: the summary's pod informer keeps no pod of a
 * node this says yes to (in a source, its proxies). Pure.
 */
export function isVirtualNode(node: V1Node): boolean {
  return node.metadata?.labels?.[VIRTUAL_KUBELET_PROVIDER_LABEL] !== undefined;
}

/**
 * The fields of a pod that {@link buildClusterSummary} reads (node, phase, priority, what it requests),
 * for the summary's pod informer: a cluster's pods are cached by the thousand, and a full pod
 * is tens of times larger. Keeps name, namespace and resourceVersion, which the informer needs.
 */
export function summaryPodFields(pod: V1Pod): V1Pod {
  return {
    metadata: { name: pod.metadata?.name, namespace: pod.metadata?.namespace, resourceVersion: pod.metadata?.resourceVersion },
    // The priority, for what the node's pods of each priority hold (heldByPriority).
    spec: { ...podRequestFields(pod.spec), ...(pod.spec?.priority !== undefined ? { priority: pod.spec.priority } : {}) },
    status: { phase: pod.status?.phase },
  };
}

/** A copy of a string map with the keys `keep` accepts, sorted by key. */
function sortedMap(m: Record<string, string> | undefined, keep: (k: string) => boolean): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of sortedEntries(m ?? {})) if (keep(k)) out[k] = v;
  return out;
}

function formatList(amounts: ResourceAmounts): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of [...amounts.keys()].sort()) out[name] = formatQuantity(amounts.get(name)!, name);
  return out;
}

function sumResources(lists: (Record<string, string> | undefined)[]): Record<string, string> {
  const sums = new Map<string, bigint>();
  for (const list of lists) {
    for (const [name, value] of Object.entries(list ?? {})) {
      let nano: bigint;
      try {
        nano = parseQuantity(value);
      } catch {
        continue; // the apiserver validates node quantities; a bad one must not poison the sum
      }
      sums.set(name, (sums.get(name) ?? 0n) + nano);
    }
  }
  return formatList(sums);
}

/**
 * Whether two summaries say the same (labels, capacity/allocatable/free by value, so `1Gi`
 * equals `1073741824`, the node pools, the pod version they account for, the renew interval and
 * the runtime and priority classes, as written or both absent); the summary
 * reconciler skips the write when true. Pools are compared as written: the builder writes them
 * canonically and in a stable order. A newer `podsResourceVersion` alone is a change: a source
 * waits for it to know that the summary counts a delegate it just placed.
 */
export function summaryEquals(a: ClusterSummary | undefined, b: ClusterSummary | undefined): boolean {
  if (!a || !b) return a === b;
  return (
    stringMapEquals(a.metadata?.labels, b.metadata?.labels) &&
    resourceListEquals(a.capacity, b.capacity) &&
    resourceListEquals(a.allocatable, b.allocatable) &&
    resourceListEquals(a.free, b.free) &&
    JSON.stringify(a.nodePools ?? []) === JSON.stringify(b.nodePools ?? []) &&
    a.podsResourceVersion === b.podsResourceVersion &&
    a.renewIntervalSeconds === b.renewIntervalSeconds &&
    JSON.stringify(a.runtimeClasses) === JSON.stringify(b.runtimeClasses) &&
    JSON.stringify(a.priorityClasses) === JSON.stringify(b.priorityClasses) &&
    JSON.stringify(a.priorityClassValues) === JSON.stringify(b.priorityClassValues)
  );
}

/** The longest renew interval a summary may declare ({@link ClusterSummary.renewIntervalSeconds}). */
export const MAX_RENEW_INTERVAL_SECONDS = 3600;

/** Which version of a summary its reader last saw, since when (monotonic ms), and whether its writer renews it. */
export interface SummarySighting {
  version: string;
  sinceMs: number;
  renewTime?: string;
  /**
   * False once a new version came with the `renewTime` of the one before: its writer does not
   * renew (an earlier version of the provider, after a rollback, keeps the fields it finds), so
   * its silence says nothing.
   */
  renews: boolean;
}

/**
 * What a reader remembers after reading `summary` at `nowMs`: `prev` while the version is the
 * same, else the new version, seen from now. A summary is told apart by its resourceVersion,
 * which every write moves (its `renewTime` when a server gives none). Pure.
 */
export function sightSummary(prev: SummarySighting | undefined, summary: ClusterSummary, nowMs: number): SummarySighting {
  const version = summary.metadata?.resourceVersion ?? summary.renewTime ?? '';
  if (prev?.version === version) return prev;
  const renews = summary.renewTime !== undefined && (prev === undefined || summary.renewTime !== prev.renewTime);
  return { version, sinceMs: nowMs, ...(summary.renewTime !== undefined ? { renewTime: summary.renewTime } : {}), renews };
}

/**
 * Why `summary` is stale, or undefined: its writer promises a rewrite every
 * `renewIntervalSeconds` at the longest, and this reader has seen the same version for more
 * than three of them plus one of its own probe periods (a probe that comes just before a
 * renewal sees it a period late). Judged on the reader's monotonic clock against when it first
 * saw that version, never against the writer's `renewTime`: the two clusters' clocks need not
 * agree. A summary that promises nothing is never stale, nor one whose writer was seen not to
 * renew ({@link SummarySighting.renews}). Pure.
 */
export function summaryStaleness(sighting: SummarySighting, summary: ClusterSummary, nowMs: number, probeIntervalMs: number): string | undefined {
  const interval = summary.renewIntervalSeconds;
  if (interval === undefined || !sighting.renews) return undefined;
  const unchangedMs = nowMs - sighting.sinceMs;
  if (unchangedMs <= 3 * interval * 1000 + probeIntervalMs) return undefined;
  const renewed = summary.renewTime ? ` (last written at ${summary.renewTime}, by its clock)` : '';
  return `its ClusterSummary has not changed for ${Math.round(unchangedMs / 1000)} s, though its writer rewrites it every ${interval} s at the longest${renewed}: the provider there (its summary component) is down or cannot write, so what is free on its nodes is not known, and no new pod goes there until the summary is written again`;
}

/**
 * Orders strings by their UTF-16 code units, as `sort()` does: the same order on every machine
 * and Node version, where `localeCompare` follows ICU's collation (and loading it costs the
 * process about 2.7 MiB of resident memory).
 */
function ordinal(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The most nodes a ClusterSummary may describe. Kubernetes supports clusters of up to 5000
 * nodes; the extender's filter looks at every node of a target for each pod.
 */
export const MAX_SUMMARY_NODES = 20_000;

/**
 * The most labels, taints, resource amounts, host ports, runtime and priority classes a
 * ClusterSummary may hold in all. What the provider keeps of a target's summary (the summary,
 * and the extender's parsed nodes) grows with them, and a few hundred kB of them would otherwise
 * cost hundreds of MiB: a cluster of 15 000 nodes, 30 labels a pool and 12 amounts a node has
 * about 200 000.
 */
export const MAX_SUMMARY_ENTRIES = 500_000;

/**
 * Why an object a target's server answered for its ClusterSummary is not one, or undefined if it
 * has a summary's shape. The server is whoever the Target names and may answer anything; what
 * reads a summary (the extender's filter, the virtual node, re-placement) takes its types as
 * given, and its size from {@link MAX_SUMMARY_NODES} and {@link MAX_SUMMARY_ENTRIES}.
 * Quantities are not parsed here (those who read them refuse bad ones); only the types of the
 * fields read are checked. Pure.
 */
export function clusterSummaryProblem(obj: unknown): string | undefined {
  const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
  let nodes = 0;
  let entries = 0;
  const tooMany = () => `it holds over ${MAX_SUMMARY_ENTRIES} labels, taints, resource amounts, host ports, runtime and priority classes (a cluster of 15 000 nodes has about 200 000)`;
  /** Counts the members or items of `v`; the count so far. */
  const count = (v: unknown) => (entries += isObject(v) ? Object.keys(v).length : Array.isArray(v) ? v.length : 0);
  const isStringMap = (v: unknown) => isObject(v) && Object.values(v).every((x) => typeof x === 'string');
  const optional = (v: unknown, ok: (v: unknown) => boolean) => v === undefined || ok(v);
  if (!isObject(obj)) return 'it is not an object';
  for (const f of ['capacity', 'allocatable', 'free'] as const) {
    if (!optional(obj[f], isStringMap)) return `${f} must map resource names to quantity strings`;
    count(obj[f]);
  }
  count((obj.metadata as Record<string, unknown> | undefined)?.labels);
  if (entries > MAX_SUMMARY_ENTRIES) return tooMany();
  if (!optional(obj.podsResourceVersion, (v) => typeof v === 'string')) return 'podsResourceVersion must be a string';
  const interval = (v: unknown) => Number.isInteger(v) && (v as number) >= 1 && (v as number) <= MAX_RENEW_INTERVAL_SECONDS;
  if (!optional(obj.renewIntervalSeconds, interval)) return `renewIntervalSeconds must be a whole number of seconds from 1 to ${MAX_RENEW_INTERVAL_SECONDS}`;
  if (!optional(obj.renewTime, (v) => typeof v === 'string')) return 'renewTime must be a string';
  if (obj.runtimeClasses !== undefined) {
    if (!Array.isArray(obj.runtimeClasses)) return 'runtimeClasses must be a list';
    const str = (v: unknown) => v === undefined || typeof v === 'string';
    const tolerationOk = (t: unknown) => isObject(t) && str(t.key) && str(t.operator) && str(t.value) && str(t.effect) && optional(t.tolerationSeconds, Number.isInteger);
    for (const [i, rc] of obj.runtimeClasses.entries()) {
      const at = `runtimeClasses[${i}]`;
      if (!isObject(rc) || typeof rc.name !== 'string') return `${at} must be an object with a name`;
      if (!optional(rc.overhead, isStringMap) || !optional(rc.nodeSelector, isStringMap)) return `${at}.overhead and .nodeSelector must map names to strings`;
      if (!optional(rc.tolerations, (v) => Array.isArray(v) && v.every(tolerationOk))) return `${at}.tolerations must be a list of tolerations`;
      entries++;
      count(rc.overhead);
      count(rc.nodeSelector);
      if (count(rc.tolerations) > MAX_SUMMARY_ENTRIES) return tooMany();
    }
  }
  if (!optional(obj.priorityClasses, (v) => Array.isArray(v) && v.every((n) => typeof n === 'string'))) return 'priorityClasses must be a list of names';
  if (count(obj.priorityClasses) > MAX_SUMMARY_ENTRIES) return tooMany();
  if (obj.priorityClassValues !== undefined) {
    const classOk = (c: unknown) =>
      isObject(c) && typeof c.name === 'string' && Number.isInteger(c.value) && optional(c.preemptionPolicy, (v) => typeof v === 'string') && optional(c.globalDefault, (v) => typeof v === 'boolean');
    if (!Array.isArray(obj.priorityClassValues) || !obj.priorityClassValues.every(classOk)) return 'priorityClassValues must be a list of classes with a name and an integer value';
    if (count(obj.priorityClassValues) > MAX_SUMMARY_ENTRIES) return tooMany();
  }
  if (obj.nodePools === undefined) return undefined;
  if (!Array.isArray(obj.nodePools)) return 'nodePools must be a list';
  for (const [i, pool] of obj.nodePools.entries()) {
    const at = `nodePools[${i}]`;
    if (!isObject(pool)) return `${at} must be an object`;
    if (!isStringMap(pool.labels)) return `${at}.labels must map label keys to strings`;
    const taintOk = (t: unknown) => isObject(t) && typeof t.key === 'string' && typeof t.effect === 'string' && optional(t.value, (v) => typeof v === 'string');
    if (!optional(pool.taints, (v) => Array.isArray(v) && v.every(taintOk))) return `${at}.taints must be a list of taints with a key and an effect`;
    if (!Array.isArray(pool.nodes)) return `${at}.nodes must be a list`;
    if ((nodes += pool.nodes.length) > MAX_SUMMARY_NODES) return `it describes over ${MAX_SUMMARY_NODES} nodes`;
    count(pool.labels);
    if (count(pool.taints) > MAX_SUMMARY_ENTRIES) return tooMany();
    for (const [j, node] of pool.nodes.entries()) {
      const nat = `${at}.nodes[${j}]`;
      if (!isObject(node) || typeof node.name !== 'string') return `${nat} must be an object with a name`;
      if (!optional(node.hostname, (v) => typeof v === 'string')) return `${nat}.hostname must be a string`;
      if (!isStringMap(node.allocatable) || !isStringMap(node.free)) return `${nat}.allocatable and .free must map resource names to quantity strings`;
      count(node.allocatable);
      if (count(node.free) > MAX_SUMMARY_ENTRIES) return tooMany();
      for (const f of ['unschedulable', 'notReady'] as const) {
        if (!optional(node[f], (v) => typeof v === 'boolean')) return `${nat}.${f} must be true or false`;
      }
      const hostPortOk = (p: unknown) =>
        isObject(p) && Number.isInteger(p.port) && (p.port as number) >= 1 && (p.port as number) <= 65535 && typeof p.protocol === 'string' && optional(p.hostIP, (v) => typeof v === 'string');
      if (!optional(node.hostPorts, (v) => Array.isArray(v) && v.every(hostPortOk))) return `${nat}.hostPorts must be a list of ports (1 to 65535) with a protocol`;
      if (count(node.hostPorts) > MAX_SUMMARY_ENTRIES) return tooMany();
      const bucketOk = (b: unknown) => isObject(b) && Number.isInteger(b.priority) && isStringMap(b.requests);
      if (!optional(node.heldByPriority, (v) => Array.isArray(v) && v.every(bucketOk))) return `${nat}.heldByPriority must be a list of buckets with an integer priority and requests`;
      for (const b of (node.heldByPriority as { requests: unknown }[] | undefined) ?? []) {
        entries++;
        count(b.requests);
      }
      if (entries > MAX_SUMMARY_ENTRIES) return tooMany();
    }
  }
  return undefined;
}
