import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { type CliIo, writeLine } from './cli-io.js';
import { isClone, needsCloneMessage, packageRoot } from './package-root.js';

/** One benchmark script under test/bench/: its file name without `.ts`, arguments and purpose. */
export interface Benchmark {
  name: string;
  args: string;
  summary: string;
}

/** What `admiralty bench` runs with no benchmark name (or with only options): the offload benchmark. */
export const DEFAULT_BENCHMARK = 'offload';

/**
 * The benchmarks `admiralty bench` runs. They are development tools: they need a clone (their
 * sources and the sandbox are not published) and run through tsx, a dev dependency.
 */
export const BENCHMARKS: readonly Benchmark[] = [
  {
    name: 'offload',
    args: '[--sizes 100,1000] [--concurrency 20] [--out .bench]',
    summary:
      'for each size N, N pods offloaded to c2 (pinned to its virtual node) next to the same N pods created directly in c2: time to all Running, start latency p50/p99, where the time goes, deletion, provider CPU seconds and peak RSS, how busy the machine cores were and the CPU seconds of each sandbox process; writes .bench/offload-<time>.json and .svg; starts the sandbox if it is not up',
  },
  {
    name: 'scale',
    args: '[--targets 10,50,100] [--pods 10000] [--concurrency 20] [--idle-seconds 30] [--out .bench]',
    summary:
      "for each count T of targets, T namespaced Targets from c1 to c2 (one per namespace, each its own Secret and Source): the idle cost per target (provider RSS, apiserver requests a second, against none), then the pods spread over them, direct in c2 and offloaded: time to all Running and gone, p99 start, provider CPU and peak RSS, requests per pod, the proxy scheduler's binds a second, where the time goes; writes .bench/scale-<time>.json and .svg; starts the sandbox if it is not up",
  },
  {
    name: 'gangs',
    args: '[--jobs 50] [--pods 8] [--room 16] [--hold-seconds 5] [--work rendezvous|independent] [--stall-seconds 60] [--out .bench]',
    summary:
      'J elected Jobs of P pods (1 cpu each) created at once into c1 and c2, each target with room for --room pods, once as gangs (a PodGroup of minCount P each) and once one by one: pods ever Running in a partial group (fewer than P of their job bound), time to all complete (or where it stalled), the peak cpu and cpu-seconds held by partial groups; the benchmark ends each pod --hold-seconds after its whole job runs (rendezvous) or after it runs; writes .bench/gangs-<time>.json; needs the sandbox with gang scheduling (starts one with --gangs if none is up)',
  },
  { name: 'log-throughput', args: '[MiB=20] [rounds=3]', summary: '`kubectl logs` throughput through a proxy pod next to the same logs read on its delegate' },
  {
    name: 'extender-latency',
    args: '[requests=3000] [concurrency=1]',
    summary: 'scheduler extender filter and prioritize latency (p50, p99, req/s) over 100 targets x 100 nodes, for three proxy shapes, next to a no-op handler; in process, no sandbox',
  },
  {
    name: 'hostile-admission',
    args: '[ms-per-point=60] [field-filter]',
    summary:
      "for each list of a pod the webhook walks (tolerations, containers, env, volumes, affinity terms, ...), the time of one elected pod's review as the list doubles up to its limit and past it to 6000 items, next to parsing the same body alone, with the growth exponent of each; in process, no sandbox",
  },
  { name: 'webhook-latency', args: '[requests=2000] [concurrency=16]', summary: 'admission latency (p50, p99) of the mutating webhook next to a no-op handler' },
  {
    name: 'cache-memory',
    args: '[pods=5000]',
    summary:
      "heap held per offloaded pod by each of the provider's caches (proxies, delegates, the target's pod events, the summary's pods), with the transforms and filters the provider gives them next to without; in process, no sandbox",
  },
  {
    name: 'api-transport',
    args: '[calls=2000] [concurrency=100] [rounds=3]',
    summary:
      "what an API call costs the client: client-node's generated API over HTTP/1.1 (connections reused), the provider's way (the same over HTTP/2), https.request on a keep-alive agent and one bare http2 session, creating ConfigMaps in c2; client and apiserver CPU seconds, wall time",
  },
  {
    name: 'idle-rss',
    args: '[idle-seconds=30]',
    summary: "idle RSS of the source provider started as shipped (the bundle), from the unbundled compiled tree and through tsx, with the sandbox provider's own flags",
  },
];

function usage(): string {
  const width = Math.max(...BENCHMARKS.map((b) => b.name.length));
  return [
    'usage: admiralty bench [<benchmark>] [args]   (npm run bench -- [<benchmark>] [args])',
    '',
    `With no benchmark name, runs \`${DEFAULT_BENCHMARK}\` (sizes 100 and 1000); options alone go to it:`,
    '`npm run bench -- --sizes 100,1000,5000`.',
    '',
    'Benchmarks print figures, next to a baseline measured in the same run. They need a clone',
    'of the repository and run through tsx. Most need a running sandbox (npm run sandbox -- up; not',
    'the two *-latency ones, hostile-admission nor cache-memory); offload starts one when none is up, and stops it again at the end.',
    '',
    ...BENCHMARKS.map((b) => `  ${b.name.padEnd(width)}  ${b.args}\n  ${' '.repeat(width)}  ${b.summary}`),
  ].join('\n');
}

/** Starts a benchmark process and resolves with its exit code; injected by tests. */
export type BenchRunner = (command: string, args: string[], cwd: string) => Promise<number>;

const runInherited: BenchRunner = (command, args, cwd) =>
  new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, stdio: 'inherit' });
    child.on('error', reject);
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });

/**
 * The `bench` command: lists the benchmarks (`--help`), prints one's usage (`<name> --help`), or
 * runs one as a child process (`node --import tsx test/bench/<name>.ts`) with the remaining
 * arguments and returns its exit code. With no argument, or with options first (`--sizes …`),
 * it runs {@link DEFAULT_BENCHMARK} with those options. 2 on an unknown benchmark.
 */
export async function benchCli(args: string[], io: CliIo, run: BenchRunner = runInherited, root = packageRoot()): Promise<number> {
  if (args[0] === '--help' || args[0] === '-h') {
    writeLine(io.stdout, usage());
    return 0;
  }
  const first = args[0];
  const [name, ...rest] = first === undefined || first.startsWith('-') ? [DEFAULT_BENCHMARK, ...args] : args;
  const bench = BENCHMARKS.find((b) => b.name === name);
  if (!bench) {
    writeLine(io.stderr, `bench: unknown benchmark ${JSON.stringify(name)}`);
    writeLine(io.stderr, usage());
    return 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    writeLine(io.stdout, `usage: admiralty bench ${bench.name} ${bench.args}\n\n${bench.summary}.`);
    return 0;
  }
  if (!isClone(root)) {
    writeLine(io.stderr, needsCloneMessage('bench'));
    return 1;
  }
  const script = join(root, 'test', 'bench', `${bench.name}.ts`);
  if (!existsSync(script)) {
    writeLine(io.stderr, `bench: ${script} is missing`);
    return 1;
  }
  // `--import tsx` is resolved from the working directory: say so plainly when dev
  // dependencies are not installed rather than let node print a resolution error.
  if (!existsSync(join(root, 'node_modules', 'tsx', 'package.json'))) {
    writeLine(io.stderr, 'bench: benchmarks run through tsx, a dev dependency: run npm ci first');
    return 1;
  }
  return run(process.execPath, ['--import', 'tsx', script, ...rest], root);
}
