import type { TargetVerdict } from '../../scheduler/extender-server.js';

/**
 * What the provider answers `kubectl admiralty` on its kubelet API (see {@link parseOperatorPath}),
 * which the CLI reaches through the apiserver's node proxy of a virtual node:
 * `GET /api/v1/nodes/<node>/proxy/admiralty/summary/<node>` and
 * `GET /api/v1/nodes/<node>/proxy/admiralty/explain/<node>/<namespace>/<pod>`.
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

/** A parsed operator path; the SubjectAccessReview is on `nodes/proxy` of `node`. */
export type OperatorPath = { view: 'summary'; node: string } | { view: 'explain'; node: string; namespace: string; pod: string };

const NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/**
 * Parses `/admiralty/summary/<node>` and `/admiralty/explain/<node>/<namespace>/<pod>`. The node
 * is in the path rather than taken from the apiserver's `X-Forwarded-Uri`: a kubelet path does
 * not name its node, and the caller is authorized against the node it names, whichever way it
 * came. Pure; null for anything else (404).
 */
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
  if (decoded[0] === 'summary' && decoded.length === 2) return { view: 'summary', node: decoded[1] };
  if (decoded[0] === 'explain' && decoded.length === 4) return { view: 'explain', node: decoded[1], namespace: decoded[2], pod: decoded[3] };
  return null;
}

/** An answer of the views: a status code, and a JSON body on 200 or a message for people otherwise. */
export type OperatorAnswer = { code: 200; body: TargetSummaryView | PodExplanation } | { code: number; message: string };

/** What the kubelet server asks when it serves an operator path it has authorized. */
export interface OperatorViews {
  summary(node: string): Promise<OperatorAnswer>;
  explain(node: string, namespace: string, pod: string): Promise<OperatorAnswer>;
}
