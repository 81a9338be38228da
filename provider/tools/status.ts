import { parseArgs } from 'node:util';
import { CoordinationV1Api, CoreV1Api, CustomObjectsApi, type KubeConfig, type V1Lease, type V1Namespace, type V1Pod } from '@kubernetes/client-node';
import { realClock, type Clock } from '../core/clock.js';
import { ValidationError } from '../core/errors.js';
import { API_GROUP, API_VERSION, FAILOVER_AFTER_ANNOTATION, HAS_FINALIZER_LABEL } from '../core/keys.js';
import type { TargetSummaryView } from '../kubelet/operator-views.js';
import type { Condition, Target } from '../model/types.js';
import type { RefusalCount } from '../../scheduler/refusal-log.js';
import { type CliIo, writeLine } from './cli-io.js';
import {
  answerMessage,
  apiCall,
  ApiCallError,
  formatAge,
  formatData,
  getFromProvider,
  providerAddress,
  KUBECTL_FLAG_OPTIONS,
  KUBECTL_FLAGS_USAGE,
  loadOperatorKubeconfig,
  parseOutputFormat,
  renderTable,
  type OutputFormat,
} from './operator-api.js';

export const STATUS_USAGE = `usage: kubectl admiralty status [-n NAMESPACE] [-o json|yaml|wide] [--watch] [kubectl flags]
       admiralty status ...

What the federation of this (source) cluster looks like now: each Target and ClusterTarget, its
virtual node, whether it is Ready and why not, the age of the ClusterSummary the provider judges
pods against, the largest free room on one real node and in all, the proxies bound there and
how many of their delegates run or wait, outage and failover settings; then the provider's
leader. Summary figures come from the provider (its kubelet API, at the address the apiserver
dials for the virtual node), which shows a target's to those who may get that Target.

  -n, --namespace NS   Targets of this namespace (and every ClusterTarget); default: all namespaces
  --provider-namespace NS
                       namespace of the provider's leader Lease (default: admiralty)
  -w, --watch          print again every 5 s (--interval SECONDS), until interrupted
${KUBECTL_FLAGS_USAGE}`;

/** The leader Lease's name (provider/main.ts). */
export const PROVIDER_LEASE_NAME = 'admiralty-provider';
/** The labels of the chart's provider pods. */
export const PROVIDER_POD_SELECTOR = 'app.kubernetes.io/name=admiralty-ts,app.kubernetes.io/component=provider';

/** One Target or ClusterTarget in the report. */
export interface TargetStatusRow {
  kind: 'Target' | 'ClusterTarget';
  namespace?: string;
  name: string;
  virtualNode?: string;
  /** The Target's Ready condition: True, False or Unknown (never written yet). */
  ready: string;
  reason?: string;
  message?: string;
  /** What the provider reads of it now, or why that could not be asked. */
  provider: TargetSummaryView | { error: string };
  /** Age of the summary the provider judges against, in seconds, when it has one. */
  summaryAgeSeconds?: number;
  /** The provider's count of the pods turned away from it over the last 10 minutes, by reason (see `TargetSummaryView.refusals`). */
  refusals: RefusalCount[];
  proxies: { bound: number; running: number; pending: number; other: number };
  /** The namespace's `failover-after` (Targets only), when set. */
  failoverAfter?: string;
}

/** What `status` reports; `-o json` prints it as is. */
export interface StatusReport {
  /** The kubeconfig context: the source cluster. */
  cluster: string;
  at: string;
  targets: TargetStatusRow[];
  provider: {
    leaseNamespace: string;
    /** The Lease's holder, its last renewal and how long ago, or why the Lease could not be read. */
    leader?: { identity: string; renewTime?: string; renewedSecondsAgo?: number; leaseDurationSeconds?: number };
    leaseError?: string;
    /**
     * The provider's replicas that can be seen: the chart's provider pods (`seenAs: pod`), and the
     * Lease's holder when no pod is it (`seenAs: lease`: a provider outside the cluster, as in
     * the sandbox). `leader` is true for the holder while its Lease has not expired. A standby
     * outside the cluster holds nothing and is not seen.
     */
    replicas: StatusReplica[];
    replicasError?: string;
  };
}

/** One replica of the provider in the report. */
export interface StatusReplica {
  /** The pod's name, or the Lease holder's identity (`<pod or host name>-<pid>`). */
  name: string;
  seenAs: 'pod' | 'lease';
  /** Of a pod only. */
  phase?: string;
  ready?: boolean;
  leader: boolean;
}

/** What {@link buildStatusReport} is built from: what the CLI read. */
export interface StatusInput {
  cluster: string;
  targets: (Target & { kind?: string })[];
  clusterTargets: Target[];
  proxies: V1Pod[];
  namespaces: Map<string, V1Namespace>;
  views: Map<string, TargetSummaryView | { error: string }>;
  leaseNamespace: string;
  lease?: V1Lease;
  leaseError?: string;
  providerPods: V1Pod[];
  providerPodsError?: string;
}

const readyCondition = (t: Target): Condition | undefined => t.status?.conditions?.find((c) => c.type === 'Ready');

/** Builds the report from what was read. Pure (`nowMs` is the time of the reads). */
export function buildStatusReport(input: StatusInput, nowMs: number): StatusReport {
  const byNode = new Map<string, TargetStatusRow['proxies']>();
  for (const p of input.proxies) {
    const node = p.spec?.nodeName;
    if (!node) continue;
    const counts = byNode.get(node) ?? { bound: 0, running: 0, pending: 0, other: 0 };
    counts.bound++;
    // The delegate's phase is mirrored on its proxy.
    const phase = p.status?.phase;
    if (phase === 'Running') counts.running++;
    else if (phase === 'Pending' || phase === undefined) counts.pending++;
    else counts.other++;
    byNode.set(node, counts);
  }
  const row = (kind: 'Target' | 'ClusterTarget', t: Target): TargetStatusRow => {
    const cond = readyCondition(t);
    const node = t.status?.virtualNodeName;
    const provider = (node && input.views.get(node)) || { error: node ? 'not asked' : 'no virtual node yet' };
    const readAt = 'summary' in provider && provider.summary ? Date.parse(provider.summary.readAt) : undefined;
    const failover = kind === 'Target' ? input.namespaces.get(t.metadata.namespace ?? '')?.metadata?.annotations?.[FAILOVER_AFTER_ANNOTATION] : undefined;
    return {
      kind,
      ...(kind === 'Target' ? { namespace: t.metadata.namespace } : {}),
      name: t.metadata.name ?? '',
      ...(node ? { virtualNode: node } : {}),
      ready: cond?.status ?? 'Unknown',
      ...(cond && cond.status !== 'True' ? { reason: cond.reason, message: cond.message } : {}),
      provider,
      ...(readAt !== undefined && !Number.isNaN(readAt) ? { summaryAgeSeconds: Math.max(0, Math.round((nowMs - readAt) / 1000)) } : {}),
      refusals: ('error' in provider ? undefined : provider.refusals) ?? [],
      proxies: (node && byNode.get(node)) || { bound: 0, running: 0, pending: 0, other: 0 },
      ...(failover ? { failoverAfter: failover } : {}),
    };
  };
  const byName = (a: Target, b: Target) => `${a.metadata.namespace}/${a.metadata.name}`.localeCompare(`${b.metadata.namespace}/${b.metadata.name}`);
  const holder = input.lease?.spec?.holderIdentity;
  const renew = input.lease?.spec?.renewTime;
  const renewMs = renew ? new Date(renew as unknown as string).getTime() : undefined;
  const duration = input.lease?.spec?.leaseDurationSeconds;
  const leading = holder !== undefined && holder !== '' && !(renewMs !== undefined && duration !== undefined && nowMs - renewMs > duration * 1000);
  // The leader's identity is `<pod name>-<pid>` (main.ts).
  const replicas: StatusReplica[] = input.providerPods.map((p) => ({
    name: p.metadata?.name ?? '',
    seenAs: 'pod',
    phase: p.status?.phase ?? 'Unknown',
    ready: p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false,
    leader: leading && holder.startsWith(`${p.metadata?.name}-`),
  }));
  if (leading && !replicas.some((r) => r.leader)) replicas.push({ name: holder, seenAs: 'lease', leader: true });
  return {
    cluster: input.cluster,
    at: new Date(nowMs).toISOString(),
    targets: [...[...input.targets].sort(byName).map((t) => row('Target', t)), ...[...input.clusterTargets].sort(byName).map((t) => row('ClusterTarget', t))],
    provider: {
      leaseNamespace: input.leaseNamespace,
      ...(holder
        ? {
            leader: {
              identity: holder,
              ...(renewMs !== undefined ? { renewTime: new Date(renewMs).toISOString(), renewedSecondsAgo: Math.max(0, Math.round((nowMs - renewMs) / 1000)) } : {}),
              ...(input.lease?.spec?.leaseDurationSeconds ? { leaseDurationSeconds: input.lease.spec.leaseDurationSeconds } : {}),
            },
          }
        : {}),
      ...(input.leaseError ? { leaseError: input.leaseError } : {}),
      replicas,
      ...(input.providerPodsError ? { replicasError: input.providerPodsError } : {}),
    },
  };
}

const room = (r: Record<string, string> | undefined) => (r ? `${r.cpu}/${r.memory}/${r.pods}` : '-');

/** Refusals shown in the table's cell, at most; the rest are counted as `+N more`. */
const REFUSALS_IN_CELL = 2;

/** `NoNodeFits×3, DelegateNotPlaced×1 +2 more`, or `-`. */
function refusalsCell(refusals: readonly RefusalCount[]): string {
  if (refusals.length === 0) return '-';
  const shown = refusals
    .slice(0, REFUSALS_IN_CELL)
    .map((r) => `${r.reason}×${r.count}`)
    .join(', ');
  return refusals.length > REFUSALS_IN_CELL ? `${shown} +${refusals.length - REFUSALS_IN_CELL} more` : shown;
}

/** The report as tables for people: `wide` adds the total free room, outage, failover and reasons. Pure. */
export function renderStatus(report: StatusReport, wide: boolean): string {
  const header = [
    'TARGET',
    'VIRTUAL NODE',
    'READY',
    'SUMMARY AGE',
    'LARGEST FREE (CPU/MEM/PODS)',
    ...(wide ? ['TOTAL FREE'] : []),
    'PROXIES',
    'RUNNING',
    'PENDING',
    'REFUSALS (10M)',
    ...(wide ? ['OUTAGE SINCE', 'FAILOVER AFTER', 'REASON'] : []),
  ];
  const rows = report.targets.map((t) => {
    const view = 'error' in t.provider ? undefined : t.provider;
    return [
      t.kind === 'Target' ? `${t.namespace}/${t.name}` : `ClusterTarget/${t.name}`,
      t.virtualNode ?? '-',
      t.ready,
      t.summaryAgeSeconds !== undefined ? formatAge(t.summaryAgeSeconds * 1000) : view ? 'none read' : '?',
      room(view?.summary?.largestFree),
      ...(wide ? [room(view?.summary?.totalFree)] : []),
      String(t.proxies.bound),
      String(t.proxies.running),
      String(t.proxies.pending),
      refusalsCell(t.refusals),
      ...(wide ? [view?.outageSince ?? '-', t.failoverAfter ?? '-', t.ready === 'True' ? '' : `${t.reason ?? ''}: ${t.message ?? ''}`] : []),
    ];
  });
  const lines = [`Cluster ${report.cluster}: ${report.targets.length} target(s)`, report.targets.length ? renderTable(header, rows) : '  (no Target nor ClusterTarget)'];
  // Why a target is not ready, and why the provider could not be asked, under the table.
  for (const t of report.targets) {
    const name = t.kind === 'Target' ? `${t.namespace}/${t.name}` : `ClusterTarget/${t.name}`;
    if (!wide && t.ready !== 'True') lines.push(`  ${name} not ready: ${t.reason ?? 'no Ready condition yet'}${t.message ? `: ${t.message}` : ''}`);
    if ('error' in t.provider) lines.push(`  ${name}: no figures from the provider: ${t.provider.error}`);
    // Wide: what each reason last said.
    if (wide) for (const r of t.refusals) lines.push(`  ${name} refused by ${r.source} ${r.count}× ${r.reason}, last at ${r.lastAt}: ${r.lastMessage}`);
  }
  const p = report.provider;
  lines.push('');
  if (p.leader) {
    const renewed = p.leader.renewedSecondsAgo !== undefined ? `, renewed ${formatAge(p.leader.renewedSecondsAgo * 1000)} ago` : '';
    const stale =
      p.leader.renewedSecondsAgo !== undefined && p.leader.leaseDurationSeconds !== undefined && p.leader.renewedSecondsAgo > p.leader.leaseDurationSeconds ? ' (expired: no replica leads)' : '';
    lines.push(`Provider leader: ${p.leader.identity} (Lease ${p.leaseNamespace}/${PROVIDER_LEASE_NAME}${renewed})${stale}`);
  } else lines.push(`Provider leader: none (${p.leaseError ?? `no holder on Lease ${p.leaseNamespace}/${PROVIDER_LEASE_NAME}`})`);
  if (p.replicas.length > 0) {
    lines.push(
      renderTable(
        ['REPLICA', 'SEEN AS', 'PHASE', 'READY', 'LEADER'],
        p.replicas.map((r) => [r.name, r.seenAs === 'pod' ? 'pod' : 'Lease holder', r.phase ?? '-', r.ready === undefined ? '-' : String(r.ready), r.leader ? 'yes' : '']),
      ),
    );
  }
  if (!p.replicas.some((r) => r.seenAs === 'pod')) {
    lines.push(`  ${p.replicasError ?? `no pod labelled ${PROVIDER_POD_SELECTOR} in ${p.leaseNamespace}: replicas outside the cluster are seen only while they lead`}`);
  }
  return lines.join('\n');
}

/** Reads everything the report needs with the user's credentials. Refusals of the Targets' and proxies' reads throw ApiCallError; the rest is reported in place. */
export async function collectStatus(kc: KubeConfig, cluster: string, namespace: string | undefined, leaseNamespace: string, providerOverride?: string): Promise<StatusInput> {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const core = kc.makeApiClient(CoreV1Api);
  const coordination = kc.makeApiClient(CoordinationV1Api);
  const where = namespace ? ` in namespace ${namespace}` : ' in all namespaces';
  // Settled, then the first refusal in this order: the reads run at once, but which refusal the
  // user is told must not depend on which answer came back first.
  const settled = await Promise.allSettled([
    apiCall(`list Targets${where}`, () =>
      namespace
        ? custom.listNamespacedCustomObject({ group: API_GROUP, version: API_VERSION, namespace, plural: 'targets' })
        : custom.listClusterCustomObject({ group: API_GROUP, version: API_VERSION, plural: 'targets' }),
    ),
    apiCall('list ClusterTargets', () => custom.listClusterCustomObject({ group: API_GROUP, version: API_VERSION, plural: 'clustertargets' })),
    apiCall(`list proxy pods${where}`, () =>
      namespace ? core.listNamespacedPod({ namespace, labelSelector: `${HAS_FINALIZER_LABEL}=true` }) : core.listPodForAllNamespaces({ labelSelector: `${HAS_FINALIZER_LABEL}=true` }),
    ),
  ]);
  for (const r of settled) if (r.status === 'rejected') throw r.reason;
  const [targets, clusterTargets, proxies] = settled.map((r) => (r as PromiseFulfilledResult<unknown>).value) as [unknown, unknown, Awaited<ReturnType<CoreV1Api['listPodForAllNamespaces']>>];
  const targetList = ((targets as { items?: Target[] }).items ?? []) as Target[];
  const clusterTargetList = ((clusterTargets as { items?: Target[] }).items ?? []) as Target[];
  const nodes = [...targetList, ...clusterTargetList].map((t) => t.status?.virtualNodeName).filter((n): n is string => !!n);
  const views = new Map<string, TargetSummaryView | { error: string }>();
  const namespaces = new Map<string, V1Namespace>();
  const [lease, pods] = await Promise.all([
    apiCall(`read Lease ${leaseNamespace}/${PROVIDER_LEASE_NAME}`, () => coordination.readNamespacedLease({ namespace: leaseNamespace, name: PROVIDER_LEASE_NAME })).then(
      (l) => ({ lease: l }),
      (err: Error) => ({ leaseError: err.message }),
    ),
    apiCall(`list the provider's pods in ${leaseNamespace}`, () => core.listNamespacedPod({ namespace: leaseNamespace, labelSelector: PROVIDER_POD_SELECTOR })).then(
      (l) => ({ providerPods: l.items }),
      (err: Error) => ({ providerPods: [] as V1Pod[], providerPodsError: err.message }),
    ),
    ...nodes.map(async (node) => views.set(node, await askSummary(kc, node, providerOverride))),
    // Failover settings live on namespaces; a user who may not read one just sees none.
    ...[...new Set(targetList.map((t) => t.metadata.namespace ?? ''))].map((ns) =>
      core.readNamespace({ name: ns }).then(
        (n) => void namespaces.set(ns, n),
        () => undefined,
      ),
    ),
  ]);
  return {
    cluster,
    targets: targetList,
    clusterTargets: clusterTargetList,
    proxies: proxies.items,
    namespaces,
    views,
    leaseNamespace,
    ...(lease as { lease?: V1Lease; leaseError?: string }),
    ...(pods as { providerPods: V1Pod[]; providerPodsError?: string }),
  };
}

/** The provider's view of one virtual node's target, or why it could not be had. */
async function askSummary(kc: KubeConfig, node: string, override: string | undefined): Promise<TargetSummaryView | { error: string }> {
  try {
    const address = await providerAddress(kc, node, override);
    const { status, body } = await getFromProvider(kc, address, `/admiralty/summary/${encodeURIComponent(node)}`);
    if (status === 200) return JSON.parse(body) as TargetSummaryView;
    return { error: `the provider answered ${status}: ${answerMessage(body)}` };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

/** What {@link printStatus} reads with, prints to and waits on. */
export interface PrintStatusOptions {
  collect: () => Promise<StatusInput>;
  format: OutputFormat;
  write: (text: string) => void;
  clock: Clock;
  /** Print again this long after each print ends, until `signal` aborts; once when absent. */
  watchIntervalMs?: number;
  signal?: AbortSignal;
}

/**
 * Reads and prints the report once or, with `watchIntervalMs`, again and again (a blank line
 * between two) until `signal` aborts; an abort during the wait ends it at once, one during a
 * read after that read's print. A failed read throws and ends the watch.
 */
export async function printStatus(o: PrintStatusOptions): Promise<void> {
  for (;;) {
    const input = await o.collect();
    const report = buildStatusReport(input, o.clock.now());
    o.write(o.format === 'json' || o.format === 'yaml' ? formatData(report, o.format) : renderStatus(report, o.format === 'wide'));
    if (o.watchIntervalMs === undefined || o.signal?.aborted) return;
    o.write('');
    await new Promise<void>((res) => {
      const onAbort = () => (o.clock.clearTimeout(t), res());
      const t = o.clock.setTimeout(() => (o.signal?.removeEventListener('abort', onAbort), res()), o.watchIntervalMs!);
      o.signal?.addEventListener('abort', onAbort, { once: true });
    });
    if (o.signal?.aborted) return;
  }
}

/**
 * `status`: prints the report (table, wide, json or yaml), once or, with `--watch`, every
 * `--interval` seconds until interrupted. Exit codes: 0 printed, 1 a read refused or failed
 * (message on stderr), 2 bad usage.
 */
export async function statusCli(args: string[], io: CliIo, signal?: AbortSignal): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args,
      options: { ...KUBECTL_FLAG_OPTIONS, 'provider-namespace': { type: 'string' }, watch: { type: 'boolean', short: 'w' }, interval: { type: 'string' } },
    }));
  } catch (err) {
    writeLine(io.stderr, `status: ${(err as Error).message}`);
    writeLine(io.stderr, STATUS_USAGE);
    return 2;
  }
  if (values.help) {
    writeLine(io.stdout, STATUS_USAGE);
    return 0;
  }
  let format: OutputFormat;
  let intervalMs: number;
  try {
    format = parseOutputFormat(values.output);
    intervalMs = Number(values.interval ?? '5') * 1000;
    if (!(intervalMs >= 1000)) throw new ValidationError(`--interval ${values.interval}: a number of seconds, at least 1`);
  } catch (err) {
    writeLine(io.stderr, `status: ${(err as Error).message}`);
    return 2;
  }
  try {
    const { kc, context } = loadOperatorKubeconfig(values, io.env ?? {});
    await printStatus({
      collect: () => collectStatus(kc, context, values.namespace, values['provider-namespace'] ?? 'admiralty', values['provider-address']),
      format,
      write: (text) => writeLine(io.stdout, text),
      clock: realClock,
      ...(values.watch ? { watchIntervalMs: intervalMs } : {}),
      signal,
    });
    return 0;
  } catch (err) {
    if (err instanceof ValidationError || err instanceof ApiCallError) {
      writeLine(io.stderr, `status: ${err.message}`);
      return 1;
    }
    throw err;
  }
}
