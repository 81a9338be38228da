import { expect } from 'chai';
import { atMost, IDLE_RSS_GOAL_MB, mibToMB, OFFLOAD_GOALS, renderGoal } from '../../bench/goals.js';

describe('benchmark goals', () => {
  it('holds the goals the README states', () => {
    expect(OFFLOAD_GOALS.ratioBySize).to.deep.equal({ 1000: 1.25, 5000: 1.3 });
    expect(OFFLOAD_GOALS.providerCpuSecondsPer1000).to.equal(8);
    expect(OFFLOAD_GOALS.p99Factor).to.equal(1.5);
    expect([OFFLOAD_GOALS.peakRssMB, OFFLOAD_GOALS.peakRssAtSize]).to.deep.equal([200, 5000]);
    expect(IDLE_RSS_GOAL_MB).to.equal(120);
  });

  it('judges a figure as printed: a printed value equal to the limit meets it, one a digit above does not', () => {
    expect(atMost(1.2549, 1.25, 2)).to.equal(true);
    expect(atMost(1.2551, 1.25, 2)).to.equal(false);
    expect(atMost(8.04, 8, 1)).to.equal(true);
    expect(atMost(8.06, 8, 1)).to.equal(false);
    expect(atMost(Number.NaN, 1, 2)).to.equal(undefined);
    expect(atMost(Number.POSITIVE_INFINITY, 1, 2)).to.equal(undefined);
  });

  it('converts MiB to MB (10^6 bytes)', () => {
    expect(mibToMB(1)).to.equal(1.048576);
    expect(mibToMB(190.8)).to.be.above(200);
  });

  it('renders a verdict with its size, its figure, its limit and why it was not judged', () => {
    expect(renderGoal({ size: 1000, goal: 'offload ratio', measured: '1.44', limitText: '1.25', met: false, note: 'floor 1.13' })).to.equal(
      '1000 pods, offload ratio: 1.44, goal at most 1.25: not met (floor 1.13)',
    );
    expect(renderGoal({ goal: 'idle RSS', measured: '92 MB', limitText: '120 MB', met: true })).to.equal('idle RSS: 92 MB, goal at most 120 MB: met');
    expect(renderGoal({ size: 5, goal: 'x', measured: '-', limitText: '1', met: undefined, note: 'restarted' })).to.equal('5 pods, x: -, goal at most 1: not judged (restarted)');
  });
});
