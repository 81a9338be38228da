import { expect } from 'chai';
import {
  cpuPer1000,
  cpuPer1000NetOfIdle,
  idleCostPerTarget,
  parseScaleArgs,
  podsPerTarget,
  ratioOf,
  renderScaleGoals,
  renderScaleStages,
  renderScaleSvg,
  renderScaleTable,
  SCALE_SUMMARY_PATTERN,
  scaleGoals,
  scaleSummaryLine,
  type IdleFigures,
  type ScaleResult,
  type ScaleRun,
} from '../../bench/scale-report.js';
import { checkXmlWellFormed } from '../../support/xml-well-formed.js';

const baseline: IdleFigures = { seconds: 30, providerRssMiB: 100, providerCpuSeconds: 0.3, requestsPerSecond: { c1: 2, c2: 1 } };

function runOf(over: Partial<ScaleRun> = {}): ScaleRun {
  return {
    allRunningSeconds: 100,
    deletionSeconds: 50,
    startLatencyP50Ms: 4000,
    startLatencyP99Ms: 9000,
    providerCpuSeconds: 60,
    providerPeakRssMiB: 250,
    requestsPerPod: { c1: 4.5, c2: 4.2 },
    ...over,
  };
}

function resultOf(targets: number, pods: number, over: Partial<ScaleResult> = {}): ScaleResult {
  return {
    targets,
    pods,
    connectSeconds: 10,
    idle: { seconds: 30, providerRssMiB: 150, providerCpuSeconds: 1, requestsPerSecond: { c1: 52, c2: 51 } },
    direct: runOf({ allRunningSeconds: 80 }),
    offloaded: runOf({
      allRunningSeconds: 100,
      proxiesBoundPerSecond: 48.5,
      extenderSeconds: { filter: 3, bind: 2 },
      stages: [{ name: 'sent -> proxy created', p50Ms: 100, p99Ms: 900, endP50Ms: 100, pods }],
    }),
    ...over,
  };
}

describe('scale benchmark report', () => {
  it('parses --targets, --pods, --concurrency, --idle-seconds and --out, with defaults 10,50,100 targets and 10000 pods', () => {
    expect(parseScaleArgs([])).to.deep.equal({ targets: [10, 50, 100], pods: 10_000, concurrency: 20, idleSeconds: 30, outDir: '.bench' });
    expect(parseScaleArgs(['--targets', '2,5', '--pods', '200', '--concurrency', '8', '--idle-seconds', '5', '--out', 'x'])).to.deep.equal({
      targets: [2, 5],
      pods: 200,
      concurrency: 8,
      idleSeconds: 5,
      outDir: 'x',
    });
  });

  it('refuses a bad argument by naming it', () => {
    expect(() => parseScaleArgs(['--targets', '0'])).to.throw('--targets takes a whole number from 1 to 500, got 0');
    expect(() => parseScaleArgs(['--targets', '10,x'])).to.throw('--targets takes a whole number');
    expect(() => parseScaleArgs(['--pods'])).to.throw('--pods takes a whole number from 1 to 50000, got nothing');
    expect(() => parseScaleArgs(['--idle-seconds', '1'])).to.throw('--idle-seconds takes a whole number from 5 to 600');
    expect(() => parseScaleArgs(['--sizes', '10'])).to.throw('unknown argument --sizes');
  });

  it('spreads pods over targets as evenly as whole numbers allow, the first ones taking one more', () => {
    expect(podsPerTarget(10, 3)).to.deep.equal([4, 3, 3]);
    expect(podsPerTarget(10_000, 100).every((n) => n === 100)).to.equal(true);
    expect(podsPerTarget(2, 5)).to.deep.equal([1, 1, 0, 0, 0]);
    expect(podsPerTarget(7, 4).reduce((a, b) => a + b, 0)).to.equal(7);
  });

  it('charges each target its share of the growth in provider RSS, apiserver requests and provider CPU over the baseline', () => {
    // 150 - 100 MiB over 10 targets; (52 + 51) - (2 + 1) requests a second over 10 targets;
    // (1 - 0.3) CPU s over 30 s, over 10 targets, is 2.33 ms a second each.
    const cost = idleCostPerTarget(baseline, resultOf(10, 1000));
    expect(cost).to.include({ rssMiB: 5, requestsPerSecond: 10 });
    expect(cost.cpuMsPerSecond).to.be.closeTo(2.333, 0.001);
  });

  it('takes off the CPU per 1000 pods what the provider spends idle at that size over the run', () => {
    // 60 CPU s in 100 s, idle at 1/30 CPU s a second: 60 - 3.33 over 1000 pods.
    expect(cpuPer1000NetOfIdle(resultOf(10, 1000))).to.be.closeTo(56.667, 0.001);
  });

  it('prints one summary line per size in the form scripts read', () => {
    const line = scaleSummaryLine(resultOf(100, 10_000));
    expect(line).to.equal('scale 100 targets, 10000 pods: direct 80.0 s, offloaded 100.0 s, ratio 1.25');
    expect(SCALE_SUMMARY_PATTERN.test(line)).to.equal(true);
  });

  it('renders a table with the baseline line and one row per size carrying ratio, CPU per 1000 pods and the idle cost', () => {
    const text = renderScaleTable(baseline, [resultOf(10, 1000), resultOf(100, 10_000)]);
    const lines = text.split('\n');
    expect(lines[0]).to.equal('baseline, no benchmark target: provider RSS 100.0 MiB, 3.00 apiserver requests/s (c1 2.00, c2 1.00)');
    expect(lines).to.have.length(4);
    expect(lines[2]).to.match(/^10 +1000 +80\.0 +100\.0 +1\.25 /);
    // 60 CPU s over 1000 pods is 60 per 1000; over 10000 pods, 6; net of idle, 56.7 and 5.7.
    expect(lines[2]).to.contain('60.0 (60.0; 56.7)');
    expect(lines[3]).to.contain('60.0 (6.0; 5.7)');
    expect(lines[2]).to.contain('5.00, 10.00, 2.33');
  });

  it("renders where an offloaded pod's time goes, with the extender requests' summed durations by verb", () => {
    expect(renderScaleStages([resultOf(10, 1000)])).to.equal(
      "10 targets: sent -> proxy created 0.1/0.9; extender requests' summed durations filter 3.0 s, bind 2.0 s (concurrent requests overlap; a bind waits for the target to place the delegate), provider CPU 60.0 s",
    );
  });

  it('judges the goals of one replica at the largest size, and says when that size is below 100 targets and 10000 pods', () => {
    const small = scaleGoals(baseline, [resultOf(10, 1000)]);
    expect(small?.at).to.equal('10 targets, 1000 pods (the goals are set for 100 targets and 10000 pods)');
    const big = resultOf(100, 10_000, { idle: { seconds: 30, providerRssMiB: 180, providerCpuSeconds: 1, requestsPerSecond: { c1: 40, c2: 40 } } });
    const judged = scaleGoals(baseline, [resultOf(10, 1000), big]);
    expect(judged?.at).to.equal('100 targets, 10000 pods');
    expect(judged?.goals.map((g) => [g.goal, g.met])).to.deep.equal([
      ['offload/direct', true], // 1.25 <= 1.5
      ['provider peak RSS, MiB', true], // 250 <= 400
      ['provider CPU per 1000 pods, s', true], // 6 <= 8
      ['RSS per idle target, MiB', true], // 0.8 <= 1
      ['apiserver requests/s per idle target', true], // 0.77 <= 1
    ]);
    expect(ratioOf(big)).to.equal(1.25);
    expect(cpuPer1000(big)).to.equal(6);
    expect(renderScaleGoals(baseline, [resultOf(10, 1000)])).to.contain('RSS per idle target, MiB: 5.00, goal at most 1: not met');
    expect(scaleGoals(baseline, [])).to.equal(undefined);
  });

  it('plots well-formed SVG with one polyline per figure', () => {
    const svg = renderScaleSvg([resultOf(100, 10_000), resultOf(10, 10_000)], 'scale <test>');
    checkXmlWellFormed(svg);
    expect(svg.match(/<polyline/g)).to.have.length(3);
    expect(svg).to.contain('scale &lt;test>');
  });
});
