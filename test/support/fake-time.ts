import type { FakeClock } from '../../provider/core/clock.js';

/** Lets `rounds` turns of the event loop run: the API calls a fake-clock step started finish. */
export async function settle(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((r) => setImmediate(r));
}

/** Moves `clock` by `ms` in steps of `stepMs`, settling after each, as time passing with its timers and calls would. */
export async function advanceInSteps(clock: FakeClock, ms: number, stepMs = 500, rounds = 20): Promise<void> {
  for (let done = 0; done < ms; done += stepMs) {
    clock.advance(Math.min(stepMs, ms - done));
    await settle(rounds);
  }
}
