import { isIP } from 'node:net';
import { parseGoDuration } from './duration.js';

/**
 * Which events of a delegate are copied onto its proxy (`--delegate-events`): `warnings` (the
 * default) those of type Warning, what a user debugs with (a target's FailedScheduling, BackOff,
 * Unhealthy, a failed pull); `all` also the routine Normal ones (Scheduled, Pulling, Pulled,
 * Created, Started: four or five per pod a real kubelet starts, each one more write in the
 * source); `none` nothing.
 */
export const DELEGATE_EVENT_COPIES = ['warnings', 'all', 'none'] as const;
export type DelegateEventCopies = (typeof DELEGATE_EVENT_COPIES)[number];

/** Components that `--enable` can switch on. */
export const COMPONENTS = ['targets', 'delegation', 'summary', 'sources', 'webhook', 'kubelet', 'extender'] as const;

export interface ProviderConfig {
  kubeconfig?: string;
  context?: string;
  clusterName: string;
  namespace: string;
  kubeletPort: number;
  kubeletAddress: string;
  kubeletBindAddress: string;
  kubeletClientCaFile?: string;
  kubeletServingSigner: string;
  allowLoopbackTargets: boolean;
  apiRequestTimeoutSeconds: number;
  webhookPort: number;
  webhookBindAddress: string;
  webhookConfigName: string;
  webhookServiceName?: string;
  webhookUrl?: string;
  /** Worker threads that answer AdmissionReviews; 0 answers them on the main event loop. */
  admissionWorkers: number;
  /** How long one review may take before it is denied and its worker replaced. */
  admissionDeadlineMs: number;
  metricsPort: number;
  metricsBindAddress: string;
  leaderElect: boolean;
  /** Targets sharded across the replicas by membership Leases, in place of one leader (see `Shards`). */
  shardTargets: boolean;
  leaderElectionNamespace: string;
  leaseDurationSeconds: number;
  renewDeadlineSeconds: number;
  retryPeriodSeconds: number;
  workers: number;
  /** Delegation workers that keys of one target may hold at once. */
  workersPerTarget: number;
  /** What one target's informers may hold together, in MiB of estimated heap (see `CacheBudget`). */
  targetCacheBudgetMib: number;
  logLevel: string;
  logFormat: 'json' | 'text';
  nodeStatusIntervalSeconds: number;
  nodeLeaseIntervalSeconds: number;
  /** This cluster's ClusterSummary is rewritten at least this often, and says so to its readers. */
  summaryRenewIntervalSeconds: number;
  enable: string[];
  shutdownTimeoutSeconds: number;
  /** Seconds a terminating replica keeps serving, not Ready, before it closes its servers. */
  shutdownDelaySeconds: number;
  proxySchedulerName: string;
  delegatePlacementTimeoutSeconds: number;
  /** How long a delegate may stay Unschedulable in its target before its pod is re-placed; 0: never. */
  replaceUnschedulableAfterMs: number;
  /** Which events of the delegates are copied onto their proxies. */
  delegateEvents: DelegateEventCopies;
}

interface FlagSpec {
  flag: string;
  env?: string;
  kind: 'string' | 'port' | 'int' | 'duration' | 'bool' | 'ip' | 'url' | 'enum' | 'list';
  default?: string;
  values?: readonly string[];
  help: string;
}

/** Every flag, its environment variable and default. The flag wins over the environment. */
export const FLAGS: Record<keyof ProviderConfig, FlagSpec> = {
  kubeconfig: { flag: 'kubeconfig', env: 'KUBECONFIG', kind: 'string', help: 'kubeconfig of this cluster (out-of-cluster mode); in-cluster credentials when absent' },
  context: { flag: 'context', kind: 'string', help: 'context of --kubeconfig to use' },
  clusterName: { flag: 'cluster-name', env: 'CLUSTER_NAME', kind: 'string', help: 'name of this cluster, written on every delegate and copy (required)' },
  namespace: { flag: 'namespace', env: 'POD_NAMESPACE', kind: 'string', default: 'admiralty', help: "the provider's namespace (webhook certificate Secret, leader Lease)" },
  kubeletPort: { flag: 'kubelet-port', kind: 'port', default: '10250', help: 'port of the kubelet API of the virtual nodes' },
  kubeletAddress: { flag: 'kubelet-address', env: 'POD_IP', kind: 'ip', default: '127.0.0.1', help: "IP the control plane dials for the kubelet API (the node's InternalIP)" },
  kubeletBindAddress: { flag: 'kubelet-bind-address', kind: 'ip', default: '127.0.0.1', help: 'address the kubelet API listens on (0.0.0.0 in a pod)' },
  kubeletClientCaFile: {
    flag: 'kubelet-client-ca-file',
    kind: 'string',
    help: "CA that signs the apiserver's kubelet client certificate; default: the apiserver's client CA, read from kube-system/extension-apiserver-authentication",
  },
  kubeletServingSigner: {
    flag: 'kubelet-serving-signer',
    kind: 'string',
    default: 'kubernetes.io/kubelet-serving',
    help: 'signer of the kubelet serving certificate CSR (e.g. beta.eks.amazonaws.com/app-serving)',
  },
  allowLoopbackTargets: {
    flag: 'allow-loopback-targets',
    kind: 'bool',
    default: 'false',
    help: "let a Target's kubeconfig point at a loopback address (local sandboxes only: in a pod, loopback is the provider itself)",
  },
  apiRequestTimeoutSeconds: {
    flag: 'api-request-timeout-seconds',
    kind: 'int',
    default: '30',
    help: 'deadline of every API call to this cluster and to targets (watches and log/exec streams excepted)',
  },
  webhookPort: { flag: 'webhook-port', kind: 'port', default: '9443', help: 'port of the admission webhook' },
  webhookBindAddress: { flag: 'webhook-bind-address', kind: 'ip', default: '127.0.0.1', help: 'address the webhook listens on (0.0.0.0 in a pod)' },
  webhookConfigName: { flag: 'webhook-config-name', kind: 'string', default: 'admiralty', help: 'MutatingWebhookConfiguration whose caBundle the provider keeps current' },
  webhookServiceName: { flag: 'webhook-service-name', kind: 'string', help: 'Service in front of the webhook, for the certificate DNS names' },
  webhookUrl: { flag: 'webhook-url', kind: 'url', help: 'URL the apiserver calls out of cluster (its IP goes in the certificate)' },
  admissionWorkers: {
    flag: 'admission-workers',
    kind: 'int',
    default: '1',
    help: 'worker threads that answer admission reviews (0 to 16), so that no pod, however large, holds the event loop that renews the leader Lease and serves the extender and the kubelet API; 0 answers them on that loop',
  },
  admissionDeadlineMs: {
    flag: 'admission-deadline',
    kind: 'duration',
    default: '2s',
    help: "how long one admission review may take, queueing included (100ms to 4s, inside the webhook's 5 s timeout), before the pod is denied with the reason and its worker replaced; with --admission-workers=0 nothing can stop a review, so this is not enforced",
  },
  metricsPort: { flag: 'metrics-port', kind: 'port', default: '8080', help: 'port of /metrics, /healthz and /readyz' },
  metricsBindAddress: { flag: 'metrics-bind-address', kind: 'ip', default: '127.0.0.1', help: 'address of the metrics server' },
  leaderElect: { flag: 'leader-elect', kind: 'bool', default: 'true', help: 'elect a leader among replicas; every replica serves, only the leader runs the controllers that write' },
  shardTargets: {
    flag: 'shard-targets',
    kind: 'bool',
    default: 'false',
    help: 'share the writing among the replicas: each holds a membership Lease and writes only the targets rendezvous hashing gives it (fenced by a Lease per target), in place of one elected leader writing all (--leader-elect is then not used)',
  },
  leaderElectionNamespace: {
    flag: 'leader-election-namespace',
    kind: 'string',
    help: 'namespace of the leader Lease, and of the membership and target Leases with --shard-targets (default: --namespace)',
  },
  leaseDurationSeconds: { flag: 'lease-duration-seconds', kind: 'int', default: '15', help: 'leader lease duration' },
  renewDeadlineSeconds: { flag: 'renew-deadline-seconds', kind: 'int', default: '10', help: 'a leader that cannot renew its lease within this steps down; less than --lease-duration-seconds' },
  retryPeriodSeconds: { flag: 'retry-period-seconds', kind: 'int', default: '2', help: 'leader election retry period' },
  // Each worker waits on round trips, not CPU: with 16 (15 per target), a proxy's status
  // write waited 5 to 7 s at the median for a slot in a 1000-pod burst (33 s at 5000), its
  // delegate Running all along; 48 brought that to 2 to 3 s (see README, Performance).
  workers: { flag: 'workers', kind: 'int', default: '48', help: 'workers per controller' },
  workersPerTarget: {
    flag: 'workers-per-target',
    kind: 'int',
    help: 'delegation workers the proxies of one target may hold at once, so that a target whose calls hang cannot stall the others (default: --workers minus 1, at least 1)',
  },
  // A target's server can name any number of objects with our labels: this bounds what they
  // cost us. 1000 delegates of one source, with their events, counted about 8 MiB of it.
  targetCacheBudgetMib: {
    flag: 'target-cache-budget-mib',
    kind: 'int',
    default: '128',
    help: "estimated heap one target's caches (delegates, copies, their events) may hold; a target past it is not Ready (CacheBudgetExceeded)",
  },
  logLevel: { flag: 'log-level', kind: 'enum', default: 'info', values: ['error', 'warn', 'info', 'debug'], help: 'log level' },
  logFormat: { flag: 'log-format', kind: 'enum', default: 'json', values: ['json', 'text'], help: 'log format' },
  nodeStatusIntervalSeconds: { flag: 'node-status-interval-seconds', kind: 'int', default: '60', help: 'virtual node status is written at least this often' },
  nodeLeaseIntervalSeconds: { flag: 'node-lease-interval-seconds', kind: 'int', default: '10', help: 'node Lease renewal and target probe period' },
  summaryRenewIntervalSeconds: {
    flag: 'summary-renew-interval-seconds',
    kind: 'int',
    default: '30',
    help: "this cluster's ClusterSummary is rewritten at least this often (1 to 3600), and says so: a source that sees it unchanged for three of these marks its Target not Ready (ClusterSummaryStale)",
  },
  enable: { flag: 'enable', kind: 'list', default: COMPONENTS.join(','), values: COMPONENTS, help: 'components to run' },
  proxySchedulerName: {
    flag: 'proxy-scheduler-name',
    kind: 'string',
    default: 'admiralty-proxy',
    help: "schedulerName the webhook gives proxies: the second kube-scheduler that calls our extender (exact placement); empty keeps the pod's own (virtual-node labels only)",
  },
  delegatePlacementTimeoutSeconds: {
    flag: 'delegate-placement-timeout-seconds',
    kind: 'int',
    default: '20',
    help: "how long the extender's bind waits for a target's scheduler to place a delegate before trying another target",
  },
  replaceUnschedulableAfterMs: {
    flag: 'replace-unschedulable-after',
    kind: 'duration',
    default: '60s',
    help: 'a delegate Unschedulable in its target this long (a Go duration like 90s or 2m, or whole seconds) has its pod re-placed: deleted so that its controller recreates it on another target (a bare pod is only marked); 0 never re-places',
  },
  delegateEvents: {
    flag: 'delegate-events',
    kind: 'enum',
    default: 'warnings',
    values: DELEGATE_EVENT_COPIES,
    help: "which events of a delegate are copied onto its proxy, with its target's name: warnings (a target's FailedScheduling, BackOff, Unhealthy), all (also the routine Normal ones: Scheduled, Pulled, Started..., each one more write in this cluster) or none",
  },
  shutdownTimeoutSeconds: { flag: 'shutdown-timeout-seconds', kind: 'int', default: '20', help: 'graceful shutdown deadline, counted after --shutdown-delay-seconds' },
  shutdownDelaySeconds: {
    flag: 'shutdown-delay-seconds',
    kind: 'int',
    default: '5',
    help: "on SIGTERM, keep serving this long, not Ready and asking clients to close their connections, while endpoints move to the other replicas; then stop. Delay plus timeout must stay under the pod's terminationGracePeriodSeconds",
  },
};

/**
 * Parses flags (`--name=value` or `--name value`) and environment, validates everything, and
 * returns the config or every problem found (not just the first). Reads no global state.
 */
// eslint-disable-next-line max-lines-per-function -- flags are read in one pass, then checked against each other, which needs them all
export function parseConfig(argv: string[], env: Record<string, string | undefined>): { ok: true; config: ProviderConfig } | { ok: false; errors: string[] } {
  const errors: string[] = [];
  const given = new Map<string, string>();
  const byFlag = new Map(Object.entries(FLAGS).map(([k, s]) => [s.flag, k as keyof ProviderConfig]));
  const rest = [...argv];
  for (let arg = rest.shift(); arg !== undefined; arg = rest.shift()) {
    if (!arg.startsWith('--')) {
      errors.push(`unexpected argument "${arg}"`);
      continue;
    }
    let [name, value] = arg.slice(2).split(/=(.*)/s, 2) as [string, string | undefined];
    const key = byFlag.get(name);
    if (!key) {
      errors.push(`unknown flag --${name}`);
      continue;
    }
    if (value === undefined) {
      const next = rest[0];
      if (FLAGS[key].kind === 'bool' && (next === undefined || next.startsWith('--'))) value = 'true';
      else value = rest.shift();
    }
    if (value === undefined) errors.push(`flag --${name} needs a value`);
    else given.set(key, value);
  }
  const out: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(FLAGS) as [keyof ProviderConfig, FlagSpec][]) {
    const raw = given.get(key) ?? (spec.env ? env[spec.env] || undefined : undefined) ?? spec.default;
    if (raw === undefined) continue;
    const where = `--${spec.flag}${spec.env ? ` (or ${spec.env})` : ''}`;
    switch (spec.kind) {
      case 'string':
        out[key] = raw;
        break;
      case 'port':
      case 'int': {
        const n = Number(raw);
        const max = spec.kind === 'port' ? 65535 : 1_000_000;
        if (!/^\d+$/.test(raw) || n < (spec.kind === 'port' ? 1 : 0) || n > max) errors.push(`${where}: "${raw}" is not ${spec.kind === 'port' ? 'a port (1-65535)' : 'a whole number'}`);
        else out[key] = n;
        break;
      }
      case 'duration':
        // Whole seconds, like the *-seconds flags, or a Go duration, like failover-after.
        try {
          out[key] = /^\d+$/.test(raw) ? Number(raw) * 1000 : parseGoDuration(raw);
        } catch (err) {
          errors.push(`${where}: ${(err as Error).message}`);
        }
        break;
      case 'bool':
        if (!['true', 'false'].includes(raw)) errors.push(`${where}: "${raw}" is not true or false`);
        else out[key] = raw === 'true';
        break;
      case 'ip':
        if (!isIP(raw)) errors.push(`${where}: "${raw}" is not an IP address`);
        else out[key] = raw;
        break;
      case 'url':
        try {
          const u = new URL(raw);
          if (u.protocol !== 'https:') throw new Error('not https');
          out[key] = raw;
        } catch {
          errors.push(`${where}: "${raw}" is not an https URL`);
        }
        break;
      case 'enum':
        if (!spec.values!.includes(raw)) errors.push(`${where}: "${raw}" is not one of ${spec.values!.join(', ')}`);
        else out[key] = raw;
        break;
      case 'list': {
        const items = raw
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean);
        const bad = items.filter((s) => !spec.values!.includes(s));
        if (bad.length) errors.push(`${where}: unknown component(s) ${bad.join(', ')}; known: ${spec.values!.join(', ')}`);
        else out[key] = items;
        break;
      }
    }
  }
  if (!out.clusterName) errors.push('--cluster-name (or CLUSTER_NAME) is required: it names this cluster on every delegate and copy');
  else if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(out.clusterName as string) || (out.clusterName as string).length > 63)
    errors.push(`--cluster-name: "${out.clusterName as string}" must be a valid label value (lowercase, digits, '-', '.', at most 63)`);
  const enabled = (out.enable as string[] | undefined) ?? [];
  if (enabled.includes('extender') && !enabled.includes('webhook')) errors.push('--enable: the extender is served on the webhook server: enable webhook too, or leave extender out');
  if (out.proxySchedulerName && !/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(out.proxySchedulerName as string))
    errors.push(`--proxy-scheduler-name: "${out.proxySchedulerName as string}" is not a valid scheduler name`);
  if (out.workersPerTarget === 0) errors.push('--workers-per-target: must be at least 1');
  if ((out.admissionWorkers as number) > 16) errors.push(`--admission-workers: ${out.admissionWorkers as number} is more than 16 (each worker holds up to 256 MiB of heap)`);
  const admissionDeadline = out.admissionDeadlineMs as number | undefined;
  if (admissionDeadline !== undefined && (admissionDeadline < 100 || admissionDeadline > 4000)) {
    errors.push(`--admission-deadline: ${admissionDeadline} ms is not from 100ms to 4s (the apiserver gives the webhook 5 s)`);
  }
  const summaryRenew = out.summaryRenewIntervalSeconds as number | undefined;
  if (summaryRenew !== undefined && (summaryRenew < 1 || summaryRenew > 3600))
    errors.push(`--summary-renew-interval-seconds: ${summaryRenew} is not from 1 to 3600 (the summary's readers accept no other)`);
  if (out.targetCacheBudgetMib === 0) errors.push("--target-cache-budget-mib: must be at least 1 (a target's delegates must fit)");
  // The leader must step down (renew deadline) before another replica may take the lease
  // (lease duration), and must get at least one retry in before stepping down.
  const lease = out.leaseDurationSeconds as number,
    renew = out.renewDeadlineSeconds as number,
    retry = out.retryPeriodSeconds as number;
  if (!(renew < lease))
    errors.push(
      `--renew-deadline-seconds (${renew}) must be less than --lease-duration-seconds (${lease}): a leader steps down only after its renew deadline, and another replica takes the lease after the lease duration`,
    );
  if (!(retry > 0 && retry < renew)) errors.push(`--retry-period-seconds (${retry}) must be at least 1 and less than --renew-deadline-seconds (${renew})`);
  if ((out.shutdownDelaySeconds as number) > 300)
    errors.push(`--shutdown-delay-seconds (${out.shutdownDelaySeconds as number}) must be at most 300: a terminating replica is not Ready, so a longer drain only holds a rollout`);
  if (errors.length) return { ok: false, errors };
  out.leaderElectionNamespace ??= out.namespace;
  out.workersPerTarget ??= Math.max(1, (out.workers as number) - 1);
  return { ok: true, config: out as unknown as ProviderConfig };
}

/** The flags reference, printed with configuration errors. */
export function configUsage(): string {
  const lines = ['usage: admiralty provider [flags]', ''];
  for (const spec of Object.values(FLAGS)) {
    lines.push(`  --${spec.flag}${spec.env ? ` (env ${spec.env})` : ''}${spec.default !== undefined ? ` [default ${spec.default}]` : ''}`, `      ${spec.help}`);
  }
  return lines.join('\n');
}
