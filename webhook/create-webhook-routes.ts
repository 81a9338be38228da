import type { V1Pod } from '@kubernetes/client-node';
import { Histogram, Registry } from 'prom-client';
import { json, text, type Route } from '../provider/core/http-router.js';
import { errorFields, type Logger } from '../provider/core/logger.js';
import { parseUntrustedJson } from '../provider/core/untrusted-json.js';
import { mutatePod } from './mutate-pod.js';
import { rememberingConstraintsParser } from './parse-proxy-scheduling-constraints.js';
import { reviewAdmission } from './review-admission.js';

export interface WebhookRoutesOptions {
  logger: Logger;
  /** Where the request histogram is registered; default a fresh registry owned by these routes. */
  registry?: Registry;
  /** schedulerName given to proxies (see `MutatePodOptions.schedulerName`); ignored with `mutate`. */
  proxySchedulerName?: string;
  /** The mutation; default `mutatePod` with its defaults. Tests and the benchmark may swap it. */
  mutate?: (pod: V1Pod, namespace?: string) => { pod: V1Pod; mutated: boolean };
  /**
   * Largest accepted body in bytes; default 8 MiB. An AdmissionReview carries the pod, up to
   * etcd's 1.5 MiB of protobuf, and its JSON may be several times larger: Go's encoder writes
   * `<`, `>` and `&` as 6-byte `\u003c` escapes.
   */
  maxBodyBytes?: number;
}

/** Path the MutatingWebhookConfiguration points at. */
export const MUTATE_PATH = '/mutate';

/**
 * Most structural JSON tokens (`[`, `{`, `,`: see `UntrustedJsonLimits`) in an AdmissionReview.
 * The webhook is called on pod CREATE only (no `oldObject`), and a pod larger than etcd takes
 * (1.5 MiB by default, stored as protobuf) is refused there anyway. Protobuf spends at least 2
 * bytes on each item of a list, member of a map or empty object, which JSON writes with at
 * most one `,` and one `{`, and `managedFields` is stored as JSON: so a pod etcd can store has
 * at most about 1.5 M tokens, and 2 Mi leave room for the review around it. At this bound,
 * the worst `JSON.parse` can be made to build (1 M empty objects) took about 100 MiB of RSS and
 * a quarter of a second; unbounded, an 8 MiB body of nested arrays took 460 MiB and 2 s.
 */
export const MUTATE_MAX_JSON_TOKENS = 2 * 2 ** 20;

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

  const review: Route = {
    method: 'POST',
    path: MUTATE_PATH,
    maxBodyBytes: opts.maxBodyBytes,
    handle: ({ body: raw }) => {
      const end = duration.startTimer();
      let body: unknown;
      try {
        body = parseUntrustedJson(raw.toString('utf8'), { maxTokens: MUTATE_MAX_JSON_TOKENS });
      } catch (err) {
        end({ result: 'error' });
        logger.warn('webhook: malformed AdmissionReview', errorFields(err));
        return text(400, `request body ${(err as Error).message}`);
      }
      const outcome = reviewAdmission(body, mutate);
      end({ result: outcome.result });
      if (outcome.httpStatus === 400) {
        logger.warn('webhook: malformed AdmissionReview', { reason: outcome.reason });
        return text(400, outcome.reason);
      }
      if (outcome.result !== 'allowed') {
        const request = (body as { request?: { namespace?: string; name?: string; uid?: string } }).request;
        const fields = { namespace: request?.namespace, name: request?.name, uid: request?.uid, ...errorFields(outcome.error) };
        if (outcome.result === 'denied') logger.info('webhook: pod denied', fields);
        else logger.error('webhook: mutation failed', fields);
      }
      return json(200, outcome.review);
    },
  };

  return [healthz, review];
}
