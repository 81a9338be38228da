import { expect } from 'chai';
import {
  DIRECT_MILESTONES,
  OFFLOAD_MILESTONES,
  orderedStages,
  counterDelta,
  isWrite,
  metricByLabel,
  metricByLabels,
  renderRequests,
  requestsByKind,
  watchesClosed,
  watchEventsSent,
  parseOffloadArgs,
  percentile,
  podCapacityPlan,
  memoryFigures,
  renderCpuFloor,
  renderRates,
  steadyRate,
  goalVerdicts,
  renderGoals,
  renderProviderCpu,
  renderMachine,
  renderMemory,
  renderQueues,
  renderStages,
  renderSvg,
  renderTable,
  startLatencies,
  stageFigures,
  summaryLine,
  SUMMARY_LINE_PATTERN,
  type PodTimes,
  type RunFigures,
  type SizeResult,
} from '../../bench/offload-report.js';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { checkXmlWellFormed } from '../../support/xml-well-formed.js';

function figures(over: Partial<RunFigures> = {}): RunFigures {
  return {
    allRunningSeconds: 10,
    startLatencyP50Ms: 400,
    startLatencyP99Ms: 900,
    deletionSeconds: 5,
    providerCpuSeconds: 1.5,
    providerDeletionCpuSeconds: 0.5,
    providerPeakRssMiB: 200,
    providerRssBeforeMiB: 150,
    providerRestarted: false,
    stages: [],
    ...over,
  };
}

describe('offload benchmark report', () => {
  describe('parseOffloadArgs', () => {
    const cases: [string, string[], { sizes: number[]; concurrency: number; outDir: string; pinClusters: boolean }][] = [
      ['defaults', [], { sizes: [100, 1000], concurrency: 20, outDir: '.bench', pinClusters: false }],
      ['sizes', ['--sizes', '100,1000,5000'], { sizes: [100, 1000, 5000], concurrency: 20, outDir: '.bench', pinClusters: false }],
      ['sizes with =, order kept, duplicates dropped', ['--sizes=1000,10,1000'], { sizes: [1000, 10], concurrency: 20, outDir: '.bench', pinClusters: false }],
      ['everything', ['--concurrency', '5', '--out=/tmp/b', '--pin-clusters', '--sizes', '10'], { sizes: [10], concurrency: 5, outDir: '/tmp/b', pinClusters: true }],
    ];
    for (const [name, argv, want] of cases) {
      it(`parses ${name}`, () => {
        expect(parseOffloadArgs(argv)).to.deep.equal(want);
      });
    }

    const bad: [string[], RegExp][] = [
      [['--sizes'], /--sizes needs a value/],
      [['--sizes', '0'], /whole numbers from 1/],
      [['--sizes', '10,x'], /whole numbers from 1/],
      [['--sizes', '1.5'], /whole numbers from 1/],
      [['--sizes', ''], /whole numbers from 1/],
      [['--concurrency', '-1'], /--concurrency takes a whole number/],
      [['--out='], /--out takes a folder/],
      [['1000'], /unknown argument "1000"; usage: offload/],
      [['--size', '10'], /unknown argument "--size"/],
      [['--pin-clusters=yes'], /--pin-clusters takes no value/],
    ];
    for (const [argv, message] of bad) {
      it(`refuses ${JSON.stringify(argv)}`, () => {
        expect(() => parseOffloadArgs(argv)).to.throw(message);
      });
    }
  });

  describe('podCapacityPlan', () => {
    const cases: [string, number[], number, number, number, number | undefined][] = [
      ['room enough: nothing to change', [600, 600], 0, 1000, 100, undefined],
      ['exactly enough', [600, 600], 100, 1000, 100, undefined],
      ['5000 pods on two nodes of 600', [600, 600], 0, 5000, 100, 2550],
      ['running pods count', [600, 600], 300, 1200, 100, 800],
      ['rounded up', [10, 10, 10], 0, 100, 0, 34],
      ['never lowers a node', [2000, 10], 0, 2500, 0, 2000],
      ['no nodes: nothing to do', [], 0, 10, 0, undefined],
    ];
    for (const [name, pods, running, size, margin, want] of cases) {
      it(name, () => {
        expect(podCapacityPlan(pods, running, size, margin)).to.equal(want);
      });
    }
  });

  describe('percentile', () => {
    it('takes the nearest rank, whatever the order', () => {
      const values = [5, 1, 4, 2, 3, 10, 9, 8, 7, 6];
      expect(percentile(values, 50)).to.equal(5);
      expect(percentile(values, 90)).to.equal(9);
      expect(percentile(values, 99)).to.equal(10);
      expect(percentile(values, 100)).to.equal(10);
      expect(percentile(values, 1)).to.equal(1);
      expect(values[0]).to.equal(5); // not sorted in place
    });

    it('gives the one value of one, and NaN of none', () => {
      expect(percentile([7], 50)).to.equal(7);
      expect(percentile([7], 99)).to.equal(7);
      expect(percentile([], 50)).to.be.NaN;
    });

    it('p99 of 1000 values is the 990th', () => {
      const values = Array.from({ length: 1000 }, (_, i) => i + 1);
      expect(percentile(values, 99)).to.equal(990);
      expect(percentile(values, 50)).to.equal(500);
    });
  });

  describe('orderedStages, stageFigures and startLatencies', () => {
    // The proxy bound first (as without the extender)...
    const pods: PodTimes[] = [
      { sent: 0, created: 10, bound: 30, delegateCreated: 60, delegateBound: 70, delegateRunning: 170, running: 200 },
      { sent: 5, created: 25, bound: 45, delegateCreated: 95, delegateBound: 115, delegateRunning: 215, running: 265 },
      { sent: 10, created: 40, bound: 70 }, // never got further
    ];
    // ...and the delegate placed before the proxy is bound (as with the extender's bind).
    const exact: PodTimes[] = [
      { sent: 0, created: 10, delegateCreated: 20, delegateBound: 30, bound: 50, delegateRunning: 60, running: 100 },
      { sent: 0, created: 20, delegateCreated: 30, delegateBound: 40, bound: 60, delegateRunning: 55, running: 90 },
    ];

    it('puts the milestones in the order observed', () => {
      expect(orderedStages(pods, OFFLOAD_MILESTONES).map((s) => s.name)).to.deep.equal([
        'sent -> proxy created',
        'proxy created -> proxy bound',
        'proxy bound -> delegate created',
        'delegate created -> delegate bound',
        'delegate bound -> delegate Running',
        'delegate Running -> proxy Running',
      ]);
      expect(orderedStages(exact, OFFLOAD_MILESTONES).map((s) => [s.from, s.to])).to.deep.equal([
        ['sent', 'created'],
        ['created', 'delegateCreated'],
        ['delegateCreated', 'delegateBound'],
        ['delegateBound', 'bound'],
        ['bound', 'delegateRunning'],
        ['delegateRunning', 'running'],
      ]);
    });

    it('puts milestones nobody reached last, in the given order', () => {
      expect(orderedStages([{ sent: 0, created: 5 }], DIRECT_MILESTONES).map((s) => s.name)).to.deep.equal(['sent -> created', 'created -> bound', 'bound -> Running']);
    });

    it("takes percentiles of each pod's own gap, leaving out pods missing an end", () => {
      const figures = stageFigures(pods, orderedStages(pods, OFFLOAD_MILESTONES));
      expect(figures[0]).to.deep.equal({ name: 'sent -> proxy created', p50Ms: 20, p99Ms: 30, endP50Ms: 20, pods: 3 });
      expect(figures[1]).to.deep.equal({ name: 'proxy created -> proxy bound', p50Ms: 20, p99Ms: 30, endP50Ms: 40, pods: 3 });
      expect(figures[2]).to.deep.equal({ name: 'proxy bound -> delegate created', p50Ms: 30, p99Ms: 50, endP50Ms: 60, pods: 2 });
      expect(figures[5]).to.deep.equal({ name: 'delegate Running -> proxy Running', p50Ms: 30, p99Ms: 50, endP50Ms: 200, pods: 2 });
    });

    it('a gap may be negative when one pod took the steps in the other order', () => {
      const figures = stageFigures(exact, orderedStages(exact, OFFLOAD_MILESTONES));
      expect(figures[4]).to.deep.include({ name: 'proxy bound -> delegate Running', p50Ms: -5, p99Ms: 10 });
    });

    it('the direct way has three stages', () => {
      expect(stageFigures(pods, orderedStages(pods, DIRECT_MILESTONES)).map((f) => [f.name, f.p50Ms])).to.deep.equal([
        ['sent -> created', 20],
        ['created -> bound', 20],
        ['bound -> Running', 170],
      ]);
    });

    it('a stage nobody reached has NaN figures and no pods', () => {
      const [, , last] = stageFigures([{ sent: 0 }], orderedStages([{ sent: 0 }], DIRECT_MILESTONES));
      expect(last!.pods).to.equal(0);
      expect(last!.p50Ms).to.be.NaN;
    });

    it('start latency is sent -> Running, for pods seen at both ends', () => {
      expect(startLatencies(pods)).to.deep.equal([200, 260]);
    });
  });

  describe('summaryLine', () => {
    it('prints the exact form scripts read, and the pattern reads it back', () => {
      const line = summaryLine(1000, 18.2, 21.0);
      expect(line).to.equal('offload 1000 pods: direct 18.2 s, offloaded 21.0 s, ratio 1.15');
      expect(SUMMARY_LINE_PATTERN.exec(line)?.slice(1)).to.deep.equal(['1000', '18.2', '21.0', '1.15']);
    });

    it('rounds to one decimal (seconds) and two (ratio)', () => {
      expect(summaryLine(10, 0.44, 1.26)).to.equal('offload 10 pods: direct 0.4 s, offloaded 1.3 s, ratio 2.86');
      expect(SUMMARY_LINE_PATTERN.test(summaryLine(10, 0.44, 1.26))).to.equal(true);
    });
  });

  describe('renderTable and renderStages', () => {
    const results: SizeResult[] = [
      {
        size: 100,
        direct: figures({ stages: [{ name: 'created -> bound', p50Ms: 12, p99Ms: 40, endP50Ms: 70, pods: 100 }] }),
        offloaded: figures({
          allRunningSeconds: 12.34,
          proxiesGoneSeconds: 3.2,
          providerRestarted: true,
          startLatencyP50Ms: NaN,
          stages: [{ name: 'proxy bound -> delegate created', p50Ms: 250, p99Ms: 800, endP50Ms: 900, pods: 100 }],
        }),
      },
    ];

    it('has one row per size and run, with the figures rounded, and says when the provider restarted', () => {
      const lines = renderTable(results).split('\n');
      expect(lines).to.have.length(3);
      expect(lines[0]).to.match(/^run\s+all Running s\s+start p50 ms\s+start p99 ms\s+provider CPU s\s+peak RSS MiB\s+delete s\s+delete CPU s$/);
      expect(lines[1]).to.match(/^100 direct\s+10\.0\s+400\s+900\s+1\.5\s+200\s+5\.0\s+0\.5$/);
      expect(lines[2]).to.match(/^100 offloaded \(provider restarted\)\s+12\.3\s+-\s+900\s+1\.5\s+200\s+5\.0 \(proxies 3\.2\)\s+0\.5$/);
    });

    it('lists the stages of both runs per size', () => {
      const text = renderStages(results);
      expect(text).to.match(/^100 pods:\n/);
      expect(text).to.match(/offloaded: proxy bound -> delegate created\s+250\s+800\s+900\s+100/);
      expect(text).to.match(/direct: created -> bound\s+12\s+40\s+70\s+100/);
    });
  });

  describe('renderSvg', () => {
    const pods = (n: number, scale: number): PodTimes[] => Array.from({ length: n }, (_, i) => ({ sent: i, running: i + scale * (i + 1) }));
    const results: SizeResult[] = [
      { size: 100, direct: figures({ allRunningSeconds: 2 }), offloaded: figures({ allRunningSeconds: 5 }) },
      { size: 1000, direct: figures({ allRunningSeconds: 18 }), offloaded: figures({ allRunningSeconds: 30 }), directPods: pods(1000, 10), offloadedPods: pods(1000, 20) },
    ];

    it('is well-formed SVG with a pair of bars per size and a CDF of the largest size', () => {
      const svg = renderSvg(results, 'offload <test> & more');
      expect(checkXmlWellFormed(svg)).to.equal('svg');
      expect(svg).to.contain('xmlns="http://www.w3.org/2000/svg"');
      expect(svg.match(/<rect x=/g)).to.have.length(4 + 1); // 2 sizes x 2 bars, and the CDF frame
      expect(svg.match(/<polyline /g)).to.have.length(2);
      expect(svg).to.contain('start latency CDF, 1000 pods');
      expect(svg).to.contain('offload &lt;test&gt; &amp; more');
      // Each size on its own scale: the longer bar of each pair has the full width.
      const widths = [...svg.matchAll(/<rect x="150" y="\d+" width="([\d.]+)" height="16"/g)].map((m) => Number(m[1]));
      expect(widths).to.have.length(4);
      expect(widths[1]).to.equal(widths[3]);
      expect(widths[0]).to.be.closeTo((widths[1]! * 2) / 5, 0.1);
    });

    it('stays well-formed with no per-pod times and with missing figures', () => {
      const svg = renderSvg([{ size: 10, direct: figures({ allRunningSeconds: NaN }), offloaded: figures() }], 't');
      expect(checkXmlWellFormed(svg)).to.equal('svg');
      expect(svg).not.to.contain('<polyline');
      expect(svg).not.to.contain('NaN');
    });
  });
});

describe('offload benchmark report: provider metrics', () => {
  const text = [
    '# HELP admiralty_workqueue_depth Keys waiting in a controller queue.',
    '# TYPE admiralty_workqueue_depth gauge',
    'admiralty_workqueue_depth{controller="summary"} 0',
    'admiralty_workqueue_depth{controller="delegation"} 42',
    'admiralty_workqueue_depth_other{controller="delegation"} 7',
    'admiralty_controller_reconcile_total{controller="delegation",result="success"} 10',
    'admiralty_controller_reconcile_total{result="error",controller="delegation"} 2',
    'admiralty_controller_reconcile_total{controller="a \\"quoted\\" one",result="success"} 1',
    'admiralty_controller_reconcile_total 5',
    'admiralty_workqueue_depth{controller="x"} NaN-ish',
  ].join('\n');

  it('sums the samples of one metric by one label', () => {
    expect(metricByLabel(text, 'admiralty_workqueue_depth', 'controller')).to.deep.equal({ summary: 0, delegation: 42 });
    expect(metricByLabel(text, 'admiralty_controller_reconcile_total', 'controller')).to.deep.equal({ delegation: 12, 'a \\"quoted\\" one': 1, '': 5 });
    expect(metricByLabel('', 'admiralty_workqueue_depth', 'controller')).to.deep.equal({});
  });

  it('renders the non-zero queues, reconciles and webhook connections of each run, largest first', () => {
    const base: RunFigures = {
      allRunningSeconds: 1,
      startLatencyP50Ms: 1,
      startLatencyP99Ms: 1,
      deletionSeconds: 1,
      providerCpuSeconds: 0,
      providerDeletionCpuSeconds: 0,
      providerPeakRssMiB: 1,
      providerRssBeforeMiB: 1,
      providerRestarted: false,
      stages: [],
    };
    const offloaded: RunFigures = {
      ...base,
      startQueues: { peakQueueDepth: { summary: 0, delegation: 3, 'delegate-events': 9 }, reconciles: { delegation: 30 }, webhookConnections: { h2: 2, 'http/1.1': 0 } },
      deletionQueues: { peakQueueDepth: { delegation: 10 }, reconciles: {} },
    };
    expect(renderQueues([{ size: 10, direct: base, offloaded }]).split('\n')).to.deep.equal([
      '10 direct, start: peak queue depth -; reconciles -; webhook connections -',
      '10 direct, deletion: peak queue depth -; reconciles -; webhook connections -',
      '10 offloaded, start: peak queue depth delegate-events 9, delegation 3; reconciles delegation 30; webhook connections h2 2',
      '10 offloaded, deletion: peak queue depth delegation 10; reconciles -; webhook connections -',
    ]);
  });

  it('renders how busy the machine was in each phase, the sandbox CPU in all and its busiest processes first', () => {
    const base: RunFigures = {
      allRunningSeconds: 1,
      startLatencyP50Ms: 1,
      startLatencyP99Ms: 1,
      deletionSeconds: 1,
      providerCpuSeconds: 0,
      providerDeletionCpuSeconds: 0,
      providerPeakRssMiB: 1,
      providerRssBeforeMiB: 1,
      providerRestarted: false,
      stages: [],
    };
    const seven = { a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7 };
    const direct: RunFigures = { ...base, startMachine: { cpuSecondsByProcess: { 'c2-etcd': 2.04, 'c2-kube-apiserver': 10 }, benchCpuSeconds: 1.25, busy: 0.976, cores: 2 } };
    const offloaded: RunFigures = { ...base, deletionMachine: { cpuSecondsByProcess: seven, benchCpuSeconds: 0, busy: 0.5, cores: 2 } };
    expect(renderMachine([{ size: 10, direct, offloaded }]).split('\n')).to.deep.equal([
      '10 direct, start: cores 98 % busy (of 2); sandbox CPU 12.0 s (c2-kube-apiserver 10.0, c2-etcd 2.0); benchmark client 1.3 s',
      '10 offloaded, deletion: cores 50 % busy (of 2); sandbox CPU 28.0 s (g 7.0, f 6.0, e 5.0, d 4.0, c 3.0, b 2.0); benchmark client 0.0 s',
    ]);
  });

  it('puts the floor at the CPU outside the providers over the cores, against the direct run', () => {
    const direct = figures({ allRunningSeconds: 20 });
    const machine = { cpuSecondsByProcess: { 'c1-kube-apiserver': 30, 'c1-provider': 12, 'c1-provider-1': 3, 'c2-provider': 2, 'c2-etcd': 6 }, benchCpuSeconds: 4, busy: 1, cores: 2 };
    const offloaded = figures({ allRunningSeconds: 45, startMachine: machine });
    expect(
      renderCpuFloor([
        { size: 1000, direct, offloaded },
        { size: 5, direct, offloaded: figures() },
      ]),
    ).to.equal('1000 offloaded, CPU floor: 40.0 CPU s outside the providers (theirs 17.0 s) on 2 cores take at least 20.0 s, ratio 1.00 with providers that cost nothing; measured 2.25');
    // A core each: c1's 30 CPU s on its core set the floor; the client is on neither.
    expect(renderCpuFloor([{ size: 1000, direct, offloaded }], true)).to.equal(
      '1000 offloaded, CPU floor: 30.0 CPU s outside the providers (theirs 17.0 s) in c1, the busier cluster, on its 1 of 2 cores take at least 30.0 s, ratio 1.50 with providers that cost nothing; measured 2.25',
    );
  });

  describe('steady rates', () => {
    it('counts what came each second after the first second since the earliest: a burst of 100, then 50 a second, reads 50', () => {
      // 100 at once, then one every 20 ms for 10 s (the first 49 of them inside the first second).
      const times = [...Array.from({ length: 100 }, () => 5), ...Array.from({ length: 500 }, (_, i) => 25 + i * 20)];
      expect(steadyRate(times)).to.be.closeTo(50, 0.5);
      expect(steadyRate([])).to.equal(undefined);
      // Everything inside the first second, or a single time after it: no rate.
      expect(steadyRate([0, 10, 999])).to.equal(undefined);
      expect(steadyRate([0, 1500])).to.equal(undefined);
      expect(steadyRate([undefined, 0, 1000, 3000])).to.equal(1);
    });

    it('renders the rates of every step of both runs, and nothing for a size without its pods', () => {
      const pods = (keys: (keyof PodTimes)[]): PodTimes[] => Array.from({ length: 300 }, (_, i) => Object.fromEntries(keys.map((k) => [k, i * 10])) as PodTimes);
      const directPods = pods(['sent', 'created', 'bound', 'running']);
      const offloadedPods = pods(['sent', 'created', 'delegateCreated', 'delegateBound', 'bound', 'running']);
      expect(
        renderRates([
          { size: 300, direct: figures(), offloaded: figures(), directPods, offloadedPods },
          { size: 5, direct: figures(), offloaded: figures() },
        ]),
      ).to.equal(
        '300 pods, a second after the first second: direct created 100.5, bound 100.5; offloaded: proxies created 100.5, delegates created 100.5, delegates bound 100.5, proxies bound 100.5, proxies Running 100.5',
      );
    });
  });

  describe('goals', () => {
    const machine = { cpuSecondsByProcess: { 'c1-kube-apiserver': 30, 'c1-provider': 10, 'c2-etcd': 6 }, benchCpuSeconds: 4, busy: 1, cores: 2 };

    it('judges each size on the goals it names: the ratio (with the floor) at 1000 and 5000, the CPU from 1000, the p99 everywhere, the RSS at 5000', () => {
      const direct = figures({ allRunningSeconds: 20, startLatencyP99Ms: 10_000 });
      const results: SizeResult[] = [
        { size: 100, direct: figures({ startLatencyP99Ms: 1000 }), offloaded: figures({ startLatencyP99Ms: 1600, providerCpuSeconds: 3 }) },
        { size: 1000, direct, offloaded: figures({ allRunningSeconds: 25, startLatencyP99Ms: 9000, providerCpuSeconds: 8.04, startMachine: machine }) },
        {
          size: 5000,
          direct: figures({ allRunningSeconds: 100, startLatencyP99Ms: 80_000 }),
          offloaded: figures({ allRunningSeconds: 131, startLatencyP99Ms: 12_000, providerCpuSeconds: 41, providerPeakRssMiB: 190 }),
        },
      ];
      expect(renderGoals(results).split('\n')).to.deep.equal([
        // 1.6 over 1.5: the only goal at 100 pods.
        '100 pods, start p99, offloaded over direct: 1.60 (1.6 s against 1.0 s), goal at most 1.5: not met',
        // (30 + 6 + 4) / 2 cores = 20 s: a floor of 1.00 against 20 s direct.
        '1000 pods, offload ratio: 1.25 (25.0 s against 20.0 s), goal at most 1.25: met (the CPU floor of this machine alone: 1.00)',
        "1000 pods, c1's provider CPU while the pods start, per 1000 pods: 8.0 s, goal at most 8 s: met",
        '1000 pods, start p99, offloaded over direct: 0.90 (9.0 s against 10.0 s), goal at most 1.5: met',
        '5000 pods, offload ratio: 1.31 (131.0 s against 100.0 s), goal at most 1.3: not met',
        "5000 pods, c1's provider CPU while the pods start, per 1000 pods: 8.2 s, goal at most 8 s: not met",
        '5000 pods, start p99, offloaded over direct: 0.15 (12.0 s against 80.0 s), goal at most 1.5: met',
        // 190 MiB is 199.2 MB.
        "5000 pods, c1's provider peak RSS with 5000 proxies: 199 MB (190 MiB), goal at most 200 MB: met",
      ]);
      expect(goalVerdicts(results).map((v) => [v.size, v.met])).to.deep.equal([
        [100, false],
        [1000, true],
        [1000, true],
        [1000, true],
        [5000, false],
        [5000, false],
        [5000, true],
        [5000, true],
      ]);
    });

    it("does not judge the provider's CPU or memory in a run where it restarted, and uses the pinned floor when the clusters were pinned", () => {
      const offloaded = figures({ allRunningSeconds: 150, providerRestarted: true, providerCpuSeconds: 1, providerPeakRssMiB: 50, startMachine: machine });
      const verdicts = goalVerdicts([{ size: 5000, direct: figures({ allRunningSeconds: 100 }), offloaded }], true);
      expect(verdicts.map((v) => [v.goal.split(' ')[0], v.met])).to.deep.equal([
        ['offload', false],
        ["c1's", undefined],
        ['start', true],
        ["c1's", undefined],
      ]);
      // Pinned: c1's 30 CPU s on its one core.
      expect(verdicts[0]!.note).to.equal('the CPU floor of this machine alone: 0.30');
      expect(verdicts[1]!.note).to.match(/restarted/);
    });
  });

  it("puts the provider's CPU over what the whole sandbox spent starting the same pods directly, and over what the rest spent alongside it", () => {
    const direct = figures({ startMachine: { cpuSecondsByProcess: { 'c2-kube-apiserver': 12, 'c2-provider': 1.4, 'c2-kwok': 10.6 }, benchCpuSeconds: 6, busy: 0.9, cores: 2 } });
    const offloaded = figures({
      providerCpuSeconds: 9.36,
      startMachine: { cpuSecondsByProcess: { 'c1-provider': 9.36, 'c2-provider': 1.2, 'c1-kube-apiserver': 14, 'c2-kube-apiserver': 12 }, benchCpuSeconds: 7, busy: 1, cores: 2 },
    });
    // Against the direct run, the benchmark client is not the sandbox: 24 s, not 30. Alongside,
    // every process but the providers, the client included: 14 + 12 + 7 = 33 s.
    expect(
      renderProviderCpu([
        { size: 1000, direct, offloaded },
        { size: 5, direct: figures(), offloaded },
        { size: 7, direct, offloaded: figures() },
      ]),
    ).to.equal(
      [
        '1000 offloaded, provider CPU against the direct run: 9.4 s while starting, 0.39 per CPU second the sandbox spent starting the pods directly (24.0 s)',
        '1000 offloaded, provider CPU against the rest of the run: 0.284 per CPU second the other processes spent while the pods started (33.0 s)',
        '5 offloaded, provider CPU against the rest of the run: 0.284 per CPU second the other processes spent while the pods started (33.0 s)',
      ].join('\n'),
    );
  });

  it("reads a process's memory from prom-client's default metrics, heap spaces summing to the heap", async () => {
    const registry = new Registry();
    collectDefaultMetrics({ register: registry });
    const m = memoryFigures(await registry.metrics())!;
    expect(m.rssMiB).to.be.greaterThan(m.heapUsedMiB);
    expect(m.heapTotalMiB).to.be.at.least(m.heapUsedMiB);
    expect(m.heapUsedMiB).to.be.greaterThan(1);
    expect(m.externalMiB).to.be.greaterThan(0);
    expect(m.spacesMiB).to.include.keys('new', 'old', 'code');
    const spaces = Object.values(m.spacesMiB).reduce((a, b) => a + b, 0);
    expect(spaces).to.be.closeTo(m.heapTotalMiB, 0.01 * m.heapTotalMiB);
    expect(memoryFigures('nodejs_heap_size_total_bytes 1')).to.equal(undefined);
  });

  it('renders the memory at the highest sampled RSS: heap, its largest spaces, external and the rest', () => {
    const memory = { rssMiB: 200, heapTotalMiB: 150, heapUsedMiB: 110.4, externalMiB: 10, spacesMiB: { old: 100, new: 32, code: 6, large_object: 11.7, read_only: 0.3 } };
    expect(renderMemory([{ size: 1000, direct: figures(), offloaded: figures({ providerMemoryAtPeak: memory }) }])).to.equal(
      '1000 offloaded, provider memory at its highest sampled RSS: 200 MiB = V8 heap 150 (110 used; old 100, new 32, large_object 12, code 6) + external 10 + the rest 40',
    );
  });

  describe('apiserver requests', () => {
    const scrape = (create: number, status: number) =>
      [
        '# HELP apiserver_request_total Counter of apiserver requests',
        '# TYPE apiserver_request_total counter',
        `apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} ${create}`,
        `apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 1`,
        `apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} ${status}`,
        'apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="",scope="",subresource="/metrics",verb="GET",version=""} 3',
        'apiserver_request_total{code="200",component="apiserver",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 4',
        'apiserver_request_duration_seconds_count{resource="pods",subresource="",verb="POST"} 99',
      ].join('\n');

    it('sums a metric by several labels, a missing label counting as empty', () => {
      const text = 'm{a="x",b="y"} 1\nm{b="y",a="x"} 2\nm{a="x"} 4\nother{a="x",b="y"} 8';
      expect(metricByLabels(text, 'm', ['a', 'b'], (v) => v.join('|'))).to.deep.equal({ 'x|y': 3, 'x|': 4 });
    });

    it('counts requests by verb, resource and subresource, every response code together', () => {
      expect(requestsByKind(scrape(10, 20))).to.deep.equal({ 'POST pods': 11, 'PATCH pods/status': 20, 'GET /metrics': 3, 'WATCH pods': 4 });
    });

    it('takes the difference of two scrapes, leaving out what did not move', () => {
      expect(counterDelta(requestsByKind(scrape(10, 20)), requestsByKind(scrape(30, 20)))).to.deep.equal({ 'POST pods': 20 });
      expect(counterDelta({}, { 'POST pods': 2 })).to.deep.equal({ 'POST pods': 2 });
    });

    it('tells writes from reads', () => {
      expect(['POST pods', 'PATCH pods/status', 'PUT pods/status', 'APPLY pods', 'DELETE pods', 'DELETECOLLECTION pods'].every(isWrite)).to.equal(true);
      expect(['GET pods', 'LIST pods', 'WATCH pods', 'GET /metrics'].some(isWrite)).to.equal(false);
    });

    it('renders requests and writes per pod by cluster, the busiest kinds first', () => {
      const direct = figures({ startRequests: { c2: { 'POST pods': 10, 'PUT leases': 0, 'GET pods': 5, 'POST pods/binding': 10 } } });
      const offloaded = figures({ startRequests: { c2: { 'POST pods': 10 }, c1: { 'POST pods': 10, 'PATCH pods/status': 30, 'LIST nodes': 1 } }, deletionRequests: { c1: {} } });
      expect(renderRequests([{ size: 10, direct, offloaded }], 2).split('\n')).to.deep.equal([
        '10 direct, start, c2: 2.50 requests a pod, 2.00 writes (POST pods 1.00, POST pods/binding 1.00)',
        '10 offloaded, start, c1: 4.10 requests a pod, 4.00 writes (PATCH pods/status 3.00, POST pods 1.00)',
        '10 offloaded, start, c2: 1.00 requests a pod, 1.00 writes (POST pods 1.00)',
        '10 offloaded, deletion, c1: 0.00 requests a pod, 0.00 writes (-)',
      ]);
    });

    it('counts the watches an apiserver closed for falling behind, by resource, and renders them after the requests', () => {
      const text = [
        '# TYPE apiserver_terminated_watchers_total counter',
        'apiserver_terminated_watchers_total{group="",resource="pods"} 92',
        'apiserver_terminated_watchers_total{group="",resource="events"} 3',
        'apiserver_request_total{code="200",resource="pods",subresource="",verb="WATCH"} 4',
      ].join('\n');
      expect(watchesClosed(text)).to.deep.equal({ pods: 92, events: 3 });
      const offloaded = figures({ startRequests: { c1: { 'POST pods': 10 }, c2: { 'POST pods': 10 } }, startWatchesClosed: { c1: counterDelta({ pods: 2 }, watchesClosed(text)), c2: {} } });
      expect(renderRequests([{ size: 10, direct: figures(), offloaded }], 1).split('\n')).to.deep.equal([
        '10 offloaded, start, c1: 1.00 requests a pod, 1.00 writes (POST pods 1.00); watches closed for falling behind: pods 90, events 3',
        '10 offloaded, start, c2: 1.00 requests a pod, 1.00 writes (POST pods 1.00)',
      ]);
    });

    it('counts the watch events an apiserver sent and their bytes, by resource, and renders the three most per pod', () => {
      const text = [
        '# TYPE apiserver_watch_events_total counter',
        'apiserver_watch_events_total{group="",resource="pods",version="v1"} 530',
        'apiserver_watch_events_total{group="",resource="events",version="v1"} 10',
        'apiserver_watch_events_total{group="coordination.k8s.io",resource="leases",version="v1"} 20',
        'apiserver_watch_events_total{group="",resource="nodes",version="v1"} 4',
        'apiserver_watch_events_sizes_sum{group="",resource="pods",version="v1"} 1.048576e+06',
        'apiserver_watch_events_sizes_sum{group="",resource="events",version="v1"} 10240',
        'apiserver_watch_events_sizes_sum{group="coordination.k8s.io",resource="leases",version="v1"} 5120',
      ].join('\n');
      const { watchEvents, watchBytes } = watchEventsSent(text);
      expect(watchEvents).to.deep.equal({ pods: 530, events: 10, leases: 20, nodes: 4 });
      expect(watchBytes).to.deep.equal({ pods: 1048576, events: 10240, leases: 5120 });
      const offloaded = figures({
        startRequests: { c1: { 'POST pods': 10 } },
        startWatchEvents: { c1: counterDelta({ pods: 30 }, watchEvents) },
        startWatchBytes: { c1: watchBytes },
        startWatchesClosed: { c1: { pods: 2 } },
      });
      expect(renderRequests([{ size: 10, direct: figures(), offloaded }], 1).split('\n')).to.deep.equal([
        '10 offloaded, start, c1: 1.00 requests a pod, 1.00 writes (POST pods 1.00); watch events sent a pod: pods 50.00 (102.4 KiB), leases 2.00 (0.5 KiB), events 1.00 (1.0 KiB); watches closed for falling behind: pods 2',
      ]);
    });
  });
});
