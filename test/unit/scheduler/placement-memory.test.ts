import { expect } from 'chai';
import { PlacementMemory } from '../../../scheduler/placement-memory.js';

describe('scheduler: PlacementMemory', () => {
  it('keeps a refusal for its time, per pod and target, doubling it for each refusal in a row', () => {
    const m = new PlacementMemory({ refusalTtlMs: 1000, maxRefusalTtlMs: 3000 });
    m.refuse('u1', 'ClusterTarget/c2', 'c2: full', 0);
    expect(m.refusal('u1', 'ClusterTarget/c2', 999)).to.deep.include({ reason: 'c2: full', atMs: 0, forMs: 1000 });
    expect(m.refusal('u1', 'ClusterTarget/c1', 10)).to.equal(undefined);
    expect(m.refusal('u2', 'ClusterTarget/c2', 10)).to.equal(undefined);
    expect(m.refusal(undefined, 'ClusterTarget/c2', 10)).to.equal(undefined);
    expect(m.refusal('u1', 'ClusterTarget/c2', 1000)).to.equal(undefined);
    m.refuse('u1', 'ClusterTarget/c2', 'c2: still full', 1000);
    expect(m.refusal('u1', 'ClusterTarget/c2', 2999)).to.deep.include({ reason: 'c2: still full', forMs: 2000, count: 2 });
    m.refuse('u1', 'ClusterTarget/c2', 'c2: still full', 3000);
    expect(m.refusal('u1', 'ClusterTarget/c2', 3000)!.forMs).to.equal(3000);
  });

  it('forgets a pod, and the oldest pods beyond its bound', () => {
    const m = new PlacementMemory({ maxPods: 2 });
    m.refuse('u1', 't', 'r', 0);
    m.refuse('u2', 't', 'r', 0);
    m.refuse('u1', 't2', 'r', 1); // u1 is now the newest
    m.refuse('u3', 't', 'r', 2);
    expect(m.refusal('u2', 't', 3)).to.equal(undefined);
    expect(m.refusal('u1', 't2', 3)).to.not.equal(undefined);
    m.forget('u1');
    expect(m.refusal('u1', 't2', 3)).to.equal(undefined);
  });

  it('sums assumptions per node until a summary read late enough covers them', () => {
    const m = new PlacementMemory({ summaryLagMs: 1000 });
    m.assume('t', 'n1', new Map([['cpu', 1n]]), 100);
    m.assume('t', 'n1', new Map([['cpu', 2n], ['pods', 1n]]), 600);
    m.assume('t', 'n2', new Map([['cpu', 5n]]), 600);
    expect(m.assumedOn('t', 1000)).to.deep.equal(new Map([['n1', new Map([['cpu', 3n], ['pods', 1n]])], ['n2', new Map([['cpu', 5n]])]]));
    // A summary read at 1200 covers the delegate placed at 100, not those of 600.
    expect(m.assumedOn('t', 1200).get('n1')).to.deep.equal(new Map([['cpu', 2n], ['pods', 1n]]));
    expect(m.assumedOn('t', 5000).size).to.equal(0);
    expect(m.assumedOn('other', 0).size).to.equal(0);
  });

  it("avoids a target for a controller's pods until a time, then drops it; the oldest controllers go beyond the bound", () => {
    const m = new PlacementMemory({ maxPods: 2 });
    m.avoid('rs1', 't', 'stuck', 1000);
    expect(m.avoidance('rs1', 't', 999)).to.deep.equal({ reason: 'stuck', untilMs: 1000 });
    expect(m.avoidance('rs1', 'other', 999)).to.equal(undefined);
    expect(m.avoidance(undefined, 't', 999)).to.equal(undefined);
    expect(m.avoidance('rs1', 't', 1000)).to.equal(undefined);
    // Three controllers, two kept: the first avoided again is the newest, so the second goes.
    for (const owner of ['rs1', 'rs2', 'rs1', 'rs3']) m.avoid(owner, 't', 'stuck', 5000);
    expect(['rs1', 'rs2', 'rs3'].map((owner) => m.avoidance(owner, 't', 0) !== undefined)).to.deep.equal([true, false, true]);
  });
});
