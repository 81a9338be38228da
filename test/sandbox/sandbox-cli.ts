import { CLUSTER_COMPONENTS, Sandbox, type Component } from './sandbox.js';

const USAGE = `usage: sandbox <command>
  up [--targets N] [--provider-replicas N] [--no-connect]
                                    start clusters c1, c2 (and c3… with --targets), with N provider
                                    processes in c1 (default 1; a front stands in for their Service); idempotent
  down                              stop every process the sandbox started and remove its state
  status                            say what runs
  stop <cluster> <component>        stop one process, keeping its state (components: ${CLUSTER_COMPONENTS.join(', ')})
  start <cluster> <component>       start it again (proxy-scheduler runs in c1 only)
  kubeconfig                        print the path of the kubeconfig (contexts c1, c2, …)`;

/** The `sandbox` subcommand. Returns the process exit code. */
export async function sandboxCli(args: string[]): Promise<number> {
  const sandbox = new Sandbox();
  const log = (line: string) => console.log(`sandbox: ${line}`);
  const [cmd, ...rest] = args;
  switch (cmd) {
    case 'up': {
      const i = rest.indexOf('--targets');
      const targets = i >= 0 ? Number(rest[i + 1]) : 0;
      if (!Number.isInteger(targets) || targets < 0 || targets > 6) {
        console.error('sandbox: --targets takes a whole number from 0 to 6');
        return 2;
      }
      const r = rest.indexOf('--provider-replicas');
      const providerReplicas = r >= 0 ? Number(rest[r + 1]) : 1;
      if (!Number.isInteger(providerReplicas) || providerReplicas < 1 || providerReplicas > 5) {
        console.error('sandbox: --provider-replicas takes a whole number from 1 to 5');
        return 2;
      }
      await sandbox.up({ targets, providerReplicas, connect: !rest.includes('--no-connect'), log });
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
