/**
 * The command-line dispatcher behind `bin/admiralty.js` (which runs its compiled form from
 * `dist/`). Each subcommand's module is loaded only when asked for, so `admiralty version` does
 * not pay for loading the provider.
 */
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { type CliIo, writeLine } from './tools/cli-io.js';
import { isClone, needsCloneMessage, packageVersion } from './tools/package-root.js';

/** Subcommands and what they do, in the order `--help` lists them. */
export const COMMANDS: ReadonlyArray<readonly [name: string, summary: string]> = [
  ['provider', 'run the provider (controllers, webhook, kubelet API)'],
  ['export-kubeconfig', 'print a Secret holding a kubeconfig for a service account (kubemcsa export)'],
  ['status', 'the federation of this cluster now: targets, readiness, free room, proxies, leader'],
  ['explain', 'why an elected pod is pending, or went where it went, as the extender judges it now'],
  ['kueue', 'Kueue for the targets: `kueue setup` makes a ResourceFlavor per target and their ClusterQueue'],
  ['cleanup', 'strip our finalizers from every object, for uninstall'],
  ['demo', 'the one-command demo on the local sandbox (needs a clone)'],
  ['sandbox', 'local multi-cluster sandbox of real control planes (needs a clone)'],
  ['bench', 'run a benchmark against the sandbox (needs a clone)'],
  ['version', 'print the version'],
];

/**
 * The top-level usage text, for the name the command was run as: `admiralty`, or `kubectl
 * admiralty` when kubectl runs the bundle as its plugin (bin/kubectl-admiralty.js).
 */
export function usage(program = 'admiralty'): string {
  const width = Math.max(...COMMANDS.map(([name]) => name.length));
  return [`usage: ${program} <command> [flags]`, '', ...COMMANDS.map(([name, summary]) => `  ${name.padEnd(width)}  ${summary}`), '', `Run '${program} <command> --help' for a command's flags.`].join(
    '\n',
  );
}

const isHelp = (arg: string | undefined) => arg === '--help' || arg === '-h' || arg === 'help';

/**
 * Runs one command line (without `node` and the script) and returns the exit code: 0 on
 * success, 2 on bad usage (unknown command, bad flags), 1 on failure. Writes through `io` except
 * where a subcommand writes to the process's own streams (provider logs, sandbox progress).
 */
export async function runCli(argv: string[], io: CliIo, program = 'admiralty'): Promise<number> {
  const [cmd, ...args] = argv;
  const env = io.env ?? {};
  switch (cmd) {
    case 'provider': {
      if (args.some(isHelp)) {
        // The provider's flag reference lives with its parser; main.js is not loaded for it.
        const { configUsage } = await import('./core/config.js');
        writeLine(io.stdout, configUsage());
        return 0;
      }
      const { runProvider } = await import('./main.js');
      return runProvider(args, env as NodeJS.ProcessEnv);
    }
    case 'export-kubeconfig': {
      const { exportKubeconfigCli } = await import('./tools/export-kubeconfig.js');
      return exportKubeconfigCli(args, io);
    }
    case 'status': {
      const { statusCli } = await import('./tools/status.js');
      // --watch ends on Ctrl-C or SIGTERM, after the print in progress, with exit code 0.
      const stop = new AbortController();
      const abort = () => stop.abort();
      process.once('SIGINT', abort).once('SIGTERM', abort);
      try {
        return await statusCli(args, io, stop.signal);
      } finally {
        process.off('SIGINT', abort).off('SIGTERM', abort);
      }
    }
    case 'explain': {
      const { explainCli } = await import('./tools/explain.js');
      return explainCli(args, io);
    }
    case 'kueue': {
      const { kueueCli } = await import('./tools/kueue.js');
      return kueueCli(args, io);
    }
    case 'cleanup': {
      const { cleanupCli } = await import('./tools/cleanup.js');
      return cleanupCli(args, io);
    }
    case 'demo': {
      if (!isClone() && !args.some(isHelp)) {
        writeLine(io.stderr, needsCloneMessage('demo'));
        return 1;
      }
      const { demoCli } = await import('./tools/demo.js');
      return demoCli(args, io);
    }
    case 'sandbox': {
      if (!isClone()) {
        writeLine(io.stderr, needsCloneMessage('sandbox'));
        return 1;
      }
      // A development tool of the clone, loaded from there only when asked for.
      const { loadDevTools } = await import('./tools/dev-tools.js');
      return (await loadDevTools()).sandboxCli(args);
    }
    case 'bench': {
      const { benchCli } = await import('./tools/bench-cli.js');
      return benchCli(args, io);
    }
    case 'version':
    case '--version':
      writeLine(io.stdout, packageVersion());
      return 0;
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      writeLine(io.stdout, usage(program));
      return 0;
    default:
      writeLine(io.stderr, `${program}: unknown command ${JSON.stringify(cmd)}`);
      writeLine(io.stderr, usage(program));
      return 2;
  }
}

/** Whether this module is the process's entry point (`node dist/provider/cli.js …`). */
function isEntryPoint(): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return pathToFileURL(realpathSync(entry)).href === import.meta.url;
  } catch {
    return false;
  }
}

/**
 * Runs one command line and ends the process with its exit code, once what it wrote is flushed.
 * Ending explicitly matters for `provider`: when its shutdown is done (controllers drained,
 * leadership released, listeners closed), sockets that outlive it (watches and keep-alive
 * connections of per-target clients) must not keep a stopped provider running past its
 * deadline, which a Deployment would only end with SIGKILL after terminationGracePeriodSeconds.
 * The entry points (`bin/admiralty.js`, and this module run directly) call it.
 */
export async function runAndExit(argv: string[], program = 'admiralty'): Promise<never> {
  let code: number;
  try {
    code = await runCli(argv, { stdout: process.stdout, stderr: process.stderr, env: process.env }, program);
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    code = 1;
  }
  await new Promise((r) => process.stdout.write('', r));
  await new Promise((r) => process.stderr.write('', r));
  process.exit(code);
}

if (isEntryPoint()) void runAndExit(process.argv.slice(2));
