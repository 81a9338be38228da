import { V1MicroTime } from '@kubernetes/client-node';
import type { V1Lease, V1Node, V1NodeCondition, V1NodeStatus, V1Taint, V1Toleration } from '@kubernetes/client-node';
import {
  ARCH_LABEL,
  CLUSTER_TARGET_NAME_LABEL,
  EXCLUDE_BALANCER_LABEL,
  EXCLUDE_FROM_LB_LABEL,
  HOSTNAME_LABEL,
  NODE_ROLE_LABEL,
  NODE_ROLE_VALUE,
  NODE_TYPE_LABEL,
  NODE_TYPE_VALUE,
  OS_LABEL,
  TARGET_NAMESPACE_LABEL,
  TARGET_NAME_LABEL,
  VIRTUAL_KUBELET_PROVIDER_LABEL,
  VIRTUAL_KUBELET_PROVIDER_VALUE,
  VIRTUAL_NODE_TAINT_EFFECT,
  VIRTUAL_NODE_TAINT_KEY,
  VIRTUAL_NODE_TAINT_VALUE,
  RESOURCE_METRICS_PATH_ANNOTATION,
} from '../core/keys.js';
import { parseGoRegexp } from './labels.js';
import { sortedEntries, stringMapMergePatch } from './maps.js';
import { equalNormalized } from './normalize.js';
import { formatQuantity, parseQuantity, resourceListEquals } from './quantity.js';
import { addInto, type ResourceAmounts } from './resources.js';
import { preemptibleHeld } from './priority-buckets.js';
import { labelValueFor, virtualNodeName } from './names.js';
import type { ClusterSummary, TargetRef } from './types.js';

/** Namespace of node Leases (kubelet heartbeats). */
export const NODE_LEASE_NAMESPACE = 'kube-node-lease';
/** Lease duration of the kubelet and virtual-kubelet; renew every quarter of it (10 s). */
export const NODE_LEASE_DURATION_SECONDS = 40;

/** Health of a target as the clusters registry sees it; drives the Ready condition. */
export interface TargetHealth {
  ready: boolean;
  /** CamelCase reason for the Ready condition, e.g. `TargetReachable`, `TargetUnreachable`. */
  reason: string;
  message: string;
  /** ISO time at which `ready` last changed. */
  lastTransitionTime: string;
}

/** Input of {@link buildVirtualNode}. */
export interface VirtualNodeInput {
  ref: TargetRef;
  /** The target's ClusterSummary; absent while unknown (unreachable target, not yet written). */
  summary?: ClusterSummary;
  /** Target's `spec.excludedLabelsRegexp` (Go regexp on `key=value` of the summary labels). */
  excludedLabelsRegexp?: string | null;
  health: TargetHealth;
  /** Where the kube-apiserver reaches our kubelet API for this node. */
  kubelet: { address: string; port: number };
  nodeInfo: { kubeletVersion: string; operatingSystem?: string; architecture?: string };
  /** ISO time of this build; heartbeat times. */
  now: string;
  /**
   * What this source's own proxies on this node hold in the target: the requests of the proxies
   * whose delegates the summary counts (their room is already gone from the summary's `free`, and
   * kube-scheduler subtracts the proxies again from our allocatable; see `proxiesCountedBy`).
   * Empty by default.
   */
  heldByProxies?: ResourceAmounts;
  /**
   * The target's `spec.placement.burstCapacity` (nano-units), when it has one: what its
   * cluster-autoscaler may still add, advertised on top of what is free (see
   * {@link advertisedAllocatable}).
   */
  burstCapacity?: ResourceAmounts;
  /**
   * Advertise, on top of what is free, what the target's pods that a delegate could preempt
   * hold (see `preemptibleHeld`): on when the scheduler extender judges each pod (a proxy
   * scheduler runs), whose filter alone then decides, per real node and priority, whether the
   * target would preempt for the pod. Off in fallback mode, where the virtual node is all a
   * scheduler judges, and would take pods of any priority into a full target.
   */
  advertisePreemptible?: boolean;
}

/** Resources a node must always advertise; '0' when the target's summary does not say. */
const REQUIRED_RESOURCES = ['cpu', 'memory', 'pods'];

/**
 * Labels no summary label may override: they identify the node as ours and as this target (the
 * webhook, the scheduler extender and our own lookups select on them), keep it out of cloud load
 * balancers, and `kubernetes.io/hostname` must name this node: a one-node target would otherwise
 * lend us its node's hostname.
 */
const PROTECTED_LABELS = new Set([
  VIRTUAL_KUBELET_PROVIDER_LABEL,
  NODE_TYPE_LABEL,
  HOSTNAME_LABEL,
  EXCLUDE_FROM_LB_LABEL,
  EXCLUDE_BALANCER_LABEL,
  TARGET_NAMESPACE_LABEL,
  TARGET_NAME_LABEL,
  CLUSTER_TARGET_NAME_LABEL,
]);

/**
 * The labels of a target's virtual node that say which target it is, and that no real node has:
 * `virtual-kubelet.io/provider`, and `target-namespace` and `target-name` of a Target, or
 * `cluster-target-name` of a ClusterTarget. What a pod's own constraints on those keys are
 * judged against (`resolveTargetKeys`). Pure.
 */
export function targetIdentityLabels(ref: TargetRef): Record<string, string> {
  return ref.kind === 'Target'
    ? { [VIRTUAL_KUBELET_PROVIDER_LABEL]: VIRTUAL_KUBELET_PROVIDER_VALUE, [TARGET_NAMESPACE_LABEL]: ref.namespace, [TARGET_NAME_LABEL]: labelValueFor(ref.name) }
    : { [VIRTUAL_KUBELET_PROVIDER_LABEL]: VIRTUAL_KUBELET_PROVIDER_VALUE, [CLUSTER_TARGET_NAME_LABEL]: labelValueFor(ref.name) };
}

/** The taints of every virtual node: `virtual-kubelet.io/provider=admiralty:NoSchedule`, so that only proxies land there. Pure. */
export function virtualNodeTaints(): V1Taint[] {
  return [{ key: VIRTUAL_NODE_TAINT_KEY, value: VIRTUAL_NODE_TAINT_VALUE, effect: VIRTUAL_NODE_TAINT_EFFECT }];
}

/** Tolerations of exactly {@link virtualNodeTaints} (`Equal`, each key, value and effect). Pure. */
export function virtualNodeTolerations(): V1Toleration[] {
  return virtualNodeTaints().map((t) => ({ key: t.key, operator: 'Equal', value: t.value, effect: t.effect }));
}

/**
 * The labels of a virtual node: base labels, target identity labels, and the summary's shared
 * labels minus those whose `key=value` matches `excludedLabelsRegexp`. As in Admiralty, summary
 * labels override base labels (so a target of Windows or arm64 nodes says so through
 * `kubernetes.io/os`, `kubernetes.io/arch`, `kubernetes.io/role`), except the protected ones
 * above, which always keep our values.
 *
 * @throws ValidationError when `excludedLabelsRegexp` does not compile (Admiralty ignored it; we
 *   refuse, and the targets reconciler reports it in the Target's status).
 */
export function virtualNodeLabels(ref: TargetRef, summaryLabels: Record<string, string> | undefined, excludedLabelsRegexp?: string | null, operatingSystem = 'linux'): Record<string, string> {
  const name = virtualNodeName(ref);
  const excluded = excludedLabelsRegexp ? parseGoRegexp(excludedLabelsRegexp) : undefined;
  const own: Record<string, string> = {
    [NODE_TYPE_LABEL]: NODE_TYPE_VALUE,
    [HOSTNAME_LABEL]: name,
    [EXCLUDE_FROM_LB_LABEL]: 'true',
    [EXCLUDE_BALANCER_LABEL]: 'true',
    ...targetIdentityLabels(ref),
  };
  const labels: Record<string, string> = { [NODE_ROLE_LABEL]: NODE_ROLE_VALUE, [OS_LABEL]: operatingSystem };
  for (const [key, value] of sortedEntries(summaryLabels ?? {})) {
    if (PROTECTED_LABELS.has(key)) continue;
    if (excluded?.test(`${key}=${value}`)) continue;
    labels[key] = value;
  }
  return { ...labels, ...own };
}

/**
 * What a virtual node advertises of a resource that a target's burst capacity leaves out (not
 * limited, see `parseTargetPlacement`): more than any pod asks for, within what kube-scheduler
 * counts in an int64 (a million cores, an exbibyte, a million pods).
 */
const UNBOUNDED_BURST: ReadonlyMap<string, bigint> = new Map([
  ['cpu', 1_000_000n * 1_000_000_000n],
  ['memory', 2n ** 60n * 1_000_000_000n],
  ['pods', 1_000_000n * 1_000_000_000n],
]);

/**
 * What the virtual node offers kube-scheduler: what is free in the target for new pods, plus what
 * this source's own running proxies hold there (kube-scheduler subtracts those itself), and, with
 * `preemptible`, what the target's pods that a delegate could preempt hold, never more
 * than the target's allocatable. A target whose summary predates `free` is advertised as before,
 * by its allocatable. A target with burst capacity offers that on top (`cpu`, `memory`, `pods`; a
 * resource the capacity leaves out, {@link UNBOUNDED_BURST}): the proxy scheduler's own
 * resource check runs before the extender's filter, which alone judges a burst (what already
 * waits there included), and would otherwise refuse a target with no room, or no nodes, before
 * the filter is asked.
 */
function advertisedAllocatable(summary: ClusterSummary | undefined, held: ResourceAmounts = new Map(), burst?: ResourceAmounts, preemptible?: ResourceAmounts): Record<string, string> | undefined {
  if (!summary?.free) return withBurst(summary?.allocatable ?? summary?.capacity, summary, burst);
  const ceiling = summary.allocatable ?? summary.capacity ?? {};
  if (preemptible) addInto((held = new Map(held)), preemptible);
  const out: Record<string, string> = {};
  for (const [name, text] of Object.entries(summary.free)) {
    // The target wrote these: a quantity that does not parse is left out, not trusted.
    const free = tryParse(text);
    if (free === undefined) continue;
    let amount = free + (held.get(name) ?? 0n);
    const max = tryParse(ceiling[name]);
    if (max !== undefined && amount > max) amount = max;
    out[name] = formatQuantity(amount, name);
  }
  return withBurst(out, summary, burst);
}

/** `list` with the burst capacity added to cpu, memory and pods; as it is without a summary (a target that offers nothing) or a capacity. */
function withBurst(list: Record<string, string> | undefined, summary: ClusterSummary | undefined, burst: ResourceAmounts | undefined): Record<string, string> | undefined {
  if (!summary || !burst) return list;
  const out: Record<string, string> = { ...(list ?? {}) };
  for (const name of REQUIRED_RESOURCES) {
    const now = tryParse(out[name]) ?? 0n;
    out[name] = formatQuantity(now + (burst.get(name) ?? UNBOUNDED_BURST.get(name)!), name);
  }
  return out;
}

function tryParse(text: string | undefined): bigint | undefined {
  if (text === undefined) return undefined;
  try {
    return parseQuantity(text);
  } catch {
    return undefined;
  }
}

function resources(list: Record<string, string> | undefined): Record<string, string> {
  const out: Record<string, string> = { ...(list ?? {}) };
  for (const r of REQUIRED_RESOURCES) out[r] ??= '0';
  return out;
}

/**
 * Builds the desired virtual node of a target (metadata, taint and status; create it with status,
 * the apiserver accepts it on create).
 *
 * * labels: {@link virtualNodeLabels};
 * * taint `virtual-kubelet.io/provider=admiralty:NoSchedule`;
 * * capacity/allocatable: the summary's sums (allocatable falls back to capacity). `cpu`,
 *   `memory` and `pods` default to '0' when the summary is absent or silent: advertising capacity
 *   we do not know would let the stock scheduler bind proxies that cannot run, while zero makes
 *   them wait with a clear `Insufficient cpu` / `Too many pods` until the summary arrives; a
 *   target with burst capacity adds it (see `advertisedAllocatable`);
 * * conditions: Ready from `health` (False keeps proxies off through the node lifecycle
 *   controller's not-ready taint), MemoryPressure/DiskPressure/PIDPressure False.
 *   NetworkUnavailable is not reported: route controllers may set it on nodes they do not know,
 *   and we would fight them (the webhook tolerates it instead, as Admiralty does);
 * * addresses: InternalIP = the kubelet API address first (the apiserver picks the first address
 *   of its preferred types), then Hostname = the node name;
 * * daemonEndpoints: our kubelet port (otherwise the apiserver assumes 10250);
 * * nodeInfo: the given versions; the OS and architecture default to the final `kubernetes.io/os`
 *   / `kubernetes.io/arch` labels; what a virtual node does not have (machine ID, kernel...) is ''.
 *
 * Pure; called by the targets reconciler and the heartbeat.
 *
 * @throws ValidationError when `excludedLabelsRegexp` does not compile.
 */
export function buildVirtualNode(input: VirtualNodeInput): V1Node {
  const name = virtualNodeName(input.ref);
  const labels = virtualNodeLabels(input.ref, input.summary?.metadata?.labels, input.excludedLabelsRegexp, input.nodeInfo.operatingSystem ?? 'linux');
  const now = new Date(input.now);
  const pressure = (type: string, reason: string, message: string): V1NodeCondition => ({
    type,
    status: 'False',
    reason,
    message,
    lastHeartbeatTime: now,
    lastTransitionTime: now,
  });
  const capacity = resources(withBurst(input.summary?.capacity, input.summary, input.burstCapacity));
  const allocatable = resources(advertisedAllocatable(input.summary, input.heldByProxies, input.burstCapacity, input.advertisePreemptible ? preemptibleHeld(input.summary) : undefined));
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, labels, annotations: { [RESOURCE_METRICS_PATH_ANNOTATION]: `/metrics/resource/${name}` } },
    spec: {
      taints: virtualNodeTaints(),
    },
    status: {
      capacity,
      allocatable,
      conditions: [
        {
          type: 'Ready',
          status: input.health.ready ? 'True' : 'False',
          reason: input.health.reason,
          message: input.health.message,
          lastHeartbeatTime: now,
          lastTransitionTime: new Date(input.health.lastTransitionTime),
        },
        pressure('MemoryPressure', 'KubeletHasSufficientMemory', 'virtual node: no memory pressure'),
        pressure('DiskPressure', 'KubeletHasNoDiskPressure', 'virtual node: no disk pressure'),
        pressure('PIDPressure', 'KubeletHasSufficientPID', 'virtual node: no PID pressure'),
      ],
      addresses: [
        { type: 'InternalIP', address: input.kubelet.address },
        { type: 'Hostname', address: name },
      ],
      daemonEndpoints: { kubeletEndpoint: { Port: input.kubelet.port } },
      nodeInfo: {
        kubeletVersion: input.nodeInfo.kubeletVersion,
        // virtualNodeLabels always sets it, to this same fallback.
        operatingSystem: labels[OS_LABEL] ?? input.nodeInfo.operatingSystem ?? 'linux',
        architecture: input.nodeInfo.architecture ?? labels[ARCH_LABEL] ?? '',
        osImage: 'Admiralty virtual node',
        kernelVersion: '',
        containerRuntimeVersion: '',
        kubeProxyVersion: '',
        machineID: '',
        systemUUID: '',
        bootID: '',
      },
    },
  };
}

/** A node status patch body: like V1NodeStatus, but resources to remove are null. */
export interface NodeStatusPatch extends Omit<V1NodeStatus, 'capacity' | 'allocatable'> {
  capacity?: Record<string, string | null>;
  allocatable?: Record<string, string | null>;
}

/**
 * The status to send so the existing node gets the desired status, or null when only heartbeat
 * times differ (pass `{ heartbeat: true }` to always get a body, e.g. on the periodic report).
 *
 * For each desired condition whose status equals the existing one, the existing
 * `lastTransitionTime` is kept (a transition is a change of status, not a rebuild). Conditions of
 * other types (written by others) are left alone, so send the result as a **strategic merge
 * patch** `{ status: <result> }` on `nodes/{name}/status` (conditions and addresses merge by
 * type); resources no longer desired are null, so they are removed.
 *
 * Pure; called by the targets reconciler and the heartbeat.
 */
export function buildVirtualNodeStatusPatch(existing: V1Node, desired: V1Node, opts: { heartbeat?: boolean } = {}): NodeStatusPatch | null {
  const cur = existing.status ?? {};
  const want = desired.status ?? {};
  const curConditions = new Map((cur.conditions ?? []).map((c) => [c.type, c]));
  const conditions = (want.conditions ?? []).map((c) => {
    const old = curConditions.get(c.type);
    return old && old.status === c.status && old.lastTransitionTime ? { ...c, lastTransitionTime: new Date(old.lastTransitionTime) } : c;
  });
  const withoutHeartbeat = (list: V1NodeCondition[]) => list.map(({ lastHeartbeatTime: _h, ...rest }) => rest);
  const ours = new Set(conditions.map((c) => c.type));
  const unchanged =
    equalNormalized(withoutHeartbeat(conditions), withoutHeartbeat((cur.conditions ?? []).filter((c) => ours.has(c.type)))) &&
    equalNormalized(want.addresses, cur.addresses) &&
    equalNormalized(want.daemonEndpoints, cur.daemonEndpoints) &&
    equalNormalized(want.nodeInfo, cur.nodeInfo) &&
    resourceListEquals(want.capacity, cur.capacity) &&
    resourceListEquals(want.allocatable, cur.allocatable);
  if (unchanged && !opts.heartbeat) return null;
  return {
    capacity: withRemovals(cur.capacity, want.capacity ?? {}),
    allocatable: withRemovals(cur.allocatable, want.allocatable ?? {}),
    conditions,
    addresses: want.addresses,
    daemonEndpoints: want.daemonEndpoints,
    nodeInfo: want.nodeInfo,
  };
}

function withRemovals(current: Record<string, string> | undefined, desired: Record<string, string>): Record<string, string | null> {
  const out: Record<string, string | null> = { ...desired };
  for (const k of Object.keys(current ?? {})) {
    if (!(k in desired)) out[k] = null;
  }
  return out;
}

/**
 * A JSON merge patch of the node's metadata: labels made exactly the desired set (labels added by
 * hand are removed, as Admiralty reconciles them) and our annotations set (others' annotations
 * are left alone); null when nothing differs. Taints are set at creation only and are not
 * reconciled. Pure.
 */
export function buildVirtualNodeMetadataPatch(existing: V1Node, desired: V1Node): { metadata: { labels?: Record<string, string | null>; annotations?: Record<string, string> } } | null {
  const labels = stringMapMergePatch(existing.metadata?.labels, desired.metadata?.labels ?? {});
  const current = existing.metadata?.annotations ?? {};
  const annotations = Object.fromEntries(Object.entries(desired.metadata?.annotations ?? {}).filter(([k, v]) => current[k] !== v));
  const has = Object.keys(annotations).length > 0;
  if (!labels && !has) return null;
  return { metadata: { ...(labels ? { labels } : {}), ...(has ? { annotations } : {}) } };
}

/**
 * The Lease that carries a virtual node's heartbeat: `kube-node-lease/<node name>`, held by the
 * node, 40 s, renewed at `now` (a MicroTime: serializes with the six fractional digits the
 * apiserver requires), owned by the Node so it is garbage-collected with it. Renew by writing a
 * fresh `spec.renewTime`. Pure; called by the heartbeat.
 */
export function buildNodeLease(nodeName: string, nodeUid: string, now: string): V1Lease {
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      name: nodeName,
      namespace: NODE_LEASE_NAMESPACE,
      ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: nodeName, uid: nodeUid }],
    },
    spec: {
      holderIdentity: nodeName,
      leaseDurationSeconds: NODE_LEASE_DURATION_SECONDS,
      renewTime: new V1MicroTime(now),
    },
  };
}
