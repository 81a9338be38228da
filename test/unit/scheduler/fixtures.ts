import { KubeConfig, type V1Container, type V1Node, type V1Pod, type V1PodSpec, type V1Taint } from '@kubernetes/client-node';
import { buildClusterSummary } from '../../../provider/model/cluster-summary.js';
import { nodesOfSummary, type FitNode } from '../../../scheduler/target-nodes.js';

export interface NodeFixture {
  labels?: Record<string, string>;
  allocatable?: Record<string, string>;
  taints?: V1Taint[];
  unschedulable?: boolean;
  ready?: boolean;
}

/** A real node of a target: Ready, 4 cpu, 8Gi, 110 pods unless told otherwise. */
export function node(name: string, f: NodeFixture = {}): V1Node {
  return {
    metadata: { name, labels: { 'kubernetes.io/hostname': name, ...f.labels } },
    spec: { unschedulable: f.unschedulable, taints: f.taints },
    status: {
      allocatable: f.allocatable ?? { cpu: '4', memory: '8Gi', pods: '110' },
      conditions: [{ type: 'Ready', status: f.ready === false ? 'False' : 'True' }],
    },
  };
}

/** A container asking for the given requests. */
export function container(requests: Record<string, string> = {}, extra: Partial<V1Container> = {}): V1Container {
  return { name: extra.name ?? 'c', image: 'busybox', resources: { requests }, ...extra };
}

/** A pod with one container and the given requests; `spec` merges over. */
export function pod(name: string, requests: Record<string, string> = {}, spec: Partial<V1PodSpec> = {}, namespace = 'default'): V1Pod {
  return { metadata: { name, namespace }, spec: { containers: [container(requests)], ...spec } };
}

/** A pod running on a node in a target. */
export function runningOn(nodeName: string, requests: Record<string, string>, phase = 'Running'): V1Pod {
  const p = pod(`p-${nodeName}-${Math.random().toString(36).slice(2, 8)}`, requests, { nodeName });
  p.status = { phase };
  return p;
}

/** The nodes a source sees of a target with these nodes and pods: through its ClusterSummary, as in production. */
export function nodesOf(nodes: V1Node[], pods: readonly V1Pod[] = []): readonly FitNode[] {
  return nodesOfSummary(buildClusterSummary(nodes, pods));
}

/** A kubeconfig whose server is never dialled: for target clients that the tests never call. */
export function kubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:1', skipTLSVerify: false }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
    currentContext: 'ctx',
  });
  return kc;
}
