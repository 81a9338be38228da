/**
 * The project's performance goals (README, Performance) and how a benchmark prints its verdict on
 * one of them. Pure: the benchmarks print these lines, no test asserts them (a run's times move
 * with the machine's load; see "The CPU floor" in the README).
 */

/** What the offload benchmark's runs are held to, each at the sizes it names. */
export const OFFLOAD_GOALS = {
  /** Offloaded time over the direct time, like for like, by pod count: only at the sizes named. */
  ratioBySize: { 1000: 1.25, 5000: 1.3 } as Readonly<Record<number, number>>,
  /**
   * c1's provider's CPU seconds while the pods start, per 1000 offloaded pods; judged from 1000
   * pods up, since a smaller run is mostly the provider's fixed costs (its probes, its leases).
   */
  providerCpuSecondsPer1000: 8,
  providerCpuFromSize: 1000,
  /** The offloaded pods' p99 start latency over the direct pods', at every size. */
  p99Factor: 1.5,
  /** c1's provider's peak RSS, in MB (10^6 bytes, the stricter reading of "MB"), with this many proxies. */
  peakRssMB: 200,
  peakRssAtSize: 5000,
} as const;

/** The shipped provider's RSS once started and idle, in MB (10^6 bytes): judged by `idle-rss`. */
export const IDLE_RSS_GOAL_MB = 120;

/** Bytes in a MiB over bytes in a MB. */
const MB_PER_MIB = (1024 * 1024) / 1e6;

/** A size in MiB, in MB (10^6 bytes). */
export function mibToMB(mib: number): number {
  return mib * MB_PER_MIB;
}

/** One goal judged on one run: the figure as printed, its limit, and whether it is met. */
export interface GoalVerdict {
  /** The run's pod count, for the goals of the offload benchmark. */
  size?: number;
  goal: string;
  /** The figure as printed, with its unit and what it was computed from. */
  measured: string;
  /** The limit as printed, with its unit. */
  limitText: string;
  /** undefined: not judged (`note` says why). */
  met: boolean | undefined;
  note?: string;
}

/**
 * Whether `value` is at most `limit`, judged on `value` rounded to the `digits` it is printed
 * with, so that a printed 1.25 against a goal of 1.25 reads as met. undefined for a value that is
 * not a finite number.
 */
export function atMost(value: number, limit: number, digits: number): boolean | undefined {
  if (!Number.isFinite(value)) return undefined;
  return Number(value.toFixed(digits)) <= limit;
}

/** One verdict as a line: `1000 pods, offload ratio: 1.44, goal at most 1.25: not met (...)`. */
export function renderGoal(v: GoalVerdict): string {
  const verdict = v.met === undefined ? 'not judged' : v.met ? 'met' : 'not met';
  return `${v.size === undefined ? '' : `${v.size} pods, `}${v.goal}: ${v.measured}, goal at most ${v.limitText}: ${verdict}${v.note ? ` (${v.note})` : ''}`;
}
