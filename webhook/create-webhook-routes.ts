import type { V1Pod } from '@kubernetes/client-node';
import { Histogram, Registry } from 'prom-client';
import { text, type Route } from '../provider/core/http-router.js';
import type { Logger } from '../provider/core/logger.js';
import { answerReview, type ReviewReply } from './answer-review.js';
import { mutatePod } from './mutate-pod.js';
import { rememberingConstraintsParser } from './parse-proxy-scheduling-constraints.js';

export interface WebhookRoutesOptions {
  logger: Logger;
  /** Where the request histogram is registered; default a fresh registry owned by these routes. */
  registry?: Registry;
  /** schedulerName given to proxies (see `MutatePodOptions.schedulerName`); ignored with `mutate`. */
  proxySchedulerName?: string;
  /** The mutation; default `mutatePod` with its defaults. Tests and the benchmark may swap it. */
  mutate?: (pod: V1Pod, namespace?: string) => { pod: V1Pod; mutated: boolean };
  /**
   * Who answers a review's raw body; default `answerReview` with `mutate`, here on the calling
   * event loop. The provider gives an `AdmissionPool`'s, so reviews run in worker threads.
   */
  review?: (raw: string) => ReviewReply | Promise<ReviewReply>;
  /**
   * Largest accepted body in bytes; default 8 MiB. An AdmissionReview carries the pod, up to
   * etcd's 1.5 MiB of protobuf, and its JSON may be several times larger: Go's encoder writes
   * `<`, `>` and `&` as 6-byte `\u003c` escapes.
   */
  maxBodyBytes?: number;
}

/** Path the MutatingWebhookConfiguration points at. */
export const MUTATE_PATH = '/mutate';

export { MUTATE_MAX_JSON_TOKENS } from './answer-review.js';

/**
 * The webhook's routes, for `createRouter`: `POST /mutate` (AdmissionReview in, AdmissionReview
 * out, see `reviewAdmission`) and `GET /healthz`. No listening here: the provider serves them
 * with `createWebhookServer`. A review is refused (HTTP 400) before `JSON.parse` when it nests
 * deeper than `DEFAULT_MAX_JSON_DEPTH` or has more than {@link MUTATE_MAX_JSON_TOKENS} tokens. Records `admiralty_webhook_request_duration_seconds{result}`
 * (result: allowed, denied or error) and logs denials and errors once, here.
 */
export function createWebhookRoutes(opts: WebhookRoutesOptions): Route[] {
  const { logger } = opts;
  const parseConstraints = rememberingConstraintsParser();
  const mutate = opts.mutate ?? ((pod: V1Pod, namespace?: string) => mutatePod(pod, { namespace, schedulerName: opts.proxySchedulerName, parseConstraints }));
  const duration = new Histogram({
    name: 'admiralty_webhook_request_duration_seconds',
    help: 'Time to answer one AdmissionReview, by result (allowed, denied, error).',
    labelNames: ['result'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [opts.registry ?? new Registry()],
  });

  const healthz: Route = { method: 'GET', path: '/healthz', handle: () => text(200, 'ok') };

  const answer = opts.review ?? ((raw: string) => answerReview(raw, mutate));
  const review: Route = {
    method: 'POST',
    path: MUTATE_PATH,
    maxBodyBytes: opts.maxBodyBytes,
    // The body is decoded here, before the first await, so the router's body budget is
    // released at once; what waits for a worker is bounded by the pool's own queue.
    handle: async ({ body: raw }) => {
      const end = duration.startTimer();
      const reply = await answer(raw.toString('utf8'));
      end({ result: reply.result });
      if (reply.log) logger[reply.log.level](reply.log.message, reply.log.fields);
      return reply.answer;
    },
  };

  return [healthz, review];
}
