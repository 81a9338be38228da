/**
 * The pure pieces of the demo (`demo.ts`): the manifest it applies and the counting it does on
 * `kubectl get -o json` output. No I/O.
 */
import { ELECT_ANNOTATION, TARGET_NAME_LABEL, TARGET_NAMESPACE_LABEL, VIRTUAL_KUBELET_PROVIDER_LABEL, VIRTUAL_KUBELET_PROVIDER_VALUE } from '../core/keys.js';

/** The parts of a Pod the demo reads. */
export interface PodLike {
  metadata?: { name?: string; deletionTimestamp?: unknown };
  spec?: { nodeName?: string };
  status?: { phase?: string };
}

/** The parts of a Node the demo reads. */
export interface NodeLike {
  metadata?: { name?: string; labels?: Record<string, string> };
  status?: { conditions?: { type?: string; status?: string }[] };
}

/** Key under which pods not yet bound to a node are counted. */
export const UNSCHEDULED = '(unscheduled)';

export interface PodTally {
  /** Every pod in the list, terminating ones included. */
  total: number;
  /** Pods being deleted (deletionTimestamp set). */
  terminating: number;
  /** Pods not being deleted, per phase (`Running`, `Pending`, ...). */
  byPhase: Record<string, number>;
  /** Pods not being deleted, per node name (UNSCHEDULED when unbound). */
  byNode: Record<string, number>;
  /** Pods not being deleted and Running. */
  running: number;
}

/** Counts the pods of a `kubectl get pods -o json` list per node and phase; terminating pods are counted apart. */
export function tallyPods(list: { items?: PodLike[] }): PodTally {
  const tally: PodTally = { total: 0, terminating: 0, byPhase: {}, byNode: {}, running: 0 };
  for (const pod of list.items ?? []) {
    tally.total++;
    if (pod.metadata?.deletionTimestamp) {
      tally.terminating++;
      continue;
    }
    const phase = pod.status?.phase ?? 'Unknown';
    tally.byPhase[phase] = (tally.byPhase[phase] ?? 0) + 1;
    if (phase === 'Running') tally.running++;
    const node = pod.spec?.nodeName || UNSCHEDULED;
    tally.byNode[node] = (tally.byNode[node] ?? 0) + 1;
  }
  return tally;
}

/** `a 4, b 6` (sorted by key), or `none`. */
export function formatCounts(counts: Record<string, number>): string {
  const keys = Object.keys(counts).sort();
  return keys.length ? keys.map((k) => `${k} ${counts[k]}`).join(', ') : 'none';
}

/** A tally in words: `10 Running` or `7 Running, 3 Pending, 2 terminating`. */
export function describeTally(t: PodTally): string {
  const parts = Object.keys(t.byPhase)
    .sort()
    .map((p) => `${t.byPhase[p]} ${p}`);
  if (t.terminating) parts.push(`${t.terminating} terminating`);
  return parts.length ? parts.join(', ') : 'no pods';
}

export interface VirtualNodeInfo {
  name: string;
  ready: boolean;
}

/**
 * The virtual nodes of the Targets of one namespace, by target name, from
 * `kubectl get nodes -o json` (identified by their labels, not by their names).
 */
export function virtualNodesByTarget(list: { items?: NodeLike[] }, namespace: string): Map<string, VirtualNodeInfo> {
  const out = new Map<string, VirtualNodeInfo>();
  for (const node of list.items ?? []) {
    const labels = node.metadata?.labels ?? {};
    if (labels[VIRTUAL_KUBELET_PROVIDER_LABEL] !== VIRTUAL_KUBELET_PROVIDER_VALUE) continue;
    if (labels[TARGET_NAMESPACE_LABEL] !== namespace || !labels[TARGET_NAME_LABEL] || !node.metadata?.name) continue;
    const ready = (node.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
    out.set(labels[TARGET_NAME_LABEL], { name: node.metadata.name, ready });
  }
  return out;
}

/**
 * Compares where the proxies are (per virtual node) with where the delegates are (per cluster):
 * one line per target, and whether they agree.
 */
export function compareProxiesAndDelegates(
  proxiesByNode: Record<string, number>,
  delegatesByCluster: Record<string, number>,
  nodes: Map<string, VirtualNodeInfo>,
): { lines: string[]; consistent: boolean } {
  const lines: string[] = [];
  let consistent = true;
  for (const [target, node] of [...nodes.entries()].sort(([a], [b]) => a.localeCompare(b))) {
    const proxies = proxiesByNode[node.name] ?? 0;
    const delegates = delegatesByCluster[target] ?? 0;
    if (proxies !== delegates) consistent = false;
    lines.push(`${target}: ${proxies} prox${proxies === 1 ? 'y' : 'ies'} on ${node.name}, ${delegates} delegate${delegates === 1 ? '' : 's'} in ${target}`);
  }
  return { lines, consistent };
}

/** The user guide's NGINX Deployment, elected for multi-cluster scheduling. */
export function nginxDeploymentYaml(opts: { name: string; namespace: string; replicas: number }): string {
  return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${opts.name}
  namespace: ${opts.namespace}
spec:
  replicas: ${opts.replicas}
  selector:
    matchLabels:
      app: ${opts.name}
  template:
    metadata:
      labels:
        app: ${opts.name}
      annotations:
        ${ELECT_ANNOTATION}: ""
    spec:
      containers:
      - name: nginx
        image: nginx
        ports:
        - containerPort: 80
        resources:
          requests:
            cpu: 100m
            memory: 32Mi
`;
}
