/**
 * Every label, annotation, finalizer and taint key the project reads or writes, kept
 * compatible with Admiralty's names. Each says who writes it and who reads it.
 */

/** Prefix of all of our keys. */
export const KEY_PREFIX = 'multicluster.admiralty.io/';

/** Namespace label (operator writes; webhook namespaceSelector reads): opt a namespace in. */
export const NAMESPACE_ENABLED_LABEL = 'multicluster-scheduler';
export const NAMESPACE_ENABLED_VALUE = 'enabled';

/** Pod annotation (user writes; webhook reads): presence elects the pod for multi-cluster scheduling. */
export const ELECT_ANNOTATION = `${KEY_PREFIX}elect`;
/** Proxy annotation (webhook writes once; delegate builder reads): the pod as admitted, JSON. */
export const SOURCE_POD_MANIFEST_ANNOTATION = `${KEY_PREFIX}sourcepod-manifest`;
/** Pod annotation (user writes; webhook reads): YAML PodSpec fragment that constrains the proxy. */
export const PROXY_POD_SCHEDULING_CONSTRAINTS_ANNOTATION = `${KEY_PREFIX}proxy-pod-scheduling-constraints`;
/** On a source pod: match its own nodeSelector and node affinity against virtual-node labels too (Admiralty 0.17's name). */
export const USE_CONSTRAINTS_FROM_SPEC_ANNOTATION = `${KEY_PREFIX}use-constraints-from-spec-for-proxy-pod-scheduling`;
/** Pod/Service annotation (user writes; delegate builder and service reroute read): regexp on key=value of labels kept unprefixed. */
export const NO_PREFIX_LABEL_REGEXP_ANNOTATION = `${KEY_PREFIX}no-prefix-label-regexp`;

/** Label on every remote child (delegate, copies; creator writes, ownership checks read): UID of the parent in the source. */
export const PARENT_UID_LABEL = `${KEY_PREFIX}parent-uid`;
/** Label on every remote child (creator writes, ownership checks read): name of the source cluster. */
export const PARENT_CLUSTER_NAME_LABEL = `${KEY_PREFIX}parent-cluster-name`;
/** Annotations on every remote child (creator writes; feedback and kubelet API read): the parent's key. */
export const PARENT_NAME_ANNOTATION = `${KEY_PREFIX}parent-name`;
export const PARENT_NAMESPACE_ANNOTATION = `${KEY_PREFIX}parent-namespace`;
/** Pod condition on a proxy whose delegate cannot be created (delegation writes False with the reason). */
export const DELEGATED_CONDITION = `${KEY_PREFIX}Delegated`;
/**
 * Pod condition on a proxy (outage reconciler writes; users and their tooling read): False with
 * reason `TargetUnreachable` while the proxy's target cannot be reached, True once it is back.
 * Delegation keeps it when it mirrors the delegate's status onto the proxy.
 */
export const TARGET_REACHABLE_CONDITION = `${KEY_PREFIX}TargetReachable`;
/**
 * Pod condition on a proxy (replacement reconciler writes; users read): False with reason
 * `CannotReplace` while its delegate is stuck (Unschedulable longer than
 * `--replace-unschedulable-after`, or its node gone) and the pod has no controller to recreate
 * it elsewhere; True once the delegate is placed again. Delegation keeps it when it mirrors the
 * delegate's status onto the proxy.
 */
export const REPLACEABLE_CONDITION = `${KEY_PREFIX}Replaceable`;
/**
 * Pod (template) or namespace annotation (user writes; outage reconciler reads, the pod's wins):
 * a Go-style duration (`30s`, `2m`). Once the proxy's target has been unreachable that long, a
 * proxy with a controller is deleted so that its controller recreates it on another target.
 * Absent: proxies stay bound to their target through an outage.
 */
export const FAILOVER_AFTER_ANNOTATION = `${KEY_PREFIX}failover-after`;
/**
 * Pod (template) or namespace annotation (user writes; the scheduler extender reads, the pod's
 * wins): `spread`, `pack` or `burst`, how the proxy scheduler ranks the targets that can take
 * the pod. Absent: `spread`. Any other value: `spread`, and a Warning event on the proxy.
 */
export const PLACEMENT_POLICY_ANNOTATION = `${KEY_PREFIX}placement-policy`;
/** Annotation on a proxy's copies of its delegate's events (delegate-events writes): `<target>/<namespace>/<event>`. */
export const MIRRORED_FROM_ANNOTATION = `${KEY_PREFIX}mirrored-from`;
/** Annotation on copies of Services (service follow writes and reads): marks a copy, never re-propagated. */
export const IS_DELEGATE_ANNOTATION = `${KEY_PREFIX}is-delegate`;

/** Service annotations (service follow writes): rerouted and replicated. */
export const GLOBAL_ANNOTATION = `${KEY_PREFIX}global`;
export const CILIUM_GLOBAL_SERVICE_ANNOTATION = 'io.cilium/global-service';
/** Service annotation (service follow writes and reads): the selector before rerouting, `a=b,c=d`. */
export const ORIGINAL_SELECTOR_ANNOTATION = `${KEY_PREFIX}original-selector`;

/**
 * Annotation on the webhook's certificate Secret (the provider writes it when it rotates the CA;
 * every replica reads it): RFC 3339 instant of the last CA rotation. `ca-previous.crt` stays
 * trusted for a retention period after it, while replicas may still serve the old CA's
 * certificates.
 */
export const CA_ROTATED_AT_ANNOTATION = `${KEY_PREFIX}ca-rotated-at`;

/** Label on objects that carry one of our finalizers (writers: webhook, follow; reader: cleanup command). */
export const HAS_FINALIZER_LABEL = `${KEY_PREFIX}has-finalizer`;
/**
 * Finalizer on proxy pods (webhook adds; delegation reconciler removes once the delegate is
 * gone) and on followed ConfigMaps/Secrets/Services (follow adds and removes).
 */
export const PROXY_FINALIZER = `${KEY_PREFIX}delegate`;
export const FOLLOW_FINALIZER = `${KEY_PREFIX}follow`;
/**
 * Finalizer on the binding of the source role made for a self target (targets reconciler adds
 * and removes): the binding stays in force, though deleted, until the provider has stopped
 * acting with it (namespace deletion removes bindings and Targets in any order).
 */
export const SELF_BINDING_FINALIZER = `${KEY_PREFIX}self-target`;

/** Virtual node labels (targets reconciler writes; kube-scheduler and webhook nodeSelector read). */
export const VIRTUAL_KUBELET_PROVIDER_LABEL = 'virtual-kubelet.io/provider';
export const VIRTUAL_KUBELET_PROVIDER_VALUE = 'admiralty';
export const NODE_TYPE_LABEL = 'type';
export const NODE_TYPE_VALUE = 'virtual-kubelet';
export const NODE_ROLE_LABEL = 'kubernetes.io/role';
export const NODE_ROLE_VALUE = 'cluster';
export const EXCLUDE_FROM_LB_LABEL = 'node.kubernetes.io/exclude-from-external-load-balancers';
export const EXCLUDE_BALANCER_LABEL = 'alpha.service-controller.kubernetes.io/exclude-balancer';
/**
 * Virtual node annotation: the path metrics-server scrapes instead of `/metrics/resource`
 * (metrics-server's own key; targets reconciler writes `/metrics/resource/<node>`, metrics-server
 * reads it). All virtual nodes share one kubelet listener, so the path names the node.
 */
export const RESOURCE_METRICS_PATH_ANNOTATION = 'metrics.k8s.io/resource-metrics-path';
/**
 * Target identity labels on virtual nodes (targets reconciler writes; kubelet API and delegation
 * read), and on the RoleBinding/ClusterRoleBinding that grants the provider the source role for a
 * self target (targets reconciler writes, and reads them before it replaces or deletes a binding).
 */
export const TARGET_NAMESPACE_LABEL = `${KEY_PREFIX}target-namespace`;
export const TARGET_NAME_LABEL = `${KEY_PREFIX}target-name`;
export const CLUSTER_TARGET_NAME_LABEL = `${KEY_PREFIX}cluster-target-name`;

/** Virtual node taint (targets reconciler writes; webhook adds the matching toleration). */
export const VIRTUAL_NODE_TAINT_KEY = VIRTUAL_KUBELET_PROVIDER_LABEL;
export const VIRTUAL_NODE_TAINT_VALUE = VIRTUAL_KUBELET_PROVIDER_VALUE;
export const VIRTUAL_NODE_TAINT_EFFECT = 'NoSchedule';

/** Name of the singleton ClusterSummary (summary reconciler writes; targets reconciler reads). */
export const CLUSTER_SUMMARY_NAME = 'singleton';

/** The component our events name as their source and reporter (what `kubectl get events` shows). */
export const EVENT_COMPONENT = 'admiralty';

/** API group and version of our CRDs. */
export const API_GROUP = 'multicluster.admiralty.io';
export const API_VERSION = 'v1alpha1';

/** ClusterRoles shipped for sources (source reconciler binds them). */
export const SOURCE_CLUSTER_ROLE = 'multicluster-scheduler-source';
export const CLUSTER_SUMMARY_VIEWER_CLUSTER_ROLE = 'multicluster-scheduler-cluster-summary-viewer';

/**
 * Admiralty 0.17's ClusterRoles for sources, as its chart names them when installed as release
 * `admiralty` (`<fullname>-source`, `<fullname>-cluster-summary-viewer`), by the role of ours
 * they stand for. The source reconciler reads them to recognize the bindings Admiralty's source
 * controller left behind, which it then replaces with ours.
 */
export const ADMIRALTY_CLUSTER_ROLES: Readonly<Record<string, string>> = {
  [SOURCE_CLUSTER_ROLE]: 'admiralty-source',
  [CLUSTER_SUMMARY_VIEWER_CLUSTER_ROLE]: 'admiralty-cluster-summary-viewer',
};

/** Field manager used for every write. */
export const FIELD_MANAGER = 'admiralty';

/**
 * Labels on the RBAC objects the source reconciler creates in a target cluster for a Source or
 * ClusterSource (source reconciler writes; it reads them to find and delete its objects).
 * Needed because a ClusterRoleBinding cannot have a namespaced Source as owner, so garbage
 * collection cannot remove it. Values are names, hashed when longer than 63 characters.
 */
export const SOURCE_NAMESPACE_LABEL = `${KEY_PREFIX}source-namespace`;
export const SOURCE_NAME_LABEL = `${KEY_PREFIX}source-name`;
export const CLUSTER_SOURCE_NAME_LABEL = `${KEY_PREFIX}cluster-source-name`;

/**
 * Well-known node labels that the targets reconciler also writes on virtual nodes (read by
 * kube-scheduler topology and DaemonSet node selectors): the hostname is always the node name;
 * the OS and architecture default from the target's shared labels.
 */
export const HOSTNAME_LABEL = 'kubernetes.io/hostname';
export const OS_LABEL = 'kubernetes.io/os';
export const ARCH_LABEL = 'kubernetes.io/arch';

/**
 * Label on the Leases of sharded replicas (provider/sharding: each replica writes its own
 * membership Lease and the fence Leases of the targets it owns; every replica of the group lists
 * them): the group's name, so several provider installations can share a namespace.
 */
export const MEMBERSHIP_LABEL = `${KEY_PREFIX}membership`;
export const TARGET_FENCE_LABEL = `${KEY_PREFIX}target-fence`;
/** Annotation on a target's fence Lease (its first claimant writes; operators read): the target's key, which the Lease name only hashes. */
export const TARGET_KEY_ANNOTATION = `${KEY_PREFIX}target-key`;

/**
 * Kueue's pod labels (`sigs.k8s.io/kueue`, v0.17: the user or the source's Kueue writes them; a
 * target's Kueue reads them on the delegate). The delegate builder keeps them unprefixed
 * (`prefixLabels`), so a target whose Kueue manages plain pods queues a delegate as it would the
 * pod: in its LocalQueue `queue-name` (a pod without one is not Kueue's there), at the priority of
 * WorkloadPriorityClass `priority-class`, and with its group `pod-group-name`, whose count
 * annotation `kueue.x-k8s.io/pod-group-total-count` already passes (annotations are never
 * prefixed) and which that Kueue's webhook refuses without the label.
 */
export const KUEUE_QUEUE_NAME_LABEL = 'kueue.x-k8s.io/queue-name';
export const KUEUE_PRIORITY_CLASS_LABEL = 'kueue.x-k8s.io/priority-class';
export const KUEUE_POD_GROUP_NAME_LABEL = 'kueue.x-k8s.io/pod-group-name';
/** The labels above, which the delegate builder never prefixes. */
export const UNPREFIXED_KUEUE_LABELS: ReadonlySet<string> = new Set([KUEUE_QUEUE_NAME_LABEL, KUEUE_PRIORITY_CLASS_LABEL, KUEUE_POD_GROUP_NAME_LABEL]);
