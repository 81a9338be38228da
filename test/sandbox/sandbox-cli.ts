import { CLUSTER_COMPONENTS, Sandbox, type Component } from './sandbox.js';
import { TOPOLOGIES, type Topology } from './topology.js';

const USAGE = `usage: sandbox <command>
  up [--clusters N] [--topology star|mesh|hub] [--provider-replicas N] [--no-connect]
                                    start clusters c1 … cN (default 2) connected as the topology says:
                                    star (default) c1 sends to every cluster, mesh every cluster to every
                                    cluster, hub c2 … cN to c1; with N provider processes in c1 (default 1;
                                    a front stands in for their Service); idempotent.
                                    --autoscaler <cluster> (repeatable) also runs the cluster-autoscaler
                                    stand-in (a test fixture) there, on a sandbox already up too
                                    --gangs (or SANDBOX_GANGS=1) turns on Kubernetes' gang scheduling
                                    alpha in every cluster (Workload and PodGroup API, the gang plugin)
                                    --kueue (or SANDBOX_KUEUE=1) also runs Kueue in c1 (component kueue:
                                    its CRDs, RBAC and webhooks, its manager as its own ServiceAccount)
  down                              stop every process the sandbox started and remove its state
  status                            say what runs
  stop <cluster> <component>        stop one process, keeping its state (components: ${CLUSTER_COMPONENTS.join(', ')})
  start <cluster> <component>       start it again (proxy-scheduler runs in the sources only, kueue in c1 with --kueue)
  kubeconfig                        print the path of the kubeconfig (contexts c1, c2, …)`;

/** The `sandbox` subcommand. Returns the process exit code. */
export async function sandboxCli(args: string[]): Promise<number> {
  const sandbox = new Sandbox();
  const log = (line: string) => console.log(`sandbox: ${line}`);
  const [cmd, ...rest] = args;
  switch (cmd) {
    case 'up': {
      const i = rest.indexOf('--clusters');
      const clusters = i >= 0 ? Number(rest[i + 1]) : 2;
      if (!Number.isInteger(clusters) || clusters < 2 || clusters > 8) {
        console.error('sandbox: --clusters takes a whole number from 2 to 8');
        return 2;
      }
      const t = rest.indexOf('--topology');
      const topology = t >= 0 ? rest[t + 1] : 'star';
      if (!TOPOLOGIES.includes(topology as Topology)) {
        console.error(`sandbox: --topology takes one of ${TOPOLOGIES.join(', ')}`);
        return 2;
      }
      const r = rest.indexOf('--provider-replicas');
      const providerReplicas = r >= 0 ? Number(rest[r + 1]) : 1;
      if (!Number.isInteger(providerReplicas) || providerReplicas < 1 || providerReplicas > 5) {
        console.error('sandbox: --provider-replicas takes a whole number from 1 to 5');
        return 2;
      }
      const autoscalers: string[] = [];
      for (const [j, a] of rest.entries()) {
        if (a !== '--autoscaler') continue;
        const cluster = rest[j + 1];
        if (!cluster || cluster.startsWith('--')) {
          console.error('sandbox: --autoscaler takes a cluster name (c2)');
          return 2;
        }
        autoscalers.push(cluster);
      }
      const gangs = rest.includes('--gangs') || process.env.SANDBOX_GANGS === '1';
      const kueue = rest.includes('--kueue') || process.env.SANDBOX_KUEUE === '1';
      await sandbox.up({ clusters, topology: topology as Topology, providerReplicas, connect: !rest.includes('--no-connect'), autoscalers, gangs, kueue, log });
      return 0;
    }
    case 'down':
      await sandbox.down();
      log('down');
      return 0;
    case 'status':
      for (const line of sandbox.status()) console.log(line);
      return 0;
    case 'stop':
    case 'start': {
      const [cluster, component] = rest;
      if (!cluster || !CLUSTER_COMPONENTS.includes(component as Component)) {
        console.error(USAGE);
        return 2;
      }
      if (cmd === 'stop') log((await sandbox.stop(cluster, component as Component)) ? `stopped ${cluster} ${component}` : `${cluster} ${component} was not running`);
      else {
        await sandbox.start(cluster, component as Component);
        log(`started ${cluster} ${component}`);
      }
      return 0;
    }
    case 'kubeconfig':
      console.log(sandbox.kubeconfigPath);
      return 0;
    case '--help':
    case '-h':
    case 'help':
      console.log(USAGE);
      return 0;
    default:
      console.error(USAGE);
      return cmd ? 2 : 0;
  }
}
