/**
 * The one command-line entry point. Subcommands:
 *   provider           run the provider (controllers, webhook, kubelet API)
 *   export-kubeconfig  print a Secret holding a kubeconfig for a service account (kubemcsa export)
 *   cleanup            strip our finalizers from every object, for uninstall
 *   sandbox            local multi-cluster sandbox (development and tests)
 *   demo               the one-command demo on the sandbox
 */
const [cmd, ...args] = process.argv.slice(2);
const io = { stdout: process.stdout, stderr: process.stderr, env: process.env };

async function main(): Promise<number> {
  switch (cmd) {
    case 'sandbox': {
      // The sandbox is a development tool; load it only when asked for.
      const { sandboxCli } = await import('../test/sandbox/sandbox-cli.js');
      return sandboxCli(args);
    }
    case 'provider': {
      const { runProvider } = await import('./main.js');
      return runProvider(args, process.env);
    }
    case 'export-kubeconfig': {
      const { exportKubeconfigCli } = await import('./tools/export-kubeconfig.js');
      return exportKubeconfigCli(args, io);
    }
    case 'cleanup': {
      const { cleanupCli } = await import('./tools/cleanup.js');
      return cleanupCli(args, io);
    }
    case 'demo': {
      const { demoCli } = await import('./tools/demo.js');
      return demoCli(args, io);
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
