import { ApiException } from '@kubernetes/client-node';

/**
 * The error client-node's generated API throws for an HTTP error: an ApiException whose body is
 * a Status with this `reason` and `message` (by default `<reason> (test)`).
 */
export function apiError(code: number, reason: string, message = `${reason} (test)`): ApiException<string> {
  return new ApiException(code, reason, JSON.stringify({ kind: 'Status', reason, message }), {});
}

/** A 404 as client-node throws it. */
export const notFound = (): ApiException<string> => apiError(404, 'NotFound');

/** A 409 AlreadyExists as client-node throws it. */
export const alreadyExists = (): ApiException<string> => apiError(409, 'AlreadyExists');

/** A 409 Conflict (a stale resourceVersion) as client-node throws it. */
export const conflict = (): ApiException<string> => apiError(409, 'Conflict');

/**
 * An HTTP error as a hand-written fake throws it: a plain Error `HTTP <code>` with that `code`,
 * and, when a `reason` is given, a Status body with that reason (and no message).
 */
export function bareApiError(code: number, reason?: string): Error & { code: number; body?: string } {
  const err = Object.assign(new Error(`HTTP ${code}`), { code });
  return reason === undefined ? err : Object.assign(err, { body: JSON.stringify({ kind: 'Status', reason }) });
}
