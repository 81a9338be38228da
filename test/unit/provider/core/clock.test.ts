import { expect } from 'chai';
import { FakeClock, realClock } from '../../../../provider/core/clock.js';

describe('FakeClock', () => {
  it('moves only with advance, and fires due timers in time order, ties in the order set', () => {
    const clock = new FakeClock(1000);
    const fired: string[] = [];
    clock.setTimeout(() => fired.push(`b@${clock.now()}`), 200);
    clock.setTimeout(() => fired.push(`a@${clock.now()}`), 100);
    clock.setTimeout(() => fired.push(`c@${clock.now()}`), 200);
    expect(clock.now()).to.equal(1000);
    clock.advance(150);
    expect(fired).to.deep.equal(['a@1100']);
    expect(clock.now()).to.equal(1150);
    clock.advance(50);
    expect(fired).to.deep.equal(['a@1100', 'b@1200', 'c@1200']);
    expect(clock.pending()).to.equal(0);
  });

  it('fires timers set by a timer within the same advance when they fall due in it', () => {
    const clock = new FakeClock(0);
    const fired: number[] = [];
    const tick = () => {
      fired.push(clock.now());
      clock.setTimeout(tick, 100);
    };
    clock.setTimeout(tick, 100);
    clock.advance(350);
    expect(fired).to.deep.equal([100, 200, 300]);
    expect(clock.pending()).to.equal(1);
  });

  it('does not fire a cleared timer, even one cleared by another timer of the same advance', () => {
    const clock = new FakeClock(0);
    const fired: string[] = [];
    const later = clock.setTimeout(() => fired.push('later'), 200);
    clock.setTimeout(() => clock.clearTimeout(later), 100);
    const cleared = clock.setTimeout(() => fired.push('cleared'), 50);
    clock.clearTimeout(cleared);
    clock.advance(1000);
    expect(fired).to.deep.equal([]);
    expect(clock.pending()).to.equal(0);
  });

  it('treats a negative delay as zero', () => {
    const clock = new FakeClock(0);
    let fired = false;
    clock.setTimeout(() => (fired = true), -5);
    clock.advance(0);
    expect(fired).to.equal(true);
  });
});

describe('realClock', () => {
  it('runs and clears real timers', async () => {
    // Read between two readings of Date.now(): it is the wall clock, with no time allowance.
    const before = Date.now();
    const now = realClock.now();
    expect(now).to.be.within(before, Date.now());
    const fired: string[] = [];
    const t = realClock.setTimeout(() => fired.push('cleared'), 5);
    realClock.clearTimeout(t);
    await new Promise<void>((r) => realClock.setTimeout(() => r(), 10));
    expect(fired).to.deep.equal([]);
  });
});
