import type { V1Pod } from '@kubernetes/client-node';
// Types only from the router: an admission worker loads this module, and the router's logger
// (winston) has no business there.
import type { Answer } from '../provider/core/http-router.js';
import { errorFields } from '../provider/core/error-fields.js';
import { parseUntrustedJson } from '../provider/core/untrusted-json.js';
import { reviewAdmission, type AdmissionResult } from './review-admission.js';

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

/** Who a review is for: what an answer must echo, known as soon as the body is parsed. */
export interface ReviewEnvelope {
  apiVersion: string;
  uid: string;
}

/** One review's answer and what to log about it: plain data, so it can cross a thread boundary. */
export interface ReviewReply {
  answer: Answer;
  /** For the request metric's `result` label. */
  result: AdmissionResult;
  log?: { level: 'info' | 'warn' | 'error'; message: string; fields: Record<string, unknown> };
}

export type Mutation = (pod: V1Pod, namespace?: string) => { pod: V1Pod; mutated: boolean };

/**
 * Answers one raw AdmissionReview body: parses it within {@link MUTATE_MAX_JSON_TOKENS} (a
 * malformed or oversized body is HTTP 400), then `reviewAdmission`. Pure apart from `mutate`;
 * logs nothing itself, so it runs the same in the main thread and in an admission worker.
 *
 * `onEnvelope` is told the review's apiVersion and uid once they are known and before the
 * mutation runs, so that whoever waits for the answer can still deny the review properly if
 * the mutation never returns (see `AdmissionPool`).
 */
export function answerReview(raw: string, mutate: Mutation, onEnvelope?: (envelope: ReviewEnvelope) => void): ReviewReply {
  let body: unknown;
  try {
    body = parseUntrustedJson(raw, { maxTokens: MUTATE_MAX_JSON_TOKENS });
  } catch (err) {
    return {
      answer: { status: 400, text: `request body ${(err as Error).message}` },
      result: 'error',
      log: { level: 'warn', message: 'webhook: malformed AdmissionReview', fields: errorFields(err) },
    };
  }
  const envelope = envelopeOf(body);
  if (envelope) onEnvelope?.(envelope);
  const outcome = reviewAdmission(body, mutate);
  if (outcome.httpStatus === 400) {
    return { answer: { status: 400, text: outcome.reason }, result: 'error', log: { level: 'warn', message: 'webhook: malformed AdmissionReview', fields: { reason: outcome.reason } } };
  }
  const reply: ReviewReply = { answer: { status: 200, json: outcome.review }, result: outcome.result };
  if (outcome.result !== 'allowed') {
    const request = (body as { request?: { namespace?: unknown; name?: unknown; uid?: unknown } }).request;
    const fields = { namespace: stringOr(request?.namespace), name: stringOr(request?.name), uid: stringOr(request?.uid), ...errorFields(outcome.error) };
    reply.log = outcome.result === 'denied' ? { level: 'info', message: 'webhook: pod denied', fields } : { level: 'error', message: 'webhook: mutation failed', fields };
  }
  return reply;
}

/**
 * An AdmissionReview that denies the review of `envelope` with code 500 and `message`: what the
 * webhook answers when it could not finish a review (too slow, or its worker died). A denial,
 * not an HTTP failure: the apiserver would apply the failure policy to that, and the user would
 * read a timeout instead of why.
 */
export function denyUnfinished(envelope: ReviewEnvelope, message: string): Answer {
  return {
    status: 200,
    json: {
      apiVersion: envelope.apiVersion,
      kind: 'AdmissionReview',
      response: { uid: envelope.uid, allowed: false, status: { status: 'Failure', code: 500, reason: 'InternalError', message } },
    },
  };
}

function envelopeOf(body: unknown): ReviewEnvelope | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const { apiVersion, request } = body as { apiVersion?: unknown; request?: { uid?: unknown } };
  const uid = typeof request === 'object' && request !== null ? request.uid : undefined;
  return typeof apiVersion === 'string' && typeof uid === 'string' && uid !== '' ? { apiVersion, uid } : undefined;
}

function stringOr(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}
