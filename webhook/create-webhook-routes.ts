import type { V1Pod } from '@kubernetes/client-node';
import { Histogram, Registry } from 'prom-client';
import { json, text, type Route } from '../provider/core/http-router.js';
import { errorFields, type Logger } from '../provider/core/logger.js';
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
  /** Largest accepted body in bytes; default 8 MiB (an AdmissionReview carries the pod, up to etcd's limit). */
  maxBodyBytes?: number;
}

/** Path the MutatingWebhookConfiguration points at. */
export const MUTATE_PATH = '/mutate';

/**
 * The webhook's routes, for `createRouter`: `POST /mutate` (AdmissionReview in, AdmissionReview
 * out, see `reviewAdmission`) and `GET /healthz`. No listening here: the provider serves them
 * with `createWebhookServer`. Records `admiralty_webhook_request_duration_seconds{result}`
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
        body = JSON.parse(raw.toString('utf8'));
      } catch (err) {
        end({ result: 'error' });
        logger.warn('webhook: malformed AdmissionReview', errorFields(err));
        return text(400, `request body is not JSON: ${(err as Error).message}`);
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
