import type { V1Container, V1Node, V1Pod, V1PodSpec } from '@kubernetes/client-node';
import { parseQuantity } from './quantity.js';

/** Resource name -> amount in nano-units (see `parseQuantity`). */
export type ResourceAmounts = Map<string, bigint>;

/** One pod slot, in nano-units, as the `pods` resource is counted. */
export const ONE_POD = 1_000_000_000n;

/** Resources that the PodLevelResources feature lets `spec.resources` set for the whole pod. */
const POD_LEVEL_RESOURCES = new Set(['cpu', 'memory']);

export interface PodRequestsOptions {
  /** Add `spec.overhead` (RuntimeClass): yes for pods already in a target, no for a delegate not yet created, whose overhead the target's own RuntimeClass will set. */
  includeOverhead?: boolean;
}

/**
 * The part of a pod spec that {@link podRequests} reads (containers' and init containers' names,
 * resources and restart policies, the overhead, pod-level resources), the container ports that
 * hold a host port (see `podHostPorts`; most pods have none) and `nodeName`: what the caches of
 * pods keep of a spec when they need a pod's requests and node but not the rest. Shares the
 * objects it keeps with `spec`. Pure.
 */
export function podRequestFields(spec: V1PodSpec | undefined): V1PodSpec {
  const resources = (c: V1Container): V1Container => {
    const hostPorts = c.ports?.filter((p) => (p.hostPort ?? 0) > 0);
    return {
      name: c.name,
      ...(c.resources ? { resources: c.resources } : {}),
      ...(c.restartPolicy ? { restartPolicy: c.restartPolicy } : {}),
      ...(hostPorts?.length ? { ports: hostPorts } : {}),
    };
  };
  return {
    ...(spec?.nodeName !== undefined ? { nodeName: spec.nodeName } : {}),
    containers: (spec?.containers ?? []).map(resources),
    ...(spec?.initContainers ? { initContainers: spec.initContainers.map(resources) } : {}),
    ...(spec?.overhead ? { overhead: spec.overhead } : {}),
    ...(spec?.resources ? { resources: spec.resources } : {}),
  };
}

/**
 * What a pod asks the scheduler for, per resource, as kube-scheduler's NodeResourcesFit computes
 * it: the larger of (sum of the containers plus the sidecars, i.e. init containers with
 * `restartPolicy: Always`) and, for every regular init container, (its request plus the sidecars
 * started before it). A missing request defaults to the limit (the apiserver's defaulting, which
 * a hand-written manifest may not have had). Pod-level `spec.resources` requests, where set,
 * replace the container sum for cpu and memory. Unparsable quantities count as zero (the
 * apiserver would have refused them). The `pods` resource is not included.
 *
 * Pure.
 */
export function podRequests(spec: V1PodSpec | undefined, opts: PodRequestsOptions = {}): ResourceAmounts {
  const total: ResourceAmounts = new Map();
  if (!spec) return total;
  const sidecars: ResourceAmounts = new Map();
  const initPeak: ResourceAmounts = new Map();
  for (const c of spec.initContainers ?? []) {
    const req = containerRequests(c);
    if (c.restartPolicy === 'Always') {
      addInto(sidecars, req);
    } else {
      const during = new Map(sidecars);
      addInto(during, req);
      maxInto(initPeak, during);
    }
  }
  for (const c of spec.containers ?? []) addInto(total, containerRequests(c));
  addInto(total, sidecars);
  maxInto(total, initPeak);
  const podLevel = requestsOf(spec.resources?.requests, spec.resources?.limits);
  for (const [name, amount] of podLevel) if (POD_LEVEL_RESOURCES.has(name)) total.set(name, amount);
  if (opts.includeOverhead) addInto(total, parseList(spec.overhead));
  return total;
}

/** What {@link requestedByNode} counts of one pod: its requests ({@link podRequests}), overhead included. Pure. */
export function podRequestsWithOverhead(pod: V1Pod): ResourceAmounts {
  return podRequests(pod.spec, { includeOverhead: true });
}

/** What a pod bound to a node holds there, as the summary counts it: {@link podRequestsWithOverhead} plus its pod slot. Pure. */
export function heldOnNode(pod: V1Pod): ResourceAmounts {
  const held = podRequestsWithOverhead(pod);
  held.set('pods', ONE_POD);
  return held;
}

/**
 * Requests of the non-terminal pods bound to each node (pods of every namespace), plus their
 * count under the `pods` resource. Pods in phase Succeeded or Failed hold nothing; pods being
 * deleted still do (kube-scheduler counts them until they are gone). `requestsOf` gives a pod's
 * requests (default {@link podRequestsWithOverhead}); its amounts are only read.
 */
export function requestedByNode(pods: readonly V1Pod[], requestsOf: (pod: V1Pod) => ResourceAmounts = podRequestsWithOverhead): Map<string, ResourceAmounts> {
  const byNode = new Map<string, ResourceAmounts>();
  for (const pod of pods) {
    const nodeName = pod.spec?.nodeName;
    if (!nodeName || isTerminal(pod)) continue;
    let used = byNode.get(nodeName);
    if (!used) byNode.set(nodeName, (used = new Map()));
    addInto(used, requestsOf(pod));
    used.set('pods', (used.get('pods') ?? 0n) + ONE_POD);
  }
  return byNode;
}

/** Allocatable of a node (`status.allocatable`, else `status.capacity`), in nano-units. */
export function allocatableOf(node: V1Node): ResourceAmounts {
  return parseList(node.status?.allocatable ?? node.status?.capacity);
}

export function isTerminal(pod: V1Pod): boolean {
  const phase = pod.status?.phase;
  return phase === 'Succeeded' || phase === 'Failed';
}

function containerRequests(c: V1Container): ResourceAmounts {
  return requestsOf(c.resources?.requests, c.resources?.limits);
}

/** Requests, with limits standing in for missing requests. */
function requestsOf(requests: Record<string, string> | undefined, limits: Record<string, string> | undefined): ResourceAmounts {
  const out = parseList(limits);
  for (const [name, amount] of parseList(requests)) out.set(name, amount);
  return out;
}

export function parseList(list: Record<string, string> | undefined | null): ResourceAmounts {
  const out: ResourceAmounts = new Map();
  for (const [name, text] of Object.entries(list ?? {})) {
    try {
      out.set(name, parseQuantity(text));
    } catch {
      out.set(name, 0n);
    }
  }
  return out;
}

/** Adds each amount of `add` into `into`, by resource. */
export function addInto(into: ResourceAmounts, add: ResourceAmounts): void {
  for (const [name, amount] of add) into.set(name, (into.get(name) ?? 0n) + amount);
}

function maxInto(into: ResourceAmounts, other: ResourceAmounts): void {
  for (const [name, amount] of other) if (amount > (into.get(name) ?? 0n)) into.set(name, amount);
}
