/**
 * Error classes of the project and the one place that turns Kubernetes API failures into
 * retry decisions. Check errors by class (or by `classifyApiError`), never by message text.
 */

import { sanitizeRemoteText } from './redact.js';
import { firstLine } from './text.js';

/** A failure that retrying cannot fix (bad input, invalid object): log, count and drop. */
export class TerminalError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TerminalError';
  }
}

/** Invalid user input (a Target, a kubeconfig, an annotation): the message is for the user. */
export class ValidationError extends TerminalError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ValidationError';
  }
}

/** A target cluster could not be reached or refused us; carries a condition reason. */
export class TargetUnavailableError extends Error {
  constructor(
    readonly reason: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'TargetUnavailableError';
  }
}

/**
 * A pod gets no delegate in a target, for a reason its owner can act on: `reason` is the proxy's
 * `Delegated=False` reason and the message says what to do. Retried (the cause can go away).
 */
export class NotDelegatedError extends Error {
  constructor(
    readonly reason: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'NotDelegatedError';
  }
}

/**
 * The name a copy must have in a target is taken by an object that is not that copy: the
 * delegate must not be made to read it. Retried (whoever holds the name may let go of it).
 */
export class CopyConflictError extends NotDelegatedError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('CopyConflict', message, options);
    this.name = 'CopyConflictError';
  }
}

export type ApiErrorKind = 'NotFound' | 'Conflict' | 'AlreadyExists' | 'Gone' | 'Invalid' | 'Forbidden' | 'Unauthorized' | 'TooManyRequests' | 'ServerError' | 'Network' | 'Unknown';

/** HTTP status code of a client-node ApiException (or a watch error), if any. */
export function statusCode(err: unknown): number | undefined {
  if (!err || typeof err !== 'object') return undefined;
  const e = err as { code?: unknown; statusCode?: unknown; response?: { statusCode?: unknown } };
  if (typeof e.code === 'number') return e.code;
  if (typeof e.statusCode === 'number') return e.statusCode;
  if (e.response && typeof e.response.statusCode === 'number') return e.response.statusCode;
  return undefined;
}

/** The Status `reason` in an ApiException body, if the body is a Status. */
export function statusReason(err: unknown): string | undefined {
  const body = (err as { body?: unknown })?.body;
  try {
    const parsed = typeof body === 'string' ? JSON.parse(body) : body;
    return typeof parsed?.reason === 'string' ? parsed.reason : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The Status `message` in an ApiException body, else the error's message: sanitized, because
 * the server that wrote it may be anyone's (a Target's server is chosen by its writer) and the
 * text lands in our statuses and events.
 */
export function statusMessage(err: unknown): string {
  const body = (err as { body?: unknown })?.body;
  try {
    const parsed = typeof body === 'string' ? JSON.parse(body) : body;
    if (typeof parsed?.message === 'string') return sanitizeRemoteText(parsed.message);
  } catch {
    /* not JSON */
  }
  if (err instanceof Error) return sanitizeRemoteText(firstLine(err.message));
  return sanitizeRemoteText(String(err));
}

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EPIPE', 'EAI_AGAIN', 'UND_ERR_SOCKET', 'ECONNABORTED']);

/** Classifies an error from the Kubernetes API (client-node ApiException, watch error, network error). */
export function classifyApiError(err: unknown): ApiErrorKind {
  const code = statusCode(err);
  switch (code) {
    case 404:
      return 'NotFound';
    case 409:
      return statusReason(err) === 'AlreadyExists' ? 'AlreadyExists' : 'Conflict';
    case 410:
      return 'Gone';
    case 400:
    case 422:
      return 'Invalid';
    case 401:
      return 'Unauthorized';
    case 403:
      return 'Forbidden';
    case 429:
      return 'TooManyRequests';
  }
  if (code !== undefined && code >= 500) return 'ServerError';
  let e: unknown = err;
  for (let i = 0; e && i < 5; i++) {
    const c = (e as { code?: unknown }).code;
    if (typeof c === 'string' && NETWORK_CODES.has(c)) return 'Network';
    if (e instanceof Error && (e.name === 'FetchError' || e.name === 'AbortError')) return 'Network';
    e = (e as { cause?: unknown }).cause;
  }
  return 'Unknown';
}

/**
 * The Kubernetes API error in `err`'s chain of causes (the first that carries a status code), for
 * callers that classify a failure lower code wrapped; undefined when there is none.
 */
export function apiErrorIn(err: unknown): unknown {
  let e: unknown = err;
  for (let i = 0; e && i < 5; i++) {
    if (statusCode(e) !== undefined) return e;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

export function isNotFound(err: unknown): boolean {
  return classifyApiError(err) === 'NotFound';
}
export function isAlreadyExists(err: unknown): boolean {
  return classifyApiError(err) === 'AlreadyExists';
}
export function isConflict(err: unknown): boolean {
  const k = classifyApiError(err);
  return k === 'Conflict' || k === 'AlreadyExists';
}

/** Whether retrying the same request later can succeed. */
export function isRetryable(err: unknown): boolean {
  if (err instanceof TerminalError) return false;
  const k = classifyApiError(err);
  return k !== 'Invalid';
}
