import type { V1Pod } from '@kubernetes/client-node';
import { ValidationError } from '../provider/core/errors.js';
import { checkPodShape } from './check-pod-shape.js';
import { createJsonPatch } from './create-json-patch.js';

/** How a review ended, for the `result` label of the request metric. */
export type AdmissionResult = 'allowed' | 'denied' | 'error';

/** What the HTTP layer must send back. */
export type AdmissionOutcome = { httpStatus: 200; result: AdmissionResult; review: Record<string, unknown>; error?: unknown } | { httpStatus: 400; result: 'error'; reason: string };

/** The message of a review refused for an internal error: the details are in the provider's log only. */
export const INTERNAL_ERROR_MESSAGE = 'admiralty webhook failed to mutate the pod: internal error (details in the admiralty provider log)';

const REVIEW_API_VERSIONS = new Set(['admission.k8s.io/v1', 'admission.k8s.io/v1beta1']);

/**
 * Answers one AdmissionReview, as `JSON.parse` made it (its pod is diffed as it is). Pure apart
 * from whatever `mutate` does.
 *
 * * Not an AdmissionReview, or no `request`, `request.uid`, or (for CREATE) `request.object`:
 *   HTTP 400 with a reason; the apiserver then applies the webhook's failurePolicy.
 * * Anything other than CREATE of a Pod (UPDATE, subresources, other kinds): allowed, no patch.
 * * An object that does not have a Pod's types, or `mutate` throws `ValidationError`:
 *   allowed=false, status code 400 and the error's message.
 * * `mutate` throws anything else: allowed=false, status code 500 and {@link INTERNAL_ERROR_MESSAGE},
 *   never the error's own text (it reaches whoever created the pod); the error is returned as
 *   `error`, for the caller's log. Never an HTTP failure.
 * * Otherwise allowed, with a base64 JSON patch when the pod changed.
 *
 * The response echoes the request's `apiVersion` and `uid`, as the apiserver requires.
 */
export function reviewAdmission(body: unknown, mutate: (pod: V1Pod, namespace?: string) => { pod: V1Pod; mutated: boolean }): AdmissionOutcome {
  if (!isObject(body) || body.kind !== 'AdmissionReview' || !REVIEW_API_VERSIONS.has(body.apiVersion as string)) {
    return { httpStatus: 400, result: 'error', reason: 'body is not an AdmissionReview (admission.k8s.io/v1)' };
  }
  const request = body.request;
  if (!isObject(request)) return { httpStatus: 400, result: 'error', reason: 'AdmissionReview has no request' };
  const uid = request.uid;
  if (typeof uid !== 'string' || uid === '') return { httpStatus: 400, result: 'error', reason: 'AdmissionReview request has no uid' };

  const answer = (response: Record<string, unknown>, result: AdmissionResult, error?: unknown): AdmissionOutcome => ({
    httpStatus: 200,
    result,
    error,
    review: { apiVersion: body.apiVersion, kind: 'AdmissionReview', response: { uid, ...response } },
  });

  const kind = isObject(request.kind) ? request.kind : {};
  const isPod = (kind.group ?? '') === '' && kind.kind === 'Pod' && !request.subResource;
  if (!isPod || request.operation !== 'CREATE') return answer({ allowed: true }, 'allowed');
  if (!isObject(request.object)) return { httpStatus: 400, result: 'error', reason: 'AdmissionReview request has no object' };

  const pod: unknown = request.object;
  try {
    checkPodShape(pod);
    const namespace = typeof request.namespace === 'string' && request.namespace ? request.namespace : pod.metadata?.namespace;
    const { pod: proxy, mutated } = mutate(pod, namespace);
    // The pod is the body's own, parsed from JSON (see the route).
    const patch = mutated ? createJsonPatch(pod, proxy, { beforeIsJson: true }) : [];
    if (patch.length === 0) return answer({ allowed: true }, 'allowed');
    return answer({ allowed: true, patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(patch)).toString('base64') }, 'allowed');
  } catch (err) {
    if (err instanceof ValidationError) {
      return answer({ allowed: false, status: { status: 'Failure', code: 400, reason: 'BadRequest', message: err.message } }, 'denied', err);
    }
    return answer({ allowed: false, status: { status: 'Failure', code: 500, reason: 'InternalError', message: INTERNAL_ERROR_MESSAGE } }, 'error', err);
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
