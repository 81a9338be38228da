import type { Clock, ClockTimer } from '../core/clock.js';

/** An attempt that did not finish in time (a network failure for the caller). */
export class AttemptDeadlineError extends Error {
  readonly code = 'ETIMEDOUT';
}

/**
 * Runs `run` with an abort signal, and rejects once `ms` have passed on `clock` whatever the
 * calls do (a fake API may ignore the signal), aborting the signal then. `inFlight` holds the
 * controller while the attempt runs, so a stop can abort it (as `LeaderElector` does).
 */
export function withAttemptDeadline<T>(clock: Clock, ms: number, inFlight: Set<AbortController>, run: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  inFlight.add(controller);
  let timer: ClockTimer | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = clock.setTimeout(
      () => {
        const err = new AttemptDeadlineError(`attempt did not finish within ${ms} ms`);
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
