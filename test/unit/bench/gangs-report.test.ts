import { expect } from 'chai';
import { gangsSummaryLine, parseGangsArgs, PartialGroups, renderGangsTable, type GangEvent, type GangEventKind, type GangsRun } from '../../bench/gangs-report.js';

/** Events of one job `j` from a compact list: [ms, pod, kind]. */
const events = (job: string, list: [number, string, GangEventKind][]): GangEvent[] => list.map(([atMs, pod, kind]) => ({ atMs, job, pod, kind }));

function feed(minCount: number, list: GangEvent[], graceMs = 1000): PartialGroups {
  const account = new PartialGroups(minCount, 1000, graceMs);
  for (const e of [...list].sort((a, b) => a.atMs - b.atMs)) account.record(e);
  return account;
}

describe('gang benchmark: partial groups from events', () => {
  it('a gang whose pods are all bound before any runs is never partial, and completes when its last pod finishes', () => {
    const account = feed(
      3,
      events('a', [
        [10, 'p0', 'bound'],
        [11, 'p1', 'bound'],
        [12, 'p2', 'bound'],
        [100, 'p0', 'running'],
        [101, 'p1', 'running'],
        [102, 'p2', 'running'],
        [5000, 'p0', 'finished'],
        [5001, 'p1', 'finished'],
        [5002, 'p2', 'finished'],
      ]),
    );
    const f = account.figures();
    expect(f).to.include({ podsInPartialGroups: 0, podsInPartialGroupsAnyMoment: 0, jobsEverPartial: 0, peakHeldMilli: 2000, jobsComplete: 1, lastCompleteMs: 5002, longestPartialMs: 0 });
    // Two pods bound, waiting for the third, for 1 ms and 1 ms: 0.003 cpu-seconds.
    expect(f.heldCpuSeconds).to.be.closeTo(0.003, 1e-9);
  });

  it('pods Running while their job is short of minCount count, each once, and the room they hold is summed over jobs', () => {
    const account = feed(3, [
      ...events('a', [
        [0, 'p0', 'running'],
        [500, 'p1', 'running'],
        [3000, 'p2', 'running'],
      ]),
      ...events('b', [
        [100, 'q0', 'bound'],
        [200, 'q1', 'running'],
      ]),
    ]);
    const f = account.figures(10_000);
    // a: p0 and p1 ran for 3 s while a had fewer than 3 bound; b is partial still (q1 Running, 2 of 3 bound).
    expect(f.podsInPartialGroups).to.equal(3);
    expect(f.jobsEverPartial).to.equal(2);
    expect(f.longestPartialMs).to.equal(9800);
    // At 500 ms: a holds 2 cpu, b 2 cpu.
    expect(f.peakHeldMilli).to.equal(4000);
    expect(f.jobsComplete).to.equal(0);
    expect(f.firstPartialMoments.map((m) => [m.job, m.atMs, m.running, m.bound])).to.deep.equal([
      ['a', 0, 1, 1],
      ['b', 200, 1, 2],
    ]);
  });

  it('a spell shorter than the grace (one placement bound tens of ms apart) counts only at any moment', () => {
    const account = feed(
      2,
      events('a', [
        [0, 'p0', 'bound'],
        [10, 'p0', 'running'],
        [60, 'p1', 'bound'],
        [70, 'p1', 'running'],
      ]),
    );
    expect(account.figures()).to.include({ podsInPartialGroups: 0, jobsEverPartial: 0, podsInPartialGroupsAnyMoment: 1, longestPartialMs: 50 });
  });

  it('an open spell counts at the moment asked, without ending it', () => {
    const account = feed(2, events('a', [[0, 'p0', 'running']]));
    expect(account.figures(500).podsInPartialGroups).to.equal(0);
    expect(account.figures(1500).podsInPartialGroups).to.equal(1);
    account.record({ atMs: 2000, job: 'a', pod: 'p1', kind: 'bound' });
    expect(account.figures(3000)).to.include({ podsInPartialGroups: 1, longestPartialMs: 2000 });
  });

  it('events are idempotent, a Running pod is bound even when its binding is seen later, and a finished pod stays finished', () => {
    const account = feed(
      2,
      events('a', [
        [0, 'p0', 'running'],
        [0, 'p0', 'running'],
        [1, 'p1', 'running'],
        [2, 'p0', 'bound'],
        [3, 'p1', 'bound'],
        [10, 'p0', 'finished'],
        [11, 'p0', 'running'],
        [12, 'p0', 'finished'],
        [13, 'p1', 'finished'],
      ]),
      0,
    );
    expect(account.figures()).to.include({ podsInPartialGroups: 1, jobsComplete: 1, peakHeldMilli: 1000 });
    expect(account.runningOf('a').size).to.equal(0);
  });

  it('finished pods of a job short of minCount no longer hold room', () => {
    const account = feed(
      3,
      events('a', [
        [0, 'p0', 'running'],
        [1000, 'p0', 'finished'],
      ]),
    );
    const f = account.figures(5000);
    expect(f.peakHeldMilli).to.equal(1000);
    expect(f.heldCpuSeconds).to.be.closeTo(1, 1e-9);
  });
});

describe('gang benchmark: arguments and output', () => {
  it('parses its flags, refuses bad ones by name, and a room smaller than one job', () => {
    expect(parseGangsArgs([])).to.include({ jobs: 50, pods: 8, room: 16, work: 'rendezvous' });
    expect(parseGangsArgs(['--jobs', '10', '--pods', '4', '--room', '8', '--work', 'independent', '--out', 'x'])).to.include({ jobs: 10, pods: 4, room: 8, work: 'independent', outDir: 'x' });
    expect(() => parseGangsArgs(['--jobs', '0'])).to.throw('--jobs takes a whole number');
    expect(() => parseGangsArgs(['--work', 'lazy'])).to.throw('--work takes rendezvous or independent');
    expect(() => parseGangsArgs(['--pods', '8', '--room', '4'])).to.throw('--room 4 is less than one job');
    expect(() => parseGangsArgs(['--bogus'])).to.throw('unknown argument --bogus');
  });

  it('prints a row per run, a stalled run as where it stalled, and one summary line', () => {
    const partial = new PartialGroups(8, 1000).figures();
    const gangs: GangsRun = { mode: 'gangs', jobs: 50, pods: 8, allCompleteSeconds: 80.04, partial, podsByNode: {}, partialTraces: [] };
    const single: GangsRun = { ...gangs, mode: 'one by one', allCompleteSeconds: undefined, stalledAtSeconds: 12.3, partial: { ...partial, podsInPartialGroups: 37 } };
    const table = renderGangsTable([gangs, single]);
    expect(table.split('\n')).to.have.length(3);
    expect(table).to.contain('80.0 s').and.to.contain('stalled at 12.3 s');
    expect(gangsSummaryLine(gangs, single)).to.equal('gangs 50 jobs x 8 pods: 0 pods in partial groups with gangs, 37 one by one; all complete 80.0 s with gangs, stalled at 12.3 s one by one');
  });
});
