import { parentPort } from 'node:worker_threads';
import type { ReviewEnvelope, ReviewReply } from './answer-review.js';

/** From the pool to a worker: one raw AdmissionReview body. */
export interface ReviewJob {
  id: number;
  raw: string;
}

/**
 * From a worker to the pool: first the review's envelope (as soon as the body is parsed), then
 * its reply. The envelope lets the pool deny the review properly if the reply never comes.
 */
export type WorkerMessage = { id: number; envelope: ReviewEnvelope } | { id: number; reply: ReviewReply };

/**
 * The body of an admission worker: answers each job the pool posts with `answer`, one at a time
 * (a worker is given one job at a time anyway). A throw of `answer` is answered as an internal
 * error, so a worker never goes silent on a job it could finish.
 */
export function serveReviews(answer: (raw: string, onEnvelope: (envelope: ReviewEnvelope) => void) => ReviewReply): void {
  const port = parentPort;
  if (!port) throw new Error('an admission worker runs in a worker thread');
  port.on('message', (job: ReviewJob) => {
    let reply: ReviewReply;
    try {
      reply = answer(job.raw, (envelope) => port.postMessage({ id: job.id, envelope } satisfies WorkerMessage));
    } catch (err) {
      reply = {
        answer: { status: 500, text: 'internal error' },
        result: 'error',
        log: { level: 'error', message: 'webhook: review failed', fields: { error: String((err as Error)?.message ?? err) } },
      };
    }
    port.postMessage({ id: job.id, reply } satisfies WorkerMessage);
  });
}
