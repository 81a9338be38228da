import { Observable, type RequestContext, type ResponseContext } from '@kubernetes/client-node';
import type { Clock, ClockTimer } from './clock.js';

/** An attempt that did not finish in time (a network failure for the caller). */
export class AttemptDeadlineError extends Error {
  readonly code = 'ETIMEDOUT';
}

/**
 * Runs `run` with an abort signal, and rejects once `ms` have passed on `clock` whatever the
 * calls do (a fake API may ignore the signal), aborting the signal then. `inFlight` holds the
 * controller while the attempt runs, so a stop can abort it. `what` names the attempt in the error.
 * The leader election and the sharding membership run their Lease attempts through it.
 */
export function withAttemptDeadline<T>(clock: Clock, ms: number, inFlight: Set<AbortController>, run: (signal: AbortSignal) => Promise<T>, what = 'attempt'): Promise<T> {
  const controller = new AbortController();
  inFlight.add(controller);
  let timer: ClockTimer | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = clock.setTimeout(
      () => {
        const err = new AttemptDeadlineError(`${what} did not finish within ${ms} ms`);
        controller.abort(err);
        reject(err);
      },
      Math.max(0, ms),
    );
  });
  return Promise.race([run(controller.signal), deadline]).finally(() => {
    if (timer) clock.clearTimeout(timer);
    inFlight.delete(controller);
  });
}

/**
 * Per-call options that bind a generated client's request to `signal`: a middleware (the
 * object-parameter API takes the observable kind) replaces the signal that
 * `withRequestDeadline` set, which is longer than any renew deadline.
 */
export function abortWith(signal: AbortSignal): never {
  return {
    middleware: [
      {
        pre: (ctx: RequestContext) => {
          ctx.setSignal(signal);
          return new Observable(Promise.resolve(ctx));
        },
        post: (res: ResponseContext) => new Observable(Promise.resolve(res)),
      },
    ],
    middlewareMergeStrategy: 'append',
  } as never;
}
