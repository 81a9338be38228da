import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { packageRoot } from './package-root.js';

/** What the demo drives of the sandbox (test/sandbox/sandbox.ts's `Sandbox` has it). */
export interface DemoSandbox {
  isUp(): boolean;
  state(): { clusters: string[]; provider: boolean } | undefined;
  up(opts: { log?: (line: string) => void }): Promise<void>;
  connect(): Promise<void>;
  readonly kubectlPath: string;
  readonly kubeconfigPath: string;
}

/**
 * The development tools a clone holds and the published package does not: the sandbox's own
 * command line and a sandbox for the demo. test/sandbox/dev-tools.ts exports them as `devTools`,
 * checked against this type by the compiler.
 */
export interface DevTools {
  /** The `sandbox` command; resolves with its exit code. */
  sandboxCli(args: string[]): Promise<number>;
  /** The sandbox of `SANDBOX_DIR` (default: .sandbox of the clone). */
  createSandbox(): DemoSandbox;
}

/**
 * Where `root`'s development tools are: the TypeScript sources when this module runs from them
 * (through tsx, in tests), what tsc compiled into dist/ otherwise (bin/ runs the bundle, which
 * leaves them out).
 */
export function devToolsPath(root = packageRoot(), fromSources = import.meta.url.endsWith('.ts')): string {
  return fromSources ? join(root, 'test', 'sandbox', 'dev-tools.ts') : join(root, 'dist', 'test', 'sandbox', 'dev-tools.js');
}

/**
 * Loads the development tools of the clone at `root` at run time, from a path computed there,
 * so that no module of the provider imports test/ and the bundle holds none of it. The caller
 * says first that `root` is a clone (`isClone`); throws a clear error when the tools are not
 * compiled yet.
 */
export async function loadDevTools(root = packageRoot(), path = devToolsPath(root)): Promise<DevTools> {
  if (!existsSync(path)) throw new Error(`the sandbox is not built (${path} is missing): run npm run build first`);
  const module = (await import(pathToFileURL(path).href)) as { devTools?: DevTools };
  if (!module.devTools) throw new Error(`${path} exports no devTools`);
  return module.devTools;
}
