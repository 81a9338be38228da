/**
 * An admission worker: a worker thread that answers AdmissionReviews for `AdmissionPool`, so
 * that no review, however large or slow, holds the provider's main event loop (leader renewal,
 * the extender, the kubelet API). Started by the pool with `workerData` of {@link AdmissionWorkerData}.
 */
import { workerData } from 'node:worker_threads';
import { serveReviews } from './admission-worker-protocol.js';
import { answerReview } from './answer-review.js';
import { mutatePod } from './mutate-pod.js';
import { rememberingConstraintsParser } from './parse-proxy-scheduling-constraints.js';

export interface AdmissionWorkerData {
  /** schedulerName given to proxies (see `MutatePodOptions.schedulerName`). */
  proxySchedulerName?: string;
}

const { proxySchedulerName } = (workerData ?? {}) as AdmissionWorkerData;
const parseConstraints = rememberingConstraintsParser();

serveReviews((raw, onEnvelope) => answerReview(raw, (pod, namespace) => mutatePod(pod, { namespace, schedulerName: proxySchedulerName, parseConstraints }), onEnvelope));
