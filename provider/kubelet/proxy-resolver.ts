import type { CoreV1Api, V1Namespace, V1Pod } from '@kubernetes/client-node';
import type { ClusterRegistry } from '../clusters/cluster-registry.js';
import { delegatePodName } from '../model/names.js';
import { checkTenancy } from '../model/tenancy.js';
import type { PodResolver, ResolvedPod } from './kubelet-server.js';

/** Options of {@link createProxyResolver}. */
export interface ProxyResolverOptions {
  /** Source cluster reads (the pod and its namespace). */
  core: Pick<CoreV1Api, 'readNamespacedPod' | 'readNamespace'>;
  registry: Pick<ClusterRegistry, 'byNodeName'>;
  /** Name of this (source) cluster, hashed into delegate names. */
  sourceClusterName: string;
}

/**
 * The kubelet API's resolver: a proxy resolves to its delegate (same namespace, in the target
 * behind the virtual node the proxy is bound to), only when the proxy may use that target
 * (`checkTenancy`: elected with a manifest, namespace enabled, a Target of its own namespace or
 * a ClusterTarget). Anything else, a read failure included, resolves to null, which the server
 * answers exactly as for a pod that does not exist: a refusal must not tell a caller more than
 * a missing pod would.
 *
 * Reads the pod and its namespace from the apiserver on each request (logs, exec, attach and
 * port-forward are rare next to reconciles, and a fresh read never serves a stale binding).
 */
export function createProxyResolver(o: ProxyResolverOptions): PodResolver {
  return {
    async resolve(namespace: string, podName: string): Promise<ResolvedPod | null> {
      let proxy: V1Pod;
      let ns: V1Namespace;
      try {
        proxy = await o.core.readNamespacedPod({ name: podName, namespace });
      } catch {
        return null;
      }
      const nodeName = proxy.spec?.nodeName;
      const target = nodeName ? o.registry.byNodeName(nodeName) : undefined;
      if (!nodeName || !target || !proxy.metadata?.uid) return null;
      try {
        ns = await o.core.readNamespace({ name: namespace });
      } catch {
        return null;
      }
      if (!checkTenancy(proxy, ns, target.ref).allowed) return null;
      return { nodeName, target: { kubeConfig: target.kubeConfig, namespace, pod: delegatePodName(podName, o.sourceClusterName, proxy.metadata.uid) } };
    },
  };
}
