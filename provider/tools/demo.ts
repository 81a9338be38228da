import { execFile } from 'node:child_process';
import { parseArgs } from 'node:util';
import {
  ELECT_ANNOTATION,
  KEY_PREFIX,
  NAMESPACE_ENABLED_LABEL,
  NAMESPACE_ENABLED_VALUE,
  PARENT_CLUSTER_NAME_LABEL,
  VIRTUAL_KUBELET_PROVIDER_LABEL,
  VIRTUAL_KUBELET_PROVIDER_VALUE,
} from '../core/keys.js';
import { type CliIo, writeLine } from './cli-io.js';
import { loadDevTools, type DemoSandbox } from './dev-tools.js';
import { compareProxiesAndDelegates, describeTally, formatCounts, nginxDeploymentYaml, tallyPods, virtualNodesByTarget, type PodTally, type VirtualNodeInfo } from './demo-model.js';

const USAGE = `usage: admiralty demo [--replicas N] [--timeout-seconds S]

The one-command demo, on the local sandbox (clusters c1, the source, and c2, a target): starts
the sandbox if needed, runs the user guide's NGINX Deployment across both clusters, moves it to
c2 with a nodeSelector, and reads logs and runs a command through a proxy pod.

  --replicas N           replicas of the NGINX Deployment (default 10)
  --timeout-seconds S    longest wait of each step (default 180)`;

/** The source cluster and the namespace the sandbox has already connected (Targets c1 and c2). */
const SOURCE = 'c1';
const NAMESPACE = 'default';
const APP = 'nginx';
/** Region label of c2's nodes, which its virtual node carries too. */
const REGION_LABEL = 'topology.kubernetes.io/region';
const TARGET_REGION = 'eu';
/** The target the demo moves the pods to (the sandbox names Targets after its clusters). */
const MOVE_TO = 'c2';

const PROXY_SELECTOR = `app=${APP}`;
const DELEGATE_SELECTOR = `${KEY_PREFIX}app=${APP},${PARENT_CLUSTER_NAME_LABEL}=${SOURCE}`;
const VIRTUAL_NODE_SELECTOR = `${VIRTUAL_KUBELET_PROVIDER_LABEL}=${VIRTUAL_KUBELET_PROVIDER_VALUE}`;

/**
 * The `demo` command: a short story in seven steps against the sandbox, each step printing the
 * commands it runs and their output. Returns 0 when the story ends well, 1 with the failing
 * step's name on stderr otherwise, 2 on bad usage. Idempotent: a previous run's Deployment is
 * deleted first.
 */
export async function demoCli(args: string[], io: CliIo): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({ args, options: { replicas: { type: 'string' }, 'timeout-seconds': { type: 'string' }, help: { type: 'boolean', short: 'h' } } }));
  } catch (err) {
    writeLine(io.stderr, `demo: ${(err as Error).message}`);
    writeLine(io.stderr, USAGE);
    return 2;
  }
  if (values.help) {
    writeLine(io.stdout, USAGE);
    return 0;
  }
  const replicas = Number(values.replicas ?? 10);
  const timeoutSeconds = Number(values['timeout-seconds'] ?? 180);
  if (!Number.isInteger(replicas) || replicas < 1 || replicas > 200 || !(timeoutSeconds > 0)) {
    writeLine(io.stderr, 'demo: --replicas takes a whole number from 1 to 200 and --timeout-seconds a positive number');
    return 2;
  }
  // The sandbox is a development tool of the clone; load it only when the demo runs.
  const { createSandbox } = await loadDevTools();
  return new Demo(createSandbox(), io, { replicas, timeoutMs: timeoutSeconds * 1000 }).run();
}

class Demo {
  private virtualNodes = new Map<string, VirtualNodeInfo>();

  constructor(
    private readonly sandbox: DemoSandbox,
    private readonly io: CliIo,
    private readonly opts: { replicas: number; timeoutMs: number },
  ) {}

  async run(): Promise<number> {
    const steps: [string, () => Promise<void>][] = [
      ['Start the sandbox and connect its clusters', () => this.startSandbox()],
      ['The targets are nodes of the source', () => this.showVirtualNodes()],
      [`Prepare namespace ${NAMESPACE}`, () => this.prepareNamespace()],
      [`Run ${this.opts.replicas} NGINX pods across clusters`, () => this.runNginx()],
      [`Move every pod to ${MOVE_TO} with a nodeSelector`, () => this.moveToTarget()],
      ['Logs and exec through a proxy pod', () => this.logsAndExec()],
      ['What next', async () => this.whatNext()],
    ];
    for (const [i, [title, fn]] of steps.entries()) {
      this.say('');
      this.say(`== ${i + 1}. ${title} ==`);
      try {
        await fn();
      } catch (err) {
        writeLine(this.io.stderr, `demo: step ${i + 1} (${title}) failed: ${err instanceof Error ? err.message : String(err)}`);
        return 1;
      }
    }
    return 0;
  }

  // ---- the steps ----

  private async startSandbox(): Promise<void> {
    if (this.sandbox.isUp()) {
      this.say(`The sandbox is already up (clusters ${this.sandbox.state()!.clusters.join(', ')}).`);
    } else {
      this.say('Starting the sandbox: real kube-apiservers, controller managers and schedulers on loopback, kwok for the nodes, and our provider (the first build of the binaries takes minutes).');
      await this.sandbox.up({ log: (line) => this.say(`  ${line}`) });
    }
    if (!this.sandbox.state()?.provider) {
      throw new Error('the sandbox runs without the provider (it was started before provider/main.ts existed): run `npm run sandbox -- down`, then the demo again');
    }
    const targets = await this.kubectl(SOURCE, ['get', 'targets', '-n', NAMESPACE, '-o', 'name']);
    if (!targets.includes('target.multicluster.admiralty.io/c1') || !targets.includes(`target.multicluster.admiralty.io/${MOVE_TO}`)) {
      this.say('Connecting the clusters...');
      await this.sandbox.connect();
    }
    this.say("The clusters are connected as in Admiralty's user guide:");
    this.say(`  - in c2 (a target), the Source "c1" gives c1's service account the rights it needs there;`);
    this.say('  - `admiralty export-kubeconfig` turned that service account into a kubeconfig, stored in c1 as the Secret "c2";');
    this.say(`  - in c1 (the source), Target "c1" (self: true) and Target "c2" (kubeconfigSecret: c2) live in namespace ${NAMESPACE};`);
    this.say(`  - namespace ${NAMESPACE} of c1 is labelled ${NAMESPACE_ENABLED_LABEL}=${NAMESPACE_ENABLED_VALUE}.`);
    await this.kubectl(SOURCE, ['get', 'targets', '-n', NAMESPACE], { show: true });
    await this.kubectl('c2', ['get', 'sources', '-n', NAMESPACE], { show: true });
  }

  private async showVirtualNodes(): Promise<void> {
    await this.waitUntil('a Ready virtual node for each of Targets c1 and c2', async () => {
      this.virtualNodes = virtualNodesByTarget(await this.json(SOURCE, ['get', 'nodes', '-l', VIRTUAL_NODE_SELECTOR]), NAMESPACE);
      const seen = [...this.virtualNodes].map(([t, n]) => `${t}: ${n.name} ${n.ready ? 'Ready' : 'not Ready'}`).join('; ') || 'no virtual nodes';
      return { done: ['c1', MOVE_TO].every((t) => this.virtualNodes.get(t)?.ready), seen };
    });
    this.say("Each Target is a node of c1, carrying the labels its cluster's nodes share (see the region):");
    await this.kubectl(SOURCE, ['get', 'nodes', '-l', VIRTUAL_NODE_SELECTOR, '-L', REGION_LABEL], { show: true });
  }

  private async prepareNamespace(): Promise<void> {
    await this.kubectl(SOURCE, ['label', 'namespace', NAMESPACE, `${NAMESPACE_ENABLED_LABEL}=${NAMESPACE_ENABLED_VALUE}`, '--overwrite'], { show: true });
    const existing = await this.kubectl(SOURCE, ['get', 'deployment', APP, '-n', NAMESPACE, '-o', 'name', '--ignore-not-found']);
    if (existing.trim()) {
      this.say(`A Deployment "${APP}" is left from an earlier run; deleting it with its proxies and their delegates.`);
      await this.kubectl(SOURCE, ['delete', 'deployment', APP, '-n', NAMESPACE, '--wait=false'], { show: true });
    }
    await this.waitUntil(`no ${APP} proxy in c1 and no ${APP} delegate in any cluster`, async () => {
      const proxies = tallyPods(await this.json(SOURCE, ['get', 'pods', '-n', NAMESPACE, '-l', PROXY_SELECTOR]));
      const delegates = await this.delegates();
      const left = proxies.total + Object.values(delegates).reduce((n, t) => n + t.total, 0);
      return { done: left === 0, seen: `proxies: ${describeTally(proxies)}; ${this.describeDelegates(delegates)}` };
    });
    this.say(`Namespace ${NAMESPACE} is ready and holds no ${APP} pod.`);
  }

  private async runNginx(): Promise<void> {
    const { replicas } = this.opts;
    this.say(`The user guide's NGINX Deployment: ${replicas} replicas; the pod template has the annotation ${ELECT_ANNOTATION}: "" and asks for 100m CPU and 32Mi memory.`);
    await this.kubectl(SOURCE, ['apply', '-f', '-'], { show: true, stdin: nginxDeploymentYaml({ name: APP, namespace: NAMESPACE, replicas }) });
    await this.waitUntil(`${replicas} proxy pods Running in c1 and ${replicas} delegates Running in the targets`, async () => {
      const proxies = tallyPods(await this.json(SOURCE, ['get', 'pods', '-n', NAMESPACE, '-l', PROXY_SELECTOR]));
      const delegates = await this.delegates();
      const delegatesRunning = Object.values(delegates).reduce((n, t) => n + t.running, 0);
      return {
        done: proxies.running === replicas && proxies.total === replicas && delegatesRunning === replicas,
        seen: `proxies: ${describeTally(proxies)}; ${this.describeDelegates(delegates)}`,
      };
    });
    this.say('The webhook turned each pod into a proxy pod; the scheduler bound the proxies to virtual nodes:');
    await this.kubectl(SOURCE, ['get', 'pods', '-n', NAMESPACE, '-l', PROXY_SELECTOR, '-o', 'wide'], { show: true });
    this.say("For each proxy, the provider created a delegate pod in the cluster of its virtual node, where that cluster's scheduler placed it on a real node:");
    await this.showDelegates();
    await this.summarize();
  }

  private async moveToTarget(): Promise<void> {
    const { replicas } = this.opts;
    const node = this.virtualNodes.get(MOVE_TO)!;
    this.say(`c2's nodes are in region ${TARGET_REGION}, and so is its virtual node ${node.name}. A nodeSelector on the pod template moves the Deployment there:`);
    const patch = JSON.stringify({ spec: { template: { spec: { nodeSelector: { [REGION_LABEL]: TARGET_REGION } } } } });
    await this.kubectl(SOURCE, ['patch', 'deployment', APP, '-n', NAMESPACE, '--type', 'merge', '-p', patch], { show: true });
    const timeout = `--timeout=${Math.round(this.opts.timeoutMs / 1000)}s`;
    await this.kubectl(SOURCE, ['rollout', 'status', `deployment/${APP}`, '-n', NAMESPACE, timeout], { show: true, timeoutMs: this.opts.timeoutMs + 10_000 });
    await this.waitUntil(`all ${replicas} proxies Running on ${node.name}, all delegates Running in ${MOVE_TO}, the old ones gone`, async () => {
      const proxies = tallyPods(await this.json(SOURCE, ['get', 'pods', '-n', NAMESPACE, '-l', PROXY_SELECTOR]));
      const delegates = await this.delegates();
      const elsewhere = Object.entries(delegates)
        .filter(([c]) => c !== MOVE_TO)
        .reduce((n, [, t]) => n + t.total, 0);
      const there = delegates[MOVE_TO];
      return {
        done: proxies.total === replicas && proxies.running === replicas && proxies.byNode[node.name] === replicas && elsewhere === 0 && there?.total === replicas && there.running === replicas,
        seen: `proxies: ${describeTally(proxies)} (per node: ${formatCounts(proxies.byNode)}); ${this.describeDelegates(delegates)}`,
      };
    });
    this.say(`Every proxy is now on ${node.name}:`);
    await this.kubectl(SOURCE, ['get', 'pods', '-n', NAMESPACE, '-l', PROXY_SELECTOR, '-o', 'wide'], { show: true });
    this.say(`and every delegate runs in ${MOVE_TO}:`);
    await this.showDelegates();
    await this.summarize();
  }

  private async logsAndExec(): Promise<void> {
    const list = await this.json(SOURCE, ['get', 'pods', '-n', NAMESPACE, '-l', PROXY_SELECTOR]);
    const proxy = (list.items as { metadata: { name: string; deletionTimestamp?: string }; status?: { phase?: string } }[])
      .filter((p) => !p.metadata.deletionTimestamp && p.status?.phase === 'Running')
      .map((p) => p.metadata.name)
      .sort()[0];
    if (!proxy) throw new Error(`no Running ${APP} proxy pod found in c1`);
    this.say(`kubectl talks to c1 only; c1's API server asks the provider (the kubelet of the virtual node), which reads from the delegate in ${MOVE_TO}.`);
    await this.kubectl(SOURCE, ['logs', proxy, '-n', NAMESPACE], { show: true });
    // In the sandbox, kwok runs exec commands on this machine and sets SANDBOX_CLUSTER to the cluster's name.
    await this.kubectl(SOURCE, ['exec', proxy, '-n', NAMESPACE, '--', 'sh', '-c', 'echo hello from $(hostname) in ${SANDBOX_CLUSTER:-the target}'], { show: true });
  }

  private whatNext(): void {
    const k = `${this.sandbox.kubectlPath} --kubeconfig ${this.sandbox.kubeconfigPath}`;
    const node = this.virtualNodes.get(MOVE_TO)?.name ?? 'admiralty-namespace-default-c2';
    this.say("The sandbox keeps running. Things to try (contexts c1 and c2 of the sandbox's kubeconfig):");
    this.say(`  alias kubectl='${k}'`);
    this.say(`  kubectl --context c1 get targets -n ${NAMESPACE}                    # the Targets and their status`);
    this.say(`  kubectl --context c1 describe node ${node}      # labels, capacity and conditions of c2 as a node`);
    this.say(`  kubectl --context c1 logs -f <proxy pod>                           # follow a delegate's log through its proxy`);
    this.say(`  kubectl --context c1 scale deployment ${APP} --replicas=20            # more proxies, more delegates`);
    this.say(`  kubectl --context c1 patch deployment ${APP} --type json -p '[{"op":"remove","path":"/spec/template/spec/nodeSelector"}]'   # spread again`);
    this.say(`  kubectl --context c2 get pods -l ${PARENT_CLUSTER_NAME_LABEL}=${SOURCE} -o wide   # c1's delegates in c2`);
    this.say('Clean up the demo (the proxies go, and with them their delegates):');
    this.say(`  kubectl --context c1 delete deployment ${APP} -n ${NAMESPACE}`);
    this.say('Stop the sandbox:');
    this.say('  npm run sandbox -- down');
  }

  // ---- helpers ----

  /** Delegates of the demo's proxies in every target cluster (Target names are the sandbox's cluster names). */
  private async delegates(): Promise<Record<string, PodTally>> {
    const out: Record<string, PodTally> = {};
    for (const target of [...this.virtualNodes.keys()].sort()) {
      out[target] = tallyPods(await this.json(target, ['get', 'pods', '-n', NAMESPACE, '-l', DELEGATE_SELECTOR]));
    }
    return out;
  }

  private describeDelegates(delegates: Record<string, PodTally>): string {
    const parts = Object.entries(delegates).map(([c, t]) => `${c} ${describeTally(t)}`);
    return `delegates: ${parts.join('; ') || 'none'}`;
  }

  private async showDelegates(): Promise<void> {
    for (const target of [...this.virtualNodes.keys()].sort()) {
      await this.kubectl(target, ['get', 'pods', '-n', NAMESPACE, '-l', `${KEY_PREFIX}app=${APP}`, '-o', 'wide'], { show: true });
    }
  }

  /** Counts per virtual node and per cluster, and whether they agree. */
  private async summarize(): Promise<void> {
    const proxies = tallyPods(await this.json(SOURCE, ['get', 'pods', '-n', NAMESPACE, '-l', PROXY_SELECTOR]));
    const delegates = await this.delegates();
    this.say('In numbers:');
    this.say(`  proxies per virtual node: ${formatCounts(proxies.byNode)}`);
    for (const [cluster, t] of Object.entries(delegates)) this.say(`  delegates in ${cluster} per node: ${formatCounts(t.byNode)}`);
    const running = Object.fromEntries(Object.entries(delegates).map(([c, t]) => [c, t.running]));
    const { lines, consistent } = compareProxiesAndDelegates(proxies.byNode, running, this.virtualNodes);
    for (const line of lines) this.say(`  ${line}`);
    this.say(consistent ? '  Each proxy has its delegate in the cluster its virtual node stands for.' : '  (proxies and delegates do not match yet; the provider is still catching up)');
  }

  /** Polls `probe` every second until it says done; throws with the last observation after the step's timeout. */
  private async waitUntil(what: string, probe: () => Promise<{ done: boolean; seen: string }>): Promise<void> {
    const started = Date.now();
    const deadline = started + this.opts.timeoutMs;
    this.say(`Waiting for ${what}...`);
    let seen: string;
    for (;;) {
      try {
        const r = await probe();
        seen = r.seen;
        if (r.done) {
          this.say(`  done in ${((Date.now() - started) / 1000).toFixed(1)} s (${seen})`);
          return;
        }
      } catch (err) {
        seen = `error: ${err instanceof Error ? err.message : String(err)}`;
      }
      if (Date.now() > deadline) throw new Error(`timed out after ${Math.round(this.opts.timeoutMs / 1000)} s waiting for ${what}; last seen: ${seen}`);
      await new Promise((r) => setTimeout(r, 1000));
    }
  }

  private async json(cluster: string, args: string[]): Promise<any> {
    return JSON.parse(await this.kubectl(cluster, [...args, '-o', 'json']));
  }

  /** Runs the sandbox's kubectl; with `show`, prints the command and its output as a user would see them. */
  private kubectl(cluster: string, args: string[], opts: { show?: boolean; stdin?: string; timeoutMs?: number } = {}): Promise<string> {
    if (opts.show) this.say(`$ kubectl --context ${cluster} ${args.map(shellQuote).join(' ')}${opts.stdin ? ' <<EOF' : ''}`);
    if (opts.show && opts.stdin) {
      for (const line of opts.stdin.trimEnd().split('\n')) this.say(`  ${line}`);
      this.say('  EOF');
    }
    return new Promise((resolve, reject) => {
      const child = execFile(
        this.sandbox.kubectlPath,
        ['--kubeconfig', this.sandbox.kubeconfigPath, '--context', cluster, ...args],
        { maxBuffer: 64 << 20, timeout: opts.timeoutMs ?? 60_000 },
        (err, stdout, stderr) => {
          if (err) {
            reject(new Error(`kubectl --context ${cluster} ${args.join(' ')}: ${(stderr || err.message).trim()}`));
            return;
          }
          if (opts.show) {
            for (const line of stdout.trimEnd().split('\n')) this.say(`    ${line}`);
          }
          resolve(stdout);
        },
      );
      child.stdin!.end(opts.stdin ?? '');
    });
  }

  private say(line: string): void {
    writeLine(this.io.stdout, line);
  }
}

/** Quotes an argument for display the way a user would type it in a POSIX shell. */
function shellQuote(arg: string): string {
  return /^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}
