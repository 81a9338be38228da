import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { metricByLabel } from '../bench/offload-report.js';
import { buildBinaries, REPO_ROOT, Sandbox, shippedCli, SOURCE_USER, waitFor } from '../sandbox/sandbox.js';

export { waitFor };

const execFileAsync = promisify(execFile);

/** The running sandbox (the root hooks have started it). */
export const sandbox = new Sandbox();

/** Runs the sandbox's kubectl against a cluster; resolves with stdout, rejects with stderr. */
export async function kubectl(cluster: string, ...args: string[]): Promise<string> {
  try {
    const { stdout } = await execFileAsync(sandbox.kubectlPath, ['--kubeconfig', sandbox.kubeconfigPath, '--context', cluster, ...args], { maxBuffer: 64 << 20 });
    return stdout;
  } catch (err) {
    const e = err as { stderr?: string; code?: number; stdout?: string };
    const wrapped = new Error(`kubectl ${args.join(' ')} on ${cluster} failed (exit ${e.code}): ${e.stderr ?? String(err)}`) as Error & { exitCode?: number; stdout?: string; stderr?: string };
    wrapped.exitCode = e.code;
    wrapped.stdout = e.stdout;
    wrapped.stderr = e.stderr;
    throw wrapped;
  }
}

/** kubectl with data on stdin. */
export function kubectlStdin(cluster: string, stdin: string, ...args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
  return new Promise((res) => {
    const child = execFile(sandbox.kubectlPath, ['--kubeconfig', sandbox.kubeconfigPath, '--context', cluster, ...args], (err, stdout, stderr) =>
      res({ stdout, stderr, code: err ? ((err as { code?: number }).code ?? 1) : 0 }),
    );
    child.stdin!.end(stdin);
  });
}

export function apply(cluster: string, yaml: string): Promise<string> {
  return sandbox.applyYaml(cluster, yaml);
}

/** Parsed `kubectl get -o json`. */
export async function getJson<T = any>(cluster: string, ...args: string[]): Promise<T> {
  return JSON.parse(await kubectl(cluster, 'get', ...args, '-o', 'json')) as T;
}

/** The status of an object's Ready condition (a node, a Target), or undefined. */
export const readyOf = (obj: any): string | undefined => obj?.status?.conditions?.find((c: any) => c.type === 'Ready')?.status;

/** A KubeConfig for one sandbox cluster (admin). */
export function kubeConfigFor(cluster: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(sandbox.kubeconfigPath);
  kc.setCurrentContext(cluster);
  return kc;
}

/** A fresh namespace name for a test, so tests never share objects. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${Math.random().toString(36).slice(2, 8)}`;
}

/**
 * In c2's namespace `ns`, authorizes c1's identity (exported from namespace default) with a
 * Source, and waits until c2's provider has bound the Source role: a Target that lists before
 * then is refused (403), which the suite's RBAC audit counts against us.
 */
export async function authorizeSource(ns: string): Promise<void> {
  await apply('c2', `apiVersion: multicluster.admiralty.io/v1alpha1\nkind: Source\nmetadata: {name: c1, namespace: ${ns}}\nspec: {userName: "${SOURCE_USER}"}\n`);
  await waitFor(`the Source role bound in c2's ${ns}`, 30_000, async () => (await kubectl('c2', 'auth', 'can-i', 'list', 'pods', '-n', ns, '--as', SOURCE_USER).catch(() => 'no')).trim() === 'yes');
}

/**
 * Makes a fresh namespace usable for multi-cluster tests, as a user would: the namespace in
 * c1 (labelled) and c2, the kubeconfig Secret of c2 copied in, and Targets `c1` (self) and `c2`
 * in it. Resolves with the names of its two virtual nodes once both are Ready. Isolates tests
 * from one another (a Target serves only its own namespace).
 */
export async function connectNamespace(ns: string): Promise<{ c1Node: string; c2Node: string }> {
  await kubectl('c1', 'create', 'namespace', ns);
  await kubectl('c1', 'label', 'namespace', ns, 'multicluster-scheduler=enabled');
  await kubectl('c2', 'create', 'namespace', ns);
  // In the target, authorize the source's identity (exported from namespace default) here too.
  await authorizeSource(ns);
  const secret = await getJson('c1', 'secret', 'c2', '-n', 'default');
  await apply('c1', JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'c2', namespace: ns }, data: secret.data }));
  await apply(
    'c1',
    `apiVersion: multicluster.admiralty.io/v1alpha1\nkind: Target\nmetadata: {name: c1, namespace: ${ns}}\nspec: {self: true}\n---\napiVersion: multicluster.admiralty.io/v1alpha1\nkind: Target\nmetadata: {name: c2, namespace: ${ns}}\nspec: {kubeconfigSecret: {name: c2}}\n`,
  );
  const nodes: Record<string, string> = {};
  await waitFor(`virtual nodes of ${ns} Ready`, 60_000, async () => {
    for (const t of ['c1', 'c2']) {
      const target = await getJson('c1', 'target', t, '-n', ns);
      const ready = readyOf(target) === 'True';
      if (!ready || !target.status?.virtualNodeName) return false;
      nodes[t] = target.status.virtualNodeName;
    }
    return true;
  });
  // A pod is refused (403 "error looking up service account") until the namespace's controller
  // has made its default ServiceAccount. That lag is the clusters', not ours, and it can last
  // seconds right after a cluster's apiserver came back: a delegate refused for it goes to
  // another target, which would leave tests of placement or pace measuring the race.
  await waitFor(`ServiceAccount default in ${ns} of c1 and c2`, 60_000, async () => {
    for (const c of ['c1', 'c2']) if (!(await kubectl(c, 'get', 'serviceaccount', 'default', '-n', ns, '-o', 'name').catch(() => ''))) return false;
    return true;
  });
  return { c1Node: nodes.c1!, c2Node: nodes.c2! };
}

/** Teardowns still under way in the background; the root hooks await them before the RBAC audit. */
const pendingTeardowns: Promise<void>[] = [];

/**
 * Deletes a namespace made by connectNamespace in both clusters, in the order an operator
 * should: the source side first (its proxies go, and with them their delegates), the target
 * side once that is gone. The other order takes the Source's rights in c2 away while the
 * provider still serves the namespace's Targets, and c2 refuses it (403). Returns at once; the
 * rest runs in the background (see {@link settleTeardowns}).
 */
export async function disconnectNamespace(ns: string): Promise<void> {
  await kubectl('c1', 'delete', 'namespace', ns, '--wait=false', '--ignore-not-found');
  pendingTeardowns.push(
    kubectl('c1', 'wait', '--for=delete', `namespace/${ns}`, '--timeout=120s')
      .catch(() => undefined)
      .then(() => kubectl('c2', 'delete', 'namespace', ns, '--wait=false', '--ignore-not-found'))
      .then(
        () => undefined,
        () => undefined,
      ),
  );
}

/** Waits for the teardowns that {@link disconnectNamespace} left running. */
export async function settleTeardowns(): Promise<void> {
  await Promise.all(pendingTeardowns.splice(0));
}

/** Millicores of a cpu quantity as the API writes it (`12`, `500m`). */
export const milliCpu = (q: string | undefined): number => (q === undefined ? NaN : q.endsWith('m') ? Number(q.slice(0, -1)) : Number(q) * 1000);

/** Free cpu (millicores) of each real node of a cluster, from its ClusterSummary. */
export async function freeCpu(cluster: string): Promise<Map<string, number>> {
  const summary = await getJson(cluster, 'clustersummary', 'singleton');
  return new Map(summary.nodePools.flatMap((p: any) => p.nodes).map((n: any) => [n.name, milliCpu(n.free.cpu)]));
}

/**
 * Pins pods that are not ours (label `role=hog`) on every node of `cluster`, so that each keeps
 * `keepMilli` cpu free; the caller deletes them.
 */
export async function squeeze(cluster: string, ns: string, keepMilli: number): Promise<void> {
  const free = await freeCpu(cluster);
  for (const [node, milli] of free) {
    if (milli <= keepMilli) continue;
    await apply(
      cluster,
      `apiVersion: v1\nkind: Pod\nmetadata: {name: hog-${node}, namespace: ${ns}, labels: {role: hog}}\nspec:\n  nodeName: ${node}\n  containers: [{name: c, image: busybox, resources: {requests: {cpu: ${milli - keepMilli}m}}}]\n`,
    );
  }
  await waitFor(`every ${cluster} node down to ${keepMilli}m free`, 30_000, async () => [...(await freeCpu(cluster)).values()].every((m) => m <= keepMilli));
}

/** What a virtual node offers kube-scheduler (millicores). */
export async function offered(node: string): Promise<number> {
  return milliCpu((await getJson('c1', 'node', node)).status.allocatable.cpu);
}

/**
 * Waits until c1's virtual node `node` offers what `cluster`'s ClusterSummary says is free (c1
 * reads summaries on its probe period), and returns that figure in millicores. Waiting for a
 * fixed figure instead waits forever when pods of another namespace leave the target meanwhile.
 */
export async function followedFree(cluster: string, node: string): Promise<number> {
  let free = NaN;
  await waitFor(`c1's view of ${cluster} to follow its summary`, 45_000, async () => {
    free = milliCpu((await getJson(cluster, 'clustersummary', 'singleton')).free?.cpu);
    return (await offered(node)) === free;
  });
  return free;
}

/**
 * A Deployment of elected pods (label `app=<name>`), each asking for `cpu`, with no grace period;
 * `template` adds annotations and spec fields to its pod template.
 */
export function electedDeployment(name: string, ns: string, replicas: number, cpu: string, template: { annotations?: Record<string, string>; spec?: Record<string, unknown> } = {}): string {
  return JSON.stringify({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace: ns },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name }, annotations: { 'multicluster.admiralty.io/elect': '', ...template.annotations } },
        spec: { terminationGracePeriodSeconds: 0, containers: [{ name: 'c', image: 'busybox', resources: { requests: { cpu } } }], ...template.spec },
      },
    },
  });
}

/** The proxies (in c1) of an app that are not being deleted. */
export async function liveProxies(ns: string, app: string): Promise<any[]> {
  return (await getJson('c1', 'pods', '-n', ns, '-l', `app=${app}`)).items.filter((p: any) => !p.metadata.deletionTimestamp);
}

/** Waits until `count` proxies of the app run, and returns how many run on each virtual node (and prints it). */
export async function running(ns: string, app: string, count: number, timeoutMs = 90_000): Promise<Map<string, number>> {
  await waitFor(`${count} ${app} pods Running`, timeoutMs, async () => (await liveProxies(ns, app)).filter((p) => p.status.phase === 'Running').length === count);
  const where = new Map<string, number>();
  for (const p of await liveProxies(ns, app)) where.set(p.spec.nodeName, (where.get(p.spec.nodeName) ?? 0) + 1);
  console.log(`      ${app}: ${[...where].map(([n, k]) => `${k} on ${n}`).join(', ')}`);
  return where;
}

/** The Helm chart, and the pinned helm that tests use on it (built or found in the cache). */
export const CHART = join(REPO_ROOT, 'charts', 'admiralty');
export const helmPath = (): string => join(buildBinaries('helm'), 'helm');

/** `helm template` of the chart as release admiralty in namespace admiralty, CRDs included, with `--set` values. */
export async function helmTemplate(...sets: string[]): Promise<string> {
  const args = ['template', 'admiralty', CHART, '--namespace', 'admiralty', '--include-crds', ...sets.flatMap((s) => ['--set', s])];
  return (await execFileAsync(helmPath(), args, { maxBuffer: 64 << 20 })).stdout;
}

/** The objects {@link helmTemplate} renders. */
export async function chartObjects(...sets: string[]): Promise<any[]> {
  return parseAllDocuments(await helmTemplate(...sets))
    .map((d) => d.toJS())
    .filter(Boolean);
}

/**
 * Runs a shell script as root in a mount namespace of its own, where a tmpfs holds
 * `/var/run/secrets/kubernetes.io/serviceaccount` with the files of `$SA_SOURCE`, as the kubelet
 * mounts a pod's projected ServiceAccount volume; then execs the command. The host's mounts
 * never change. On a machine without /var/run/secrets the tmpfs covers /var/run's target
 * (/run) for this process only.
 */
const MOUNT_SERVICE_ACCOUNT = `set -eu
sa=/var/run/secrets/kubernetes.io/serviceaccount
top=/var/run/secrets; [ -d "$top" ] || top=$(readlink -f /var/run)
mount -t tmpfs -o mode=0755 serviceaccount "$top"
mkdir -p "$sa" && cp "$SA_SOURCE"/token "$SA_SOURCE"/ca.crt "$SA_SOURCE"/namespace "$sa"/
exec "$@"`;

/** What a pod's container gets from the kubelet to reach its cluster's apiserver. */
export interface PodCredentials {
  /** A scratch folder of the caller's: the ServiceAccount volume's files are written in it. */
  dir: string;
  /** A ServiceAccount token (TokenRequest). */
  token: string;
  /** The cluster's CA certificate (PEM). */
  ca: Buffer;
  /** The pod's namespace. */
  namespace: string;
  /** The apiserver's port on 127.0.0.1, which `KUBERNETES_SERVICE_HOST`/`_PORT` point at. */
  apiserverPort: number;
  /** The container's own environment. */
  env?: Record<string, string>;
}

/**
 * How to start `command args` as a container of a pod would run: its ServiceAccount's token, CA
 * and namespace in the kubelet's files (in a mount namespace of its own, see above) and
 * `KUBERNETES_SERVICE_HOST`/`_PORT`, PATH, the container's environment, and no other
 * credentials (no KUBECONFIG, no HOME). Returns the arguments of `spawn`/`execFile`.
 */
export function asPodContainer(creds: PodCredentials, command: string, args: readonly string[]): { file: string; args: string[]; env: NodeJS.ProcessEnv } {
  const sa = join(creds.dir, 'serviceaccount');
  mkdirSync(sa, { recursive: true });
  writeFileSync(join(sa, 'token'), creds.token);
  writeFileSync(join(sa, 'ca.crt'), creds.ca);
  writeFileSync(join(sa, 'namespace'), creds.namespace);
  return {
    file: 'unshare',
    args: ['--mount', '--propagation', 'private', '--', 'sh', '-c', MOUNT_SERVICE_ACCOUNT, 'sh', command, ...args],
    env: { PATH: process.env.PATH, ...creds.env, KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String(creds.apiserverPort), SA_SOURCE: sa },
  };
}

/**
 * The text of a Markdown file's section: from the heading line `heading` (e.g. `## Uninstall`) to
 * the next heading of the same or a higher level. Tests read the commands the docs give from
 * here, so that the docs cannot drift from what is tested.
 */
export function docSection(file: string, heading: string): string {
  const text = readFileSync(join(REPO_ROOT, file), 'utf8');
  const start = text.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`${file} has no section "${heading}"`);
  const level = heading.indexOf(' ');
  const next = new RegExp(`\\n#{1,${level}} `, 'g');
  next.lastIndex = start + heading.length + 1;
  const end = next.exec(text)?.index ?? text.length;
  return text.slice(start + 1, end);
}

/**
 * Every inline code span of a Markdown text that starts with one of `commands` (e.g. `kubectl`),
 * in order; a span wrapped over lines is read as Markdown renders it (one space).
 */
export function inlineCommands(markdown: string, ...commands: string[]): string[] {
  return [...markdown.matchAll(/(?<!`)`([^`]+)`(?!`)/g)].map((m) => m[1]!.replace(/\s+/g, ' ').trim()).filter((c) => commands.some((k) => c.startsWith(`${k} `)));
}

/** What a command run by {@link userShell} did. */
export interface ShellResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** The output of a command run by {@link userShell} that must succeed; throws with its stderr otherwise. */
export function stdoutOf(result: ShellResult, command: string): string {
  if (result.code !== 0) throw new Error(`${command}: exit ${result.code}: ${result.stderr}`);
  return result.stdout;
}

/**
 * A shell (bash, stopping at the first failure, pipes included) for commands copied from the
 * docs, run as a user would type them in `cwd` against a
 * sandbox of the test's own: `kubectl` (the sandbox's), `admiralty` (this repository's compiled
 * command, linked as npm links a package's bin) and, with `helm`, the pinned helm come first on
 * PATH; KUBECONFIG is the sandbox's (its cluster is the current context), HOME a scratch folder
 * (helm's and kubectl's caches). `signal` ends the commands still running when the tests stop.
 */
export function userShell(sb: Sandbox, cwd: string, opts: { helm?: boolean; signal?: AbortSignal } = {}): (command: string) => Promise<ShellResult> {
  const bin = join(cwd, '.bin');
  mkdirSync(bin, { recursive: true });
  shippedCli(); // fails early, with the reason, when dist/ is missing
  if (!existsSync(join(bin, 'admiralty'))) symlinkSync(join(REPO_ROOT, 'bin', 'admiralty.js'), join(bin, 'admiralty'));
  const path = [bin, dirname(sb.kubectlPath), ...(opts.helm ? [dirname(helmPath())] : []), process.env.PATH].join(delimiter);
  const env = { PATH: path, KUBECONFIG: sb.kubeconfigPath, HOME: join(cwd, '.home') };
  return (command) =>
    new Promise((res) => {
      execFile('bash', ['-c', `set -euo pipefail\n${command}`], { cwd, env, maxBuffer: 64 << 20, signal: opts.signal }, (err, stdout, stderr) =>
        res({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
}

/**
 * Waits for `deleting` (a documented command that deletes CRDs and waits for them to go) while,
 * as a user in another terminal would, running `nudge` (the docs' label of the CRDs, see
 * manifests/README.md, Uninstall) if `left` still names CRDs `afterMs` into it: now and then the
 * apiserver's CRD finalizer leaves one Terminating until its five-minute resync, and any change
 * to the CRD makes it look again. Says what was left and why, or nothing when nothing was.
 */
export async function nudgingStuckCrds(deleting: Promise<unknown>, left: () => Promise<any[]>, nudge: () => Promise<unknown>, afterMs = 30_000): Promise<string> {
  let done = false;
  const nudged = (async () => {
    for (const started = Date.now(); Date.now() - started < afterMs;) {
      await new Promise((r) => setTimeout(r, 1000));
      if (done) return '';
    }
    const crds = await left();
    if (!crds.length) return '';
    await nudge();
    const said = crds.map((crd) => {
      const terminating = (crd.status?.conditions ?? []).find((c: any) => c.type === 'Terminating');
      return `${crd.metadata.name} (${terminating ? `${terminating.reason}: ${terminating.message}` : 'no Terminating condition'})`;
    });
    return `CRDs still there after ${afterMs / 1000} s: ${said.join(', ')}; labelled as the docs say`;
  })();
  const [report] = await Promise.all([nudged, deleting.finally(() => (done = true))]);
  return report;
}

/** A counter of c1's provider replicas, summed by one label: `admiralty_webhook_connections_total` by protocol, say. */
export async function providerCounter(name: string, label: string): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (let replica = 0; replica < sandbox.providerReplicas('c1'); replica++) {
    const text = await (await fetch(`http://127.0.0.1:${sandbox.providerPorts('c1', replica).metrics}/metrics`)).text();
    for (const [value, n] of Object.entries(metricByLabel(text, name, label))) counts[value] = (counts[value] ?? 0) + n;
  }
  return counts;
}
