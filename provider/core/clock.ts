/** Time source injected everywhere time matters, so tests can use a fake clock. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  setTimeout(fn: () => void, ms: number): ClockTimer;
  clearTimeout(timer: ClockTimer): void;
}

export type ClockTimer = { readonly id: unknown };

/** The real clock. */
export const realClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => ({ id: setTimeout(fn, ms) }),
  clearTimeout: (timer) => clearTimeout(timer.id as NodeJS.Timeout),
};

/** A manual clock for tests: time moves only with `advance`. */
export class FakeClock implements Clock {
  private current: number;
  private timers: { at: number; fn: () => void; timer: ClockTimer; seq: number }[] = [];
  private seq = 0;

  constructor(startMs = 0) {
    this.current = startMs;
  }

  now(): number {
    return this.current;
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
