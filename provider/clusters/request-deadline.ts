import type { KubeConfig, RequestContext } from '@kubernetes/client-node';

/**
 * Gives every request/response API call made through `kc` a deadline, after which the request
 * is aborted (its socket closed, the call rejected with an AbortError, which classifyApiError
 * counts as a network failure and the workqueue retries with backoff). Without it a server
 * that accepts connections and never answers holds a worker forever, and with four workers a
 * controller stops for every target at once.
 *
 * Only the generated API clients are covered (they authenticate through
 * `applySecurityAuthentication`); watches and streams (logs -f, exec, port-forward) go through
 * `applyToFetchOptions` / `applyToHTTPSOptions`, are long-lived by design, and have their own
 * idle handling. A call that brings its own signal keeps it. Returns `kc`, changed in place.
 */
export function withRequestDeadline(kc: KubeConfig, timeoutMs: number): KubeConfig {
  const authenticate = kc.applySecurityAuthentication.bind(kc);
  kc.applySecurityAuthentication = async (context: RequestContext) => {
    await authenticate(context);
    if (!context.getSignal()) context.setSignal(AbortSignal.timeout(timeoutMs));
  };
  return kc;
}
