import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { Sandbox } from '../sandbox/sandbox.js';

/** CPU seconds (user + system) used so far by a process, from /proc. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return ticks / 100; // USER_HZ is 100 on Linux
}

/** Resident set size of a process in MiB. */
export function rssMiB(pid: number): number {
  return procStatusMiB(pid, 'VmRSS');
}

/** A process's peak resident set size so far (the kernel's high-water mark), in MiB. */
export function hwmMiB(pid: number): number {
  return procStatusMiB(pid, 'VmHWM');
}

function procStatusMiB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
}

/** Samples a process's RSS every `everyMs` until stopped; returns the peak in MiB. */
export function peakRss(pid: number, everyMs = 250): { stop(): number } {
  let peak = rssMiB(pid);
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, rssMiB(pid));
    } catch {
      /* process gone */
    }
  }, everyMs);
  return {
    stop() {
      clearInterval(timer);
      return peak;
    },
  };
}

/**
 * The sandbox provider's pid, or BENCH_PROVIDER_PID for a provider started by hand (e.g. with
 * other flags). The sandbox runs its provider under a bash restart loop (test/sandbox/processes.ts)
 * and records the loop's pid: the provider is the loop's child, and the loop's own CPU and RSS
 * say nothing of it. Read again after a restart: the child's pid changes.
 */
export function providerPid(sandbox: Sandbox, cluster = 'c1'): number {
  if (process.env.BENCH_PROVIDER_PID) return Number(process.env.BENCH_PROVIDER_PID);
  const recorded = Number(readFileSync(join(sandbox.dir, 'pids', `${cluster}-provider.pid`), 'utf8'));
  if (!commandLine(recorded).includes('sandbox-restart-loop')) return recorded;
  const children = readFileSync(`/proc/${recorded}/task/${recorded}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  const provider = children.find((pid) => commandLine(pid).includes(`--cluster-name=${cluster}`));
  if (provider === undefined) throw new Error(`the restart loop ${recorded} of ${cluster}'s provider runs no provider right now`);
  return provider;
}

/**
 * CPU seconds used so far by each process of the sandbox, by the name of its pid file
 * (`c1-kube-apiserver`, `c2-etcd`, `c1-provider`, ...). A process under the sandbox's restart
 * loop is counted by the loop's current child (the loop itself only waits). Processes gone are
 * left out.
 */
export function sandboxCpuSeconds(sandbox: Sandbox): Map<string, number> {
  const out = new Map<string, number>();
  for (const [name, pids] of sandboxPids(sandbox)) {
    try {
      // Under the restart loop, the loop's child: the loop itself only waits.
      out.set(name, cpuSeconds((pids[1] ?? pids[0])!));
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

/**
 * The pids of each sandbox process by the name of its pid file, with, for a process under the
 * sandbox's restart loop, the loop's current child as well (it inherits the loop's settings only
 * when the loop starts it).
 */
function sandboxPids(sandbox: Sandbox): Map<string, number[]> {
  const out = new Map<string, number[]>();
  const dir = join(sandbox.dir, 'pids');
  for (const file of readdirSync(dir)) {
    if (!file.endsWith('.pid')) continue;
    try {
      const recorded = Number(readFileSync(join(dir, file), 'utf8'));
      if (!commandLine(recorded)) continue; // gone
      const pids = [recorded];
      if (commandLine(recorded).includes('sandbox-restart-loop')) {
        pids.push(...readFileSync(`/proc/${recorded}/task/${recorded}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number));
      }
      out.set(file.slice(0, -'.pid'.length), pids);
    } catch {
      /* gone, or between two runs of its loop */
    }
  }
  return out;
}

/**
 * Gives each cluster of the sandbox cores of its own, as if each ran on a machine of its own:
 * with `clusters` = [c1, c2] on 2 cores, every process of c1 (its control plane, kwok, its
 * providers) runs on core 0 only and every process of c2 on core 1, through the kernel's CPU
 * affinity (`taskset`, every thread). The cores are split evenly, in order; with fewer cores
 * than clusters it refuses. Returns the undo, which gives every process all the cores again.
 */
export function pinClusters(sandbox: Sandbox, clusters: readonly string[]): () => void {
  const cores = cpus().length;
  if (cores < clusters.length) throw new Error(`pinning ${clusters.length} clusters needs as many cores, this machine has ${cores}`);
  const per = Math.floor(cores / clusters.length);
  const set = (pid: number, list: string) => {
    try {
      execFileSync('taskset', ['-a', '-p', '-c', list, String(pid)], { stdio: 'ignore' });
    } catch {
      /* gone meanwhile (a provider restarting) */
    }
  };
  const each = (list: (cluster: number) => string) => {
    for (const [name, pids] of sandboxPids(sandbox)) {
      const i = clusters.findIndex((c) => name.startsWith(`${c}-`));
      if (i >= 0) for (const pid of pids) set(pid, list(i));
    }
  };
  each((i) => `${i * per}-${i * per + per - 1}`);
  // Read again: a provider restarted meanwhile is a new child.
  return () => each(() => `0-${cores - 1}`);
}

/** The machine's CPU time so far (USER_HZ ticks over all cores), busy (not idle nor iowait) and in all, and its core count, from /proc/stat. */
export function machineCpu(): { busy: number; total: number; cores: number } {
  const lines = readFileSync('/proc/stat', 'utf8').split('\n');
  // cpu  user nice system idle iowait irq softirq steal (guest time is already in user)
  const ticks = lines[0]!.trim().split(/\s+/).slice(1, 9).map(Number);
  const total = ticks.reduce((a, b) => a + b, 0);
  return { busy: total - ticks[3]! - ticks[4]!, total, cores: lines.filter((l) => /^cpu\d+ /.test(l)).length };
}

function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
}

/** Runs `fn` over `items` with at most `concurrency` in flight. */
export async function pool<T>(items: T[], concurrency: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The median of some figures (the upper one of an even count). */
export function median(xs: readonly number[]): number {
  const middle = [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  if (middle === undefined) throw new Error('no median of no figures');
  return middle;
}

/**
 * A benchmark script's entry: parses its arguments (exit 2 with the message and `usage` when
 * they are bad), runs `main`, and exits 0, or 1 with the error.
 */
export function runBenchmark<A>(name: string, usage: string, parse: (argv: string[]) => A, main: (args: A) => Promise<void>): void {
  let args: A;
  try {
    args = parse(process.argv.slice(2));
  } catch (err) {
    console.error(`bench: ${err instanceof Error ? err.message : String(err)}`);
    console.error(`usage: ${name} ${usage}`);
    process.exit(2);
  }
  main(args).then(
    () => process.exit(0),
    (err) => {
      console.error(`bench: ${err instanceof Error ? (err.stack ?? err.message) : err}`);
      process.exit(1);
    },
  );
}
