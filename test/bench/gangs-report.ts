/**
 * The pure half of the gang benchmark (gangs.ts): its arguments, the accounting of partial
 * groups from the events a run sees, and how the figures are printed. No I/O.
 */

/** How a benchmark pod's work ends once it runs (the benchmark ends it; kwok would end it at once). */
export type WorkModel = 'rendezvous' | 'independent';

export interface GangsArgs {
  jobs: number;
  /** Pods of each Job, and the `minCount` of its PodGroup in the gang run. */
  pods: number;
  /** Pods of one job's size (1 cpu each) that each target has room for at a time. */
  room: number;
  /** How long a pod works once it may (see {@link WorkModel}), in seconds. */
  holdSeconds: number;
  work: WorkModel;
  /** A run with jobs left and no pod bound, Running or finished for this long is stalled: it stops there. */
  stallSeconds: number;
  outDir: string;
}

export const GANGS_USAGE = '[--jobs 50] [--pods 8] [--room 16] [--hold-seconds 5] [--work rendezvous|independent] [--stall-seconds 60] [--out .bench]';

const DEFAULTS: GangsArgs = { jobs: 50, pods: 8, room: 16, holdSeconds: 5, work: 'rendezvous', stallSeconds: 60, outDir: '.bench' };

/** Parses `gangs`'s arguments; throws with a message that names the bad one. */
export function parseGangsArgs(argv: readonly string[]): GangsArgs {
  const out: GangsArgs = { ...DEFAULTS };
  const whole = (flag: string, v: string | undefined, min: number, max: number): number => {
    const n = Number(v);
    if (v === undefined || !Number.isInteger(n) || n < min || n > max) throw new Error(`${flag} takes a whole number from ${min} to ${max}, got ${v ?? 'nothing'}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = argv[i + 1];
    i++;
    switch (flag) {
      case '--jobs':
        out.jobs = whole(flag, value, 1, 500);
        break;
      case '--pods':
        out.pods = whole(flag, value, 1, 64);
        break;
      case '--room':
        out.room = whole(flag, value, 1, 256);
        break;
      case '--hold-seconds':
        out.holdSeconds = whole(flag, value, 0, 600);
        break;
      case '--stall-seconds':
        out.stallSeconds = whole(flag, value, 10, 3600);
        break;
      case '--work':
        if (value !== 'rendezvous' && value !== 'independent') throw new Error(`--work takes rendezvous or independent, got ${value ?? 'nothing'}`);
        out.work = value;
        break;
      case '--out':
        if (!value) throw new Error('--out takes a directory');
        out.outDir = value;
        break;
      default:
        throw new Error(`unknown argument ${flag}`);
    }
  }
  if (out.room < out.pods) throw new Error(`--room ${out.room} is less than one job (--pods ${out.pods}): a gang kept whole would fit in the two targets only by spanning them`);
  return out;
}

/**
 * How long a job must stay partial to count: kube-scheduler lets a gang's pods through Permit
 * together, then binds each in a binding cycle of its own, and the bindings (and kwok's Running)
 * land tens of milliseconds apart (up to 0.2 s measured on a loaded 2-core machine). A group
 * half run stays so until room frees, seconds at least.
 */
export const PARTIAL_GRACE_MS = 1000;

/** What a watch showed of one pod of a job: its proxy bound to a virtual node, its delegate Running, its proxy finished. */
export type GangEventKind = 'bound' | 'running' | 'finished';

export interface GangEvent {
  /** When it was seen, in ms since the run's first request. */
  atMs: number;
  job: string;
  /** The proxy's name. */
  pod: string;
  kind: GangEventKind;
}

interface JobState {
  bound: Set<string>;
  running: Set<string>;
  finished: Set<string>;
  /** When the job last became partial, while it is. */
  partialSinceMs?: number;
  /** The first moment it was partial: how many of its pods were Running and bound then. */
  firstPartial?: PartialMoment;
  /** The pods Running during the open partial spell. */
  spellPods: Set<string>;
  longestPartialMs: number;
}

/** A moment a job was partial, for the reader to judge: a gap of milliseconds or a group half run. */
export interface PartialMoment {
  job: string;
  atMs: number;
  running: number;
  bound: number;
}

/** The partial-group figures of one run. */
export interface PartialFigures {
  /** Pods that were Running while fewer than `minCount` pods of their job were bound, for longer than the grace. */
  podsInPartialGroups: number;
  /** Jobs that were partial for longer than the grace. */
  jobsEverPartial: number;
  /** The same at any moment, however short: the bindings of one placement land tens of ms apart. */
  podsInPartialGroupsAnyMoment: number;
  /** The longest one job stayed partial, in ms (0 when none was). */
  longestPartialMs: number;
  /** The most cpu (millicores) requested at once by bound, unfinished pods of jobs with fewer than `minCount` bound. */
  peakHeldMilli: number;
  /** That room over time: millicore-seconds / 1000, i.e. cpu seconds held by partial groups. */
  heldCpuSeconds: number;
  /** Jobs whose every pod finished, and the latest of those moments (ms since the run's start; NaN when none did). */
  jobsComplete: number;
  lastCompleteMs: number;
  /** The first partial moment of up to five jobs, earliest first. */
  firstPartialMoments: PartialMoment[];
}

/**
 * The accounting of partial groups over one run, fed the events in the order seen.
 *
 * A job is **partial** at a moment when at least one of its pods is Running (and not finished)
 * while fewer than `minCount` of its pods have ever been bound: some work started while the
 * rest of the group has no place. Every pod Running during a partial spell of its job that
 * lasted longer than the grace counts once in `podsInPartialGroups`; any spell, however short,
 * in `podsInPartialGroupsAnyMoment`. The **room held** at a moment is the cpu requested by the bound,
 * unfinished pods of jobs with fewer than `minCount` bound: room that no other job may use and
 * that, for a job that needs its whole group, does no work. A Running pod is bound even when its
 * binding is seen later (the watches of two clusters race); events are idempotent.
 */
export class PartialGroups {
  private readonly jobs = new Map<string, JobState>();
  private readonly partialPods = new Set<string>();
  private readonly partialPodsAnyMoment = new Set<string>();
  private heldMilli = 0;
  private peakHeldMilli = 0;
  private heldMilliMs = 0;
  private lastMs = 0;
  private jobsComplete = 0;
  private lastCompleteMs = NaN;

  /** `graceMs`: how long a job must stay partial for its pods to count (see {@link PARTIAL_GRACE_MS}). */
  constructor(
    private readonly minCount: number,
    private readonly milliPerPod: number,
    private readonly graceMs = PARTIAL_GRACE_MS,
  ) {}

  record(e: GangEvent): void {
    this.heldMilliMs += this.heldMilli * Math.max(0, e.atMs - this.lastMs);
    this.lastMs = Math.max(this.lastMs, e.atMs);
    const job = this.jobOf(e.job);
    const before = this.heldBy(job);
    if (!job.finished.has(e.pod)) {
      job.bound.add(e.pod);
      if (e.kind === 'running') job.running.add(e.pod);
      if (e.kind === 'finished') {
        job.finished.add(e.pod);
        job.running.delete(e.pod);
        if (job.finished.size === this.minCount) {
          this.jobsComplete++;
          this.lastCompleteMs = e.atMs;
        }
      }
    }
    this.heldMilli += this.heldBy(job) - before;
    this.peakHeldMilli = Math.max(this.peakHeldMilli, this.heldMilli);
    const partial = job.running.size > 0 && job.bound.size < this.minCount;
    if (partial) {
      for (const p of job.running) job.spellPods.add(p);
      job.partialSinceMs ??= e.atMs;
      job.firstPartial ??= { job: e.job, atMs: e.atMs, running: job.running.size, bound: job.bound.size };
    } else if (job.partialSinceMs !== undefined) {
      this.closeSpell(e.job, job, e.atMs);
    }
  }

  /** Ends a job's partial spell at `atMs`: its pods count, and count past the grace when it lasted longer. */
  private closeSpell(name: string, job: JobState, atMs: number, into = { any: this.partialPodsAnyMoment, graced: this.partialPods }): number {
    const lasted = atMs - (job.partialSinceMs ?? atMs);
    for (const p of job.spellPods) {
      into.any.add(`${name}/${p}`);
      if (lasted > this.graceMs) into.graced.add(`${name}/${p}`);
    }
    if (into.graced === this.partialPods) {
      job.longestPartialMs = Math.max(job.longestPartialMs, lasted);
      job.partialSinceMs = undefined;
      job.spellPods = new Set();
    }
    return lasted;
  }

  /** The figures so far; `nowMs` closes the partial spells and the held room still open. */
  figures(nowMs = this.lastMs): PartialFigures {
    const jobs = [...this.jobs.entries()];
    // Spells still open count as if they ended now, without ending them.
    const any = new Set(this.partialPodsAnyMoment);
    const graced = new Set(this.partialPods);
    let longest = 0;
    for (const [name, j] of jobs) {
      longest = Math.max(longest, j.longestPartialMs);
      if (j.partialSinceMs !== undefined) longest = Math.max(longest, this.closeSpell(name, j, nowMs, { any, graced }));
    }
    const heldMilliMs = this.heldMilliMs + this.heldMilli * Math.max(0, nowMs - this.lastMs);
    return {
      podsInPartialGroups: graced.size,
      jobsEverPartial: new Set([...graced].map((k) => k.slice(0, k.lastIndexOf('/')))).size,
      podsInPartialGroupsAnyMoment: any.size,
      longestPartialMs: longest,
      peakHeldMilli: this.peakHeldMilli,
      heldCpuSeconds: heldMilliMs / 1e6,
      jobsComplete: this.jobsComplete,
      lastCompleteMs: this.lastCompleteMs,
      firstPartialMoments: jobs
        .flatMap(([, j]) => (j.firstPartial ? [j.firstPartial] : []))
        .sort((a, b) => a.atMs - b.atMs)
        .slice(0, 5),
    };
  }

  /** The pods of a job Running now (not finished), for the benchmark's work model. */
  runningOf(job: string): ReadonlySet<string> {
    return this.jobOf(job).running;
  }

  private jobOf(name: string): JobState {
    let job = this.jobs.get(name);
    if (!job) this.jobs.set(name, (job = { bound: new Set(), running: new Set(), finished: new Set(), longestPartialMs: 0, spellPods: new Set() }));
    return job;
  }

  /** Millicores held by a job's bound, unfinished pods while fewer than minCount are bound. */
  private heldBy(job: JobState): number {
    if (job.bound.size >= this.minCount) return 0;
    let n = 0;
    for (const p of job.bound) if (!job.finished.has(p)) n++;
    return n * this.milliPerPod;
  }
}

/** One run of the benchmark: the same jobs, as gangs or one pod at a time. */
export interface GangsRun {
  mode: 'gangs' | 'one by one';
  jobs: number;
  pods: number;
  /** First request to the last pod finished, in seconds; undefined when the run stalled. */
  allCompleteSeconds?: number;
  /** When the run stalled (seconds since its start), with jobs left. */
  stalledAtSeconds?: number;
  partial: PartialFigures;
  /** Where the proxies ran: pods by virtual node, over the run. */
  podsByNode: Record<string, number>;
  /** The first events of each job in `partial.firstPartialMoments`, with where each was seen (virtual node, or cluster/node of a delegate). */
  partialTraces: { job: string; events: (GangEvent & { where: string })[] }[];
}

const seconds = (s: number | undefined) => (s === undefined || Number.isNaN(s) ? '-' : `${s.toFixed(1)} s`);

/** The table: one row per run. */
export function renderGangsTable(runs: readonly GangsRun[]): string {
  const header = [
    'mode',
    'jobs',
    'pods',
    'time to all complete',
    'jobs complete',
    `pods ever in a partial group (> ${PARTIAL_GRACE_MS / 1000} s)`,
    'jobs ever partial',
    'at any moment',
    'longest partial',
    'peak cpu held by partial groups',
    'cpu-seconds held',
  ];
  const rows = runs.map((r) => [
    r.mode,
    String(r.jobs),
    String(r.pods),
    r.allCompleteSeconds !== undefined ? seconds(r.allCompleteSeconds) : `stalled at ${seconds(r.stalledAtSeconds)}`,
    `${r.partial.jobsComplete}/${r.jobs}`,
    String(r.partial.podsInPartialGroups),
    String(r.partial.jobsEverPartial),
    String(r.partial.podsInPartialGroupsAnyMoment),
    seconds(r.partial.longestPartialMs / 1000),
    `${(r.partial.peakHeldMilli / 1000).toFixed(0)} cpu`,
    r.partial.heldCpuSeconds.toFixed(0),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i < 1 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(header), ...rows.map(line)].join('\n');
}

/** The one line for scripts: `gangs 50 jobs x 8 pods: 0 pods in partial groups with gangs, 37 one by one; all complete 80.1 s, stalled`. */
export function gangsSummaryLine(gangs: GangsRun, single: GangsRun): string {
  const time = (r: GangsRun) => (r.allCompleteSeconds !== undefined ? seconds(r.allCompleteSeconds) : `stalled at ${seconds(r.stalledAtSeconds)}`);
  return `gangs ${gangs.jobs} jobs x ${gangs.pods} pods: ${gangs.partial.podsInPartialGroups} pods in partial groups with gangs, ${single.partial.podsInPartialGroups} one by one; all complete ${time(gangs)} with gangs, ${time(single)} one by one`;
}
