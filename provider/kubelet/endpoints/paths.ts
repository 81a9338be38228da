type Route = 'containerLogs' | 'exec' | 'attach' | 'portForward';

/** A parsed pod-scoped kubelet path. */
export interface KubeletPath {
  route: Route;
  namespace: string;
  pod: string;
  container: string;
}

/**
 * Parses `/containerLogs|exec|attach/{ns}/{pod}/{container}` and `/portForward/{ns}/{pod}`.
 * Pure. Returns null for anything else (404).
 */
export function parseKubeletPath(pathname: string): KubeletPath | null {
  const parts = pathname.split('/').slice(1);
  const route = parts[0] as Route;
  let decoded: string[];
  try {
    decoded = parts.slice(1).map(decodeURIComponent);
  } catch {
    return null;
  }
  if (decoded.some((p) => p === '')) return null;
  if (route === 'portForward') {
    // The apiserver may append the pod UID; accept and ignore it, as the kubelet does.
    const [namespace, pod, , ...extra] = decoded;
    if (namespace === undefined || pod === undefined || extra.length > 0) return null;
    return { route, namespace, pod, container: '' };
  }
  if (route === 'containerLogs' || route === 'exec' || route === 'attach') {
    const [namespace, pod, third, fourth, ...extra] = decoded;
    if (namespace === undefined || pod === undefined || third === undefined || extra.length > 0) return null;
    // With a 4th segment the layout is {ns}/{pod}/{uid}/{container}.
    const container = fourth ?? third;
    return { route, namespace, pod, container };
  }
  return null;
}

/** A node-scoped read: which one, and of which virtual node (null when the request does not say). */
export interface NodeScopedPath {
  route: 'metricsResource' | 'statsSummary';
  nodeName: string | null;
}

const NODE_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/**
 * Parses the node-scoped paths we serve and tells which virtual node they ask about. All virtual
 * nodes share one listener, and a kubelet's paths do not name the node, so the node comes from:
 * * the path itself, `/metrics/resource/<node>`: what each virtual node's
 *   `metrics.k8s.io/resource-metrics-path` annotation points metrics-server at;
 * * else the `X-Forwarded-Uri` the apiserver's node proxy sets
 *   (`/api/v1/nodes/<node>[:port]/proxy/<path>`), for `kubectl get --raw
 *   /api/v1/nodes/<node>/proxy/stats/summary` and the like. A caller who writes the header
 *   himself only names another node, and is authorized against that one.
 * Pure. Returns null for any other path.
 */
export function parseNodeScopedPath(pathname: string, forwardedUri: string | undefined): NodeScopedPath | null {
  const fromForwarded = (path: string): string | null => {
    const [, encodedId, proxiedPath] = /^\/api\/v1\/nodes\/([^/]+)\/proxy(\/.*)$/.exec(forwardedUri ?? '') ?? [];
    if (encodedId === undefined || proxiedPath !== path) return null;
    let id: string;
    try {
      id = decodeURIComponent(encodedId);
    } catch {
      return null;
    }
    // The node proxy's id is name, name:port or scheme:name:port.
    const parts = id.split(':');
    const name = parts.length === 3 ? parts[1] : parts[0];
    return name !== undefined && NODE_NAME.test(name) ? name : null;
  };
  if (pathname === '/metrics/resource') return { route: 'metricsResource', nodeName: fromForwarded(pathname) };
  if (pathname === '/stats/summary') return { route: 'statsSummary', nodeName: fromForwarded(pathname) };
  const nodeName = /^\/metrics\/resource\/([^/]+)$/.exec(pathname)?.[1];
  if (nodeName !== undefined && NODE_NAME.test(nodeName)) return { route: 'metricsResource', nodeName };
  return null;
}
