import { parseArgs } from 'node:util';
import { CoreV1Api, CustomObjectsApi, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { ValidationError } from '../core/errors.js';
import { API_GROUP, API_VERSION, SOURCE_POD_MANIFEST_ANNOTATION } from '../core/keys.js';
import type { PodExplanation } from '../kubelet/operator-views.js';
import type { Target } from '../model/types.js';
import { type CliIo, writeLine } from './cli-io.js';
import {
  answerMessage,
  apiCall,
  ApiCallError,
  contextNamespace,
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

export const EXPLAIN_USAGE = `usage: kubectl admiralty explain POD [-n NAMESPACE] [-o json|yaml|wide] [kubectl flags]
       admiralty explain ...

Why an elected pod is pending, or why it went where it went: for every target its namespace may
use, whether the scheduler extender keeps it now and, if not, why (what the pod's
FailedScheduling event says), the score of each target that passes, and the target the pod is
bound to, or the ones it would be bound to now. The provider answers, evaluating the pod's saved
manifest against the summaries it holds, and binds nothing. It is asked on its kubelet API, at
the address the apiserver dials for a virtual node, with your credentials: who may get the pod
may have it explained.

  -n, --namespace NS   the pod's namespace (default: the context's namespace, else default)
${KUBECTL_FLAGS_USAGE}`;

/** The verdicts as a table for people; `wide` adds each target's virtual node. Pure. */
export function renderExplanation(e: PodExplanation, wide: boolean): string {
  const bound = e.boundTo ? `bound to ${e.boundTo.node}${e.boundTo.target ? ` (target ${e.boundTo.target})` : ''}` : 'not bound to a node';
  const lines = [`Pod ${e.pod}: ${e.phase}, ${bound}`];
  if (e.targets.length === 0) {
    lines.push('  no Target nor ClusterTarget serves its namespace');
    return lines.join('\n');
  }
  const header = ['TARGET', ...(wide ? ['VIRTUAL NODE'] : []), 'VERDICT', 'SCORE', 'REASON'];
  const rows = e.targets.map((t) => [t.target, ...(wide ? [t.node] : []), t.passes ? 'pass' : 'fail', t.passes ? String(t.score ?? 0) : '-', (t.passes ? t.why : t.reason) ?? '']);
  lines.push(renderTable(header, rows));
  // What the scores rank by: once when every pass ranks alike (no preference among them).
  const rankings = e.targets.filter((t) => t.passes && t.ranking).map((t) => [t.target, t.ranking!] as const);
  const [first] = rankings;
  if (first && rankings.every(([, r]) => r === first[1])) lines.push(`Scored by ${first[1]}`);
  else for (const [target, r] of rankings) lines.push(`Scored ${target} by ${r}`);
  lines.push(
    e.best.length === 0
      ? 'No target can take it now.'
      : `${e.boundTo ? 'Would be bound now to' : 'Would be bound to'}: ${e.best.join(' or ')}${e.best.length > 1 ? ' (equal scores: the proxy scheduler picks one at random)' : ''}`,
  );
  return lines.join('\n');
}

/**
 * The virtual node to ask through: the one the pod is bound to, else the first Ready one of a
 * Target of its namespace, else of a ClusterTarget (any would do: one provider serves them all;
 * a Ready one's provider is the one that answers). Reads Targets with the user's credentials.
 */
async function nodeToAsk(kc: KubeConfig, pod: V1Pod, namespace: string): Promise<string> {
  if (pod.spec?.nodeName?.startsWith('admiralty-')) return pod.spec.nodeName;
  const custom = kc.makeApiClient(CustomObjectsApi);
  const targets = (await apiCall(`list Targets in namespace ${namespace}`, () => custom.listNamespacedCustomObject({ group: API_GROUP, version: API_VERSION, namespace, plural: 'targets' }))) as {
    items?: Target[];
  };
  const clusterTargets = (await apiCall('list ClusterTargets', () => custom.listClusterCustomObject({ group: API_GROUP, version: API_VERSION, plural: 'clustertargets' })).catch(() => ({
    items: [],
  }))) as { items?: Target[] };
  const all = [...(targets.items ?? []), ...(clusterTargets.items ?? [])].filter((t) => t.status?.virtualNodeName);
  const ready = all.find((t) => t.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')) ?? all[0];
  if (!ready) throw new ValidationError(`no Target of namespace ${namespace} nor ClusterTarget has a virtual node: nothing can place pod ${namespace}/${pod.metadata?.name}`);
  return ready.status!.virtualNodeName!;
}

/** `explain POD`: exit 0 printed, 1 refused or failed (message on stderr), 2 bad usage. */
export async function explainCli(args: string[], io: CliIo): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args, allowPositionals: true, options: KUBECTL_FLAG_OPTIONS });
  } catch (err) {
    writeLine(io.stderr, `explain: ${(err as Error).message}`);
    writeLine(io.stderr, EXPLAIN_USAGE);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    writeLine(io.stdout, EXPLAIN_USAGE);
    return 0;
  }
  let format: OutputFormat;
  let name: string;
  try {
    format = parseOutputFormat(values.output);
    const [podArg, ...otherArgs] = positionals;
    if (podArg === undefined || otherArgs.length > 0) throw new ValidationError(positionals.length === 0 ? 'name the pod to explain' : `one pod at a time (got ${positionals.join(' ')})`);
    // `pod/NAME`, as kubectl takes it, or NAME.
    name = podArg.replace(/^pods?\//, '');
  } catch (err) {
    writeLine(io.stderr, `explain: ${(err as Error).message}`);
    writeLine(io.stderr, EXPLAIN_USAGE);
    return 2;
  }
  try {
    const { kc } = loadOperatorKubeconfig(values, io.env ?? {});
    const namespace = values.namespace ?? contextNamespace(kc) ?? 'default';
    // Read as the user: who may not read the pod is told so by the apiserver, before the
    // provider is asked anything.
    const pod = await apiCall(`read pod ${namespace}/${name}`, () => kc.makeApiClient(CoreV1Api).readNamespacedPod({ namespace, name }));
    if (pod.metadata?.annotations?.[SOURCE_POD_MANIFEST_ANNOTATION] === undefined) {
      throw new ValidationError(
        `pod ${namespace}/${name} is not a proxy pod (no ${SOURCE_POD_MANIFEST_ANNOTATION} annotation): only elected pods, in namespaces labelled multicluster-scheduler=enabled, are placed by Admiralty`,
      );
    }
    const node = await nodeToAsk(kc, pod, namespace);
    const address = await providerAddress(kc, node, values['provider-address']);
    const { status, body } = await getFromProvider(kc, address, `/admiralty/explain/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`);
    if (status === 403) throw new ApiCallError(403, `the provider refuses to explain pod ${namespace}/${name}: ${answerMessage(body)} (explain needs get on the pod)`);
    if (status !== 200) throw new ApiCallError(status, `the provider answered ${status}: ${answerMessage(body)}`);
    const explanation = JSON.parse(body) as PodExplanation;
    writeLine(io.stdout, format === 'json' || format === 'yaml' ? formatData(explanation, format) : renderExplanation(explanation, format === 'wide'));
    return 0;
  } catch (err) {
    if (err instanceof ValidationError || err instanceof ApiCallError) {
      writeLine(io.stderr, `explain: ${err.message}`);
      return 1;
    }
    throw err;
  }
}
