import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import { dirname, join, relative, resolve } from 'node:path';
import { promisify } from 'node:util';
import { SHIPPED_NODE_OPTIONS } from '../../provider/core/heap-growth.js';
import { packageRoot } from '../../provider/tools/package-root.js';
import { STAND_IN_CONFIGMAP } from './cluster-autoscaler-stand-in.js';
import {
  KUEUE_CONVERTED_CRDS,
  KUEUE_NAMESPACE,
  KUEUE_SERVICE_ACCOUNT,
  KUEUE_WEBHOOK_SECRET,
  kueueConfiguration,
  kueueCrd,
  kueueNamespaceYaml,
  kueueRbacKustomization,
  kueueWebhookConfigurations,
  type KueuePorts,
} from './kueue.js';
import { ensurePki, type SandboxPki } from './pki.js';
import { outOfClusterSchedulerConfig, shippedSchedulerConfig } from './proxy-scheduler-config.js';
import { isOurs, isRunning, logTail, readPid, signalProcess, startProcess, stopProcess, type ProcessSpec } from './processes.js';
import { FIRST_CLUSTER, isSource, sourceUser, topologyLinks, type Topology } from './topology.js';

const execFileAsync = promisify(execFile);

/**
 * The repository root. This file runs from test/sandbox/ (tests, through tsx) and compiled from
 * dist/test/sandbox/ (the `sandbox` and `demo` commands), so it is found, not counted.
 */
export const REPO_ROOT = packageRoot(import.meta.url);

/**
 * The command line that starts the CLI as it ships: compiled JavaScript from dist/ through
 * bin/admiralty.js, with plain node, so the sandbox and the e2e suite test what is published.
 */
export function shippedCli(): { command: string; args: string[] } {
  const bin = join(REPO_ROOT, 'bin', 'admiralty.js');
  if (!existsSync(join(REPO_ROOT, 'dist', 'bundle', 'cli.js'))) {
    throw new Error('the sandbox runs the provider compiled, from dist/: run `npm run build` first');
  }
  return { command: process.execPath, args: [bin] };
}

/**
 * Components of a sandbox cluster, in start order. `proxy-scheduler` (the second kube-scheduler,
 * schedulerName admiralty-proxy, that places proxy pods) runs in the sources only (c1 in the
 * default topology).
 */
export const CLUSTER_COMPONENTS = [
  'etcd',
  'kube-apiserver',
  'kube-controller-manager',
  'kube-scheduler',
  'kwok',
  'metrics-server',
  'provider',
  'provider-front',
  'proxy-scheduler',
  'kueue',
  'cluster-autoscaler-stand-in',
] as const;
export type Component = (typeof CLUSTER_COMPONENTS)[number];

/**
 * Builds, or finds in the cache, the pinned binaries of test/sandbox/build.sh (`control-plane`,
 * `helm` for the chart's tests, `metrics-server`, `kueue`); returns their folder. The build's
 * progress goes to stderr.
 */
export function buildBinaries(what: 'control-plane' | 'helm' | 'metrics-server' | 'kueue'): string {
  const out = execFileSync('bash', [join(REPO_ROOT, 'test', 'sandbox', 'build.sh'), what], { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
  return out.trim().split('\n').pop()!;
}

/** Region label of each cluster's fake nodes: c1 is us, c2 eu, and extra targets elsewhere. */
const REGIONS = ['us', 'eu', 'ap', 'sa', 'af', 'me', 'oc', 'an'];

/** Port offsets inside a cluster's block of ten. */
const PORT = { etcd: 0, etcdPeer: 1, apiserver: 2, kcm: 3, scheduler: 4, kwok: 5, kubelet: 6, webhook: 7, metrics: 8, proxyScheduler: 9 } as const;

/**
 * Kubernetes' gang scheduling alpha, for the opt-in of {@link UpOptions.gangs}: GenericWorkload
 * serves the Workload and PodGroup API and lets a pod name its group
 * (`spec.schedulingGroup.podGroupName`); GangScheduling adds kube-scheduler's plugin that holds
 * a group's pods at Permit until `minCount` of them have a place. Both are alpha in 1.36, off
 * by default, and the API version is off by default too, so the apiserver needs both flags.
 * TopologyAwareWorkloadScheduling lets a PodGroup keep its pods in one domain
 * (`spec.schedulingConstraints.topology`): the apiserver refuses that field without it.
 */
const GANG_FEATURE_GATES = '--feature-gates=GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true';
const GANG_RUNTIME_CONFIG = '--runtime-config=scheduling.k8s.io/v1alpha2=true';

/** The cluster that may run several provider replicas (the source of the default topology). */
const REPLICATED_CLUSTER = FIRST_CLUSTER;

/** The cluster that runs Kueue with {@link UpOptions.kueue}: the source of the default topology. */
export const KUEUE_CLUSTER = FIRST_CLUSTER;

export interface SandboxState {
  basePort: number;
  clusters: string[];
  binDir: string;
  /** Where the metrics-server binary is (build.sh metrics-server); absent in a sandbox started before it ran metrics-server. */
  metricsServerBinDir?: string;
  kwokModuleDir: string;
  /** Whether the provider processes should run (false until the provider exists or with --no-provider). */
  provider: boolean;
  /** Provider processes of the source (c1), each with its own ports; 1 when absent. */
  providerReplicas?: number;
  /** Who sends pods where (see topology.ts); `star` when absent. */
  topology?: Topology;
  /** Clusters that run the cluster-autoscaler stand-in (a test fixture; `up --autoscaler <cluster>`). */
  autoscalers?: string[];
  /** Whether kwok finishes Job pods by itself once they run; true when absent (see {@link UpOptions.completeJobPods}). */
  completeJobPods?: boolean;
  /** The providers' `--log-level`; `debug` when absent (see {@link UpOptions.providerLogLevel}). */
  providerLogLevel?: ProviderLogLevel;
  /** Whether the clusters run Kubernetes' gang scheduling alpha; off when absent (see {@link UpOptions.gangs}). */
  gangs?: boolean;
  /** Where Kueue's manager and its files are (build.sh kueue) when c1 runs Kueue; off when absent (see {@link UpOptions.kueue}). */
  kueueBinDir?: string;
}

/** The provider's log levels that the sandbox runs it at. */
export type ProviderLogLevel = 'debug' | 'info';

export interface UpOptions {
  /** Clusters c1, c2… to run, from 2 to 8 (from 1 without the provider); default 2. */
  clusters?: number;
  /**
   * Run the provider with our objects installed (default). False leaves bare clusters: the
   * control plane and kwok, none of our objects (for a test that installs them itself, as
   * helm.test.ts does with `helm install`).
   */
  provider?: boolean;
  /**
   * Whether kwok finishes a Job's pod (exit 0, Succeeded) as soon as it runs, and the delegates
   * of Job pods likewise (default). False leaves them Running, for a test that runs the
   * container's command itself and then writes the pod's outcome, as a kubelet would
   * (helm.test.ts with the chart's post-delete hook).
   */
  completeJobPods?: boolean;
  /** Who sends pods where (see topology.ts); default `star`, c1 sending to itself and every other cluster. */
  topology?: Topology;
  /** Stop before connecting the clusters (Source, kubeconfig Secret, Targets). */
  connect?: boolean;
  /** Provider processes of the source (c1), default 1; with more, a front stands in for their Service. */
  providerReplicas?: number;
  /** Clusters that also run the cluster-autoscaler stand-in (added to a running sandbox too). */
  autoscalers?: string[];
  /**
   * The providers' `--log-level`: `debug` by default, for what a failing test leaves to read;
   * the benchmarks ask for `info`, the level the Deployment ships with, so that what they
   * measure includes no debug line that an install does not write.
   */
  providerLogLevel?: ProviderLogLevel;
  /**
   * Turn on Kubernetes' gang scheduling alpha in every cluster (default off): each
   * kube-apiserver serves scheduling.k8s.io/v1alpha2 (Workload, PodGroup) and each cluster's
   * kube-scheduler runs the gang plugin. The proxy scheduler keeps its shipped configuration,
   * so proxies are still placed one by one. `up --gangs`, or SANDBOX_GANGS=1 for the e2e suite.
   */
  gangs?: boolean;
  /**
   * Run Kueue (build.sh kueue) in c1 (default off): its CRDs, namespace kueue-system, its own
   * ServiceAccount with the RBAC of its module, its webhooks, and its manager as a process
   * (component `kueue`). `up --kueue`, or SANDBOX_KUEUE=1 for the e2e suite; a running sandbox
   * must go down to change it.
   */
  kueue?: boolean;
  log?: (line: string) => void;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A set of real Kubernetes control planes on loopback: each cluster has its own etcd,
 * kube-apiserver, kube-controller-manager, kube-scheduler and kwok (two fake nodes), and a
 * provider process. State lives in `dir` (default `.sandbox/` in the repository).
 */
export class Sandbox {
  readonly dir: string;
  private log: (line: string) => void = () => {};

  constructor(dir = process.env.SANDBOX_DIR ?? join(REPO_ROOT, '.sandbox')) {
    this.dir = resolve(dir);
  }

  get kubeconfigPath(): string {
    return join(this.dir, 'kubeconfig');
  }

  get kubectlPath(): string {
    return join(this.dir, 'bin', 'kubectl');
  }

  get statePath(): string {
    return join(this.dir, 'state.json');
  }

  state(): SandboxState | undefined {
    if (!existsSync(this.statePath)) return undefined;
    return JSON.parse(readFileSync(this.statePath, 'utf8')) as SandboxState;
  }

  private requireState(): SandboxState {
    const s = this.state();
    if (!s) throw new Error('sandbox is not up: run `npm run sandbox -- up`');
    return s;
  }

  /** Ports of one cluster. */
  ports(cluster: string, state = this.requireState()) {
    const i = state.clusters.indexOf(cluster);
    if (i < 0) throw new Error(`unknown cluster ${cluster}; the sandbox has ${state.clusters.join(', ')}`);
    const b = state.basePort + i * 10;
    return Object.fromEntries(Object.entries(PORT).map(([k, v]) => [k, b + v])) as Record<keyof typeof PORT, number>;
  }

  /**
   * The port of a cluster's metrics-server: the cluster blocks are full, so one port per cluster
   * after them and after the provider replicas' ports.
   */
  metricsServerPort(cluster: string, state = this.requireState()): number {
    const i = state.clusters.indexOf(cluster);
    if (i < 0) throw new Error(`unknown cluster ${cluster}; the sandbox has ${state.clusters.join(', ')}`);
    const replicas = state.providerReplicas ?? 1;
    return state.basePort + state.clusters.length * 10 + (replicas > 1 ? replicas * 3 : 0) + i;
  }

  /**
   * The ports of Kueue's manager (webhook, metrics, health): three after every other port of the
   * sandbox (the clusters' blocks, the provider replicas', metrics-server's).
   */
  kueuePorts(state = this.requireState()): KueuePorts {
    const replicas = state.providerReplicas ?? 1;
    const b = state.basePort + state.clusters.length * 11 + (replicas > 1 ? replicas * 3 : 0);
    return { webhook: b, metrics: b + 1, health: b + 2 };
  }

  /** Whether every process of every cluster is running. */
  isUp(): boolean {
    const s = this.state();
    if (!s) return false;
    return s.clusters.every((c) => this.components(s, c).every((comp) => this.specs(c, comp, s).every((spec) => isRunning(spec))));
  }

  /**
   * The components that run in `cluster`: the provider's processes only with a provider, the
   * proxy scheduler only in the source, the provider front only in front of several replicas.
   */
  private components(s: SandboxState, cluster: string): Component[] {
    return CLUSTER_COMPONENTS.filter((c) => {
      if (c === 'provider') return s.provider;
      if (c === 'proxy-scheduler') return s.provider && isSource(topologyOf(s), s.clusters, cluster);
      if (c === 'provider-front') return s.provider && this.providerReplicas(cluster, s) > 1;
      if (c === 'cluster-autoscaler-stand-in') return s.autoscalers?.includes(cluster) ?? false;
      if (c === 'metrics-server') return s.metricsServerBinDir !== undefined;
      if (c === 'kueue') return s.kueueBinDir !== undefined && cluster === KUEUE_CLUSTER;
      return true;
    });
  }

  /** How many provider processes run in `cluster`: only the source may run more than one. */
  providerReplicas(cluster: string, state = this.requireState()): number {
    return cluster === REPLICATED_CLUSTER ? (state.providerReplicas ?? 1) : 1;
  }

  /**
   * Ports of one provider replica. With one replica, the cluster's own; with more, each replica
   * has its own three ports in the block after the clusters' (the cluster's webhook port is then
   * the front's, where the apiserver and the proxy scheduler call).
   */
  providerPorts(cluster: string, replica: number, state = this.requireState()): { kubelet: number; webhook: number; metrics: number } {
    const p = this.ports(cluster, state);
    if (this.providerReplicas(cluster, state) === 1) return { kubelet: p.kubelet, webhook: p.webhook, metrics: p.metrics };
    const b = state.basePort + state.clusters.length * 10 + replica * 3;
    return { kubelet: b, webhook: b + 1, metrics: b + 2 };
  }

  /** Every process of a component: one per provider replica, one otherwise. */
  specs(cluster: string, component: Component, state = this.requireState()): ProcessSpec[] {
    if (component !== 'provider') return [this.spec(cluster, component, state)];
    return Array.from({ length: this.providerReplicas(cluster, state) }, (_, r) => this.providerSpec(cluster, r, state));
  }

  /** Starts the sandbox; on a running sandbox it does nothing. Missing processes are restarted. */
  async up(opts: UpOptions = {}): Promise<void> {
    this.log = opts.log ?? (() => {});
    const started = Date.now();
    mkdirSync(this.dir, { recursive: true });
    let state = this.state();
    const count = opts.clusters ?? 2;
    const fewest = opts.provider === false ? 1 : 2;
    if (!Number.isInteger(count) || count < fewest || count > 8) throw new Error(`clusters takes a whole number from ${fewest} to 8`);
    const wantClusters = Array.from({ length: count }, (_, i) => `c${i + 1}`);
    if (state && wantClusters.some((c) => !state!.clusters.includes(c))) {
      throw new Error(`the running sandbox has clusters ${state.clusters.join(', ')}; run \`down\` first to change the number of clusters`);
    }
    const topology = opts.topology ?? 'star';
    if (state && topologyOf(state) !== topology) {
      throw new Error(`the running sandbox has topology ${topologyOf(state)}; run \`down\` first to change it`);
    }
    const replicas = opts.providerReplicas ?? 1;
    if (!Number.isInteger(replicas) || replicas < 1 || replicas > 5) throw new Error('providerReplicas takes a whole number from 1 to 5');
    if (state && (state.providerReplicas ?? 1) !== replicas) {
      throw new Error(`the running sandbox has ${state.providerReplicas ?? 1} provider replica(s) in c1; run \`down\` first to change it`);
    }
    const gangs = opts.gangs ?? false;
    if (state && (state.gangs ?? false) !== gangs) {
      throw new Error(`the running sandbox has gang scheduling ${state.gangs ? 'on' : 'off'}; run \`down\` first to change it`);
    }
    const kueue = opts.kueue ?? false;
    if (state && (state.kueueBinDir !== undefined) !== kueue) {
      throw new Error(`the running sandbox runs ${state.kueueBinDir ? 'Kueue' : 'no Kueue'}; run \`down\` first to change it`);
    }
    if (state && this.isUp()) {
      this.log(`sandbox already up (${state.clusters.join(', ')})`);
      for (const c of opts.autoscalers ?? []) await this.startAutoscaler(c);
      return;
    }
    const binDir = this.build();
    const metricsServerBinDir = buildBinaries('metrics-server');
    const kueueBinDir = kueue ? buildBinaries('kueue') : undefined;
    if (!state) {
      state = {
        basePort: await this.pickBasePort(wantClusters.length * 11 + (replicas > 1 ? replicas * 3 : 0) + (kueue ? 3 : 0)),
        clusters: wantClusters,
        providerReplicas: replicas,
        ...(topology === 'star' ? {} : { topology }),
        binDir,
        metricsServerBinDir,
        kwokModuleDir: readFileSync(join(binDir, 'kwok-module-dir'), 'utf8').trim(),
        provider: opts.provider !== false && existsSync(join(REPO_ROOT, 'provider', 'main.ts')),
        ...(opts.completeJobPods === false ? { completeJobPods: false } : {}),
        ...(opts.providerLogLevel ? { providerLogLevel: opts.providerLogLevel } : {}),
        ...(gangs ? { gangs: true } : {}),
        ...(kueueBinDir ? { kueueBinDir } : {}),
      };
    } else {
      state.binDir = binDir;
      state.metricsServerBinDir = metricsServerBinDir;
      if (kueueBinDir) state.kueueBinDir = kueueBinDir;
      if (opts.providerLogLevel) state.providerLogLevel = opts.providerLogLevel;
    }
    writeFileSync(this.statePath, JSON.stringify(state, null, 2));
    mkdirSync(join(this.dir, 'bin'), { recursive: true });
    rmSync(this.kubectlPath, { force: true });
    symlinkSync(join(binDir, 'kubectl'), this.kubectlPath);

    const pki = ensurePki(join(this.dir, 'pki'));
    this.writeKubeconfigs(state, pki);
    await Promise.all(state.clusters.map((c) => this.upCluster(c, state!)));
    // Kueue needs only c1's control plane: it starts while the providers do.
    const withKueue = this.components(state, KUEUE_CLUSTER).includes('kueue');
    await Promise.all([this.upProviders(state, opts.connect !== false), ...(withKueue ? [this.startKueue(KUEUE_CLUSTER, state)] : [])]);
    for (const c of new Set([...(state.autoscalers ?? []), ...(opts.autoscalers ?? [])])) await this.startAutoscaler(c);
    this.log(`sandbox up in ${((Date.now() - started) / 1000).toFixed(1)} s: clusters ${state.clusters.join(', ')} (${topologyOf(state)}); kubeconfig ${this.kubeconfigPath}`);
  }

  /** Our objects, the providers and the proxy schedulers, then the connections (unless `connect` is false); nothing without a provider. */
  private async upProviders(state: SandboxState, connect: boolean): Promise<void> {
    if (!state.provider) return;
    await this.installManifests(state);
    await Promise.all(state.clusters.map((c) => this.startProvider(c, state)));
    await Promise.all(this.sources(state).map((c) => this.startProxyScheduler(c, state)));
    if (connect) await this.connect(state);
  }

  /** The clusters that send pods, in the sandbox's topology. */
  sources(state = this.requireState()): string[] {
    return topologyLinks(topologyOf(state), state.clusters).sources.map((s) => s.cluster);
  }

  /**
   * The identities whose requests the apiservers audit: both shipped ServiceAccounts and, for
   * each source, its Source's ServiceAccount in the targets (`system:serviceaccount:default:c1`…).
   */
  auditedUsers(state = this.requireState()): string[] {
    return [PROVIDER_USER, PROXY_SCHEDULER_USER, ...this.sources(state).map(sourceUser)];
  }

  /**
   * Runs the cluster-autoscaler stand-in (test/sandbox/cluster-autoscaler-stand-in.ts, a test
   * fixture) in `cluster`, with a default node group `<cluster>-burst` (min 0, max 3, 64 cpu,
   * 256Gi, 110 pods, nodes created 3 s after a scale-up) unless ConfigMap
   * `kube-system/cluster-autoscaler-stand-in` exists already. Idempotent; `down` stops it.
   */
  async startAutoscaler(cluster: string): Promise<void> {
    const state = this.requireState();
    this.ports(cluster, state); // an unknown cluster fails here
    if (!state.autoscalers?.includes(cluster)) {
      state.autoscalers = [...(state.autoscalers ?? []), cluster];
      writeFileSync(this.statePath, JSON.stringify(state, null, 2));
    }
    const region = REGIONS[state.clusters.indexOf(cluster) % REGIONS.length];
    const groups = [
      {
        name: `${cluster}-burst`,
        minSize: 0,
        maxSize: 3,
        provisionDelaySeconds: 3,
        template: { allocatable: { cpu: '64', memory: '256Gi', pods: '110' }, labels: { 'topology.kubernetes.io/region': region } },
      },
    ];
    const exists = await this.kubectl(cluster, 'get', 'configmap', '-n', 'kube-system', STAND_IN_CONFIGMAP, '--ignore-not-found', '-o', 'name');
    if (!exists.trim()) await this.kubectl(cluster, 'create', 'configmap', '-n', 'kube-system', STAND_IN_CONFIGMAP, `--from-literal=node-groups=${JSON.stringify(groups)}`);
    startProcess(this.spec(cluster, 'cluster-autoscaler-stand-in', state));
    this.log(`${cluster}: cluster-autoscaler stand-in running (test fixture; node groups in ConfigMap kube-system/${STAND_IN_CONFIGMAP})`);
  }

  /** Builds (or finds cached) control-plane binaries; returns their folder. */
  private build(): string {
    this.log('control-plane binaries: building or reusing the cache (a cold build takes many minutes)');
    return buildBinaries('control-plane');
  }

  /** Picks a block of ports, keyed by the sandbox folder, that is free on 127.0.0.1. */
  private async pickBasePort(count: number): Promise<number> {
    const h = createHash('sha256').update(this.dir).digest().readUInt32BE(0);
    for (let attempt = 0; attempt < 50; attempt++) {
      // Below the Linux ephemeral range (32768+) so outgoing connections never hold our ports.
      const base = 11000 + ((h + attempt * 7) % 200) * 100;
      const ports = Array.from({ length: count }, (_, i) => base + i);
      const free = await Promise.all(ports.map(portIsFree));
      if (free.every(Boolean)) return base;
    }
    throw new Error('no free block of ports found on 127.0.0.1');
  }

  private clusterDir(cluster: string): string {
    return join(this.dir, cluster);
  }

  /** Per-cluster admin kubeconfig files for the components, and the shared one with contexts. */
  private writeKubeconfigs(state: SandboxState, pki: SandboxPki): void {
    const ca = readFileSync(pki.caCert).toString('base64');
    const cert = readFileSync(pki.adminCert).toString('base64');
    const key = readFileSync(pki.adminKey).toString('base64');
    const entries = state.clusters.map((c) => ({ name: c, server: `https://127.0.0.1:${this.ports(c, state).apiserver}` }));
    const render = (list: typeof entries, current: string) =>
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters:',
        ...list.flatMap((e) => [`- name: ${e.name}`, '  cluster:', `    server: ${e.server}`, `    certificate-authority-data: ${ca}`]),
        'users:',
        ...list.flatMap((e) => [`- name: ${e.name}-admin`, '  user:', `    client-certificate-data: ${cert}`, `    client-key-data: ${key}`]),
        'contexts:',
        ...list.flatMap((e) => [`- name: ${e.name}`, '  context:', `    cluster: ${e.name}`, `    user: ${e.name}-admin`, '    namespace: default']),
        `current-context: ${current}`,
        '',
      ].join('\n');
    const [first] = entries;
    if (!first) throw new Error('a sandbox has no cluster to write a kubeconfig for');
    writeFileSync(this.kubeconfigPath, render(entries, first.name), { mode: 0o600 });
    for (const e of entries) {
      mkdirSync(this.clusterDir(e.name), { recursive: true });
      writeFileSync(join(this.clusterDir(e.name), 'admin.kubeconfig'), render([e], e.name), { mode: 0o600 });
    }
  }

  /** The process description of one component of one cluster. */
  spec(cluster: string, component: Component, state = this.requireState()): ProcessSpec {
    const pki = ensurePki(join(this.dir, 'pki'));
    const p = this.ports(cluster, state);
    const d = this.clusterDir(cluster);
    const bin = (b: string) => join(state.binDir, b);
    const kubeconfig = join(d, 'admin.kubeconfig');
    const base = { name: `${cluster}-${component}`, logFile: join(this.dir, 'logs', `${cluster}-${component}.log`), pidFile: join(this.dir, 'pids', `${cluster}-${component}.pid`) };
    const i = state.clusters.indexOf(cluster);
    switch (component) {
      case 'etcd':
        return {
          ...base,
          command: bin('etcd'),
          marker: join(d, 'etcd'),
          args: [
            '--name=n0',
            `--data-dir=${join(d, 'etcd')}`,
            '--unsafe-no-fsync=true',
            '--log-level=warn',
            `--listen-client-urls=http://127.0.0.1:${p.etcd}`,
            `--advertise-client-urls=http://127.0.0.1:${p.etcd}`,
            `--listen-peer-urls=http://127.0.0.1:${p.etcdPeer}`,
            `--initial-advertise-peer-urls=http://127.0.0.1:${p.etcdPeer}`,
            `--initial-cluster=n0=http://127.0.0.1:${p.etcdPeer}`,
            '--listen-metrics-urls=',
          ],
        };
      case 'kube-apiserver':
        return {
          ...base,
          command: bin('kube-apiserver'),
          marker: `--secure-port=${p.apiserver}`,
          args: [
            `--etcd-servers=http://127.0.0.1:${p.etcd}`,
            '--bind-address=127.0.0.1',
            `--secure-port=${p.apiserver}`,
            '--advertise-address=127.0.0.1',
            // A loopback advertise address fails Endpoints validation; nothing here needs them.
            '--endpoint-reconciler-type=none',
            `--cert-dir=${join(d, 'apiserver-certs')}`,
            `--tls-cert-file=${pki.apiserverCert}`,
            `--tls-private-key-file=${pki.apiserverKey}`,
            `--client-ca-file=${pki.caCert}`,
            '--authorization-mode=Node,RBAC',
            '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
            `--service-account-key-file=${pki.saPub}`,
            `--service-account-signing-key-file=${pki.saKey}`,
            '--service-cluster-ip-range=10.96.0.0/16',
            '--allow-privileged=true',
            // Kubelets (kwok's and the provider's) are reached on 127.0.0.1 and verified against the CA.
            '--kubelet-preferred-address-types=InternalIP,Hostname',
            `--kubelet-client-certificate=${pki.kubeletClientCert}`,
            `--kubelet-client-key=${pki.kubeletClientKey}`,
            `--kubelet-certificate-authority=${pki.caCert}`,
            // The aggregation layer, for metrics.k8s.io (metrics-server): the apiserver proxies
            // with the front proxy's client certificate and says who the user is in headers.
            `--requestheader-client-ca-file=${pki.frontProxyCaCert}`,
            '--requestheader-allowed-names=front-proxy-client',
            '--requestheader-username-headers=X-Remote-User',
            '--requestheader-group-headers=X-Remote-Group',
            '--requestheader-extra-headers-prefix=X-Remote-Extra-',
            `--proxy-client-cert-file=${pki.frontProxyClientCert}`,
            `--proxy-client-key-file=${pki.frontProxyClientKey}`,
            // Every request of the provider's and the proxy scheduler's ServiceAccounts, with its
            // response code: the e2e suite proves from it that the shipped RBAC is enough (no 403
            // for them, ever).
            `--audit-policy-file=${this.auditPolicyFile(state)}`,
            `--audit-log-path=${this.auditLogPath(cluster)}`,
            '--audit-log-format=json',
            '--audit-log-maxsize=200',
            '--audit-log-maxbackup=1',
            ...(state.gangs ? [GANG_FEATURE_GATES, GANG_RUNTIME_CONFIG] : []),
            '--profiling=false',
          ],
        };
      case 'kube-controller-manager':
        return {
          ...base,
          command: bin('kube-controller-manager'),
          marker: `--secure-port=${p.kcm}`,
          args: [
            `--kubeconfig=${kubeconfig}`,
            '--leader-elect=false',
            '--bind-address=127.0.0.1',
            `--secure-port=${p.kcm}`,
            '--controllers=*',
            `--service-account-private-key-file=${pki.saKey}`,
            `--root-ca-file=${pki.caCert}`,
            `--cluster-signing-cert-file=${pki.caCert}`,
            `--cluster-signing-key-file=${pki.caKey}`,
            '--use-service-account-credentials=false',
            // HPAs react within seconds rather than the default 15 s (test/e2e/metrics.test.ts).
            '--horizontal-pod-autoscaler-sync-period=5s',
            // Its PodGroup protection controller lifts a deleted PodGroup's finalizer once no pod names it.
            ...(state.gangs ? [GANG_FEATURE_GATES] : []),
            '--profiling=false',
          ],
        };
      case 'kube-scheduler':
        return {
          ...base,
          command: bin('kube-scheduler'),
          marker: `--secure-port=${p.scheduler}`,
          args: [`--kubeconfig=${kubeconfig}`, '--leader-elect=false', '--bind-address=127.0.0.1', `--secure-port=${p.scheduler}`, ...(state.gangs ? [GANG_FEATURE_GATES] : []), '--profiling=false'],
        };
      case 'kwok':
        return {
          ...base,
          command: bin('kwok'),
          marker: `--node-port=${p.kwok}`,
          args: [
            `--kubeconfig=${kubeconfig}`,
            // Only the sandbox's fake nodes: never the provider's virtual nodes.
            '--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake',
            ...kwokStages(state).map((f) => `--config=${f}`),
            '--enable-crds=Logs,ClusterLogs,Exec,ClusterExec,Attach,ClusterAttach,PortForward,ClusterPortForward,Metric,ClusterResourceUsage,ResourceUsage',
            '--node-ip=127.0.0.1',
            '--node-name=localhost',
            `--node-port=${p.kwok}`,
            `--server-address=127.0.0.1:${p.kwok}`,
            `--tls-cert-file=${pki.kwokCert}`,
            `--tls-private-key-file=${pki.kwokKey}`,
            '--node-lease-duration-seconds=40',
            `--cidr=10.${200 + i}.0.0/16`,
          ],
        };
      case 'metrics-server': {
        const port = this.metricsServerPort(cluster, state);
        const msKubeconfig = join(d, 'metrics-server.kubeconfig');
        return {
          ...base,
          command: join(state.metricsServerBinDir ?? '', 'metrics-server'),
          marker: `--secure-port=${port}`,
          args: [
            '--bind-address=127.0.0.1',
            `--secure-port=${port}`,
            `--tls-cert-file=${pki.metricsServerCert}`,
            `--tls-private-key-file=${pki.metricsServerKey}`,
            // Its own ServiceAccount, with upstream's RBAC (METRICS_SERVER_YAML).
            `--kubeconfig=${msKubeconfig}`,
            `--authentication-kubeconfig=${msKubeconfig}`,
            `--authorization-kubeconfig=${msKubeconfig}`,
            // Kubelets as the node says: kwok's and the provider's, both on 127.0.0.1, each on its
            // own port, serving certificates the sandbox CA signed.
            '--kubelet-preferred-address-types=InternalIP',
            '--kubelet-use-node-status-port',
            `--kubelet-certificate-authority=${pki.caCert}`,
            // The shortest resolution metrics-server accepts; the request timeout must be less.
            '--metric-resolution=10s',
            '--kubelet-request-timeout=5s',
            '--profiling=false',
          ],
        };
      }
      case 'provider':
        return this.providerSpec(cluster, 0, state);
      case 'provider-front': {
        const replicas = Array.from({ length: this.providerReplicas(cluster, state) }, (_, r) => this.providerPorts(cluster, r, state));
        return {
          ...base,
          command: process.execPath,
          cwd: REPO_ROOT,
          marker: `--listen=${p.webhook}`,
          restart: true,
          args: [
            '--import',
            'tsx',
            join(REPO_ROOT, 'test', 'sandbox', 'tcp-front.ts'),
            `--listen=${p.webhook}`,
            `--backends=${replicas.map((r) => r.webhook).join(',')}`,
            `--readyz=${replicas.map((r) => r.metrics).join(',')}`,
          ],
        };
      }
      case 'cluster-autoscaler-stand-in':
        return {
          ...base,
          command: process.execPath,
          cwd: REPO_ROOT,
          marker: `cluster-autoscaler-stand-in-main.ts --kubeconfig=${kubeconfig}`,
          restart: true,
          args: ['--import', 'tsx', join(REPO_ROOT, 'test', 'sandbox', 'cluster-autoscaler-stand-in-main.ts'), `--kubeconfig=${kubeconfig}`, '--scan-interval-ms=2000'],
        };
      case 'kueue': {
        const paths = this.kueuePaths(cluster);
        return {
          ...base,
          command: join(state.kueueBinDir ?? '', 'kueue'),
          marker: `--config=${paths.config}`,
          // As its Deployment would restart it.
          restart: true,
          args: [`--config=${paths.config}`, `--kubeconfig=${paths.kubeconfig}`],
        };
      }
      case 'proxy-scheduler': {
        const saKubeconfig = this.proxySchedulerPaths(cluster).kubeconfig;
        return {
          ...base,
          command: bin('kube-scheduler'),
          marker: `--secure-port=${p.proxyScheduler}`,
          // As its Deployment would: a scheduler that loses its Lease exits, and comes back.
          restart: true,
          args: [
            `--config=${this.proxySchedulerPaths(cluster).config}`,
            '--bind-address=127.0.0.1',
            `--secure-port=${p.proxyScheduler}`,
            // In cluster, delegated authn/authz of the secure port use the in-cluster credentials;
            // out of cluster they must be named, or they are skipped (and their RBAC never tested).
            `--authentication-kubeconfig=${saKubeconfig}`,
            `--authorization-kubeconfig=${saKubeconfig}`,
            '--profiling=false',
          ],
        };
      }
    }
  }

  /** One provider replica of `cluster`: replica 0 keeps the names of a single provider. */
  private providerSpec(cluster: string, replica: number, state: SandboxState): ProcessSpec {
    const name = replica === 0 ? `${cluster}-provider` : `${cluster}-provider-${replica}`;
    const ports = this.providerPorts(cluster, replica, state);
    return {
      name,
      logFile: join(this.dir, 'logs', `${name}.log`),
      pidFile: join(this.dir, 'pids', `${name}.pid`),
      command: process.execPath,
      cwd: REPO_ROOT,
      marker: `--metrics-port=${ports.metrics}`,
      // As its Deployment would: a provider that exits (it does on losing leadership) comes back.
      restart: true,
      // The image's NODE_OPTIONS, then any of the caller's (a benchmark's), which win.
      env: { ...process.env, NODE_ENV: 'sandbox', POD_NAME: name, NODE_OPTIONS: [SHIPPED_NODE_OPTIONS, process.env.NODE_OPTIONS].filter(Boolean).join(' ') },
      // Not shippedCli(): spec() also serves stop(), which must work without dist/.
      // SANDBOX_PROVIDER_NODE_ARGS: flags for node itself, which NODE_OPTIONS refuses (`--cpu-prof --cpu-prof-dir=…`, to profile a benchmark's provider).
      args: [...(process.env.SANDBOX_PROVIDER_NODE_ARGS ?? '').split(' ').filter(Boolean), join(REPO_ROOT, 'bin', 'admiralty.js'), 'provider', ...this.providerArgs(cluster, state, replica)],
    };
  }

  /** Files of the proxy scheduler of `cluster`: its config, the provider's CA, its client certificate, its ServiceAccount's kubeconfig. */
  private proxySchedulerPaths(cluster: string) {
    const d = join(this.clusterDir(cluster), 'proxy-scheduler');
    return { dir: d, config: join(d, 'config.yaml'), caFile: join(d, 'ca.crt'), certFile: join(d, 'client.crt'), keyFile: join(d, 'client.key'), kubeconfig: join(d, 'kubeconfig') };
  }

  /** Files of Kueue's manager in `cluster`: its Configuration, its ServiceAccount's kubeconfig, the folder its certificate rotator writes to, its RBAC's kustomization. */
  private kueuePaths(cluster: string) {
    const d = join(this.clusterDir(cluster), 'kueue');
    return { dir: d, config: join(d, 'config.yaml'), kubeconfig: join(d, 'kubeconfig'), certDir: join(d, 'certs'), rbac: join(d, 'rbac') };
  }

  /**
   * Installs Kueue in `cluster` as its default install does, out of cluster (see kueue.ts): its
   * CRDs (server-side: some are too large for a client-side apply's annotation), namespace,
   * Secret and webhook Service, its RBAC from its module for ServiceAccount
   * kueue-system/kueue-controller-manager, its webhook configurations; then runs its manager
   * with a token kubeconfig of that ServiceAccount and waits for its /readyz, which it answers
   * once its certificates are in place and its webhook server listens. Idempotent; `start c1
   * kueue` calls it too (a new token, the same objects).
   */
  private async startKueue(cluster: string, state: SandboxState): Promise<void> {
    const t0 = Date.now();
    const bin = state.kueueBinDir!;
    const ports = this.kueuePorts(state);
    const paths = this.kueuePaths(cluster);
    mkdirSync(paths.rbac, { recursive: true });
    mkdirSync(paths.certDir, { recursive: true });
    const crds = readdirSync(join(bin, 'kueue-crds'))
      .filter((f) => f.endsWith('.yaml'))
      .sort()
      .map((f) => kueueCrd(readFileSync(join(bin, 'kueue-crds', f), 'utf8'), ports.webhook));
    await this.applyServerSide(cluster, [kueueNamespaceYaml(ports.webhook), ...crds].join('---\n'));
    await this.kubectl(cluster, 'wait', '--for=condition=Established', '--timeout=60s', ...KUEUE_CONVERTED_CRDS.map((n) => `crd/${n}`));
    // kustomize takes no absolute path for a base.
    writeFileSync(join(paths.rbac, 'kustomization.yaml'), kueueRbacKustomization(relative(paths.rbac, join(bin, 'kueue-rbac'))));
    await this.kubectl(cluster, 'apply', '--server-side', '--field-manager=sandbox', '-k', paths.rbac);
    await this.applyServerSide(cluster, kueueWebhookConfigurations(readFileSync(join(bin, 'kueue-webhooks.yaml'), 'utf8'), ports.webhook));
    await this.writeServiceAccountKubeconfig(cluster, state, KUEUE_SERVICE_ACCOUNT, paths.kubeconfig, KUEUE_NAMESPACE);
    writeFileSync(paths.config, kueueConfiguration(ports, paths.certDir));
    startProcess(this.spec(cluster, 'kueue', state));
    await this.mountKueueCertificate(cluster, paths.certDir);
    await waitFor(`${cluster} kueue`, 90_000, () => httpOk(`http://127.0.0.1:${ports.health}/readyz`));
    this.log(`${cluster}: kueue ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }

  /**
   * Stands in for the kubelet's Secret volume of Kueue's Deployment: its certificate rotator
   * writes the serving certificate into Secret kueue-webhook-server-cert and then waits for the
   * files to appear in its `webhook.certDir`, where a pod has that Secret mounted. Copies
   * `tls.crt` and `tls.key` once the Secret has them (at once on a restart). The certificate
   * lasts longer than any sandbox, so a rotation, which a volume would follow, never comes.
   */
  private async mountKueueCertificate(cluster: string, certDir: string): Promise<void> {
    let pair: string[] = [];
    await waitFor(`${cluster} Secret ${KUEUE_NAMESPACE}/${KUEUE_WEBHOOK_SECRET} filled in by kueue`, 60_000, async () => {
      const out = await this.kubectl(cluster, 'get', 'secret', KUEUE_WEBHOOK_SECRET, '-n', KUEUE_NAMESPACE, '-o', 'jsonpath={.data.tls\\.crt} {.data.tls\\.key}').catch(() => '');
      pair = out.trim().split(' ').filter(Boolean);
      return pair.length === 2;
    });
    writeFileSync(join(certDir, 'tls.key'), Buffer.from(pair[1]!, 'base64'), { mode: 0o600 });
    writeFileSync(join(certDir, 'tls.crt'), Buffer.from(pair[0]!, 'base64'));
  }

  /** Applies YAML given as a string, server-side (field manager `sandbox`). */
  private applyServerSide(cluster: string, yaml: string): Promise<string> {
    return new Promise((res, rej) => {
      const child = execFile(
        this.kubectlPath,
        ['--kubeconfig', this.kubeconfigPath, '--context', cluster, 'apply', '--server-side', '--field-manager=sandbox', '-f', '-'],
        { maxBuffer: 64 << 20 },
        (err, stdout, stderr) => (err ? rej(new Error(`kubectl apply --server-side on ${cluster} failed: ${stderr || err.message}`)) : res(stdout)),
      );
      child.stdin!.end(yaml);
    });
  }

  /** Audit log of one cluster's apiserver: one JSON event per line, the requests of the identities of {@link auditedUsers} only. */
  auditLogPath(cluster: string): string {
    return join(this.clusterDir(cluster), 'audit.log');
  }

  /** When a stopped apiserver was started again and when it became ready, one JSON line each. */
  private apiserverStartsPath(cluster: string): string {
    return join(this.clusterDir(cluster), 'apiserver-starts.jsonl');
  }

  /** {@link forbiddenRequests} of the provider's ServiceAccount. */
  providerForbiddenRequests(cluster: string): string[] | undefined {
    return this.forbiddenRequests(cluster, PROVIDER_USER);
  }

  /**
   * The requests of `user` (one of {@link auditedUsers}) that the authorizer of `cluster`'s
   * apiserver, or one of its ValidatingAdmissionPolicies, refused since it started (not other
   * 403s of admission, e.g. in a namespace being deleted), as `verb resource[/subresource]
   * [namespace/]name`, followed by ` (ValidatingAdmissionPolicy <name>)` for a policy's, from the
   * audit log (current file and its one backup). Dry runs (`?dryRun=All`) are left out unless
   * `includeDryRuns`: the providers never make one, tests probe with them. Undefined when this
   * apiserver keeps no audit log (a sandbox started before the log existed).
   */
  forbiddenRequests(cluster: string, user: string, opts: { includeDryRuns?: boolean } = {}): string[] | undefined {
    const log = this.auditLogPath(cluster);
    if (!existsSync(log)) return undefined;
    // Refusals while a restarted apiserver was not ready yet say nothing about our RBAC.
    const starting = existsSync(this.apiserverStartsPath(cluster))
      ? readFileSync(this.apiserverStartsPath(cluster), 'utf8')
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as { startedMs: number; readyMs: number })
      : [];
    const dir = dirname(log);
    const files = readdirSync(dir)
      .filter((f) => f.startsWith('audit') && f.endsWith('.log'))
      .map((f) => join(dir, f));
    const refused: string[] = [];
    for (const f of files) {
      for (const line of readFileSync(f, 'utf8').split('\n')) {
        if (!line.includes('"forbid"') && !line.includes('ValidatingAdmissionPolicy')) continue;
        const e = JSON.parse(line) as {
          stageTimestamp?: string;
          requestURI?: string;
          user?: { username?: string };
          verb?: string;
          annotations?: Record<string, string>;
          objectRef?: { resource?: string; subresource?: string; namespace?: string; name?: string };
          responseStatus?: { code?: number; message?: string };
        };
        if (e.user?.username !== user) continue;
        // The apiserver's own words for a policy's Deny: "ValidatingAdmissionPolicy '<name>' with binding '<name>' denied request: …".
        const policy =
          e.responseStatus?.code && e.responseStatus.code >= 400 ? /ValidatingAdmissionPolicy '([^']+)' with binding '[^']+' denied request/.exec(e.responseStatus.message ?? '')?.[1] : undefined;
        if (e.annotations?.['authorization.k8s.io/decision'] !== 'forbid' && !policy) continue;
        if (!opts.includeDryRuns && new URL(e.requestURI ?? '/', 'https://x').searchParams.has('dryRun')) continue;
        const at = Date.parse(e.stageTimestamp ?? '');
        if (starting.some((w) => at >= w.startedMs && at <= w.readyMs)) continue;
        const o = e.objectRef ?? {};
        const what = `${e.verb} ${o.resource ?? '?'}${o.subresource ? `/${o.subresource}` : ''} ${o.namespace ? `${o.namespace}/` : ''}${o.name ?? ''}`.trim();
        refused.push(policy ? `${what} (ValidatingAdmissionPolicy ${policy})` : what);
      }
    }
    return refused;
  }

  /**
   * The watches `user` (one of {@link auditedUsers}) asked `cluster`'s apiserver for, oldest
   * first: when, the path, its field selector and the answer's code, from the audit log (current
   * file and its one backup). Undefined when this apiserver keeps no audit log.
   */
  auditedWatches(cluster: string, user: string): { at: string; path: string; fieldSelector: string; code?: number }[] | undefined {
    const log = this.auditLogPath(cluster);
    if (!existsSync(log)) return undefined;
    const dir = dirname(log);
    const watches: { at: string; path: string; fieldSelector: string; code?: number }[] = [];
    for (const f of readdirSync(dir).filter((f) => f.startsWith('audit') && f.endsWith('.log'))) {
      for (const line of readFileSync(join(dir, f), 'utf8').split('\n')) {
        if (!line.includes('"watch"')) continue;
        const e = JSON.parse(line) as { user?: { username?: string }; verb?: string; requestURI?: string; stageTimestamp?: string; responseStatus?: { code?: number } };
        if (e.user?.username !== user || e.verb !== 'watch' || !e.requestURI) continue;
        const uri = new URL(e.requestURI, 'https://x');
        watches.push({ at: e.stageTimestamp ?? '', path: uri.pathname, fieldSelector: uri.searchParams.get('fieldSelector') ?? '', code: e.responseStatus?.code });
      }
    }
    return watches.sort((a, b) => a.at.localeCompare(b.at));
  }

  /**
   * Writes (idempotently) the audit policy: Metadata level for {@link auditedUsers}, nothing else.
   * One file for every cluster, and the clusters start at once: a file that already says the same
   * is left alone, and a new one replaces it whole (a rename), so that no apiserver ever reads it
   * half written (one did, in a run: "unknown group version field" for an empty file).
   */
  auditPolicyFile(state: SandboxState): string {
    const file = join(this.dir, 'audit-policy.yaml');
    const text = [
      'apiVersion: audit.k8s.io/v1',
      'kind: Policy',
      'omitStages: [RequestReceived]',
      'rules:',
      `- level: Metadata`,
      `  users: [${this.auditedUsers(state)
        .map((u) => `"${u}"`)
        .join(', ')}]`,
      '- level: None',
      '',
    ].join('\n');
    if (existsSync(file) && readFileSync(file, 'utf8') === text) return file;
    mkdirSync(this.dir, { recursive: true });
    const partial = `${file}.${process.pid}.partial`;
    writeFileSync(partial, text);
    renameSync(partial, file);
    return file;
  }

  /**
   * Flags of a cluster's provider. In the default topology (star) c1 is the source and runs
   * everything, the other clusters run the target-side parts; in the others every provider runs
   * every component.
   */
  providerArgs(cluster: string, state = this.requireState(), replica = 0): string[] {
    const p = this.ports(cluster, state);
    const own = this.providerPorts(cluster, replica, state);
    const d = this.clusterDir(cluster);
    const args = [
      `--kubeconfig=${join(d, 'provider.kubeconfig')}`,
      `--cluster-name=${cluster}`,
      '--namespace=admiralty',
      '--kubelet-address=127.0.0.1',
      '--kubelet-bind-address=127.0.0.1',
      // Each replica's own kubelet port: the leader writes it in the virtual nodes, as in a
      // cluster the leader writes its pod IP.
      `--kubelet-port=${own.kubelet}`,
      '--webhook-bind-address=127.0.0.1',
      `--webhook-port=${own.webhook}`,
      // Where the apiserver calls: the cluster's webhook port (the front, with several replicas).
      `--webhook-url=https://127.0.0.1:${p.webhook}/mutate`,
      '--metrics-bind-address=127.0.0.1',
      `--metrics-port=${own.metrics}`,
      '--log-format=json',
      `--log-level=${state.providerLogLevel ?? 'debug'}`,
      // Every sandbox cluster listens on 127.0.0.1: the one setting a real install never needs.
      '--allow-loopback-targets',
    ];
    if (topologyOf(state) === 'star' && cluster !== FIRST_CLUSTER) args.push('--enable=summary,sources');
    return args;
  }

  /** {@link waitFor} a component of a cluster; when it times out, the error ends with the component's log. */
  private async waitForComponent(cluster: string, component: 'etcd' | 'kube-apiserver', state: SandboxState, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
    try {
      await waitFor(`${cluster} ${component}`, timeoutMs, check);
    } catch (err) {
      const spec = this.spec(cluster, component, state);
      const tail = logTail(spec.logFile);
      throw new Error(`${(err as Error).message} (process ${isRunning(spec) ? 'running' : 'not running'}); ${tail ? `the end of ${spec.logFile}:\n${tail}` : `no log at ${spec.logFile}`}`, {
        cause: err,
      });
    }
  }

  private async upCluster(cluster: string, state: SandboxState): Promise<void> {
    const t0 = Date.now();
    const kubectl = (...args: string[]) => this.kubectl(cluster, ...args);
    startProcess(this.spec(cluster, 'etcd', state));
    await this.waitForComponent(cluster, 'etcd', state, 30_000, () => httpOk(`http://127.0.0.1:${this.ports(cluster, state).etcd}/health`));
    startProcess(this.spec(cluster, 'kube-apiserver', state));
    await this.waitForComponent(cluster, 'kube-apiserver', state, 90_000, () => this.apiserverReady(cluster, state));
    startProcess(this.spec(cluster, 'kube-controller-manager', state));
    startProcess(this.spec(cluster, 'kube-scheduler', state));

    // The apiserver's kubelet client may call kubelets (kwok's and the provider's), as with kubeadm.
    await this.applyYaml(cluster, KUBELET_CLIENT_RBAC);
    const crdDir = join(state.kwokModuleDir, 'kustomize', 'crd', 'bases');
    const kinds = ['logs', 'clusterlogs', 'execs', 'clusterexecs', 'attaches', 'clusterattaches', 'portforwards', 'clusterportforwards', 'metrics', 'clusterresourceusages', 'resourceusages'];
    await kubectl('apply', '--server-side', ...kinds.flatMap((kind) => ['-f', join(crdDir, `kwok.x-k8s.io_${kind}.yaml`)]));
    await kubectl('wait', '--for=condition=Established', '--timeout=60s', ...kinds.map((kind) => `crd/${kind}.kwok.x-k8s.io`));
    await this.applyYaml(cluster, this.fakeNodesYaml(cluster, state));
    await this.applyYaml(cluster, this.kwokDefaultsYaml(cluster));
    // kwok's own Metric: the kubelet's /metrics/resource of each fake node, at the path the
    // nodes' metrics.k8s.io/resource-metrics-path annotation names, from the simulated usage.
    await kubectl('apply', '--server-side', '-f', join(state.kwokModuleDir, 'kustomize', 'metrics', 'resource', 'metrics-resource.yaml'));
    startProcess(this.spec(cluster, 'kwok', state));
    await this.startMetricsServer(cluster, state);
    await waitFor(`${cluster} default ServiceAccount`, 60_000, async () => (await kubectl('get', 'serviceaccount', 'default', '-n', 'default', '-o', 'name').catch(() => '')).includes('default'));
    await waitFor(`${cluster} fake nodes Ready`, 60_000, async () => {
      const out = await kubectl('get', 'nodes', '-l', 'type=kwok', '-o', 'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{" "}{end}').catch(() => '');
      const ready = out
        .trim()
        .split(/\s+/)
        .filter((s) => s === 'True');
      return ready.length === 2;
    });
    this.log(`${cluster}: control plane and 2 fake nodes ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }

  private fakeNodesYaml(cluster: string, state: SandboxState): string {
    const i = state.clusters.indexOf(cluster);
    const region = REGIONS[i % REGIONS.length];
    return [0, 1]
      .map((n) =>
        [
          'apiVersion: v1',
          'kind: Node',
          'metadata:',
          `  name: ${cluster}-node-${n}`,
          '  annotations:',
          '    kwok.x-k8s.io/node: fake',
          // Where kwok serves this node's resource metrics (its Metric metrics-resource).
          `    metrics.k8s.io/resource-metrics-path: /metrics/nodes/${cluster}-node-${n}/metrics/resource`,
          '    node.alpha.kubernetes.io/ttl: "0"',
          '  labels:',
          '    type: kwok',
          `    kubernetes.io/hostname: ${cluster}-node-${n}`,
          '    kubernetes.io/os: linux',
          '    kubernetes.io/arch: amd64',
          `    topology.kubernetes.io/region: ${region}`,
          `    topology.kubernetes.io/zone: ${region}-${n === 0 ? 'a' : 'b'}`,
          'spec:',
          `  podCIDR: 10.${200 + i}.${n}.0/24`,
          'status:',
          '  capacity: {cpu: "32", memory: 256Gi, pods: "600"}',
          '  allocatable: {cpu: "32", memory: 256Gi, pods: "600"}',
        ].join('\n'),
      )
      .join('\n---\n');
  }

  /** What every fake container logs by default, and where exec runs (a scratch folder). */
  private kwokDefaultsYaml(cluster: string): string {
    const d = this.clusterDir(cluster);
    mkdirSync(join(d, 'fake-logs'), { recursive: true });
    mkdirSync(join(d, 'exec'), { recursive: true });
    const logFile = join(d, 'fake-logs', 'default.log');
    // kwok reads container logs in the CRI format: `<RFC 3339 time> <stream> <F|P> <text>`.
    if (!existsSync(logFile)) writeFileSync(logFile, `${new Date().toISOString()} stdout F hello from a fake container in ${cluster}\n`);
    return [
      'apiVersion: kwok.x-k8s.io/v1alpha1',
      'kind: ClusterLogs',
      'metadata: {name: sandbox-default}',
      'spec:',
      // Only namespace default: kwok prefers a ClusterLogs over a per-pod Logs, and tests define
      // their own logs in namespaces of their own.
      '  selector: {matchNamespaces: [default]}',
      '  logs:',
      `  - logsFile: ${logFile}`,
      '    follow: true',
      '---',
      'apiVersion: kwok.x-k8s.io/v1alpha1',
      'kind: ClusterExec',
      'metadata: {name: sandbox-default}',
      'spec:',
      '  selector: {}',
      '  execs:',
      '  - local:',
      `      workDir: ${join(d, 'exec')}`,
      '      envs: [{name: SANDBOX_CLUSTER, value: ' + cluster + '}]',
      '---',
      // What metrics-server reads from kwok for the pods of namespace default: 1m of CPU and
      // 1Mi of memory per container, or what the pod's annotations kwok.x-k8s.io/usage-cpu and
      // kwok.x-k8s.io/usage-memory say. Only namespace default, as the ClusterLogs: kwok takes
      // the first ClusterResourceUsage that matches in no set order, so a test defines its own
      // for a namespace of its own.
      'apiVersion: kwok.x-k8s.io/v1alpha1',
      'kind: ClusterResourceUsage',
      'metadata: {name: sandbox-default}',
      'spec:',
      '  selector: {matchNamespaces: [default]}',
      '  usages:',
      '  - usage:',
      '      cpu: {expression: \'"kwok.x-k8s.io/usage-cpu" in pod.metadata.annotations ? Quantity(pod.metadata.annotations["kwok.x-k8s.io/usage-cpu"]) : Quantity("1m")\'}',
      '      memory: {expression: \'"kwok.x-k8s.io/usage-memory" in pod.metadata.annotations ? Quantity(pod.metadata.annotations["kwok.x-k8s.io/usage-memory"]) : Quantity("1Mi")\'}',
    ].join('\n');
  }

  /**
   * Runs metrics-server in `cluster` as its upstream manifests would, out of cluster: its own
   * ServiceAccount and RBAC, a token kubeconfig, and the APIService v1beta1.metrics.k8s.io
   * through a Service of type ExternalName to 127.0.0.1 (the aggregator resolves such a Service
   * to its name and the APIService's port; a ClusterIP would need endpoints, which may not be
   * loopback), verified against the sandbox CA. Does not wait for its first scrape.
   */
  private async startMetricsServer(cluster: string, state: SandboxState): Promise<void> {
    const t0 = Date.now();
    const pki = ensurePki(join(this.dir, 'pki'));
    const port = this.metricsServerPort(cluster, state);
    await this.applyYaml(cluster, metricsServerYaml(port, readFileSync(pki.caCert).toString('base64')));
    await this.writeServiceAccountKubeconfig(cluster, state, 'metrics-server', join(this.clusterDir(cluster), 'metrics-server.kubeconfig'), 'kube-system');
    startProcess(this.spec(cluster, 'metrics-server', state));
    await waitFor(`${cluster} metrics-server`, 60_000, () => httpsUnverifiedOk(`https://127.0.0.1:${port}/livez`));
    this.log(`${cluster}: metrics-server serving in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }

  private async apiserverReady(cluster: string, state: SandboxState): Promise<boolean> {
    const pki = ensurePki(join(this.dir, 'pki'));
    return httpsOk(`https://127.0.0.1:${this.ports(cluster, state).apiserver}/readyz`, pki);
  }

  /** Runs the sandbox's kubectl against one cluster; resolves with stdout. */
  async kubectl(cluster: string, ...args: string[]): Promise<string> {
    const { stdout } = await execFileAsync(this.kubectlPath, ['--kubeconfig', this.kubeconfigPath, '--context', cluster, ...args], { maxBuffer: 64 << 20 });
    return stdout;
  }

  /** Applies YAML given as a string. */
  async applyYaml(cluster: string, yaml: string): Promise<string> {
    return new Promise((res, rej) => {
      const child = execFile(this.kubectlPath, ['--kubeconfig', this.kubeconfigPath, '--context', cluster, 'apply', '-f', '-'], (err, stdout, stderr) =>
        err ? rej(new Error(`kubectl apply on ${cluster} failed: ${stderr || err.message}`)) : res(stdout),
      );
      child.stdin!.end(yaml);
    });
  }

  /**
   * Installs CRDs and RBAC (manifests/sandbox) and the provider's own kubeconfig in every cluster,
   * and in the source the proxy scheduler's ServiceAccount and RBAC (manifests/scheduler/rbac,
   * not its Deployment: it runs as a local process) and its kubeconfig.
   */
  private async installManifests(state: SandboxState): Promise<void> {
    await Promise.all(
      state.clusters.map(async (c) => {
        await this.kubectl(c, 'apply', '--server-side', '-k', join(REPO_ROOT, 'manifests', 'sandbox'));
        await this.kubectl(c, 'wait', '--for=condition=Established', '--timeout=60s', 'crd/targets.multicluster.admiralty.io', 'crd/clustersummaries.multicluster.admiralty.io');
        await this.writeServiceAccountKubeconfig(c, state, 'admiralty', join(this.clusterDir(c), 'provider.kubeconfig'));
      }),
    );
    await Promise.all(
      this.sources(state).map(async (c) => {
        await this.kubectl(c, 'apply', '--server-side', '-k', join(REPO_ROOT, 'manifests', 'scheduler', 'rbac'));
        mkdirSync(this.proxySchedulerPaths(c).dir, { recursive: true });
        await this.writeServiceAccountKubeconfig(c, state, 'admiralty-proxy-scheduler', this.proxySchedulerPaths(c).kubeconfig);
        await this.applyYaml(c, this.webhookConfigYaml(c, state));
      }),
    );
  }

  /**
   * The provider and the proxy scheduler run as their shipped ServiceAccounts (not
   * cluster-admin), with a token from the TokenRequest API.
   */
  private async writeServiceAccountKubeconfig(cluster: string, state: SandboxState, serviceAccount: string, file: string, namespace = 'admiralty'): Promise<void> {
    const token = (await this.kubectl(cluster, 'create', 'token', serviceAccount, '-n', namespace, '--duration=48h')).trim();
    const ca = readFileSync(join(this.dir, 'pki', 'ca.crt')).toString('base64');
    writeFileSync(
      file,
      [
        'apiVersion: v1',
        'kind: Config',
        `clusters: [{name: ${cluster}, cluster: {server: "https://127.0.0.1:${this.ports(cluster, state).apiserver}", certificate-authority-data: ${ca}}}]`,
        `users: [{name: ${serviceAccount}, user: {token: ${token}}}]`,
        `contexts: [{name: ${cluster}, context: {cluster: ${cluster}, user: ${serviceAccount}, namespace: ${namespace}}}]`,
        `current-context: ${cluster}`,
        '',
      ].join('\n'),
      { mode: 0o600 },
    );
  }

  /** Out of cluster, the apiserver calls the webhook at a loopback URL instead of a Service. */
  private webhookConfigYaml(cluster: string, state: SandboxState): string {
    const url = `https://127.0.0.1:${this.ports(cluster, state).webhook}/mutate`;
    return `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: admiralty
webhooks:
- name: proxypods.multicluster.admiralty.io
  clientConfig:
    url: ${url}
  rules:
  - apiGroups: [""]
    apiVersions: [v1]
    operations: [CREATE]
    resources: [pods]
  namespaceSelector:
    matchLabels: {multicluster-scheduler: enabled}
  matchConditions:
  - name: elected
    expression: "has(object.metadata.annotations) && 'multicluster.admiralty.io/elect' in object.metadata.annotations"
  failurePolicy: Fail
  timeoutSeconds: 5
  sideEffects: None
  admissionReviewVersions: [v1]
  reinvocationPolicy: IfNeeded
`;
  }

  private async startProvider(cluster: string, state: SandboxState, extraArgs: readonly string[] = []): Promise<void> {
    shippedCli(); // fail with the reason before a start that could only time out
    if (this.components(state, cluster).includes('provider-front')) startProcess(this.spec(cluster, 'provider-front', state));
    const specs = this.specs(cluster, 'provider', state);
    for (const spec of specs) startProcess({ ...spec, args: [...spec.args, ...extraArgs] });
    // Every replica, leader or standby, is Ready once it can serve.
    await Promise.all(specs.map((spec, r) => waitFor(`${spec.name}`, 60_000, () => httpOk(`http://127.0.0.1:${this.providerPorts(cluster, r, state).metrics}/readyz`))));
  }

  /**
   * Stops one provider replica for good (its restart loop too), as scaling a Deployment down
   * does: SIGTERM, so it drains and hands its work back. The front stops choosing it once its
   * port refuses.
   */
  async stopProviderReplica(cluster: string, replica: number): Promise<void> {
    await stopProcess(this.providerSpec(cluster, replica, this.requireState()));
  }

  /** Starts one provider replica again (scaling up), with `extraArgs` as {@link start} takes them; resolves once it is Ready. */
  async startProviderReplica(cluster: string, replica: number, extraArgs: readonly string[] = []): Promise<void> {
    const state = this.requireState();
    shippedCli();
    const spec = this.providerSpec(cluster, replica, state);
    startProcess({ ...spec, args: [...spec.args, ...extraArgs] });
    await waitFor(spec.name, 60_000, () => httpOk(`http://127.0.0.1:${this.providerPorts(cluster, replica, state).metrics}/readyz`));
  }

  /**
   * Kills one provider replica's process with `signal` and leaves its restart loop alone, which
   * starts it again a second later, as a kubelet restarts a container. Returns the killed pid.
   */
  killProviderReplica(cluster: string, replica: number, signal: NodeJS.Signals = 'SIGKILL'): number {
    const spec = this.providerSpec(cluster, replica, this.requireState());
    const loop = readPid(spec.pidFile);
    if (loop === undefined || !isRunning(spec)) throw new Error(`${spec.name} is not running`);
    // The command is the restart loop's child: find it by its parent and our marker.
    const child = readdirSync('/proc')
      .filter((d) => /^\d+$/.test(d))
      .map(Number)
      .find((pid) => {
        try {
          return (
            readFileSync(`/proc/${pid}/stat`, 'utf8')
              .replace(/^.*\) /, '')
              .split(' ')[1] === String(loop) && isOurs(pid, spec.marker)
          );
        } catch {
          return false;
        }
      });
    if (child === undefined) throw new Error(`${spec.name}: its restart loop runs no provider right now`);
    process.kill(child, signal);
    return child;
  }

  /**
   * Starts the source's proxy scheduler on the shipped configuration (manifests/scheduler/config.yaml)
   * with only what out of cluster requires changed (see {@link outOfClusterSchedulerConfig}): the
   * extender is the provider's webhook server on 127.0.0.1, verified against the provider's CA
   * (read from Secret admiralty-webhook-cert, which the provider has written once it is ready),
   * and the scheduler authenticates with the client certificate of Secret
   * admiralty-proxy-scheduler-client (written by then too).
   * Idempotent; rewrites the CA file and config on every call.
   */
  private async startProxyScheduler(cluster: string, state: SandboxState): Promise<void> {
    const paths = this.proxySchedulerPaths(cluster);
    mkdirSync(paths.dir, { recursive: true });
    const caB64 = await this.kubectl(cluster, 'get', 'secret', 'admiralty-webhook-cert', '-n', 'admiralty', '-o', 'jsonpath={.data.ca\\.crt}');
    if (!caB64.trim()) throw new Error(`${cluster}: Secret admiralty/admiralty-webhook-cert has no ca.crt`);
    writeFileSync(paths.caFile, Buffer.from(caB64.trim(), 'base64'));
    // The client certificate the extender requires, as the Deployment mounts it.
    const client = await this.kubectl(cluster, 'get', 'secret', 'admiralty-proxy-scheduler-client', '-n', 'admiralty', '-o', 'jsonpath={.data.tls\\.crt} {.data.tls\\.key}');
    const [certB64, keyB64] = client.trim().split(' ');
    if (!certB64 || !keyB64) throw new Error(`${cluster}: Secret admiralty/admiralty-proxy-scheduler-client has no tls.crt and tls.key`);
    writeFileSync(paths.certFile, Buffer.from(certB64, 'base64'));
    writeFileSync(paths.keyFile, Buffer.from(keyB64, 'base64'), { mode: 0o600 });
    const webhookUrl = new URL(
      this.providerArgs(cluster, state)
        .find((a) => a.startsWith('--webhook-url='))!
        .slice('--webhook-url='.length),
    );
    const shipped = shippedSchedulerConfig(readFileSync(join(REPO_ROOT, 'manifests', 'scheduler', 'config.yaml'), 'utf8'));
    // The provider's certificate carries its webhook URL's host as an IP SAN (provider/main.ts).
    writeFileSync(
      paths.config,
      outOfClusterSchedulerConfig(shipped, {
        webhookOrigin: webhookUrl.origin,
        serverName: webhookUrl.hostname,
        caFile: paths.caFile,
        certFile: paths.certFile,
        keyFile: paths.keyFile,
        kubeconfig: paths.kubeconfig,
      }),
    );
    startProcess(this.spec(cluster, 'proxy-scheduler', state));
    await waitFor(`${cluster} proxy scheduler`, 60_000, () => httpsUnverifiedOk(`https://127.0.0.1:${this.ports(cluster, state).proxyScheduler}/readyz`));
  }

  /**
   * Connects the clusters as the user guide does, for each source of the topology and each of
   * its targets: Source `<source>` in the target, the exported kubeconfig Secret `<target>` in the
   * source, Target `<target>` there (`self: true` for the source itself); namespace default opted
   * in. In the default topology: Source `c1` in c2…, Targets `c1` (self) and `c2`… in c1.
   */
  async connect(state = this.requireState()): Promise<void> {
    for (const { cluster: source, targets } of topologyLinks(topologyOf(state), state.clusters).sources) {
      const remote = targets.filter((t) => t !== source);
      for (const t of remote) {
        await this.applyYaml(t, `apiVersion: multicluster.admiralty.io/v1alpha1\nkind: Source\nmetadata: {name: ${source}, namespace: default}\nspec: {serviceAccountName: ${source}}\n`);
      }
      for (const t of remote) {
        await waitFor(`${t} ServiceAccount ${source}`, 30_000, async () => (await this.kubectl(t, 'get', 'sa', source, '-n', 'default', '-o', 'name').catch(() => '')).includes(source));
        // The Target only once the Source role is bound there: earlier, the source's lists are refused.
        await waitFor(
          `${t} Source role of ${source} bound`,
          30_000,
          async () => (await this.kubectl(t, 'auth', 'can-i', 'list', 'pods', '-n', 'default', '--as', sourceUser(source)).catch(() => 'no')).trim() === 'yes',
        );
        await this.applyYaml(source, await this.exportKubeconfig(t, 'default', source, t));
      }
      const targetYaml = targets.map((t) =>
        t === source
          ? `apiVersion: multicluster.admiralty.io/v1alpha1\nkind: Target\nmetadata: {name: ${t}, namespace: default}\nspec: {self: true}`
          : `apiVersion: multicluster.admiralty.io/v1alpha1\nkind: Target\nmetadata: {name: ${t}, namespace: default}\nspec: {kubeconfigSecret: {name: ${t}}}`,
      );
      await this.applyYaml(source, targetYaml.join('\n---\n'));
      await this.kubectl(source, 'label', 'namespace', 'default', 'multicluster-scheduler=enabled', '--overwrite');
    }
    await Promise.all(
      topologyLinks(topologyOf(state), state.clusters).sources.map(({ cluster: source, targets }) =>
        waitFor(`virtual nodes of ${source} Ready`, 60_000, async () => {
          const out = await this.kubectl(
            source,
            'get',
            'nodes',
            '-l',
            'virtual-kubelet.io/provider=admiralty',
            '-o',
            'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{" "}{end}',
          ).catch(() => '');
          return (
            out
              .trim()
              .split(/\s+/)
              .filter((s) => s === 'True').length === targets.length
          );
        }),
      ),
    );
    for (const { cluster: source, targets } of topologyLinks(topologyOf(state), state.clusters).sources) this.log(`connected: targets ${targets.join(', ')} are virtual nodes of ${source}`);
  }

  /** The `export-kubeconfig` command, run with the sandbox's admin credentials. */
  async exportKubeconfig(cluster: string, namespace: string, serviceAccount: string, secretName: string): Promise<string> {
    const cli = shippedCli();
    const { stdout } = await execFileAsync(
      cli.command,
      [...cli.args, 'export-kubeconfig', '--kubeconfig', this.kubeconfigPath, '--context', cluster, '-n', namespace, serviceAccount, '--as', secretName],
      { cwd: REPO_ROOT },
    );
    return stdout;
  }

  /**
   * Freezes one process of one cluster (SIGSTOP): its port still accepts connections (the
   * kernel completes them) and nothing answers, the "tarpit" a hung apiserver is. Undo with
   * {@link thaw}. Throws when the process is not running.
   */
  freeze(cluster: string, component: Component): void {
    if (!signalProcess(this.spec(cluster, component), 'SIGSTOP')) throw new Error(`${cluster} ${component} is not running`);
  }

  /** Resumes a process {@link freeze} stopped. */
  thaw(cluster: string, component: Component): void {
    if (!signalProcess(this.spec(cluster, component), 'SIGCONT')) throw new Error(`${cluster} ${component} is not running`);
  }

  /** Stops one process of one cluster, keeping its state (for fault tests). */
  async stop(cluster: string, component: Component, signal: NodeJS.Signals = 'SIGTERM'): Promise<boolean> {
    const results = await Promise.all(this.specs(cluster, component).map((spec) => stopProcess(spec, signal)));
    return results.some(Boolean);
  }

  /**
   * Starts one process of one cluster again and waits until it is ready.
   *
   * `extraArgs` are appended to its command line for this start only (e.g. a benchmark starts
   * c1's provider with `--proxy-scheduler-name=`); the restart loop keeps them while it runs,
   * and a later `stop` then `start` without them brings back the sandbox's own flags. Not for
   * the proxy scheduler, whose flags come from its config file.
   */
  async start(cluster: string, component: Component, opts: { extraArgs?: readonly string[] } = {}): Promise<void> {
    const state = this.requireState();
    if (component === 'provider') shippedCli();
    if (!this.components(state, cluster).includes(component)) throw new Error(`${cluster} runs no ${component}`);
    const extraArgs = opts.extraArgs ?? [];
    if (component === 'proxy-scheduler' && extraArgs.length > 0) throw new Error('the proxy scheduler takes its flags from its config file, not extraArgs');
    // It reads the provider's CA at start: take the current one from its Secret.
    if (component === 'proxy-scheduler') return this.startProxyScheduler(cluster, state);
    if (component === 'kueue' && extraArgs.length > 0) throw new Error('kueue takes its settings from its Configuration file, not extraArgs');
    if (component === 'kueue') return this.startKueue(cluster, state);
    // Every replica, with the same flags.
    if (component === 'provider') return this.startProvider(cluster, state, extraArgs);
    const startedMs = Date.now();
    const spec = this.spec(cluster, component, state);
    startProcess({ ...spec, args: [...spec.args, ...extraArgs] });
    if (component === 'kube-apiserver') {
      await this.waitForComponent(cluster, 'kube-apiserver', state, 90_000, () => this.apiserverReady(cluster, state));
      // Until /readyz says so, the apiserver may refuse requests its RBAC allows (its caches
      // are still syncing): remember the window, for providerForbiddenRequests.
      appendFileSync(this.apiserverStartsPath(cluster), `${JSON.stringify({ startedMs, readyMs: Date.now() })}\n`);
    }
    if (component === 'etcd') await this.waitForComponent(cluster, 'etcd', state, 30_000, () => httpOk(`http://127.0.0.1:${this.ports(cluster, state).etcd}/health`));
  }

  /** One line per process: cluster, component, pid, running or not. */
  status(): string[] {
    const s = this.state();
    if (!s) return ['sandbox: down'];
    const lines: string[] = [];
    for (const c of s.clusters) {
      for (const comp of this.components(s, c)) {
        for (const spec of this.specs(c, comp, s)) {
          const pid = readPid(spec.pidFile);
          lines.push(`${c.padEnd(4)} ${spec.name.slice(c.length + 1).padEnd(24)} ${isRunning(spec) ? `running (pid ${pid})` : 'stopped'}`);
        }
      }
    }
    lines.push(`kubeconfig: ${this.kubeconfigPath}`, `kubectl:    ${this.kubectlPath}`);
    return lines;
  }

  /** Stops every process the sandbox started (by recorded pid) and removes its state. */
  async down(): Promise<void> {
    const s = this.state();
    if (s) {
      const order = [...CLUSTER_COMPONENTS].reverse();
      for (const comp of order) {
        await Promise.all(s.clusters.filter((c) => this.components(s, c).includes(comp)).flatMap((c) => this.specs(c, comp, s).map((spec) => stopProcess(spec))));
      }
    } else if (existsSync(join(this.dir, 'pids'))) {
      // State lost but pid files remain: nothing can be matched safely; say so.
      for (const f of readdirSync(join(this.dir, 'pids'))) this.log(`left alone (no state to verify it): ${f}`);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** The identity the sandbox's providers run as: the shipped ServiceAccount, with nothing added. */
export const PROVIDER_USER = 'system:serviceaccount:admiralty:admiralty';

/** The identity c1's proxy scheduler runs as: the shipped ServiceAccount (manifests/scheduler/rbac), with nothing added. */
export const PROXY_SCHEDULER_USER = 'system:serviceaccount:admiralty:admiralty-proxy-scheduler';

/**
 * The identity c1's provider acts as in every target: the ServiceAccount of Source `c1` in
 * namespace default (exported with `export-kubeconfig`), whose only rights are the Source role's.
 */
export const SOURCE_USER = sourceUser(FIRST_CLUSTER);

/** RBAC that lets the apiserver's kubelet client call kubelets, as kubeadm sets it up. */
const KUBELET_CLIENT_RBAC = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: sandbox:kube-apiserver-kubelet-client}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:kubelet-api-admin}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: kube-apiserver-kubelet-client}
`;

/**
 * metrics-server's ServiceAccount and RBAC as its upstream manifest (components.yaml) grants
 * them, its Service (ExternalName, see {@link Sandbox.startMetricsServer}) and APIService.
 */
function metricsServerYaml(port: number, caBundle: string): string {
  const sa = '[{kind: ServiceAccount, name: metrics-server, namespace: kube-system}]';
  return `apiVersion: v1
kind: ServiceAccount
metadata: {name: metrics-server, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:aggregated-metrics-reader
  labels: {rbac.authorization.k8s.io/aggregate-to-admin: "true", rbac.authorization.k8s.io/aggregate-to-edit: "true", rbac.authorization.k8s.io/aggregate-to-view: "true"}
rules: [{apiGroups: [metrics.k8s.io], resources: [pods, nodes], verbs: [get, list, watch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: system:metrics-server}
rules:
- {apiGroups: [""], resources: [nodes/metrics], verbs: [get]}
- {apiGroups: [""], resources: [pods, nodes], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: system:metrics-server}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:metrics-server}
subjects: ${sa}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: metrics-server:system:auth-delegator}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:auth-delegator}
subjects: ${sa}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: metrics-server-auth-reader, namespace: kube-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: extension-apiserver-authentication-reader}
subjects: ${sa}
---
apiVersion: v1
kind: Service
metadata: {name: metrics-server, namespace: kube-system}
spec: {type: ExternalName, externalName: 127.0.0.1, ports: [{name: https, port: ${port}}]}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.metrics.k8s.io}
spec:
  group: metrics.k8s.io
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
  service: {name: metrics-server, namespace: kube-system, port: ${port}}
  caBundle: ${caBundle}
`;
}

function portIsFree(port: number): Promise<boolean> {
  return new Promise((res) => {
    const srv = net.createServer();
    srv.once('error', () => res(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => res(true)));
  });
}

function httpOk(url: string): Promise<boolean> {
  return fetch(url, { signal: AbortSignal.timeout(2000) })
    .then((r) => r.ok)
    .catch(() => false);
}

/** Whether a component's secure port answers 200, without verifying its self-signed certificate. */
function httpsUnverifiedOk(url: string): Promise<boolean> {
  return new Promise((res) => {
    const req = https.get(url, { rejectUnauthorized: false, timeout: 2000 }, (r) => {
      r.resume();
      res(r.statusCode === 200);
    });
    req.on('error', () => res(false));
    req.on('timeout', () => req.destroy());
  });
}

function httpsOk(url: string, pki: SandboxPki): Promise<boolean> {
  return new Promise((res) => {
    const req = https.get(url, { ca: readFileSync(pki.caCert), cert: readFileSync(pki.adminCert), key: readFileSync(pki.adminKey), timeout: 2000 }, (r) => {
      r.resume();
      res(r.statusCode === 200);
    });
    req.on('error', () => res(false));
    req.on('timeout', () => req.destroy());
  });
}

/** Polls `check` every 250 ms until it is true, or throws after `timeoutMs`. */
export async function waitFor(what: string, timeoutMs: number, check: () => Promise<boolean> | boolean): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(250);
  }
}

/**
 * The stage files of kwok: its own fast stages (nodes Ready at once, pods Running at once, Job
 * pods Succeeded at once) and ours for the delegates of Job pods; without Job completion, the
 * same fast stages less pod-complete, and not ours.
 */
function kwokStages(state: SandboxState): string[] {
  const stages = join(state.kwokModuleDir, 'kustomize', 'stage');
  if (state.completeJobPods !== false) return [join(stages, 'fast'), join(REPO_ROOT, 'test', 'sandbox', 'kwok', 'delegate-job-complete.yaml')];
  return [join(stages, 'node', 'fast'), join(stages, 'node', 'heartbeat-with-lease'), join(stages, 'pod', 'fast', 'pod-ready.yaml'), join(stages, 'pod', 'fast', 'pod-delete.yaml')];
}

/** The topology of a sandbox's state: `star` for one started before topologies existed. */
function topologyOf(state: SandboxState): Topology {
  return state.topology ?? 'star';
}
