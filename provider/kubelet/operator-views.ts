import type { TargetVerdict } from '../../scheduler/extender-server.js';
import type { RefusalCount } from '../../scheduler/refusal-log.js';
import type { KubeletRequestAttributes } from './auth.js';

/**
 * What the provider answers `kubectl admiralty` on its kubelet API (see {@link parseOperatorPath}).
 * The CLI calls the listener directly, at the address the apiserver dials for the virtual node
 * (its InternalIP and kubelet port), with the user's own credentials: the provider
 * authenticates them as a kubelet does (client certificate of the cluster's client CA, or a
 * bearer token by TokenReview), honours impersonation, and authorizes the user on the object
 * shown (SubjectAccessReview): `get` on the pod for explain, on the Target or ClusterTarget for
 * its summary. The apiserver's node proxy would hide the user (the kubelet sees the apiserver),
 * and it refuses loopback node addresses, such as the sandbox's.
 */

/** Path prefix of the operator views on the kubelet API. */
export const OPERATOR_PATH_PREFIX = '/admiralty';

/** The target behind a virtual node, as this provider sees it now: `/admiralty/summary/<node>`. */
export interface TargetSummaryView {
  node: string;
  target: string;
  /** Its health as the last probe found it. */
  ready: boolean;
  reason: string;
  message: string;
  /** When its outage began (the first probe that got no answer; RFC 3339), while it lasts: failover-after counts from it. */
  outageSince?: string;
  /**
   * Why this replica's extender and binder turned pods away from the target over the last 10
   * minutes (to the minute), the most frequent reason first; empty when none (or no extender);
   * absent from a provider that does not count them.
   */
  refusals?: RefusalCount[];
  /** The ClusterSummary the extender judges pods against; null while none was read. */
  summary: null | {
    /** When this provider read it (RFC 3339). */
    readAt: string;
    /** When its writer last wrote it, by the writer's clock (RFC 3339), if it says. */
    renewTime?: string;
    largestFree: Record<string, string>;
    totalFree: Record<string, string>;
    nodes: number;
    schedulableNodes: number;
  };
}

/** `/admiralty/explain/<node>/<namespace>/<pod>`: the extender's judgement of one elected pod now. */
export interface PodExplanation {
  /** `namespace/name`. */
  pod: string;
  phase: string;
  /** The virtual node the proxy is bound to, and its target; absent while pending. */
  boundTo?: { node: string; target?: string };
  /** Every target the pod's namespace may use, in the registry's order. */
  targets: TargetVerdict[];
  /** The passing targets of the highest score: where the proxy scheduler would bind it now (one of them at random). */
  best: string[];
}

/** A parsed operator path. */
export type OperatorPath = { view: 'summary'; node: string } | { view: 'explain'; namespace: string; pod: string };

const NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/** Parses `/admiralty/summary/<node>` and `/admiralty/explain/<namespace>/<pod>`. Pure; null for anything else (404). */
export function parseOperatorPath(pathname: string): OperatorPath | null {
  const parts = pathname.split('/');
  if (parts[0] !== '' || `/${parts[1]}` !== OPERATOR_PATH_PREFIX) return null;
  let decoded: string[];
  try {
    decoded = parts.slice(2).map(decodeURIComponent);
  } catch {
    return null;
  }
  if (decoded.slice(1).some((p) => !NAME.test(p))) return null;
  const [view, first, second, ...extra] = decoded;
  if (view === 'summary' && first !== undefined && second === undefined) return { view: 'summary', node: first };
  if (view === 'explain' && first !== undefined && second !== undefined && extra.length === 0) return { view: 'explain', namespace: first, pod: second };
  return null;
}

/** An answer of the views: a status code, and a JSON body on 200 or a message for people otherwise. */
export type OperatorAnswer = { code: 200; body: TargetSummaryView | PodExplanation } | { code: number; message: string };

/** What the kubelet server asks when it serves an operator path. */
export interface OperatorViews {
  /** What a caller must be allowed to see the summary of a virtual node's target (`get` on the Target or ClusterTarget), or null when the node is not ours. */
  summaryAttributes(node: string): KubeletRequestAttributes | null;
  summary(node: string): Promise<OperatorAnswer>;
  explain(namespace: string, pod: string): Promise<OperatorAnswer>;
}
