import { expect } from 'chai';
import { FakeClock } from '../../../provider/core/clock.js';
import { MAX_MESSAGE_CHARS, RefusalLog } from '../../../scheduler/refusal-log.js';

const MINUTE = 60_000;

describe('scheduler: RefusalLog', () => {
  it('counts refusals per target and reason, the most frequent first, with the last message and when', () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1));
    const log = new RefusalLog({ clock });
    log.record('Target/ns/c2', 'filter', 'NoNodeFits', 'no node in ns/c2 fits: 1 Insufficient cpu (largest free 1)');
    clock.advance(1000);
    log.record('Target/ns/c2', 'filter', 'NoNodeFits', 'no node in ns/c2 fits: 1 Insufficient cpu (largest free 500m)');
    log.record('Target/ns/c2', 'bind', 'DelegateNotPlaced', 'ns/c2: 0/1 nodes are available');
    log.record('Target/ns/c1', 'filter', 'TargetNotReady', 'target ns/c1 is not ready');
    expect(log.recent('Target/ns/c2')).to.deep.equal([
      { source: 'filter', reason: 'NoNodeFits', count: 2, lastMessage: 'no node in ns/c2 fits: 1 Insufficient cpu (largest free 500m)', lastAt: '2026-01-01T00:00:01.000Z' },
      { source: 'bind', reason: 'DelegateNotPlaced', count: 1, lastMessage: 'ns/c2: 0/1 nodes are available', lastAt: '2026-01-01T00:00:01.000Z' },
    ]);
    expect(log.recent('Target/ns/c1').map((r) => r.count)).to.deep.equal([1]);
    expect(log.recent('Target/ns/c3')).to.deep.equal([]);
  });

  it('forgets refusals once they are older than the window, bucket by bucket, on a fake clock', () => {
    const clock = new FakeClock(0);
    const log = new RefusalLog({ clock });
    log.record('t', 'filter', 'NoNodeFits', 'a');
    clock.advance(5 * MINUTE);
    log.record('t', 'filter', 'NoNodeFits', 'b');
    log.record('t', 'filter', 'NoNodeFits', 'c');
    clock.advance(4 * MINUTE + 59_000); // 9:59 since the first: still in its bucket's window
    expect(log.recent('t').map((r) => r.count)).to.deep.equal([3]);
    clock.advance(1000); // 10:00: the first minute's bucket has left the window
    expect(log.recent('t').map((r) => r.count)).to.deep.equal([2]);
    clock.advance(5 * MINUTE);
    expect(log.recent('t')).to.deep.equal([]);
  });

  it('reuses a ring slot for a new minute without carrying the old counts over', () => {
    const clock = new FakeClock(0);
    const log = new RefusalLog({ clock, windowMs: 10 * MINUTE, buckets: 10 });
    log.record('t', 'bind', 'DelegateNotPlaced', 'x');
    clock.advance(10 * MINUTE); // the same slot of the ring, ten minutes on
    log.record('t', 'bind', 'DelegateNotPlaced', 'y');
    expect(log.recent('t')).to.deep.include.members([{ source: 'bind', reason: 'DelegateNotPlaced', count: 1, lastMessage: 'y', lastAt: new Date(10 * MINUTE).toISOString() }]);
  });

  it('does not lose nor keep counts when the wall clock is stepped back: the window is on the monotonic clock', () => {
    const clock = new FakeClock(0);
    const log = new RefusalLog({ clock });
    log.record('t', 'filter', 'NoSummary', 'x');
    clock.stepWallClock(-3_600_000);
    expect(log.recent('t').map((r) => r.count)).to.deep.equal([1]);
    clock.advance(10 * MINUTE);
    expect(log.recent('t')).to.deep.equal([]);
  });

  it('keeps at most maxReasons reasons per target and maxTargets targets, pushing out the oldest, and cuts long messages', () => {
    const clock = new FakeClock(0);
    const log = new RefusalLog({ clock, maxReasons: 2, maxTargets: 2 });
    log.record('t', 'filter', 'A', 'a');
    log.record('t', 'filter', 'B', 'b');
    log.record('t', 'filter', 'A', 'a again');
    log.record('t', 'filter', 'C', 'x'.repeat(2 * MAX_MESSAGE_CHARS));
    const kept = log.recent('t');
    expect(kept.map((r) => r.reason).sort()).to.deep.equal(['A', 'C']);
    expect(kept.find((r) => r.reason === 'C')!.lastMessage).to.have.length(MAX_MESSAGE_CHARS);
    log.record('u', 'filter', 'A', 'a');
    log.record('v', 'filter', 'A', 'a');
    expect(log.recent('t')).to.deep.equal([]);
    expect(log.recent('u')).to.have.length(1);
    expect(log.recent('v')).to.have.length(1);
  });

  it('refuses a window or bucket count that is not positive', () => {
    expect(() => new RefusalLog({ clock: new FakeClock(0), buckets: 0 })).to.throw(RangeError, 'windowMs and buckets must be positive');
    expect(() => new RefusalLog({ clock: new FakeClock(0), windowMs: 0 })).to.throw(RangeError);
  });
});
