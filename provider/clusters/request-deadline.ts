import { setMaxListeners } from 'node:events';
import type { KubeConfig, RequestContext } from '@kubernetes/client-node';

/**
 * How long the calls that start one after the other share one deadline signal: a call gets its
 * deadline between `timeoutMs` and `timeoutMs` plus this after it starts.
 */
export const DEADLINE_SHARING_MS = 1000;

/**
 * Gives every request/response API call made through `kc` a deadline, after which the request
 * is aborted (its socket closed, the call rejected with an AbortError, which classifyApiError
 * counts as a network failure and the workqueue retries with backoff). Without it a server
 * that accepts connections and never answers holds a worker forever, and with four workers a
 * controller stops for every target at once.
 *
 * The calls started within {@link DEADLINE_SHARING_MS} of each other share one signal (a timer
 * of `timeoutMs` plus that), so no call's deadline is shorter than `timeoutMs`: a signal and a
 * timer of its own for every call was about 1 % of the provider's CPU while pods start in
 * bursts. An abort ends only the calls still waiting on it; the others have let go of it.
 *
 * Only the generated API clients are covered (they authenticate through
 * `applySecurityAuthentication`); watches and streams (logs -f, exec, port-forward) go through
 * `applyToFetchOptions` / `applyToHTTPSOptions`, are long-lived by design, and have their own
 * idle handling. A call that brings its own signal keeps it. Returns `kc`, changed in place.
 */
export function withRequestDeadline(kc: KubeConfig, timeoutMs: number): KubeConfig {
  const authenticate = kc.applySecurityAuthentication.bind(kc);
  let shared: { signal: AbortSignal; untilMs: number } | undefined;
  kc.applySecurityAuthentication = async (context: RequestContext) => {
    await authenticate(context);
    if (context.getSignal()) return;
    const now = performance.now();
    if (!shared || now >= shared.untilMs || shared.signal.aborted) {
      // What AbortSignal.timeout does (an unref'd timer, a TimeoutError), on the global
      // setTimeout, which a test's fake clock reaches and AbortSignal.timeout's timer is not.
      const controller = new AbortController();
      setTimeout(() => controller.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')), timeoutMs + DEADLINE_SHARING_MS).unref();
      // Each call waiting on it listens; a burst has hundreds at once, which is no leak.
      setMaxListeners(0, controller.signal);
      shared = { signal: controller.signal, untilMs: now + DEADLINE_SHARING_MS };
    }
    context.setSignal(shared.signal);
  };
  return kc;
}
