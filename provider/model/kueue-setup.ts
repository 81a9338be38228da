import type { V1LabelSelector, V1LabelSelectorRequirement } from '@kubernetes/client-node';
import { ValidationError } from '../core/errors.js';
import { NAMESPACE_ENABLED_LABEL, NAMESPACE_ENABLED_VALUE } from '../core/keys.js';
import { targetScopedName } from './names.js';
import { parseQuantity } from './quantity.js';
import type { TargetRef } from './types.js';
import { targetIdentityLabels, virtualNodeTolerations } from './virtual-node.js';

/**
 * The Kueue objects of `admiralty kueue setup` (issue 56): one ResourceFlavor per Target or
 * ClusterTarget, whose `nodeLabels` are its virtual node's identity labels and whose
 * `tolerations` tolerate the virtual node's taint, so that Kueue, admitting a Workload to a
 * flavor, pins its pods to that target; one ClusterQueue that lists the flavors in order, so
 * Kueue tries them in that order (ordered overflow by quota); and, when asked, a LocalQueue.
 * Pure: the CLI reads the Targets and virtual nodes, and prints or applies what this builds.
 */

/** Kueue's API (`sigs.k8s.io/kueue` v0.17: v1beta2 is its storage version). */
export const KUEUE_API_VERSION = 'kueue.x-k8s.io/v1beta2';
/** Most flavors one resource group of a ClusterQueue may list (Kueue's validation). */
export const KUEUE_MAX_FLAVORS = 64;
/** Most resources one resource group may cover (Kueue's validation). */
export const KUEUE_MAX_RESOURCES = 64;
/** Label on every object the setup makes, so that `kubectl get -l` finds them. */
export const KUEUE_SETUP_MANAGED_BY = { 'app.kubernetes.io/managed-by': 'admiralty-kueue-setup' } as const;
/** The namespace label the apiserver sets on every namespace: its name. */
const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';
/** The resources a quota taken from the targets' capacity always covers. */
const CAPACITY_RESOURCES = ['cpu', 'memory', 'pods'];

/** A Target or ClusterTarget as the setup reads it. */
export interface KueueSetupTarget {
  ref: TargetRef;
  /** `spec.placement.priority`; 0 when unset (lower first, as the `burst` policy ranks). */
  priority: number;
  /** Its virtual node's `status.capacity`, when the node could be read. */
  capacity?: Record<string, string>;
}

/** `--quota`: amounts for every flavor, and per target (by the names `--targets` takes) on top. */
export interface KueueQuotas {
  all: Map<string, string>;
  byTarget: Map<string, Map<string, string>>;
}

/** Kueue's preemption policies within a ClusterQueue. */
export const PREEMPTION_POLICIES = ['Never', 'LowerPriority', 'LowerOrNewerEqualPriority'] as const;
export type PreemptionPolicy = (typeof PREEMPTION_POLICIES)[number];

/** What {@link buildKueueSetup} makes the objects from. */
export interface KueueSetupOptions {
  /** In the ClusterQueue's order (see {@link selectKueueTargets}). */
  targets: readonly KueueSetupTarget[];
  clusterQueue: string;
  /** First word of the flavors' names (see `targetScopedName`): `admiralty` names each flavor as its target's virtual node. */
  flavorPrefix: string;
  /** Absent: each flavor's quota is its target's capacity (cpu, memory, pods and extended resources). */
  quotas?: KueueQuotas;
  /** Absent: see {@link defaultNamespaceSelector}. */
  namespaceSelector?: V1LabelSelector;
  localQueue?: { namespace: string; name: string };
  preemption: PreemptionPolicy;
}

/** A Kueue object, as applied or printed. */
export interface KueueObject {
  apiVersion: string;
  kind: 'ResourceFlavor' | 'ClusterQueue' | 'LocalQueue';
  metadata: { name: string; namespace?: string; labels: Record<string, string> };
  spec: Record<string, unknown>;
}

/** How `--targets` and `--quota TARGET:…` name a target: `NAMESPACE/NAME` of a Target, `ClusterTarget/NAME`, or a bare `NAME`. */
export function targetDisplayName(ref: TargetRef): string {
  return ref.kind === 'Target' ? `${ref.namespace}/${ref.name}` : `ClusterTarget/${ref.name}`;
}

/**
 * The target `name` designates: `ClusterTarget/NAME`, `NAMESPACE/NAME` (a Target), or `NAME`,
 * the one Target or ClusterTarget of that name. Pure.
 *
 * @throws ValidationError when none is, or a bare name fits more than one.
 */
export function findKueueTarget(all: readonly KueueSetupTarget[], name: string): KueueSetupTarget {
  const slash = name.indexOf('/');
  const matches =
    slash < 0
      ? all.filter((t) => t.ref.name === name)
      : all.filter(
          (t) => (name.startsWith('ClusterTarget/') ? t.ref.kind === 'ClusterTarget' : t.ref.kind === 'Target' && t.ref.namespace === name.slice(0, slash)) && t.ref.name === name.slice(slash + 1),
        );
  const [only, ...more] = matches;
  if (!only) {
    const known = all.map((t) => targetDisplayName(t.ref)).join(', ');
    throw new ValidationError(`unknown target ${JSON.stringify(name)}${known ? ` (known: ${known})` : ': no Target nor ClusterTarget was found'}`);
  }
  if (more.length > 0) throw new ValidationError(`target ${JSON.stringify(name)} is ambiguous: ${matches.map((t) => targetDisplayName(t.ref)).join(', ')}; name one of them so`);
  return only;
}

/**
 * The targets of the ClusterQueue, in its order: those `names` designate ({@link
 * findKueueTarget}), in the order given; else every one, by `spec.placement.priority` (lower
 * first, as the `burst` policy ranks them), then name, Targets before ClusterTargets of the same
 * name. Pure.
 *
 * @throws ValidationError when there is none, a name is unknown, ambiguous or given twice, there
 *   are more than Kueue takes, or they are Targets of more than one namespace (a Target serves
 *   its own namespace's pods only, and one ClusterQueue's flavors serve every namespace it
 *   admits from).
 */
export function selectKueueTargets(all: readonly KueueSetupTarget[], names?: readonly string[]): KueueSetupTarget[] {
  let picked: KueueSetupTarget[];
  if (names && names.length > 0) {
    picked = names.map((n) => findKueueTarget(all, n));
    const seen = new Set<KueueSetupTarget>();
    for (const [i, t] of picked.entries()) {
      if (seen.has(t)) throw new ValidationError(`target ${targetDisplayName(t.ref)} is listed twice (as ${JSON.stringify(names[i])})`);
      seen.add(t);
    }
  } else {
    const rank = (t: KueueSetupTarget) => [t.priority, t.ref.name, t.ref.kind === 'Target' ? 0 : 1, t.ref.namespace] as const;
    picked = [...all].sort((a, b) => {
      const [x, y] = [rank(a), rank(b)];
      return x[0] - y[0] || x[1].localeCompare(y[1]) || x[2] - y[2] || x[3].localeCompare(y[3]);
    });
  }
  if (picked.length === 0) throw new ValidationError('no Target nor ClusterTarget to make flavors of: create Targets first (or pass -n for the namespace that has them)');
  if (picked.length > KUEUE_MAX_FLAVORS) throw new ValidationError(`${picked.length} targets: a ClusterQueue's resource group lists at most ${KUEUE_MAX_FLAVORS} flavors; pick some with --targets`);
  const namespaces = [...new Set(picked.filter((t) => t.ref.kind === 'Target').map((t) => t.ref.namespace))].sort();
  if (namespaces.length > 1) {
    throw new ValidationError(
      `Targets of namespaces ${namespaces.join(', ')}: a Target places pods of its own namespace only, and a ClusterQueue's flavors serve every namespace it admits from; pass -n NAMESPACE (one ClusterQueue per namespace), or use ClusterTargets`,
    );
  }
  return picked;
}

/** The namespace whose pods the Targets among `targets` serve, when there is one. */
export function targetsNamespace(targets: readonly KueueSetupTarget[]): string | undefined {
  return targets.find((t) => t.ref.kind === 'Target')?.ref.namespace;
}

/**
 * The ClusterQueue's namespaces when `--namespace-selector` is not given: those opted in to
 * Admiralty (`multicluster-scheduler=enabled`: only there are pods elected, and so placed on a
 * virtual node), and, when the flavors include Targets, only theirs. Pure.
 */
export function defaultNamespaceSelector(targets: readonly KueueSetupTarget[]): V1LabelSelector {
  const ns = targetsNamespace(targets);
  return { matchLabels: { ...(ns !== undefined ? { [NAMESPACE_NAME_LABEL]: ns } : {}), [NAMESPACE_ENABLED_LABEL]: NAMESPACE_ENABLED_VALUE } };
}

const QUALIFIED_NAME = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** A resource name or a label key: a qualified name (`cpu`, `nvidia.com/gpu`), 63 characters at most after its prefix. */
function isQualifiedName(s: string): boolean {
  const name = s.slice(s.lastIndexOf('/') + 1);
  return QUALIFIED_NAME.test(s) && name.length <= 63 && s.length - name.length <= 254;
}

/**
 * Checks a name given on the command line (`--cluster-queue`, `--flavor-prefix`, a LocalQueue's
 * namespace and name): a DNS-1123 label, at most `max` characters. Pure.
 *
 * @throws ValidationError naming the flag.
 */
export function checkDnsLabel(flag: string, value: string, max = 63): string {
  if (value.length === 0 || value.length > max || !DNS1123_LABEL.test(value)) {
    throw new ValidationError(
      `${flag} ${JSON.stringify(value)}: must be a DNS-1123 label of at most ${max} characters (lower-case letters, digits and '-', starting and ending with a letter or digit)`,
    );
  }
  return value;
}

/** `cpu=8,memory=16Gi`: resource names and quantities of at least 0, as given. */
function parseAmounts(flag: string, text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const item of text.split(',')) {
    const eq = item.indexOf('=');
    const name = item.slice(0, eq).trim();
    const amount = item.slice(eq + 1).trim();
    if (eq < 0 || name === '' || amount === '') throw new ValidationError(`${flag} ${JSON.stringify(text)}: write RESOURCE=QUANTITY[,RESOURCE=QUANTITY...], e.g. cpu=8,memory=16Gi,pods=100`);
    if (!isQualifiedName(name)) throw new ValidationError(`${flag}: ${JSON.stringify(name)} is not a resource name (cpu, memory, pods, or a qualified name such as nvidia.com/gpu)`);
    let nano: bigint;
    try {
      nano = parseQuantity(amount);
    } catch {
      throw new ValidationError(`${flag}: ${name}=${JSON.stringify(amount)} is not a quantity (e.g. 8, 500m, 16Gi)`);
    }
    if (nano < 0n) throw new ValidationError(`${flag}: ${name}=${amount}: a quota is at least 0`);
    if (out.has(name)) throw new ValidationError(`${flag}: ${name} is given twice`);
    out.set(name, amount);
  }
  return out;
}

/**
 * The `--quota` flags: `RESOURCE=QUANTITY,…` for every flavor, `TARGET:RESOURCE=QUANTITY,…`
 * for one target's (a name as `--targets` takes it), which wins over the former per resource.
 * Undefined when none is given (quotas from capacity). Pure.
 *
 * @throws ValidationError on a malformed list, a name that is not a resource, a quantity that
 *   does not parse or is negative, or a resource given twice in one list.
 */
export function parseQuotaFlags(values: readonly string[]): KueueQuotas | undefined {
  if (values.length === 0) return undefined;
  const quotas: KueueQuotas = { all: new Map(), byTarget: new Map() };
  for (const value of values) {
    // A target name has no `=`; a list's first item always has one before any `:`.
    const colon = value.indexOf(':');
    const isPerTarget = colon > 0 && !value.slice(0, colon).includes('=');
    const into = isPerTarget ? new Map<string, string>() : quotas.all;
    for (const [name, amount] of parseAmounts('--quota', isPerTarget ? value.slice(colon + 1) : value)) {
      if (into.has(name)) throw new ValidationError(`--quota: ${name} is given twice`);
      into.set(name, amount);
    }
    if (isPerTarget) {
      const target = value.slice(0, colon);
      if (quotas.byTarget.has(target)) throw new ValidationError(`--quota: target ${target} is given twice`);
      quotas.byTarget.set(target, into);
    }
  }
  return quotas;
}

/** Splits `a=b,c in (d,e)` at the commas outside parentheses. */
function splitRequirements(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '(') depth++;
    else if (text[i] === ')') depth--;
    else if (text[i] === ',' && depth === 0) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts.map((p) => p.trim());
}

function checkLabel(text: string, key: string, values: readonly string[]): void {
  if (!isQualifiedName(key)) throw new ValidationError(`--namespace-selector ${JSON.stringify(text)}: ${JSON.stringify(key)} is not a label key`);
  for (const v of values) if (v.length > 63 || !LABEL_VALUE.test(v)) throw new ValidationError(`--namespace-selector ${JSON.stringify(text)}: ${JSON.stringify(v)} is not a label value`);
}

/**
 * A label selector as kubectl's `-l` writes one: `k=v` (or `k==v`), `k!=v`, `k`, `!k`,
 * `k in (a,b)`, `k notin (a,b)`, comma-separated (all must hold); `''` selects every namespace
 * (`{}`). Pure.
 *
 * @throws ValidationError naming what does not parse.
 */
export function parseNamespaceSelector(text: string): V1LabelSelector {
  if (text.trim() === '') return {};
  const matchLabels: Record<string, string> = {};
  const matchExpressions: V1LabelSelectorRequirement[] = [];
  for (const req of splitRequirements(text)) {
    const set = /^(\S+)\s+(in|notin)\s+\(([^()]*)\)$/.exec(req);
    const eq = /^([^=!\s]+)\s*(==|=|!=)\s*([^=!\s]*)$/.exec(req);
    const exists = /^(!?)\s*([^=!\s()]+)$/.exec(req);
    if (set) {
      const [, key = '', op, list = ''] = set;
      const values = list.split(',').map((v) => v.trim());
      checkLabel(text, key, values);
      matchExpressions.push({ key, operator: op === 'in' ? 'In' : 'NotIn', values });
    } else if (eq) {
      const [, key = '', op, value = ''] = eq;
      checkLabel(text, key, [value]);
      if (op === '!=') matchExpressions.push({ key, operator: 'NotIn', values: [value] });
      else if (key in matchLabels && matchLabels[key] !== value) throw new ValidationError(`--namespace-selector ${JSON.stringify(text)}: ${key} cannot equal both ${matchLabels[key]} and ${value}`);
      else matchLabels[key] = value;
    } else if (exists) {
      const [, not, key = ''] = exists;
      checkLabel(text, key, []);
      matchExpressions.push({ key, operator: not ? 'DoesNotExist' : 'Exists' });
    } else {
      throw new ValidationError(`--namespace-selector ${JSON.stringify(text)}: cannot read ${JSON.stringify(req)} (write it as kubectl -l does: k=v, k!=v, k, !k, k in (a,b), k notin (a,b))`);
    }
  }
  return { ...(Object.keys(matchLabels).length > 0 ? { matchLabels } : {}), ...(matchExpressions.length > 0 ? { matchExpressions } : {}) };
}

/** The resources a quota from capacity covers: cpu, memory, pods, and every extended resource (`domain/name`, not `hugepages-*`) some target has. */
function capacityResources(targets: readonly KueueSetupTarget[]): string[] {
  const extended = new Set<string>();
  for (const t of targets) for (const name of Object.keys(t.capacity ?? {})) if (name.includes('/') && !name.startsWith('kubernetes.io/')) extended.add(name);
  return [...CAPACITY_RESOURCES, ...[...extended].sort()];
}

/** Each target's quota per covered resource, in the covered order. */
function flavorQuotas(o: KueueSetupOptions, all: readonly KueueSetupTarget[]): { covered: string[]; quotas: Map<KueueSetupTarget, Map<string, string>> } {
  const quotas = new Map<KueueSetupTarget, Map<string, string>>();
  if (!o.quotas) {
    const covered = capacityResources(o.targets);
    for (const t of o.targets) {
      if (!t.capacity) throw new ValidationError(`the virtual node of target ${targetDisplayName(t.ref)} could not be read for its capacity: give quotas with --quota`);
      quotas.set(t, new Map(covered.map((r) => [r, t.capacity![r] ?? '0'])));
    }
    return { covered, quotas };
  }
  const byTarget = new Map<KueueSetupTarget, Map<string, string>>();
  for (const [name, amounts] of o.quotas.byTarget) {
    const t = findKueueTarget(all, name);
    if (!o.targets.includes(t))
      throw new ValidationError(`--quota ${name}:…: target ${targetDisplayName(t.ref)} is not one of the ClusterQueue's (${o.targets.map((x) => targetDisplayName(x.ref)).join(', ')})`);
    if (byTarget.has(t)) throw new ValidationError(`--quota: target ${targetDisplayName(t.ref)} is given twice`);
    byTarget.set(t, amounts);
  }
  const covered = [...new Set([...o.quotas.all.keys(), ...[...byTarget.values()].flatMap((m) => [...m.keys()])])];
  if (covered.length > KUEUE_MAX_RESOURCES) throw new ValidationError(`--quota names ${covered.length} resources: a resource group covers at most ${KUEUE_MAX_RESOURCES}`);
  for (const t of o.targets) {
    const own = byTarget.get(t);
    const q = new Map<string, string>();
    for (const r of covered) {
      const amount = own?.get(r) ?? o.quotas.all.get(r);
      if (amount === undefined)
        throw new ValidationError(
          `--quota: no ${r} quota for target ${targetDisplayName(t.ref)}: every flavor needs one for each resource the ClusterQueue covers (give ${r}=… for all, or ${targetDisplayName(t.ref)}:${r}=…)`,
        );
      q.set(r, amount);
    }
    quotas.set(t, q);
  }
  return { covered, quotas };
}

/** The flavor of each target, by the name {@link buildKueueSetup} gives it. */
export function flavorName(ref: TargetRef, prefix: string): string {
  return targetScopedName(ref, prefix);
}

/**
 * The objects, in the order to apply them (flavors first: a ClusterQueue that names a missing
 * flavor is inactive until it exists), and warnings for the user:
 *
 * * per target, a ResourceFlavor named {@link flavorName}, `nodeLabels` its virtual node's
 *   identity labels (`targetIdentityLabels`) and `tolerations` of the virtual node's taint
 *   (`virtualNodeTolerations`): Kueue adds both to the pods of a Workload it admits to the flavor,
 *   and the scheduler extender, judging the nodeSelector on identity labels against each target
 *   (`resolveTargetKeys`), keeps only that target;
 * * a ClusterQueue with one resource group that lists the flavors in the targets' order, each
 *   with its quota (`--quota`, else its target's capacity); `flavorFungibility` says to try the
 *   next flavor rather than borrow or preempt in this one (Kueue's default for preemption,
 *   written out); `preemption.withinClusterQueue` as given; the namespace selector as given, else
 *   {@link defaultNamespaceSelector};
 * * the LocalQueue, when asked for.
 *
 * Pure.
 *
 * @throws ValidationError when a quota is missing for a target, a target's capacity is unknown
 *   and no quota is given, or the LocalQueue is in a namespace the Targets do not serve.
 */
export function buildKueueSetup(o: KueueSetupOptions, all: readonly KueueSetupTarget[] = o.targets): { objects: KueueObject[]; warnings: string[] } {
  const warnings: string[] = [];
  const ns = targetsNamespace(o.targets);
  if (o.localQueue && ns !== undefined && o.localQueue.namespace !== ns) {
    throw new ValidationError(`--local-queue ${o.localQueue.namespace}/${o.localQueue.name}: the flavors include Targets of namespace ${ns}, which place pods of ${ns} only`);
  }
  const selector = o.namespaceSelector ?? defaultNamespaceSelector(o.targets);
  if (o.namespaceSelector && ns !== undefined && o.namespaceSelector.matchLabels?.[NAMESPACE_NAME_LABEL] !== ns) {
    warnings.push(`--namespace-selector does not pin ${NAMESPACE_NAME_LABEL}=${ns}: Jobs of other namespaces would be admitted to flavors of Targets of ${ns}, where their pods cannot go`);
  }
  const { covered, quotas } = flavorQuotas(o, all);
  const names = new Map(o.targets.map((t) => [t, flavorName(t.ref, o.flavorPrefix)]));
  const labels = { ...KUEUE_SETUP_MANAGED_BY };
  const flavors: KueueObject[] = o.targets.map((t) => ({
    apiVersion: KUEUE_API_VERSION,
    kind: 'ResourceFlavor',
    metadata: { name: names.get(t)!, labels },
    spec: { nodeLabels: targetIdentityLabels(t.ref), tolerations: virtualNodeTolerations() },
  }));
  const clusterQueue: KueueObject = {
    apiVersion: KUEUE_API_VERSION,
    kind: 'ClusterQueue',
    metadata: { name: o.clusterQueue, labels },
    spec: {
      namespaceSelector: selector,
      queueingStrategy: 'BestEffortFIFO',
      flavorFungibility: { whenCanBorrow: 'TryNextFlavor', whenCanPreempt: 'TryNextFlavor' },
      preemption: { withinClusterQueue: o.preemption },
      resourceGroups: [
        {
          coveredResources: covered,
          flavors: o.targets.map((t) => ({ name: names.get(t)!, resources: covered.map((r) => ({ name: r, nominalQuota: quotas.get(t)!.get(r)! })) })),
        },
      ],
    },
  };
  const objects = [...flavors, clusterQueue];
  if (o.localQueue) {
    objects.push({
      apiVersion: KUEUE_API_VERSION,
      kind: 'LocalQueue',
      metadata: { name: o.localQueue.name, namespace: o.localQueue.namespace, labels },
      spec: { clusterQueue: o.clusterQueue },
    });
  }
  return { objects, warnings };
}
