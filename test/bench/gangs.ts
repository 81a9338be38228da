/**
 * Benchmark (not a test): J elected Jobs of P pods each, created at once in c1, into two targets
 * (c1 itself and c2) that have room for only part of them, once as gangs (each Job's pods in a
 * PodGroup of `minCount: P`) and once one pod at a time (the same Jobs, no PodGroup), in the
 * same run. Issue 56, part 3.
 *
 * Room: hog pods (as the e2e suite's `squeeze`) keep `--room` cpus free in each target, spread
 * over its real nodes; every benchmark pod asks for 1 cpu.
 *
 * Work: kwok ends a Job's pod as soon as it runs, so jobs would never contend. The delegates keep
 * the Job's `job-name` labels unprefixed (the `no-prefix-label-regexp` annotation, as the Kueue
 * e2e test does), which the sandbox's kwok stage does not end, and the benchmark ends each
 * delegate itself (status Succeeded) `--hold-seconds` after it may: with `--work rendezvous`
 * (the default, a job that needs its whole group, as MPI or distributed training) once every
 * pod of its job is Running; with `--work independent` once it is Running itself. The proxy then
 * succeeds through the provider's status feedback, and its Job with it.
 *
 * Measured by watching, every event timed: the proxies in c1 (bound, finished) and the
 * delegates in c1 and c2 (placed, Running). A pod is bound when its proxy is bound or its
 * delegate placed (bound, or nominated by its target's scheduler): the bind handshake binds a
 * proxy after its delegate is placed. A pod counts as **in a partial group** when it was
 * Running while fewer than P pods of its job were bound, for longer than PARTIAL_GRACE_MS (1 s:
 * the bindings of one gang land tens of ms apart; the count at any moment is printed too); the
 * **room held by partial groups** is the cpu of bound, unfinished pods of jobs with fewer than P
 * bound (see PartialGroups). A run with jobs left and nothing bound, Running or finished for
 * `--stall-seconds` is **stalled** (a deadlock of partial groups, with `--work rendezvous`) and
 * stops there.
 *
 * Prints a table and one line (`gangs 50 jobs x 8 pods: 0 pods in partial groups with gangs, …`)
 * and writes `.bench/gangs-<time>.json`. Needs the sandbox with gang scheduling on: starts one
 * (`--gangs`) when none is up and stops it at the end; refuses one running without.
 *
 *   node --import tsx test/bench/gangs.ts [--jobs 50] [--pods 8] [--room 16] [--hold-seconds 5] [--work rendezvous|independent] [--stall-seconds 60] [--out .bench]
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { CoreV1Api, PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import { ELECT_ANNOTATION, NO_PREFIX_LABEL_REGEXP_ANNOTATION, PARENT_NAME_ANNOTATION } from '../../provider/core/keys.js';
import { connectNamespace, freeCpu, kubeConfigFor, kubectl, kubectlStdin, squeeze, uniqueName, waitFor } from '../e2e/support.js';
import { REPO_ROOT } from '../sandbox/sandbox.js';
import { runBenchmark, sleep } from './bench-support.js';
import { GANGS_USAGE, gangsSummaryLine, PARTIAL_GRACE_MS, parseGangsArgs, PartialGroups, renderGangsTable, type GangEvent, type GangsArgs, type GangsRun } from './gangs-report.js';
import { PodWatch, sandbox } from './sandbox-run.js';

const log = (line: string) => console.log(`bench: ${line}`);
const APP = 'bench-gangs';
const JOB_LABEL = 'batch.kubernetes.io/job-name';
const MILLI_PER_POD = 1000;

/** How long one run may take before it fails, stalled or not: generous, never a figure. */
const runTimeoutMs = (args: GangsArgs) => 300_000 + args.jobs * args.pods * 1000;

/** The PodGroups (gangs only) and Jobs of a run, as one List for `kubectl create`. */
function jobsList(ns: string, args: GangsArgs, gangs: boolean): string {
  const items: unknown[] = [];
  for (let i = 0; i < args.jobs; i++) {
    const name = `job-${i}`;
    if (gangs) {
      items.push({ apiVersion: 'scheduling.k8s.io/v1alpha2', kind: 'PodGroup', metadata: { name, namespace: ns }, spec: { schedulingPolicy: { gang: { minCount: args.pods } } } });
    }
    items.push({
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: { name, namespace: ns },
      spec: {
        parallelism: args.pods,
        completions: args.pods,
        template: {
          // job-name unprefixed on the delegates: the sandbox's kwok stage would end them at once.
          metadata: { labels: { app: APP }, annotations: { [ELECT_ANNOTATION]: '', [NO_PREFIX_LABEL_REGEXP_ANNOTATION]: 'job-name=' } },
          spec: {
            ...(gangs ? { schedulingGroup: { podGroupName: name } } : {}),
            restartPolicy: 'Never',
            terminationGracePeriodSeconds: 0,
            containers: [{ name: 'main', image: 'busybox', resources: { requests: { cpu: `${MILLI_PER_POD}m` } } }],
          },
        },
      },
    });
  }
  return JSON.stringify({ apiVersion: 'v1', kind: 'List', items });
}

/** Deletes a connected namespace, source side first, and waits until it is gone from both. */
async function disconnect(ns: string): Promise<void> {
  for (const c of ['c1', 'c2']) {
    await kubectl(c, 'delete', 'namespace', ns, '--wait=false', '--ignore-not-found');
    await waitFor(`namespace ${ns} gone from ${c}`, 10 * 60_000, async () => (await kubectl(c, 'get', 'namespace', ns, '--ignore-not-found', '-o', 'name')).trim() === '');
  }
}

/** Keeps `room` cpus free in each target, spread evenly over its real nodes. */
async function setRoom(ns: string, room: number): Promise<void> {
  for (const c of ['c1', 'c2']) {
    const nodes = (await freeCpu(c)).size;
    await squeeze(c, ns, Math.ceil(room / nodes) * MILLI_PER_POD);
  }
}

/** Where a Running delegate is, to end it. */
interface DelegateRef {
  cluster: 'c1' | 'c2';
  name: string;
}

/**
 * The delegates' work: ends each (status Succeeded, as kwok's own stage would write it) when the
 * work model says, and counts the delegates it could not end.
 */
class Work {
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly scheduled = new Set<string>();
  private readonly cores = { c1: kubeConfigFor('c1').makeApiClient(CoreV1Api), c2: kubeConfigFor('c2').makeApiClient(CoreV1Api) };
  readonly delegates = new Map<string, DelegateRef>();
  failures = 0;

  constructor(
    private readonly ns: string,
    private readonly args: GangsArgs,
    private readonly account: PartialGroups,
  ) {}

  /** Called after each Running delegate is recorded. */
  running(job: string, proxy: string): void {
    if (this.args.work === 'independent') return this.schedule([proxy]);
    const running = this.account.runningOf(job);
    if (running.size === this.args.pods) this.schedule([...running]);
  }

  stop(): void {
    for (const t of this.timers) clearTimeout(t);
  }

  private schedule(proxies: string[]): void {
    for (const proxy of proxies) {
      if (this.scheduled.has(proxy)) continue;
      this.scheduled.add(proxy);
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        void this.end(proxy);
      }, this.args.holdSeconds * 1000);
      this.timers.add(timer);
    }
  }

  private async end(proxy: string): Promise<void> {
    const ref = this.delegates.get(proxy);
    if (!ref) return;
    const now = new Date().toISOString();
    const status = {
      phase: 'Succeeded',
      containerStatuses: [
        { name: 'main', image: 'busybox', ready: false, restartCount: 0, started: false, state: { terminated: { exitCode: 0, reason: 'Completed', startedAt: now, finishedAt: now } } },
      ],
    };
    try {
      await this.cores[ref.cluster].patchNamespacedPodStatus({ name: ref.name, namespace: this.ns, body: { status } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
    } catch (err) {
      this.failures++;
      log(`ending delegate ${ref.cluster}/${ref.name}: ${(err as Error).message}`);
    }
  }
}

/** One run: the jobs as gangs or one by one, in a namespace of its own, gone before it resolves. */
async function run(args: GangsArgs, gangs: boolean): Promise<GangsRun> {
  const mode = gangs ? 'gangs' : 'one by one';
  const ns = uniqueName(gangs ? 'bench-gangs' : 'bench-single');
  await connectNamespace(ns);
  const account = new PartialGroups(args.pods, MILLI_PER_POD);
  const work = new Work(ns, args, account);
  const podsByNode: Record<string, number> = {};
  const boundSeen = new Set<string>();
  let t0 = performance.now();
  let lastProgress = t0;
  const trace: (GangEvent & { where: string })[] = [];
  const record = (e: Omit<GangEvent, 'atMs'>, atMs: number, where = '') => {
    const event = { ...e, atMs: atMs - t0 };
    trace.push({ ...event, where });
    account.record(event);
    lastProgress = Math.max(lastProgress, atMs);
  };
  const onPod = (cluster: 'c1' | 'c2') => (type: string, pod: V1Pod, atMs: number) => {
    if (type === 'DELETED' || pod.metadata?.labels?.role === 'hog') return;
    const parent = pod.metadata?.annotations?.[PARENT_NAME_ANNOTATION];
    const job = pod.metadata?.labels?.[parent ? 'job-name' : JOB_LABEL];
    if (!job) return;
    if (parent) {
      // The bind handshake binds a proxy once its delegate has a node in its target: a delegate
      // placed (and Running) before its proxy is the way, not a partial group. Placed, as the
      // binder judges it: bound, or nominated by the target's scheduler (kube-scheduler nominates
      // a gang's pods held at Permit, then binds each on its own, tens of ms apart).
      const placedOn = pod.spec?.nodeName ?? pod.status?.nominatedNodeName;
      if (placedOn) record({ job, pod: parent, kind: 'bound' }, atMs, `${cluster}/${placedOn}${pod.spec?.nodeName ? '' : ' (nominated)'}`);
      if (pod.status?.phase !== 'Running') return;
      work.delegates.set(parent, { cluster, name: pod.metadata!.name! });
      record({ job, pod: parent, kind: 'running' }, atMs, cluster);
      work.running(job, parent);
      return;
    }
    const name = pod.metadata!.name!;
    const node = pod.spec?.nodeName;
    if (node && !boundSeen.has(name)) {
      boundSeen.add(name);
      podsByNode[node] = (podsByNode[node] ?? 0) + 1;
    }
    if (node) record({ job, pod: name, kind: 'bound' }, atMs, node);
    if (pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') record({ job, pod: name, kind: 'finished' }, atMs);
  };
  const watches = [new PodWatch(kubeConfigFor('c1'), { namespace: ns }, onPod('c1')), new PodWatch(kubeConfigFor('c2'), { namespace: ns }, onPod('c2'))];
  try {
    await setRoom(ns, args.room);
    for (const w of watches) await w.start();
    log(`${mode}: ${args.jobs} jobs of ${args.pods} pods into ${ns}, room for ${args.room} pods in each target`);
    t0 = performance.now();
    lastProgress = t0;
    const created = await kubectlStdin('c1', jobsList(ns, args, gangs), 'create', '-f', '-');
    if (created.code !== 0) throw new Error(`creating the jobs: ${created.stderr}`);
    let stalledAtSeconds: number | undefined;
    for (;;) {
      await sleep(250);
      const now = performance.now();
      if (account.figures(now - t0).jobsComplete === args.jobs) break;
      if (now - lastProgress > args.stallSeconds * 1000) {
        stalledAtSeconds = (lastProgress - t0) / 1000;
        log(`${mode}: stalled, nothing bound, Running or finished for ${args.stallSeconds} s`);
        break;
      }
      if (now - t0 > runTimeoutMs(args)) throw new Error(`${mode}: the jobs did not complete in ${runTimeoutMs(args) / 1000} s, yet never stalled`);
    }
    // A stalled run's partial groups stayed so (holding their room) until it stopped watching.
    const partial = account.figures(performance.now() - t0);
    if (work.failures > 0) log(`${mode}: ${work.failures} delegates could not be ended`);
    const allCompleteSeconds = stalledAtSeconds === undefined ? partial.lastCompleteMs / 1000 : undefined;
    log(`${mode}: ${partial.jobsComplete}/${args.jobs} jobs complete, ${partial.podsInPartialGroups} pods ever in a partial group; deleting`);
    // Each partial job's first events (bound, Running, by cluster), to tell a gap of milliseconds from a group half run.
    const partialJobs = new Set(partial.firstPartialMoments.map((m) => m.job));
    const partialTraces = [...partialJobs].map((job) => ({ job, events: trace.filter((e) => e.job === job && e.kind !== 'finished').slice(0, 4 * args.pods) }));
    return { mode, jobs: args.jobs, pods: args.pods, allCompleteSeconds, stalledAtSeconds, partial, podsByNode, partialTraces };
  } finally {
    for (const w of watches) w.stop();
    work.stop();
    await disconnect(ns);
  }
}

/** Starts the sandbox with gangs when none is up; refuses one that runs without. Resolves with whether it started one. */
async function ensureGangSandbox(): Promise<boolean> {
  const state = sandbox.state();
  if (state && !state.gangs) {
    throw new Error(`the sandbox in ${sandbox.dir} runs without gang scheduling: run \`admiralty sandbox down\` and \`admiralty sandbox up --gangs\`, or point SANDBOX_DIR at another folder`);
  }
  if (sandbox.isUp()) return false;
  log('the sandbox is not up: starting it with gang scheduling, its providers logging at info as the Deployment does');
  await sandbox.up({ gangs: true, log: (l) => log(`sandbox: ${l}`), providerLogLevel: 'info' });
  return state === undefined;
}

async function main(args: GangsArgs): Promise<void> {
  const startedSandbox = await ensureGangSandbox();
  const startedAt = new Date();
  const loadBefore = loadavg();
  const runs: GangsRun[] = [];
  log(
    `${args.jobs} jobs x ${args.pods} pods, room ${args.room} pods a target, work ${args.work} ${args.holdSeconds} s; ${cpus().length} CPUs, load average ${loadBefore.map((l) => l.toFixed(2)).join(' ')}`,
  );
  try {
    runs.push(await run(args, true));
    runs.push(await run(args, false));
  } finally {
    if (startedSandbox) {
      log('stopping the sandbox it started');
      await sandbox.down();
    }
  }
  const loadAfter = loadavg();
  console.log('');
  console.log(
    `A pod is in a partial group when it was Running while fewer than ${args.pods} (minCount) pods of its job were bound (proxy bound, or delegate bound or nominated), for longer than ${PARTIAL_GRACE_MS / 1000} s ("at any moment": however short); the room held by partial groups is the cpu of bound, unfinished pods of jobs with fewer than ${args.pods} bound.`,
  );
  console.log(renderGangsTable(runs));
  console.log('');
  for (const r of runs) {
    console.log(`${r.mode}: pods by virtual node ${JSON.stringify(r.podsByNode)}`);
    for (const m of r.partial.firstPartialMoments) console.log(`  ${m.job} first partial at ${(m.atMs / 1000).toFixed(3)} s: ${m.running} Running, ${m.bound} of ${args.pods} bound`);
  }
  console.log(gangsSummaryLine(runs[0]!, runs[1]!));

  const outDir = resolve(REPO_ROOT, args.outDir);
  mkdirSync(outDir, { recursive: true });
  const file = join(outDir, `gangs-${startedAt.toISOString().replace(/[:.]/g, '-')}.json`);
  const json = { benchmark: 'gangs', startedAt: startedAt.toISOString(), cpus: cpus().length, loadAverageBefore: loadBefore, loadAverageAfter: loadAfter, args, runs };
  writeFileSync(file, JSON.stringify(json, null, 1) + '\n');
  log(`wrote ${relative(process.cwd(), file)}`);
}

runBenchmark('gangs', GANGS_USAGE, parseGangsArgs, main);
