/**
 * The one command-line entry point. Subcommands:
 *   provider           run the provider (controllers, webhook, kubelet API)
 *   export-kubeconfig  print a Secret holding a kubeconfig for a service account (kubemcsa export)
 *   cleanup            strip our finalizers from every object, for uninstall
 *   sandbox            local multi-cluster sandbox (development and tests)
 *   demo               the one-command demo on the sandbox
 */
const [cmd, ...args] = process.argv.slice(2);

async function main(): Promise<number> {
  switch (cmd) {
    case 'sandbox': {
      // The sandbox is a development tool; load it only when asked for.
      const { sandboxCli } = await import('../test/sandbox/sandbox-cli.js');
      return sandboxCli(args);
    }
    default:
      console.error('usage: admiralty <provider|export-kubeconfig|cleanup|sandbox|demo> [flags]');
      return cmd ? 2 : 0;
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exitCode = 1;
  },
);
