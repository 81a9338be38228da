/**
 * Benchmark (not a test): idle resident memory of the source provider (c1) started as it ships
 * (the bundle in dist/bundle/, plain node), next to the same provider started from the compiled
 * tree unbundled (dist/provider/cli.js, how it shipped before the bundle), through tsx (how it
 * ran before it was compiled) and from the bundle with --enable-source-maps. Each variant gets
 * the sandbox provider's own flags and environment (the image's NODE_OPTIONS included), runs
 * alone (the sandbox's c1 provider is stopped meanwhile and started again at the end), and is
 * read from /proc after it is ready and has idled, with its peak RSS since it started (startup
 * loads every module: the peak is where the module count shows most). The last line judges the
 * shipped provider's idle RSS against the project's goal. Needs a running sandbox and `npm run build`.
 *
 *   npm run bench -- idle-rss [idle-seconds=30]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { REPO_ROOT, Sandbox, shippedCli, waitFor } from '../sandbox/sandbox.js';
import { SHIPPED_NODE_OPTIONS } from '../../provider/core/heap-growth.js';
import { hwmMiB, rssMiB, sleep } from './bench-support.js';
import { atMost, IDLE_RSS_GOAL_MB, mibToMB, renderGoal } from './goals.js';

const IDLE_SECONDS = Number(process.argv[2] ?? 30);
const CLUSTER = 'c1';

async function ready(url: string): Promise<boolean> {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(2000) })).ok;
  } catch {
    return false;
  }
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((r) => child.once('exit', () => r()));
}

/** Starts one variant, waits until ready, idles, and returns its RSS and peak RSS in MiB; stops it again. */
async function measure(nodeArgs: string[], providerArgs: string[], readyz: string): Promise<{ rss: number; peak: number }> {
  const child = spawn(process.execPath, [...nodeArgs, 'provider', ...providerArgs], {
    cwd: REPO_ROOT,
    // The image's NODE_OPTIONS, as the sandbox starts its providers (then any of the caller's).
    env: { ...process.env, NODE_ENV: 'sandbox', NODE_OPTIONS: [SHIPPED_NODE_OPTIONS, process.env.NODE_OPTIONS].filter(Boolean).join(' ') },
    stdio: 'ignore',
  });
  try {
    await waitFor('provider ready', 120_000, () => ready(readyz));
    await sleep(IDLE_SECONDS * 1000);
    return { rss: rssMiB(child.pid!), peak: hwmMiB(child.pid!) };
  } finally {
    // The provider drains within --shutdown-timeout-seconds (20); do not let one that hangs
    // hold the sandbox's c1 provider down for good.
    child.kill('SIGTERM');
    const gone = await Promise.race([exited(child).then(() => true), sleep(30_000).then(() => false)]);
    if (!gone) {
      console.log(`  (pid ${child.pid} did not exit within 30 s of SIGTERM; killed)`);
      child.kill('SIGKILL');
      await exited(child);
    }
  }
}

async function main(): Promise<void> {
  if (!(IDLE_SECONDS >= 0)) throw new Error('idle-seconds must be a non-negative number');
  const sandbox = new Sandbox();
  if (!sandbox.isUp()) {
    console.error('bench: the sandbox is not up; run `npm run sandbox -- up` first');
    process.exit(2);
  }
  const cli = shippedCli();
  const providerArgs = sandbox.providerArgs(CLUSTER);
  const metricsPort = providerArgs.find((a) => a.startsWith('--metrics-port='))?.split('=')[1];
  const readyz = `http://127.0.0.1:${metricsPort}/readyz`;
  const variants: [string, string[]][] = [
    ['shipped (node bin/admiralty.js: the bundle)', cli.args],
    ['shipped, --enable-source-maps', ['--enable-source-maps', ...cli.args]],
    ['compiled, unbundled (node dist/provider/cli.js)', [join(REPO_ROOT, 'dist', 'provider', 'cli.js')]],
    ['through tsx (node --import tsx provider/cli.ts)', ['--import', 'tsx', join(REPO_ROOT, 'provider', 'cli.ts')]],
  ];
  await sandbox.stop(CLUSTER, 'provider');
  const results: { rss: number; peak: number }[] = [];
  try {
    for (const [label, nodeArgs] of variants) {
      const r = await measure(nodeArgs, providerArgs, readyz);
      console.log(`${label}: ${r.rss.toFixed(1)} MiB RSS after ${IDLE_SECONDS} s idle, peak ${r.peak.toFixed(1)} MiB`);
      results.push(r);
    }
  } finally {
    await sandbox.start(CLUSTER, 'provider');
  }
  const [shipped, , unbundled, tsx] = results;
  const ratio = (of: 'rss' | 'peak', x: { rss: number; peak: number }) => (x[of] / shipped![of]).toFixed(2);
  console.log(`unbundled / shipped: RSS ${ratio('rss', unbundled!)}, peak ${ratio('peak', unbundled!)}; tsx / shipped: RSS ${ratio('rss', tsx!)}, peak ${ratio('peak', tsx!)}`);
  const mb = mibToMB(shipped!.rss);
  console.log(
    renderGoal({
      goal: `the shipped provider's RSS after ${IDLE_SECONDS} s idle`,
      measured: `${mb.toFixed(0)} MB (${shipped!.rss.toFixed(1)} MiB)`,
      limitText: `${IDLE_RSS_GOAL_MB} MB`,
      met: atMost(mb, IDLE_RSS_GOAL_MB, 0),
      note: "the project's goal, printed, never asserted; see the README, Performance",
    }),
  );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
