/**
 * The pure half of the scale benchmark (scale.ts): its arguments, how pods are spread over the
 * targets, the figures of one size and how they are printed and plotted. No I/O.
 */
import type { StageFigure } from './offload-report.js';

export interface ScaleArgs {
  /** The numbers of namespaced Targets to measure, one size after another. */
  targets: number[];
  /** The pods of each run, spread evenly over the targets. */
  pods: number;
  concurrency: number;
  /** How long the idle cost of the targets is measured, once they are all Ready. */
  idleSeconds: number;
  outDir: string;
}

export const SCALE_USAGE = '[--targets 10,50,100] [--pods 10000] [--concurrency 20] [--idle-seconds 30] [--out .bench]';

const DEFAULTS: ScaleArgs = { targets: [10, 50, 100], pods: 10_000, concurrency: 20, idleSeconds: 30, outDir: '.bench' };

/** At most this many targets: each is a namespace in both clusters and a virtual node in c1. */
export const MAX_TARGETS = 500;

/** Parses `scale`'s arguments; throws with a message that names the bad one. */
export function parseScaleArgs(argv: readonly string[]): ScaleArgs {
  const out: ScaleArgs = { ...DEFAULTS, targets: [...DEFAULTS.targets] };
  const whole = (flag: string, v: string | undefined, min: number, max: number): number => {
    const n = Number(v);
    if (v === undefined || !Number.isInteger(n) || n < min || n > max) throw new Error(`${flag} takes a whole number from ${min} to ${max}, got ${v ?? 'nothing'}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = argv[i + 1];
    switch (flag) {
      case '--targets':
        if (value === undefined || value === '') throw new Error('--targets takes a comma-separated list, e.g. 10,50,100');
        out.targets = value.split(',').map((v) => whole('--targets', v.trim(), 1, MAX_TARGETS));
        i++;
        break;
      case '--pods':
        out.pods = whole('--pods', value, 1, 50_000);
        i++;
        break;
      case '--concurrency':
        out.concurrency = whole('--concurrency', value, 1, 200);
        i++;
        break;
      case '--idle-seconds':
        out.idleSeconds = whole('--idle-seconds', value, 5, 600);
        i++;
        break;
      case '--out':
        if (!value) throw new Error('--out takes a directory');
        out.outDir = value;
        i++;
        break;
      default:
        throw new Error(`unknown argument ${flag}`);
    }
  }
  return out;
}

/** `pods` spread over `targets` as evenly as whole numbers allow, the first ones taking one more. */
export function podsPerTarget(pods: number, targets: number): number[] {
  const base = Math.floor(pods / targets);
  const extra = pods % targets;
  return Array.from({ length: targets }, (_, i) => base + (i < extra ? 1 : 0));
}

/** The c1 provider and both apiservers while the targets are Ready and nothing runs. */
export interface IdleFigures {
  seconds: number;
  providerRssMiB: number;
  providerCpuSeconds: number;
  /** Requests a second each apiserver served (every client counted), by cluster. */
  requestsPerSecond: Record<string, number>;
}

/** One run of a size: the pods created directly in c2, or offloaded from c1. */
export interface ScaleRun {
  allRunningSeconds: number;
  deletionSeconds: number;
  startLatencyP50Ms: number;
  startLatencyP99Ms: number;
  providerCpuSeconds: number;
  providerPeakRssMiB: number;
  /** Requests each apiserver served per pod while the pods started, by cluster. */
  requestsPerPod: Record<string, number>;
  /** Offloaded: proxies bound a second once the first second's burst is over (the proxy scheduler's pace). */
  proxiesBoundPerSecond?: number;
  /** Offloaded: the summed durations of the proxy scheduler's extender requests, by verb (they overlap; a bind includes the wait for the target). */
  extenderSeconds?: Record<string, number>;
  /** Offloaded: where the time of a pod's way goes (see the offload benchmark's stages). */
  stages?: StageFigure[];
}

export interface ScaleResult {
  targets: number;
  pods: number;
  /** How long connecting the targets took, to all Ready. */
  connectSeconds: number;
  idle: IdleFigures;
  direct: ScaleRun;
  offloaded: ScaleRun;
}

const sum = (r: Record<string, number>): number => Object.values(r).reduce((a, b) => a + b, 0);
const f1 = (n: number | undefined): string => (n === undefined || !Number.isFinite(n) ? '-' : n.toFixed(1));
const f2 = (n: number | undefined): string => (n === undefined || !Number.isFinite(n) ? '-' : n.toFixed(2));

/** The offloaded run's time to all Running over the direct one's. */
export const ratioOf = (r: ScaleResult): number => r.offloaded.allRunningSeconds / r.direct.allRunningSeconds;

/**
 * What one more idle target costs: the growth of the provider's RSS, of both apiservers'
 * requests a second and of the provider's CPU (ms a second) from the baseline (no benchmark
 * target) to this size, per target.
 */
export function idleCostPerTarget(baseline: IdleFigures, r: ScaleResult): { rssMiB: number; requestsPerSecond: number; cpuMsPerSecond: number } {
  return {
    rssMiB: (r.idle.providerRssMiB - baseline.providerRssMiB) / r.targets,
    requestsPerSecond: (sum(r.idle.requestsPerSecond) - sum(baseline.requestsPerSecond)) / r.targets,
    cpuMsPerSecond: ((r.idle.providerCpuSeconds / r.idle.seconds - baseline.providerCpuSeconds / baseline.seconds) * 1000) / r.targets,
  };
}

/** Provider CPU seconds per 1000 pods while the offloaded pods started. */
export const cpuPer1000 = (r: ScaleResult): number => (r.offloaded.providerCpuSeconds * 1000) / r.pods;

/**
 * {@link cpuPer1000} without what the provider spends idle at this size over the same time (the
 * targets' probes, virtual nodes and Leases): what the pods themselves cost. At 100 targets
 * the idle part was most of the difference from one target.
 */
export const cpuPer1000NetOfIdle = (r: ScaleResult): number => ((r.offloaded.providerCpuSeconds - (r.idle.providerCpuSeconds / r.idle.seconds) * r.offloaded.allRunningSeconds) * 1000) / r.pods;

/** The one line per size that scripts read. */
export function scaleSummaryLine(r: ScaleResult): string {
  return `scale ${r.targets} targets, ${r.pods} pods: direct ${f1(r.direct.allRunningSeconds)} s, offloaded ${f1(r.offloaded.allRunningSeconds)} s, ratio ${f2(ratioOf(r))}`;
}

export const SCALE_SUMMARY_PATTERN = /^scale (\d+) targets, (\d+) pods: direct (\d+\.\d) s, offloaded (\d+\.\d) s, ratio (\d+\.\d\d)$/;

/** One row per size: the times, the provider's cost, the idle cost per target. */
export function renderScaleTable(baseline: IdleFigures, results: readonly ScaleResult[]): string {
  const head = [
    'targets',
    'pods',
    'direct s',
    'offloaded s',
    'ratio',
    'p99 start direct/offl. s',
    'deletion direct/offl. s',
    'provider CPU s (per 1000; net of idle)',
    'peak RSS MiB',
    'idle RSS MiB',
    'idle cost/target MiB, req/s, CPU ms/s',
    'req/pod c1, c2',
    'proxies bound/s',
  ];
  const rows = results.map((r) => {
    const idle = idleCostPerTarget(baseline, r);
    return [
      String(r.targets),
      String(r.pods),
      f1(r.direct.allRunningSeconds),
      f1(r.offloaded.allRunningSeconds),
      f2(ratioOf(r)),
      `${f1(r.direct.startLatencyP99Ms / 1000)} / ${f1(r.offloaded.startLatencyP99Ms / 1000)}`,
      `${f1(r.direct.deletionSeconds)} / ${f1(r.offloaded.deletionSeconds)}`,
      `${f1(r.offloaded.providerCpuSeconds)} (${f1(cpuPer1000(r))}; ${f1(cpuPer1000NetOfIdle(r))})`,
      f1(r.offloaded.providerPeakRssMiB),
      f1(r.idle.providerRssMiB),
      `${f2(idle.rssMiB)}, ${f2(idle.requestsPerSecond)}, ${f2(idle.cpuMsPerSecond)}`,
      `${f2(r.offloaded.requestsPerPod.c1)}, ${f2(r.offloaded.requestsPerPod.c2)}`,
      f1(r.offloaded.proxiesBoundPerSecond),
    ];
  });
  const all = [head, ...rows];
  const widths = head.map((_, i) => Math.max(...all.map((row) => row[i]!.length)));
  const line = (row: string[]) =>
    row
      .map((c, i) => c.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  const baselineLine = `baseline, no benchmark target: provider RSS ${f1(baseline.providerRssMiB)} MiB, ${f2(sum(baseline.requestsPerSecond))} apiserver requests/s (${Object.entries(
    baseline.requestsPerSecond,
  )
    .map(([c, n]) => `${c} ${f2(n)}`)
    .join(', ')})`;
  return [baselineLine, line(head), ...rows.map(line)].join('\n');
}

/** Where the time of an offloaded pod goes, per size: each stage's p50/p99 in seconds. */
export function renderScaleStages(results: readonly ScaleResult[]): string {
  return results
    .map((r) => {
      const stages = (r.offloaded.stages ?? []).map((s) => `${s.name} ${f1(s.p50Ms / 1000)}/${f1(s.p99Ms / 1000)}`).join('; ');
      const extender = r.offloaded.extenderSeconds
        ? Object.entries(r.offloaded.extenderSeconds)
            .map(([verb, s]) => `${verb || 'all'} ${f1(s)} s`)
            .join(', ')
        : '-';
      return `${r.targets} targets: ${stages || '-'}; extender requests' summed durations ${extender} (concurrent requests overlap; a bind waits for the target to place the delegate), provider CPU ${f1(r.offloaded.providerCpuSeconds)} s`;
    })
    .join('\n');
}

/** A goal of the scale issue, judged on one size; printed, never asserted. */
export interface ScaleGoal {
  goal: string;
  value: number;
  limit: number;
  met: boolean;
}

/**
 * The goals for one replica, judged at the largest size measured (they are set for 100 targets
 * and 10,000 pods: a smaller size says so in the line): offload/direct at most 1.5, provider RSS
 * at most 400 MiB, provider CPU at most 8 s per 1000 pods, and an idle target at most 1 MiB of
 * RSS and 1 apiserver request a second.
 */
export function scaleGoals(baseline: IdleFigures, results: readonly ScaleResult[]): { at: string; goals: ScaleGoal[] } | undefined {
  const r = [...results].sort((a, b) => a.targets * a.pods - b.targets * b.pods).at(-1);
  if (!r) return undefined;
  const idle = idleCostPerTarget(baseline, r);
  const goal = (name: string, value: number, limit: number): ScaleGoal => ({ goal: name, value, limit, met: value <= limit });
  return {
    at: `${r.targets} targets, ${r.pods} pods${r.targets >= 100 && r.pods >= 10_000 ? '' : ' (the goals are set for 100 targets and 10000 pods)'}`,
    goals: [
      goal('offload/direct', ratioOf(r), 1.5),
      goal('provider peak RSS, MiB', r.offloaded.providerPeakRssMiB, 400),
      goal('provider CPU per 1000 pods, s', cpuPer1000(r), 8),
      goal('RSS per idle target, MiB', idle.rssMiB, 1),
      goal('apiserver requests/s per idle target', idle.requestsPerSecond, 1),
    ],
  };
}

export function renderScaleGoals(baseline: IdleFigures, results: readonly ScaleResult[]): string {
  const judged = scaleGoals(baseline, results);
  if (!judged) return '';
  return judged.goals.map((g) => `${judged.at}, ${g.goal}: ${f2(g.value)}, goal at most ${g.limit}: ${g.met ? 'met' : 'not met'}`).join('\n');
}

/**
 * A plot of cost against targets: the offload ratio, the provider's peak RSS (MiB/100) and its
 * CPU per 1000 pods (s), one polyline each over the sizes in the order of their target counts.
 */
export function renderScaleSvg(results: readonly ScaleResult[], title: string): string {
  const width = 640;
  const height = 360;
  const pad = 48;
  const sorted = [...results].sort((a, b) => a.targets - b.targets);
  const series: { name: string; color: string; value: (r: ScaleResult) => number }[] = [
    { name: 'offload/direct', color: '#1f77b4', value: ratioOf },
    { name: 'peak RSS (MiB/100)', color: '#d62728', value: (r) => r.offloaded.providerPeakRssMiB / 100 },
    { name: 'provider CPU s per 1000 pods', color: '#2ca02c', value: cpuPer1000 },
  ];
  const maxX = Math.max(1, ...sorted.map((r) => r.targets));
  const values = sorted.flatMap((r) => series.map((s) => s.value(r))).filter(Number.isFinite);
  const maxY = Math.max(1, ...values) * 1.1;
  const x = (t: number) => pad + ((width - 2 * pad) * t) / maxX;
  const y = (v: number) => height - pad - ((height - 2 * pad) * v) / maxY;
  const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const lines = series.map((s, i) => {
    const points = sorted
      .filter((r) => Number.isFinite(s.value(r)))
      .map((r) => `${x(r.targets).toFixed(1)},${y(s.value(r)).toFixed(1)}`)
      .join(' ');
    return `<polyline fill="none" stroke="${s.color}" stroke-width="2" points="${points}"/><text x="${pad + 8}" y="${pad + 16 * (i + 1)}" fill="${s.color}" font-size="12">${esc(s.name)}</text>`;
  });
  const ticks = sorted.map((r) => `<text x="${x(r.targets).toFixed(1)}" y="${height - pad + 16}" font-size="11" text-anchor="middle">${r.targets}</text>`);
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif">`,
    `<text x="${width / 2}" y="20" font-size="14" text-anchor="middle">${esc(title)}</text>`,
    `<line x1="${pad}" y1="${height - pad}" x2="${width - pad}" y2="${height - pad}" stroke="#000"/>`,
    `<line x1="${pad}" y1="${pad}" x2="${pad}" y2="${height - pad}" stroke="#000"/>`,
    `<text x="${width / 2}" y="${height - 8}" font-size="12" text-anchor="middle">targets</text>`,
    ...ticks,
    ...lines,
    '</svg>',
  ].join('\n');
}
