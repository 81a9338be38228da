import { parseArgs } from 'node:util';
import { CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions, type KubeConfig, type V1LabelSelector } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { ValidationError } from '../core/errors.js';
import { API_GROUP, API_VERSION } from '../core/keys.js';
import {
  buildKueueSetup,
  checkDnsLabel,
  KUEUE_API_VERSION,
  parseNamespaceSelector,
  parseQuotaFlags,
  PREEMPTION_POLICIES,
  selectKueueTargets,
  targetDisplayName,
  targetsNamespace,
  type KueueObject,
  type KueueSetupTarget,
  type PreemptionPolicy,
} from '../model/kueue-setup.js';
import { virtualNodeName } from '../model/names.js';
import { parseTargetPlacement } from '../model/target.js';
import type { Target } from '../model/types.js';
import { type CliIo, writeLine } from './cli-io.js';
import { apiCall, ApiCallError, loadOperatorKubeconfig } from './operator-api.js';

export const KUEUE_USAGE = `usage: admiralty kueue setup [flags]

Makes Kueue (kueue.x-k8s.io/v1beta2) queue work for the targets of this (source) cluster: one
ResourceFlavor per Target and ClusterTarget, whose nodeLabels are its virtual node's identity
labels and whose tolerations tolerate the virtual node's taint, so that a Workload admitted to
a flavor has its pods placed in that target; and one ClusterQueue listing the flavors in order,
which Kueue tries first to last: a Job goes to the first target whose quota it fits (ordered
overflow). Jobs go through it from a LocalQueue (--local-queue makes one); their pod templates
need the ${API_GROUP}/elect annotation, in a namespace labelled multicluster-scheduler=enabled.
Prints the objects (YAML), or applies them server-side with --apply.

  -n, --namespace NS         Targets of this namespace, and the ClusterTargets (default: the
                             Targets of every namespace; they must then all be of one)
  --targets A,B,...          these targets, in this order: NAME, NAMESPACE/NAME or
                             ClusterTarget/NAME (default: all, by spec.placement.priority,
                             lower first, then by name)
  --quota R=Q,...            each flavor's quota (nominalQuota) of each resource R, e.g.
                             cpu=8,memory=16Gi,pods=100; repeat as TARGET:R=Q,... for one
                             target's own amounts. Every flavor needs every resource named.
                             Default: each target's capacity now, as its virtual node shows it
                             (cpu, memory, pods and extended resources), a snapshot: run
                             again when the targets grow
  --cluster-queue NAME       the ClusterQueue's name (default: admiralty)
  --flavor-prefix PREFIX     flavors are named PREFIX-namespace-NS-NAME and PREFIX-cluster-NAME,
                             hashed when ambiguous or long (default: admiralty, the names of the
                             targets' virtual nodes)
  --namespace-selector SEL   namespaces the ClusterQueue admits Jobs from, as kubectl -l
                             (default: multicluster-scheduler=enabled, and, for Targets, their
                             namespace only; '' admits all)
  --local-queue [NS/]NAME    also a LocalQueue of the ClusterQueue (NS default: -n's)
  --preemption POLICY        withinClusterQueue preemption: ${PREEMPTION_POLICIES.join(', ')}
                             (default: Never)
  --apply                    apply them (server-side apply, field manager ${'admiralty-kueue-setup'})
  --dry-run                  with --apply: the API server checks them and keeps nothing
  --force-conflicts          with --apply: take over fields another manager set
  -o, --output FORMAT        yaml (default) or json, when printing
  --kubeconfig FILE          kubeconfig to read (default: $KUBECONFIG, else ~/.kube/config)
  --context NAME             context of that kubeconfig (default: its current context)
  --as USER                  act as this user (impersonation, as kubectl --as)`;

/** The field manager of `--apply`. */
export const KUEUE_FIELD_MANAGER = 'admiralty-kueue-setup';

const OPTIONS = {
  kubeconfig: { type: 'string' },
  context: { type: 'string' },
  as: { type: 'string' },
  namespace: { type: 'string', short: 'n' },
  output: { type: 'string', short: 'o' },
  targets: { type: 'string' },
  quota: { type: 'string', multiple: true },
  'cluster-queue': { type: 'string' },
  'flavor-prefix': { type: 'string' },
  'namespace-selector': { type: 'string' },
  'local-queue': { type: 'string' },
  preemption: { type: 'string' },
  apply: { type: 'boolean' },
  'dry-run': { type: 'boolean' },
  'force-conflicts': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>['values'];

/** What the flags say, checked before anything is read. */
export interface KueueSetupFlags {
  namespace?: string;
  targets?: string[];
  quotas: ReturnType<typeof parseQuotaFlags>;
  clusterQueue: string;
  flavorPrefix: string;
  namespaceSelector?: V1LabelSelector;
  localQueue?: { namespace?: string; name: string };
  preemption: PreemptionPolicy;
  output: 'yaml' | 'json';
  apply: boolean;
  dryRun: boolean;
  force: boolean;
}

/**
 * Checks the flags of `kueue setup`. Pure.
 *
 * @throws ValidationError naming the flag that is wrong.
 */
export function parseKueueSetupFlags(values: Values): KueueSetupFlags {
  const output = values.output ?? 'yaml';
  if (output !== 'yaml' && output !== 'json') throw new ValidationError(`-o ${output}: yaml or json`);
  const preemption = (values.preemption ?? 'Never') as PreemptionPolicy;
  if (!PREEMPTION_POLICIES.includes(preemption)) throw new ValidationError(`--preemption ${values.preemption}: one of ${PREEMPTION_POLICIES.join(', ')}`);
  if ((values['dry-run'] || values['force-conflicts']) && !values.apply) throw new ValidationError(`--${values['dry-run'] ? 'dry-run' : 'force-conflicts'} goes with --apply`);
  let localQueue: KueueSetupFlags['localQueue'];
  if (values['local-queue'] !== undefined) {
    const text = values['local-queue'];
    const [first = '', second, ...rest] = text.split('/');
    if (rest.length > 0) throw new ValidationError(`--local-queue ${text}: write NAMESPACE/NAME or NAME`);
    localQueue = second === undefined ? { name: checkDnsLabel('--local-queue', first) } : { namespace: checkDnsLabel('--local-queue namespace', first), name: checkDnsLabel('--local-queue', second) };
  }
  const targets = values.targets
    ?.split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (values.targets !== undefined && targets!.length === 0) throw new ValidationError('--targets is empty: name at least one target');
  return {
    ...(values.namespace !== undefined ? { namespace: checkDnsLabel('-n', values.namespace) } : {}),
    ...(targets ? { targets } : {}),
    quotas: parseQuotaFlags(values.quota ?? []),
    clusterQueue: checkDnsLabel('--cluster-queue', values['cluster-queue'] ?? 'admiralty'),
    // Room for `-namespace-` and the hash suffix within the 63 characters of a flavor name.
    flavorPrefix: checkDnsLabel('--flavor-prefix', values['flavor-prefix'] ?? 'admiralty', 40),
    ...(values['namespace-selector'] !== undefined ? { namespaceSelector: parseNamespaceSelector(values['namespace-selector']) } : {}),
    ...(localQueue ? { localQueue } : {}),
    preemption,
    output,
    apply: values.apply ?? false,
    dryRun: values['dry-run'] ?? false,
    force: values['force-conflicts'] ?? false,
  };
}

/** The Targets (of `namespace`, else of all) and ClusterTargets, with what the setup needs of each; a refusal to list ClusterTargets is a warning. */
async function readTargets(kc: KubeConfig, namespace: string | undefined, warn: (text: string) => void): Promise<{ all: KueueSetupTarget[]; ready: Map<KueueSetupTarget, boolean> }> {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const where = namespace ? ` in namespace ${namespace}` : ' in all namespaces';
  const targets = (await apiCall(`list Targets${where}`, () =>
    namespace
      ? custom.listNamespacedCustomObject({ group: API_GROUP, version: API_VERSION, namespace, plural: 'targets' })
      : custom.listClusterCustomObject({ group: API_GROUP, version: API_VERSION, plural: 'targets' }),
  )) as { items?: Target[] };
  const clusterTargets = (await apiCall('list ClusterTargets', () => custom.listClusterCustomObject({ group: API_GROUP, version: API_VERSION, plural: 'clustertargets' })).catch(
    (err: ApiCallError) => {
      if (err.code !== 403) throw err;
      warn(`${err.message}: flavors of Targets only`);
      return { items: [] };
    },
  )) as { items?: Target[] };
  const ready = new Map<KueueSetupTarget, boolean>();
  const all = [...(targets.items ?? []).map((t) => [t, 'Target'] as const), ...(clusterTargets.items ?? []).map((t) => [t, 'ClusterTarget'] as const)].map(([t, kind]) => {
    const placement = parseTargetPlacement(t.spec);
    const entry: KueueSetupTarget = {
      ref: { kind, namespace: kind === 'Target' ? (t.metadata.namespace ?? '') : '', name: t.metadata.name ?? '' },
      priority: placement.ok ? placement.placement.priority : 0,
    };
    ready.set(entry, t.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false);
    return entry;
  });
  return { all, ready };
}

/** Each target's virtual node's capacity, where the node can be read (a node not there yet, or not readable, leaves it unknown). */
async function readCapacities(kc: KubeConfig, targets: readonly KueueSetupTarget[]): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  await Promise.all(
    targets.map(async (t) => {
      const node = await core.readNode({ name: virtualNodeName(t.ref) }).catch(() => undefined);
      if (node?.status?.capacity) t.capacity = node.status.capacity;
    }),
  );
}

const PLURALS = { ResourceFlavor: 'resourceflavors', ClusterQueue: 'clusterqueues', LocalQueue: 'localqueues' } as const;

/** Applies the objects in order, server-side; says what it did of each on `write`. */
async function applyObjects(kc: KubeConfig, objects: readonly KueueObject[], flags: KueueSetupFlags, write: (text: string) => void): Promise<void> {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const [group, version] = KUEUE_API_VERSION.split('/') as [string, string];
  const ssa = setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply);
  for (const obj of objects) {
    const plural = PLURALS[obj.kind];
    const common = { group, version, plural, name: obj.metadata.name, body: obj, fieldManager: KUEUE_FIELD_MANAGER, force: flags.force, ...(flags.dryRun ? { dryRun: 'All' } : {}) };
    const what = `${obj.kind} ${obj.metadata.namespace ? `${obj.metadata.namespace}/` : ''}${obj.metadata.name}`;
    await apiCall(`apply ${what}`, () =>
      obj.metadata.namespace ? custom.patchNamespacedCustomObject({ ...common, namespace: obj.metadata.namespace }, ssa) : custom.patchClusterCustomObject(common, ssa),
    ).catch((err: ApiCallError) => {
      const where = obj.metadata.namespace ? `, and does namespace ${obj.metadata.namespace} exist` : '';
      if (err.code === 404) throw new ApiCallError(404, `${err.message} (is Kueue installed in this cluster, with its ${KUEUE_API_VERSION} CRDs${where}?)`);
      if (err.code === 409) throw new ApiCallError(409, `${err.message} (another field manager set these fields: pass --force-conflicts to take them over)`);
      throw err;
    });
    write(`${what} applied${flags.dryRun ? ' (dry run)' : ''}`);
  }
}

/** `kueue setup`: reads the targets, then prints or applies the objects; 0 done, 1 refused or failed, 2 bad usage. */
async function setup(values: Values, io: CliIo): Promise<number> {
  let flags: KueueSetupFlags;
  try {
    flags = parseKueueSetupFlags(values);
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    writeLine(io.stderr, `kueue setup: ${err.message}`);
    return 2;
  }
  const warn = (text: string) => writeLine(io.stderr, `kueue setup: warning: ${text}`);
  try {
    const { kc } = loadOperatorKubeconfig(values, io.env ?? {});
    const { all, ready } = await readTargets(kc, flags.namespace, warn);
    if (all.length === 0) throw new ValidationError(`no Target${flags.namespace ? ` in namespace ${flags.namespace}` : ''} nor ClusterTarget to make flavors of: create Targets first`);
    const targets = selectKueueTargets(all, flags.targets);
    for (const t of targets) if (!ready.get(t)) warn(`target ${targetDisplayName(t.ref)} is not Ready: Jobs admitted to its flavor wait until it is`);
    if (!flags.quotas) await readCapacities(kc, targets);
    const lq = flags.localQueue;
    const lqNamespace = lq?.namespace ?? flags.namespace ?? targetsNamespace(targets);
    if (lq && lqNamespace === undefined) throw new ValidationError(`--local-queue ${lq.name}: say its namespace (NAMESPACE/NAME, or -n)`);
    const { objects, warnings } = buildKueueSetup(
      {
        targets,
        clusterQueue: flags.clusterQueue,
        flavorPrefix: flags.flavorPrefix,
        ...(flags.quotas ? { quotas: flags.quotas } : {}),
        ...(flags.namespaceSelector ? { namespaceSelector: flags.namespaceSelector } : {}),
        ...(lq ? { localQueue: { namespace: lqNamespace!, name: lq.name } } : {}),
        preemption: flags.preemption,
      },
      all,
    );
    for (const w of warnings) warn(w);
    if (flags.apply) await applyObjects(kc, objects, flags, (text) => writeLine(io.stdout, text));
    else
      writeLine(
        io.stdout,
        flags.output === 'json' ? JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }, null, 2) : objects.map((o) => stringify(o, { lineWidth: 0 }).trimEnd()).join('\n---\n'),
      );
    return 0;
  } catch (err) {
    if (err instanceof ValidationError || err instanceof ApiCallError) {
      writeLine(io.stderr, `kueue setup: ${err.message}`);
      return 1;
    }
    throw err;
  }
}

/** `kueue SUBCOMMAND`: `setup` only, for now. */
export async function kueueCli(args: string[], io: CliIo): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args, allowPositionals: true, options: OPTIONS });
  } catch (err) {
    writeLine(io.stderr, `kueue: ${(err as Error).message}`);
    writeLine(io.stderr, KUEUE_USAGE);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    writeLine(io.stdout, KUEUE_USAGE);
    return 0;
  }
  if (positionals.length !== 1 || positionals[0] !== 'setup') {
    writeLine(io.stderr, positionals.length === 0 ? 'kueue: name a subcommand (setup)' : `kueue: unknown subcommand ${JSON.stringify(positionals.join(' '))} (setup)`);
    writeLine(io.stderr, KUEUE_USAGE);
    return 2;
  }
  return setup(values, io);
}
