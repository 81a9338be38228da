import type { V1ObjectMeta } from '@kubernetes/client-node';
import type { HostPort } from './host-ports.js';

/**
 * TypeScript shapes of our custom resources (group multicluster.admiralty.io, v1alpha1).
 * Field names are Admiralty's, so existing manifests keep working; `status` is ours.
 */

/** A condition in `status.conditions`, same shape as metav1.Condition. */
export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

export interface KubeconfigSecretRef {
  /** Secret name. */
  name: string;
  /** Secret namespace: ClusterTarget only (a Target's Secret lives in the Target's namespace). */
  namespace?: string;
  /** Data key holding the kubeconfig; default `config`. */
  key?: string;
  /** Context to use; default the kubeconfig's current-context. */
  context?: string;
}

export interface TargetSpec {
  /** The local cluster, reached with the provider's own credentials. */
  self?: boolean;
  kubeconfigSecret?: KubeconfigSecretRef;
  /** Regexp matched against `key=value` of the target's shared node labels; matches are not copied. */
  excludedLabelsRegexp?: string | null;
  /** How the proxy scheduler weighs this target against the others. */
  placement?: TargetPlacementSpec;
}

/** `spec.placement` of a Target or ClusterTarget (ours; Admiralty has none). */
export interface TargetPlacementSpec {
  /** Share of placements (`spread`), integer 0..1000, default 1; 0: only when no other target can take the pod. */
  weight?: number;
  /** Order for the `burst` policy, lower first; integer -1000..1000, default 0. */
  priority?: number;
  /** What the target's cluster-autoscaler may still add, as quantities (`cpu`, `memory`, `pods`); absent: no bursting. */
  burstCapacity?: { cpu?: string | number; memory?: string | number; pods?: string | number };
}

export interface TargetStatus {
  conditions?: Condition[];
  /** Name of the virtual node that represents this target. */
  virtualNodeName?: string;
  observedGeneration?: number;
}

/** Namespaced: pods of this namespace may go to the target. */
export interface Target {
  apiVersion?: string;
  kind?: string;
  metadata: V1ObjectMeta;
  spec: TargetSpec;
  status?: TargetStatus;
}

/** Cluster-scoped: pods of every namespace may go to the target. */
export type ClusterTarget = Target;

export interface SourceSpec {
  /** RBAC user name of the source's identity. */
  userName?: string;
  /** ServiceAccount in the Source's namespace; created if missing. */
  serviceAccountName?: string;
}

export interface ClusterSourceSpec {
  userName?: string;
  serviceAccount?: { name: string; namespace: string };
}

export interface Source {
  apiVersion?: string;
  kind?: string;
  metadata: V1ObjectMeta;
  spec: SourceSpec;
  status?: { conditions?: Condition[] };
}

export interface ClusterSource {
  apiVersion?: string;
  kind?: string;
  metadata: V1ObjectMeta;
  spec: ClusterSourceSpec;
  status?: { conditions?: Condition[] };
}

/**
 * The singleton summary a cluster writes about itself (no spec/status: top-level fields, as in
 * Admiralty). Shared node labels are in metadata.labels.
 */
export interface ClusterSummary {
  apiVersion?: string;
  kind?: string;
  metadata: V1ObjectMeta;
  /** Sum of node.status.capacity over non-virtual nodes. */
  capacity?: Record<string, string>;
  /** Sum of node.status.allocatable over non-virtual nodes. */
  allocatable?: Record<string, string>;
  /** Sum of `free` over the nodes that take new pods (Ready, not cordoned). */
  free?: Record<string, string>;
  /** The real nodes, grouped by their scheduling-relevant labels and taints. */
  nodePools?: NodePool[];
  /**
   * The newest pod resourceVersion the summary accounts for: every change of an assigned pod up
   * to it is counted in `free`. Sources compare their delegates' resourceVersions with it to know
   * which of them the summary already counts (comparable resource versions, Kubernetes 1.35).
   */
  podsResourceVersion?: string;
  /**
   * How often, at the longest, its writer rewrites it even when nothing changed (whole seconds,
   * 1 to 3600): a reader that sees the same version for three of these knows its writer stopped.
   * A summary without it (an earlier version's, Admiralty's) is never judged stale.
   */
  renewIntervalSeconds?: number;
  /** When its writer last wrote it, by the writer's clock (RFC 3339): for people; readers go by version. */
  renewTime?: string;
  /**
   * The cluster's RuntimeClasses, by name, with what its RuntimeClass admission adds to a pod
   * that names one (overhead, node selector, tolerations). Absent when its writer could not read
   * them (an earlier version, or no permission): a reader then does not judge runtime classes.
   */
  runtimeClasses?: SummaryRuntimeClass[];
  /**
   * The names of the cluster's PriorityClasses, sorted: its Priority admission refuses a pod that
   * names another. Absent when its writer could not read them: a reader then does not judge them.
   */
  priorityClasses?: string[];
  /**
   * The cluster's PriorityClasses with what its Priority admission gives a pod that names one
   * (or, for the `globalDefault` class, a pod that names none), sorted by name: what a source
   * needs to know a delegate's priority there and whether it may preempt. Beside
   * {@link priorityClasses}, not instead, so that earlier readers, which take that list as names,
   * still read the summary. Absent when its writer could not read them (or is an earlier
   * version): a reader then judges no preemption in this cluster.
   */
  priorityClassValues?: SummaryPriorityClass[];
}

/** One PriorityClass of a cluster, as its summary publishes it. */
export interface SummaryPriorityClass {
  name: string;
  value: number;
  /** Only when `Never`: a pod of this class never preempts (the default is `PreemptLowerPriority`). */
  preemptionPolicy?: 'Never';
  /** Only when true: the value of the pods that name no class. */
  globalDefault?: true;
}

/**
 * What the pods of one priority (or of a range, see `heldByPriority` of {@link SummaryNode})
 * request on a node: `pods` counts them.
 */
export interface PriorityBucket {
  /** The priority of the pods counted, or the highest of them when the bucket merges several. */
  priority: number;
  requests: Record<string, string>;
}

/** What a RuntimeClass does to the pods that name it, in the cluster that has it. */
export interface SummaryRuntimeClass {
  name: string;
  /** `overhead.podFixed`: added to the pod's requests (`spec.overhead`). */
  overhead?: Record<string, string>;
  /** `scheduling.nodeSelector`: merged into the pod's; a key the pod sets to another value is a conflict. */
  nodeSelector?: Record<string, string>;
  /** `scheduling.tolerations`: added to the pod's. */
  tolerations?: Array<{ key?: string; operator?: string; value?: string; effect?: string; tolerationSeconds?: number }>;
}

/** Nodes that carry the same labels (but `kubernetes.io/hostname`) and the same hard taints. */
export interface NodePool {
  labels: Record<string, string>;
  /** NoSchedule and NoExecute taints (PreferNoSchedule never keeps a pod off a node). */
  taints?: Array<{ key: string; value?: string; effect: string }>;
  nodes: SummaryNode[];
}

/** One node of a pool, with what a scheduler needs to judge whether a pod fits it. */
export interface SummaryNode {
  name: string;
  /** Its `kubernetes.io/hostname` label, when that is not its name. */
  hostname?: string;
  allocatable: Record<string, string>;
  /** Allocatable minus the requests of the non-terminal pods bound to it (`pods` counts them); never below zero. */
  free: Record<string, string>;
  /** Cordoned (`spec.unschedulable`). */
  unschedulable?: boolean;
  /** Its Ready condition is not True. */
  notReady?: boolean;
  /** The host ports its non-terminal pods hold (see `hostPortsByNode`); left out when none. */
  hostPorts?: HostPort[];
  /**
   * What its non-terminal pods of a priority another pod can preempt (below the highest value of
   * the cluster's PriorityClasses that a user may define, at most one billion) request, by
   * priority, lowest first, at most
   * `MAX_PRIORITY_BUCKETS` entries (the highest priorities merged into the last); left out when
   * there are none. A pod of priority P could have the room of every bucket below P freed for it
   * by the cluster's scheduler.
   */
  heldByPriority?: PriorityBucket[];
}

/** Identity of a Target or ClusterTarget; `namespace` is empty for a ClusterTarget. */
export interface TargetRef {
  kind: 'Target' | 'ClusterTarget';
  namespace: string;
  name: string;
}
