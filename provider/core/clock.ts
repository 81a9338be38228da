/** Time source injected everywhere time matters, so tests can use a fake clock. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /**
   * Milliseconds from an arbitrary origin, on a clock that is never stepped (NTP may step the
   * wall clock of `now` either way): for measuring how long something took or has lasted.
   */
  monotonicMs(): number;
  setTimeout(fn: () => void, ms: number): ClockTimer;
  clearTimeout(timer: ClockTimer): void;
}

export type ClockTimer = { readonly id: unknown };

/** The real clock. */
export const realClock: Clock = {
  now: () => Date.now(),
  monotonicMs: () => performance.now(),
  setTimeout: (fn, ms) => ({ id: setTimeout(fn, ms) }),
  clearTimeout: (timer) => clearTimeout(timer.id as NodeJS.Timeout),
};

/** A manual clock for tests: time moves only with `advance`; the wall clock may also be stepped. */
export class FakeClock implements Clock {
  /** Monotonic time, which timers follow. */
  private current: number;
  /** How far the wall clock has been stepped from monotonic time. */
  private wallOffsetMs = 0;
  private timers: { at: number; fn: () => void; timer: ClockTimer; seq: number }[] = [];
  private seq = 0;

  constructor(startMs = 0) {
    this.current = startMs;
  }

  now(): number {
    return this.current + this.wallOffsetMs;
  }

  monotonicMs(): number {
    return this.current;
  }

  /** Steps the wall clock (`now`) by `ms`, either way, as NTP may: timers and `monotonicMs` are not moved. */
  stepWallClock(ms: number): void {
    this.wallOffsetMs += ms;
  }

  setTimeout(fn: () => void, ms: number): ClockTimer {
    const timer = { id: ++this.seq };
    this.timers.push({ at: this.current + Math.max(0, ms), fn, timer, seq: this.seq });
    return timer;
  }

  clearTimeout(timer: ClockTimer): void {
    this.timers = this.timers.filter((t) => t.timer !== timer);
  }

  /** Moves time forward, firing due timers in order. */
  advance(ms: number): void {
    const end = this.current + ms;
    for (;;) {
      this.timers.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const next = this.timers[0];
      if (!next || next.at > end) break;
      this.timers.shift();
      this.current = next.at;
      next.fn();
    }
    this.current = end;
  }

  /** Number of timers still pending. */
  pending(): number {
    return this.timers.length;
  }
}
