import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import type { TargetVerdict } from '../../scheduler/extender-server.js';
import type { ClusterRegistry } from '../clusters/cluster-registry.js';
import type { Clock } from '../core/clock.js';
import { isNotFound } from '../core/errors.js';
import { API_GROUP, SOURCE_POD_MANIFEST_ANNOTATION } from '../core/keys.js';
import type { OperatorAnswer, OperatorViews, PodExplanation, TargetSummaryView } from '../kubelet/operator-views.js';
import { summaryRoom } from '../model/summary-room.js';
import type { RefusalLog } from '../../scheduler/refusal-log.js';

export interface OperatorViewsOptions {
  core: Pick<CoreV1Api, 'readNamespacedPod'>;
  registry: Pick<ClusterRegistry, 'byNodeName' | 'health' | 'summary'>;
  /** The extender's judgement of a proxy (`Extender.explain`), once wired; undefined when this process runs no extender. */
  explain: () => ((pod: V1Pod) => TargetVerdict[]) | undefined;
  /** What the extender and binder of this replica turned away lately; undefined when it runs no extender. */
  refusals?: () => Pick<RefusalLog, 'recent'> | undefined;
  clock: Clock;
}

/**
 * The answers behind `kubectl admiralty status` (a target's health and the room its summary
 * shows) and `kubectl admiralty explain` (the extender's verdict per target on an elected pod),
 * from this replica's registry and extender: what placement reads, not a copy of it. The pod is
 * read from the apiserver (the proxies' cache keeps only some of its fields). The kubelet server
 * has authorized the caller on what is shown already (see `summaryAttributes`).
 */
export function createOperatorViews(opts: OperatorViewsOptions): OperatorViews {
  const notOurs = (node: string): OperatorAnswer => ({ code: 404, message: `node ${node} is not a virtual node of this provider` });
  return {
    async summary(node) {
      const target = opts.registry.byNodeName(node);
      if (!target) return notOurs(node);
      const health = opts.registry.health(target.key);
      const read = opts.registry.summary(target.key);
      const body: TargetSummaryView = {
        node,
        target: target.displayName,
        ready: health?.ready ?? false,
        reason: health?.reason ?? 'NotProbed',
        message: health?.message ?? 'not probed yet',
        ...(health?.outageSinceMs !== undefined ? { outageSince: new Date(health.outageSinceMs).toISOString() } : {}),
        refusals: opts.refusals?.()?.recent(target.key) ?? [],
        summary: read
          ? {
              readAt: new Date(read.readAtMs).toISOString(),
              ...(read.summary.renewTime ? { renewTime: read.summary.renewTime } : {}),
              ...summaryRoom(read.summary),
            }
          : null,
      };
      return { code: 200, body };
    },

    summaryAttributes(node) {
      const ref = opts.registry.byNodeName(node)?.ref;
      if (!ref) return null;
      return ref.kind === 'Target'
        ? { verb: 'get', group: API_GROUP, resource: 'targets', namespace: ref.namespace, name: ref.name }
        : { verb: 'get', group: API_GROUP, resource: 'clustertargets', name: ref.name };
    },

    async explain(namespace, name) {
      const explain = opts.explain();
      if (!explain) return { code: 503, message: 'this provider runs no scheduler extender (--enable without extender)' };
      let pod: V1Pod;
      try {
        pod = await opts.core.readNamespacedPod({ namespace, name });
      } catch (err) {
        if (isNotFound(err)) return { code: 404, message: `pod ${namespace}/${name} not found` };
        throw err;
      }
      if (pod.metadata?.annotations?.[SOURCE_POD_MANIFEST_ANNOTATION] === undefined) {
        return {
          code: 400,
          message: `pod ${namespace}/${name} is not a proxy pod: it has no ${SOURCE_POD_MANIFEST_ANNOTATION} annotation (was it elected, in a namespace labelled multicluster-scheduler=enabled?)`,
        };
      }
      const targets = explain(pod);
      const top = Math.max(-1, ...targets.filter((t) => t.passes).map((t) => t.score ?? 0));
      const bound = pod.spec?.nodeName;
      const body: PodExplanation = {
        pod: `${namespace}/${name}`,
        phase: pod.status?.phase ?? 'Unknown',
        ...(bound ? { boundTo: { node: bound, target: opts.registry.byNodeName(bound)?.displayName } } : {}),
        targets,
        best: targets.filter((t) => t.passes && t.score === top).map((t) => t.target),
      };
      return { code: 200, body };
    },
  };
}
