import { parseArgs } from 'node:util';
import { CoreV1Api, CustomObjectsApi, NetworkingV1Api, PatchStrategy, RbacAuthorizationV1Api, setHeaderOptions, type KubeConfig, type KubernetesListObject } from '@kubernetes/client-node';
import { forEachPage } from '../controller/pager.js';
import { classifyApiError, statusMessage, ValidationError } from '../core/errors.js';
import { API_GROUP, API_VERSION, FIELD_MANAGER, HAS_FINALIZER_LABEL, KEY_PREFIX } from '../core/keys.js';
import { type CliIo, writeLine } from './cli-io.js';
import { loadKubeconfig } from './load-kubeconfig.js';

const USAGE = `usage: admiralty cleanup [--kubeconfig FILE] [--context NAME] [-n NAMESPACE] [--dry-run]

Removes every finalizer that starts with "${KEY_PREFIX}" from pods, services, configmaps,
secrets and ingresses (objects labelled ${HAS_FINALIZER_LABEL} first, then all others, dropping
that label with the finalizer), and from role bindings (those of self targets), Targets and
ClusterTargets, so that nothing stays stuck
once the provider (or Admiralty, which also finalized ingresses) is uninstalled. Run it after the
provider is stopped: a running provider would add its finalizers again. Proxy pods freed this
way no longer delete their delegates in the targets; delete those by label
(${KEY_PREFIX}parent-cluster-name=<this cluster>) if they should go too.
Finalizers of other owners are kept. Concurrent changes are never overwritten: each patch tests
the finalizer list it replaces, and is recomputed when the list changed meanwhile.

  --kubeconfig FILE   kubeconfig to read (default: $KUBECONFIG, else ~/.kube/config)
  --context NAME      context of that kubeconfig (default: its current context)
  -n, --namespace NS  only this namespace (ClusterTargets are then left alone)
  --dry-run           say what would change; the API server validates the patches but keeps nothing`;

/** How many times one object is re-read and patched again when its finalizers change under us. */
const MAX_ATTEMPTS = 6;

/**
 * The finalizers to keep once ours (`multicluster.admiralty.io/...`) are gone, or null when
 * there are none of ours (nothing to do). Order of the others is kept.
 */
export function stripOurFinalizers(finalizers: string[]): string[] | null {
  const kept = finalizers.filter((f) => !f.startsWith(KEY_PREFIX));
  return kept.length === finalizers.length ? null : kept;
}

/**
 * JSON patch that replaces `current` finalizers by `kept` only if they are still `current`:
 * the `test` op makes the API server refuse (422) when someone changed them meanwhile.
 */
export function finalizerPatch(current: string[], kept: string[], dropLabel = false): object[] {
  return [
    { op: 'test', path: '/metadata/finalizers', value: current },
    kept.length ? { op: 'replace', path: '/metadata/finalizers', value: kept } : { op: 'remove', path: '/metadata/finalizers' },
    // The label only says "has our finalizer" (our informers select on it): it goes too.
    ...(dropLabel ? [{ op: 'remove', path: `/metadata/labels/${HAS_FINALIZER_LABEL.replace(/~/g, '~0').replace(/\//g, '~1')}` }] : []),
  ];
}

/** The metadata cleanup needs of any object. */
export interface ObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  finalizers?: string[];
  labels?: Record<string, string>;
}

/** One kind of object cleanup goes through; implemented over the API, or faked in tests. */
export interface FinalizerResource {
  /** Singular lower-case kind for messages (`pod`, `clustertarget`). */
  kind: string;
  /** Every object (of one namespace when configured), optionally filtered by label selector. */
  list(labelSelector?: string): Promise<ObjectMeta[]>;
  get(namespace: string | undefined, name: string): Promise<ObjectMeta>;
  /** Applies a JSON patch; `dryRun` asks the server to validate without persisting. */
  patch(namespace: string | undefined, name: string, patch: object[], dryRun: boolean): Promise<void>;
}

export interface CleanupReport {
  /** Objects changed (or that would be changed in a dry run). */
  changed: number;
  /** Finalizers removed in all. */
  finalizersRemoved: number;
  /** Objects that could not be changed (a line each was printed). */
  failed: number;
  /** Kinds that could not be listed at all, e.g. CRDs not installed (a line each was printed). */
  skippedKinds: string[];
}

export interface CleanupOptions {
  dryRun: boolean;
  /** Called with one line per object changed, failure or skipped kind. */
  say: (line: string) => void;
  /** Wait between attempts; injected so tests need not wait. */
  sleep?: (ms: number) => Promise<void>;
}

/**
 * Strips our finalizers from every object of `labelledFirst` (those labelled
 * HAS_FINALIZER_LABEL, a cheap first pass that frees the objects most likely blocked), then from
 * every object of `fullScan`. Each object is patched once at most (tracked by UID). Idempotent:
 * a second run changes nothing.
 */
export async function removeOurFinalizers(resources: { labelledFirst: FinalizerResource[]; fullScan: FinalizerResource[] }, opts: CleanupOptions): Promise<CleanupReport> {
  const report: CleanupReport = { changed: 0, finalizersRemoved: 0, failed: 0, skippedKinds: [] };
  const seen = new Set<string>();
  const passes: [FinalizerResource[], string | undefined][] = [
    [resources.labelledFirst, HAS_FINALIZER_LABEL],
    [resources.fullScan, undefined],
  ];
  for (const [kinds, selector] of passes) {
    for (const resource of kinds) {
      let items: ObjectMeta[];
      try {
        items = await resource.list(selector);
      } catch (err) {
        if (!report.skippedKinds.includes(resource.kind)) {
          report.skippedKinds.push(resource.kind);
          const why = classifyApiError(err) === 'NotFound' ? 'not installed in this cluster' : `cannot list them: ${describe(err)}`;
          opts.say(`${resource.kind}s: skipped, ${why}`);
        }
        continue;
      }
      for (const item of items) {
        const id = `${resource.kind}/${item.uid ?? `${item.namespace}/${item.name}`}`;
        if (seen.has(id)) continue;
        seen.add(id);
        if (!stripOurFinalizers(item.finalizers ?? [])) continue;
        const what = `${resource.kind} ${item.namespace ? `${item.namespace}/` : ''}${item.name}`;
        try {
          const removed = await stripOne(resource, item, opts);
          if (removed.length) {
            report.changed++;
            report.finalizersRemoved += removed.length;
            opts.say(`${what}: ${opts.dryRun ? 'would remove' : 'removed'} ${removed.join(', ')}`);
          }
        } catch (err) {
          report.failed++;
          opts.say(`${what}: FAILED: ${describe(err)}`);
        }
      }
    }
  }
  return report;
}

/** Patches one object until our finalizers are gone; returns those removed ([] if it vanished or had none left). */
async function stripOne(resource: FinalizerResource, first: ObjectMeta, opts: CleanupOptions): Promise<string[]> {
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  let current = first;
  for (let attempt = 1; ; attempt++) {
    const finalizers = current.finalizers ?? [];
    const kept = stripOurFinalizers(finalizers);
    if (!kept) return [];
    try {
      await resource.patch(current.namespace, current.name!, finalizerPatch(finalizers, kept, current.labels?.[HAS_FINALIZER_LABEL] !== undefined), opts.dryRun);
      return finalizers.filter((f) => !kept.includes(f));
    } catch (err) {
      const kind = classifyApiError(err);
      if (kind === 'NotFound') return [];
      // 422 is what a failed `test` op yields; 409, 429, 5xx and network errors are worth another try.
      const retryable = kind === 'Invalid' || kind === 'Conflict' || kind === 'TooManyRequests' || kind === 'ServerError' || kind === 'Network';
      if (!retryable || attempt >= MAX_ATTEMPTS) throw err;
      await sleep(Math.min(2000, 50 * 2 ** attempt));
      let fresh: ObjectMeta;
      try {
        fresh = await resource.get(current.namespace, current.name!);
      } catch (getErr) {
        if (classifyApiError(getErr) === 'NotFound') return [];
        throw getErr;
      }
      // An Invalid answer to an unchanged list is a real rejection, not a race: do not loop on it.
      if (kind === 'Invalid' && sameList(fresh.finalizers ?? [], finalizers)) throw err;
      current = fresh;
    }
  }
}

function sameList(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function describe(err: unknown): string {
  const kind = classifyApiError(err);
  return kind === 'Unknown' ? statusMessage(err) : `${kind}: ${statusMessage(err)}`;
}

const jsonPatch = () => setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);

type ListPage = { items: { metadata?: ObjectMeta }[]; metadata?: { _continue?: string; continue?: string } };

/** The metadata of every object, listed page by page (see `forEachPage`: `limit` objects a page). */
async function listAll(page: (limit: number, cont: string | undefined) => Promise<ListPage>): Promise<ObjectMeta[]> {
  const out: ObjectMeta[] = [];
  await forEachPage(
    (limit, cont) => page(limit, cont) as Promise<KubernetesListObject<{ metadata?: ObjectMeta }>>,
    (items) => {
      for (const item of items) if (item.metadata) out.push(item.metadata);
    },
    { what: 'objects to clean up' },
  );
  return out;
}

/** Pods, services, configmaps and secrets, over the core API. */
export function coreResources(kc: KubeConfig, namespace?: string): FinalizerResource[] {
  const core = kc.makeApiClient(CoreV1Api);
  const common = (
    kind: string,
    list: (p: { labelSelector?: string; _continue?: string; limit: number }) => Promise<ListPage>,
    read: (p: { name: string; namespace: string }) => Promise<{ metadata?: ObjectMeta }>,
    patch: (p: { name: string; namespace: string; body: object[]; dryRun?: string; fieldManager: string }) => Promise<unknown>,
  ): FinalizerResource => ({
    kind,
    list: (labelSelector) => listAll((limit, cont) => list({ labelSelector, _continue: cont, limit })),
    get: async (ns, name) => (await read({ name, namespace: ns! })).metadata ?? {},
    patch: async (ns, name, body, dryRun) => {
      await patch({ name, namespace: ns!, body, dryRun: dryRun ? 'All' : undefined, fieldManager: FIELD_MANAGER });
    },
  });
  return [
    common(
      'pod',
      (p) => (namespace ? core.listNamespacedPod({ ...p, namespace }) : core.listPodForAllNamespaces(p)),
      (p) => core.readNamespacedPod(p),
      (p) => core.patchNamespacedPod(p, jsonPatch()),
    ),
    common(
      'service',
      (p) => (namespace ? core.listNamespacedService({ ...p, namespace }) : core.listServiceForAllNamespaces(p)),
      (p) => core.readNamespacedService(p),
      (p) => core.patchNamespacedService(p, jsonPatch()),
    ),
    common(
      'configmap',
      (p) => (namespace ? core.listNamespacedConfigMap({ ...p, namespace }) : core.listConfigMapForAllNamespaces(p)),
      (p) => core.readNamespacedConfigMap(p),
      (p) => core.patchNamespacedConfigMap(p, jsonPatch()),
    ),
    common(
      'secret',
      (p) => (namespace ? core.listNamespacedSecret({ ...p, namespace }) : core.listSecretForAllNamespaces(p)),
      (p) => core.readNamespacedSecret(p),
      (p) => core.patchNamespacedSecret(p, jsonPatch()),
    ),
  ];
}

/**
 * Ingresses (networking.k8s.io/v1). Ours never finalizes them, but Admiralty's follow controller
 * did (global ingresses), and the migration guide runs this command in its place.
 */
export function ingressResources(kc: KubeConfig, namespace?: string): FinalizerResource[] {
  const networking = kc.makeApiClient(NetworkingV1Api);
  return [
    {
      kind: 'ingress',
      list: (labelSelector) =>
        listAll((limit, cont) => {
          const p = { labelSelector, _continue: cont, limit };
          return namespace ? networking.listNamespacedIngress({ ...p, namespace }) : networking.listIngressForAllNamespaces(p);
        }),
      get: async (ns, name) => (await networking.readNamespacedIngress({ name, namespace: ns! })).metadata ?? {},
      patch: async (ns, name, body, dryRun) => {
        await networking.patchNamespacedIngress({ name, namespace: ns!, body, dryRun: dryRun ? 'All' : undefined, fieldManager: FIELD_MANAGER }, jsonPatch());
      },
    },
  ];
}

/**
 * RoleBindings (and, cluster-wide, ClusterRoleBindings): the provider's bindings for self
 * targets hold its finalizer until it releases them. They carry no has-finalizer label: a patch
 * of finalizers alone needs no right to bind the binding's role, one that changes a label does.
 */
export function bindingResources(kc: KubeConfig, namespace?: string): FinalizerResource[] {
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  const roleBindings: FinalizerResource = {
    kind: 'rolebinding',
    list: (labelSelector) =>
      listAll((limit, cont) =>
        namespace ? rbac.listNamespacedRoleBinding({ namespace, labelSelector, _continue: cont, limit }) : rbac.listRoleBindingForAllNamespaces({ labelSelector, _continue: cont, limit }),
      ),
    get: async (ns, name) => (await rbac.readNamespacedRoleBinding({ name, namespace: ns! })).metadata ?? {},
    patch: async (ns, name, body, dryRun) => {
      await rbac.patchNamespacedRoleBinding({ name, namespace: ns!, body, dryRun: dryRun ? 'All' : undefined, fieldManager: FIELD_MANAGER }, jsonPatch());
    },
  };
  const clusterRoleBindings: FinalizerResource = {
    kind: 'clusterrolebinding',
    list: (labelSelector) => listAll((limit, cont) => rbac.listClusterRoleBinding({ labelSelector, _continue: cont, limit })),
    get: async (_ns, name) => (await rbac.readClusterRoleBinding({ name })).metadata ?? {},
    patch: async (_ns, name, body, dryRun) => {
      await rbac.patchClusterRoleBinding({ name, body, dryRun: dryRun ? 'All' : undefined, fieldManager: FIELD_MANAGER }, jsonPatch());
    },
  };
  return namespace ? [roleBindings] : [roleBindings, clusterRoleBindings];
}

/** Targets (and, cluster-wide, ClusterTargets) over the custom objects API. */
export function targetResources(kc: KubeConfig, namespace?: string): FinalizerResource[] {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const base = { group: API_GROUP, version: API_VERSION };
  const targets: FinalizerResource = {
    kind: 'target',
    list: (labelSelector) =>
      listAll((limit, cont) => {
        const p = { ...base, plural: 'targets', labelSelector, _continue: cont, limit };
        return namespace ? custom.listNamespacedCustomObject({ ...p, namespace }) : custom.listClusterCustomObject(p);
      }),
    get: async (ns, name) => ((await custom.getNamespacedCustomObject({ ...base, plural: 'targets', namespace: ns!, name })) as { metadata?: ObjectMeta }).metadata ?? {},
    patch: async (ns, name, body, dryRun) => {
      await custom.patchNamespacedCustomObject({ ...base, plural: 'targets', namespace: ns!, name, body, dryRun: dryRun ? 'All' : undefined, fieldManager: FIELD_MANAGER }, jsonPatch());
    },
  };
  const clusterTargets: FinalizerResource = {
    kind: 'clustertarget',
    list: (labelSelector) => listAll((limit, cont) => custom.listClusterCustomObject({ ...base, plural: 'clustertargets', labelSelector, _continue: cont, limit })),
    get: async (_ns, name) => ((await custom.getClusterCustomObject({ ...base, plural: 'clustertargets', name })) as { metadata?: ObjectMeta }).metadata ?? {},
    patch: async (_ns, name, body, dryRun) => {
      await custom.patchClusterCustomObject({ ...base, plural: 'clustertargets', name, body, dryRun: dryRun ? 'All' : undefined, fieldManager: FIELD_MANAGER }, jsonPatch());
    },
  };
  return namespace ? [targets] : [targets, clusterTargets];
}

/**
 * The `cleanup` command (Admiralty's post-delete `remove-finalizers` job, as a command). Prints a
 * line per object changed and a summary on stdout. Returns 0 when every object was cleaned, 1
 * when some could not be (or the cluster could not be reached), 2 on bad usage.
 */
export async function cleanupCli(args: string[], io: CliIo): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args,
      options: {
        kubeconfig: { type: 'string' },
        context: { type: 'string' },
        namespace: { type: 'string', short: 'n' },
        'dry-run': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    writeLine(io.stderr, `cleanup: ${(err as Error).message}`);
    writeLine(io.stderr, USAGE);
    return 2;
  }
  if (values.help) {
    writeLine(io.stdout, USAGE);
    return 0;
  }
  const dryRun = values['dry-run'] ?? false;
  let kc: KubeConfig;
  let context: string;
  try {
    ({ kc, context } = loadKubeconfig({ kubeconfig: values.kubeconfig, context: values.context, env: io.env }));
  } catch (err) {
    writeLine(io.stderr, `cleanup: ${err instanceof ValidationError ? err.message : statusMessage(err)}`);
    return 1;
  }
  const scope = values.namespace ? `namespace ${values.namespace}` : 'all namespaces';
  writeLine(io.stdout, `cleanup${dryRun ? ' (dry run)' : ''}: context ${context}, ${scope}`);
  const core = [...coreResources(kc, values.namespace), ...ingressResources(kc, values.namespace)];
  const report = await removeOurFinalizers(
    { labelledFirst: core, fullScan: [...core, ...bindingResources(kc, values.namespace), ...targetResources(kc, values.namespace)] },
    { dryRun, say: (line) => writeLine(io.stdout, `  ${line}`) },
  );
  const coreSkipped = report.skippedKinds.filter((k) => k !== 'target' && k !== 'clustertarget');
  writeLine(
    io.stdout,
    `cleanup${dryRun ? ' (dry run)' : ''}: ${dryRun ? 'would remove' : 'removed'} ${report.finalizersRemoved} finalizer(s) from ${report.changed} object(s)` +
      (report.failed ? `; ${report.failed} object(s) FAILED` : '') +
      (report.skippedKinds.length ? `; skipped ${report.skippedKinds.map((k) => `${k}s`).join(', ')}` : ''),
  );
  return report.failed || coreSkipped.length ? 1 : 0;
}
