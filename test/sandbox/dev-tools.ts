import type { DevTools } from '../../provider/tools/dev-tools.js';
import { sandboxCli } from './sandbox-cli.js';
import { Sandbox } from './sandbox.js';

/**
 * The entry point `admiralty sandbox` and `admiralty demo` load from a clone at run time (see
 * `loadDevTools`): the provider's sources never import test/.
 */
export const devTools: DevTools = { sandboxCli, createSandbox: () => new Sandbox() };
