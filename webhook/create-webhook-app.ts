import type { V1Pod } from '@kubernetes/client-node';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import { Histogram, Registry } from 'prom-client';
import { errorFields, type Logger } from '../provider/core/logger.js';
import { mutatePod } from './mutate-pod.js';
import { rememberingConstraintsParser } from './parse-proxy-scheduling-constraints.js';
import { reviewAdmission } from './review-admission.js';

export interface WebhookAppOptions {
  logger: Logger;
  /** Where the request histogram is registered; default a fresh registry owned by this app. */
  registry?: Registry;
  /** schedulerName given to proxies (see `MutatePodOptions.schedulerName`); ignored with `mutate`. */
  proxySchedulerName?: string;
  /** The mutation; default `mutatePod` with its defaults. Tests and the benchmark may swap it. */
  mutate?: (pod: V1Pod, namespace?: string) => { pod: V1Pod; mutated: boolean };
  /** Largest accepted body; default `8mb` (an AdmissionReview carries the pod, up to etcd's limit). */
  bodyLimit?: string;
}

/** Path the MutatingWebhookConfiguration points at. */
export const MUTATE_PATH = '/mutate';

/**
 * The webhook's express app: `POST /mutate` (AdmissionReview in, AdmissionReview out, see
 * `reviewAdmission`) and `GET /healthz`. No listening here: `main.ts` serves it over HTTPS with a
 * `HotSwapHttpsServer`. Records `admiralty_webhook_request_duration_seconds{result}` (result:
 * allowed, denied or error) and logs denials and errors once, here.
 */
export function createWebhookApp(opts: WebhookAppOptions): Express {
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

  const app = express();
  app.disable('x-powered-by');
  // No caller revalidates an answer: an ETag would only cost a SHA-1 of every body.
  app.disable('etag');

  app.get('/healthz', (_req, res) => {
    res.type('text/plain').send('ok');
  });

  // Raw body whatever the content type: we want our own 400 reason for non-JSON bodies.
  app.post(MUTATE_PATH, express.raw({ type: () => true, limit: opts.bodyLimit ?? '8mb' }), (req: Request, res: Response) => {
    const end = duration.startTimer();
    let body: unknown;
    try {
      const raw = Buffer.isBuffer(req.body) ? req.body.toString('utf8') : '';
      body = JSON.parse(raw);
    } catch (err) {
      end({ result: 'error' });
      logger.warn('webhook: malformed AdmissionReview', errorFields(err));
      res.status(400).type('text/plain').send(`request body is not JSON: ${(err as Error).message}`);
      return;
    }
    const outcome = reviewAdmission(body, mutate);
    end({ result: outcome.result });
    if (outcome.httpStatus === 400) {
      logger.warn('webhook: malformed AdmissionReview', { reason: outcome.reason });
      res.status(400).type('text/plain').send(outcome.reason);
      return;
    }
    if (outcome.result !== 'allowed') {
      const request = (body as { request?: { namespace?: string; name?: string; uid?: string } }).request;
      const fields = { namespace: request?.namespace, name: request?.name, uid: request?.uid, ...errorFields(outcome.error) };
      if (outcome.result === 'denied') logger.info('webhook: pod denied', fields);
      else logger.error('webhook: mutation failed', fields);
    }
    res.status(200).json(outcome.review);
  });

  // Body-parser failures (too large, bad encoding) and anything unforeseen: answer, never crash.
  app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const status = (err as { status?: unknown }).status;
    const code = typeof status === 'number' && status >= 400 && status < 500 ? status : 500;
    logger.warn('webhook: request failed', errorFields(err));
    if (!res.headersSent) res.status(code).type('text/plain').send(code === 500 ? 'internal error' : (err as Error).message);
  });

  return app;
}
